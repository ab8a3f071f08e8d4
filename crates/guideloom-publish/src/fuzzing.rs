//! The on-disk format's internals — control-object parsers, format names, caps and the key
//! layout — for the cargo-fuzz targets in `fuzz/` and the tests of the format itself
//! (feature `fuzzing`).
//!
//! **Internal and unstable**: not part of guideloom-publish's API, outside semver, hidden
//! from the docs. The types are the ones readers use; the constants are copies of the
//! internal ones and the functions call the internal ones unchanged.

use crate::{annotations, key, manifest};

pub use crate::manifest::{Claim, SnapshotPointer};

/// `format` field of `dataset.json`.
pub const DATASET_FORMAT: &str = manifest::DATASET_FORMAT;
/// `format` field of log entries (manifests).
pub const MANIFEST_FORMAT: &str = manifest::MANIFEST_FORMAT;
/// `format` field of snapshot pointers.
pub const POINTER_FORMAT: &str = manifest::POINTER_FORMAT;
/// `format` field of claims.
pub const CLAIM_FORMAT: &str = manifest::CLAIM_FORMAT;
/// `format` field of the annotation catalog.
pub const CATALOG_FORMAT: &str = annotations::CATALOG_FORMAT;
/// Version of every control object.
pub const CONTROL_VERSION: u32 = manifest::CONTROL_VERSION;

/// Largest shard size a manifest may reference.
pub const MAX_SHARD_BYTES: u64 = manifest::MAX_SHARD_BYTES;
/// Most records a shard or a snapshot may hold.
pub const MAX_RECORDS: u64 = manifest::MAX_RECORDS;
/// Most shards one snapshot may reference.
pub const MAX_SHARDS: usize = manifest::MAX_SHARDS;
/// Largest control object of any kind a reader downloads.
pub const MAX_CONTROL_OBJECT_BYTES: u64 = manifest::MAX_CONTROL_OBJECT_BYTES;
/// Largest `dataset.json` a reader downloads.
pub const MAX_IDENTITY_BYTES: u64 = manifest::MAX_IDENTITY_BYTES;
/// Largest annotation catalog a reader downloads.
pub const MAX_CATALOG_BYTES: u64 = manifest::MAX_CATALOG_BYTES;

/// Key of the identity object.
pub const DATASET_KEY: &str = manifest::DATASET_KEY;
/// Prefix of log entries.
pub const LOG_PREFIX: &str = manifest::LOG_PREFIX;
/// Key of the annotation catalog.
pub const CATALOG_KEY: &str = annotations::CATALOG_KEY;

/// Key of the log entry with sequence number `seq`.
pub fn log_key(seq: u64) -> String {
    manifest::log_key(seq)
}

/// The sequence number of a log key, or `None` if `key` is not one.
pub fn parse_log_key(key: &str) -> Option<u64> {
    manifest::parse_log_key(key)
}

/// Key of the pointer of snapshot `snapshot_id`.
pub fn pointer_key(snapshot_id: &str) -> String {
    manifest::pointer_key(snapshot_id)
}

/// Key of the values of annotation set `set`, version `version`.
pub fn values_key(set: &str, version: &str) -> String {
    annotations::values_key(set, version)
}

/// Why `key` is not a safe key relative to a root, or `None` when it is.
pub fn key_problem(key: &str) -> Option<&'static str> {
    key::key_problem(key)
}

/// Lower-case hex SHA-256 of `bytes`, as pointers and catalog entries record it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    key::sha256_hex(bytes)
}

/// What [`parse_listing`] found below a directory: a file's key and size, or a
/// subdirectory's key (size `None`).
pub type ListedEntry = (String, Option<u64>);

/// Parses the JSON directory listing `body` of the directory `dir` (a key prefix, `""` for
/// the root) as an HTTP root with listing does; the error is its message.
pub fn parse_listing(dir: &str, body: &[u8]) -> Result<Vec<ListedEntry>, String> {
    use crate::store::http_listing::{Listed, parse};
    parse(dir, body)
        .map(|listed| {
            listed
                .into_iter()
                .map(|l| match l {
                    Listed::File(key, size) => (key, Some(size)),
                    Listed::Dir(key) => (key, None),
                })
                .collect()
        })
        .map_err(|e| e.to_string())
}

/// Parses a garbage collection record (`gc/<run>.json`) as a collection and a publication
/// read it: the keys it would delete.
pub fn parse_gc_record(key: &str, body: &[u8], dataset_id: &str) -> crate::Result<Vec<String>> {
    crate::gc::record::Record::parse(key, body, dataset_id)
        .map(|r| r.delete.into_iter().map(|d| d.key).collect())
}
