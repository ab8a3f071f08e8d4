//! The annotation protocol: annotation sets and the catalog, the one mutable object of a
//! root. Free functions over the store trait; [`Root`](crate::Root) delegates to them.
//!
//! Values are written create-only to `annotations/<set>/<version>/values.jsonl` (one JSON
//! value per line, record `i` on line `i`); then an entry is added to
//! `annotations/catalog.json` by read–modify–compare-and-swap–retry. The change is
//! idempotent (an identical entry already present means done), which also resolves an
//! update whose success was reported as an error.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, info_span};

use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::key::{check_name, sha256_hex};
use crate::manifest::{CONTROL_VERSION, MAX_CATALOG_BYTES, parse_json, to_json};
use crate::snapshot_log::Snapshot;
use crate::store::{RootStore, cas_update, create_object};
use guideloom_io::RetryPolicy;

/// Key of the catalog.
pub(crate) const CATALOG_KEY: &str = "annotations/catalog.json";
/// `format` field of the catalog.
pub(crate) const CATALOG_FORMAT: &str = "guideloom-annotation-catalog";
/// Encoding of values objects written by this crate: JSON lines.
pub(crate) const VALUES_FORMAT_JSONL: &str = "jsonl";
/// Largest values object a reader downloads.
pub(crate) const MAX_VALUES_BYTES: u64 = 4 << 30;

/// Key of the values object of `set`/`version`.
pub(crate) fn values_key(set: &str, version: &str) -> String {
    format!("annotations/{set}/{version}/values.{VALUES_FORMAT_JSONL}")
}

/// One annotation set version in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationEntry {
    /// Set name.
    pub set: String,
    /// Version within the set.
    pub version: String,
    /// The snapshot whose records it annotates.
    pub snapshot_id: String,
    /// That snapshot's sequence number.
    pub seq: u64,
    /// Number of values (equals the snapshot's record count).
    pub value_count: u64,
    /// Key of the values object.
    pub key: String,
    /// Its size.
    pub size: u64,
    /// Its SHA-256.
    pub sha256: String,
    /// Its encoding (`"jsonl"`).
    pub format: String,
}

/// A tag: a named, movable reference to a snapshot (`prod`, `eval-2026-12`), kept in the
/// catalog and moved by compare-and-swap like the annotation entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagEntry {
    /// The snapshot it names.
    pub snapshot_id: String,
    /// That snapshot's sequence number.
    pub seq: u64,
}

/// A snapshot the retention policy expired (see `Root::gc`): its log entry stays, its
/// shards may be gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredEntry {
    /// The snapshot.
    pub snapshot_id: String,
    /// Its sequence number.
    pub seq: u64,
}

/// Version of a catalog that holds tags, expired snapshots or collected values: a reader
/// of version 1 refuses it (rather than rewrite it without them).
pub(crate) const CATALOG_VERSION_2: u32 = 2;

/// `annotations/catalog.json`: the one mutable object of a root. It holds the annotation
/// entries and, since version 2, the tags and garbage collection's decisions (expired
/// snapshots, collected values), so every change to any of them is one compare-and-swap
/// against all the others: a tag never names a snapshot collection expired in between, an
/// annotation set never lands on values collection deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// Always `"guideloom-annotation-catalog"`.
    pub format: String,
    /// `1`, or `2` when it holds tags, expired snapshots or collected values.
    pub version: u32,
    /// The dataset.
    pub dataset_id: String,
    /// Entries, in the order they were added.
    pub entries: Vec<AnnotationEntry>,
    /// Tags by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, TagEntry>,
    /// Snapshots expired by the retention policy, in the order they expired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expired: Vec<ExpiredEntry>,
    /// Values objects (`annotations/<set>/<version>/values.jsonl`) garbage collection found
    /// in no entry (an annotator stopped between the values and the catalog) and deletes:
    /// an annotator finding its own here is refused ([`Error::Collected`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collected: Vec<String>,
}

