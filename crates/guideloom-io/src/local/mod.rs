//! Local-file backends; their documentation is the crate root's "Local backends" section.

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::coalesce::CoalescePolicy;
use crate::error::{Error, Result, check_range};
use crate::reader::{AsyncReader, SyncReader, Tail};

#[cfg(unix)]
mod buffers;
#[cfg(feature = "mmap")]
mod mmap;
mod pread;
mod seek;
#[cfg(unix)]
mod shared_file;
#[cfg(all(feature = "uring", target_os = "linux"))]
mod uring;
#[cfg(all(feature = "uring", target_os = "linux"))]
mod uring_ring;

#[cfg(feature = "mmap")]
pub use mmap::MmapIo;
pub use pread::{DEFAULT_BATCH_ARENA, DEFAULT_INLINE_READS, PreadIo};
pub use seek::SeekIo;
#[cfg(all(feature = "uring", target_os = "linux"))]
pub use uring::{DEFAULT_QUEUE_DEPTH, UringIo};

/// The coalescing policy local backends use for `read_ranges` unless told otherwise.
///
/// Local reads cost a system call each, so neighbours a few pages apart are worth merging;
/// gaps larger than [`LOCAL_MAX_GAP`] would copy more than a `pread` costs.
pub const LOCAL_COALESCE: CoalescePolicy = CoalescePolicy {
    max_gap: LOCAL_MAX_GAP,
    max_span: LOCAL_MAX_SPAN,
};

/// Largest gap (bytes) merged by [`LOCAL_COALESCE`]: 8 KiB.
pub const LOCAL_MAX_GAP: u64 = 8 * 1024;

/// Largest merged read (bytes) of [`LOCAL_COALESCE`]: 1 MiB.
pub const LOCAL_MAX_SPAN: u64 = 1024 * 1024;

/// How a path is shown in errors and logs.
fn describe(path: &Path) -> String {
    path.display().to_string()
}

/// Opens `path` for reading and returns the file with its size. Local backends read
/// regular files only: anything else is [`Error::NotRegularFile`] ([`open_file_with`]).
fn open_file(path: &Path, location: &str) -> Result<(std::fs::File, u64)> {
    open_file_with(0, path, location)
}

/// What a non-regular file is, for [`Error::NotRegularFile`]; `None` for a regular file.
fn irregular_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// `Ok` for a regular file, else the [`Error::NotRegularFile`] naming what it is.
fn ensure_regular(file_type: std::fs::FileType, location: &str) -> Result<()> {
    match irregular_kind(file_type) {
        None => Ok(()),
        Some(kind) => Err(Error::NotRegularFile {
            location: location.to_owned(),
            kind,
        }),
    }
}

/// [`open_file`] with extra `open(2)` flags (`custom_flags`, e.g. `O_DIRECT`; unix only).
///
/// The open must never wait on what it finds: `open(2)` of a FIFO blocks until a writer
/// appears, and opening a device can have effects of its own. So the path is checked with
/// `stat` first (links followed) and anything but a regular file is refused without being
/// opened; the open then adds `O_NONBLOCK` (which a FIFO swapped in meanwhile honours, and a
/// regular file ignores) and `O_NOCTTY`, the descriptor is checked again with `fstat`, so a
/// swap between the two checks is caught, and `O_NONBLOCK` is cleared before any read.
fn open_file_with(custom_flags: i32, path: &Path, location: &str) -> Result<(std::fs::File, u64)> {
    #[cfg(test)]
    open_gate::pass(path);
    let before = std::fs::metadata(path).map_err(|e| Error::io(location, e))?;
    ensure_regular(before.file_type(), location)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(custom_flags | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    let _ = custom_flags;
    let file = options.open(path).map_err(|e| Error::io(location, e))?;
    let meta = file.metadata().map_err(|e| Error::io(location, e))?;
    ensure_regular(meta.file_type(), location)?;
    #[cfg(unix)]
    {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let os = |e: nix::errno::Errno| Error::io(location, io::Error::from(e));
        let flags = OFlag::from_bits_truncate(fcntl(&file, FcntlArg::F_GETFL).map_err(os)?);
        fcntl(&file, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK)).map_err(os)?;
    }
    Ok((file, meta.len()))
}

/// The length of a request as a buffer size, or an error on platforms where it cannot fit.
fn buf_len(location: &str, offset: u64, len: u64) -> Result<usize> {
    usize::try_from(len).map_err(|_| Error::OutOfRange {
        location: location.to_owned(),
        offset,
        len,
        size: u64::MAX,
    })
}

