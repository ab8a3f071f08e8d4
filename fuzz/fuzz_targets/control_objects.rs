//! The control objects of a dataset root, as every reader parses them before using them:
//! `dataset.json` (`DatasetIdentity::parse`), log entries (`Manifest::parse`), snapshot
//! pointers (`SnapshotPointer::parse`), claims (`Claim::parse`), the annotation catalog
//! (`Catalog::parse`) and garbage collection records (`gc/<run>.json`).
//!
//! The first input byte selects the parser (`byte % 6`: identity, manifest, pointer, claim,
//! catalog, gc record) and, in bit 3, what the caller expects: clear, the ids (dataset, snapshot) and
//! the log key are taken from the object itself so that the fuzzer gets past those checks
//! to the ones behind them; set, the fixed ids `fuzz`/`fuzz` and the log key of seq 1. The
//! rest of the input is the object.
//!
//! Whatever the bytes: `Ok` or a typed error, never a panic. An object that parses must:
//! satisfy every invariant its parser documents (formats and versions, the expected ids,
//! names by `check_name`, every key it references by `key_problem`, a manifest's sequence
//! numbers, shard bounds, no duplicate shard, `total_records` equal to the sum; a pointer's
//! log key and size; a catalog entry's values key); hold no more items than its bytes can
//! spell; and serialize back to JSON that parses to an equal value.
#![no_main]

use std::collections::HashSet;

use guideloom_publish::fuzzing::{
    CATALOG_FORMAT, CLAIM_FORMAT, CONTROL_VERSION, Claim, DATASET_FORMAT, MANIFEST_FORMAT,
    MAX_CONTROL_OBJECT_BYTES, MAX_RECORDS, MAX_SHARD_BYTES, MAX_SHARDS, POINTER_FORMAT,
    SnapshotPointer, key_problem, log_key, parse_gc_record, parse_log_key, values_key,
};
use guideloom_publish::{Catalog, Checksum, DatasetIdentity, Manifest, ShardFormat, check_name};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The shortest JSON a shard reference can take: `{"key":"a","size":0,"record_count":0}`.
const MIN_SHARD_JSON: usize = 37;
/// The shortest JSON a catalog entry can take: nine fields, one-letter names, the values key
/// they imply, zeros and empty strings elsewhere.
const MIN_ENTRY_JSON: usize = 136;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let fixed = selector & 8 != 0;
    // The ids a reader would expect: fixed ones, or the object's own.
    let fields: Option<Value> = serde_json::from_slice(body).ok();
    let field = |name: &str| -> String {
        match (&fields, fixed) {
            (Some(v), false) => v[name].as_str().unwrap_or("fuzz").to_owned(),
            _ => "fuzz".to_owned(),
        }
    };
    let key = match (&fields, fixed) {
        (Some(v), false) => v["seq"].as_u64().map_or_else(|| log_key(1), log_key),
        _ => log_key(1),
    };
    match selector % 6 {
        0 => identity(body),
        1 => manifest(&key, body, &field("dataset_id")),
        2 => pointer(body, &field("snapshot_id")),
        3 => claim(body, &field("snapshot_id")),
        4 => catalog(body, &field("dataset_id")),
        _ => gc_record(body, &field("dataset_id"), &field("run")),
    }
});

fn reserialized<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec_pretty(value).expect("control objects serialize")
}

fn identity(body: &[u8]) {
    let Ok(id) = DatasetIdentity::parse(body) else {
        return;
    };
    assert_eq!(id.format, DATASET_FORMAT);
    assert_eq!(id.version, CONTROL_VERSION);
    assert!(check_name("dataset id", &id.dataset_id).is_ok());
    let again = DatasetIdentity::parse(&reserialized(&id)).expect("re-parse");
    assert_eq!(again, id);
}

