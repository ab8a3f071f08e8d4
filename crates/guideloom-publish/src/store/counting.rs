//! A [`RootStore`] wrapper that counts every operation by kind, and the bytes moved: the
//! root-level counterpart of guideloom-io's `CountingReader`, for request budgets in tests,
//! benchmarks and dashboards. It counts in guideloom-io's vocabulary: one
//! [`StatsSnapshot`] (requests, bytes received, bytes sent) per kind of operation.
//!
//! A streamed create-only write ([`RootStore::begin_create`]) is the inner store's own (a
//! local root's temporary file, an object store's spool), counted at its commit as one
//! `put_create` of the bytes written.
//!
//! Readers handed out by [`RootStore::open_reader`] are wrapped too, so record reads (which
//! on object stores bypass the store's own methods and go through the IO layer) are counted
//! in `reader_reads`: one request per `read`, per `read_tail` and per range of
//! `read_ranges`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> guideloom_publish::Result<()> {
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use guideloom_publish::{CountingStore, Registry, Root, RootOptions, RootStore, StoreOptions};
//!
//! let store = Registry::new().resolve("memory://counted", &StoreOptions::default())?;
//! let counting = CountingStore::new(store);
//! let root = Root::new(Arc::new(counting.clone()), RootOptions::default());
//! root.upload_shard("w", 0, Bytes::from_static(b"shard bytes"), 1).await?;
//! let counts = counting.counts();
//! assert_eq!((counts.put_create.requests, counts.put_create.bytes_sent), (1, 11));
//! assert_eq!(counts.requests(), 1);
//! assert_eq!(counts.total().bytes_sent, 11);
//! # Ok(()) }
//! ```

use std::fmt;
use std::io::Write;
use std::ops::{Range, Sub};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{
    CasOutcome, Committed, CreateOutcome, Etag, Object, ObjectInfo, PendingObject, RootStore,
    StoreCapabilities,
};
use crate::error::Result;
use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::{AsyncReader, AsyncReaderExt, RequestStats, StatsSnapshot, SyncReader, Tail};

/// Operation counts and bytes per kind of store operation, as a plain copy (see
/// [`CountingStore::counts`]). Each kind is a guideloom-io [`StatsSnapshot`]: its
/// `requests` (calls, failed ones included), `bytes_received` and `bytes_sent`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Create-only puts (`bytes_sent`: the bodies).
    pub put_create: StatsSnapshot,
    /// Conditional updates (`bytes_sent`: the bodies).
    pub put_cas: StatsSnapshot,
    /// Whole-object gets.
    pub get: StatsSnapshot,
    /// Ranged gets through the store.
    pub get_range: StatsSnapshot,
    /// HEADs.
    pub head: StatsSnapshot,
    /// Listings (one request per call; a store may page internally).
    pub list: StatsSnapshot,
    /// Batch deletes (one per call of [`RootStore::delete_many`]; an object store may send
    /// several requests of 1 000 keys).
    pub delete: StatsSnapshot,
    /// Reads through opened readers: one request per `read`, `read_tail`, and range of
    /// `read_ranges`.
    pub reader_reads: StatsSnapshot,
    /// Readers opened (no request by contract, so not in [`total`](Self::total)).
    pub open_reader: u64,
}

impl Counts {
    /// All the requests and bytes: the sum of every kind (opening a reader is no request).
    pub fn total(&self) -> StatsSnapshot {
        [
            self.put_create,
            self.put_cas,
            self.get,
            self.get_range,
            self.head,
            self.list,
            self.delete,
            self.reader_reads,
        ]
        .into_iter()
        .sum()
    }

    /// Operations that are requests on an object store: `total().requests`.
    pub fn requests(&self) -> u64 {
        self.total().requests
    }
}

/// The counts between two readings: `after - before`.
impl Sub for Counts {
    type Output = Counts;

    fn sub(self, o: Counts) -> Counts {
        Counts {
            put_create: self.put_create - o.put_create,
            put_cas: self.put_cas - o.put_cas,
            get: self.get - o.get,
            get_range: self.get_range - o.get_range,
            head: self.head - o.head,
            list: self.list - o.list,
            delete: self.delete - o.delete,
            reader_reads: self.reader_reads - o.reader_reads,
            open_reader: self.open_reader.saturating_sub(o.open_reader),
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    put_create: RequestStats,
    put_cas: RequestStats,
    get: RequestStats,
    get_range: RequestStats,
    head: RequestStats,
    list: RequestStats,
    delete: RequestStats,
    reader_reads: RequestStats,
    open_reader: AtomicU64,
}

/// Counts each [`RootStore`] method called on `inner` (successful or not).
#[derive(Clone)]
pub struct CountingStore {
    inner: Arc<dyn RootStore>,
    counters: Arc<Counters>,
}

impl fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingStore")
            .field("inner", &self.inner.describe())
            .field("counts", &self.counts())
            .finish()
    }
}

