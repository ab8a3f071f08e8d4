//! Damaged shards: every truncation and bit flip gives an error or the exact original
//! records, never silently different data.

use bytes::Bytes;
use guideloom_format::{Error, MemReader, ReadOptions, SyncShard};
use proptest::prelude::*;

use crate::util::shard_bytes;

/// Opens `bytes` and reads every record; `Ok` only if everything read matches `original`.
/// Returns whether the shard was accepted as a whole.
fn check(bytes: Bytes, original: &[Vec<u8>], tail: u64) -> bool {
    let options = ReadOptions::default().speculative_tail(tail);
    let shard = match SyncShard::open(MemReader::new("s", bytes), &options) {
        Ok(s) => s,
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::Corrupt { .. } | Error::Unsupported { .. } | Error::Io(_)
                ),
                "unexpected error kind: {e:?}"
            );
            return false;
        }
    };
    assert_eq!(
        shard.len(),
        original.len() as u64,
        "record count changed silently"
    );
    let mut all_ok = true;
    for (i, rec) in original.iter().enumerate() {
        match shard.read(i as u64) {
            Ok(got) => assert_eq!(&got[..], &rec[..], "record {i} silently wrong"),
            Err(e) => {
                assert!(e.is_corrupt(), "record {i}: {e:?}");
                all_ok = false;
            }
        }
    }
    if let Ok(many) = shard.read_many(&(0..original.len() as u64).collect::<Vec<_>>()) {
        for (got, rec) in many.iter().zip(original) {
            assert_eq!(&got[..], &rec[..]);
        }
    }
    all_ok
}

fn sample() -> Vec<Vec<u8>> {
    vec![b"alpha".to_vec(), vec![], vec![7u8; 40], b"delta".to_vec()]
}

#[test]
fn every_truncation_is_an_error() {
    let recs = sample();
    let bytes = shard_bytes(&recs);
    for len in 0..bytes.len() {
        for tail in [80, 1 << 16] {
            let opened = SyncShard::open(
                MemReader::new("t", bytes.slice(..len)),
                &ReadOptions::default().speculative_tail(tail),
            );
            assert!(opened.is_err(), "truncated to {len} bytes still opened");
        }
    }
    assert!(check(bytes, &recs, 1 << 16));
}

#[test]
fn every_single_bit_flip_is_detected_or_harmless() {
    let recs = sample();
    let bytes = shard_bytes(&recs).to_vec();
    let mut rejected = 0;
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        // Small tail: header not covered, so header flips are harmless there.
        for tail in [80, 1 << 16] {
            if !check(b.clone().into(), &recs, tail) {
                rejected += 1;
            }
        }
    }
    // With the full tail, every flip outside the reserved header bytes is caught.
    // Only the header minor version and reserved bytes (6 bytes) are not checked.
    assert!(
        rejected >= (bytes.len() - 6) * 8,
        "only {rejected} flips caught"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_damage_never_yields_wrong_data(
        recs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
        tail in prop_oneof![Just(80u64), Just(200), Just(1 << 16)],
    ) {
        let bytes = shard_bytes(&recs);
        prop_assert!(check(bytes.clone(), &recs, tail));
        let len = cut.index(bytes.len());
        prop_assert!(SyncShard::open(MemReader::new("t", bytes.slice(..len)), &ReadOptions::default()).is_err());
        let mut b = bytes.to_vec();
        for (at, bit) in &flips {
            let i = at.index(b.len());
            b[i] ^= 1 << bit;
        }
        check(b.into(), &recs, tail);
    }
}
