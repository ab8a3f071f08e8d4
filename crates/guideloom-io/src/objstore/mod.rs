//! Object-store backend: [`ObjectStoreIo`] reads objects of any
//! [`object_store::ObjectStore`] (S3, GCS, Azure, in-memory, local, your own) by byte ranges.
//!
//! - Locations are [`object_store::path::Path`]s; [`Location::child`] splits the name on
//!   `/` and appends each part.
//! - [`AsyncReader::size`] is one `head` (cached), [`AsyncReader::read`] one `get_opts` with
//!   [`GetRange::Bounded`], [`AsyncReader::read_tail`] one `get_opts` with
//!   [`GetRange::Suffix`] (its result also gives the size; on a store that does not support
//!   suffix ranges, such as object_store's Azure client, a `head` and a bounded read), and
//!   [`AsyncReader::read_ranges`] merges neighbours with OUR [`CoalescePolicy`] (a gap limit
//!   *and* a span cap, small results copied out) instead of `get_ranges`' uncapped default,
//!   then issues the merged reads concurrently under a limit.
//! - Every returned buffer is checked to be exactly the size asked for: object_store hands
//!   back a clipped buffer for a range that runs past the end, which is an error here.
//! - **One version per reader.** The entity tag of a reader's first response (its tail read,
//!   usually) is pinned: every later `get_opts` sends it as `If-Match`
//!   ([`GetOptions::if_match`]), and every response must carry it. An object replaced after
//!   that is [`Error::Changed`] at the first read after the swap (S3, GCS, Azure, Ceph RGW,
//!   `InMemory` and `LocalFileSystem` all evaluate `If-Match` on GETs), with no extra request.
//!   A store that refuses the quoted tag object_store hands back (Ceph RGW 16 does so for
//!   conditional *writes*; measured, not for GETs) is retried once with the tag unquoted,
//!   and that form is used from then on by every reader of the backend.
//! - Errors: object_store's `NotFound` becomes [`Error::NotFound`]; everything else becomes
//!   [`Error::Remote`] (retryable only for `Generic` errors, the transport class).
//! - **Retries are object_store's**: configure them on your store (`RetryConfig` via e.g.
//!   `AmazonS3Builder::with_retry`); this backend does not retry on top.
//! - Async-first: the sync [`Backend::open`] answers [`Error::Unsupported`]; wrap the backend
//!   in `guideloom_io::blocking::BlockingIo` for synchronous readers.
//!
//! ```
//! use std::sync::Arc;
//! use guideloom_io::objstore::ObjectStoreIo;
//! use guideloom_io::{AsyncReader, Backend};
//! use object_store::{ObjectStoreExt, memory::InMemory, path::Path};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> guideloom_io::Result<()> {
//! let store = Arc::new(InMemory::new());
//! store.put(&Path::from("data/a.bin"), vec![7u8; 1000].into()).await.unwrap();
//!
//! let io = ObjectStoreIo::new(store);
//! let reader = io.open_async(&Path::from("data/a.bin")).await?;
//! let tail = reader.read_tail(100).await?; // one request: size + last 100 bytes
//! assert_eq!((tail.size, tail.bytes.len()), (1000, 100));
//! let parts = reader.read_ranges(&[0..10, 20..30, 990..1000]).await?; // one merged request
//! assert_eq!(parts[2].len(), 10);
//! assert_eq!(io.stats().snapshot().requests, 2);
//! # Ok(()) }
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use object_store::path::{Path, PathPart};
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use crate::backend::{Backend, Capabilities, Location};
use crate::coalesce::{self, CoalescePolicy};
use crate::error::{Error, Result, TimeoutKind, check_range, wrong_len};
use crate::pin::{Pin, bare};
use crate::reader::{AsyncReader, Tail};
use crate::stats::RequestStats;

/// Default number of merged reads one batched read keeps in flight: 8.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;

impl Location for Path {
    fn child(&self, name: &str) -> Self {
        self.parts()
            .chain(
                name.split('/')
                    .filter(|s| !s.is_empty())
                    .map(PathPart::from),
            )
            .collect()
    }

    fn describe(&self) -> String {
        self.to_string()
    }
}

/// Options of an [`ObjectStoreIo`]. Retries are configured on the store itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectStoreOptions {
    coalesce: CoalescePolicy,
    max_concurrency: usize,
}

