//! HTTP range backend: [`HttpIo`] reads objects below a base URL with `Range` requests.
//!
//! - **Async-first.** [`HttpIo`] hands out [`AsyncReader`]s; its synchronous
//!   [`Backend::open`] answers [`Error::Unsupported`]. Wrap it in
//!   `guideloom_io::blocking::BlockingIo` (feature `blocking`) for synchronous readers.
//! - **One pooled client** (hyper 1 + hyper-util, keep-alive) is shared by all readers of a
//!   backend; `http://` and `https://` (rustls, webpki roots, ring) both work.
//! - **Origin contract** (see `docs/http.md`): HEAD answers 200 with `Content-Length`; a
//!   ranged GET answers 206 with a `Content-Range` and a body of exactly the requested
//!   size. 200 to a ranged GET is an error ("origin ignored the Range header"), 416 is
//!   [`Error::OutOfRange`], 404/410 is [`Error::NotFound`]. Redirects are not followed.
//! - **Requests.** Opening is lazy (no request). [`AsyncReader::size`] costs one HEAD
//!   (cached; also learnt for free from any `Content-Range`), [`AsyncReader::read`] one
//!   GET, [`AsyncReader::read_tail`] one suffix GET (`bytes=-N`) that also reveals the size,
//!   and [`AsyncReader::read_ranges`] one multi-range GET per
//!   [`max_ranges_per_request`](HttpOptions::with_max_ranges_per_request) merged ranges.
//! - **Accounting.** Every attempt is counted in the backend's [`HttpIo::stats`] and the
//!   reader's [`HttpReader::stats`], and traced as a `guideloom_http` span with method,
//!   range, attempt, status and latency. URLs in logs and errors never carry userinfo or
//!   query strings; header values are never logged.
//!
//! ```no_run
//! use guideloom_io::http::{HttpIo, HttpPath};
//! use guideloom_io::{AsyncReader, Backend};
//!
//! # async fn demo() -> guideloom_io::Result<()> {
//! let io = HttpIo::new("https://data.example.com/datasets/demo/")?;
//! let reader = io.open_async(&HttpPath::new("shards/0.glm")?).await?;
//! let tail = reader.read_tail(64 * 1024).await?; // one request: size + last 64 KiB
//! let record = reader.read(128, 1024).await?; // one request
//! let batch = reader.read_ranges(&[0..16, 4096..4160, 900_000..900_100]).await?;
//! println!("{} bytes, {} requests", tail.size, io.stats().snapshot().requests);
//! # let _ = (record, batch);
//! # Ok(()) }
//! ```

mod multipart;
mod options;
mod path;
mod reader;

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::Instrument;

pub use options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BACKOFF,
    DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_RANGES_PER_REQUEST, DEFAULT_POOL_IDLE_TIMEOUT,
    DEFAULT_POOL_MAX_IDLE_PER_HOST, DEFAULT_REQUEST_TIMEOUT, HTTP_DEFAULT_COALESCE, HttpOptions,
    RetryPolicy,
};
pub use path::HttpPath;
pub use reader::HttpReader;

use crate::backend::{Backend, Capabilities};
use crate::error::{BoxError, Error, Result};
use crate::reader::{AsyncReader, SyncReader};
use crate::stats::RequestStats;
use path::{BaseUrl, redact_url};

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// The HTTP range backend. Cheap to clone: clones share the client, its connection pool
/// and the counters.
#[derive(Clone)]
pub struct HttpIo {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    client: HttpsClient,
    base: BaseUrl,
    options: HttpOptions,
    stats: Arc<RequestStats>,
    /// Cleared when the origin answers a multi-range request without multipart.
    multi_range_ok: AtomicBool,
}

impl fmt::Debug for HttpIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpIo")
            .field("base", &self.inner.base)
            .field("options", &self.inner.options)
            .field("stats", &self.inner.stats.snapshot())
            .finish()
    }
}

impl HttpIo {
    /// A backend for objects below `base_url` with default [`HttpOptions`].
    ///
    /// `base_url` is `http://` or `https://`, names a directory (ends with `/`), and may carry
    /// userinfo (sent as HTTP Basic authentication) and a query string (appended to every
    /// object URL, e.g. a signed token); neither is ever displayed.
    pub fn new(base_url: &str) -> Result<Self> {
        Self::with_options(base_url, HttpOptions::default())
    }

