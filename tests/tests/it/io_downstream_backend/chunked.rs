//! Broken backends that are right on small objects and wrong only past some offset or across
//! a chunk boundary, the way chunked backends break: the kit must reject each by default.
//!
//! **Every one of them passed the kit before it read a multi-MiB object by default.** Its
//! large reference object was 256 KiB + 13 bytes ([`OLD_LARGE_SIZE`]); no read ended past
//! 300 KiB, touched 1 MiB + 17, crossed a 1 or 4 MiB boundary, or asked for a tail longer
//! than 256 KiB. Each test below first runs the kit with `large_size` set back to that value
//! and asserts that the broken backend **passes** (the blind spot, kept visible), then runs
//! the default kit and asserts the [`ConformanceError`] names the check that catches the bug.
//! (Checked once against the kit's own code as of commit 55b6de3, the last before the large
//! object grew: all eight backends pass its default options.)
//!
//! | backend bug | fails |
//! |---|---|
//! | (a) reads starting in a 300 KiB prefetched head stop at its end | `whole_object` |
//! | (b) every byte at or past 1 MiB + 17 corrupt, length right | `first_last_byte` |
//! | (b′) one wrong byte at 1 MiB + 17, length right | `whole_object` |
//! | (c) a read crossing a 4 MiB boundary drops the bytes after it | `whole_object` |
//! | (c′) pieces after a 4 MiB boundary fetched from the wrong offset unless the read is aligned | `chunk_boundaries` |
//! | (d) tails longer than 2 MiB come back as the last 2 MiB | `read_tail` |
//! | (e) batched ranges longer than 4 MiB are cut at 4 MiB | `read_ranges` |
//! | (f) reads across a 1 MiB boundary assembled in one shared scratch buffer | `concurrent_reads` |

use std::sync::Mutex;

use super::{
    AsyncReader, Backend, Bytes, Capabilities, ConformanceError, ConformanceOptions, Error,
    Flavour, MemIo, MemKey, MemReader, Range, Result, SyncReader, async_trait, check_range,
    conformance, expect_failure, mem_fixture,
};
use guideloom_io::Tail;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// `ConformanceOptions::large_size` before the kit read multi-MiB objects by default.
const OLD_LARGE_SIZE: usize = 256 * 1024 + 13;

/// How a [`BuggyIo`] gets large reads wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    /// (a) Reads that start inside the first 300 KiB (which a real backend would have
    /// prefetched on open) are served from that head and stop at its end.
    HeadPrefetch,
    /// (b) Every byte at or past 1 MiB + 17 comes back with its low bit flipped (a decoder
    /// that lost sync); lengths are right.
    CorruptPast,
    /// (b′) Only the byte at 1 MiB + 17 is wrong.
    OneBadByte,
    /// (c) A read crossing a 4 MiB boundary returns the bytes up to the boundary only.
    DropSecondChunk,
    /// (c′) Reads are split at 4 MiB boundaries, but piece `k` is fetched at
    /// `offset + k × 4 MiB` instead of at the `k`-th boundary: right for aligned reads (such
    /// as the whole object), wrong bytes of the right length for every other read across.
    MisplacedChunks,
    /// (d) `read_tail` caps its suffix read at 2 MiB and never asks for the rest.
    TailCap,
    /// (e) `read_ranges` reads at most 4 MiB of each range.
    BatchCap,
    /// (f) Reads across a 1 MiB boundary are assembled piece by piece in one scratch buffer
    /// per reader, locked per piece instead of per read.
    SharedScratch,
}

const HEAD: u64 = 300 * KIB;
const CORRUPT_FROM: u64 = MIB + 17;
const CHUNK: u64 = 4 * MIB;
const TAIL_CAP: u64 = 2 * MIB;
const SCRATCH_CHUNK: u64 = MIB;

/// A `MemIo` with one [`Bug`] (sync only: the kit skips its async flavour).
#[derive(Debug, Clone)]
struct BuggyIo {
    inner: MemIo,
    bug: Bug,
}

#[derive(Debug)]
struct BuggyReader {
    inner: MemReader,
    bug: Bug,
    scratch: Mutex<Vec<u8>>,
}

#[async_trait]
impl Backend for BuggyIo {
    type Location = MemKey;
    fn name(&self) -> &'static str {
        "BuggyIo"
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.sync = true;
        caps
    }
    fn open(&self, key: &MemKey) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(BuggyReader {
            inner: self.inner.reader(key)?,
            bug: self.bug,
            scratch: Mutex::new(Vec::new()),
        }))
    }
    async fn open_async(&self, _: &MemKey) -> Result<Box<dyn AsyncReader>> {
        Err(Error::unsupported(
            "BuggyIo",
            "async reader",
            "this test backend is sync-only",
        ))
    }
}