/// Fills a fresh buffer of `len` bytes from `offset` with repeated calls of `read_some`
/// (which reads into the slice at the given absolute offset, returning the count read).
///
/// End of file before `len` bytes is [`Error::ShortRead`]; `EINTR` is retried.
fn fill(
    location: &str,
    offset: u64,
    len: u64,
    mut read_some: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
) -> Result<Bytes> {
    let n = buf_len(location, offset, len)?;
    let mut buf = vec![0u8; n];
    let mut filled = 0usize;
    while filled < n {
        match read_some(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => {
                return Err(Error::ShortRead {
                    location: location.to_owned(),
                    offset,
                    requested: len,
                    got: filled as u64,
                });
            }
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(location, e)),
        }
    }
    Ok(Bytes::from(buf))
}

/// Length of a range, saturating at zero for reversed ranges (as the trait defaults do).
fn range_len(r: &Range<u64>) -> u64 {
    r.end.saturating_sub(r.start)
}

/// Checks every range of a batch against `size` before any is read.
fn check_ranges(location: &str, ranges: &[Range<u64>], size: u64) -> Result<()> {
    ranges
        .iter()
        .try_for_each(|r| check_range(location, r.start, range_len(r), size))
}

/// The error for a read on a closed reader.
fn closed(location: &str) -> Error {
    Error::Closed {
        location: location.to_owned(),
    }
}

/// Runs a blocking closure on tokio's blocking pool, mapping a panic or cancellation of the
/// blocking task to an I/O error on `location`.
async fn blocking<T: Send + 'static>(
    location: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(Error::Io {
            location: location.to_owned(),
            source: io::Error::other(format!("blocking task failed: {e}")),
        }),
    }
}

/// A local sync reader whose `size` never blocks (it is cached at open).
trait LocalReader: SyncReader + 'static {
    /// The size cached at open, or `Closed`.
    fn cached_size(&self) -> Result<u64>;

    /// Reads the (already checked) range on the calling thread if that cannot block, or
    /// `None` to send the read to the blocking pool. The default never tries.
    fn read_now(&self, offset: u64, len: u64) -> Option<Result<Bytes>> {
        let _ = (offset, len);
        None
    }

    /// [`read_now`](LocalReader::read_now) for a checked batch: all of it, or `None`.
    fn read_ranges_now(&self, ranges: &[Range<u64>]) -> Option<Result<Vec<Bytes>>> {
        let _ = ranges;
        None
    }
}

/// The async face of a blocking local reader: every file system call on the blocking pool.
#[derive(Debug)]
struct BlockingAsync<R> {
    inner: Arc<R>,
}

impl<R: LocalReader> BlockingAsync<R> {
    fn new(inner: R) -> Self {
        BlockingAsync {
            inner: Arc::new(inner),
        }
    }
}

#[async_trait]
impl<R: LocalReader> AsyncReader for BlockingAsync<R> {
    fn location(&self) -> &str {
        self.inner.location()
    }

    async fn size(&self) -> Result<u64> {
        self.inner.cached_size()
    }

    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        // Fail fast without a trip to the blocking pool when the range is bad or we are closed.
        check_range(self.location(), offset, len, self.inner.cached_size()?)?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        if let Some(read) = self.inner.read_now(offset, len) {
            return read;
        }
        let inner = Arc::clone(&self.inner);
        blocking(self.location(), move || inner.read(offset, len)).await
    }

    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        check_ranges(self.location(), ranges, self.inner.cached_size()?)?;
        if let Some(read) = self.inner.read_ranges_now(ranges) {
            return read;
        }
        let inner = Arc::clone(&self.inner);
        let ranges = ranges.to_vec();
        blocking(self.location(), move || inner.read_ranges(&ranges)).await
    }

    async fn read_tail(&self, len: u64) -> Result<Tail> {
        self.inner.cached_size()?;
        let inner = Arc::clone(&self.inner);
        blocking(self.location(), move || inner.read_tail(len)).await
    }

    async fn close(&self) -> Result<()> {
        let inner = Arc::clone(&self.inner);
        blocking(self.location(), move || inner.close()).await
    }

    fn close_sync(&self) {
        // Closing drops a file handle: one `close(2)`, acceptable from `Drop`.
        let _ = self.inner.close();
    }

    // The caller may block: the system calls run on its thread, no trip to the pool.
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        Some(&*self.inner)
    }
}

#[cfg(test)]
mod open_gate;
#[cfg(test)]
mod tests;
#[cfg(all(test, unix))]
mod tests_pread;
#[cfg(all(test, feature = "uring", target_os = "linux"))]
mod tests_uring;
