//! `UringIo`: batched reads submitted to io_uring at a queue depth, and an `O_DIRECT`
//! cold-read mode (feature `uring`, Linux).

use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};

use super::buffers::{Arena, read_fresh};
use super::shared_file::SharedFile;
use super::uring_ring::{self, Failure, Op};
use super::{
    BlockingAsync, DEFAULT_BATCH_ARENA, LOCAL_COALESCE, LocalReader, blocking, buf_len,
    check_ranges, describe, open_file_with,
};
use crate::backend::{Backend, Capabilities};
use crate::coalesce::{CoalescePolicy, MergedRange, plan, split_owned};
use crate::error::{Error, Result, check_range};
use crate::reader::{AsyncReader, SyncReader, Tail};

/// Default of [`UringIo::queue_depth`]: 64 reads in flight.
pub const DEFAULT_QUEUE_DEPTH: u32 = 64;

/// Batched reads through io_uring (feature `uring`, Linux only).
///
/// `read_ranges` plans merged reads as [`PreadIo`](super::PreadIo) does (same coalescing
/// policy, same reusable batch buffer) and then, instead of one `pread` after another,
/// submits them all to an io_uring with up to [`queue_depth`](UringIo::queue_depth) in
/// flight, so the device sees the whole batch at once. Completions are reaped as they come;
/// a short read is resubmitted for its rest, `EAGAIN`/`EINTR` are retried, end of file
/// before a range's end is [`Error::ShortRead`] and an OS error is [`Error::Io`], both
/// naming the file. A single `read` (and `read_tail`) of the buffered mode is one `pread`:
/// one range gains nothing from a queue, and a `pread` of cached pages is one system call
/// where a ring round trip may hand the read to a kernel worker.
///
/// Each thread keeps one ring, created on its first batch and shared by every reader used on
/// it; a batch submits and reaps all of its reads before it returns. Async readers run opens
/// and reads on tokio's blocking pool (each pool thread with its own ring), like `PreadIo`.
/// Files are opened as `PreadIo` opens them (a directory is an error).
///
/// Where `io_uring_setup` is refused (kernels before 5.6, `kernel.io_uring_disabled`, a
/// seccomp profile such as Docker's default), [`is_supported`](Backend::is_supported) is
/// `false` and opening fails with [`Error::Unsupported`].
///
/// # `O_DIRECT` cold reads
/// [`UringIo::direct`] opens files with `O_DIRECT`: reads bypass the page cache (no
/// readahead, no cache pollution, nothing left cached). Every merged read is widened to the
/// file system's direct-IO alignment (`statx(STATX_DIOALIGN)`, 512 bytes on ext4 over a
/// virtio disk, 4096 on many devices) into an aligned buffer, and the asked bytes are handed
/// out as slices of it. In this mode single reads go through the ring too (they need the
/// same alignment). A file system without real direct IO fails the open with
/// [`Error::Unsupported`]: those that refuse `O_DIRECT` outright, one whose `statx` reports
/// no direct-IO alignment for the file, and tmpfs, which since Linux 6.6 accepts `O_DIRECT`
/// but reads through the page cache anyway.
///
/// ```
/// # #[cfg(target_os = "linux")] {
/// use guideloom_io::{Backend, SyncReader, UringIo};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("shard.bin");
/// std::fs::write(&path, b"hello, world")?;
///
/// let backend = UringIo::new().with_queue_depth(32);
/// if !backend.is_supported() {
///     return Ok(()); // io_uring refused here (seccomp, sysctl): use PreadIo
/// }
/// let reader = backend.open(&path)?;
/// let parts = reader.read_ranges(&[7..12, 0..5])?;
/// assert_eq!((&parts[0][..], &parts[1][..]), (&b"world"[..], &b"hello"[..]));
///
/// match UringIo::new().direct().open(&path) {
///     Ok(cold) => assert_eq!(&cold.read(7, 5)?[..], b"world"),
///     Err(guideloom_io::Error::Unsupported { .. }) => {} // tmpfs and friends
///     Err(e) => return Err(e.into()),
/// }
/// # Ok(()) }
/// # main().unwrap();
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UringIo {
    coalesce: CoalescePolicy,
    queue_depth: u32,
    direct: bool,
    batch_arena: u64,
}

impl Default for UringIo {
    fn default() -> Self {
        UringIo {
            coalesce: LOCAL_COALESCE,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            direct: false,
            batch_arena: DEFAULT_BATCH_ARENA,
        }
    }
}

