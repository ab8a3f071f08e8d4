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
/// [`PreadIo::with_coalesce`]). Buffers are filled by the kernel without being zeroed first.
///
/// # Batches share one reusable buffer
/// The merged reads of one `read_ranges` batch go into one buffer per reader (an arena of at
/// most [`with_batch_arena`](PreadIo::with_batch_arena) bytes, 32 MiB by default), which the
/// next batch reuses in place once every buffer of the previous batch has been dropped: no
/// allocation and no page faults per batch. Buffers handed out are never overwritten; one
/// still held sends the next batch to a new allocation. The cost is memory: each open reader
/// keeps its largest batch's buffer (up to the cap) for reuse, and a record kept alive keeps
/// its whole batch's allocation alive, so copy the few records you keep for long
/// (`Bytes::copy_from_slice`), or lower the cap (`0`: allocate per batch).
///
/// # Async reads
/// Async readers run opens, closes and large reads on tokio's blocking pool. A read (or batch)
/// of at most [`inline_reads`](PreadIo::inline_reads) bytes (64 KiB by default) is first tried
/// on the calling thread with `preadv2(RWF_NOWAIT)` (Linux): the kernel copies the bytes if
/// they are all in the page cache and otherwise refuses at once without waiting for I/O; a
/// refusal sends the read to the blocking pool as before. A file system that does not
/// support `RWF_NOWAIT` (FUSE and network mounts among them) refuses with `EOPNOTSUPP`, and
/// the reader then stops trying. Elsewhere than Linux every async read uses the pool.
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
    inline_reads: u64,
    batch_arena: u64,
}

impl Default for PreadIo {
    fn default() -> Self {
        PreadIo {
            coalesce: LOCAL_COALESCE,
            inline_reads: DEFAULT_INLINE_READS,
            batch_arena: DEFAULT_BATCH_ARENA,
        }
    }
}

/// Default of [`PreadIo::inline_reads`]: 64 KiB.
pub const DEFAULT_INLINE_READS: u64 = 64 * 1024;

