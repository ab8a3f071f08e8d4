//! Request accounting: counters of requests, bytes and retries ([`RequestStats`], read as a
//! [`StatsSnapshot`]), and a counting reader wrapper ([`CountingReader`]).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::reader::{AsyncReader, AsyncReaderExt, SyncReader, Tail};

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
/// (e.g. "a shard opens with one tail read"). Wrapping an [`AsyncReader`] with a
/// synchronous view ([`AsyncReader::as_sync`]), it offers a view of its own that counts
/// the same way.
pub struct CountingReader<R>(Counted<R>);

/// The fields of a [`CountingReader`]: the counting reader itself, and, when `R` is an
/// [`AsyncReader`], its synchronous view (a [`SyncReader`] reading through the inner's).
#[derive(Debug)]
struct Counted<R> {
    inner: R,
    stats: Arc<RequestStats>,
}

impl<R: std::fmt::Debug> std::fmt::Debug for CountingReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingReader")
            .field("inner", &self.0.inner)
            .field("stats", &self.0.stats)
            .finish()
    }
}

impl<R> CountingReader<R> {
    /// Wraps `inner`, counting into fresh counters.
    pub fn new(inner: R) -> Self {
        Self::with_stats(inner, Arc::default())
    }

    /// Wraps `inner`, counting into `stats` (which may be shared by several readers).
    pub fn with_stats(inner: R, stats: Arc<RequestStats>) -> Self {
        CountingReader(Counted { inner, stats })
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.0.stats
    }

    /// The wrapped reader.
    pub fn into_inner(self) -> R {
        self.0.inner
    }
}

fn total(bufs: &[Bytes]) -> u64 {
    bufs.iter().map(|b| b.len() as u64).sum()
}

/// The counting, over whichever sync reader reads: `R` itself ([`CountingReader`] over a
/// [`SyncReader`]), or the synchronous view of an [`AsyncReader`] `R`.
impl<R> Counted<R> {
    fn size_of<S: SyncReader + ?Sized>(&self, r: &S) -> Result<u64> {
        self.stats.add_request();
        r.size()
    }
    fn read_of<S: SyncReader + ?Sized>(&self, r: &S, offset: u64, len: u64) -> Result<Bytes> {
        let b = r.read(offset, len)?;
        self.stats.record(b.len() as u64);
        Ok(b)
    }
    fn read_ranges_of<S: SyncReader + ?Sized>(
        &self,
        r: &S,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let b = r.read_ranges(ranges)?;
        self.stats.record(total(&b));
        Ok(b)
    }
    fn read_tail_of<S: SyncReader + ?Sized>(&self, r: &S, len: u64) -> Result<Tail> {
        let t = r.read_tail(len)?;
        self.stats.record(t.bytes.len() as u64);
        Ok(t)
    }
}

impl<R: SyncReader> SyncReader for CountingReader<R> {
    fn location(&self) -> &str {
        self.0.inner.location()
    }
    fn size(&self) -> Result<u64> {
        self.0.size_of(&self.0.inner)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.0.read_of(&self.0.inner, offset, len)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.0.read_ranges_of(&self.0.inner, ranges)
    }
    fn read_tail(&self, len: u64) -> Result<Tail> {
        self.0.read_tail_of(&self.0.inner, len)
    }
    fn close(&self) -> Result<()> {
        self.0.inner.close()
    }
}

/// The synchronous view of a [`CountingReader`] over an [`AsyncReader`]: every call goes
/// to the inner reader's view, counted as the async calls are.
impl<R: AsyncReader> SyncReader for Counted<R> {
    fn location(&self) -> &str {
        self.inner.location()
    }
    fn size(&self) -> Result<u64> {
        self.size_of(self.inner.sync_view()?)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.read_of(self.inner.sync_view()?, offset, len)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.read_ranges_of(self.inner.sync_view()?, ranges)
    }
    fn read_tail(&self, len: u64) -> Result<Tail> {
        self.read_tail_of(self.inner.sync_view()?, len)
    }
    fn close(&self) -> Result<()> {
        self.inner.sync_view()?.close()
    }
}

#[async_trait]
impl<R: AsyncReader> AsyncReader for CountingReader<R> {
    fn location(&self) -> &str {
        self.0.inner.location()
    }
    async fn size(&self) -> Result<u64> {
        self.0.stats.add_request();
        self.0.inner.size().await
    }
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let b = self.0.inner.read(offset, len).await?;
        self.0.stats.record(b.len() as u64);
        Ok(b)
    }
    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let b = self.0.inner.read_ranges(ranges).await?;
        self.0.stats.record(total(&b));
        Ok(b)
    }
    async fn read_tail(&self, len: u64) -> Result<Tail> {
        let t = self.0.inner.read_tail(len).await?;
        self.0.stats.record(t.bytes.len() as u64);
        Ok(t)
    }
    async fn close(&self) -> Result<()> {
        self.0.inner.close().await
    }
    fn close_sync(&self) {
        self.0.inner.close_sync()
    }
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        self.0.inner.as_sync()?;
        Some(&self.0)
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

    /// An async reader without a synchronous view (as a network reader).
    #[derive(Debug)]
    struct Remote;

    #[async_trait]
    impl AsyncReader for Remote {
        fn location(&self) -> &str {
            "remote"
        }
        async fn size(&self) -> Result<u64> {
            Ok(0)
        }
        async fn read(&self, _: u64, _: u64) -> Result<Bytes> {
            Ok(Bytes::new())
        }
        async fn close(&self) -> Result<()> {
            Ok(())
        }
        fn close_sync(&self) {}
    }

    /// Counting an async reader, the sync view exists exactly when the inner's does, and
    /// counts its calls as the async ones are counted.
    #[tokio::test(flavor = "current_thread")]
    async fn the_sync_view_of_a_counting_async_reader_counts_the_same() {
        assert!(CountingReader::new(Remote).as_sync().is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let inner = crate::Backend::open_async(&crate::SeekIo::new(), &path)
            .await
            .unwrap();
        let counting = CountingReader::new(inner);
        let view = counting.as_sync().expect("a local reader has a view");
        assert_eq!(&view.read(1, 2).unwrap()[..], b"12");
        assert_eq!(view.read_ranges(&[0..1, 5..7]).unwrap().len(), 2);
        assert_eq!(view.read_tail(4).unwrap().size, 10);
        assert_eq!(view.size().unwrap(), 10);
        let sync_counts = counting.stats().reset();
        counting.read(1, 2).await.unwrap();
        counting.read_ranges(&[0..1, 5..7]).await.unwrap();
        counting.read_tail(4).await.unwrap();
        counting.size().await.unwrap();
        let async_counts = counting.stats().snapshot();
        assert_eq!(
            sync_counts,
            StatsSnapshot {
                requests: 4,
                bytes_received: 2 + 3 + 4,
                bytes_sent: 0,
                retries: 0
            }
        );
        assert_eq!(sync_counts, async_counts);
        // A failed call is not a request, on either side.
        assert!(view.read(9, 5).is_err());
        assert_eq!(counting.stats().snapshot(), async_counts);
    }
}
