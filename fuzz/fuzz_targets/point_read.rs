//! Drives guideloom-format's `ShardProbe` (a record read without the whole index) over
//! arbitrary bytes through an in-memory reader, against the whole-index reader as oracle.
//!
//! Input: one options byte (bit 3: *repair* the footer, index and metadata checksums as
//! `shard_reader` does, so the fuzzer gets past them), two bytes of record-count hint offset,
//! two bytes of record choice, then the file. An input that starts with the shard magic (a
//! committed fixture used as a seed) is all file, with the true count as hint.
//!
//! Whatever the bytes, a probe must return `Ok` or a typed error, never panic, never read
//! outside the file; `open_tail` (footer and metadata alone) succeeds where `open` does, with
//! the same footer and metadata. A record a probe returns lies inside the file: its bytes are those at
//! the range its (checked) entries give, and its CRC32C is the entry's. When the whole-index
//! reader also opens the shard, every record both read is the same, and the probe's footer
//! and metadata are the whole open's.
#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use guideloom_format::spec::{MAGIC, crc32c};
use guideloom_format::{AsyncShard, Footer, MemReader, ReadOptions, ShardProbe};
use guideloom_fuzz::shard_repair::repair;
use libfuzzer_sys::fuzz_target;

/// Runs a future of the in-memory reader, which never waits.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("an in-memory read waited"),
    }
}

fuzz_target!(|data: &[u8]| {
    let (opts, hint_off, pick, file) = if data.starts_with(&MAGIC) {
        (0u8, 0i16, 0u16, data)
    } else if data.len() >= 5 {
        let hint = i16::from_le_bytes([data[1], data[2]]);
        let pick = u16::from_le_bytes([data[3], data[4]]);
        (data[0], hint, pick, &data[5..])
    } else {
        return;
    };
    let mut file = file.to_vec();
    if opts & 8 != 0 {
        repair(&mut file);
    }
    let size = file.len() as u64;
    let bytes = Bytes::from(file.clone());
    let reader = MemReader::new("fuzz", bytes.clone());
    // The hint: the footer's count (when there is one) moved by the offset.
    let count = (size >= 80)
        .then(|| Footer::decode("f", &file[file.len() - 64..], size).ok())
        .flatten()
        .map_or(0, |f| f.record_count);
    let hint = count.saturating_add_signed(i64::from(hint_off));
    let i = u64::from(pick) % count.max(1);
    let tail_only = ready(ShardProbe::open_tail(&reader, size));
    let Ok(probe) = ready(ShardProbe::open(&reader, size, hint, i)) else {
        return;
    };
    // The footer and metadata do not depend on which index window came with them.
    let tail_only = tail_only.expect("a tail-only open succeeds where a probe does");
    assert_eq!(tail_only.footer(), probe.footer());
    assert_eq!(tail_only.metadata(), probe.metadata());
    let whole = ready(AsyncShard::open(
        MemReader::new("fuzz", bytes.clone()),
        &ReadOptions::default(),
    ))
    .ok();
    if let Some(whole) = &whole {
        assert_eq!(whole.footer(), probe.footer());
        assert_eq!(whole.metadata(), probe.metadata());
    }
    for j in [i, i.wrapping_add(1), probe.len().wrapping_sub(1), 0] {
        let got = ready(probe.read(&reader, j));
        if j >= probe.len() {
            assert!(got.is_err(), "record {j} of {}", probe.len());
            continue;
        }
        if let Ok(rec) = &got {
            // Somewhere in the data region, with its entry's CRC.
            let at = find(&file, rec, probe.footer().index_offset);
            assert!(at.is_some(), "record {j} is not bytes of the data region");
            let entry = usize::try_from(probe.footer().index_offset + j * 12).unwrap();
            let crc = u32::from_le_bytes(file[entry + 8..entry + 12].try_into().unwrap());
            assert_eq!(crc32c(rec), crc);
        }
        if let Some(whole) = &whole {
            let want = ready(whole.read(j));
            match (&got, &want) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "record {j}"),
                // A whole open checked the index, so a probe cannot fail where it reads.
                (Err(e), Ok(_)) => panic!("record {j}: the probe failed ({e}) where a whole open read"),
                _ => {}
            }
        }
    }
});

/// Whether `rec` occurs in `file[16..index_offset]` (the data region), where the entries put it.
fn find(file: &[u8], rec: &[u8], index_offset: u64) -> Option<usize> {
    let end = usize::try_from(index_offset).ok()?.min(file.len());
    if rec.is_empty() {
        return Some(16);
    }
    file.get(16..end)?
        .windows(rec.len())
        .position(|w| w == rec)
}
