//! `http(s)://` roots: their time bounds and the read-only store built from them.

use std::sync::Arc;
use std::time::Duration;

#[cfg(not(feature = "http"))]
use crate::error::Error;
use crate::error::Result;
use crate::store::RootStore;

/// How `http(s)://` roots are reached (feature `http`): the bounds of guideloom-io's
/// `HttpOptions` that matter to a reader. Defaults equal `HttpOptions::default()`'s.
///
/// A read ends — with the right bytes or a typed timeout naming the URL — within
/// `max_attempts × request_timeout` (plus backoffs of at most 5 s each) or `operation_timeout`,
/// whichever comes first: 60 s by default.
///
/// ```
/// use std::time::Duration;
/// use guideloom_publish::{HttpRootOptions, Registry, StoreOptions};
///
/// let options = StoreOptions {
///     http: HttpRootOptions {
///         request_timeout: Duration::from_secs(5),
///         max_attempts: 3,
///         operation_timeout: Duration::from_secs(12),
///         ..HttpRootOptions::default()
///     },
///     ..StoreOptions::default()
/// };
/// let store = Registry::global().resolve("http://127.0.0.1:9/datasets/captures", &options)?;
/// assert!(!store.capabilities().list, "HTTP roots are found by probing, not listing");
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpRootOptions {
    /// Time allowed for one attempt (connect, response head and whole body): 30 s.
    pub request_timeout: Duration,
    /// Time allowed to connect: 10 s.
    pub connect_timeout: Duration,
    /// Attempts per request, the first included: 4 (at least 1).
    pub max_attempts: u32,
    /// Deadline of one read across all its attempts and backoffs: 60 s.
    pub operation_timeout: Duration,
    /// The origin serves JSON directory listings (nginx `autoindex on; autoindex_format
    /// json;`, Caddy `file_server browse`): the latest snapshot is then found with one
    /// listing of `log/` and one `GET`, at any sequence number, instead of probing
    /// (`HttpRootStore::with_listing`). Default `false`.
    pub listing: bool,
}

impl Default for HttpRootOptions {
    fn default() -> Self {
        HttpRootOptions {
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_attempts: 4,
            operation_timeout: Duration::from_secs(60),
            listing: false,
        }
    }
}

#[cfg(feature = "http")]
impl HttpRootOptions {
    /// guideloom-io's `HttpOptions` with these bounds (everything else at its default; the
    /// default backoff bounds are kept).
    pub fn http_options(&self) -> guideloom_io::http::HttpOptions {
        use guideloom_io::RetryPolicy;
        use guideloom_io::http::{DEFAULT_INITIAL_BACKOFF, DEFAULT_MAX_BACKOFF, HttpOptions};
        HttpOptions::default()
            .with_request_timeout(self.request_timeout)
            .with_connect_timeout(self.connect_timeout)
            .with_operation_timeout(self.operation_timeout)
            .with_retry(RetryPolicy::new(
                self.max_attempts,
                DEFAULT_INITIAL_BACKOFF,
                DEFAULT_MAX_BACKOFF,
            ))
    }
}

/// A read-only store for an `http(s)://` base URL (feature `http`).
#[cfg(feature = "http")]
pub(super) fn http_store(url: &str, options: &HttpRootOptions) -> Result<Arc<dyn RootStore>> {
    Ok(Arc::new(
        crate::store::HttpRootStore::with_options(url, options.http_options())?
            .with_listing(options.listing),
    ))
}

#[cfg(not(feature = "http"))]
pub(super) fn http_store(url: &str, _options: &HttpRootOptions) -> Result<Arc<dyn RootStore>> {
    Err(Error::Unsupported {
        what: format!(
            "{}: read-only HTTP roots need guideloom-publish's feature `http`",
            crate::uri::redact_userinfo(url.split('?').next().unwrap_or(""))
        ),
    })
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;
    use guideloom_io::http::HttpOptions;

    #[test]
    fn defaults_match_the_io_layer() {
        let ours = HttpRootOptions::default().http_options();
        let io = HttpOptions::default();
        assert_eq!(ours.request_timeout(), io.request_timeout());
        assert_eq!(ours.connect_timeout(), io.connect_timeout());
        assert_eq!(ours.operation_timeout(), io.operation_timeout());
        assert_eq!(ours.retry(), io.retry());
    }

    #[test]
    fn options_reach_the_store() {
        let o = HttpRootOptions {
            request_timeout: Duration::from_millis(1500),
            connect_timeout: Duration::from_millis(250),
            max_attempts: 0,
            operation_timeout: Duration::from_secs(7),
            listing: true,
        };
        let h = o.http_options();
        assert_eq!(h.request_timeout(), Duration::from_millis(1500));
        assert_eq!(h.connect_timeout(), Duration::from_millis(250));
        assert_eq!(h.operation_timeout(), Duration::from_secs(7));
        assert_eq!(h.retry().max_attempts, 1, "at least one attempt");
    }
}