impl Default for ObjectStoreOptions {
    fn default() -> Self {
        ObjectStoreOptions {
            coalesce: CoalescePolicy::default(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }
}

impl ObjectStoreOptions {
    /// How neighbouring ranges of a batched read are merged.
    pub fn with_coalesce(mut self, policy: CoalescePolicy) -> Self {
        self.coalesce = policy;
        self
    }

    /// The most merged reads one batched read keeps in flight (at least 1).
    pub fn with_max_concurrency(mut self, max: usize) -> Self {
        self.max_concurrency = max.max(1);
        self
    }

    /// The coalescing policy.
    pub fn coalesce(&self) -> CoalescePolicy {
        self.coalesce
    }

    /// The in-flight limit of batched reads.
    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }
}

/// The object-store backend. Cheap to clone: clones share the store and the counters.
#[derive(Clone)]
pub struct ObjectStoreIo {
    store: Arc<dyn ObjectStore>,
    options: ObjectStoreOptions,
    stats: Arc<RequestStats>,
    /// The store's name in errors, prefixed to locations: its `Display` (e.g.
    /// `AmazonS3(bucket)`) unless [`with_label`](Self::with_label) gave one.
    label: Arc<str>,
    /// How this store takes entity tags in `If-Match` ([`IF_MATCH_UNKNOWN`],
    /// [`IF_MATCH_AS_RETURNED`], [`IF_MATCH_BARE`]), learnt by the backend's readers.
    if_match_style: Arc<AtomicU8>,
}

/// No `If-Match` answered yet: a refused quoted tag is retried unquoted once.
const IF_MATCH_UNKNOWN: u8 = 0;
/// A quoted tag was honoured: a refusal means the object changed, with no retry.
const IF_MATCH_AS_RETURNED: u8 = 1;
/// A quoted tag was refused and the unquoted one honoured: tags are sent unquoted.
const IF_MATCH_BARE: u8 = 2;

impl fmt::Debug for ObjectStoreIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreIo")
            .field("store", &self.label)
            .field("options", &self.options)
            .field("stats", &self.stats.snapshot())
            .finish()
    }
}

impl ObjectStoreIo {
    /// Wraps `store` with default options.
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self::with_options(store, ObjectStoreOptions::default())
    }

    /// Names the store `label` in errors instead of its `Display` (`AmazonS3(bucket)`), e.g.
    /// `s3://bucket`: a reader's location is then `s3://bucket/path/to/key`.
    pub fn with_label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.label = label.into();
        self
    }

    /// Wraps `store` with the given options.
    pub fn with_options(store: Arc<dyn ObjectStore>, options: ObjectStoreOptions) -> Self {
        let label = store.to_string().into();
        ObjectStoreIo {
            store,
            options,
            stats: Arc::new(RequestStats::new()),
            label,
            if_match_style: Arc::new(AtomicU8::new(IF_MATCH_UNKNOWN)),
        }
    }

    /// The wrapped store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Counters of every request made by this backend's readers.
    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.stats
    }

    /// The options in force.
    pub fn options(&self) -> &ObjectStoreOptions {
        &self.options
    }

    /// Opens a reader without a request (the concrete type, with per-reader
    /// [`stats`](ObjectStoreReader::stats)).
    pub fn open_reader(&self, path: &Path) -> ObjectStoreReader {
        ObjectStoreReader {
            store: Arc::clone(&self.store),
            path: path.clone(),
            display: format!("{}/{path}", self.label),
            options: self.options,
            size: OnceLock::new(),
            stats: Arc::new(RequestStats::new()),
            backend_stats: Arc::clone(&self.stats),
            closed: AtomicBool::new(false),
            pin: Pin::default(),
            if_match_style: Arc::clone(&self.if_match_style),
        }
    }
}

#[async_trait]
impl Backend for ObjectStoreIo {
    type Location = Path;

    fn name(&self) -> &'static str {
        "ObjectStoreIo"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            r#async: true,
            batched_ranges: true,
            suffix_reads: true,
            ..Capabilities::default()
        }
    }

    fn open(&self, _location: &Path) -> Result<Box<dyn crate::reader::SyncReader>> {
        Err(Error::unsupported(
            "ObjectStoreIo",
            "sync reader",
            "ObjectStoreIo is async-first; wrap it in guideloom_io::blocking::BlockingIo \
             (feature `blocking`) to get synchronous readers",
        ))
    }

    async fn open_async(&self, location: &Path) -> Result<Box<dyn AsyncReader>> {
        Ok(Box::new(self.open_reader(location)))
    }
}

