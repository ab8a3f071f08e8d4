//! Damaged shards: every truncation and bit flip gives an error or the exact original
//! records, never silently different data.

use bytes::Bytes;
use guideloom_format::{Error, MemReader, ReadOptions, SyncShard};
use proptest::prelude::*;

use crate::util::shard_bytes;

/// Opens `bytes` and reads every record; `Ok` only if everything read matches `original`.
/// Returns whether the shard was accepted as a whole.
fn check(bytes: Bytes, original: &[Vec<u8>], tail: u64) -> bool {
    let options = ReadOptions::default().with_speculative_tail(tail);
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
                &ReadOptions::default().with_speculative_tail(tail),
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

/// Rewrites the CBOR metadata of `shard` with `edit` (same length), fixing every checksum,
/// so the shard is well formed apart from what `edit` says.
fn with_metadata(shard: &[u8], edit: impl Fn(&mut Vec<u8>)) -> Bytes {
    use guideloom_format::Footer;
    use guideloom_format::spec::{FOOTER_LEN, crc32c};
    let size = shard.len() as u64;
    let footer_at = usize::try_from(size - FOOTER_LEN).unwrap();
    let mut footer = Footer::decode("s", &shard[footer_at..], size).unwrap();
    let at = usize::try_from(footer.metadata_offset).unwrap();
    let len = usize::try_from(footer.metadata_len).unwrap();
    let mut meta = shard[at..at + len].to_vec();
    edit(&mut meta);
    assert_eq!(meta.len(), len, "the edit must keep the length");
    footer.metadata_crc = crc32c(&meta);
    let mut out = shard.to_vec();
    out[at..at + len].copy_from_slice(&meta);
    out[footer_at..].copy_from_slice(&footer.encode());
    Bytes::from(out)
}

fn replace_once(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    let i = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern present");
    bytes[i..i + from.len()].copy_from_slice(to);
}

#[test]
fn stream_shards_outside_the_spec_are_refused_whoever_opens_them() {
    use guideloom_format::{Expected, ShardEncoder};
    use guideloom_format::{KIND_STREAM, ShardMetadata};
    let encode = |records: &[Vec<u8>]| {
        let mut out = Vec::new();
        let mut enc = ShardEncoder::new(
            &mut out,
            ShardMetadata::new("raw", KIND_STREAM).with_element("u32"),
        )
        .unwrap();
        for r in records {
            enc.append(r).unwrap();
        }
        enc.finish().unwrap();
        out
    };
    let good = encode(&[vec![0u8; 8], vec![1u8; 4]]);
    let open = |bytes: Bytes| SyncShard::open(MemReader::new("s", bytes), &ReadOptions::default());
    assert_eq!(open(Bytes::from(good.clone())).unwrap().len(), 2);
    // An element type the format does not have (same length as "u32", checksums fixed).
    for (from, to, what) in [
        (&b"u32"[..], &b"u99"[..], "u99"),
        (b"u32", b"f16", "f16"),
        (b"stream", b"blobby", "blobby"),
    ] {
        let bad = with_metadata(&good, |m| replace_once(m, from, to));
        let err = open(bad.clone()).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { .. }) && err.to_string().contains(what),
            "{what}: {err}"
        );
    }
    // The good shard satisfies a typed reader of its own element type.
    let expected = Expected::Stream {
        element: "u32",
        width: 4,
    };
    open(Bytes::from(good.clone()))
        .unwrap()
        .expect(&expected)
        .unwrap();
    // Records that are not whole elements (a 3-byte record in a u32 stream).
    let ragged = encode(&[vec![0u8; 4], vec![2u8; 3]]);
    let err = open(Bytes::from(ragged)).unwrap_err();
    assert!(
        err.to_string().contains("multiple of the element width"),
        "{err}"
    );
    // The writer refuses to describe such shards in the first place.
    let mut sink = Vec::new();
    assert!(
        ShardEncoder::new(
            &mut sink,
            ShardMetadata::new("raw", KIND_STREAM).with_element("u128")
        )
        .is_err()
    );
}
