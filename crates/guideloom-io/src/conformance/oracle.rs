//! The oracle: reference objects of random bytes, the ranges read from them, and comparisons.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use super::chunks;
use crate::error::Error;
use crate::reader::Tail;

/// One reference object: its name, its exact bytes and where the fixture put it.
#[derive(Debug, Clone)]
pub(super) struct Obj<L> {
    pub(super) name: &'static str,
    pub(super) bytes: Bytes,
    pub(super) location: L,
}

impl<L> Obj<L> {
    pub(super) fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The reference bytes of `offset..offset + len` (which the caller keeps in range).
    pub(super) fn slice(&self, offset: u64, len: u64) -> &[u8] {
        let start = to_usize(offset);
        &self.bytes[start..start + to_usize(len)]
    }
}

/// `u64` → `usize` for offsets inside an in-memory object (always fits).
pub(super) fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Name and bytes of each reference object.
pub(super) type Contents = Vec<(&'static str, Bytes)>;

/// The reference contents: name and size of each test object, bytes drawn from `seed` (the
/// large one by [`chunks::pseudo_random`], fast enough for many MiB).
pub(super) fn contents(seed: u64, large_size: usize) -> Contents {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut make = |n: usize| {
        let mut v = vec![0u8; n];
        rng.fill_bytes(&mut v);
        Bytes::from(v)
    };
    let (one, small) = (make(1), make(4099));
    vec![
        ("empty", Bytes::new()),
        ("one", one),
        ("small", small),
        (
            "large",
            chunks::pseudo_random(rng.next_u64(), large_size.max(2)),
        ),
    ]
}

/// Longest "large" random read (about the whole large object of earlier versions):
/// multi-MiB reads are made deliberately, at the boundaries (see [`chunks`]), not by chance.
const RANDOM_LONG_CAP: u64 = 256 * 1024;

/// `n` random in-range `(offset, len)` pairs for an object of `size > 0` bytes: tiny, medium,
/// large (up to 256 KiB), and reads that end exactly at the end of the object.
pub(super) fn random_reads(rng: &mut StdRng, size: u64, n: usize) -> Vec<(u64, u64)> {
    (0..n).map(|_| random_read(rng, size)).collect()
}

fn random_read(rng: &mut StdRng, size: u64) -> (u64, u64) {
    let max_len = |cap: u64| cap.min(size);
    match rng.random_range(0..10u32) {
        0..=3 => {
            let len = rng.random_range(0..=max_len(16));
            (rng.random_range(0..=size - len), len)
        }
        4..=6 => {
            let len = rng.random_range(0..=max_len(4096));
            (rng.random_range(0..=size - len), len)
        }
        7..=8 => {
            let len = rng.random_range(0..=max_len(RANDOM_LONG_CAP));
            (rng.random_range(0..=size - len), len)
        }
        _ => {
            let len = rng.random_range(0..=max_len(8192));
            (size - len, len)
        }
    }
}

/// A read for the concurrency checks: 1..=4096 bytes at a random offset.
pub(super) fn concurrent_read(rng: &mut StdRng, size: u64) -> (u64, u64) {
    let offset = rng.random_range(0..size);
    let len = rng.random_range(1..=(size - offset).min(4096));
    (offset, len)
}

/// Iteration `i` of a concurrency worker: a single read or a batch of three, small reads
/// with one in four across a chunk boundary (while another thread reads the chunk on
/// either side), as ranges of an object of `size > 0` bytes.
pub(super) fn concurrent_op(rng: &mut StdRng, size: u64, i: usize) -> ConcurrentOp {
    let small = |rng: &mut StdRng| {
        let (off, len) = concurrent_read(rng, size);
        off..off + len
    };
    let crossing = |rng: &mut StdRng| {
        chunks::crossing_read(rng, size).map_or_else(|| small(rng), |(off, len)| off..off + len)
    };
    match i % 8 {
        7 => ConcurrentOp::Batch(vec![small(rng), crossing(rng), small(rng)]),
        3 => ConcurrentOp::Read(crossing(rng)),
        _ => ConcurrentOp::Read(small(rng)),
    }
}

/// One operation of a concurrency worker (see [`concurrent_op`]).
pub(super) enum ConcurrentOp {
    /// `read(range.start, range.end - range.start)`.
    Read(Range<u64>),
    /// `read_ranges(ranges)`.
    Batch(Vec<Range<u64>>),
}

/// How many times its quota a worker may read while waiting for the others.
const OVERLAP_CAP: usize = 100;

/// How many reads must have overlapped another read before a concurrency check may end.
pub(super) const MIN_OVERLAPS: usize = 200;

/// Paces the workers of a concurrency check so that their reads really overlap, however the
/// OS schedules them.
///
/// A worker that has done its quota keeps reading until every worker has done its quota
/// **and** at least [`MIN_OVERLAPS`] reads have overlapped another read (another read began
/// while it was in flight), up to [`OVERLAP_CAP`] times the quota. Without this, on a
/// loaded machine short quotas can run one thread after another, and a shared cursor goes
/// unnoticed; with it, the check only ends after hundreds of genuinely concurrent reads.
#[derive(Debug)]
pub(super) struct Overlap {
    quota: usize,
    workers: usize,
    finished: AtomicUsize,
    stopped: AtomicBool,
    started: AtomicU64,
    overlaps: AtomicUsize,
}

impl Overlap {
    pub(super) fn new(quota: usize, workers: usize) -> Self {
        Overlap {
            quota: quota.max(1),
            workers,
            finished: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            started: AtomicU64::new(0),
            overlaps: AtomicUsize::new(0),
        }
    }

    /// Whether a worker should do its iteration `i` (counting from 0).
    pub(super) fn keep_going(&self, i: usize) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return false;
        }
        if i < self.quota {
            return true;
        }
        if i == self.quota {
            self.finished.fetch_add(1, Ordering::AcqRel);
        }
        let waiting = self.finished.load(Ordering::Acquire) < self.workers
            || self.overlaps.load(Ordering::Relaxed) < MIN_OVERLAPS;
        waiting && i < self.quota.saturating_mul(OVERLAP_CAP)
    }

    /// Whether worker iteration `i` is past the quota (the worker is only waiting).
    pub(super) fn past_quota(&self, i: usize) -> bool {
        i >= self.quota
    }

    /// Marks the start of a read; pass the token to [`Overlap::end`].
    pub(super) fn begin(&self) -> u64 {
        self.started.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Marks the end of a read: it overlapped if another read began meanwhile.
    pub(super) fn end(&self, token: u64) {
        if self.started.load(Ordering::Acquire) > token {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads that overlapped another read so far.
    pub(super) fn overlaps(&self) -> usize {
        self.overlaps.load(Ordering::Relaxed)
    }

    /// Stops every worker (a failure was found).
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// Ranges that end past the object (every one must fail with `OutOfRange`).
pub(super) fn past_end(size: u64) -> Vec<(u64, u64)> {
    let mut v = vec![
        (size, 1),
        (size + 1, 0),
        (size.saturating_sub(1), 2),
        (0, size + 1),
        (size / 2, size - size / 2 + 1),
        (u64::MAX, 0),
        (u64::MAX, 1),
        (1, u64::MAX),
        (u64::MAX / 2, u64::MAX / 2 + 2),
    ];
    v.dedup();
    v
}

/// Lists of ranges for batched reads (all in range): empty list, neighbours, unsorted,
/// overlapping, repeated, empty ranges, the whole object, and scattered ranges.
pub(super) fn range_lists(rng: &mut StdRng, size: u64) -> Vec<Vec<Range<u64>>> {
    let c = |v: u64| v.min(size);
    let r = |a: u64, b: u64| c(a)..c(b);
    let mut lists = vec![
        vec![],
        vec![0..0],
        vec![r(0, 10), r(10, 20), r(30, 40)],
        vec![r(30, 40), r(0, 10), r(10, 20)],
        vec![r(0, 100), r(1, 105), r(0, 100), r(50, 60)],
        vec![r(5, 5), size..size, r(0, 3), r(3, 3)],
        vec![0..size],
        vec![size.saturating_sub(1)..size, 0..c(1)],
    ];
    let random = |rng: &mut StdRng, n: usize| -> Vec<Range<u64>> {
        random_reads(rng, size.max(1), n)
            .into_iter()
            .map(|(o, l)| c(o)..c(o + l))
            .collect()
    };
    if size > 0 {
        lists.push(random(rng, 20));
        lists.push(random(rng, 64));
        // Scattered small ranges with gaps from a few bytes to ~100 KiB, unsorted.
        let mut scattered: Vec<Range<u64>> = (0..32)
            .map(|_| {
                let o = rng.random_range(0..size);
                o..c(o + rng.random_range(0..64))
            })
            .collect();
        scattered.reverse();
        lists.push(scattered);
    }
    lists.extend(chunks::boundary_range_lists(size));
    lists
}

/// Tail lengths to ask for, including more than the object holds.
pub(super) fn tail_lens(size: u64) -> Vec<u64> {
    let mut v = vec![
        0,
        1,
        size / 2,
        size.saturating_sub(1),
        size,
        size + 1,
        size + 1000,
        u64::MAX,
    ];
    v.extend(chunks::boundary_tail_lens(size));
    v.sort_unstable();
    v.dedup();
    v
}

/// Compares a read result with the reference `want`, which starts at object offset `at`;
/// `what` names the call for the message.
pub(super) fn check_bytes(
    what: &str,
    got: Result<Bytes, Error>,
    want: &[u8],
    at: u64,
) -> Result<(), String> {
    match got {
        Ok(b) => same(what, &b, want, at),
        Err(e) => Err(format!("{what} failed: {e}")),
    }
}

/// [`check_bytes`] for hot loops: the description is only formatted on failure.
pub(super) fn check_read(
    offset: u64,
    len: u64,
    got: Result<Bytes, Error>,
    want: &[u8],
) -> Result<(), String> {
    match got {
        Ok(b) if b[..] == *want => Ok(()),
        other => check_bytes(&format!("read({offset}, {len})"), other, want, offset),
    }
}

/// Compares bytes with the reference `want` (which starts at object offset `at`), byte for
/// byte, describing where they differ in object offsets.
pub(super) fn same(what: &str, got: &[u8], want: &[u8], at: u64) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let common = got.len().min(want.len());
    let differs = |(a, b): (&u8, &u8)| a != b;
    let first = got[..common].iter().zip(&want[..common]).position(differs);
    let offset = |i: usize| at + i as u64;
    if got.len() != want.len() {
        let detail = match first {
            Some(i) => format!(
                "and they differ from the expected bytes from object offset {}",
                offset(i)
            ),
            None if got.len() < want.len() => format!(
                "the bytes it did return are right: the buffer stops early, at object offset {}",
                offset(got.len())
            ),
            None => format!(
                "the expected bytes, then {} bytes too many",
                got.len() - want.len()
            ),
        };
        return Err(format!(
            "{what} returned {} bytes, expected exactly {} (a short or long buffer is never \
             allowed: return Error::ShortRead instead); {detail}",
            got.len(),
            want.len()
        ));
    }
    let Some(i) = first else { return Ok(()) };
    let last = got.iter().zip(want).rposition(differs).unwrap_or(i);
    let count = got.iter().zip(want).filter(|&p| differs(p)).count();
    Err(format!(
        "{what} returned the right length but wrong bytes: {count} of {} bytes differ, the \
         first at byte {i} (object offset {}: got {:#04x}, expected {:#04x}), the last at \
         object offset {}",
        want.len(),
        offset(i),
        got[i],
        want[i],
        offset(last)
    ))
}

/// Compares a batched read with the reference, range by range.
pub(super) fn check_batch(
    ranges: &[Range<u64>],
    got: Result<Vec<Bytes>, Error>,
    reference: &[u8],
) -> Result<(), String> {
    let what = || format!("read_ranges({})", show_ranges(ranges));
    let got = got.map_err(|e| format!("{} failed: {e}", what()))?;
    if got.len() != ranges.len() {
        return Err(format!(
            "{} returned {} buffers for {} ranges",
            what(),
            got.len(),
            ranges.len()
        ));
    }
    for (i, (r, b)) in ranges.iter().zip(&got).enumerate() {
        let want = &reference[to_usize(r.start)..to_usize(r.end)];
        if b[..] != *want {
            same(&format!("{}, range #{i} ({r:?})", what()), b, want, r.start)?;
        }
    }
    Ok(())
}

/// Compares a tail read with the reference.
pub(super) fn check_tail(
    len: u64,
    got: Result<Tail, Error>,
    reference: &[u8],
) -> Result<(), String> {
    let what = format!("read_tail({len})");
    let tail = got.map_err(|e| format!("{what} failed: {e}"))?;
    let size = reference.len() as u64;
    if tail.size != size {
        return Err(format!(
            "{what} reported size {}, expected {size}",
            tail.size
        ));
    }
    let n = len.min(size);
    same(
        &what,
        &tail.bytes,
        &reference[to_usize(size - n)..],
        size - n,
    )
}

/// Expects `OutOfRange` for a read past the end.
pub(super) fn expect_out_of_range<T: std::fmt::Debug>(
    what: &str,
    got: Result<T, Error>,
) -> Result<(), String> {
    match got {
        Err(Error::OutOfRange { .. }) => Ok(()),
        Err(e) => Err(format!(
            "{what} past the end failed with the wrong error: expected Error::OutOfRange, got: {e}"
        )),
        Ok(v) => Err(format!(
            "{what} past the end succeeded ({}); it must fail with Error::OutOfRange",
            short_debug(&v)
        )),
    }
}

/// Expects `Closed` for an operation on a closed reader.
pub(super) fn expect_closed<T: std::fmt::Debug>(
    what: &str,
    got: Result<T, Error>,
) -> Result<(), String> {
    match got {
        Err(Error::Closed { .. }) => Ok(()),
        Err(e) => Err(format!(
            "{what} after close failed with the wrong error: expected Error::Closed, got: {e}"
        )),
        Ok(v) => Err(format!(
            "{what} after close succeeded ({}); it must fail with Error::Closed",
            short_debug(&v)
        )),
    }
}

/// Expects `NotFound` naming a location.
pub(super) fn check_not_found(what: &str, e: &Error) -> Result<(), String> {
    match e {
        Error::NotFound { location, .. } if !location.is_empty() => Ok(()),
        Error::NotFound { .. } => Err(format!(
            "{what} of a missing object gave NotFound with an empty location"
        )),
        e => Err(format!(
            "{what} of a missing object failed with the wrong error: expected Error::NotFound, \
             got: {e}"
        )),
    }
}

fn short_debug<T: std::fmt::Debug>(v: &T) -> String {
    let mut s = format!("{v:?}");
    if s.len() > 80 {
        let cut = (0..=77).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn show_ranges(ranges: &[Range<u64>]) -> String {
    let mut s = String::from("[");
    for (i, r) in ranges.iter().enumerate() {
        if i == 8 {
            let _ = write!(s, ", ... {} more", ranges.len() - 8);
            break;
        }
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{}..{}", r.start, r.end);
    }
    s.push(']');
    s
}
