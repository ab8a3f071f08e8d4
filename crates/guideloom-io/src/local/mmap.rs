//! `MmapIo`: zero-copy reads from a shared memory mapping (`memmap2`).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;

use super::{blocking, check_ranges, closed, describe, ensure_regular, open_file, range_len};
use crate::backend::{Backend, Capabilities};
use crate::error::{Error, Result, check_range};
use crate::reader::{AsyncReader, SyncReader, Tail};

/// Memory-mapped reads: the file is mapped once at open and every read is a zero-copy
/// [`Bytes`] slice of the mapping (feature `mmap`, on by default).
///
/// The buffers are made with [`Bytes::from_owner`], which keeps the mapping alive for as
/// long as any buffer is held: `close` (or dropping the reader) only unmaps once the last
/// buffer is dropped. Reads take no lock around any system call and make none, so they run
/// in parallel from any number of threads. An empty file is not mapped at all (mapping zero
/// bytes is an error on most platforms); its reader serves empty reads.
///
/// Each reader holds the mapping in several stripes, each with its own reference count and
/// lock on its own cache line; a thread always uses the same stripe, so reads from different
/// threads do not contend on one shared counter (buffers of every stripe keep the one
/// mapping alive).
///
/// # Risks
///
/// A mapping shows the file as it is *now*, not as it was at open. The IO contract treats
/// objects as immutable; if another process **truncates** a mapped file anyway, touching a
/// page past the new end raises `SIGBUS` on unix (the process dies; this cannot be turned
/// into an error in safe code) and an access violation on Windows. If it **rewrites** bytes
/// in place, buffers already handed out change under their holders. Use `MmapIo` only on
/// files nobody modifies while they are open — which is how guideloom publishes shards
/// (immutable, create-only) — and prefer [`PreadIo`](super::PreadIo) for files you do not
/// control.
///
/// # Page faults and async readers
///
/// A read only slices: the page faults happen later, when the caller touches the bytes
/// (on a cold cache, each fault is a disk read on *that* thread). Async readers therefore
/// answer reads inline: the executor thread does no I/O inside `read`. Callers that hand
/// large, possibly cold mmap buffers to async code and scan them should do that scan under
/// `spawn_blocking` themselves. Open and close (which map and may unmap) run on tokio's
/// blocking pool.
///
/// ```
/// use guideloom_io::{Backend, MmapIo, SyncReader};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("shard.bin");
/// std::fs::write(&path, b"hello, world")?;
///
/// let reader = MmapIo::new().open(&path)?;
/// let tail = reader.read_tail(5)?;
/// assert_eq!((tail.size, &tail.bytes[..]), (12, &b"world"[..]));
/// reader.close()?;
/// // Buffers outlive the reader: the mapping stays until the last one is dropped.
/// assert_eq!(&tail.bytes[..], b"world");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MmapIo {
    _private: (),
}

impl MmapIo {
    /// The backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// A synchronous reader mapping an already-open `file` (for example one a caller opened
    /// once to check its identity). `location` names it in errors. The mapping is made now;
    /// the file handle is not needed afterwards and is dropped.
    ///
    /// ```
    /// use std::io::Write;
    /// use guideloom_io::{MmapIo, SyncReader};
    /// let mut file = tempfile::tempfile().unwrap();
    /// file.write_all(b"hello, world").unwrap();
    /// let reader = MmapIo::new().open_file(file, "published shard").unwrap();
    /// assert_eq!(&reader.read(7, 5).unwrap()[..], b"world");
    /// ```
    pub fn open_file(&self, file: std::fs::File, location: &str) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(Self::map_reader(&file, location.to_owned())?))
    }

    /// The async face of [`open_file`](MmapIo::open_file). Reads of a mapping answer inline
    /// (no blocking-pool hand-off); call this from a blocking context or accept that mapping
    /// is one `mmap` system call.
    pub fn open_file_async(
        &self,
        file: std::fs::File,
        location: &str,
    ) -> Result<Box<dyn AsyncReader>> {
        Ok(Box::new(Self::map_reader(&file, location.to_owned())?))
    }

    fn open_reader(path: &Path) -> Result<MmapReader> {
        let location = describe(path);
        let (file, _) = open_file(path, &location)?;
        Self::map_reader(&file, location)
    }

    fn map_reader(file: &std::fs::File, location: String) -> Result<MmapReader> {
        let meta = file.metadata().map_err(|e| Error::io(&location, e))?;
        ensure_regular(meta.file_type(), &location)?;
        let size = meta.len();
        let map = if size == 0 {
            None
        } else {
            Some(Arc::new(
                map_file(file).map_err(|e| Error::io(&location, e))?,
            ))
        };
        // The mapping's length is authoritative: the file could have changed since `stat`.
        let size = map.as_ref().map_or(0, |m| m.len() as u64);
        // One handle per stripe, each with a reference count of its own.
        let stripe = || {
            let data = map
                .as_ref()
                .map_or_else(Bytes::new, |m| Bytes::from_owner(Mapping(Arc::clone(m))));
            Stripe(RwLock::new(Some(data)))
        };
        tracing::debug!(backend = "MmapIo", location = %location, size, "opened (mapped)");
        Ok(MmapReader {
            inner: Arc::new(Inner {
                location,
                size,
                stripes: std::array::from_fn(|_| stripe()),
                closed: AtomicBool::new(false),
            }),
        })
    }
}

