//! Control objects of a dataset root — identity, claims, log entries (manifests) and
//! snapshot pointers — their keys, and their validation on read.
//!
//! Everything read from a root is untrusted: [`Manifest::validate`] rejects references that
//! escape the root and absurd sizes or counts with typed errors before anything is used.

use std::collections::HashSet;

use guideloom_format::schema::Schema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::key::{check_name, key_problem};

mod stream_ref;
mod tail;

pub use stream_ref::{CompanionRef, StreamRef};
pub(crate) use stream_ref::{check_stream, stream_meta_key};
pub use tail::{MAX_TAIL_CHECK_BYTES, TailChecksum};

/// `format` field of `dataset.json`.
pub(crate) const DATASET_FORMAT: &str = "guideloom-dataset";
/// `format` field of log entries (manifests).
pub(crate) const MANIFEST_FORMAT: &str = "guideloom-snapshot";
/// `format` field of snapshot pointers.
pub(crate) const POINTER_FORMAT: &str = "guideloom-snapshot-pointer";
/// `format` field of claims.
pub(crate) const CLAIM_FORMAT: &str = "guideloom-snapshot-claim";
/// Version of every control object written by this crate.
pub(crate) const CONTROL_VERSION: u32 = 1;

/// Largest shard size a manifest may reference (2^48 bytes, 256 TiB).
pub(crate) const MAX_SHARD_BYTES: u64 = 1 << 48;
/// Most records a shard or a snapshot may hold (2^48).
pub(crate) const MAX_RECORDS: u64 = 1 << 48;
/// Most shards one snapshot may reference.
pub(crate) const MAX_SHARDS: usize = 10_000_000;
/// Largest control object of any kind a reader downloads: 512 MiB (a manifest; the other
/// kinds have smaller caps of their own, below).
pub(crate) const MAX_CONTROL_OBJECT_BYTES: u64 = 512 << 20;
/// Largest log entry (manifest) a reader downloads: [`MAX_CONTROL_OBJECT_BYTES`]. A listing,
/// HEAD or pointer that gives the entry's size bounds the read more tightly.
pub(crate) const MAX_MANIFEST_BYTES: u64 = MAX_CONTROL_OBJECT_BYTES;
/// Largest `dataset.json` a reader downloads: 64 KiB (this crate writes ~150 bytes).
pub(crate) const MAX_IDENTITY_BYTES: u64 = 64 << 10;
/// Largest snapshot pointer a reader downloads: 64 KiB (this crate writes ~300 bytes).
pub(crate) const MAX_POINTER_BYTES: u64 = 64 << 10;
/// Largest claim a reader downloads: 64 KiB (this crate writes ~250 bytes).
pub(crate) const MAX_CLAIM_BYTES: u64 = 64 << 10;
/// Largest annotation catalog a reader downloads: 64 MiB (about 150 000 entries).
pub(crate) const MAX_CATALOG_BYTES: u64 = 64 << 20;

/// Key of the identity object.
pub(crate) const DATASET_KEY: &str = "dataset.json";
/// Prefix of log entries.
pub(crate) const LOG_PREFIX: &str = "log";

/// Key of the log entry with sequence number `seq`: `log/<seq, 20 digits>.json`.
pub(crate) fn log_key(seq: u64) -> String {
    format!("{LOG_PREFIX}/{seq:020}.json")
}

/// The sequence number of a log key, or `None` if `key` is not one.
pub(crate) fn parse_log_key(key: &str) -> Option<u64> {
    let digits = key.strip_prefix("log/")?.strip_suffix(".json")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Key of the claim of `snapshot_id`.
pub(crate) fn claim_key(snapshot_id: &str) -> String {
    format!("claims/{snapshot_id}.json")
}

/// Key of the pointer of `snapshot_id`.
pub(crate) fn pointer_key(snapshot_id: &str) -> String {
    format!("snapshots/{snapshot_id}.json")
}

/// Key of shard number `index` of worker `work_id`: `shards/<work_id>/<index, 8 digits>.glm`.
pub(crate) fn shard_key(work_id: &str, index: u64) -> String {
    format!("shards/{work_id}/{index:08}.glm")
}

/// Key of ArrayRecord shard number `index` of worker `work_id`:
/// `shards/<work_id>/<index, 8 digits>.array_record`.
pub(crate) fn array_record_shard_key(work_id: &str, index: u64) -> String {
    format!("shards/{work_id}/{index:08}.array_record")
}

/// `dataset.json`: the root's identity, written create-only once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetIdentity {
    /// Always `"guideloom-dataset"`.
    pub format: String,
    /// Always `1`.
    pub version: u32,
    /// The dataset's id.
    pub dataset_id: String,
}

