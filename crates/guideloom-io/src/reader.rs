//! The reader traits: what every backend hands out for one object.
//!
//! Two flavours share one contract (see `docs/io.md`):
//! - [`SyncReader`] for threads and training loops;
//! - [`AsyncReader`] for tokio callers.
//!
//! Both are dyn-compatible: storages hold `Box<dyn SyncReader>` / `Arc<dyn AsyncReader>`.

use std::fmt::Debug;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Result, check_range};

/// The result of a tail read: the object's size and its last bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The size of the whole object, in bytes.
    pub size: u64,
    /// The last `min(len, size)` bytes of the object.
    pub bytes: Bytes,
}

impl Tail {
    /// The offset in the object at which [`Tail::bytes`] starts.
    pub fn offset(&self) -> u64 {
        self.size - self.bytes.len() as u64
    }
}

/// Length of a range, saturating at zero for reversed ranges.
fn range_len(r: &Range<u64>) -> u64 {
    r.end.saturating_sub(r.start)
}

/// A synchronous reader of one immutable object.
///
/// # Contract
/// - [`read`](SyncReader::read) returns **exactly** `len` bytes or an error; a short read is
///   [`Error::ShortRead`](crate::Error::ShortRead), a range past the end is
///   [`Error::OutOfRange`](crate::Error::OutOfRange). A zero-length read in range returns an
///   empty buffer.
/// - Reads take `&self` and may run concurrently from many threads without interfering.
/// - Returned [`Bytes`] stay valid for as long as they are held, even after `close`.
/// - [`close`](SyncReader::close) is idempotent; reads after it fail with
///   [`Error::Closed`](crate::Error::Closed).
///
/// Only `location`, `size`, `read` and `close` must be implemented; the batched and tail
/// reads have correct (if unoptimised) defaults that backends override to save requests.
pub trait SyncReader: Send + Sync + Debug {
    /// The object this reader reads, as displayed in errors.
    fn location(&self) -> &str;

    /// The object's size in bytes.
    fn size(&self) -> Result<u64>;

    /// Reads exactly `len` bytes starting at `offset`.
    fn read(&self, offset: u64, len: u64) -> Result<Bytes>;

    /// Reads many ranges; the result has one buffer per range, in the same order.
    ///
    /// The default reads them one by one. Backends override it to coalesce neighbours.
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        ranges
            .iter()
            .map(|r| self.read(r.start, range_len(r)))
            .collect()
    }

    /// Reads the last `len` bytes (fewer if the object is smaller) and reports the size.
    ///
    /// The default costs a size lookup plus a read; remote backends answer it with one
    /// suffix request, which is how a shard opens in one round trip.
    fn read_tail(&self, len: u64) -> Result<Tail> {
        let size = self.size()?;
        let len = len.min(size);
        let bytes = self.read(size - len, len)?;
        Ok(Tail { size, bytes })
    }

    /// Releases the reader's resources. Idempotent; reads afterwards fail.
    fn close(&self) -> Result<()>;
}

/// An asynchronous reader of one immutable object; the same contract as [`SyncReader`].
///
/// Implementations must not block the executor: local backends move blocking system calls
/// to `spawn_blocking` (or prove they cannot block, as an mmap slice cannot).
#[async_trait]
pub trait AsyncReader: Send + Sync + Debug {
    /// The object this reader reads, as displayed in errors.
    fn location(&self) -> &str;

    /// The object's size in bytes (may cost a request on first call for remote backends).
    async fn size(&self) -> Result<u64>;

    /// Reads exactly `len` bytes starting at `offset`.
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes>;

