//! Request accounting: counters of requests, bytes and retries ([`RequestStats`], read as a
//! [`StatsSnapshot`]), and a counting reader wrapper.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::reader::{AsyncReader, SyncReader, Tail};

/// Thread-safe counters of requests made, bytes received and sent, and retries: the one
/// counter vocabulary of guideloom.
///
/// Remote backends keep one per backend and one per reader; [`CountingReader`] keeps one for
/// any reader; guideloom-publish's `CountingStore` keeps one per kind of store operation and
/// its `Stager` reports its downloads in a [`StatsSnapshot`]. Share it with `Arc` to read it
/// from elsewhere.
///
/// ```
/// use guideloom_io::{RequestStats, StatsSnapshot};
///
/// let stats = RequestStats::new();
/// let before = stats.snapshot();
/// stats.record(1000); // one request that received 1000 bytes
/// stats.add_retry();
/// stats.add_request(); // the retry itself
/// stats.add_bytes_sent(12);
/// let delta = stats.snapshot() - before;
/// assert_eq!(
///     delta,
///     StatsSnapshot { requests: 2, bytes_received: 1000, bytes_sent: 12, retries: 1 }
/// );
/// ```
#[derive(Debug, Default)]
pub struct RequestStats {
    requests: AtomicU64,
    bytes_received: AtomicU64,
    bytes_sent: AtomicU64,
    retries: AtomicU64,
}

/// A point-in-time copy of [`RequestStats`]. Two readings subtract (`after - before`) and
/// add up (`a + b`, `iter.sum()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Requests (or underlying read calls) made, retries included.
    pub requests: u64,
    /// Bytes received (response bodies, bytes read).
    pub bytes_received: u64,
    /// Bytes sent (request bodies; 0 for readers).
    pub bytes_sent: u64,
    /// Of [`requests`](Self::requests), the attempts that retried an earlier failed one
    /// (counted by backends that retry themselves, such as `HttpIo`; 0 elsewhere).
    pub retries: u64,
}

impl std::ops::Sub for StatsSnapshot {
    type Output = StatsSnapshot;

    /// The counts between two readings: `after - before` (saturating at 0 if the counters
    /// were reset in between).
    fn sub(self, o: StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.saturating_sub(o.requests),
            bytes_received: self.bytes_received.saturating_sub(o.bytes_received),
            bytes_sent: self.bytes_sent.saturating_sub(o.bytes_sent),
            retries: self.retries.saturating_sub(o.retries),
        }
    }
}

impl std::ops::Add for StatsSnapshot {
    type Output = StatsSnapshot;

    fn add(self, o: StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.saturating_add(o.requests),
            bytes_received: self.bytes_received.saturating_add(o.bytes_received),
            bytes_sent: self.bytes_sent.saturating_add(o.bytes_sent),
            retries: self.retries.saturating_add(o.retries),
        }
    }
}

impl std::iter::Sum for StatsSnapshot {
    fn sum<I: Iterator<Item = StatsSnapshot>>(iter: I) -> StatsSnapshot {
        iter.fold(StatsSnapshot::default(), |a, b| a + b)
    }
}

impl RequestStats {
    /// New zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one request that received `bytes` bytes.
    pub fn record(&self, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records bytes received without counting a new request (e.g. a streamed body).
    pub fn add_bytes_received(&self, bytes: u64) {
        self.bytes_received.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records bytes sent (a request body) without counting a new request.
    pub fn add_bytes_sent(&self, bytes: u64) {
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records a request without bytes (e.g. a HEAD, or a failed attempt).
    pub fn add_request(&self) {
        self.add_requests(1);
    }

    /// Records `n` requests without bytes (e.g. the ranges of one batched read, where each
    /// range counts as one).
    pub fn add_requests(&self, n: u64) {
        self.requests.fetch_add(n, Ordering::Relaxed);
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
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
        }
    }

    /// Zeroes the counters and returns the values they had.
    pub fn reset(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.swap(0, Ordering::Relaxed),
            bytes_received: self.bytes_received.swap(0, Ordering::Relaxed),
            bytes_sent: self.bytes_sent.swap(0, Ordering::Relaxed),
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
    fn read_blocking(&self, offset: u64, len: u64) -> Option<Result<Bytes>> {
        let read = self.inner.read_blocking(offset, len)?;
        if let Ok(b) = &read {
            self.stats.record(b.len() as u64);
        }
        Some(read)
    }
    fn read_ranges_blocking(&self, ranges: &[Range<u64>]) -> Option<Result<Vec<Bytes>>> {
        let read = self.inner.read_ranges_blocking(ranges)?;
        if let Ok(b) = &read {
            self.stats.record(total(b));
        }
        Some(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_subtract_add_and_reset() {
        let stats = RequestStats::new();
        stats.record(10);
        let a = stats.snapshot();
        stats.add_requests(3);
        stats.add_bytes_received(5);
        stats.add_bytes_sent(7);
        stats.add_retry();
        let b = stats.snapshot();
        let delta = StatsSnapshot {
            requests: 3,
            bytes_received: 5,
            bytes_sent: 7,
            retries: 1,
        };
        assert_eq!(b - a, delta);
        assert_eq!(a + delta, b);
        assert_eq!([a, delta].into_iter().sum::<StatsSnapshot>(), b);
        assert_eq!(a - b, StatsSnapshot::default(), "saturates after a reset");
        assert_eq!(stats.reset(), b);
        assert_eq!(stats.snapshot(), StatsSnapshot::default());
    }
}