fn us(v: u64) -> usize {
    usize::try_from(v).unwrap()
}

/// The next multiple of `chunk` strictly after `offset`.
fn next_boundary(offset: u64, chunk: u64) -> u64 {
    (offset / chunk + 1) * chunk
}

impl BuggyReader {
    /// Serves a read across `SCRATCH_CHUNK` boundaries through the shared scratch buffer.
    fn assemble(&self, data: &Bytes, offset: u64, end: u64) -> Bytes {
        let mut start = offset;
        let mut first = true;
        while start < end {
            let piece_end = next_boundary(start, SCRATCH_CHUNK).min(end);
            {
                let mut scratch = self.scratch.lock().unwrap();
                if first {
                    scratch.clear();
                }
                scratch.extend_from_slice(&data[us(start)..us(piece_end)]);
            } // The bug: the lock is let go between pieces.
            std::thread::yield_now();
            first = false;
            start = piece_end;
        }
        Bytes::copy_from_slice(&self.scratch.lock().unwrap())
    }
}

impl SyncReader for BuggyReader {
    fn location(&self) -> &str {
        &self.inner.location
    }
    fn size(&self) -> Result<u64> {
        SyncReader::size(&self.inner)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let data = self.inner.data()?;
        let size = data.len() as u64;
        check_range(&self.inner.location, offset, len, size)?;
        let end = offset + len;
        let exact = || data.slice(us(offset)..us(end));
        Ok(match self.bug {
            Bug::HeadPrefetch if offset < HEAD && end > HEAD => data.slice(us(offset)..us(HEAD)),
            Bug::CorruptPast | Bug::OneBadByte if end > CORRUPT_FROM => {
                let mut v = exact().to_vec();
                for (i, b) in v.iter_mut().enumerate() {
                    let at = offset + i as u64;
                    if at == CORRUPT_FROM || (at > CORRUPT_FROM && self.bug == Bug::CorruptPast) {
                        *b ^= 1;
                    }
                }
                Bytes::from(v)
            }
            Bug::DropSecondChunk if end > next_boundary(offset, CHUNK) => {
                data.slice(us(offset)..us(next_boundary(offset, CHUNK)))
            }
            Bug::MisplacedChunks if end > next_boundary(offset, CHUNK) => {
                let mut v = Vec::with_capacity(us(len));
                let (mut start, mut k) = (offset, 0);
                while start < end {
                    let piece_end = next_boundary(start, CHUNK).min(end);
                    let n = piece_end - start;
                    let from = (offset + k * CHUNK).min(size - n);
                    v.extend_from_slice(&data[us(from)..us(from + n)]);
                    (start, k) = (piece_end, k + 1);
                }
                Bytes::from(v)
            }
            Bug::SharedScratch if end > next_boundary(offset, SCRATCH_CHUNK) => {
                self.assemble(&data, offset, end)
            }
            _ => exact(),
        })
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let cap = if self.bug == Bug::BatchCap {
            CHUNK
        } else {
            u64::MAX
        };
        ranges
            .iter()
            .map(|r| self.read(r.start, r.end.saturating_sub(r.start).min(cap)))
            .collect()
    }
    fn read_tail(&self, len: u64) -> Result<Tail> {
        let size = SyncReader::size(self)?;
        let cap = if self.bug == Bug::TailCap {
            TAIL_CAP
        } else {
            u64::MAX
        };
        let n = len.min(size).min(cap);
        let bytes = self.read(size - n, n)?;
        Ok(Tail { size, bytes })
    }
    fn close(&self) -> Result<()> {
        SyncReader::close(&self.inner)
    }
}

/// The options of the kit before multi-MiB objects: the default but for the large size.
fn old_default_size() -> ConformanceOptions {
    let mut options = ConformanceOptions::default();
    options.large_size = OLD_LARGE_SIZE;
    options
}

