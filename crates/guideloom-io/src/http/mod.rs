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
//! - **Bounded time.** Every attempt has the request timeout
//!   ([`HttpOptions::with_request_timeout`], default 30 s) and every read (`read`,
//!   `read_ranges`, `read_tail`, `size`) a deadline across all its requests, attempts and
//!   backoffs ([`HttpOptions::with_operation_timeout`], default 60 s). An origin that stalls,
//!   drips, or never accepts the connection ends in [`Error::Timeout`] (attempts counted,
//!   the URL redacted) within `max_attempts × request_timeout` plus the backoffs or the
//!   deadline, whichever comes first. A body longer than asked is [`Error::LongRead`] (never
//!   retried), a shorter one [`Error::ShortRead`].
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

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod listing;
mod multipart;
mod options;
mod path;
mod reader;
mod send;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use http::StatusCode;
use http::header;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub use options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BACKOFF,
    DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_RANGES_PER_REQUEST, DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_POOL_IDLE_TIMEOUT, DEFAULT_POOL_MAX_IDLE_PER_HOST, DEFAULT_REQUEST_TIMEOUT,
    HTTP_DEFAULT_COALESCE, HttpOptions,
};
pub use path::HttpPath;
pub use reader::HttpReader;
pub(crate) use send::{BodyLimits, Budget, Call, Fetched, content_length};

use crate::backend::{Backend, Capabilities};
use crate::error::{Error, Result};
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

impl Inner {
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

    /// The time budget of a read starting now.
    pub(crate) fn budget(&self) -> Budget {
        Budget::starting_now(self.options.operation_timeout)
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