    /// Reads many ranges; one buffer per range, in order. Default: one by one.
    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let mut out = Vec::with_capacity(ranges.len());
        for r in ranges {
            out.push(self.read(r.start, range_len(r)).await?);
        }
        Ok(out)
    }

    /// Reads the last `len` bytes (fewer if the object is smaller) and reports the size.
    async fn read_tail(&self, len: u64) -> Result<Tail> {
        let size = self.size().await?;
        let len = len.min(size);
        let bytes = self.read(size - len, len).await?;
        Ok(Tail { size, bytes })
    }

    /// Releases the reader's resources. Idempotent; reads afterwards fail.
    async fn close(&self) -> Result<()>;

    /// Synchronous, best-effort close for cleanup from `Drop`. Idempotent.
    fn close_sync(&self);

    /// A view of this reader that reads **on the calling thread**, for a caller that may
    /// block it (a synchronous API, never an executor's worker): `Some` when this reader can
    /// read without its executor (a mapping's slice, a local file's `pread`), `None` when it
    /// cannot (network IO); the caller then awaits the async methods. Default: `None`.
    ///
    /// The view is this reader, not a copy: its reads return the same bytes and errors as
    /// the async ones, and a wrapper (a counter, a checker) answers with a view of itself
    /// that still counts or checks, `Some` exactly when its inner reader's is. A reader's
    /// answer does not change over its life (closing it makes the view's reads fail with
    /// [`Error::Closed`](crate::Error::Closed), as the async reads do); wrappers rely on that,
    /// see [`AsyncReaderExt::sync_view`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_io::Result<()> {
    /// use guideloom_io::{AsyncReader, Backend, PreadIo};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("f");
    /// # std::fs::write(&path, b"hello world").unwrap();
    /// let reader = PreadIo::new().open_async(&path).await?;
    /// // A local file reads on this thread, no trip to the blocking pool.
    /// let view = reader.as_sync().expect("a local reader has a synchronous view");
    /// assert_eq!(&view.read(6, 5)?[..], b"world");
    /// # Ok(()) }
    /// ```
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        None
    }
}

macro_rules! forward_sync {
    ($($ty:ty),*) => {$(
        impl<T: SyncReader + ?Sized> SyncReader for $ty {
            fn location(&self) -> &str { (**self).location() }
            fn size(&self) -> Result<u64> { (**self).size() }
            fn read(&self, offset: u64, len: u64) -> Result<Bytes> { (**self).read(offset, len) }
            fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
                (**self).read_ranges(ranges)
            }
            fn read_tail(&self, len: u64) -> Result<Tail> { (**self).read_tail(len) }
            fn close(&self) -> Result<()> { (**self).close() }
        }
    )*};
}
forward_sync!(&T, Box<T>, Arc<T>);

macro_rules! forward_async {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<T: AsyncReader + ?Sized> AsyncReader for $ty {
            fn location(&self) -> &str { (**self).location() }
            async fn size(&self) -> Result<u64> { (**self).size().await }
            async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
                (**self).read(offset, len).await
            }
            async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
                (**self).read_ranges(ranges).await
            }
            async fn read_tail(&self, len: u64) -> Result<Tail> { (**self).read_tail(len).await }
            async fn close(&self) -> Result<()> { (**self).close().await }
            fn close_sync(&self) { (**self).close_sync() }
            fn as_sync(&self) -> Option<&dyn SyncReader> { (**self).as_sync() }
        }
    )*};
}
forward_async!(&T, Box<T>, Arc<T>);

/// Conveniences on every [`SyncReader`]; implemented for all readers, never by hand.
pub trait SyncReaderExt: SyncReader {
    /// Reads a `Range<u64>`.
    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        self.read(range.start, range_len(&range))
    }

    /// Reads the whole object.
    fn read_all(&self) -> Result<Bytes> {
        let size = self.size()?;
        self.read(0, size)
    }

    /// Reads `offset..offset+len`, first checking it lies inside the object.
    fn read_checked(&self, offset: u64, len: u64) -> Result<Bytes> {
        check_range(self.location(), offset, len, self.size()?)?;
        self.read(offset, len)
    }
}
impl<T: SyncReader + ?Sized> SyncReaderExt for T {}

/// Conveniences on every [`AsyncReader`]; implemented for all readers, never by hand.
#[async_trait]
pub trait AsyncReaderExt: AsyncReader {
    /// Reads a `Range<u64>`.
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        self.read(range.start, range_len(&range)).await
    }

    /// Reads the whole object.
    async fn read_all(&self) -> Result<Bytes> {
        let size = self.size().await?;
        self.read(0, size).await
    }

    /// [`as_sync`](AsyncReader::as_sync), or [`Error::Unsupported`](crate::Error::Unsupported)
    /// when the reader has none: for a wrapper's own synchronous view, whose reads go through
    /// its inner reader's view (which exists, as the wrapper offered its view only then).
    fn sync_view(&self) -> Result<&dyn SyncReader> {
        self.as_sync().ok_or_else(|| {
            crate::Error::unsupported(
                "AsyncReader",
                "sync view",
                format!("{} has no synchronous view", self.location()),
            )
        })
    }
}
impl<T: AsyncReader + ?Sized> AsyncReaderExt for T {}