impl Catalog {
    pub(crate) fn empty(dataset_id: &str) -> Self {
        Catalog {
            format: CATALOG_FORMAT.to_owned(),
            version: CONTROL_VERSION,
            dataset_id: dataset_id.to_owned(),
            entries: Vec::new(),
            tags: BTreeMap::new(),
            expired: Vec::new(),
            collected: Vec::new(),
        }
    }

    /// The JSON body, at version 2 when it holds anything version 1 cannot.
    pub(crate) fn to_body(&self) -> Vec<u8> {
        let mut c = self.clone();
        c.version = if c.tags.is_empty() && c.expired.is_empty() && c.collected.is_empty() {
            CONTROL_VERSION
        } else {
            CATALOG_VERSION_2
        };
        to_json(&c)
    }

    /// The expiry of snapshot `snapshot_id`, when the retention policy expired it.
    pub fn expired(&self, snapshot_id: &str) -> Option<&ExpiredEntry> {
        self.expired.iter().find(|e| e.snapshot_id == snapshot_id)
    }

    /// Refuses (typed) a change that would name an expired snapshot.
    pub(crate) fn check_not_expired(&self, snapshot_id: &str) -> Result<()> {
        match self.expired(snapshot_id) {
            Some(e) => Err(Error::SnapshotExpired {
                snapshot_id: e.snapshot_id.clone(),
                seq: e.seq,
            }),
            None => Ok(()),
        }
    }

    /// Parses and validates a catalog of `dataset_id`.
    pub fn parse(body: &[u8], dataset_id: &str) -> Result<Self> {
        let c: Catalog = parse_json(CATALOG_KEY, body)?;
        if c.format != CATALOG_FORMAT || !(CONTROL_VERSION..=CATALOG_VERSION_2).contains(&c.version)
        {
            return Err(Error::corrupt(
                CATALOG_KEY,
                "unknown catalog format or version",
            ));
        }
        if c.dataset_id != dataset_id {
            return Err(Error::corrupt(CATALOG_KEY, "catalog of another dataset"));
        }
        for e in &c.entries {
            if check_name("set", &e.set).is_err()
                || check_name("version", &e.version).is_err()
                || e.key != values_key(&e.set, &e.version)
            {
                return Err(Error::corrupt(
                    CATALOG_KEY,
                    format!("entry {:?}/{:?} has a bad name or key", e.set, e.version),
                ));
            }
        }
        for (name, tag) in &c.tags {
            if check_name("tag", name).is_err()
                || check_name("snapshot id", &tag.snapshot_id).is_err()
            {
                return Err(Error::corrupt(
                    CATALOG_KEY,
                    format!("tag {name:?} has a bad name or snapshot id"),
                ));
            }
        }
        for e in &c.expired {
            if check_name("snapshot id", &e.snapshot_id).is_err() {
                return Err(Error::corrupt(
                    CATALOG_KEY,
                    format!("expired snapshot {:?} has a bad id", e.snapshot_id),
                ));
            }
        }
        for key in &c.collected {
            let ok = key
                .strip_prefix("annotations/")
                .and_then(|k| k.strip_suffix(&format!("/values.{VALUES_FORMAT_JSONL}")))
                .and_then(|k| k.split_once('/'))
                .is_some_and(|(set, version)| {
                    check_name("set", set).is_ok() && check_name("version", version).is_ok()
                });
            if !ok {
                return Err(Error::corrupt(
                    CATALOG_KEY,
                    format!("collected key {key:?} is not an annotation values key"),
                ));
            }
        }
        Ok(c)
    }

    /// The entry of `set` at `version`, or its latest version (the last added) if `None`.
    pub fn find(&self, set: &str, version: Option<&str>) -> Option<&AnnotationEntry> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.set == set && version.is_none_or(|v| e.version == v))
    }
}

/// A downloaded, verified annotation set; values by record index.
#[derive(Debug, Clone)]
pub struct AnnotationSet {
    entry: AnnotationEntry,
    body: Bytes,
    lines: Vec<(usize, usize)>,
}

