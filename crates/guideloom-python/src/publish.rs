//! Writing shards and publishing snapshots and annotation sets from Python: the
//! module-level functions (`write_shard`, `adopt_array_record`, `publish`,
//! `publish_annotations`), each a `guideloom.Root` (`crate::root`) built for the one call
//! with the call's store arguments, and the values they return (`ShardRef`, `Snapshot`).
//!
//! `write_shard` streams: the caller's records are pulled from its iterator one at a time,
//! encoded (with the GIL, briefly) and written into the store as they come, so memory is one
//! record plus the shard's index on a local root, as for the Rust `Publisher`.

use std::sync::Arc;

use guideloom::publish::FooterInspector;
use guideloom::{PublishMode, PublishRequest};
use pyo3::prelude::*;

use crate::errors::raise;
use crate::options::{S3Options, StorageOptions};
use crate::root::{Root, annotation_values, staging_refused_for_writes};
use crate::root_args::StoreArgs;
use crate::shard_stores::ShardStoreArg;
use crate::stores::S3ObjectStore;

/// A written shard: pass it to `publish`.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct ShardRef {
    inner: guideloom::ShardRef,
}

#[pymethods]
impl ShardRef {
    /// The shard's key in the root (`shards/<work_id>/<n>.glm`).
    #[getter]
    fn key(&self) -> &str {
        &self.inner.key
    }
    /// Its size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size
    }
    /// The number of records in it.
    #[getter]
    fn record_count(&self) -> u64 {
        self.inner.record_count
    }
    /// The reference as JSON (its manifest form): with `_from_json`, what lets `pickle` carry
    /// a `ShardRef` from a distributed worker back to the process that publishes
    /// (`guideloom/_pickle.py` registers the pair with `copyreg`).
    fn _to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(|e| {
            raise(
                "InternalError",
                format!("cannot encode a shard reference: {e}"),
            )
        })
    }
    /// The reference `_to_json` gave.
    #[staticmethod]
    fn _from_json(json: &str) -> PyResult<Self> {
        let inner = serde_json::from_str(json).map_err(|e| {
            raise(
                "InvalidArgumentError",
                format!("not a shard reference: {e}"),
            )
        })?;
        Ok(ShardRef { inner })
    }
    fn __repr__(&self) -> String {
        format!(
            "ShardRef(key={:?}, size={}, record_count={})",
            self.inner.key, self.inner.size, self.inner.record_count
        )
    }
}

/// A published snapshot.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    inner: guideloom::Snapshot,
    /// How `publish` ended (`None` until something else returns snapshots).
    outcome: Option<guideloom::PublishOutcome>,
}

#[pymethods]
impl Snapshot {
    /// The snapshot id.
    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }
    /// Its position in the root's log (0, 1, ...).
    #[getter]
    fn seq(&self) -> u64 {
        self.inner.seq()
    }
    /// The number of records.
    #[getter]
    fn total_records(&self) -> u64 {
        self.inner.total_records()
    }
    /// How the `publish` call that returned this snapshot ended: `"committed"` (it wrote
    /// the log entry) or `"already_published"` (an identical request, another process or an
    /// earlier attempt, had: nothing was written); `None` for a snapshot that was opened.
    #[getter]
    fn outcome(&self) -> Option<&'static str> {
        self.outcome.map(|o| match o {
            guideloom::PublishOutcome::Committed => "committed",
            guideloom::PublishOutcome::AlreadyPublished => "already_published",
            // A kind added later: reported as neither of the two above.
            _ => "other",
        })
    }
    /// Its shards, in record order.
    #[getter]
    fn shards(&self) -> Vec<ShardRef> {
        self.inner
            .shards()
            .iter()
            .map(|s| ShardRef { inner: s.clone() })
            .collect()
    }
    fn __repr__(&self) -> String {
        format!(
            "Snapshot(id={:?}, seq={}, total_records={}, shards={})",
            self.inner.id(),
            self.inner.seq(),
            self.inner.total_records(),
            self.inner.shards().len()
        )
    }
}

/// Options of `publish`.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct PublicationOptions {
    verify_record_counts: bool,
}

#[pymethods]
impl PublicationOptions {
    #[new]
    #[pyo3(signature = (*, verify_record_counts = false))]
    fn new(verify_record_counts: bool) -> Self {
        PublicationOptions {
            verify_record_counts,
        }
    }
    /// Read each shard's footer (one 64-byte ranged read) and check its record count and
    /// checksum against the reference before publishing.
    #[getter]
    fn verify_record_counts(&self) -> bool {
        self.verify_record_counts
    }
    fn __repr__(&self) -> String {
        format!(
            "PublicationOptions(verify_record_counts={})",
            if self.verify_record_counts {
                "True"
            } else {
                "False"
            }
        )
    }
}

impl PublicationOptions {
    pub(crate) fn to_rust(&self) -> guideloom::PublicationOptions {
        guideloom::PublicationOptions {
            verify_record_counts: self.verify_record_counts,
            inspector: self
                .verify_record_counts
                .then(|| Arc::new(FooterInspector) as Arc<dyn guideloom::publish::ShardInspector>),
            ..guideloom::PublicationOptions::default()
        }
    }
}

impl From<guideloom::ShardRef> for ShardRef {
    fn from(inner: guideloom::ShardRef) -> Self {
        ShardRef { inner }
    }
}

