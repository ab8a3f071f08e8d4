//! The module-level functions on a root (`write_shard`, `adopt_array_record`, `publish`,
//! `publish_annotations`, `convert_stream_storage`): each is a `guideloom.Root` (`crate::root`) built for the one call
//! from the call's store arguments, then the method of the same name. `open` is in
//! `crate::dataset`.
//!
//! `write_shard` streams: the caller's records are pulled from its iterator one at a time,
//! encoded (with the GIL, briefly) and written into the store as they come, so memory is one
//! record plus the shard's index on a local root, as for the Rust `Publisher`.

use std::path::PathBuf;

use guideloom::PublishRequest;
use guideloom::storage::convert::ConvertRequest;
use pyo3::prelude::*;

use crate::cloud_options::{AzureOptions, GcsOptions};
use crate::options::{S3Options, StorageOptions};
use crate::publish::{PublicationOptions, ShardRef, Snapshot, publish_mode};
use crate::root::{Root, annotation_values, staging_refused_for_writes};
use crate::root_args::{SchemeArgs, StoreArgs};
use crate::shard_stores::ShardStoreArg;
use crate::stores::S3ObjectStore;

fn store_args<'a, 'py>(
    schemes: SchemeArgs<'a, 'py>,
    mount: bool,
    object_store: Option<&'a Bound<'py, S3ObjectStore>>,
    storage: Option<&'a Bound<'py, StorageOptions>>,
) -> StoreArgs<'a, 'py> {
    StoreArgs {
        schemes,
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
#[pyo3(signature = (records, root, *, work_id, shard = 0, format = None, s3 = None, gcs = None, azure = None, mount = false, object_store = None, shard_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_shard(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    root: &Bound<'_, PyAny>,
    work_id: String,
    shard: u64,
    format: Option<&Bound<'_, PyAny>>,
    s3: Option<&Bound<'_, S3Options>>,
    gcs: Option<&Bound<'_, GcsOptions>>,
    azure: Option<&Bound<'_, AzureOptions>>,
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
    let mut args = store_args(
        SchemeArgs { s3, gcs, azure },
        mount,
        object_store,
        storage_options,
    );
    args.shard_store = shard_store;
    Root::resolve(root, args, false)?.write_records(py, records, work_id, shard, format)
}

/// A reference to the ArrayRecord file at `key` (relative to `root`), for `publish`: its size
/// and record count from the object and its footer (one HEAD, one tail read); the file is
/// neither rewritten nor copied. Its records read as bytes.
#[pyfunction]
#[pyo3(signature = (root, key, *, s3 = None, gcs = None, azure = None, mount = false, object_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn adopt_array_record(
    py: Python<'_>,
    root: &Bound<'_, PyAny>,
    key: String,
    s3: Option<&Bound<'_, S3Options>>,
    gcs: Option<&Bound<'_, GcsOptions>>,
    azure: Option<&Bound<'_, AzureOptions>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<ShardRef> {
    let args = store_args(
        SchemeArgs { s3, gcs, azure },
        mount,
        object_store,
        storage_options,
    );
    Root::resolve(root, args, false)?.adopt(py, key)
}

/// Publishes `shards` as snapshot `snapshot_id` of dataset `dataset_id`: `mode="full"` makes
/// them the whole snapshot, `mode="append"` extends the latest snapshot with them.
#[pyfunction]
#[pyo3(signature = (root, shards, *, dataset_id, snapshot_id, mode = "full", options = None, s3 = None, gcs = None, azure = None, mount = false, object_store = None, storage_options = None))]
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
    gcs: Option<&Bound<'_, GcsOptions>>,
    azure: Option<&Bound<'_, AzureOptions>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<Snapshot> {
    let mode = publish_mode(mode)?;
    let options = options.map(|o| o.get().to_rust()).unwrap_or_default();
    let request = PublishRequest {
        dataset_id,
        snapshot_id,
        shards: shards.iter().map(|s| s.get().to_rust()).collect(),
        mode,
        schema: None,
    };
    let args = store_args(
        SchemeArgs { s3, gcs, azure },
        mount,
        object_store,
        storage_options,
    );
    Root::resolve(root, args, false)?.publish_request(py, request, options)
}

/// Publishes annotation set `name` at `version` for a snapshot (the latest, or
/// `snapshot`): one JSON-compatible value per record, in record order.
#[pyfunction]
#[pyo3(signature = (root, name, version, values, *, snapshot = None, s3 = None, gcs = None, azure = None, mount = false, object_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn publish_annotations(
    py: Python<'_>,
    root: &Bound<'_, PyAny>,
    name: String,
    version: String,
    values: &Bound<'_, PyAny>,
    snapshot: Option<String>,
    s3: Option<&Bound<'_, S3Options>>,
    gcs: Option<&Bound<'_, GcsOptions>>,
    azure: Option<&Bound<'_, AzureOptions>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<()> {
    let values = annotation_values(values)?;
    let args = store_args(
        SchemeArgs { s3, gcs, azure },
        mount,
        object_store,
        storage_options,
    );
    Root::resolve(root, args, false)?.annotate(py, name, version, values, snapshot)
}

/// Migrates the `StreamStorage` / `StreamWithMetaStorage` directory `directory` (any element
/// type) into `root` as a stream snapshot, the one token-stream encoding, and publishes it:
/// the same tokens; a stream-with-meta storage's documents and metadata kept, a plain
/// stream's chunks as the documents. Refused (`InvalidArgumentError`) before anything is
/// written when the directory is missing or empty, holds document shards, or has shards with
/// user metadata. Rust: `guideloom::storage::convert::stream_to_root`.
#[pyfunction]
#[pyo3(signature = (directory, root, *, dataset_id, snapshot_id, work_id = "convert", s3 = None, gcs = None, azure = None, mount = false, object_store = None, storage_options = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert_stream_storage(
    py: Python<'_>,
    directory: PathBuf,
    root: &Bound<'_, PyAny>,
    dataset_id: String,
    snapshot_id: String,
    work_id: &str,
    s3: Option<&Bound<'_, S3Options>>,
    gcs: Option<&Bound<'_, GcsOptions>>,
    azure: Option<&Bound<'_, AzureOptions>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    storage_options: Option<&Bound<'_, StorageOptions>>,
) -> PyResult<Snapshot> {
    let request = ConvertRequest::new(dataset_id, snapshot_id).work_id(work_id);
    let args = store_args(
        SchemeArgs { s3, gcs, azure },
        mount,
        object_store,
        storage_options,
    );
    Root::resolve(root, args, false)?.convert_stream_storage(py, directory, request)
}