impl UringIo {
    /// The buffered backend with [`LOCAL_COALESCE`] and a queue depth of
    /// [`DEFAULT_QUEUE_DEPTH`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens files with `O_DIRECT` (see "`O_DIRECT` cold reads" above).
    ///
    /// ```
    /// use guideloom_io::UringIo;
    /// assert!(UringIo::new().direct().is_direct());
    /// assert!(!UringIo::new().is_direct());
    /// ```
    #[must_use]
    pub fn direct(mut self) -> Self {
        self.direct = true;
        self
    }

    /// Whether files are opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
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

    /// At most `depth` reads of a batch in flight at once (clamped to `1..=4096`).
    ///
    /// ```
    /// use guideloom_io::UringIo;
    /// assert_eq!(UringIo::new().queue_depth(), 64);
    /// assert_eq!(UringIo::new().with_queue_depth(0).queue_depth(), 1);
    /// ```
    #[must_use]
    pub fn with_queue_depth(mut self, depth: u32) -> Self {
        self.queue_depth = depth.clamp(1, 4096);
        self
    }

    /// The most reads of a batch in flight at once.
    pub fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    /// Each reader reuses one buffer of up to `max_len` bytes for its batches, as
    /// [`PreadIo::with_batch_arena`](super::PreadIo::with_batch_arena) does.
    #[must_use]
    pub fn with_batch_arena(mut self, max_len: u64) -> Self {
        self.batch_arena = max_len;
        self
    }

    /// The largest batch buffer a reader keeps for reuse.
    pub fn batch_arena(&self) -> u64 {
        self.batch_arena
    }
}

#[cfg(test)]
thread_local! {
    /// Tests only: a refusal this thread reports instead of the probe's answer.
    static REFUSAL_FOR_TESTS: std::cell::Cell<Option<&'static str>> =
        const { std::cell::Cell::new(None) };
}

/// Tests only: runs `f` on this thread as if the kernel had refused io_uring with `why`.
#[cfg(test)]
pub(super) fn refused_for_tests<T>(why: &'static str, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            REFUSAL_FOR_TESTS.with(|r| r.set(None));
        }
    }
    REFUSAL_FOR_TESTS.with(|r| r.set(Some(why)));
    let _reset = Reset;
    f()
}

/// Whether this process may use io_uring: `Err` with why not. Probed once.
pub(super) fn ring_support() -> std::result::Result<(), &'static str> {
    #[cfg(test)]
    if let Some(why) = REFUSAL_FOR_TESTS.with(std::cell::Cell::get) {
        return Err(why);
    }
    static PROBE: OnceLock<Option<String>> = OnceLock::new();
    let refusal = PROBE.get_or_init(|| uring_ring::probe().err().map(|e| e.to_string()));
    refusal.as_deref().map_or(Ok(()), Err)
}

#[async_trait]
impl Backend for UringIo {
    type Location = PathBuf;

    fn name(&self) -> &'static str {
        "UringIo"
    }

    fn capabilities(&self) -> Capabilities {
        let supported = self.is_supported();
        Capabilities {
            sync: supported,
            r#async: supported,
            batched_ranges: supported, // coalesced, and the merged reads in flight together
            suffix_reads: supported,   // the size is known from open
            zero_copy: false,
        }
    }

    fn is_supported(&self) -> bool {
        ring_support().is_ok()
    }

    fn open(&self, location: &PathBuf) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(UringReader::open(location, *self)?))
    }

    async fn open_async(&self, location: &PathBuf) -> Result<Box<dyn AsyncReader>> {
        let config = *self;
        let path = location.clone();
        let reader = blocking(&describe(location), move || {
            UringReader::open(&path, config)
        })
        .await?;
        Ok(Box::new(BlockingAsync::new(reader)))
    }
}

/// Direct-IO alignment of a file: file offsets and lengths to multiples of `offset`, buffer
/// addresses to multiples of `mem` (both 1 for buffered reads).
#[derive(Debug, Clone, Copy)]
struct Align {
    offset: u64,
    mem: usize,
}

impl Align {
    const NONE: Align = Align { offset: 1, mem: 1 };
}

/// Alignment assumed where `statx` cannot say (kernels before 6.1): the largest in common use.
const FALLBACK_DIO_ALIGN: u32 = 4096;