/// Asserts that `bug` passes the kit at the old large size (the blind spot) and fails it by
/// default in the sync flavour; returns the failure.
fn passed_before_fails_now(bug: Bug) -> ConformanceError {
    let inner = MemIo::default();
    let io = BuggyIo {
        inner: inner.clone(),
        bug,
    };
    let before = conformance::run_all_with(&io, &mem_fixture(&inner), &old_default_size())
        .unwrap_or_else(|e| panic!("{bug:?} failed even at the old large size: {e}"));
    assert!(
        before.passed.contains(&(Flavour::Sync, "concurrent_reads")),
        "{bug:?}: {before}"
    );
    let err = expect_failure(conformance::run_all(&io, &mem_fixture(&inner)));
    assert_eq!(
        (err.backend, err.flavour),
        ("BuggyIo", Flavour::Sync),
        "{err}"
    );
    err
}

fn assert_check(err: &ConformanceError, check: &str, needles: &[&str]) {
    assert_eq!(err.check, check, "{err}");
    for needle in needles {
        assert!(err.message.contains(needle), "`{needle}` not in: {err}");
    }
}

/// The default large object's size, as the messages print it.
fn large() -> String {
    ConformanceOptions::default().large_size.to_string()
}

#[test]
fn a_short_read_past_300_kib_fails_whole_object() {
    let err = passed_before_fails_now(Bug::HeadPrefetch);
    let want = format!("read(0, {}) of `large` returned 307200 bytes", large());
    assert_check(
        &err,
        "whole_object",
        &[&want, "the buffer stops early, at object offset 307200"],
    );
}

#[test]
fn corrupt_bytes_past_1_mib_fail_first_last_byte() {
    let err = passed_before_fails_now(Bug::CorruptPast);
    let last = ConformanceOptions::default().large_size - 1;
    assert_check(
        &err,
        "first_last_byte",
        &[
            "right length but wrong bytes",
            &format!("object offset {last}"),
        ],
    );
}

#[test]
fn one_wrong_byte_at_1_mib_plus_17_fails_whole_object() {
    let err = passed_before_fails_now(Bug::OneBadByte);
    let want = format!("1 of {} bytes differ, the first at byte 1048593", large());
    assert_check(&err, "whole_object", &[&want, "object offset 1048593"]);
}

#[test]
fn dropping_the_chunk_after_a_4_mib_boundary_fails_whole_object() {
    let err = passed_before_fails_now(Bug::DropSecondChunk);
    assert_check(
        &err,
        "whole_object",
        &[
            "returned 4194304 bytes",
            "stops early, at object offset 4194304",
        ],
    );
}

#[test]
fn misplaced_chunks_after_a_4_mib_boundary_fail_chunk_boundaries() {
    // Whole-object reads start aligned and come back right: only an unaligned read across
    // the boundary shows the bug.
    let err = passed_before_fails_now(Bug::MisplacedChunks);
    assert_check(
        &err,
        "chunk_boundaries",
        &["right length but wrong bytes", "object offset 4194304"],
    );
}

#[test]
fn tails_capped_at_2_mib_fail_read_tail() {
    let err = passed_before_fails_now(Bug::TailCap);
    assert_check(
        &err,
        "read_tail",
        &["read_tail(4194305) returned 2097152 bytes, expected exactly 4194305"],
    );
}

#[test]
fn batched_ranges_capped_at_4_mib_fail_read_ranges() {
    let err = passed_before_fails_now(Bug::BatchCap);
    assert_check(&err, "read_ranges", &["returned 4194304 bytes"]);
}

#[test]
fn a_shared_scratch_buffer_for_reads_across_1_mib_fails_concurrent_reads_on_every_seed() {
    // Every single-threaded check passes (each read has the scratch to itself); the
    // concurrency check reads across chunk boundaries of the large object from many threads
    // at once, so the bug shows there, on every seed tried.
    let err = passed_before_fails_now(Bug::SharedScratch);
    assert_check(&err, "concurrent_reads", &["interfere"]);
    for seed in 1..=5u64 {
        let inner = MemIo::default();
        let io = BuggyIo {
            inner: inner.clone(),
            bug: Bug::SharedScratch,
        };
        let mut options = ConformanceOptions::default();
        options.seed = seed;
        let err = expect_failure(conformance::run_sync_with(
            &io,
            &mem_fixture(&inner),
            &options,
        ));
        assert_eq!(err.check, "concurrent_reads", "seed {seed}: {err}");
    }
}

#[test]
fn the_correct_backend_passes_at_the_old_and_the_new_size() {
    // The broken backends above differ from MemIo only in their bug.
    let io = MemIo::default();
    for options in [old_default_size(), ConformanceOptions::default()] {
        let report = conformance::run_all_with(&io, &mem_fixture(&io), &options).unwrap();
        assert!(report.skipped.is_empty(), "{report}");
    }
}
