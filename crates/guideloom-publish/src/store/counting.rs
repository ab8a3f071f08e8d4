//! A [`RootStore`] wrapper that counts every operation by kind, and the bytes moved: the
//! root-level counterpart of guideloom-io's `CountingReader`, for request budgets in tests,
//! benchmarks and dashboards.
//!
//! Readers handed out by [`RootStore::open_reader`] are wrapped too, so record reads (which
//! on object stores bypass the store's own methods and go through the IO layer) are counted
//! as `reader_reads`: one per `read`, per `read_tail` and per range of `read_ranges`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> guideloom_publish::Result<()> {
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use guideloom_publish::{CountingStore, Registry, Root, RootStore, StorageOptions};
//!
//! let store = Registry::new().resolve_store("memory://counted", &StorageOptions::default())?;
//! let counting = CountingStore::new(store);
//! let root = Root::new(Arc::new(counting.clone()), StorageOptions::default());
//! root.upload_shard("w", 0, Bytes::from_static(b"shard bytes"), 1).await?;
//! let counts = counting.counts();
//! assert_eq!((counts.put_create, counts.bytes_out), (1, 11));
//! assert_eq!(counts.requests(), 1);
//! # Ok(()) }
//! ```

use std::fmt;
use std::ops::{Range, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, RootStore, StoreCapabilities};
use crate::error::Result;
use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::{AsyncReader, Tail};

/// Operation counts and bytes, as a plain copy (see [`CountingStore::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Create-only puts.
    pub put_create: u64,
    /// Conditional updates.
    pub put_cas: u64,
    /// Whole-object gets.
    pub get: u64,
    /// Ranged gets through the store.
    pub get_range: u64,
    /// HEADs.
    pub head: u64,
    /// Listings (one call; a store may page internally).
    pub list: u64,
    /// Readers opened (no request by contract).
    pub open_reader: u64,
    /// Reads through opened readers: `read`, `read_tail`, each range of `read_ranges`.
    pub reader_reads: u64,
    /// Bytes received: object bodies, ranges, reader reads.
    pub bytes_in: u64,
    /// Bytes sent in puts.
    pub bytes_out: u64,
}

impl Counts {
    /// Operations that are requests on an object store (opening a reader is not).
    pub fn requests(&self) -> u64 {
        self.put_create
            + self.put_cas
            + self.get
            + self.get_range
            + self.head
            + self.list
            + self.reader_reads
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
            open_reader: self.open_reader - o.open_reader,
            reader_reads: self.reader_reads - o.reader_reads,
            bytes_in: self.bytes_in - o.bytes_in,
            bytes_out: self.bytes_out - o.bytes_out,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    put_create: AtomicU64,
    put_cas: AtomicU64,
    get: AtomicU64,
    get_range: AtomicU64,
    head: AtomicU64,
    list: AtomicU64,
    open_reader: AtomicU64,
    reader_reads: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
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
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counts {
            put_create: l(&c.put_create),
            put_cas: l(&c.put_cas),
            get: l(&c.get),
            get_range: l(&c.get_range),
            head: l(&c.head),
            list: l(&c.list),
            open_reader: l(&c.open_reader),
            reader_reads: l(&c.reader_reads),
            bytes_in: l(&c.bytes_in),
            bytes_out: l(&c.bytes_out),
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
        bump(&self.counters.put_create, 1);
        bump(&self.counters.bytes_out, body.len() as u64);
        self.inner.put_create(key, body).await
    }

    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        bump(&self.counters.put_cas, 1);
        bump(&self.counters.bytes_out, body.len() as u64);
        self.inner.put_cas(key, body, expected).await
    }

    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        bump(&self.counters.get, 1);
        let obj = self.inner.get(key, limit).await?;
        bump(&self.counters.bytes_in, obj.body.len() as u64);
        Ok(obj)
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        bump(&self.counters.get_range, 1);
        let bytes = self.inner.get_range(key, range).await?;
        bump(&self.counters.bytes_in, bytes.len() as u64);
        Ok(bytes)
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        bump(&self.counters.head, 1);
        self.inner.head(key).await
    }

    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        bump(&self.counters.open_reader, 1);
        let inner = self.inner.open_reader(key, size).await?;
        Ok(Box::new(CountingReader {
            inner,
            counters: Arc::clone(&self.counters),
        }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        bump(&self.counters.list, 1);
        self.inner.list(prefix).await
    }

    async fn sweep_temporaries(&self, min_age: std::time::Duration) -> Result<super::Sweep> {
        self.inner.sweep_temporaries(min_age).await
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
        bump(&self.counters.reader_reads, 1);
        let bytes = self.inner.read(offset, len).await?;
        bump(&self.counters.bytes_in, bytes.len() as u64);
        Ok(bytes)
    }

    async fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
        bump(&self.counters.reader_reads, ranges.len() as u64);
        let got = self.inner.read_ranges(ranges).await?;
        let n: u64 = got.iter().map(|b| b.len() as u64).sum();
        bump(&self.counters.bytes_in, n);
        Ok(got)
    }

    async fn read_tail(&self, len: u64) -> guideloom_io::Result<Tail> {
        bump(&self.counters.reader_reads, 1);
        let tail = self.inner.read_tail(len).await?;
        bump(&self.counters.bytes_in, tail.bytes.len() as u64);
        Ok(tail)
    }

    async fn close(&self) -> guideloom_io::Result<()> {
        self.inner.close().await
    }

    fn close_sync(&self) {
        self.inner.close_sync();
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
        let expected = Counts {
            put_create: 1,
            put_cas: 1,
            get: 2,
            get_range: 1,
            head: 1,
            list: 1,
            open_reader: 1,
            reader_reads: 4,
            bytes_in: 10 + 3 + 4 + 3 + 3,
            bytes_out: 12,
        };
        assert_eq!(c, expected);
        assert_eq!(c.requests(), 11, "opening a reader is not a request");
        assert!(format!("{store:?}").contains("CountingStore"));
    }
}