    /// A backend for objects below `base_url` with the given options.
    pub fn with_options(base_url: &str, options: HttpOptions) -> Result<Self> {
        let base = BaseUrl::parse(base_url)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(options.connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| Error::InvalidArgument {
                message: format!("cannot configure TLS: {e}"),
            })?
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(options.pool_idle_timeout)
            .pool_max_idle_per_host(options.pool_max_idle_per_host)
            .build(https);
        Ok(HttpIo {
            inner: Arc::new(Inner {
                client,
                base,
                options,
                stats: Arc::new(RequestStats::new()),
                multi_range_ok: AtomicBool::new(true),
            }),
        })
    }

    /// Counters of every request made by this backend's readers (each attempt counts).
    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.inner.stats
    }

    /// The options in force.
    pub fn options(&self) -> &HttpOptions {
        &self.inner.options
    }

    /// The base URL, redacted (no userinfo, query shown as `?<redacted>`).
    pub fn base_url(&self) -> String {
        self.inner.base.redacted("")
    }

    /// The redacted URL of `path`, as shown in errors.
    pub fn url_of(&self, path: &HttpPath) -> String {
        self.inner.base.redacted(&path.encoded())
    }

    /// Whether batched reads still use multi-range requests: `false` when disabled in the
    /// options or after the origin answered one without `multipart/byteranges`.
    pub fn multi_range_in_use(&self) -> bool {
        self.inner.options.multi_range_limit().is_some()
            && self.inner.multi_range_ok.load(Ordering::Relaxed)
    }

    /// Opens a reader without a request (the concrete type, whose
    /// [`stats`](HttpReader::stats) counts this reader's requests).
    pub fn open_reader(&self, path: &HttpPath) -> Result<HttpReader> {
        path.check()?;
        let uri = self.inner.base.uri(path)?;
        Ok(HttpReader::new(
            Arc::clone(&self.inner),
            uri,
            self.url_of(path),
        ))
    }
}

#[async_trait]
impl Backend for HttpIo {
    type Location = HttpPath;

    fn name(&self) -> &'static str {
        "HttpIo"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            r#async: true,
            batched_ranges: true,
            suffix_reads: true,
            ..Capabilities::default()
        }
    }

    fn open(&self, _location: &HttpPath) -> Result<Box<dyn SyncReader>> {
        Err(Error::unsupported(
            "HttpIo",
            "sync reader",
            "HttpIo is async-first; wrap it in guideloom_io::blocking::BlockingIo \
             (feature `blocking`) to get synchronous readers",
        ))
    }

    async fn open_async(&self, location: &HttpPath) -> Result<Box<dyn AsyncReader>> {
        Ok(Box::new(self.open_reader(location)?))
    }
}

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
}

