//! One request with bounded retries under a deadline: [`Inner::send`].
//!
//! Every attempt is bounded by the request timeout, cut to what is left of the operation's
//! deadline ([`Budget`]); no retry starts, and no backoff runs, past the deadline. The last
//! failure decides the error: a timeout (of the attempt, the connect or the deadline) is
//! [`Error::Timeout`] ([`TimeoutError`]: which bound, the attempt count), a body longer than asked is
//! [`Error::LongRead`], anything else [`Error::Remote`].

use std::error::Error as StdError;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use tracing::Instrument;

use super::Inner;
#[cfg(doc)]
use crate::error::TimeoutError;
use crate::error::{BoxError, Error, Result, TimeoutKind};
use crate::stats::RequestStats;

/// A response whose status is final (not retried) and whose body was read when wanted.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Bytes of an unwanted body read only to keep the connection (counted, not returned).
    pub(crate) drained: u64,
}

/// Unwanted bodies up to this size (error pages) are read and discarded so the connection
/// can be reused: 8 KiB.
const DRAIN_LIMIT: u64 = 8 * 1024;

/// What to read of a response body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    /// Most bytes accepted in a 206 body.
    pub(crate) partial: usize,
    /// Read a 200 body when its Content-Length is at most this (tail reads of small objects).
    pub(crate) full: Option<u64>,
    /// Also read a 200 body without a Content-Length (chunked), cut at `full` bytes: a
    /// longer one is [`Error::LongRead`]. Generated pages (directory listings) need it.
    pub(crate) unsized_full: bool,
    /// First byte asked for (for [`Error::LongRead`]).
    pub(crate) offset: u64,
}

/// The time budget of one read: a deadline shared by all its requests and attempts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// `None`: no deadline (the operation timeout does not fit an `Instant`).
    deadline: Option<Instant>,
    limit: Duration,
}

impl Budget {
    /// A budget of `limit` from now.
    pub(crate) fn starting_now(limit: Duration) -> Self {
        Budget {
            deadline: Instant::now().checked_add(limit),
            limit,
        }
    }

    /// Time left (`None`: unbounded).
    fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// What kind of failure an attempt had.
#[derive(Debug, Clone, Copy)]
enum Failure {
    /// A status, transport or protocol failure.
    Other,
    /// A timeout.
    TimedOut(TimeoutKind),
    /// A body longer than asked (`None`: it went on past the limit).
    TooLong(Option<u64>),
}

/// Why one attempt failed.
struct AttemptError {
    message: String,
    retryable: bool,
    source: Option<BoxError>,
    failure: Failure,
}

impl AttemptError {
    fn other(message: String, retryable: bool, source: Option<BoxError>) -> Self {
        AttemptError {
            message,
            retryable,
            source,
            failure: Failure::Other,
        }
    }
}

fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let msg = c.to_string();
        if !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        cur = c.source();
    }
    s
}

/// Whether a rustls error is anywhere in the chain (tokio-rustls wraps it in an `io::Error`,
/// whose `source()` skips it, so look inside those too).
fn is_tls_error(e: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && is_tls_error(inner)
        {
            return true;
        }
        cur = c.source();
    }
    false
}

/// Whether an `io::Error` of kind `TimedOut` is anywhere in the chain (hyper-util's connect
/// timeout is one).
fn is_timed_out(e: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cur = c.source();
    }
    false
}

fn is_retryable_status(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

/// `GET bytes=0-99`, `HEAD`.
fn operation(method: &Method, range: Option<&str>) -> String {
    match range {
        Some(r) => format!("{method} {r}"),
        None => method.to_string(),
    }
}

/// What one request needs besides the URI.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) reader_stats: &'a RequestStats,
    pub(crate) location: &'a str,
    pub(crate) range: Option<&'a str>,
    /// An `Accept` header for this request (directory listings ask for JSON).
    pub(crate) accept: Option<&'static str>,
    /// An `If-Match` header: the entity tag the reader pinned (see `pin.rs`).
    pub(crate) if_match: Option<&'a str>,
    pub(crate) limits: BodyLimits,
    pub(crate) budget: &'a Budget,
}