impl DatasetIdentity {
    /// The identity of `dataset_id`.
    pub fn new(dataset_id: &str) -> Self {
        DatasetIdentity {
            format: DATASET_FORMAT.to_owned(),
            version: CONTROL_VERSION,
            dataset_id: dataset_id.to_owned(),
        }
    }

    /// Parses and checks `dataset.json`.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let id: DatasetIdentity = parse_json(DATASET_KEY, body)?;
        check_format(DATASET_KEY, &id.format, DATASET_FORMAT, id.version)?;
        check_name("dataset id", &id.dataset_id)
            .map_err(|e| Error::corrupt(DATASET_KEY, e.to_string()))?;
        Ok(id)
    }
}

/// A shard's integrity check value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Checksum {
    /// SHA-256 of the whole shard, lower-case hex.
    Sha256(String),
    /// The CRC32C the shard's footer records over its index and metadata.
    FooterCrc32c(u32),
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Checksum::Sha256(hex) => write!(f, "sha256 {hex}"),
            Checksum::FooterCrc32c(crc) => write!(f, "footer crc32c {crc:08x}"),
        }
    }
}

/// The file format of a shard: how its bytes are laid out and read.
///
/// Recorded per shard in a manifest (`"format"`), absent for native shards so manifests of
/// native shards are byte-identical to those written before the field existed (which parse as
/// native). A manifest naming a format this build does not know is [`Error::Corrupt`] naming it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardFormat {
    /// guideloom's own shard format (`guideloom-format`, `docs/format.md`).
    #[default]
    Native,
    /// An ArrayRecord (Riegeli) file, as Google's `array_record` package, TFDS and Grain
    /// write them (`guideloom-arrayrecord`, `docs/arrayrecord.md`); its records are raw bytes.
    ArrayRecord,
}

impl ShardFormat {
    /// `true` for [`ShardFormat::Native`] (the default, left out of manifests).
    pub fn is_native(&self) -> bool {
        matches!(self, ShardFormat::Native)
    }

    /// The name used in manifests and shown by tools: `native` or `array_record`.
    pub fn name(&self) -> &'static str {
        match self {
            ShardFormat::Native => "native",
            ShardFormat::ArrayRecord => "array_record",
        }
    }
}

impl std::fmt::Display for ShardFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A reference to one shard inside a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRef {
    /// Key relative to the root.
    pub key: String,
    /// Size in bytes; readers and `publish` check it.
    pub size: u64,
    /// Records in the shard.
    pub record_count: u64,
    /// Integrity check value, when known.
    pub checksum: Option<Checksum>,
    /// The CRC32C of the shard's last bytes, compared by every reader when it opens the
    /// shard (see [`TailChecksum`]): what pins an ArrayRecord file, or a native shard
    /// uploaded as bytes, to the object the reference was made from. Absent in references
    /// written before it existed, and left out of manifests when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailChecksum>,
    /// The shard's file format; [`ShardFormat::Native`] when the manifest does not say.
    #[serde(default, skip_serializing_if = "ShardFormat::is_native")]
    pub format: ShardFormat,
    /// For a stream shard (a native shard of token documents, [`Root::write_stream_shard`]):
    /// its element type and count, and its metadata companion if it has one. Absent for
    /// shards of records, so their manifests are unchanged.
    ///
    /// [`Root::write_stream_shard`]: crate::Root::write_stream_shard
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamRef>,
}

/// How a snapshot relates to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublishMode {
    /// The snapshot holds exactly the shards given.
    Full,
    /// The snapshot holds the latest snapshot's shards followed by the shards given.
    Append,
}