/// Why one attempt failed.
struct AttemptError {
    message: String,
    retryable: bool,
    source: Option<BoxError>,
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

fn is_retryable_status(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
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

impl Inner {
    /// Sends one request with retries. Returns the first response whose status is not
    /// retryable (any status: callers map them), or the error after the last attempt.
    pub(crate) async fn send(
        &self,
        reader_stats: &RequestStats,
        location: &str,
        method: Method,
        uri: &Uri,
        range: Option<&str>,
        limits: BodyLimits,
    ) -> Result<Fetched> {
        let policy = self.options.retry;
        let max_attempts = policy.max_attempts.max(1);
        let mut attempt: u32 = 0;
        loop {
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
            let req = self.build_request(&method, uri, range)?;
            self.stats.add_request();
            reader_stats.add_request();
            let started = Instant::now();
            let timeout = self.options.request_timeout;
            let outcome = tokio::time::timeout(timeout, self.attempt(req, limits))
                .instrument(span.clone())
                .await
                .unwrap_or_else(|_| {
                    Err(AttemptError {
                        message: format!("request timed out after {timeout:?}"),
                        retryable: true,
                        source: None,
                    })
                });
            let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            span.record("latency_ms", latency_ms);
            let (message, retryable, source, wait_hint) = match outcome {
                Ok(f) => {
                    span.record("status", f.status.as_u16());
                    span.record("bytes", f.body.len());
                    span.in_scope(|| {
                        tracing::debug!(status = f.status.as_u16(), latency_ms, "response")
                    });
                    let n = f.body.len() as u64 + f.drained;
                    self.stats.add_bytes(n);
                    reader_stats.add_bytes(n);
                    if !is_retryable_status(f.status) {
                        return Ok(f);
                    }
                    (
                        format!("HTTP {}", f.status),
                        true,
                        None,
                        retry_after(&f.headers),
                    )
                }
                Err(e) => {
                    span.in_scope(
                        || tracing::debug!(error = %e.message, latency_ms, "request failed"),
                    );
                    (e.message, e.retryable, e.source, None)
                }
            };
            if retryable && attempt < max_attempts {
                let wait = wait_hint
                    .map_or_else(|| policy.backoff(attempt), |w| w.min(policy.max_backoff));
                tracing::debug!(attempt, ?wait, error = %message, url = %location, "retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
            let plural = if attempt == 1 { "" } else { "s" };
            return Err(Error::Remote {
                location: location.to_owned(),
                message: format!("{method} {message} after {attempt} attempt{plural}"),
                retryable,
                source,
            });
        }
    }

    fn build_request(
        &self,
        method: &Method,
        uri: &Uri,
        range: Option<&str>,
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
            if let Some(r) = range {
                let v = header::HeaderValue::try_from(r).map_err(|_| Error::InvalidArgument {
                    message: format!("invalid Range header {r:?}"),
                })?;
                h.insert(header::RANGE, v);
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
            AttemptError {
                message: format!(
                    "request failed{}: {}",
                    if tls { " (TLS)" } else { "" },
                    chain(&e)
                ),
                retryable: !tls,
                source: Some(Box::new(e)),
            }
        })?;
        let (parts, body) = resp.into_parts();
        let declared = content_length(&parts.headers);
        let limit = match parts.status {
            StatusCode::PARTIAL_CONTENT => Some(limits.partial),
            StatusCode::OK => match (limits.full, declared) {
                (Some(max), Some(len)) if len <= max => usize::try_from(len).ok(),
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
                            "HTTP {}: Content-Length {len} is larger than the {limit} bytes expected",
                            parts.status
                        ),
                        retryable: false,
                        source: None,
                    });
                }
                match Limited::new(body, limit).collect().await {
                    Ok(c) => c.to_bytes(),
                    Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                        return Err(AttemptError {
                            message: format!(
                                "HTTP {}: body is longer than the {limit} bytes expected",
                                parts.status
                            ),
                            retryable: false,
                            source: Some(e),
                        });
                    }
                    Err(e) => {
                        return Err(AttemptError {
                            message: format!(
                                "HTTP {}: connection dropped while reading the body: {}",
                                parts.status,
                                chain(&*e)
                            ),
                            retryable: true,
                            source: Some(e),
                        });
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

    /// Maps a final status that is not the expected success to an error.
    pub(crate) fn status_error(&self, display: &str, f: &Fetched, what: &str) -> Error {
        let status = f.status;
        if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
            return Error::NotFound {
                location: display.to_owned(),
                source: Some(format!("HTTP {status}").into()),
            };
        }
        let message = if status.is_redirection() {
            let target = f
                .headers
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| "<none>".to_owned(), redact_url);
            format!(
                "{what}: HTTP {status} redirect to {target} not followed \
                 (redirects are never followed; point the base URL at the final origin)"
            )
        } else {
            format!("{what}: HTTP {status}")
        };
        Error::Remote {
            location: display.to_owned(),
            message,
            retryable: false,
            source: None,
        }
    }

    pub(crate) fn protocol_error(display: &str, message: String) -> Error {
        Error::Remote {
            location: display.to_owned(),
            message,
            retryable: false,
            source: None,
        }
    }

    pub(crate) fn options(&self) -> &HttpOptions {
        &self.options
    }

    pub(crate) fn multi_range_limit(&self) -> Option<usize> {
        if self.multi_range_ok.load(Ordering::Relaxed) {
            self.options.multi_range_limit()
        } else {
            None
        }
    }

    pub(crate) fn disable_multi_range(&self, location: &str, why: &str) {
        if self.multi_range_ok.swap(false, Ordering::Relaxed) {
            tracing::info!(
                origin = %self.base.authority(),
                url = %location,
                "origin does not answer multi-range requests with multipart ({why}); \
                 using concurrent single-range requests from now on"
            );
        }
    }
}