/// Maps the whole of `file` read-only.
#[allow(unsafe_code)]
fn map_file(file: &std::fs::File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: `Mmap::map` is unsafe because the mapped file may be modified or truncated by
    // another process while mapped, which safe Rust cannot rule out. The IO contract makes
    // objects immutable while readers are open (shards are published create-only), and the
    // remaining risk (SIGBUS on truncation) is documented in `MmapIo`'s `# Risks` section.
    // The mapping is read-only and never handed out as `&mut`.
    unsafe { memmap2::Mmap::map(file) }
}

/// A shared handle on one mapping, as the owner of a stripe's [`Bytes`].
struct Mapping(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Stripes of handles on the mapping per reader.
const STRIPES: usize = 8;

/// One handle on the mapping (`None` once closed), alone on its cache line.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe(RwLock<Option<Bytes>>);

/// The stripe of the calling thread: threads are numbered in the order they first read
/// (through any reader), round-robin over the stripes.
fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

#[async_trait]
impl Backend for MmapIo {
    type Location = PathBuf;

    fn name(&self) -> &'static str {
        "MmapIo"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            sync: true,
            r#async: true,
            // Nothing to coalesce: every range is already a free slice of one mapping.
            batched_ranges: false,
            suffix_reads: true, // the size is known from open: a tail is one slice
            zero_copy: true,
        }
    }

    fn open(&self, location: &PathBuf) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(Self::open_reader(location)?))
    }

    async fn open_async(&self, location: &PathBuf) -> Result<Box<dyn AsyncReader>> {
        let path = location.clone();
        let reader = blocking(&describe(location), move || Self::open_reader(&path)).await?;
        Ok(Box::new(reader))
    }
}

/// A `MmapIo` reader (sync and async): the mapping as one `Bytes` per stripe, `None` once
/// closed.
#[derive(Debug)]
struct MmapReader {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    location: String,
    size: u64,
    stripes: [Stripe; STRIPES],
    closed: AtomicBool,
}

impl Inner {
    /// Runs `f` on the calling thread's handle on the mapping, or fails with `Closed`.
    fn with_data<T>(&self, f: impl FnOnce(&Bytes) -> Result<T>) -> Result<T> {
        let stripe = &self.stripes[stripe_index()];
        // A poisoned lock only means a reader panicked; the handle itself is intact.
        let guard = stripe.0.read().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(data) => f(data),
            None => Err(closed(&self.location)),
        }
    }

    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.with_data(|data| slice(&self.location, data, offset, len))
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.with_data(|data| {
            check_ranges(&self.location, ranges, self.size)?;
            let mut out = Vec::with_capacity(ranges.len());
            for r in ranges {
                out.push(slice(&self.location, data, r.start, range_len(r))?);
            }
            Ok(out)
        })
    }

    fn read_tail(&self, len: u64) -> Result<Tail> {
        let len = len.min(self.size);
        self.with_data(|data| {
            Ok(Tail {
                size: self.size,
                bytes: slice(&self.location, data, self.size - len, len)?,
            })
        })
    }

    fn size(&self) -> Result<u64> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(&self.location));
        }
        Ok(self.size)
    }

    /// Marks the reader closed and takes every stripe's handle (waiting for reads in
    /// flight); the mapping is unmapped when the last handle and buffer sharing it are dropped.
    fn take(&self) -> Vec<Bytes> {
        self.closed.store(true, Ordering::Release);
        self.stripes
            .iter()
            .filter_map(|s| s.0.write().unwrap_or_else(|p| p.into_inner()).take())
            .collect()
    }
}

/// `data[offset..offset + len]` as a zero-copy slice, after a range check.
fn slice(location: &str, data: &Bytes, offset: u64, len: u64) -> Result<Bytes> {
    check_range(location, offset, len, data.len() as u64)?;
    // In range of `data.len()` (a `usize`), so both conversions succeed.
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = usize::try_from(offset + len).unwrap_or(usize::MAX);
    Ok(data.slice(start..end))
}

impl SyncReader for MmapReader {
    fn location(&self) -> &str {
        &self.inner.location
    }
    fn size(&self) -> Result<u64> {
        self.inner.size()
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.inner.read(offset, len)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.read_ranges(ranges)
    }
    fn read_tail(&self, len: u64) -> Result<Tail> {
        self.inner.read_tail(len)
    }
    fn close(&self) -> Result<()> {
        drop(self.inner.take());
        Ok(())
    }
}

#[async_trait]
impl AsyncReader for MmapReader {
    fn location(&self) -> &str {
        &self.inner.location
    }
    async fn size(&self) -> Result<u64> {
        self.inner.size()
    }
    // Reads slice the mapping without touching its pages: no I/O on the executor thread.
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.inner.read(offset, len)
    }
    async fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.read_ranges(ranges)
    }
    async fn read_tail(&self, len: u64) -> Result<Tail> {
        self.inner.read_tail(len)
    }
    async fn close(&self) -> Result<()> {
        // Dropping the last handle unmaps (`munmap`): do it on the blocking pool.
        let data = self.inner.take();
        blocking(&self.inner.location, move || {
            drop(data);
            Ok(())
        })
        .await
    }
    fn close_sync(&self) {
        drop(self.inner.take());
    }
    // A slice never needs the executor: the reader is its own synchronous view.
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        Some(self)
    }
}
