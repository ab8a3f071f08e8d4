//! Configuration of [`HttpIo`](super::HttpIo): timeouts, retries, concurrency, coalescing.

use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::coalesce::CoalescePolicy;
use crate::error::{Error, Result};
use crate::retry::{
    REMOTE_REQUEST_ATTEMPTS, REMOTE_REQUEST_INITIAL_BACKOFF, REMOTE_REQUEST_MAX_BACKOFF,
    RetryPolicy,
};

/// Default cap on byte ranges in one multi-range request: 64, nginx's `max_ranges` default
/// in many distributions' examples (an origin that gets more may answer 200 with the whole
/// file, which is an error here).
pub const DEFAULT_MAX_RANGES_PER_REQUEST: usize = 64;

/// Default number of requests one batched read keeps in flight: 8.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;

/// Default time allowed for one attempt (connect, headers and the whole body): 30 s.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time allowed to establish a connection: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default attempts per request, the first included: 4 ([`RetryPolicy::remote_request`]).
pub const DEFAULT_MAX_ATTEMPTS: u32 = REMOTE_REQUEST_ATTEMPTS;

/// Default deadline of one read across all its attempts and the waits between them: 60 s.
///
/// Without it an origin that drips one byte a second holds a read for
/// [`DEFAULT_MAX_ATTEMPTS`] × [`DEFAULT_REQUEST_TIMEOUT`] plus the backoffs (measured: 121 s
/// to fail); with it, 60 s: two 30 s attempts. Each attempt still gets the whole request
/// timeout while the deadline leaves room for it, so a slow but live transfer is not cut
/// shorter than one attempt allows.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Default wait before the first retry: 100 ms (doubled per retry, with jitter).
pub const DEFAULT_INITIAL_BACKOFF: Duration = REMOTE_REQUEST_INITIAL_BACKOFF;

/// Default longest wait between two attempts: 5 s.
pub const DEFAULT_MAX_BACKOFF: Duration = REMOTE_REQUEST_MAX_BACKOFF;

/// Default time an idle pooled connection is kept: 90 s.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Default idle connections kept per host: 32.
pub const DEFAULT_POOL_MAX_IDLE_PER_HOST: usize = 32;

/// The default coalescing policy of [`HttpOptions`]: merge ranges at most 4 KiB apart, up to
/// [`DEFAULT_MAX_SPAN`](crate::coalesce::DEFAULT_MAX_SPAN).
///
/// Smaller than the crate-wide [`DEFAULT_MAX_GAP`](crate::coalesce::DEFAULT_MAX_GAP) (64 KiB,
/// still used by `ObjectStoreIo`, where every merged range is its own request): an HTTP origin
/// that answers multi-range requests serves disjoint ranges in ONE request anyway, so merging
/// only saves a multipart part header (~100 bytes) and every gap byte is a wasted download.
/// Measured against nginx, 64 random 1000-byte records in a 64 MiB object: 13.8× the requested
/// bytes with a 64 KiB gap, 1.26× with 4 KiB, one request either way.
pub const HTTP_DEFAULT_COALESCE: CoalescePolicy = CoalescePolicy {
    max_gap: 4 * 1024,
    max_span: crate::coalesce::DEFAULT_MAX_SPAN,
};

/// Options of an [`HttpIo`](super::HttpIo) backend. Start from [`HttpOptions::default`] and
/// chain the `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use guideloom_io::RetryPolicy;
/// use guideloom_io::http::HttpOptions;
///
/// let options = HttpOptions::default()
///     .with_request_timeout(Duration::from_secs(10))
///     .with_retry(RetryPolicy::new(6, Duration::from_millis(50), Duration::from_secs(2)))
///     .with_max_concurrency(16)
///     .with_header("authorization", "Bearer my-token")
///     .unwrap();
/// ```
#[derive(Clone)]
pub struct HttpOptions {
    pub(crate) coalesce: CoalescePolicy,
    pub(crate) multi_range: bool,
    pub(crate) max_ranges_per_request: usize,
    pub(crate) max_concurrency: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) operation_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) pool_idle_timeout: Duration,
    pub(crate) pool_max_idle_per_host: usize,
    pub(crate) headers: HeaderMap,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            coalesce: HTTP_DEFAULT_COALESCE,
            multi_range: true,
            max_ranges_per_request: DEFAULT_MAX_RANGES_PER_REQUEST,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            retry: RetryPolicy::remote_request(),
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            pool_max_idle_per_host: DEFAULT_POOL_MAX_IDLE_PER_HOST,
            headers: HeaderMap::new(),
        }
    }
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values may be credentials: show only the names.
        let header_names: Vec<&str> = self.headers.keys().map(HeaderName::as_str).collect();
        f.debug_struct("HttpOptions")
            .field("coalesce", &self.coalesce)
            .field("multi_range", &self.multi_range)
            .field("max_ranges_per_request", &self.max_ranges_per_request)
            .field("max_concurrency", &self.max_concurrency)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("retry", &self.retry)
            .field("pool_idle_timeout", &self.pool_idle_timeout)
            .field("pool_max_idle_per_host", &self.pool_max_idle_per_host)
            .field("headers", &header_names)
            .finish()
    }
}

