//! Drives the shard reader over arbitrary bytes through an in-memory `SyncReader`.
//!
//! The first input byte picks the options (speculative tail length, record verification)
//! and whether to *repair* the file first: set the footer magic and version and recompute
//! the footer, index and metadata checksums, so that the fuzzer reaches the layout, index
//! and metadata validation behind them. The rest is the file. An input that starts with the
//! shard magic (a committed fixture used as a seed) is all file, read with default options.
//!
//! Whatever the bytes, opening and reading must return `Ok` or a typed error — never panic,
//! never allocate beyond the input — and every record read (`read`, `read_many` in reverse
//! order, `read_run`) must lie inside the file and equal the bytes there. A shard that
//! opens has a valid kind/element pair (`ShardMetadata::validate`); a stream shard's element
//! type is one of `ELEMENT_TYPES`, every record is a whole number of elements, and the
//! shard opens as exactly that stream type and as no other type or documents; a documents
//! shard is documents of its own format and no stream.
#![no_main]

use bytes::Bytes;
use guideloom_format::spec::MAGIC;
use guideloom_format::{ELEMENT_TYPES, Expected, MemReader, ReadOptions, SyncShard, element_width};
use guideloom_fuzz::shard_repair::repair;
use libfuzzer_sys::fuzz_target;

const TAILS: [u64; 4] = [80, 128, 1024, 64 << 10];

fuzz_target!(|data: &[u8]| {
    // An input that starts like a shard (e.g. a committed fixture used as a seed) is read
    // whole with default options.
    let (opts, file) = match data.split_first() {
        _ if data.starts_with(&MAGIC) => (0, data),
        Some((&opts, file)) => (opts, file),
        None => return,
    };
    let options = ReadOptions::default()
        .with_speculative_tail(TAILS[usize::from(opts & 3)])
        .with_verify_records(opts & 4 == 0);
    let mut file = file.to_vec();
    if opts & 8 != 0 {
        repair(&mut file);
    }
    let file = &file[..];
    let bytes = Bytes::copy_from_slice(file);
    let Ok(shard) = SyncShard::open(MemReader::new("fuzz", bytes.clone()), &options) else {
        return;
    };
    let _ = shard.expect(&Expected::Documents("raw".into()));
    let _ = shard.expect(&Expected::Stream {
        element: "u32",
        width: 4,
    });
    kinds(&shard);
    assert!(shard.data_len() <= file.len() as u64);
    let n = shard.len().min(4096);
    for i in 0..n {
        let range = shard.record_range(i).expect("in range");
        assert!(range.start <= range.end && range.end <= file.len() as u64);
        if let Ok(rec) = shard.read(i) {
            assert_eq!(rec.len() as u64, range.end - range.start);
            assert_eq!(&rec[..], &file[range.start as usize..range.end as usize]);
        }
    }
    assert!(shard.read(shard.len()).is_err());
    let all: Vec<u64> = (0..n).rev().collect();
    if let Ok(many) = shard.read_many(&all) {
        assert_eq!(many.len(), all.len());
        for (&i, rec) in all.iter().zip(&many) {
            assert_eq!(&rec[..], record(&shard, file, i));
        }
    }
    if n > 0
        && let Ok(run) = shard.read_run(0, n)
    {
        assert_eq!(run.len() as u64, n);
        for (i, rec) in (0..n).zip(&run) {
            assert_eq!(&rec[..], record(&shard, file, i));
        }
    }
    let dl = shard.data_len();
    let _ = shard.read_data(dl / 3, dl / 2);
    let _ = shard.read_data(dl, 1);
});

/// The bytes of record `i` in `file`, by the index.
fn record<'a>(shard: &SyncShard<MemReader>, file: &'a [u8], i: u64) -> &'a [u8] {
    let r = shard.record_range(i).expect("in range");
    &file[r.start as usize..r.end as usize]
}

/// The kind/element checks every opened shard has passed.
fn kinds(shard: &SyncShard<MemReader>) {
    let meta = shard.metadata();
    meta.validate()
        .expect("an opened shard has a valid kind/element pair");
    match meta.element.as_deref() {
        Some(element) => {
            let width = element_width(element).expect("an opened stream has a known element");
            for i in 0..shard.len().min(4096) {
                let r = shard.record_range(i).expect("in range");
                assert_eq!(
                    (r.end - r.start) % width,
                    0,
                    "record {i} is not whole elements"
                );
            }
            for &(name, w) in &ELEMENT_TYPES {
                let typed = shard.expect(&Expected::Stream {
                    element: name,
                    width: w,
                });
                assert_eq!(
                    typed.is_ok(),
                    name == element,
                    "stream<{name}> of a {element} stream"
                );
            }
            assert!(
                shard
                    .expect(&Expected::Documents(meta.format.clone()))
                    .is_err()
            );
        }
        None => {
            shard
                .expect(&Expected::Documents(meta.format.clone()))
                .expect("documents of its own format");
            for &(name, w) in &ELEMENT_TYPES {
                assert!(
                    shard
                        .expect(&Expected::Stream {
                            element: name,
                            width: w
                        })
                        .is_err()
                );
            }
        }
    }
}
