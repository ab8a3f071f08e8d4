//! Drives guideloom-arrayrecord's reader over hostile files, three ways, chosen by the
//! first input byte:
//! - **built** (most inputs): the rest describes up to three chunks (codec, records, and
//!   which of the record count, decoded size and size prefixes lie, and by how much), or a
//!   codec stream of arbitrary bytes, and footer entries to perturb; guideloom-arrayrecord's
//!   `hostile` kit lays them out with every hash right (the fuzzer could never forge a
//!   HighwayHash), so inputs of a few hundred bytes reach every check behind the hashes;
//! - **flip**: a list of records (each a length byte and its bytes) that
//!   `ArrayRecordWriter` writes with one of several option strings; the file must read back
//!   exactly, and after flipping one bit chosen by the input every record is unchanged or the
//!   read fails with a typed error — a checked hash never lets a wrong record out;
//! - **raw**: the rest of the input is the file (only inputs of 128 KiB and more can be one).
//!
//! An input that starts with the Riegeli signature (a committed fixture) is all file. Every
//! read (`get`, `get_many`, `get_range`) must return the right records or a typed error,
//! never panic, agree with the others, and allocate (a counting allocator measures it) no
//! more than a small multiple of the file plus a fixed allowance for codec windows: never in
//! proportion to a count or size the file claims.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use bytes::Bytes;
use guideloom_arrayrecord::hostile::{HostileFile, compressed, varints};
use guideloom_arrayrecord::{ArrayRecordReader, ArrayRecordWriter, Error, ArrayRecordReadOptions, ArrayRecordWriterOptions};
use guideloom_format::MemReader;
use libfuzzer_sys::fuzz_target;

/// Bytes held now and the most held since the last reset (one fuzzing thread).
static HELD: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

struct Counting;