impl Inner {
    /// Sends one request with retries. Returns the first response whose status is not
    /// retryable (any status: callers map them), or the error after the last attempt (or
    /// when the budget runs out).
    pub(crate) async fn send(&self, method: Method, uri: &Uri, call: Call<'_>) -> Result<Fetched> {
        let Call {
            reader_stats,
            location,
            range,
            accept,
            if_match,
            limits,
            budget,
        } = call;
        let policy = self.options.retry;
        let max_attempts = policy.max_attempts.max(1);
        let request_timeout = self.options.request_timeout;
        let started = Instant::now();
        let mut attempt: u32 = 0;
        let timeout_error = |limit: TimeoutKind, attempts: u32, source: Option<Error>| {
            Error::timeout(
                location,
                operation(&method, range),
                limit,
                Some(attempts),
                started.elapsed(),
                source,
            )
        };
        loop {
            let remaining = budget.remaining();
            if remaining == Some(Duration::ZERO) {
                // An earlier request of the same read used up the budget.
                return Err(timeout_error(
                    TimeoutKind::Deadline(budget.limit),
                    attempt,
                    None,
                ));
            }
            attempt += 1;
            let span = tracing::debug_span!(
                "guideloom_http",
                method = %method,
                url = %location,
                range = range.unwrap_or(""),
                attempt,
                status = tracing::field::Empty,
                latency_ms = tracing::field::Empty,
                bytes = tracing::field::Empty,
            );
            let req = self.build_request(&method, uri, range, accept, if_match)?;
            self.stats.add_request();
            reader_stats.add_request();
            if attempt > 1 {
                self.stats.add_retry();
                reader_stats.add_retry();
            }
            let attempt_started = Instant::now();
            let (timeout, cut_by_deadline) = match remaining {
                Some(left) if left < request_timeout => (left, true),
                _ => (request_timeout, false),
            };
            let outcome = tokio::time::timeout(timeout, self.attempt(req, limits))
                .instrument(span.clone())
                .await
                .unwrap_or_else(|_| {
                    let limit = if cut_by_deadline {
                        TimeoutKind::Deadline(budget.limit)
                    } else {
                        TimeoutKind::Request(request_timeout)
                    };
                    Err(AttemptError {
                        message: format!("{limit}"),
                        retryable: true,
                        source: None,
                        failure: Failure::TimedOut(limit),
                    })
                });
            let latency_ms =
                u64::try_from(attempt_started.elapsed().as_millis()).unwrap_or(u64::MAX);
            span.record("latency_ms", latency_ms);
            let (failed, wait_hint) = match outcome {
                Ok(f) => {
                    span.record("status", f.status.as_u16());
                    span.record("bytes", f.body.len());
                    span.in_scope(|| {
                        tracing::debug!(status = f.status.as_u16(), latency_ms, "response")
                    });
                    let n = f.body.len() as u64 + f.drained;
                    self.stats.add_bytes_received(n);
                    reader_stats.add_bytes_received(n);
                    if !is_retryable_status(f.status) {
                        return Ok(f);
                    }
                    let hint = retry_after(&f.headers);
                    (
                        AttemptError::other(format!("HTTP {}", f.status), true, None),
                        hint,
                    )
                }
                Err(e) => {
                    span.in_scope(
                        || tracing::debug!(error = %e.message, latency_ms, "request failed"),
                    );
                    (e, None)
                }
            };
            if let Failure::TooLong(got) = failed.failure {
                return Err(Error::LongRead {
                    location: location.to_owned(),
                    offset: limits.offset,
                    requested: limits.partial as u64,
                    got,
                });
            }
            let plural = if attempt == 1 { "" } else { "s" };
            let final_error = |failed: AttemptError| match failed.failure {
                Failure::TimedOut(limit) => timeout_error(limit, attempt, None),
                _ => Error::Remote {
                    location: location.to_owned(),
                    message: format!(
                        "{method} {} after {attempt} attempt{plural}",
                        failed.message
                    ),
                    retryable: failed.retryable,
                    source: failed.source,
                },
            };
            if !failed.retryable || attempt >= max_attempts {
                return Err(final_error(failed));
            }
            let wait =
                wait_hint.map_or_else(|| policy.backoff(attempt), |w| w.min(policy.max_backoff));
            if budget.remaining().is_some_and(|left| left <= wait) {
                // No time for another attempt: the deadline ends the retries.
                let last = match failed.failure {
                    Failure::TimedOut(_) => None,
                    _ => Some(final_error(failed)),
                };
                return Err(timeout_error(
                    TimeoutKind::Deadline(budget.limit),
                    attempt,
                    last,
                ));
            }
            tracing::debug!(attempt, ?wait, error = %failed.message, url = %location, "retrying");
            tokio::time::sleep(wait).await;
        }
    }