/// A log entry: the complete manifest of one snapshot. Creating it is the commit point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `"guideloom-snapshot"`.
    pub format: String,
    /// Always `1`.
    pub version: u32,
    /// Position in the total order of snapshots (1 for the first).
    pub seq: u64,
    /// The snapshot's id.
    pub snapshot_id: String,
    /// The dataset's id.
    pub dataset_id: String,
    /// The latest sequence number when this one was built (`None` for the first).
    pub parent_seq: Option<u64>,
    /// Full or append.
    pub mode: PublishMode,
    /// The shards, in record order.
    pub shards: Vec<ShardRef>,
    /// Sum of the shards' record counts.
    pub total_records: u64,
    /// The nonce of the claim this publication holds.
    pub claim_nonce: String,
    /// The schema every record matches (`None`: schemaless). Shards of earlier snapshots
    /// (an append) carry a schema this one evolves from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
}

impl Manifest {
    /// Parses and validates a log entry read from `key` of a root of `dataset_id`.
    pub fn parse(key: &str, body: &[u8], dataset_id: &str) -> Result<Self> {
        let m: Manifest = parse_json(key, body)?;
        m.validate(key, dataset_id)?;
        Ok(m)
    }

    /// Validates every field: format, dataset id, sequence number against `key`, shard keys
    /// inside the root, bounded sizes and counts, no duplicate shards, consistent total.
    pub fn validate(&self, key: &str, dataset_id: &str) -> Result<()> {
        check_format(key, &self.format, MANIFEST_FORMAT, self.version)?;
        check_name("dataset id", &self.dataset_id)
            .map_err(|e| Error::corrupt(key, e.to_string()))?;
        if self.dataset_id != dataset_id {
            return Err(Error::corrupt(
                key,
                format!(
                    "manifest of dataset {:?} in a root of dataset {dataset_id:?}",
                    self.dataset_id
                ),
            ));
        }
        check_name("snapshot id", &self.snapshot_id)
            .map_err(|e| Error::corrupt(key, e.to_string()))?;
        if parse_log_key(key).is_some_and(|s| s != self.seq) || self.seq == 0 {
            return Err(Error::corrupt(
                key,
                format!("sequence number {} does not match the key", self.seq),
            ));
        }
        if self.parent_seq.is_some_and(|p| p >= self.seq) {
            return Err(Error::corrupt(
                key,
                "parent sequence number is not before this one",
            ));
        }
        if self.shards.len() > MAX_SHARDS {
            return Err(Error::corrupt(
                key,
                format!("{} shards (at most {MAX_SHARDS})", self.shards.len()),
            ));
        }
        let total = check_shards(&self.shards).map_err(|what| Error::corrupt(key, what))?;
        if let Some(schema) = &self.schema {
            schema
                .check()
                .map_err(|e| Error::corrupt(key, e.to_string()))?;
        }
        if total != self.total_records {
            return Err(Error::corrupt(
                key,
                format!(
                    "total_records {} differs from the sum of shard record counts {total}",
                    self.total_records
                ),
            ));
        }
        Ok(())
    }
}

/// Checks shard references; returns the total record count or what is wrong.
pub(crate) fn check_shards(shards: &[ShardRef]) -> std::result::Result<u64, String> {
    let mut seen = HashSet::with_capacity(shards.len());
    let mut total: u64 = 0;
    for s in shards {
        if let Some(problem) = key_problem(&s.key) {
            return Err(format!("shard key {:?} rejected: {problem}", s.key));
        }
        if !seen.insert(s.key.as_str()) {
            return Err(format!("shard {:?} listed twice", s.key));
        }
        if s.size > MAX_SHARD_BYTES {
            return Err(format!(
                "shard {:?} claims {} bytes (at most {MAX_SHARD_BYTES})",
                s.key, s.size
            ));
        }
        if s.record_count > MAX_RECORDS {
            return Err(format!(
                "shard {:?} claims {} records (at most {MAX_RECORDS})",
                s.key, s.record_count
            ));
        }
        if let Some(Checksum::Sha256(hex)) = &s.checksum
            && (hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        {
            return Err(format!("shard {:?} has a malformed sha256", s.key));
        }
        if let Some(stream) = &s.stream {
            check_stream(s, stream, &mut seen)?;
        }
        if let Some(tail) = &s.tail {
            tail::check_tail(s, tail)?;
        }
        if s.format == ShardFormat::ArrayRecord
            && matches!(s.checksum, Some(Checksum::FooterCrc32c(_)))
        {
            return Err(format!(
                "ArrayRecord shard {:?} carries a native footer checksum",
                s.key
            ));
        }
        total = total
            .checked_add(s.record_count)
            .filter(|t| *t <= MAX_RECORDS)
            .ok_or_else(|| format!("total record count exceeds {MAX_RECORDS}"))?;
    }
    Ok(total)
}

// Public only for the `fuzzing` module (the fuzz targets and the on-disk format tests).
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
/// `snapshots/<id>.json`: points at the log entry of a snapshot, with its size and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPointer {
    /// Always `"guideloom-snapshot-pointer"`.
    pub format: String,
    /// Always `1`.
    pub version: u32,
    /// The snapshot's id.
    pub snapshot_id: String,
    /// Its sequence number.
    pub seq: u64,
    /// Key of its log entry.
    pub log_key: String,
    /// Size of the log entry.
    pub log_size: u64,
    /// SHA-256 of the log entry.
    pub log_sha256: String,
}

