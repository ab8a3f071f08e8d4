//! Drives guideloom-arrayrecord's reader over hostile bytes, two ways, chosen by the first
//! input byte:
//! - **raw** (even): the rest of the input is the file, read through an in-memory
//!   `SyncReader` with the tail length and cache picked by that byte;
//! - **flip** (odd): the rest is a list of records (each a length byte and its bytes) that
//!   `ArrayRecordWriter` writes with one of several option strings; the file must read back
//!   exactly (the round trip), and after flipping one byte chosen by the input it must give
//!   every record unchanged or a typed error — a checked hash never lets a wrong record out.
//!
//! An input that starts with the Riegeli signature (a committed fixture used as a seed) is all
//! file, read with default options. Never a panic, never an allocation beyond the limits.
#![no_main]

use bytes::Bytes;
use guideloom_arrayrecord::{ArrayRecordReader, ArrayRecordWriter, ReadOptions, WriterOptions};
use guideloom_format::MemReader;
use libfuzzer_sys::fuzz_target;

/// The first 8 bytes of every Riegeli file (its first block header's hash).
const SIGNATURE: [u8; 8] = [0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f];

const OPTIONS: [&str; 8] = [
    "",
    "uncompressed",
    "group_size:3,snappy",
    "group_size:2,brotli:1",
    "group_size:7,zstd:1",
    "group_size:1,uncompressed,pad_to_block_boundary:true",
    "group_size:300,uncompressed",
    "group_size:65536,zstd:-3",
];

fn read_options(sel: u8) -> ReadOptions {
    ReadOptions::default()
        .with_tail_len([0, 100_000, 256 << 10, 1 << 20][usize::from(sel & 3)])
        .with_cache_chunks(usize::from(sel >> 2 & 3))
        .with_max_chunk_bytes(64 << 20)
        .with_max_footer_bytes(16 << 20)
}

/// Opens `file` and reads every record (one by one and as a batch), returning them or `None`
/// on the first error.
fn read_all(file: Bytes, options: &ReadOptions) -> Option<Vec<Bytes>> {
    let ar = ArrayRecordReader::open(MemReader::new("fuzz", file.clone()), options).ok()?;
    let layout = ar.layout();
    assert!(layout.footer_offset() < file.len() as u64);
    for c in layout.chunks() {
        assert!(c.offset < c.end && c.end <= layout.footer_offset());
    }
    let n = ar.len().min(1 << 16);
    let one: Vec<Bytes> = (0..n).map(|i| ar.get(i)).collect::<Result<_, _>>().ok()?;
    let rev: Vec<u64> = (0..n).rev().collect();
    if let Ok(batch) = ar.get_many(&rev) {
        assert!(
            batch.iter().rev().eq(one.iter()),
            "get_many disagrees with get"
        );
    }
    Some(one)
}

fuzz_target!(|data: &[u8]| {
    if data.starts_with(&SIGNATURE) {
        let _ = read_all(Bytes::copy_from_slice(data), &ReadOptions::default());
        return;
    }
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel & 1 == 0 {
        let _ = read_all(Bytes::copy_from_slice(rest), &read_options(sel >> 1));
        return;
    }
    // flip: records, then a flip position from the last 4 bytes.
    let (body, flip) = rest.split_at(rest.len().saturating_sub(4));
    let mut records: Vec<&[u8]> = Vec::new();
    let mut at = body;
    while let Some((&len, tail)) = at.split_first() {
        let len = usize::from(len).min(tail.len());
        records.push(&tail[..len]);
        at = &tail[len..];
    }
    let options: WriterOptions = OPTIONS[usize::from(sel >> 1 & 7)].parse().expect("valid");
    // `read_all` reads at most 2^16 records; padding gives every chunk a 64 KiB block of its
    // own (by design): bound the file's size.
    records.truncate(if options.pad_to_block_boundary() {
        32
    } else {
        1 << 16
    });
    let mut w = ArrayRecordWriter::new(Vec::new(), options);
    for r in &records {
        w.write(r).expect("writing to memory");
    }
    let mut file = w.finish().expect("writing to memory");
    let got = read_all(Bytes::from(file.clone()), &read_options(sel >> 4)).expect("round trip");
    assert_eq!(got.len(), records.len());
    assert!(
        got.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
        "round trip differs"
    );
    let mut pos = [0u8; 4];
    pos[..flip.len()].copy_from_slice(flip);
    let pos = usize::try_from(u32::from_le_bytes(pos)).unwrap_or(0) % file.len();
    file[pos] ^= 1 << (sel >> 5 & 7);
    if let Some(after) = read_all(Bytes::from(file), &read_options(sel >> 4)) {
        assert_eq!(
            after.len(),
            records.len(),
            "a flip at {pos} changed the record count"
        );
        assert!(
            after.iter().zip(&records).all(|(g, r)| g[..] == r[..]),
            "a flip at {pos} changed a record"
        );
    }
});