impl AnnotationSet {
    /// The catalog entry.
    pub fn entry(&self) -> &AnnotationEntry {
        &self.entry
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The JSON text of record `index`'s value, as published (one line of the values file,
    /// checked against the catalog's SHA-256 when the set was opened).
    pub fn raw(&self, index: u64) -> Result<&[u8]> {
        let (start, end) = usize::try_from(index)
            .ok()
            .and_then(|i| self.lines.get(i).copied())
            .ok_or_else(|| Error::OutOfRange {
                index,
                len: self.lines.len() as u64,
                what: format!("annotation set {}/{}", self.entry.set, self.entry.version),
            })?;
        Ok(&self.body[start..end])
    }

    /// The value of record `index`, decoded as `T`.
    pub fn get<T: DeserializeOwned>(&self, index: u64) -> Result<T> {
        serde_json::from_slice(self.raw(index)?).map_err(|e| {
            Error::corrupt(
                &self.entry.key,
                format!("value {index} does not decode: {e}"),
            )
        })
    }
}

/// Reads the catalog (an empty one if none exists yet).
pub(crate) async fn catalog(store: &dyn RootStore, identity: &Identity) -> Result<Catalog> {
    let dataset_id = identity.get(store).await?.dataset_id;
    catalog_of(store, &dataset_id).await
}

/// Reads the catalog of a root of `dataset_id` (an empty one if none exists yet).
pub(crate) async fn catalog_of(store: &dyn RootStore, dataset_id: &str) -> Result<Catalog> {
    match store.get(CATALOG_KEY, MAX_CATALOG_BYTES).await {
        Ok(obj) => Catalog::parse(&obj.body, dataset_id),
        Err(e) if e.is_not_found() => Ok(Catalog::empty(dataset_id)),
        Err(e) => Err(e),
    }
}

/// Publishes annotation set `set` at `version` for the records of `snapshot`: the values
/// object create-only, then the catalog entry by compare-and-swap (bounded by `retry`).
///
/// `values.len()` must equal the snapshot's record count ([`Error::CountMismatch`]).
/// Refused up front on a declared mounted bucket
/// ([`Error::MountedBucketCannotAnnotate`]).
pub(crate) async fn publish<T: Serialize>(
    store: &dyn RootStore,
    identity: &Identity,
    set: &str,
    version: &str,
    snapshot: &Snapshot,
    values: &[T],
    retry: &RetryPolicy,
) -> Result<AnnotationEntry> {
    store.check_cas()?;
    check_name("annotation set", set)?;
    check_name("annotation version", version)?;
    let identity = identity.get(store).await?;
    if values.len() as u64 != snapshot.total_records() {
        return Err(Error::CountMismatch {
            what: format!(
                "values of annotation set {set}/{version} vs records of snapshot {}",
                snapshot.id()
            ),
            expected: snapshot.total_records(),
            actual: values.len() as u64,
        });
    }
    let span = info_span!("publish_annotations", root = %store.describe(), set, version);
    async {
        let mut body = Vec::new();
        for (i, v) in values.iter().enumerate() {
            serde_json::to_writer(&mut body, v).map_err(|e| {
                Error::invalid(format!("annotation value {i} does not serialize: {e}"))
            })?;
            body.push(b'\n');
        }
        let key = values_key(set, version);
        let entry = AnnotationEntry {
            set: set.to_owned(),
            version: version.to_owned(),
            snapshot_id: snapshot.id().to_owned(),
            seq: snapshot.seq(),
            value_count: values.len() as u64,
            key: key.clone(),
            size: body.len() as u64,
            sha256: sha256_hex(&body),
            format: VALUES_FORMAT_JSONL.to_owned(),
        };
        create_object(store, &key, Bytes::from(body)).await?;
        let dataset_id = identity.dataset_id.clone();
        cas_update(store, CATALOG_KEY, MAX_CATALOG_BYTES, retry, |current| {
            let mut catalog = match current {
                Some(body) => Catalog::parse(body, &dataset_id)?,
                None => Catalog::empty(&dataset_id),
            };
            // Garbage collection decided (in this object, so before or after us, never
            // between our read and our write) that these values are orphaned, or that the
            // snapshot expired: the set must not land.
            if catalog.collected.contains(&key) {
                return Err(Error::Collected {
                    key: key.clone(),
                    by: format!("{CATALOG_KEY}#collected"),
                });
            }
            catalog.check_not_expired(snapshot.id())?;
            if let Some(existing) = catalog.find(set, Some(version)) {
                return if *existing == entry {
                    Ok(None) // already there (ours landed earlier)
                } else {
                    Err(Error::PublicationCollision {
                        key: format!("{CATALOG_KEY}#{set}/{version}"),
                    })
                };
            }
            catalog.entries.push(entry.clone());
            Ok(Some(catalog.to_body()))
        })
        .await?;
        Ok(entry)
    }
    .instrument(span)
    .await
}

/// Opens annotation set `set` (at `version`, or its latest) for the records of
/// `snapshot`. A set that annotates another snapshot is refused with
/// [`Error::AnnotationSnapshotMismatch`] unless `allow_other_snapshot`; even then its
/// value count must equal `snapshot`'s record count.
pub(crate) async fn open(
    store: &dyn RootStore,
    identity: &Identity,
    set: &str,
    version: Option<&str>,
    snapshot: &Snapshot,
    allow_other_snapshot: bool,
) -> Result<AnnotationSet> {
    // A reader checks the catalog against the dataset its snapshot names (checked against
    // `dataset.json` when the root has read it), without a request for the identity.
    let dataset_id = identity
        .cached()
        .map_or(snapshot.manifest.dataset_id.as_str(), |id| {
            id.dataset_id.as_str()
        });
    let catalog = catalog_of(store, dataset_id).await?;
    let entry = catalog
        .find(set, version)
        .cloned()
        .ok_or_else(|| Error::NotFound {
            key: format!("{CATALOG_KEY}#{set}/{}", version.unwrap_or("latest")),
        })?;
    let same = entry.snapshot_id == snapshot.id() && entry.seq == snapshot.seq();
    if !same && !allow_other_snapshot {
        return Err(Error::AnnotationSnapshotMismatch {
            set: format!("{}/{}", entry.set, entry.version),
            annotated: entry.snapshot_id.clone(),
            requested: snapshot.id().to_owned(),
        });
    }
    if entry.value_count != snapshot.total_records() {
        return Err(Error::CountMismatch {
            what: format!(
                "values of annotation set {}/{} vs records of snapshot {}",
                entry.set,
                entry.version,
                snapshot.id()
            ),
            expected: snapshot.total_records(),
            actual: entry.value_count,
        });
    }
    if entry.format != VALUES_FORMAT_JSONL {
        return Err(Error::Unsupported {
            what: format!("annotation values format {:?}", entry.format),
        });
    }
    if entry.size > MAX_VALUES_BYTES {
        return Err(Error::TooLarge {
            key: entry.key.clone(),
            limit: MAX_VALUES_BYTES,
            size: Some(entry.size),
        });
    }
    // Bounded by the catalog's reference: a values object larger than its entry says is
    // refused before its body is read.
    let obj = match store.get(&entry.key, entry.size).await {
        Err(Error::TooLarge { size, .. }) => {
            return Err(Error::Verification {
                key: entry.key.clone(),
                what: "size",
                expected: entry.size.to_string(),
                actual: size.map_or_else(|| format!("more than {}", entry.size), |s| s.to_string()),
            });
        }
        other => other?,
    };
    if obj.body.len() as u64 != entry.size {
        return Err(Error::Verification {
            key: entry.key.clone(),
            what: "size",
            expected: entry.size.to_string(),
            actual: obj.body.len().to_string(),
        });
    }
    let actual = sha256_hex(&obj.body);
    if actual != entry.sha256 {
        return Err(Error::Verification {
            key: entry.key.clone(),
            what: "sha256",
            expected: entry.sha256.clone(),
            actual,
        });
    }
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, b) in obj.body.iter().enumerate() {
        if *b == b'\n' {
            lines.push((start, i));
            start = i + 1;
        }
    }
    if start != obj.body.len() || lines.len() as u64 != entry.value_count {
        return Err(Error::corrupt(
            &entry.key,
            format!(
                "{} lines, catalog says {} values",
                lines.len(),
                entry.value_count
            ),
        ));
    }
    Ok(AnnotationSet {
        entry,
        body: obj.body,
        lines,
    })
}
