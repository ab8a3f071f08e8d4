//! Read-only roots served over HTTP(S) (feature `http`): [`HttpRootStore`].
//!
//! A dataset published to a local directory or a bucket can be served by any web server
//! that answers `HEAD` and ranged `GET` (the origin contract of guideloom-io's `HttpIo`, see
//! `docs/http.md`). Readers open it by its base URL: `http://host/datasets/captures`.
//!
//! | operation | requests |
//! |-----------|----------|
//! | [`get`](RootStore::get) | one suffix `GET` for objects up to [`HTTP_GET_FIRST_BYTES`]; one more ranged `GET` for the rest of a larger object |
//! | [`get_range`](RootStore::get_range) | one ranged `GET` |
//! | [`head`](RootStore::head) | one `HEAD` (404/410 is [`Error::NotFound`]) |
//! | [`open_reader`](RootStore::open_reader) | none: guideloom-io's [`HttpReader`], one ranged `GET` per record read |
//! | [`list`](RootStore::list) | one `GET` of each directory's JSON listing when the origin lists them ([`HttpRootStore::with_listing`]); otherwise refused with [`Error::Unsupported`] |
//! | [`put_create`](RootStore::put_create), [`put_cas`](RootStore::put_cas) | refused with [`Error::ReadOnlyRoot`], no request |
//!
//! Without listing, [`Root::latest`](crate::Root::latest) finds the newest log entry by
//! probing sequence numbers (`docs/publication.md` gives the count); with it, by one listing
//! of `log/`.
//! Every request is counted in [`HttpRootStore::stats`]; URLs in errors and logs never show
//! userinfo or query strings.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use guideloom_io::http::{HttpIo, HttpOptions, HttpPath, HttpReader};
use guideloom_io::{AsyncReader, RequestStats};
use tracing::{Instrument, info_span};

use super::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, RootStore, StoreCapabilities};
use crate::error::{Error, Result};

/// How much of an object the first request of [`RootStore::get`] asks for (a suffix `GET`):
/// 1 MiB. Control objects (identity, manifests, pointers, catalog) are smaller, so a whole
/// read is one request; a larger object costs a second ranged `GET` for the remainder.
pub(crate) const HTTP_GET_FIRST_BYTES: u64 = 1 << 20;

/// A read-only root below an `http://` or `https://` base URL, through guideloom-io's
/// [`HttpIo`] (one pooled client; retries and timeouts from [`HttpOptions`]).
///
/// ```
/// use guideloom_publish::{Error, HttpRootStore, Root, RootOptions, RootStore};
/// use std::sync::Arc;
///
/// let store = HttpRootStore::new("http://127.0.0.1:9/datasets/captures").unwrap();
/// assert_eq!(store.describe(), "http://127.0.0.1:9/datasets/captures/");
/// assert!(!store.capabilities().list);
/// assert!(matches!(store.check_cas(), Err(Error::ReadOnlyRoot { .. })));
/// let root = Root::new(Arc::new(store), RootOptions::default());
/// # let _ = root;
/// ```
#[derive(Debug, Clone)]
pub struct HttpRootStore {
    io: HttpIo,
    describe: String,
    /// The origin lists directories ([`with_listing`](Self::with_listing)).
    listing: bool,
}

/// `base` with a `/` before its query string (or at its end) if its path lacks one.
fn directory_url(base: &str) -> String {
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (base, None),
    };
    let mut url = head.to_owned();
    if !url.ends_with('/') {
        url.push('/');
    }
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

impl HttpRootStore {
    /// A store for the root at `base_url` with default [`HttpOptions`]. A trailing `/` is
    /// added if missing. No request is made.
    pub fn new(base_url: &str) -> Result<Self> {
        Self::with_options(base_url, HttpOptions::default())
    }

    /// A store for the root at `base_url` with `options` (timeouts, retries, headers).
    pub fn with_options(base_url: &str, options: HttpOptions) -> Result<Self> {
        let url = directory_url(base_url);
        let io = HttpIo::with_options(&url, options).map_err(|e| Error::InvalidUri {
            uri: crate::uri::redact_userinfo(base_url.split('?').next().unwrap_or("")),
            reason: e.to_string(),
        })?;
        Ok(HttpRootStore {
            describe: io.base_url(),
            io,
            listing: false,
        })
    }

    /// Declares that the origin serves JSON directory listings (nginx `autoindex on;
    /// autoindex_format json;`, Caddy `file_server browse`): [`list`](RootStore::list) then
    /// reads them, [`StoreCapabilities::list`] is `true`, and [`Root::latest`](crate::Root::latest)
    /// finds the newest snapshot with one listing of `log/` and one `GET` of the entry, at any
    /// sequence number, instead of probing (2·(⌊log₂ n⌋ + 1) requests for the `n`-th). An
    /// origin that turns out not to list makes `latest` probe after all (one request lost).
    pub fn with_listing(mut self, listing: bool) -> Self {
        self.listing = listing;
        self
    }

    /// The underlying backend (its options and counters).
    pub fn io(&self) -> &HttpIo {
        &self.io
    }

    /// Counters of every request this store made, readers included (each attempt counts).
    pub fn stats(&self) -> &Arc<RequestStats> {
        self.io.stats()
    }