#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
impl SnapshotPointer {
    /// Parses and validates a pointer read from `key` for `snapshot_id`.
    pub fn parse(key: &str, body: &[u8], snapshot_id: &str) -> Result<Self> {
        let p: SnapshotPointer = parse_json(key, body)?;
        check_format(key, &p.format, POINTER_FORMAT, p.version)?;
        if p.snapshot_id != snapshot_id {
            return Err(Error::corrupt(key, "pointer names another snapshot"));
        }
        if p.log_key != log_key(p.seq) {
            return Err(Error::corrupt(
                key,
                format!(
                    "log key {:?} is not the log entry of seq {}",
                    p.log_key, p.seq
                ),
            ));
        }
        if p.log_size > MAX_CONTROL_OBJECT_BYTES {
            return Err(Error::corrupt(key, "log entry size out of bounds"));
        }
        Ok(p)
    }
}

// Public only for the `fuzzing` module (the fuzz targets and the on-disk format tests).
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
/// `claims/<id>.json`: a publisher's exclusive claim of a snapshot id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Always `"guideloom-snapshot-claim"`.
    pub format: String,
    /// Always `1`.
    pub version: u32,
    /// The snapshot id claimed.
    pub snapshot_id: String,
    /// The dataset.
    pub dataset_id: String,
    /// Random; makes every claim's bytes unique.
    pub nonce: String,
    /// Wall-clock time of the claim (informational only; nothing is ordered by it).
    pub created_at_unix_ms: u64,
    /// SHA-256 of the publication request (dataset, snapshot id, mode, shards): a retry of
    /// the same request finds its own claim and resumes; any other request with this
    /// snapshot id collides. Absent in claims written before it existed (they always
    /// collide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sha256: Option<String>,
    /// The latest log sequence number when the claim was made (0: an empty log): no log
    /// entry of this claim can lie at or below it, so a publisher that takes the claim over
    /// reads only the entries after it to find one an identical request committed. Absent
    /// in claims written before it existed (read as 0: the whole log is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_base: Option<u64>,
    /// The directories of the request's shards (`shards/<work_id>`, and those of stream
    /// companions): while the claim has no log entry, garbage collection deletes nothing
    /// under them. Absent in claims written before it existed, or when the list would not
    /// fit a claim: such a claim covers every shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefixes: Option<Vec<String>>,
}

#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
impl Claim {
    /// Parses and validates a claim read from `key` for `snapshot_id`.
    pub fn parse(key: &str, body: &[u8], snapshot_id: &str) -> Result<Self> {
        let c: Claim = parse_json(key, body)?;
        check_format(key, &c.format, CLAIM_FORMAT, c.version)?;
        if c.snapshot_id != snapshot_id {
            return Err(Error::corrupt(key, "claim names another snapshot"));
        }
        Ok(c)
    }
}

