//! A [`RootStore`] wrapper that counts every operation by kind, and the bytes moved, for
//! the publication benchmarks' request tables.
//!
//! Readers handed out by [`RootStore::open_reader`] are wrapped too, so record reads (which
//! on object stores bypass the store's own methods and go through the IO layer) are counted
//! as `reader_reads`: one per `read`, per `read_tail` and per range of `read_ranges`.

use std::fmt;
use std::ops::{Range, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::{AsyncReader, Tail};
use guideloom_publish::{
    CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, Result, RootStore, StoreCapabilities,
};

/// Operation counts and bytes, as a plain copy (see [`CountingStore::snapshot`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) put_create: u64,
    pub(crate) put_cas: u64,
    pub(crate) get: u64,
    pub(crate) get_range: u64,
    pub(crate) head: u64,
    pub(crate) list: u64,
    /// Readers opened (no request by contract).
    pub(crate) open_reader: u64,
    /// Reads through opened readers: `read`, `read_tail`, each range of `read_ranges`.
    pub(crate) reader_reads: u64,
    /// Bytes received: object bodies, ranges, reader reads.
    pub(crate) bytes_in: u64,
    /// Bytes sent in puts.
    pub(crate) bytes_out: u64,
}

impl Counts {
    /// Operations that are requests on an object store (opening a reader is not).
    pub(crate) fn requests(&self) -> u64 {
        self.put_create
            + self.put_cas
            + self.get
            + self.get_range
            + self.head
            + self.list
            + self.reader_reads
    }
}

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
pub(crate) struct CountingStore {
    inner: Arc<dyn RootStore>,
    counters: Arc<Counters>,
}

impl fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingStore")
            .field("inner", &self.inner.describe())
            .field("counts", &self.snapshot())
            .finish()
    }
}

impl CountingStore {
    pub(crate) fn new(inner: Arc<dyn RootStore>) -> CountingStore {
        CountingStore {
            inner,
            counters: Arc::default(),
        }
    }

    /// The counts so far.
    pub(crate) fn snapshot(&self) -> Counts {
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

    async fn get(&self, key: &str) -> Result<Object> {
        bump(&self.counters.get, 1);
        let obj = self.inner.get(key).await?;
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