    fn reader(&self, key: &str) -> Result<HttpReader> {
        let path = HttpPath::new(key).map_err(|e| read_error(key, e))?;
        self.io.open_reader(&path).map_err(|e| read_error(key, e))
    }

    fn read_only(&self) -> Error {
        Error::ReadOnlyRoot {
            root: self.describe.clone(),
        }
    }
}

/// Maps a guideloom-io error on `key`: a missing object is [`Error::NotFound`].
fn read_error(key: &str, e: guideloom_io::Error) -> Error {
    match e {
        guideloom_io::Error::NotFound { .. } => Error::NotFound {
            key: key.to_owned(),
        },
        source => Error::Read {
            key: key.to_owned(),
            source,
        },
    }
}

#[async_trait]
impl RootStore for HttpRootStore {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn capabilities(&self) -> StoreCapabilities {
        StoreCapabilities {
            compare_and_swap: false,
            create_only_across_hosts: false,
            atomic_writes: true,
            list: self.listing,
            remote_reads: true,
        }
    }

    fn check_cas(&self) -> Result<()> {
        Err(self.read_only())
    }

    fn check_writable(&self) -> Result<()> {
        Err(self.read_only())
    }

    async fn put_create(&self, _key: &str, _body: Bytes) -> Result<CreateOutcome> {
        Err(self.read_only())
    }

    async fn put_cas(
        &self,
        _key: &str,
        _body: Bytes,
        _expected: Option<&Etag>,
    ) -> Result<CasOutcome> {
        Err(self.read_only())
    }

    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        let reader = self.reader(key)?;
        async {
            // The suffix read asks for no more than the limit allows, and reveals the size:
            // a larger object is refused before the rest of it is requested.
            let tail = reader
                .read_tail(HTTP_GET_FIRST_BYTES.min(limit.max(1)))
                .await
                .map_err(|e| read_error(key, e))?;
            if tail.size > limit {
                return Err(Error::TooLarge {
                    key: key.to_owned(),
                    limit,
                    size: Some(tail.size),
                });
            }
            let rest = tail.size - tail.bytes.len() as u64;
            let body = if rest == 0 {
                tail.bytes
            } else {
                let head = reader.read(0, rest).await.map_err(|e| read_error(key, e))?;
                let mut whole = BytesMut::with_capacity(head.len() + tail.bytes.len());
                whole.extend_from_slice(&head);
                whole.extend_from_slice(&tail.bytes);
                whole.freeze()
            };
            Ok(Object { body, etag: None })
        }
        .instrument(info_span!("http_root_get", root = %self.describe, key))
        .await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        Ok(self.get_range_tagged(key, range).await?.0)
    }

    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        let reader = self.reader(key)?;
        let len = range.end.saturating_sub(range.start);
        let bytes = reader
            .read(range.start, len)
            .instrument(info_span!("http_root_get_range", root = %self.describe, key, start = range.start, len))
            .await
            .map_err(|e| read_error(key, e))?;
        Ok((bytes, reader.etag().map(|e| Etag(e.to_owned()))))
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let reader = self.reader(key)?;
        let size = reader
            .size()
            .instrument(info_span!("http_root_head", root = %self.describe, key))
            .await
            .map_err(|e| read_error(key, e))?;
        Ok(ObjectInfo {
            key: key.to_owned(),
            size,
            etag: None,
            modified: None,
        })
    }

    async fn open_reader(&self, key: &str, _size: u64) -> Result<Box<dyn AsyncReader>> {
        // The size is learnt from the first response (the shard's tail read) and checked
        // against the manifest by the snapshot reader.
        Ok(Box::new(self.reader(key)?))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        if self.listing {
            return super::http_listing::list(&self.io, &self.describe, prefix).await;
        }
        Err(Error::Unsupported {
            what: format!(
                "listing {prefix}/ on {}: HTTP roots cannot list; snapshots are found by \
                 probing log entries instead",
                self.describe
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_become_directories() {
        assert_eq!(directory_url("http://h/a"), "http://h/a/");
        assert_eq!(directory_url("http://h/a/"), "http://h/a/");
        assert_eq!(directory_url("http://h/a?t=1"), "http://h/a/?t=1");
        assert_eq!(directory_url("http://h"), "http://h/");
    }

    #[tokio::test]
    async fn writes_are_refused_without_a_request() {
        let store = HttpRootStore::new("http://user:secret@127.0.0.1:9/ds?token=x").unwrap();
        let d = store.describe();
        assert!(!d.contains("secret") && !d.contains("token"), "{d}");
        let err = store.put_create("log/x", Bytes::new()).await.unwrap_err();
        assert!(
            matches!(&err, Error::ReadOnlyRoot { root } if *root == d),
            "{err}"
        );
        let err = store.put_cas("c", Bytes::new(), None).await.unwrap_err();
        assert!(matches!(err, Error::ReadOnlyRoot { .. }));
        assert!(matches!(
            store.list("log").await,
            Err(Error::Unsupported { .. })
        ));
        assert_eq!(store.stats().snapshot().requests, 0);
    }

    #[test]
    fn bad_base_urls_are_invalid_uris() {
        let err = HttpRootStore::new("ftp://h/x").unwrap_err();
        assert!(matches!(err, Error::InvalidUri { .. }), "{err}");
    }
}