    fn build_request(
        &self,
        method: &Method,
        uri: &Uri,
        range: Option<&str>,
        accept: Option<&'static str>,
        if_match: Option<&str>,
    ) -> Result<Request<Empty<Bytes>>> {
        let mut b = Request::builder().method(method.clone()).uri(uri.clone());
        if let Some(h) = b.headers_mut() {
            h.insert(
                header::USER_AGENT,
                header::HeaderValue::from_static(concat!(
                    "guideloom-io/",
                    env!("CARGO_PKG_VERSION")
                )),
            );
            if let Some(auth) = &self.base.basic_auth {
                h.insert(header::AUTHORIZATION, auth.clone());
            }
            for (k, v) in &self.options.headers {
                h.insert(k.clone(), v.clone());
            }
            if let Some(a) = accept {
                h.insert(header::ACCEPT, header::HeaderValue::from_static(a));
            }
            if let Some(r) = range {
                let v = header::HeaderValue::try_from(r).map_err(|_| Error::InvalidArgument {
                    message: format!("invalid Range header {r:?}"),
                })?;
                h.insert(header::RANGE, v);
            }
            if let Some(tag) = if_match {
                let v = header::HeaderValue::try_from(tag).map_err(|_| Error::InvalidArgument {
                    message: format!("invalid If-Match header {tag:?}"),
                })?;
                h.insert(header::IF_MATCH, v);
            }
        }
        b.body(Empty::new()).map_err(|e| Error::InvalidArgument {
            message: format!("cannot build a request: {e}"),
        })
    }

    async fn attempt(
        &self,
        req: Request<Empty<Bytes>>,
        limits: BodyLimits,
    ) -> std::result::Result<Fetched, AttemptError> {
        let resp = self.client.request(req).await.map_err(|e| {
            // A TLS failure (bad certificate, not a TLS server) will not heal by retrying.
            let tls = is_tls_error(&e);
            let failure = if e.is_connect() && is_timed_out(&e) {
                Failure::TimedOut(TimeoutKind::Connect(self.options.connect_timeout))
            } else {
                Failure::Other
            };
            AttemptError {
                message: format!(
                    "request failed{}: {}",
                    if tls { " (TLS)" } else { "" },
                    chain(&e)
                ),
                retryable: !tls,
                source: Some(Box::new(e)),
                failure,
            }
        })?;
        let (parts, body) = resp.into_parts();
        let declared = content_length(&parts.headers);
        let limit = match parts.status {
            StatusCode::PARTIAL_CONTENT => Some(limits.partial),
            StatusCode::OK => match (limits.full, declared) {
                (Some(max), Some(len)) if len <= max => usize::try_from(len).ok(),
                (Some(max), None) if limits.unsized_full => usize::try_from(max).ok(),
                _ => None,
            },
            _ => None,
        };
        let mut drained = 0;
        let body = match limit {
            None => {
                // Not wanted. A small body (an error page) is drained so the connection goes
                // back to the pool; a large or unsized one is dropped with its connection.
                if declared.is_some_and(|n| n <= DRAIN_LIMIT) {
                    let limit = usize::try_from(DRAIN_LIMIT).unwrap_or(usize::MAX);
                    if let Ok(c) = Limited::new(body, limit).collect().await {
                        drained = c.to_bytes().len() as u64;
                    }
                }
                Bytes::new()
            }
            Some(limit) => {
                if let Some(len) = declared
                    && len > limit as u64
                {
                    return Err(AttemptError {
                        message: format!(
                            "HTTP {}: Content-Length {len} is larger than the {limit} bytes asked for",
                            parts.status
                        ),
                        retryable: false,
                        source: None,
                        failure: Failure::TooLong(Some(len)),
                    });
                }
                match Limited::new(body, limit).collect().await {
                    Ok(c) => c.to_bytes(),
                    Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                        return Err(AttemptError {
                            message: format!(
                                "HTTP {}: body is longer than the {limit} bytes asked for",
                                parts.status
                            ),
                            retryable: false,
                            source: Some(e),
                            failure: Failure::TooLong(None),
                        });
                    }
                    Err(e) => {
                        return Err(AttemptError::other(
                            format!(
                                "HTTP {}: connection dropped while reading the body: {}",
                                parts.status,
                                chain(&*e)
                            ),
                            true,
                            Some(e),
                        ));
                    }
                }
            }
        };
        Ok(Fetched {
            status: parts.status,
            headers: parts.headers,
            body,
            drained,
        })
    }
}
