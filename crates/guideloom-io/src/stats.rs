//! Request accounting: counters of requests and bytes, and a counting reader wrapper.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::reader::{AsyncReader, SyncReader, Tail};

/// Thread-safe counters of requests made and bytes received.
///
/// Remote backends keep one per backend and one per reader; [`CountingReader`] keeps one for
/// any reader. Share it with `Arc` to read it from elsewhere.
#[derive(Debug, Default)]
pub struct RequestStats {
    requests: AtomicU64,
    bytes: AtomicU64,
    retries: AtomicU64,
}

/// A point-in-time copy of [`RequestStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Requests (or underlying read calls) made.
    pub requests: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Of [`requests`](Self::requests), the attempts that retried an earlier failed one
    /// (counted by backends that retry themselves, such as `HttpIo`; 0 elsewhere).
    pub retries: u64,
}

impl RequestStats {
    /// New zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one request that received `bytes` bytes.
    pub fn record(&self, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records bytes received without counting a new request (e.g. a streamed body).
    pub fn add_bytes(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records a request without bytes (e.g. a HEAD, or a failed attempt).
    pub fn add_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Records that the next request is a retry of a failed one (count the request itself
    /// with [`add_request`](Self::add_request) or [`record`](Self::record)).
    pub fn add_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
        }
    }

    /// Zeroes the counters and returns the values they had.
    pub fn reset(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.swap(0, Ordering::Relaxed),
            bytes: self.bytes.swap(0, Ordering::Relaxed),
            retries: self.retries.swap(0, Ordering::Relaxed),
        }
    }
}

/// Wraps any reader and counts the calls that reach it: one per `read`, `read_ranges`,
/// `read_tail` and `size` call, with the bytes returned.
///
/// Used by tests and benchmarks to prove request economy of the layers above
/// (e.g. "a shard opens with one tail read").
#[derive(Debug)]
pub struct CountingReader<R> {
    inner: R,
    stats: Arc<RequestStats>,
}

impl<R> CountingReader<R> {
    /// Wraps `inner`, counting into fresh counters.
    pub fn new(inner: R) -> Self {
        Self::with_stats(inner, Arc::default())
    }

    /// Wraps `inner`, counting into `stats` (which may be shared by several readers).
    pub fn with_stats(inner: R, stats: Arc<RequestStats>) -> Self {
        CountingReader { inner, stats }
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.stats
    }

    /// The wrapped reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

fn total(bufs: &[Bytes]) -> u64 {
    bufs.iter().map(|b| b.len() as u64).sum()
}

impl<R: SyncReader> SyncReader for CountingReader<R> {
    fn location(&self) -> &str {
        self.inner.location()
    }
    fn size(&self) -> Result<u64> {
        self.stats.add_request();
        self.inner.size()
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let b = self.inner.read(offset, len)?;
        self.stats.record(b.len() as u64);
        Ok(b)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let b = self.inner.read_ranges(ranges)?;
        self.stats.record(total(&b));
        Ok(b)
    }
    fn read_tail(&self, len: u64) -> Result<Tail> {
        let t = self.inner.read_tail(len)?;
        self.stats.record(t.bytes.len() as u64);
        Ok(t)
    }
    fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

#[async_trait]
impl<R: AsyncReader> AsyncReader for CountingReader<R> {
    fn location(&self) -> &str {
        self.inner.location()
    }
    async fn size(&self) -> Result<u64> {
        self.stats.add_request();
        self.inner.size().await
    }
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let b = self.inner.read(offset, len).await?;
        self.stats.record(b.len() as u64);
        Ok(b)
    }
    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let b = self.inner.read_ranges(ranges).await?;
        self.stats.record(total(&b));
        Ok(b)
    }
    async fn read_tail(&self, len: u64) -> Result<Tail> {
        let t = self.inner.read_tail(len).await?;
        self.stats.record(t.bytes.len() as u64);
        Ok(t)
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
    fn close_sync(&self) {
        self.inner.close_sync()
    }
}