impl HttpOptions {
    /// How neighbouring ranges of a batched read are merged (gap and span limits).
    pub fn with_coalesce(mut self, policy: CoalescePolicy) -> Self {
        self.coalesce = policy;
        self
    }

    /// Whether disjoint ranges of a batch are fetched in one multi-range request
    /// (`multipart/byteranges`). When off, or when the origin answers a multi-range request
    /// with anything but a multipart 206, they are fetched as concurrent single-range
    /// requests.
    pub fn with_multi_range(mut self, enabled: bool) -> Self {
        self.multi_range = enabled;
        self
    }

    /// The most ranges put in one multi-range request (match the origin's limit, e.g.
    /// nginx `max_ranges`). Values below 2 disable multi-range requests.
    pub fn with_max_ranges_per_request(mut self, max: usize) -> Self {
        self.max_ranges_per_request = max;
        self
    }

    /// The most requests one batched read keeps in flight (at least 1).
    pub fn with_max_concurrency(mut self, max: usize) -> Self {
        self.max_concurrency = max.max(1);
        self
    }

    /// Time allowed for one attempt: connecting, the response head and the whole body.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Time allowed to establish a TCP (and TLS) connection.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Deadline of one read (`read`, `read_ranges`, `read_tail`, `size`) across all its
    /// requests, attempts and the waits between them; default
    /// [`DEFAULT_OPERATION_TIMEOUT`]. An attempt running when it passes is cut off, and no
    /// retry starts after it: the read fails with [`Error::Timeout`] (retry-counted, the URL
    /// redacted). A read therefore ends within this deadline or within
    /// `max_attempts × request_timeout` plus the backoffs, whichever comes first.
    /// `Duration::MAX` leaves only the per-attempt bound.
    ///
    /// ```
    /// use std::time::Duration;
    /// use guideloom_io::RetryPolicy;
    /// use guideloom_io::http::HttpOptions;
    ///
    /// // Fail a stalled or dripping origin within 5 s, however many attempts remain.
    /// let o = HttpOptions::default()
    ///     .with_request_timeout(Duration::from_secs(2))
    ///     .with_retry(RetryPolicy::new(4, Duration::from_millis(50), Duration::from_secs(1)))
    ///     .with_operation_timeout(Duration::from_secs(5));
    /// assert_eq!(o.operation_timeout(), Duration::from_secs(5));
    /// ```
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// The retry policy; default [`RetryPolicy::remote_request`] (4 attempts, waits bounded
    /// by 100 ms doubling up to 5 s, full jitter).
    ///
    /// Retried: HTTP 5xx and 429, connection failures and resets, bodies cut short by a
    /// dropped connection, and attempts that exceed the request (or connect) timeout. Never
    /// retried: other 4xx statuses, 200 answers to ranged requests, and protocol violations
    /// (wrong Content-Range, wrong body length). A `Retry-After` header (in seconds) is
    /// honoured up to the policy's `max_backoff`. No retry starts, and no wait runs, past the
    /// operation deadline ([`HttpOptions::with_operation_timeout`]).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How long an idle pooled connection is kept alive.
    pub fn with_pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    /// How many idle connections are kept per host.
    pub fn with_pool_max_idle_per_host(mut self, max: usize) -> Self {
        self.pool_max_idle_per_host = max;
        self
    }

    /// A header sent with every request (e.g. `Authorization`). Values are marked sensitive
    /// and never appear in logs, errors or `Debug` output.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        let name = HeaderName::try_from(name).map_err(|e| Error::InvalidArgument {
            message: format!("invalid header name {name:?}: {e}"),
        })?;
        let mut value = HeaderValue::try_from(value).map_err(|_| Error::InvalidArgument {
            message: format!("invalid value for header {name}"),
        })?;
        value.set_sensitive(true);
        self.headers.insert(name, value);
        Ok(self)
    }

    /// The coalescing policy.
    pub fn coalesce(&self) -> CoalescePolicy {
        self.coalesce
    }

    /// The retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The per-attempt timeout.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The deadline of one read across its attempts.
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// The in-flight request limit of batched reads.
    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }

    /// Whether multi-range requests are used (and how many ranges go in one).
    pub fn multi_range_limit(&self) -> Option<usize> {
        (self.multi_range && self.max_ranges_per_request >= 2)
            .then_some(self.max_ranges_per_request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_retry_is_the_remote_request_policy() {
        let r = HttpOptions::default().retry();
        assert_eq!(r, RetryPolicy::remote_request());
        assert_eq!(
            (r.max_attempts, r.initial_backoff, r.max_backoff),
            (
                DEFAULT_MAX_ATTEMPTS,
                DEFAULT_INITIAL_BACKOFF,
                DEFAULT_MAX_BACKOFF
            )
        );
    }

    #[test]
    fn headers_are_hidden_in_debug() {
        let o = HttpOptions::default()
            .with_header("authorization", "Bearer SECRET")
            .unwrap();
        let shown = format!("{o:?}");
        assert!(shown.contains("authorization"));
        assert!(!shown.contains("SECRET"));
        assert!(HttpOptions::default().with_header("bad name", "x").is_err());
    }
}
