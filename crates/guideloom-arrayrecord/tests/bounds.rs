//! Memory bounds under hostile files (`docs/arrayrecord.md`, "Safety with hostile files"):
//! files whose hashes are all right but whose counts and sizes lie, and compression bombs.
//! A counting allocator measures the peak bytes allocated on the reading thread beyond
//! what it held before; the file is served from memory without a copy, so the peak is what
//! the reader itself allocates. Each read must give a typed error or the right records,
//! within its bound: never in proportion to a count or size the file claims.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use guideloom_arrayrecord::hostile::{
    HostileFile, compressed, footer_records, simple_data, varints,
};
use guideloom_arrayrecord::{ArrayRecordReadOptions, ArrayRecordReader, Error};
use guideloom_io::check_range;
use guideloom_io::{Result as IoResult, SyncReader};
use proptest::prelude::*;

/// Counts the bytes each thread holds, and the most it held since [`peak_of`] began.
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(delta: isize) {
    // `try_with`: a thread being torn down frees without counting.
    let _ = HELD.try_with(|held| {
        let now = held.get() + delta;
        held.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// Needed: measuring allocations takes a global allocator, whose trait is unsafe.
// SAFETY: every call is forwarded to `System` with the same arguments; the counting touches
// only const-initialised thread-locals, which never allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(isize::try_from(layout.size()).unwrap_or(isize::MAX));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(isize::try_from(layout.size()).unwrap_or(isize::MAX));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-isize::try_from(layout.size()).unwrap_or(isize::MAX));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = isize::try_from(layout.size()).unwrap_or(isize::MAX);
        add(isize::try_from(new_size).unwrap_or(isize::MAX) - old);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `f`'s result and the most bytes this thread held during it beyond what it held before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = HELD.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let out = f();
    let peak = PEAK.with(Cell::get) - before;
    (out, u64::try_from(peak).unwrap_or(0))
}

const MIB: u64 = 1 << 20;

/// A file in memory, read without a copy.
#[derive(Debug)]
struct Mem(Bytes);

impl SyncReader for Mem {
    fn location(&self) -> &str {
        "mem"
    }
    fn size(&self) -> IoResult<u64> {
        Ok(self.0.len() as u64)
    }
    fn read(&self, offset: u64, len: u64) -> IoResult<Bytes> {
        check_range("mem", offset, len, self.0.len() as u64)?;
        let start = usize::try_from(offset).unwrap();
        Ok(self.0.slice(start..start + usize::try_from(len).unwrap()))
    }
    fn close(&self) -> IoResult<()> {
        Ok(())
    }
}

fn open(file: Vec<u8>, options: &ArrayRecordReadOptions) -> Result<ArrayRecordReader<Mem>, Error> {
    ArrayRecordReader::open(Mem(Bytes::from(file)), options)
}

/// One way of reading, its result and its peak bytes.
type Read = (&'static str, Result<Vec<Bytes>, Error>, u64);

/// Every way of reading records `0..n`: one by one, as a batch, as a range; each result with
/// its peak.
fn every_read(r: &ArrayRecordReader<Mem>, n: u64) -> Vec<Read> {
    let (one, p1) = peak_of(|| {
        (0..n.min(3))
            .map(|i| r.get(i))
            .collect::<Result<Vec<_>, _>>()
    });
    let ids: Vec<u64> = (0..n.min(3)).collect();
    let (many, p2) = peak_of(|| r.get_many(&ids));
    let (range, p3) = peak_of(|| r.get_range(0, n));
    vec![
        ("get", one, p1),
        ("get_many", many, p2),
        ("get_range", range, p3),
    ]
}

/// No cache: every read decodes (the cache's own budget is a separate bound).
fn uncached() -> ArrayRecordReadOptions {
    ArrayRecordReadOptions::default().with_cache_chunks(0)
}

#[test]
fn a_chunk_claiming_more_records_than_its_sizes_hold_allocates_nothing_for_them() {
    // 2^22 records claimed, 2 sizes stored: the chunk is padded to 4 MiB (Riegeli's rule),
    // a list of 2^22 records would be 128 MiB.
    for compression in [0u8, b'z', b'b', b's'] {
        let sizes = if compression == 0 {
            varints([1, 1])
        } else {
            compressed(compression, 2, [&varints([1, 1])[..]])
        };
        let values = if compression == 0 {
            b"ab".to_vec()
        } else {
            compressed(compression, 2, [&b"ab"[..]])
        };
        let mut f = HostileFile::new();
        f.simple_chunk(compression, &sizes, &values, 1 << 22, 2);
        let r = open(f.finish(), &uncached()).unwrap();
        for (how, got, peak) in every_read(&r, 1 << 22) {
            assert!(
                matches!(got, Err(Error::Corrupt { .. } | Error::TooLarge { .. })),
                "{compression:#x} {how}: {got:?}"
            );
            assert!(peak < MIB, "{compression:#x} {how}: {peak} bytes");
        }
    }
}

#[test]
fn a_footer_claiming_more_records_than_it_holds_allocates_nothing_for_them() {
    let mut f = HostileFile::new();
    f.simple_chunk(0, &varints([1]), b"a", 1, 1);
    let entries = f.entries();
    let records = footer_records(&entries);
    let sizes = varints(records.iter().map(|r| r.len() as u64));
    let values: Vec<u8> = records.concat();
    let decoded = values.len() as u64;
    let footer = simple_data(0, &sizes, &values);
    let file = f.finish_with_footer(&footer, 1 << 22, decoded);
    let stored = file.len() as u64;
    let (got, peak) = peak_of(|| open(file, &uncached()).map(|_| ()));
    assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
    // The footer outgrows the tail read: its stored bytes are gathered from two reads (the
    // file holds them), a list of 2^22 records would be 128 MiB.
    assert!(peak < stored + MIB, "{peak} bytes of a {stored}-byte file");
}

#[test]
fn footer_entries_closer_than_a_chunk_apart_are_refused() {
    let mut f = HostileFile::new();
    let at = f.simple_chunk(0, &varints([1]), b"a", 1, 1);
    f.simple_chunk(0, &varints([1]), b"b", 1, 1);
    // A third entry one byte after the first: chunks that small cannot exist, and a table
    // of such entries would outgrow the file.
    let mut entries = f.entries();
    entries.insert(1, (at + 40 - 8, 1, 1));
    let got = open(f.finish_with_entries(&entries), &uncached()).map(|_| ());
    assert!(
        matches!(&got, Err(Error::Corrupt { what, .. }) if what.contains("out of order")),
        "{got:?}"
    );
}

/// Many empty records for real (their sizes compressed): one record reads without a list of
/// them, a list of them is charged 32 bytes a record against `max_chunk_bytes`.
#[test]
fn a_chunk_of_many_empty_records_reads_one_without_listing_them() {
    let n: u64 = 1 << 22;
    let zeros = vec![0u8; usize::try_from(n).unwrap()];
    let sizes = compressed(b'z', n, [&zeros[..]]);
    let values = compressed(b'z', 0, []);
    let mut f = HostileFile::new();
    f.simple_chunk(b'z', &sizes, &values, n, 0);
    let file = f.finish();
    let small = uncached().with_max_chunk_bytes(64 * MIB);
    let r = open(file.clone(), &small).unwrap();
    let (got, peak) = peak_of(|| r.get(n - 1));
    assert_eq!(got.unwrap(), Bytes::new());
    assert!(peak < 2 * MIB, "get: {peak} bytes");
    let (got, peak) = peak_of(|| r.get_range(0, n));
    assert!(
        matches!(got, Err(Error::TooLarge { size, .. }) if size == 32 * n),
        "{got:?}"
    );
    assert!(peak < MIB, "get_range: {peak} bytes");
    // Within the limit, the list is what it costs and the records are right.
    let r = open(file, &uncached().with_max_chunk_bytes(256 * MIB)).unwrap();
    let (got, peak) = peak_of(|| r.get_range(1, n - 1));
    assert_eq!(got.unwrap().len() as u64, n - 1);
    assert!(peak < 32 * n + 2 * MIB, "{peak} bytes");
}

#[test]
fn a_bomb_costs_the_record_read_not_the_claim() {
    let claimed = 256 * MIB;
    for codec in [b'z', b'b'] {
        let sizes_plain = varints([10, claimed - 10]);
        let step = vec![0u8; 1 << 20];
        let parts = (0..256).map(|_| &step[..]);
        let values = compressed(codec, claimed, parts);
        let sizes = compressed(codec, sizes_plain.len() as u64, [&sizes_plain[..]]);
        let mut f = HostileFile::new();
        f.simple_chunk(codec, &sizes, &values, 2, claimed);
        let r = open(f.finish(), &uncached()).unwrap();
        // The first record: 10 bytes, the codec's window, nothing of the rest.
        let (got, peak) = peak_of(|| r.get(0));
        assert_eq!(got.unwrap(), vec![0u8; 10]);
        assert!(peak < 8 * MIB, "{codec:#x}: {peak} bytes");
        // Sizes adding up to less than the claim: refused before a byte of values is decoded.
        let short = varints([10, 10]);
        let sizes = compressed(codec, short.len() as u64, [&short[..]]);
        let mut f = HostileFile::new();
        let values = compressed(codec, claimed, (0..256).map(|_| &step[..]));
        f.simple_chunk(codec, &sizes, &values, 2, claimed);
        let r = open(f.finish(), &uncached()).unwrap();
        let (got, peak) = peak_of(|| r.get(0));
        assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
        assert!(peak < MIB, "{codec:#x}: {peak} bytes");
    }
}

#[test]
fn a_stream_that_disagrees_with_its_prefix_stops_where_it_disagrees() {
    let step = vec![0u8; 1 << 20];
    for codec in [b'z', b'b'] {
        // Claims 256 MiB in one record, produces 1 MiB: the buffer grows only as far.
        let claimed = 256 * MIB;
        let sizes_plain = varints([claimed]);
        let sizes = compressed(codec, sizes_plain.len() as u64, [&sizes_plain[..]]);
        let values = compressed(codec, claimed, [&step[..]]);
        let mut f = HostileFile::new();
        f.simple_chunk(codec, &sizes, &values, 1, claimed);
        let r = open(f.finish(), &uncached()).unwrap();
        let (got, peak) = peak_of(|| r.get(0));
        assert!(
            got.as_ref().is_err_and(Error::is_corrupt),
            "{codec:#x}: {got:?}"
        );
        assert!(peak < 8 * MIB, "{codec:#x}: short: {peak} bytes");
        // Claims 1 MiB, produces 256: stops one byte past the claim.
        let sizes_plain = varints([MIB]);
        let sizes = compressed(codec, sizes_plain.len() as u64, [&sizes_plain[..]]);
        let values = compressed(codec, MIB, (0..256).map(|_| &step[..]));
        let mut f = HostileFile::new();
        f.simple_chunk(codec, &sizes, &values, 1, MIB);
        let r = open(f.finish(), &uncached()).unwrap();
        let (got, peak) = peak_of(|| r.get(0));
        assert!(
            got.as_ref().is_err_and(Error::is_corrupt),
            "{codec:#x}: {got:?}"
        );
        assert!(peak < 8 * MIB, "{codec:#x}: long: {peak} bytes");
    }
}

#[test]
fn a_stored_chunk_past_the_limit_is_refused_before_it_is_read() {
    let mut f = HostileFile::new();
    let big = vec![7u8; 200_000];
    f.simple_chunk(0, &varints([200_000]), &big, 1, 200_000);
    let r = open(f.finish(), &uncached().with_max_chunk_bytes(100_000)).unwrap();
    let got = r.get(0);
    assert!(
        matches!(
            got,
            Err(Error::TooLarge {
                what: "stored chunk",
                ..
            })
        ),
        "{got:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever a simple chunk claims (records, decoded size, the prefixes) beside what it
    /// holds, every read gives the records it holds or a typed error, and allocates no more
    /// than what it holds and the codec's window: never a claimed count or size.
    #[test]
    fn claims_never_reach_the_allocator(
        records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..20),
        claim_records in prop_oneof![Just(None), (0u64..(1 << 21)).prop_map(Some)],
        claim_decoded in prop_oneof![Just(None), (0u64..(1 << 30)).prop_map(Some)],
        claim_values in prop_oneof![Just(None), (0u64..(1 << 30)).prop_map(Some)],
        codec in prop_oneof![Just(0u8), Just(b'z'), Just(b'b'), Just(b's')],
    ) {
        let held = records.len() as u64;
        let decoded: u64 = records.iter().map(|r| r.len() as u64).sum();
        let sizes_plain = varints(records.iter().map(|r| r.len() as u64));
        let values_plain = records.concat();
        let (sizes, values) = if codec == 0 {
            (sizes_plain, values_plain)
        } else {
            (
                compressed(codec, sizes_plain.len() as u64, [&sizes_plain[..]]),
                compressed(codec, claim_values.unwrap_or(decoded), [&values_plain[..]]),
            )
        };
        let n = claim_records.unwrap_or(held);
        let mut f = HostileFile::new();
        f.simple_chunk(codec, &sizes, &values, n, claim_decoded.unwrap_or(decoded));
        let honest = claim_records.is_none_or(|c| c == held)
            && claim_decoded.is_none_or(|c| c == decoded)
            && (codec == 0 || claim_values.is_none_or(|c| c == decoded));
        let Ok(r) = open(f.finish(), &uncached()) else {
            prop_assert!(!honest);
            return Ok(());
        };
        for (how, got, peak) in every_read(&r, n.min(1 << 16)) {
            prop_assert!(peak < 2 * MIB, "{}: {} bytes", how, peak);
            match got {
                Ok(got) => {
                    for (g, want) in got.iter().zip(&records) {
                        prop_assert_eq!(&g[..], &want[..], "{}", how);
                    }
                }
                Err(e) => prop_assert!(
                    !honest && (e.is_corrupt() || matches!(e, Error::TooLarge { .. })),
                    "{}: {}", how, e
                ),
            }
        }
    }
}
