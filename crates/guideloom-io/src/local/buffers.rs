//! `PreadIo`'s read buffers: filled by `pread(2)` without zeroing them first, a reusable
//! arena per reader for `read_ranges` batches, and the non-blocking `preadv2(RWF_NOWAIT)`
//! attempt behind inline async reads. Unix only.

use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};

use super::buf_len;
use crate::error::{Error, Result};

/// One `pread(2)` into uninitialised memory: the kernel writes at most `buf.len()` bytes and
/// reads none, so `buf` need not be zeroed first.
#[allow(unsafe_code)]
fn pread_uninit(file: &File, buf: &mut [MaybeUninit<u8>], offset: u64) -> io::Result<usize> {
    let offset =
        libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `buf` is an exclusive borrow valid for writes of `buf.len()` bytes for the whole
    // call; `pread` writes at most that many and never reads them. The descriptor stays open
    // while `file` is borrowed.
    let n = unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), offset) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Fills all of `buf` from `offset`: end of file first is [`Error::ShortRead`]; `EINTR` is
/// retried.
fn fill_uninit(
    location: &str,
    file: &File,
    buf: &mut [MaybeUninit<u8>],
    offset: u64,
) -> Result<()> {
    let mut filled = 0usize;
    while filled < buf.len() {
        match pread_uninit(file, &mut buf[filled..], offset + filled as u64) {
            Ok(0) => {
                return Err(Error::ShortRead {
                    location: location.to_owned(),
                    offset,
                    requested: buf.len() as u64,
                    got: filled as u64,
                });
            }
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(location, e)),
        }
    }
    Ok(())
}

/// `len` bytes at `offset` into a fresh buffer of exactly that size, never zeroed.
#[allow(unsafe_code)]
pub(super) fn read_fresh(location: &str, file: &File, offset: u64, len: u64) -> Result<Bytes> {
    let n = buf_len(location, offset, len)?;
    let mut buf = Vec::with_capacity(n);
    fill_uninit(location, file, &mut buf.spare_capacity_mut()[..n], offset)?;
    // SAFETY: `fill_uninit` returned `Ok`, so the kernel initialised all of the first `n`
    // bytes of the spare capacity.
    unsafe { buf.set_len(n) };
    Ok(Bytes::from(buf))
}

/// `len` bytes at `offset` into `buf`'s spare capacity (reserved if short), split off as
/// [`Bytes`] that share `buf`'s allocation; `buf` is left empty.
#[allow(unsafe_code)]
pub(super) fn read_into(
    buf: &mut BytesMut,
    location: &str,
    file: &File,
    offset: u64,
    len: u64,
) -> Result<Bytes> {
    let n = buf_len(location, offset, len)?;
    buf.clear();
    buf.reserve(n);
    fill_uninit(location, file, &mut buf.spare_capacity_mut()[..n], offset)?;
    // SAFETY: `buf` was empty, and `fill_uninit` returned `Ok`, so the kernel initialised
    // all of the first `n` bytes of its spare capacity.
    unsafe { buf.set_len(n) };
    Ok(buf.split_to(n).freeze())
}

/// One reusable buffer per reader for the merged reads of `read_ranges` batches.
///
/// A batch reserves its total length in the arena and splits every merged read off it, so
/// the records of one batch share one allocation. When every record of the previous batch
/// has been dropped, `reserve` reclaims that allocation in place (no `malloc`, no page
/// faults: the pages stay mapped); while any is still held, the arena moves to a new
/// allocation and the held records keep the old one, intact. Batches larger than the cap,
/// and batches that find the arena taken by a concurrent batch on the same reader, read into
/// buffers of their own.
#[derive(Debug)]
pub(super) struct Arena {
    buf: Mutex<BytesMut>,
    max: u64,
}

impl Arena {
    /// An empty arena that grows to at most `max` bytes (`0`: never used).
    pub(super) fn new(max: u64) -> Self {
        Arena {
            buf: Mutex::new(BytesMut::new()),
            max,
        }
    }

    /// Runs `read` with a buffer for a batch of `total` bytes: the arena when the batch fits
    /// and no other batch holds it, else a fresh buffer (of `total` bytes when within the
    /// cap, else grown read by read).
    pub(super) fn with_buf<T>(&self, total: u64, read: impl FnOnce(&mut BytesMut) -> T) -> T {
        let fits = total <= self.max;
        if fits && let Ok(mut buf) = self.buf.try_lock() {
            buf.clear();
            // In range: `total <= max`, and the cap was a `usize`-sized buffer request.
            buf.reserve(usize::try_from(total).unwrap_or(0));
            return read(&mut buf);
        }
        let capacity = if fits {
            usize::try_from(total).unwrap_or(0)
        } else {
            0
        };
        read(&mut BytesMut::with_capacity(capacity))
    }
}

/// What a non-blocking read attempt found.
pub(super) enum NowOutcome {
    /// All the bytes, read without blocking.
    Read(Bytes),
    /// Some bytes are not in the page cache (or the file ended early): read it blocking.
    WouldBlock,
    /// The file system (or kernel, or platform) refuses non-blocking reads.
    Unsupported,
}

/// `len` bytes at `offset` only if the kernel can copy them without waiting for I/O
/// (`preadv2(2)` with `RWF_NOWAIT`, Linux ≥ 4.14 on file systems that support it).
#[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
#[allow(unsafe_code)]
pub(super) fn read_nowait(file: &File, offset: u64, len: usize) -> NowOutcome {
    let Ok(at) = libc::off_t::try_from(offset) else {
        return NowOutcome::WouldBlock;
    };
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let iov = libc::iovec {
        iov_base: buf.spare_capacity_mut().as_mut_ptr().cast(),
        iov_len: len,
    };
    // SAFETY: the one `iovec` points at `len` bytes of `buf`'s spare capacity, exclusively
    // ours and valid for writes for the whole call; the kernel writes at most `len` bytes
    // and reads none. The descriptor stays open while `file` is borrowed.
    let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
    match usize::try_from(n) {
        Ok(k) if k == len => {
            // SAFETY: the kernel initialised all of the first `len` bytes.
            unsafe { buf.set_len(len) };
            NowOutcome::Read(Bytes::from(buf))
        }
        // Part of the range is not cached, or the file is shorter than it was at open.
        Ok(_) => NowOutcome::WouldBlock,
        Err(_) => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => NowOutcome::Unsupported,
            _ => NowOutcome::WouldBlock, // EAGAIN, EINTR, or an error the blocking read reports
        },
    }
}

/// Non-blocking reads need Linux's `preadv2(RWF_NOWAIT)`.
#[cfg(not(all(target_os = "linux", any(target_env = "gnu", target_env = "musl"))))]
pub(super) fn read_nowait(_file: &File, _offset: u64, _len: usize) -> NowOutcome {
    NowOutcome::Unsupported
}
