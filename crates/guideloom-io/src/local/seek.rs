//! `SeekIo`: the portable default, `seek` + `read` on a `std::fs::File`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    BlockingAsync, LOCAL_COALESCE, LocalReader, blocking, check_ranges, closed, describe, fill,
    open_file,
};
use crate::backend::{Backend, Capabilities};
use crate::coalesce::{CoalescePolicy, read_coalesced};
use crate::error::{Error, Result, check_range};
use crate::reader::{AsyncReader, SyncReader, Tail};

/// The default local backend: a [`std::fs::File`] per reader, read with `seek` + `read`.
///
/// Works on every platform std supports. A file has one cursor, so each reader keeps its
/// file in a **`Mutex<File>`** and holds the lock across the `seek` and the `read`s that
/// follow it: concurrent reads on one reader are correct but run one at a time. Open one
/// reader per thread, or use [`PreadIo`](super::PreadIo) (unix), for parallel reads.
///
/// `read_ranges` takes the lock once and coalesces neighbours with [`LOCAL_COALESCE`]
/// (change it with [`SeekIo::with_coalesce`]). Async readers run every call on tokio's
/// blocking pool.
///
/// ```
/// use guideloom_io::{Backend, SeekIo, SyncReader};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("shard.bin");
/// std::fs::write(&path, b"hello, world")?;
///
/// let reader = SeekIo::new().open(&path)?;
/// assert_eq!(reader.size()?, 12);
/// assert_eq!(&reader.read(7, 5)?[..], b"world");
/// reader.close()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeekIo {
    coalesce: CoalescePolicy,
}

impl Default for SeekIo {
    fn default() -> Self {
        SeekIo {
            coalesce: LOCAL_COALESCE,
        }
    }
}

impl SeekIo {
    /// The backend with the default coalescing policy, [`LOCAL_COALESCE`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `policy` to merge neighbouring ranges in `read_ranges`.
    #[must_use]
    pub fn with_coalesce(mut self, policy: CoalescePolicy) -> Self {
        self.coalesce = policy;
        self
    }

    /// The coalescing policy in use.
    pub fn coalesce(&self) -> CoalescePolicy {
        self.coalesce
    }

    fn open_reader(&self, path: &Path) -> Result<SeekReader> {
        let location = describe(path);
        let (file, size) = open_file(path, &location)?;
        tracing::debug!(backend = "SeekIo", location = %location, size, "opened");
        Ok(SeekReader {
            location,
            size,
            coalesce: self.coalesce,
            file: Mutex::new(Some(file)),
            closed: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl Backend for SeekIo {
    type Location = PathBuf;

    fn name(&self) -> &'static str {
        "SeekIo"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            sync: true,
            r#async: true,
            batched_ranges: true, // coalesced under one lock
            suffix_reads: true,   // the size is known from open: a tail is one read
            zero_copy: false,
        }
    }

    fn open(&self, location: &PathBuf) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(self.open_reader(location)?))
    }

    async fn open_async(&self, location: &PathBuf) -> Result<Box<dyn AsyncReader>> {
        let this = *self;
        let path = location.clone();
        let reader = blocking(&describe(location), move || this.open_reader(&path)).await?;
        Ok(Box::new(BlockingAsync::new(reader)))
    }
}

/// A `SeekIo` reader: the file behind a mutex (`None` once closed).
#[derive(Debug)]
struct SeekReader {
    location: String,
    size: u64,
    coalesce: CoalescePolicy,
    file: Mutex<Option<File>>,
    /// Set by `close`, so `size` can answer without waiting for the lock.
    closed: AtomicBool,
}

impl SeekReader {
    /// Locks the file; a poisoned lock is recovered (the cursor is re-set by every read).
    fn lock(&self) -> MutexGuard<'_, Option<File>> {
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Seeks and reads exactly `len` bytes; the caller holds the lock.
    fn read_locked(&self, file: &mut File, offset: u64, len: u64) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(&self.location, e))?;
        // Reads continue from where the previous one stopped, so the absolute offset is unused.
        fill(&self.location, offset, len, |buf, _| file.read(buf))
    }
}

impl SyncReader for SeekReader {
    fn location(&self) -> &str {
        &self.location
    }

    fn size(&self) -> Result<u64> {
        self.cached_size()
    }

    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let mut guard = self.lock();
        let file = guard.as_mut().ok_or_else(|| closed(&self.location))?;
        check_range(&self.location, offset, len, self.size)?;
        self.read_locked(file, offset, len)
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let mut guard = self.lock();
        let file = guard.as_mut().ok_or_else(|| closed(&self.location))?;
        check_ranges(&self.location, ranges, self.size)?;
        read_coalesced(ranges, self.coalesce, |offset, len| {
            self.read_locked(file, offset, len)
        })
    }

    fn read_tail(&self, len: u64) -> Result<Tail> {
        let mut guard = self.lock();
        let file = guard.as_mut().ok_or_else(|| closed(&self.location))?;
        let len = len.min(self.size);
        let bytes = self.read_locked(file, self.size - len, len)?;
        Ok(Tail {
            size: self.size,
            bytes,
        })
    }

    fn close(&self) -> Result<()> {
        // Waits for an in-flight read, then drops the file (closing its descriptor).
        self.closed.store(true, Ordering::Release);
        drop(self.lock().take());
        Ok(())
    }
}

impl LocalReader for SeekReader {
    fn cached_size(&self) -> Result<u64> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(&self.location));
        }
        Ok(self.size)
    }
}
