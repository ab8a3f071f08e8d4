//! `PreadIo`: positioned reads (`pread(2)`), unix only.

use std::fs::File;
use std::path::PathBuf;

use async_trait::async_trait;

use super::LOCAL_COALESCE;
use crate::backend::{Backend, Capabilities};
use crate::coalesce::CoalescePolicy;
use crate::error::Result;
use crate::reader::{AsyncReader, SyncReader};

/// Positioned reads with `pread(2)` (`std::os::unix::fs::FileExt::read_at`): no cursor, so
/// concurrent reads on one reader run in parallel with no lock around the system call.
///
/// **Unix only.** Elsewhere [`is_supported`](Backend::is_supported) is `false` and both
/// constructors answer [`Error::Unsupported`](crate::Error::Unsupported); use
/// [`SeekIo`](super::SeekIo) there.
///
/// Reads share a read-lock on the file handle that only `close` takes exclusively, so reads
/// never wait for each other and `close` waits for in-flight reads before the descriptor
/// is released. `read_ranges` coalesces neighbours with [`LOCAL_COALESCE`] (see
/// [`PreadIo::with_coalesce`]). Async readers run every call on tokio's blocking pool.
///
/// ```
/// # #[cfg(unix)] {
/// use guideloom_io::{Backend, PreadIo, SyncReader};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("shard.bin");
/// std::fs::write(&path, b"hello, world")?;
///
/// let backend = PreadIo::new();
/// assert!(backend.is_supported());
/// let reader = backend.open(&path)?;
/// let parts = reader.read_ranges(&[7..12, 0..5])?;
/// assert_eq!(&parts[0][..], b"world");
/// assert_eq!(&parts[1][..], b"hello");
/// # Ok(()) }
/// # main().unwrap();
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreadIo {
    coalesce: CoalescePolicy,
}

impl Default for PreadIo {
    fn default() -> Self {
        PreadIo {
            coalesce: LOCAL_COALESCE,
        }
    }
}

impl PreadIo {
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

    /// A synchronous reader over an already-open `file` (for example an unnamed temporary
    /// file from `tempfile::tempfile()`, which has no path to open). `location` names it in
    /// errors. The size is read once, now, from the file's metadata; the reader owns the
    /// file and closes it on [`close`](SyncReader::close) or drop.
    ///
    /// ```
    /// # #[cfg(unix)] {
    /// use std::io::Write;
    /// use guideloom_io::{PreadIo, SyncReader};
    /// let mut file = tempfile::tempfile().unwrap();
    /// file.write_all(b"hello, world").unwrap();
    /// let reader = PreadIo::new().open_file(file, "staged shard").unwrap();
    /// assert_eq!(reader.size().unwrap(), 12);
    /// assert_eq!(&reader.read(7, 5).unwrap()[..], b"world");
    /// # }
    /// ```
    pub fn open_file(&self, file: File, location: &str) -> Result<Box<dyn SyncReader>> {
        #[cfg(unix)]
        {
            Ok(Box::new(unix::PreadReader::from_file(
                file,
                location.to_owned(),
                self.coalesce,
            )?))
        }
        #[cfg(not(unix))]
        {
            let _ = (file, location);
            Err(unsupported("sync reader"))
        }
    }

    /// The async face of [`open_file`](PreadIo::open_file): reads run on tokio's blocking
    /// pool, like the readers of [`Backend::open_async`].
    pub fn open_file_async(&self, file: File, location: &str) -> Result<Box<dyn AsyncReader>> {
        #[cfg(unix)]
        {
            let reader = unix::PreadReader::from_file(file, location.to_owned(), self.coalesce)?;
            Ok(Box::new(super::BlockingAsync::new(reader)))
        }
        #[cfg(not(unix))]
        {
            let _ = (file, location);
            Err(unsupported("async reader"))
        }
    }
}

#[async_trait]
impl Backend for PreadIo {
    type Location = PathBuf;

    fn name(&self) -> &'static str {
        "PreadIo"
    }

    fn capabilities(&self) -> Capabilities {
        let supported = cfg!(unix);
        Capabilities {
            sync: supported,
            r#async: supported,
            batched_ranges: supported, // coalesced; one read-lock for the batch
            suffix_reads: supported,   // the size is known from open: a tail is one pread
            zero_copy: false,
        }
    }

    fn is_supported(&self) -> bool {
        cfg!(unix)
    }

    fn open(&self, location: &PathBuf) -> Result<Box<dyn SyncReader>> {
        #[cfg(unix)]
        {
            Ok(Box::new(unix::PreadReader::open(location, self.coalesce)?))
        }
        #[cfg(not(unix))]
        {
            let _ = location;
            Err(unsupported("sync reader"))
        }
    }

    async fn open_async(&self, location: &PathBuf) -> Result<Box<dyn AsyncReader>> {
        #[cfg(unix)]
        {
            let coalesce = self.coalesce;
            let path = location.clone();
            let reader = super::blocking(&super::describe(location), move || {
                unix::PreadReader::open(&path, coalesce)
            })
            .await?;
            Ok(Box::new(super::BlockingAsync::new(reader)))
        }
        #[cfg(not(unix))]
        {
            let _ = location;
            Err(unsupported("async reader"))
        }
    }
}