/// Default of [`PreadIo::batch_arena`]: 32 MiB.
pub const DEFAULT_BATCH_ARENA: u64 = 32 << 20;

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

    /// Async reads (and batches) of at most `max_len` bytes first try a non-blocking
    /// `preadv2(RWF_NOWAIT)` on the calling thread, and go to tokio's blocking pool only when
    /// the kernel would have to wait for I/O (see "Async reads" above). `0` sends every async
    /// read to the blocking pool. The cap bounds how long a page-cache copy may hold an
    /// executor thread (64 KiB, the default, copies in a few microseconds).
    ///
    /// ```
    /// use guideloom_io::PreadIo;
    /// assert_eq!(PreadIo::new().inline_reads(), 64 * 1024);
    /// assert_eq!(PreadIo::new().with_inline_reads(0).inline_reads(), 0);
    /// ```
    #[must_use]
    pub fn with_inline_reads(mut self, max_len: u64) -> Self {
        self.inline_reads = max_len;
        self
    }

    /// The largest async read tried on the calling thread.
    pub fn inline_reads(&self) -> u64 {
        self.inline_reads
    }

    /// Each reader reuses one buffer of up to `max_len` bytes for its `read_ranges` batches
    /// (see "Batches share one reusable buffer" above); larger batches, and `0`, allocate per
    /// batch.
    ///
    /// ```
    /// use guideloom_io::PreadIo;
    /// assert_eq!(PreadIo::new().batch_arena(), 32 << 20);
    /// assert_eq!(PreadIo::new().with_batch_arena(0).batch_arena(), 0);
    /// ```
    #[must_use]
    pub fn with_batch_arena(mut self, max_len: u64) -> Self {
        self.batch_arena = max_len;
        self
    }

    /// The largest batch buffer a reader keeps for reuse.
    pub fn batch_arena(&self) -> u64 {
        self.batch_arena
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
                *self,
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
            let reader = unix::PreadReader::from_file(file, location.to_owned(), *self)?;
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
            Ok(Box::new(unix::PreadReader::open(location, *self)?))
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
            let config = *self;
            let path = location.clone();
            let reader = super::blocking(&super::describe(location), move || {
                unix::PreadReader::open(&path, config)
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
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    use bytes::Bytes;

    use super::super::buffers::{Arena, NowOutcome, read_fresh, read_into, read_nowait};
    use super::super::shared_file::SharedFile;
    use super::super::{LocalReader, check_ranges, describe, ensure_regular, open_file};
    use super::PreadIo;
    use crate::coalesce::{plan, planned_bytes, read_planned};
    use crate::error::{Result, check_range};
    use crate::reader::{SyncReader, Tail};

    /// A `PreadIo` reader: the file shared by its reads until closed.
    #[derive(Debug)]
    pub(crate) struct PreadReader {
        location: String,
        size: u64,
        config: PreadIo,
        file: SharedFile,
        /// The buffer `read_ranges` batches reuse.
        arena: Arena,
        /// Whether async reads still try `RWF_NOWAIT` first (cleared when the file system
        /// refuses it).
        nowait: AtomicBool,
    }

    impl PreadReader {
        pub(crate) fn open(path: &Path, config: PreadIo) -> Result<Self> {
            let location = describe(path);
            let (file, size) = open_file(path, &location)?;
            tracing::debug!(backend = "PreadIo", location = %location, size, "opened");
            Ok(Self::new(location, size, config, file))
        }

        fn new(location: String, size: u64, config: PreadIo, file: File) -> Self {
            PreadReader {
                location,
                size,
                config,
                file: SharedFile::new(file),
                arena: Arena::new(config.batch_arena),
                nowait: AtomicBool::new(config.inline_reads > 0),
            }
        }

        /// A reader over an already-open file; the size comes from its metadata.
        pub(crate) fn from_file(file: File, location: String, config: PreadIo) -> Result<Self> {
            let meta = file
                .metadata()
                .map_err(|e| crate::Error::io(&location, e))?;
            ensure_regular(meta.file_type(), &location)?;
            tracing::debug!(backend = "PreadIo", location = %location, size = meta.len(), "opened a file handle");
            Ok(Self::new(location, meta.len(), config, file))
        }

        /// Runs `f` on the open file under a shared lock, or fails with `Closed`.
        fn with_file<T>(&self, f: impl FnOnce(&File) -> Result<T>) -> Result<T> {
            self.file.with(&self.location, f)
        }

        fn pread(&self, file: &File, offset: u64, len: u64) -> Result<Bytes> {
            if len == 0 {
                return Ok(Bytes::new());
            }
            read_fresh(&self.location, file, offset, len)
        }

        /// One non-blocking attempt at `len` bytes at `offset`, if this reader still tries.
        fn now(&self, file: &File, offset: u64, len: u64) -> Option<Bytes> {
            if len == 0 {
                return Some(Bytes::new());
            }
            let n = usize::try_from(len).ok()?;
            match read_nowait(file, offset, n) {
                NowOutcome::Read(bytes) => Some(bytes),
                NowOutcome::WouldBlock => None,
                NowOutcome::Unsupported => {
                    tracing::debug!(backend = "PreadIo", location = %self.location, "no RWF_NOWAIT: async reads use the blocking pool");
                    self.nowait.store(false, Ordering::Relaxed);
                    None
                }
            }
        }

        /// Whether an async read of `len` bytes is tried inline.
        fn tries_now(&self, len: u64) -> bool {
            len <= self.config.inline_reads && self.nowait.load(Ordering::Relaxed)
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
                let plan = plan(ranges, self.config.coalesce);
                self.arena.with_buf(planned_bytes(&plan), |buf| {
                    read_planned(&plan, ranges, |offset, len| {
                        read_into(buf, &self.location, file, offset, len)
                    })
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
            self.file.close();
            Ok(())
        }
    }

    impl LocalReader for PreadReader {
        fn cached_size(&self) -> Result<u64> {
            self.file.check_open(&self.location)?;
            Ok(self.size)
        }

        fn read_now(&self, offset: u64, len: u64) -> Option<Result<Bytes>> {
            if !self.tries_now(len) {
                return None;
            }
            self.file
                .try_with(&self.location, |file| self.now(file, offset, len).map(Ok))
        }

        fn read_ranges_now(&self, ranges: &[Range<u64>]) -> Option<Result<Vec<Bytes>>> {
            let plan = plan(ranges, self.config.coalesce);
            if !self.tries_now(planned_bytes(&plan)) {
                return None;
            }
            self.file.try_with(&self.location, |file| {
                read_planned(&plan, ranges, |offset, len| {
                    self.now(file, offset, len).ok_or(())
                })
                .ok()
                .map(Ok)
            })
        }
    }
}