impl CountingStore {
    /// Wraps `inner`; all counts start at zero. Clones share the counters.
    pub fn new(inner: Arc<dyn RootStore>) -> CountingStore {
        CountingStore {
            inner,
            counters: Arc::default(),
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        let c = &*self.counters;
        Counts {
            put_create: c.put_create.snapshot(),
            put_cas: c.put_cas.snapshot(),
            get: c.get.snapshot(),
            get_range: c.get_range.snapshot(),
            head: c.head.snapshot(),
            list: c.list.snapshot(),
            delete: c.delete.snapshot(),
            reader_reads: c.reader_reads.snapshot(),
            open_reader: c.open_reader.load(Ordering::Relaxed),
        }
    }
}

#[async_trait]
impl RootStore for CountingStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn capabilities(&self) -> StoreCapabilities {
        self.inner.capabilities()
    }

    fn check_cas(&self) -> Result<()> {
        self.inner.check_cas()
    }

    fn check_writable(&self) -> Result<()> {
        self.inner.check_writable()
    }

    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        self.counters.put_create.add_request();
        self.counters.put_create.add_bytes_sent(body.len() as u64);
        self.inner.put_create(key, body).await
    }

    /// The inner store's own streamed write (a local root's temporary file, an object
    /// store's spool), its commit counted as one create-only put of the bytes written.
    fn begin_create(&self, key: &str, spool_dir: &Path) -> Result<Box<dyn PendingObject + '_>> {
        Ok(Box::new(CountingPending {
            inner: self.inner.begin_create(key, spool_dir)?,
            counters: Arc::clone(&self.counters),
            written: 0,
        }))
    }

    fn begin_create_owned(
        &self,
        key: &str,
        spool_dir: &Path,
    ) -> Result<Option<Box<dyn PendingObject>>> {
        let Some(inner) = self.inner.begin_create_owned(key, spool_dir)? else {
            return Ok(None);
        };
        Ok(Some(Box::new(CountingPending {
            inner,
            counters: Arc::clone(&self.counters),
            written: 0,
        })))
    }

    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        self.counters.put_cas.add_request();
        self.counters.put_cas.add_bytes_sent(body.len() as u64);
        self.inner.put_cas(key, body, expected).await
    }

    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        self.counters.get.add_request();
        let obj = self.inner.get(key, limit).await?;
        self.counters.get.add_bytes_received(obj.body.len() as u64);
        Ok(obj)
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        self.counters.get_range.add_request();
        let bytes = self.inner.get_range(key, range).await?;
        self.counters
            .get_range
            .add_bytes_received(bytes.len() as u64);
        Ok(bytes)
    }

    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        self.counters.get_range.add_request();
        let (bytes, etag) = self.inner.get_range_tagged(key, range).await?;
        self.counters
            .get_range
            .add_bytes_received(bytes.len() as u64);
        Ok((bytes, etag))
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.counters.head.add_request();
        self.inner.head(key).await
    }

    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        self.counters.open_reader.fetch_add(1, Ordering::Relaxed);
        let inner = self.inner.open_reader(key, size).await?;
        Ok(Box::new(CountingReader {
            inner,
            counters: Arc::clone(&self.counters),
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.counters.list.add_request();
        self.inner.list(prefix).await
    }

    async fn sweep_temporaries(&self, min_age: std::time::Duration) -> Result<super::Sweep> {
        self.inner.sweep_temporaries(min_age).await
    }

    async fn delete_many(&self, keys: &[String]) -> Result<u64> {
        self.counters.delete.add_request();
        self.inner.delete_many(keys).await
    }
}

/// A streamed create-only write of a [`CountingStore`]: the inner store's, its commit counted
/// as a `put_create` of the bytes written.
#[derive(Debug)]
struct CountingPending<'a> {
    inner: Box<dyn PendingObject + 'a>,
    counters: Arc<Counters>,
    written: u64,
}

impl Write for CountingPending<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[async_trait]
impl PendingObject for CountingPending<'_> {
    async fn commit(self: Box<Self>) -> Result<Committed> {
        self.counters.put_create.add_request();
        self.counters.put_create.add_bytes_sent(self.written);
        self.inner.commit().await
    }

    fn take_write_error(&mut self) -> Option<crate::Error> {
        self.inner.take_write_error()
    }
}