#[cfg(not(unix))]
fn unsupported(operation: &'static str) -> crate::Error {
    crate::Error::unsupported(
        "PreadIo",
        operation,
        "positioned reads need a unix platform; use SeekIo or MmapIo",
    )
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::ops::Range;
    use std::os::unix::fs::FileExt;
    use std::path::Path;
    use std::sync::RwLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    use bytes::Bytes;

    use super::super::{LocalReader, check_ranges, closed, describe, fill, open_file};
    use crate::coalesce::{CoalescePolicy, read_coalesced};
    use crate::error::{Result, check_range};
    use crate::reader::{SyncReader, Tail};

    /// A `PreadIo` reader: the file behind a read-write lock (`None` once closed).
    #[derive(Debug)]
    pub(crate) struct PreadReader {
        location: String,
        size: u64,
        coalesce: CoalescePolicy,
        file: RwLock<Option<File>>,
        /// Set by `close`, so `size` answers without touching the lock.
        closed: AtomicBool,
    }

    impl PreadReader {
        pub(crate) fn open(path: &Path, coalesce: CoalescePolicy) -> Result<Self> {
            let location = describe(path);
            let (file, size) = open_file(path, &location)?;
            tracing::debug!(backend = "PreadIo", location = %location, size, "opened");
            Ok(PreadReader {
                location,
                size,
                coalesce,
                file: RwLock::new(Some(file)),
                closed: AtomicBool::new(false),
            })
        }

        /// A reader over an already-open file; the size comes from its metadata.
        pub(crate) fn from_file(
            file: File,
            location: String,
            coalesce: CoalescePolicy,
        ) -> Result<Self> {
            let meta = file
                .metadata()
                .map_err(|e| crate::Error::io(&location, e))?;
            if meta.is_dir() {
                return Err(crate::Error::io(
                    &location,
                    std::io::Error::new(
                        std::io::ErrorKind::IsADirectory,
                        "is a directory, not a file",
                    ),
                ));
            }
            tracing::debug!(backend = "PreadIo", location = %location, size = meta.len(), "opened a file handle");
            Ok(PreadReader {
                location,
                size: meta.len(),
                coalesce,
                file: RwLock::new(Some(file)),
                closed: AtomicBool::new(false),
            })
        }

        /// Runs `f` on the open file under a shared lock, or fails with `Closed`.
        fn with_file<T>(&self, f: impl FnOnce(&File) -> Result<T>) -> Result<T> {
            // A poisoned lock only means a reader panicked; the file itself is intact.
            let guard = self.file.read().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref() {
                Some(file) => f(file),
                None => Err(closed(&self.location)),
            }
        }

        fn pread(&self, file: &File, offset: u64, len: u64) -> Result<Bytes> {
            if len == 0 {
                return Ok(Bytes::new());
            }
            fill(&self.location, offset, len, |buf, at| file.read_at(buf, at))
        }
    }

    impl SyncReader for PreadReader {
        fn location(&self) -> &str {
            &self.location
        }

        fn size(&self) -> Result<u64> {
            self.cached_size()
        }

        fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
            self.with_file(|file| {
                check_range(&self.location, offset, len, self.size)?;
                self.pread(file, offset, len)
            })
        }

        fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
            self.with_file(|file| {
                check_ranges(&self.location, ranges, self.size)?;
                read_coalesced(ranges, self.coalesce, |offset, len| {
                    self.pread(file, offset, len)
                })
            })
        }

        fn read_tail(&self, len: u64) -> Result<Tail> {
            let len = len.min(self.size);
            let bytes = self.with_file(|file| self.pread(file, self.size - len, len))?;
            Ok(Tail {
                size: self.size,
                bytes,
            })
        }

        fn close(&self) -> Result<()> {
            self.closed.store(true, Ordering::Release);
            // Waits for in-flight reads, then drops the file (closing its descriptor).
            let taken = self.file.write().unwrap_or_else(|p| p.into_inner()).take();
            drop(taken);
            Ok(())
        }
    }

    impl LocalReader for PreadReader {
        fn cached_size(&self) -> Result<u64> {
            if self.closed.load(Ordering::Acquire) {
                return Err(closed(&self.location));
            }
            Ok(self.size)
        }
    }
}