impl ShardRef {
    /// The Rust reference.
    pub(crate) fn to_rust(&self) -> guideloom::ShardRef {
        self.inner.clone()
    }
}

impl Snapshot {
    /// The snapshot a `publish` call returned, with how it ended.
    pub(crate) fn published(published: guideloom::Published) -> Self {
        Snapshot {
            inner: published.snapshot,
            outcome: Some(published.outcome),
        }
    }

    /// A snapshot that was opened (no outcome).
    pub(crate) fn opened(inner: guideloom::Snapshot) -> Self {
        Snapshot {
            inner,
            outcome: None,
        }
    }
}

/// `mode=` of `publish`.
pub(crate) fn publish_mode(mode: &str) -> PyResult<PublishMode> {
    match mode {
        "full" => Ok(PublishMode::Full),
        "append" => Ok(PublishMode::Append),
        other => Err(raise(
            "InvalidArgumentError",
            format!("mode must be \"full\" or \"append\", not {other:?}"),
        )),
    }
}

fn store_args<'a, 'py>(
    s3: Option<&'a Bound<'py, S3Options>>,
    mount: bool,
    object_store: Option<&'a Bound<'py, S3ObjectStore>>,
    storage: Option<&'a Bound<'py, StorageOptions>>,
) -> StoreArgs<'a, 'py> {
    StoreArgs {
        s3,
        mount,
        object_store,
        shard_store: None,
        storage,
    }
}

/// Writes `records` (any iterable) as shard `shard` of worker `work_id` in `root`,
/// create-only at `shards/<work_id>/<shard>.glm` (or, with
/// `shard_store=ArrayRecordShardStore(...)`, as the ArrayRecord file
/// `shards/<work_id>/<shard>.array_record`, records `"raw"` unless `format` says), and
/// returns its reference: `Root(root, ...).write_shard(...)`.
#[pyfunction]
#[pyo3(signature = (records, root, *, work_id, shard = 0, format = None, s3 = None, mount = false, object_store = None, shard_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_shard(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    root: &Bound<'_, PyAny>,
    work_id: String,
    shard: u64,
    format: Option<&Bound<'_, PyAny>>,
    s3: Option<&Bound<'_, S3Options>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    shard_store: Option<&Bound<'_, PyAny>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<ShardRef> {
    let shard_store = ShardStoreArg::extract(shard_store)?;
    if matches!(shard_store, Some(ShardStoreArg::Staging(_))) {
        return Err(staging_refused_for_writes());
    }
    let format = Root::record_format(shard_store.is_some(), format)?;
    let mut args = store_args(s3, mount, object_store, storage_options);
    args.shard_store = shard_store;
    Root::resolve(root, args, false)?.write_records(py, records, work_id, shard, format)
}

/// A reference to the ArrayRecord file at `key` (relative to `root`), for `publish`: its size
/// and record count from the object and its footer (one HEAD, one tail read); the file is
/// neither rewritten nor copied. Its records read as bytes.
#[pyfunction]
#[pyo3(signature = (root, key, *, s3 = None, mount = false, object_store = None, storage_options = None))]
pub(crate) fn adopt_array_record(
    py: Python<'_>,
    root: &Bound<'_, PyAny>,
    key: String,
    s3: Option<&Bound<'_, S3Options>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<ShardRef> {
    let args = store_args(s3, mount, object_store, storage_options);
    Root::resolve(root, args, false)?.adopt(py, key)
}

/// Publishes `shards` as snapshot `snapshot_id` of dataset `dataset_id`: `mode="full"` makes
/// them the whole snapshot, `mode="append"` extends the latest snapshot with them.
#[pyfunction]
#[pyo3(signature = (root, shards, *, dataset_id, snapshot_id, mode = "full", options = None, s3 = None, mount = false, object_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn publish(
    py: Python<'_>,
    root: &Bound<'_, PyAny>,
    shards: Vec<Bound<'_, ShardRef>>,
    dataset_id: String,
    snapshot_id: String,
    mode: &str,
    options: Option<&Bound<'_, PublicationOptions>>,
    s3: Option<&Bound<'_, S3Options>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<Snapshot> {
    let mode = publish_mode(mode)?;
    let options = options.map(|o| o.get().to_rust()).unwrap_or_default();
    let request = PublishRequest {
        dataset_id,
        snapshot_id,
        shards: shards.iter().map(|s| s.get().inner.clone()).collect(),
        mode,
    };
    let args = store_args(s3, mount, object_store, storage_options);
    Root::resolve(root, args, false)?.publish_request(py, request, options)
}

/// Publishes annotation set `name` at `version` for a snapshot (the latest, or
/// `snapshot`): one JSON-compatible value per record, in record order.
#[pyfunction]
#[pyo3(signature = (root, name, version, values, *, snapshot = None, s3 = None, mount = false, object_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn publish_annotations(
    py: Python<'_>,
    root: &Bound<'_, PyAny>,
    name: String,
    version: String,
    values: &Bound<'_, PyAny>,
    snapshot: Option<String>,
    s3: Option<&Bound<'_, S3Options>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<()> {
    let values = annotation_values(values)?;
    let args = store_args(s3, mount, object_store, storage_options);
    Root::resolve(root, args, false)?.annotate(py, name, version, values, snapshot)
}