/// The direct-IO alignment of `file`, or `Unsupported` if its file system has no real
/// direct IO.
#[allow(unsafe_code)]
fn dio_align(file: &File, location: &str) -> Result<Align> {
    let refuse = |why: String| {
        Error::unsupported(
            "UringIo",
            "O_DIRECT reads",
            format!("{location}: {why}; use the buffered mode (UringIo::new())"),
        )
    };
    // SAFETY: `statx` is plain data; all zeroes is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open while `file` is borrowed; the path is an empty C string
    // with `AT_EMPTY_PATH`, so the call describes the descriptor; `stx` is valid for writes.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0 {
        if stx.stx_dio_offset_align == 0 {
            return Err(refuse(
                "its file system reports no direct-IO support for it (statx dio alignment 0)"
                    .to_owned(),
            ));
        }
        return Ok(Align {
            offset: u64::from(stx.stx_dio_offset_align),
            mem: usize::try_from(stx.stx_dio_mem_align.max(1)).unwrap_or(4096),
        });
    }
    // SAFETY: as above, for `statfs`.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open while `file` is borrowed; `fs` is valid for writes.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) };
    if rc == 0 && fs.f_type == libc::TMPFS_MAGIC {
        return Err(refuse(
            "it is on tmpfs, which accepts O_DIRECT but reads through the page cache".to_owned(),
        ));
    }
    Ok(Align {
        offset: u64::from(FALLBACK_DIO_ALIGN),
        mem: FALLBACK_DIO_ALIGN as usize,
    })
}

/// Where one merged read lands in the batch buffer.
#[derive(Debug)]
struct Slot {
    /// Offset of its region in the batch buffer (from the aligned base).
    buf_off: usize,
    /// File offset of the region's first byte (the merged start, rounded down when direct).
    file_off: u64,
    /// Bytes asked of the kernel (rounded up when direct).
    len: usize,
    /// Bytes that must arrive: up to the merged range's end.
    need: usize,
}

/// A `UringIo` reader: the file shared by its reads until closed.
#[derive(Debug)]
pub(super) struct UringReader {
    location: String,
    size: u64,
    config: UringIo,
    align: Align,
    file: SharedFile,
    arena: Arena,
}

impl UringReader {
    fn open(path: &Path, config: UringIo) -> Result<Self> {
        ring_support().map_err(|why| {
            Error::unsupported(
                "UringIo",
                "io_uring",
                format!("io_uring_setup refused ({why}); use PreadIo"),
            )
        })?;
        let location = describe(path);
        let flags = if config.direct { libc::O_DIRECT } else { 0 };
        // Directories and other non-regular files are refused before the open.
        let (file, size) = open_file_with(flags, path, &location).map_err(|e| match e {
            Error::Io { source, .. }
                if config.direct && source.raw_os_error() == Some(libc::EINVAL) =>
            {
                Error::unsupported(
                    "UringIo",
                    "O_DIRECT reads",
                    format!("{location}: its file system refuses O_DIRECT ({source}); use the buffered mode (UringIo::new())"),
                )
            }
            e => e,
        })?;
        let align = if config.direct {
            dio_align(&file, &location)?
        } else {
            Align::NONE
        };
        tracing::debug!(backend = "UringIo", location = %location, size, direct = config.direct, align = align.offset, "opened");
        Ok(UringReader {
            location,
            size,
            config,
            align,
            file: SharedFile::new(file),
            arena: Arena::new(config.batch_arena),
        })
    }

    /// Runs `f` on the open file under a shared lock, or fails with `Closed`.
    fn with_file<T>(&self, f: impl FnOnce(&File) -> Result<T>) -> Result<T> {
        self.file.with(&self.location, f)
    }