fn manifest(key: &str, body: &[u8], dataset_id: &str) {
    let Ok(m) = Manifest::parse(key, body, dataset_id) else {
        return;
    };
    assert_eq!(m.format, MANIFEST_FORMAT);
    assert_eq!(m.version, CONTROL_VERSION);
    assert_eq!(m.dataset_id, dataset_id);
    assert!(check_name("snapshot id", &m.snapshot_id).is_ok());
    assert!(m.seq != 0);
    if let Some(seq) = parse_log_key(key) {
        assert_eq!(m.seq, seq);
    }
    assert!(m.parent_seq.is_none_or(|p| p < m.seq));
    assert!(m.shards.len() <= MAX_SHARDS);
    assert!(m.shards.len() * MIN_SHARD_JSON <= body.len());
    let mut keys = HashSet::new();
    let mut total: u64 = 0;
    for s in &m.shards {
        assert_eq!(key_problem(&s.key), None, "shard key {:?}", s.key);
        assert!(keys.insert(s.key.as_str()), "shard {:?} twice", s.key);
        assert!(s.size <= MAX_SHARD_BYTES);
        assert!(s.record_count <= MAX_RECORDS);
        if let Some(Checksum::Sha256(hex)) = &s.checksum {
            assert!(hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        }
        assert!(
            !(s.format == ShardFormat::ArrayRecord
                && matches!(s.checksum, Some(Checksum::FooterCrc32c(_)))),
            "ArrayRecord shard {:?} with a footer CRC",
            s.key
        );
        total = total.checked_add(s.record_count).expect("total overflows");
    }
    assert!(total <= MAX_RECORDS);
    assert_eq!(total, m.total_records);
    let again = Manifest::parse(key, &reserialized(&m), dataset_id).expect("re-parse");
    assert_eq!(again, m);
}

fn pointer(body: &[u8], snapshot_id: &str) {
    let key = "snapshots/fuzz.json";
    let Ok(p) = SnapshotPointer::parse(key, body, snapshot_id) else {
        return;
    };
    assert_eq!(p.format, POINTER_FORMAT);
    assert_eq!(p.version, CONTROL_VERSION);
    assert_eq!(p.snapshot_id, snapshot_id);
    assert_eq!(p.log_key, log_key(p.seq));
    assert_eq!(parse_log_key(&p.log_key), Some(p.seq));
    assert_eq!(key_problem(&p.log_key), None);
    assert!(p.log_size <= MAX_CONTROL_OBJECT_BYTES);
    let again = SnapshotPointer::parse(key, &reserialized(&p), snapshot_id).expect("re-parse");
    assert_eq!(again, p);
}

fn claim(body: &[u8], snapshot_id: &str) {
    let key = "claims/fuzz.json";
    let Ok(c) = Claim::parse(key, body, snapshot_id) else {
        return;
    };
    assert_eq!(c.format, CLAIM_FORMAT);
    assert_eq!(c.version, CONTROL_VERSION);
    assert_eq!(c.snapshot_id, snapshot_id);
    let again = Claim::parse(key, &reserialized(&c), snapshot_id).expect("re-parse");
    assert_eq!(again, c);
}

/// A garbage collection record (`gc/<run>.json`): every key it would delete is a key a
/// root may hold (no `..`, no scheme, no dot segment), and it holds no more keys than its
/// bytes can spell (`{"key":"a","size":0}` is 20 bytes).
fn gc_record(body: &[u8], dataset_id: &str, run: &str) {
    let key = format!("gc/{run}.json");
    let Ok(keys) = parse_gc_record(&key, body, dataset_id) else {
        return;
    };
    assert!(keys.len() * 20 <= body.len());
    for k in &keys {
        assert_eq!(key_problem(k), None, "doomed key {k:?}");
    }
}

fn catalog(body: &[u8], dataset_id: &str) {
    let Ok(c) = Catalog::parse(body, dataset_id) else {
        return;
    };
    assert_eq!(c.format, CATALOG_FORMAT);
    assert!(c.version == CONTROL_VERSION || c.version == CONTROL_VERSION + 1);
    for (name, tag) in &c.tags {
        assert!(check_name("tag", name).is_ok());
        assert!(check_name("snapshot id", &tag.snapshot_id).is_ok());
    }
    for e in &c.expired {
        assert!(check_name("snapshot id", &e.snapshot_id).is_ok());
    }
    for k in &c.collected {
        assert_eq!(key_problem(k), None, "collected key {k:?}");
        assert!(k.starts_with("annotations/") && k.ends_with("/values.jsonl"), "{k:?}");
    }
    assert_eq!(c.dataset_id, dataset_id);
    assert!(c.entries.len() * MIN_ENTRY_JSON <= body.len());
    for e in &c.entries {
        assert!(check_name("set", &e.set).is_ok());
        assert!(check_name("version", &e.version).is_ok());
        assert_eq!(e.key, values_key(&e.set, &e.version));
        assert_eq!(key_problem(&e.key), None, "values key {:?}", e.key);
        // The latest entry of a set is the last one added.
        let latest = c.find(&e.set, None).expect("its own set");
        assert!(
            c.entries
                .iter()
                .rposition(|x| x.set == e.set)
                .is_some_and(|i| &c.entries[i] == latest)
        );
        assert!(c.find(&e.set, Some(&e.version)).is_some());
    }
    let again = Catalog::parse(&reserialized(&c), dataset_id).expect("re-parse");
    assert_eq!(again, c);
}