fn add(delta: isize) {
    let now = HELD.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` with the same arguments; counting touches two
// atomics only.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The first 8 bytes of every Riegeli file (its first block header's hash).
const SIGNATURE: [u8; 8] = [0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f];

const OPTIONS: [&str; 8] = [
    "",
    "uncompressed",
    "group_size:3,snappy",
    "group_size:2,brotli:1,window_log:16",
    "group_size:7,zstd:1",
    "group_size:1,uncompressed,pad_to_block_boundary:true",
    "group_size:300,uncompressed",
    "group_size:65536,zstd:-3",
];

/// What a read may allocate beyond the file: zstd's one-shot output (at most the
/// `max_chunk_bytes` below), Brotli's ring buffer (up to twice the 16 MiB metablock a stream
/// declares), buffers and tables.
const ALLOWANCE: u64 = 64 << 20;

fn read_options(sel: u8) -> ArrayRecordReadOptions {
    ArrayRecordReadOptions::default()
        .with_tail_len([0, 100_000, 256 << 10, 1 << 20][usize::from(sel & 3)])
        .with_cache_chunks(usize::from(sel >> 2 & 3))
        .with_max_chunk_bytes([1 << 20, 16 << 20][usize::from(sel >> 4 & 1)])
        .with_max_footer_bytes(16 << 20)
}

/// Opens `file` and reads its first records one by one, as a batch and as a range: the
/// records (from `get`) or `None` on the first error. Checks that the reads agree, that
/// errors are typed, and that no read allocates beyond its bound.
fn read_all(file: Bytes, options: &ArrayRecordReadOptions) -> Option<Vec<Bytes>> {
    let bound = 8 * file.len() as u64 + ALLOWANCE;
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let got = read_within(file, options);
    let peak = (PEAK.load(Ordering::Relaxed) - before) as u64;
    assert!(peak <= bound, "reading allocated {peak} bytes (bound {bound})");
    got
}

fn typed(e: &Error) {
    assert!(
        e.is_corrupt()
            || matches!(
                e,
                Error::TooLarge { .. } | Error::Unsupported { .. } | Error::IndexOutOfRange { .. }
            ),
        "untyped failure: {e}"
    );
}

fn read_within(file: Bytes, options: &ArrayRecordReadOptions) -> Option<Vec<Bytes>> {
    let ar = ArrayRecordReader::open(MemReader::new("fuzz", file.clone()), options)
        .inspect_err(typed)
        .ok()?;
    let layout = ar.layout();
    assert!(layout.footer_offset() < file.len() as u64);
    for c in layout.chunks() {
        assert!(c.offset < c.end && c.end <= layout.footer_offset());
    }
    let n = ar.len().min(256);
    let one: Vec<Bytes> = (0..n)
        .map(|i| ar.get(i))
        .collect::<Result<_, _>>()
        .inspect_err(typed)
        .ok()?;
    let rev: Vec<u64> = (0..n).rev().collect();
    match ar.get_many(&rev) {
        Ok(batch) => assert!(batch.iter().rev().eq(one.iter()), "get_many disagrees with get"),
        Err(e) => typed(&e),
    }
    match ar.get_range(0, n) {
        Ok(range) => assert!(range == one, "get_range disagrees with get"),
        Err(e) => typed(&e),
    }
    Some(one)
}

/// The input, read front to back; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (now, rest) = self.0.split_at(n);
        self.0 = rest;
        now.to_vec()
    }

    /// A claim: near `truth` (a small difference either way) or far from it (a 16-bit
    /// value shifted left up to 40 bits), capped at `cap`.
    fn claim(&mut self, truth: u64, cap: u64) -> u64 {
        let how = self.byte();
        let v = u64::from(self.byte()) | u64::from(self.byte()) << 8;
        let claimed = match how & 3 {
            0 => truth.saturating_add(v & 15),
            1 => truth.saturating_sub(v & 15),
            _ => v << (u32::from(how >> 2) % 41),
        };
        claimed.min(cap)
    }
}

const CODECS: [u8; 4] = [0, b'z', b's', b'b'];

/// Lays out the chunks `input` describes; `true` when nothing in them lies (then every
/// record must read back), with the records.
fn build(input: &mut Input<'_>) -> (Bytes, bool, Vec<Vec<u8>>) {
    let mut f = HostileFile::new();
    let mut honest = true;
    let mut all = Vec::new();
    let mut counts = Vec::new();
    for _ in 0..1 + input.byte() % 3 {
        let b = input.byte();
        let codec = CODECS[usize::from(b & 3)];
        let lies = b >> 2;
        let records: Vec<Vec<u8>> = (0..1 + input.byte() % 8)
            .map(|_| {
                let len = usize::from(input.byte() % 24);
                input.bytes(len)
            })
            .collect();
        let lens: Vec<u64> = records.iter().map(|r| r.len() as u64).collect();
        let decoded: u64 = lens.iter().sum();
        let n = records.len() as u64;
        let sizes_plain = varints(lens);
        let values_plain = records.concat();
        // Claimed record counts make the file that long (Riegeli's padding): at most 4 MiB.
        let claim_records = if lies & 1 != 0 { input.claim(n, 1 << 22) } else { n };
        let claim_decoded = if lies & 2 != 0 { input.claim(decoded, u64::MAX) } else { decoded };
        let (sizes, values) = if codec == 0 {
            (sizes_plain, values_plain)
        } else if lies & 4 != 0 {
            // Size prefixes that lie, or a codec stream of the input's own bytes.
            let sizes_claim = input.claim(sizes_plain.len() as u64, u64::MAX);
            let values_claim = input.claim(decoded, u64::MAX);
            let values = if lies & 8 != 0 {
                let mut v = varints([values_claim]);
                let len = usize::from(input.byte());
                v.extend(input.bytes(len));
                v
            } else {
                compressed(codec, values_claim, [&values_plain[..]])
            };
            (compressed(codec, sizes_claim, [&sizes_plain[..]]), values)
        } else {
            (
                compressed(codec, sizes_plain.len() as u64, [&sizes_plain[..]]),
                compressed(codec, decoded, [&values_plain[..]]),
            )
        };
        honest &= lies & 7 == 0 || (claim_records == n && claim_decoded == decoded && lies & 4 == 0);
        if lies & 16 != 0 {
            // Another chunk type where records are expected.
            let t = [b't', b'p', b'm', b's'][usize::from(input.byte() & 3)];
            f.raw_chunk(t, &values, claim_records, claim_decoded);
            honest = false;
        } else {
            f.simple_chunk(codec, &sizes, &values, claim_records, claim_decoded);
        }
        counts.push(n);
        all.extend(records);
    }
    // The footer's rule: every chunk but the last holds the first's count, the last no more.
    let (last, rest) = counts.split_last().expect("at least one chunk");
    honest &= rest.iter().all(|&c| c == counts[0]) && *last <= counts[0];
    let mut entries = f.entries();
    let perturb = input.byte();
    if perturb & 1 != 0 {
        let i = usize::from(perturb >> 1) % entries.len();
        let e = &mut entries[i];
        match input.byte() % 3 {
            0 => e.0 = input.claim(e.0, u64::MAX),
            1 => e.1 = input.claim(e.1, u64::MAX),
            _ => e.2 = input.claim(e.2, u64::MAX),
        }
        honest = false;
    }
    (Bytes::from(f.finish_with_entries(&entries)), honest, all)
}

fuzz_target!(|data: &[u8]| {
    if data.starts_with(&SIGNATURE) {
        let _ = read_all(Bytes::copy_from_slice(data), &ArrayRecordReadOptions::default());
        return;
    }
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel & 7 {
        0 => {
            let _ = read_all(Bytes::copy_from_slice(rest), &read_options(sel >> 3));
        }
        1 | 2 => flip(sel, rest),
        _ => {
            let (file, honest, records) = build(&mut Input(rest));
            let got = read_all(file, &read_options(sel >> 3));
            if honest {
                let got = got.expect("an honest file reads");
                assert!(
                    got.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
                    "an honest file read differently"
                );
            }
        }
    }
});

/// Records written, read back, one bit flipped, read again.
fn flip(sel: u8, rest: &[u8]) {
    let (body, flip) = rest.split_at(rest.len().saturating_sub(4));
    let mut records: Vec<&[u8]> = Vec::new();
    let mut at = body;
    while let Some((&len, tail)) = at.split_first() {
        let len = usize::from(len).min(tail.len());
        records.push(&tail[..len]);
        at = &tail[len..];
    }
    let options: ArrayRecordWriterOptions = OPTIONS[usize::from(sel >> 3 & 7)].parse().expect("valid");
    // `read_all` reads at most 256 records; padding gives every chunk a 64 KiB block of its
    // own (by design): bound the file's size.
    records.truncate(if options.pad_to_block_boundary() { 32 } else { 256 });
    let mut w = ArrayRecordWriter::new(Vec::new(), options);
    for r in &records {
        w.write(r).expect("writing to memory");
    }
    let mut file = w.finish().expect("writing to memory");
    let read = read_options(sel >> 5);
    let got = read_all(Bytes::from(file.clone()), &read).expect("round trip");
    assert_eq!(got.len(), records.len());
    assert!(
        got.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
        "round trip differs"
    );
    let mut pos = [0u8; 4];
    pos[..flip.len()].copy_from_slice(flip);
    let pos = usize::try_from(u32::from_le_bytes(pos)).unwrap_or(0) % file.len();
    file[pos] ^= 1 << (sel >> 5 & 7);
    if let Some(after) = read_all(Bytes::from(file), &read) {
        assert_eq!(after.len(), records.len(), "a flip at {pos} changed the record count");
        assert!(
            after.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
            "a flip at {pos} changed a record"
        );
    }
}