pub(crate) fn parse_json<T: for<'de> Deserialize<'de>>(key: &str, body: &[u8]) -> Result<T> {
    if body.len() as u64 > MAX_CONTROL_OBJECT_BYTES {
        return Err(Error::corrupt(key, "control object too large"));
    }
    serde_json::from_slice(body).map_err(|e| Error::corrupt(key, format!("invalid JSON: {e}")))
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail (no maps with non-string keys).
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

fn check_format(key: &str, format: &str, want: &str, version: u32) -> Result<()> {
    if format != want {
        return Err(Error::corrupt(
            key,
            format!("format {format:?}, expected {want:?}"),
        ));
    }
    if version != CONTROL_VERSION {
        return Err(Error::corrupt(
            key,
            format!("version {version} (this build reads version {CONTROL_VERSION})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(shards: Vec<ShardRef>) -> Manifest {
        let total_records = shards.iter().map(|s| s.record_count).sum();
        Manifest {
            format: MANIFEST_FORMAT.into(),
            version: CONTROL_VERSION,
            seq: 3,
            snapshot_id: "s".into(),
            dataset_id: "d".into(),
            parent_seq: Some(2),
            mode: PublishMode::Full,
            shards,
            total_records,
            claim_nonce: "n".into(),
            schema: None,
        }
    }

    fn shard(key: &str) -> ShardRef {
        ShardRef {
            key: key.into(),
            size: 10,
            record_count: 2,
            checksum: None,
            tail: None,
            format: ShardFormat::Native,
            stream: None,
        }
    }

    #[test]
    fn log_keys_round_trip() {
        assert_eq!(log_key(7), "log/00000000000000000007.json");
        assert_eq!(parse_log_key(&log_key(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_log_key("log/7.json"), None);
        assert_eq!(parse_log_key("log/0000000000000000000x.json"), None);
    }

    #[test]
    fn valid_manifest_passes_and_hostile_ones_fail() {
        let key = log_key(3);
        manifest(vec![shard("shards/a/1.glm")])
            .validate(&key, "d")
            .unwrap();
        for bad in ["../x", "/abs", "s3://other-bucket/x", "a//b"] {
            let err = manifest(vec![shard(bad)]).validate(&key, "d").unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{bad}: {err}");
        }
        let mut big = manifest(vec![shard("x")]);
        big.shards[0].size = MAX_SHARD_BYTES + 1;
        assert!(matches!(
            big.validate(&key, "d"),
            Err(Error::Corrupt { .. })
        ));
        let mut wrong_total = manifest(vec![shard("x")]);
        wrong_total.total_records = 99;
        assert!(matches!(
            wrong_total.validate(&key, "d"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            manifest(vec![shard("x")]).validate(&key, "other"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            manifest(vec![shard("x")]).validate(&log_key(4), "d"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            manifest(vec![shard("x"), shard("x")]).validate(&key, "d"),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn shard_formats_round_trip_and_native_stays_implicit() {
        let native = shard("shards/a/1.glm");
        let text = String::from_utf8(to_json(&native)).unwrap();
        assert!(
            !text.contains("format"),
            "native shards carry no format: {text}"
        );
        // A reference written before the field existed parses as native.
        let old = br#"{"key":"k","size":1,"record_count":0,"checksum":null}"#;
        let parsed: ShardRef = serde_json::from_slice(old).unwrap();
        assert_eq!(parsed.format, ShardFormat::Native);
        let ar = ShardRef {
            format: ShardFormat::ArrayRecord,
            ..shard("shards/a/1.array_record")
        };
        let text = String::from_utf8(to_json(&ar)).unwrap();
        assert!(text.contains(r#""format": "array_record""#), "{text}");
        assert_eq!(serde_json::from_str::<ShardRef>(&text).unwrap(), ar);
        // An ArrayRecord shard has no native footer to carry a CRC of.
        let crc = ShardRef {
            checksum: Some(Checksum::FooterCrc32c(7)),
            ..ar.clone()
        };
        assert!(matches!(
            manifest(vec![crc]).validate(&log_key(3), "d"),
            Err(Error::Corrupt { .. })
        ));
        // A format this build does not know is a Corrupt manifest naming it.
        let mut m = String::from_utf8(to_json(&manifest(vec![ar]))).unwrap();
        m = m.replace(r#""array_record""#, r#""parquet""#);
        let err = Manifest::parse(&log_key(3), m.as_bytes(), "d").unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { key, what } if *key == log_key(3) && what.contains("parquet")),
            "{err}"
        );
    }
}