    /// One read of the buffered mode is a `pread`; of the direct mode, a batch of one.
    fn read_one(&self, file: &File, offset: u64, len: u64) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        if !self.config.direct {
            return read_fresh(&self.location, file, offset, len);
        }
        let mut out = self.batch(file, std::slice::from_ref(&(offset..offset + len)))?;
        Ok(out.pop().unwrap_or_default())
    }

    /// Where each merged read of `plan` goes, and the batch buffer's length.
    fn layout(&self, plan: &[MergedRange]) -> Result<(Vec<Slot>, usize)> {
        let a = self.align.offset;
        let mut slots = Vec::with_capacity(plan.len());
        let mut total = 0u64;
        for m in plan {
            let (start, end) = if m.range.is_empty() {
                (m.range.start, m.range.start)
            } else {
                (m.range.start / a * a, m.range.end.div_ceil(a) * a)
            };
            total = total.next_multiple_of(self.align.mem as u64);
            let len = buf_len(&self.location, start, end - start)?;
            let need = buf_len(&self.location, start, m.range.end - start)?;
            let buf_off = buf_len(&self.location, start, total)?;
            slots.push(Slot {
                buf_off,
                file_off: start,
                len,
                need,
            });
            total += end - start;
        }
        // Room to align the buffer's base.
        let total = total + self.align.mem as u64;
        Ok((slots, buf_len(&self.location, 0, total)?))
    }

    /// Reads checked `ranges`: merged, laid out in one buffer, all submitted to the ring.
    fn batch(&self, file: &File, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let plan = plan(ranges, self.config.coalesce);
        let (slots, total) = self.layout(&plan)?;
        let all = self.arena.with_buf(total as u64, |buf| {
            self.fill(file, &plan, &slots, total, buf)
        })?;
        let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
        for (m, slot) in plan.iter().zip(&slots) {
            // In range: both are within the buffer's length, a `usize` (checked by `layout`).
            let from = slot.buf_off + usize::try_from(m.range.start - slot.file_off).unwrap_or(0);
            let len = usize::try_from(m.range.end - m.range.start).unwrap_or(0);
            split_owned(m, all.slice(from..from + len), ranges, &mut out);
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Submits every slot's read into `buf` and returns the filled buffer, from its aligned
    /// base.
    #[allow(unsafe_code)]
    fn fill(
        &self,
        file: &File,
        plan: &[MergedRange],
        slots: &[Slot],
        total: usize,
        buf: &mut BytesMut,
    ) -> Result<Bytes> {
        buf.clear();
        buf.reserve(total);
        let spare = &mut buf.spare_capacity_mut()[..total];
        // `align_offset` may answer "impossible"; the address arithmetic cannot (`layout` left
        // `mem` bytes of room for this).
        let addr = spare.as_ptr().addr();
        let pad = addr.next_multiple_of(self.align.mem) - addr;
        let base = spare.as_mut_ptr().cast::<u8>();
        let mut ops: Vec<Op> = plan
            .iter()
            .zip(slots)
            .map(|(m, s)| {
                let asked = (m.range.start, m.range.end - m.range.start);
                let ptr = base.wrapping_add(pad + s.buf_off);
                Op::new(s.file_off, ptr, s.len, s.need, asked)
            })
            .collect();
        match uring_ring::run(
            &self.location,
            file.as_raw_fd(),
            &mut ops,
            self.config.queue_depth,
        ) {
            Ok(()) => {}
            Err(Failure::Read(e)) => return Err(e),
            Err(Failure::Abandoned(e)) => {
                // The kernel may still write into this buffer: never free or reuse it.
                std::mem::forget(std::mem::take(buf));
                return Err(e);
            }
        }
        // Initialise what the kernel did not write (alignment padding, direct reads' tails past
        // the end of the file) so the whole buffer can be handed out as bytes.
        let used = pad + slots.last().map_or(0, |s| s.buf_off + s.len);
        let mut cursor = 0;
        for (s, op) in slots.iter().zip(&ops) {
            let region = pad + s.buf_off;
            spare[cursor..region].fill(std::mem::MaybeUninit::new(0));
            spare[region + op.done.min(s.len)..region + s.len].fill(std::mem::MaybeUninit::new(0));
            cursor = region + s.len;
        }
        spare[cursor..used].fill(std::mem::MaybeUninit::new(0));
        // SAFETY: `buf` was empty; the ring wrote the first `done` bytes of every region (run
        // returned `Ok`) and the loop above wrote every other byte of the first `used`.
        unsafe { buf.set_len(used) };
        Ok(buf.split_to(used).freeze().slice(pad..))
    }
}

impl SyncReader for UringReader {
    fn location(&self) -> &str {
        &self.location
    }

    fn size(&self) -> Result<u64> {
        self.cached_size()
    }

    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        self.with_file(|file| {
            check_range(&self.location, offset, len, self.size)?;
            self.read_one(file, offset, len)
        })
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.with_file(|file| {
            check_ranges(&self.location, ranges, self.size)?;
            self.batch(file, ranges)
        })
    }

    fn read_tail(&self, len: u64) -> Result<Tail> {
        let len = len.min(self.size);
        let bytes = self.with_file(|file| self.read_one(file, self.size - len, len))?;
        Ok(Tail {
            size: self.size,
            bytes,
        })
    }

    fn close(&self) -> Result<()> {
        // Waits for in-flight batches (which hold the read lock), then closes the file.
        self.file.close();
        Ok(())
    }
}

impl LocalReader for UringReader {
    fn cached_size(&self) -> Result<u64> {
        self.file.check_open(&self.location)?;
        Ok(self.size)
    }
}
