//! What the proxy does to each request: [`Fault`], the [`Exchange`] it is chosen for, and the
//! [`Script`] that chooses.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// What the proxy does to one request and its response.
///
/// Byte counts start at the first byte of *this* request (its head included) or of *its*
/// response (the status line included), not at the start of the connection, so a fault means
/// the same thing on a fresh connection and on a pooled one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward the request and relay the response unchanged.
    Pass,
    /// Forward at most this many bytes of the request, then reset both connections (RST, via
    /// `SO_LINGER` 0). A request shorter than that is forwarded whole and the connections are
    /// reset right after it: the upstream may then have acted on it.
    ResetAfterRequestBytes(u64),
    /// Forward the whole request, relay this many bytes of the response, then reset the
    /// client's connection (RST). With 0 the reset comes when the first response byte
    /// arrives from the upstream, so the upstream *has* acted on the request and the client
    /// cannot know: the ambiguous outcome.
    ResetAfterResponseBytes(u64),
    /// Never forward, never answer: read and discard what the client sends until it gives
    /// up and closes.
    Stall,
    /// Forward the request; relay the response one byte per interval (for the rest of the
    /// connection, until another request on it is chosen a new fault).
    Drip(Duration),
    /// Forward the whole request, wait for the upstream's first response byte, then close the
    /// client's connection cleanly (FIN) without sending anything. The upstream has acted.
    CloseBeforeHeaders,
    /// Do not forward: read the whole request, answer this status (`Connection: close`,
    /// a short text body, and `Retry-After: <secs>` when set), then close.
    Status {
        /// The status code, e.g. 500 or 503.
        code: u16,
        /// Seconds for a `Retry-After` header.
        retry_after: Option<u64>,
    },
    /// Forward the request; relay the response head unchanged (its `Content-Length` too),
    /// then this many body bytes, then close the client's connection cleanly (FIN).
    TruncateBody(u64),
}

impl Fault {
    /// `503 Service Unavailable` with `Retry-After: secs`.
    pub fn unavailable(retry_after_secs: u64) -> Self {
        Fault::Status {
            code: 503,
            retry_after: Some(retry_after_secs),
        }
    }

    /// `500 Internal Server Error` without `Retry-After`.
    pub fn internal_error() -> Self {
        Fault::Status {
            code: 500,
            retry_after: None,
        }
    }

    /// Whether this is [`Fault::Pass`].
    pub fn is_pass(&self) -> bool {
        matches!(self, Fault::Pass)
    }
}

/// One request as the proxy saw it arrive, given to the [`Script`] to choose a [`Fault`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exchange {
    /// 0-based number of the request among all the proxy has seen.
    pub request: u64,
    /// 0-based number of the accepted connection it came on.
    pub connection: u64,
    /// 0-based number of the request on its connection (0: the connection's first).
    pub on_connection: u64,
    /// The request method (`GET`, `HEAD`, `PUT`, ...).
    pub method: String,
    /// The request target as sent (path and query).
    pub target: String,
    /// Its `Range` header, if any.
    pub range: Option<String>,
}

/// An [`Exchange`] and the fault the script chose for it (the proxy's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The request.
    pub exchange: Exchange,
    /// What was done to it.
    pub fault: Fault,
}

type Chooser = Box<dyn FnMut(&Exchange) -> Fault + Send>;

/// Chooses a [`Fault`] for every request, in the order requests arrive.
///
/// ```
/// use guideloom_faultproxy::{Fault, Script};
///
/// // The first two requests get a 503, then everything passes.
/// let burst = Script::requests([Fault::unavailable(0); 2]);
/// // The first request of connections 0 and 1 is reset; other requests pass.
/// let resets = Script::connections([Fault::ResetAfterResponseBytes(10); 2]);
/// // Every PUT under log/ is cut after the upstream stored it.
/// let ambiguous = Script::matching(
///     |e| e.method == "PUT" && e.target.contains("/log/"),
///     [Fault::ResetAfterResponseBytes(0)],
/// );
/// # let _ = (burst, resets, ambiguous);
/// ```
pub struct Script {
    choose: Chooser,
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Script").finish_non_exhaustive()
    }
}

impl Default for Script {
    fn default() -> Self {
        Script::pass()
    }
}

impl Script {
    /// Every request passes.
    pub fn pass() -> Self {
        Script::from_fn(|_| Fault::Pass)
    }

    /// Every request gets `fault`.
    pub fn always(fault: Fault) -> Self {
        Script::from_fn(move |_| fault)
    }

    /// Request *n* (in arrival order) gets the *n*-th fault; after the last, all pass.
    pub fn requests(faults: impl IntoIterator<Item = Fault>) -> Self {
        Script::matching(|_| true, faults)
    }

    /// The first request of accepted connection *n* gets the *n*-th fault (later requests on
    /// a connection pass); after the last, all pass.
    pub fn connections(faults: impl IntoIterator<Item = Fault>) -> Self {
        Script::matching(|e| e.on_connection == 0, faults)
    }

    /// Requests for which `select` holds take the faults in order; all others, and all after
    /// the last fault, pass.
    pub fn matching(
        select: impl Fn(&Exchange) -> bool + Send + 'static,
        faults: impl IntoIterator<Item = Fault>,
    ) -> Self {
        let mut queue: VecDeque<Fault> = faults.into_iter().collect();
        Script::from_fn(move |e| {
            if select(e) {
                queue.pop_front().unwrap_or(Fault::Pass)
            } else {
                Fault::Pass
            }
        })
    }

    /// Any rule: called once per request, in arrival order.
    pub fn from_fn(choose: impl FnMut(&Exchange) -> Fault + Send + 'static) -> Self {
        Script {
            choose: Box::new(choose),
        }
    }

    pub(crate) fn choose(&mut self, exchange: &Exchange) -> Fault {
        (self.choose)(exchange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(request: u64, connection: u64, on_connection: u64, method: &str) -> Exchange {
        Exchange {
            request,
            connection,
            on_connection,
            method: method.into(),
            target: format!("/o/{request}"),
            range: None,
        }
    }

    #[test]
    fn queues_run_out_into_pass() {
        let mut s = Script::requests([Fault::Stall, Fault::internal_error()]);
        assert_eq!(s.choose(&ex(0, 0, 0, "GET")), Fault::Stall);
        assert_eq!(s.choose(&ex(1, 0, 1, "GET")), Fault::internal_error());
        assert_eq!(s.choose(&ex(2, 1, 0, "GET")), Fault::Pass);
    }

    #[test]
    fn connection_scripts_hit_only_first_requests() {
        let mut s = Script::connections([Fault::CloseBeforeHeaders]);
        assert_eq!(s.choose(&ex(0, 0, 1, "GET")), Fault::Pass);
        assert_eq!(s.choose(&ex(1, 1, 0, "GET")), Fault::CloseBeforeHeaders);
        assert_eq!(s.choose(&ex(2, 2, 0, "GET")), Fault::Pass);
    }

    #[test]
    fn matching_skips_other_requests() {
        let mut s = Script::matching(|e| e.method == "PUT", [Fault::TruncateBody(3)]);
        assert_eq!(s.choose(&ex(0, 0, 0, "GET")), Fault::Pass);
        assert_eq!(s.choose(&ex(1, 0, 1, "PUT")), Fault::TruncateBody(3));
        assert_eq!(s.choose(&ex(2, 0, 2, "PUT")), Fault::Pass);
        assert!(Script::always(Fault::Stall).choose(&ex(9, 9, 9, "X")) == Fault::Stall);
    }
}