/// Reader of one object in an object store.
pub struct ObjectStoreReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    display: String,
    options: ObjectStoreOptions,
    size: OnceLock<u64>,
    stats: Arc<RequestStats>,
    backend_stats: Arc<RequestStats>,
    closed: AtomicBool,
    /// The entity tag of the first response, sent as `If-Match` on every later request.
    pin: Pin,
    /// The backend's `If-Match` form (see [`ObjectStoreIo`]'s `if_match_style`).
    if_match_style: Arc<AtomicU8>,
}

/// Why one `get_opts` of a reader failed.
enum GetFailure {
    /// The store's own error.
    Store(object_store::Error),
    /// The object is not the version the reader pinned ([`Error::Changed`]).
    Changed(Error),
}

impl fmt::Debug for ObjectStoreReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreReader")
            .field("location", &self.display)
            .field("size", &self.size.get())
            .field("etag", &self.pin.get())
            .field("stats", &self.stats.snapshot())
            .finish()
    }
}

/// The kind of the HTTP client error anywhere in the chain of an object_store error: set
/// when the request failed in transport (connect, reset, timeout, broken body) rather than
/// with a status. object_store's HTTP client exists only with a cloud store feature.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
fn transport_kind(e: &object_store::Error) -> Option<object_store::client::HttpErrorKind> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(h) = c.downcast_ref::<object_store::client::HttpError>() {
            return Some(h.kind());
        }
        cur = c.source();
    }
    None
}

/// Whether object_store gave up on a timeout.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
fn timed_out(e: &object_store::Error) -> bool {
    transport_kind(e) == Some(object_store::client::HttpErrorKind::Timeout)
}

/// Whether the request failed in transport (no status): then a `head` cannot tell anything
/// about the range and would only repeat the failure.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
fn transport_failure(e: &object_store::Error) -> bool {
    transport_kind(e).is_some()
}

#[cfg(not(any(feature = "s3", feature = "gcs", feature = "azure")))]
fn timed_out(_: &object_store::Error) -> bool {
    false
}

#[cfg(not(any(feature = "s3", feature = "gcs", feature = "azure")))]
fn transport_failure(_: &object_store::Error) -> bool {
    false
}

/// Maps an object_store error for `location` of an operation that started at `started`: a
/// timeout of the store's client becomes [`Error::Timeout`] (its retries are the client's,
/// so the attempt count is unknown; the store's error is the source).
fn map_error(location: &str, op: &str, started: Instant, e: object_store::Error) -> Error {
    let bucket_missing =
        || crate::cause_of(&e).is_some_and(|c| c.kind == crate::CauseKind::BucketNotFound);
    match e {
        // A 404 of a missing bucket is not "no such object": every object of it fails alike.
        object_store::Error::NotFound { .. } if !bucket_missing() => Error::NotFound {
            location: location.to_owned(),
            source: Some(Box::new(e)),
        },
        other => {
            let retryable = matches!(other, object_store::Error::Generic { .. });
            let timed_out = timed_out(&other);
            let remote = Error::Remote {
                location: location.to_owned(),
                // The failed request in short, never the server's raw response document.
                message: format!("{op} failed: {}", crate::brief(&other)),
                retryable,
                source: Some(Box::new(other)),
            };
            if timed_out {
                Error::timeout(
                    location,
                    op,
                    TimeoutKind::Client,
                    None,
                    started.elapsed(),
                    Some(remote),
                )
            } else {
                remote
            }
        }
    }
}