/// A reader of a [`CountingStore`], counting into the store's counters.
#[derive(Debug)]
struct CountingReader {
    inner: Box<dyn AsyncReader>,
    counters: Arc<Counters>,
}

#[async_trait]
impl AsyncReader for CountingReader {
    fn location(&self) -> &str {
        self.inner.location()
    }

    async fn size(&self) -> guideloom_io::Result<u64> {
        self.inner.size().await
    }

    async fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        self.counters.reader_reads.add_request();
        let bytes = self.inner.read(offset, len).await?;
        self.counters
            .reader_reads
            .add_bytes_received(bytes.len() as u64);
        Ok(bytes)
    }

    async fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
        self.counters.reader_reads.add_requests(ranges.len() as u64);
        let got = self.inner.read_ranges(ranges).await?;
        let n: u64 = got.iter().map(|b| b.len() as u64).sum();
        self.counters.reader_reads.add_bytes_received(n);
        Ok(got)
    }

    async fn read_tail(&self, len: u64) -> guideloom_io::Result<Tail> {
        self.counters.reader_reads.add_request();
        let tail = self.inner.read_tail(len).await?;
        self.counters
            .reader_reads
            .add_bytes_received(tail.bytes.len() as u64);
        Ok(tail)
    }

    async fn close(&self) -> guideloom_io::Result<()> {
        self.inner.close().await
    }

    fn close_sync(&self) {
        self.inner.close_sync();
    }

    fn as_sync(&self) -> Option<&dyn SyncReader> {
        self.inner.as_sync()?;
        Some(self)
    }
}

/// The synchronous view of a [`CountingReader`] (when its inner reader has one): the inner's
/// calls, counted as the async ones are.
impl SyncReader for CountingReader {
    fn location(&self) -> &str {
        self.inner.location()
    }

    fn size(&self) -> guideloom_io::Result<u64> {
        self.inner.sync_view()?.size()
    }

    fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        let view = self.inner.sync_view()?;
        self.counters.reader_reads.add_request();
        let bytes = view.read(offset, len)?;
        self.counters
            .reader_reads
            .add_bytes_received(bytes.len() as u64);
        Ok(bytes)
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
        let view = self.inner.sync_view()?;
        self.counters.reader_reads.add_requests(ranges.len() as u64);
        let got = view.read_ranges(ranges)?;
        let n: u64 = got.iter().map(|b| b.len() as u64).sum();
        self.counters.reader_reads.add_bytes_received(n);
        Ok(got)
    }

    fn read_tail(&self, len: u64) -> guideloom_io::Result<Tail> {
        let view = self.inner.sync_view()?;
        self.counters.reader_reads.add_request();
        let tail = view.read_tail(len)?;
        self.counters
            .reader_reads
            .add_bytes_received(tail.bytes.len() as u64);
        Ok(tail)
    }

    fn close(&self) -> guideloom_io::Result<()> {
        self.inner.sync_view()?.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LocalStore;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_every_operation_and_reader_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = CountingStore::new(Arc::new(LocalStore::new(dir.path())));
        let before = store.counts();
        store
            .put_create("a/x", Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        store
            .put_cas("c", Bytes::from_static(b"v1"), None)
            .await
            .unwrap();
        assert_eq!(store.get("a/x", 1024).await.unwrap().body.len(), 10);
        assert!(store.get("missing", 1024).await.is_err());
        assert_eq!(&store.get_range("a/x", 2..5).await.unwrap()[..], b"234");
        store.head("a/x").await.unwrap();
        assert_eq!(store.list("a").await.unwrap().len(), 1);
        let reader = store.open_reader("a/x", 10).await.unwrap();
        reader.read(0, 4).await.unwrap();
        reader.read_ranges(&[0..1, 5..7]).await.unwrap();
        reader.read_tail(3).await.unwrap();
        let c = store.counts() - before;
        let req = |requests, bytes_received, bytes_sent| StatsSnapshot {
            requests,
            bytes_received,
            bytes_sent,
            retries: 0,
        };
        let expected = Counts {
            put_create: req(1, 0, 10),
            put_cas: req(1, 0, 2),
            get: req(2, 10, 0),
            get_range: req(1, 3, 0),
            head: req(1, 0, 0),
            list: req(1, 0, 0),
            delete: req(0, 0, 0),
            reader_reads: req(4, 4 + 3 + 3, 0),
            open_reader: 1,
        };
        assert_eq!(c, expected);
        assert_eq!(c.requests(), 11, "opening a reader is not a request");
        assert_eq!(c.total(), req(11, 10 + 3 + 4 + 3 + 3, 12));
        assert!(format!("{store:?}").contains("CountingStore"));
    }
}