impl ObjectStoreReader {
    /// Counters of this reader's requests and bytes received.
    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.stats
    }

    /// The object's size if already known (from a head or an earlier get).
    pub fn known_size(&self) -> Option<u64> {
        self.size.get().copied()
    }

    /// The entity tag this reader pinned: that of its first response which carried one
    /// (`None` before, or on a store that reports none). Every later request sends it as
    /// `If-Match`.
    pub fn etag(&self) -> Option<&str> {
        self.pin.get()
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed {
                location: self.display.clone(),
            })
        } else {
            Ok(())
        }
    }

    fn count(&self, bytes: u64) {
        self.stats.record(bytes);
        self.backend_stats.record(bytes);
    }

    /// One `get_opts` with `range`, `If-Match` the pinned entity tag when there is one: the
    /// object's size, the range returned, and the body. While the backend has not yet seen
    /// the store honour a quoted tag, a refused quoted `If-Match` is retried once unquoted
    /// (and honoured so, that form becomes the backend's); refused otherwise, or a response
    /// with another tag, is [`GetFailure::Changed`].
    async fn get(
        &self,
        range: GetRange,
    ) -> std::result::Result<(u64, Range<u64>, Bytes), GetFailure> {
        let style = self.if_match_style.load(Ordering::Relaxed);
        let if_match = self
            .pin
            .get()
            .map(|p| if style == IF_MATCH_BARE { bare(p) } else { p });
        let mut result = self.get_once(range.clone(), if_match).await;
        match (&result, if_match) {
            (Ok(_), Some(sent)) if style == IF_MATCH_UNKNOWN && bare(sent) != sent => {
                let _ = self.if_match_style.compare_exchange(
                    IF_MATCH_UNKNOWN,
                    IF_MATCH_AS_RETURNED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            (Err(object_store::Error::Precondition { .. }), Some(sent)) => {
                if style != IF_MATCH_UNKNOWN || bare(sent) == sent {
                    return Err(GetFailure::Changed(self.pin.refused(&self.display)));
                }
                result = self.get_once(range, Some(bare(sent))).await;
                match &result {
                    Ok(_) => {
                        if self.if_match_style.swap(IF_MATCH_BARE, Ordering::Relaxed)
                            != IF_MATCH_BARE
                        {
                            tracing::info!(
                                location = %self.display,
                                "the store refused a quoted entity tag in If-Match and took \
                                 it unquoted; sending it unquoted from now on"
                            );
                        }
                    }
                    Err(object_store::Error::Precondition { .. }) => {
                        return Err(GetFailure::Changed(self.pin.refused(&self.display)));
                    }
                    Err(_) => {}
                }
            }
            _ => {}
        }
        let (size, returned, bytes, etag) = result.map_err(GetFailure::Store)?;
        self.pin
            .observe(&self.display, etag.as_deref())
            .map_err(GetFailure::Changed)?;
        Ok((size, returned, bytes))
    }

    /// One `get_opts` with `range` and `if_match`, counted and traced: the object's size,
    /// the range returned, the body and the entity tag.
    async fn get_once(
        &self,
        range: GetRange,
        if_match: Option<&str>,
    ) -> std::result::Result<(u64, Range<u64>, Bytes, Option<String>), object_store::Error> {
        let shown = range.to_string();
        let started = Instant::now();
        let opts = GetOptions {
            range: Some(range),
            if_match: if_match.map(str::to_owned),
            ..GetOptions::default()
        };
        let result = async {
            let r = self.store.get_opts(&self.path, opts).await?;
            let size = r.meta.size;
            let returned = r.range.clone();
            let etag = r.meta.e_tag.clone();
            let bytes = r.bytes().await?;
            Ok::<_, object_store::Error>((size, returned, bytes, etag))
        }
        .await;
        let got = result.as_ref().map_or(0, |(_, _, b, _)| b.len() as u64);
        // A request the client refused to send (a suffix range on Azure) is not counted.
        if !matches!(result, Err(object_store::Error::NotSupported { .. })) {
            self.count(got);
        }
        tracing::debug!(
            location = %self.display,
            range = %shown,
            if_match,
            ok = result.is_ok(),
            bytes = got,
            latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "object_store get"
        );
        result
    }

    /// One bounded read of a non-empty range, checked to be exact.
    async fn fetch_range(&self, offset: u64, len: u64) -> Result<Bytes> {
        let end = offset.checked_add(len).ok_or_else(|| Error::OutOfRange {
            location: self.display.clone(),
            offset,
            len,
            size: self.known_size().unwrap_or(u64::MAX),
        })?;
        let started = Instant::now();
        let op = format!("GET bytes={offset}-{}", end - 1);
        match self.get(GetRange::Bounded(offset..end)).await {
            Ok((size, _, bytes)) => {
                let _ = self.size.set(size);
                if end > size {
                    return Err(Error::OutOfRange {
                        location: self.display.clone(),
                        offset,
                        len,
                        size,
                    });
                }
                if let Some(e) = wrong_len(&self.display, offset, len, bytes.len() as u64) {
                    return Err(e);
                }
                Ok(bytes)
            }
            Err(GetFailure::Changed(e)) => Err(e),
            Err(GetFailure::Store(e @ object_store::Error::NotFound { .. })) => {
                Err(map_error(&self.display, &op, started, e))
            }
            Err(GetFailure::Store(e)) => {
                // A range starting past the end is an error in object_store; tell it apart
                // from other failures with a head (only on this error path, and not after a
                // transport failure, which the head would only repeat).
                if !transport_failure(&e)
                    && let Ok(size) = self.size().await
                    && end > size
                {
                    return Err(Error::OutOfRange {
                        location: self.display.clone(),
                        offset,
                        len,
                        size,
                    });
                }
                Err(map_error(&self.display, &op, started, e))
            }
        }
    }
}

#[async_trait]
impl AsyncReader for ObjectStoreReader {
    fn location(&self) -> &str {
        &self.display
    }

    async fn size(&self) -> Result<u64> {
        self.check_open()?;
        if let Some(s) = self.known_size() {
            return Ok(s);
        }
        let started = Instant::now();
        let head = self.store.head(&self.path).await;
        self.count(0);
        tracing::debug!(
            location = %self.display,
            ok = head.is_ok(),
            latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "object_store head"
        );
        let meta = head.map_err(|e| map_error(&self.display, "HEAD", started, e))?;
        self.pin.observe(&self.display, meta.e_tag.as_deref())?;
        Ok(*self.size.get_or_init(|| meta.size))
    }

    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.check_open()?;
        if let Some(size) = self.known_size() {
            check_range(&self.display, offset, len, size)?;
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        self.fetch_range(offset, len).await
    }

    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check_open()?;
        if let Some(size) = self.known_size() {
            for r in ranges {
                check_range(&self.display, r.start, r.end.saturating_sub(r.start), size)?;
            }
        }
        let plan = coalesce::plan(ranges, self.options.coalesce);
        let merged: Vec<Range<u64>> = plan.iter().map(|m| m.range.clone()).collect();
        let fetched: Vec<(usize, Bytes)> = stream::iter(merged.into_iter().enumerate())
            .map(|(i, r)| async move {
                let buf = if r.is_empty() {
                    Bytes::new()
                } else {
                    self.fetch_range(r.start, r.end - r.start).await?
                };
                Ok::<_, Error>((i, buf))
            })
            .buffer_unordered(self.options.max_concurrency)
            .try_collect()
            .await?;
        let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
        for (i, buf) in &fetched {
            coalesce::split(&plan[*i], buf, ranges, &mut out);
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    async fn read_tail(&self, len: u64) -> Result<Tail> {
        self.check_open()?;
        if len == 0 {
            let size = self.size().await?;
            return Ok(Tail {
                size,
                bytes: Bytes::new(),
            });
        }
        let started = Instant::now();
        let op = format!("GET bytes=-{len}");
        match self.get(GetRange::Suffix(len)).await {
            Ok((size, returned, bytes)) => {
                let _ = self.size.set(size);
                let expected = len.min(size);
                if returned.end != size || returned.end - returned.start != expected {
                    return Err(Error::Remote {
                        location: self.display.clone(),
                        message: format!(
                            "suffix read of {len} bytes returned range {:?} of an object of {size} bytes",
                            returned
                        ),
                        retryable: false,
                        source: None,
                    });
                }
                if let Some(e) =
                    wrong_len(&self.display, size - expected, expected, bytes.len() as u64)
                {
                    return Err(e);
                }
                Ok(Tail { size, bytes })
            }
            Err(GetFailure::Changed(e)) => Err(e),
            Err(GetFailure::Store(e @ object_store::Error::NotFound { .. })) => {
                Err(map_error(&self.display, &op, started, e))
            }
            // object_store's Azure client refuses suffix ranges before sending anything (Blob
            // Storage has no `bytes=-N`): the size from a head (which pins the version),
            // then one bounded read of the tail.
            Err(GetFailure::Store(object_store::Error::NotSupported { .. })) => {
                let size = self.size().await?;
                let start = size - len.min(size);
                let bytes = if start == size {
                    Bytes::new()
                } else {
                    self.fetch_range(start, size - start).await?
                };
                Ok(Tail { size, bytes })
            }
            Err(GetFailure::Store(e)) if transport_failure(&e) => {
                Err(map_error(&self.display, &op, started, e))
            }
            Err(GetFailure::Store(e)) => {
                // Some stores refuse a suffix of an empty object; a head tells.
                match self.size().await {
                    Ok(0) => Ok(Tail {
                        size: 0,
                        bytes: Bytes::new(),
                    }),
                    _ => Err(map_error(&self.display, &op, started, e)),
                }
            }
        }
    }

    async fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    fn close_sync(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
