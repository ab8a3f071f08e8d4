//! `guideloom.Root`: a dataset root whose store is resolved once, with the root's operations
//! as methods (`write_shard`, `write_stream_shard`, `adopt_array_record`, `publish`,
//! `publish_annotations`, `open`, `latest`, `snapshot`, `snapshots`).
//!
//! The store arguments (`s3=`, `gcs=`, `azure=`, `mount=`, `object_store=`, `shard_store=`,
//! `storage_options=`, `http_listing=`) are given once, to the constructor, and become the
//! facade's `DatasetOptions` (`crate::root_args::call_options`) and a resolved
//! `guideloom::publish::Root`, which every method reuses: one S3 client (and one credential
//! resolution) for the root's lifetime, where each module-level call resolves its own. The
//! module-level functions (`guideloom.write_shard`, ...) are this type's methods on a root
//! built for the one call (`crate::publish`, `crate::dataset::open`).
//!
//! A `Root` used in a child made by `fork` resolves its store again there (the parent's
//! clients belong to the parent's runtime), as a `Dataset` re-opens itself.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use guideloom::DatasetOptions;
use guideloom::arrayrecord::ArrayRecordWriterOptions;
use guideloom::format::KIND_STREAM;
use guideloom::format::{ShardMetadata, Value};
use guideloom::publish::{Root as Resolved, StreamRef};
use guideloom::storage::convert::{ConvertError, ConvertRequest, stream_to_root};
use guideloom::{PublishRequest, RetryPolicy};
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList};

use crate::cloud_options::{AzureOptions, GcsOptions};
use crate::dataset::{Dataset, cache_options, open_in};
use crate::errors::{Error, raise};
use crate::format::{RecordFormat, raw_bytes};
use crate::options::{S3Options, StorageOptions, root_uri};
use crate::publish::{PublicationOptions, ShardRef, Snapshot, publish_mode};
use crate::root_args::{SchemeArgs, StoreArgs, call_options};
use crate::runtime::{self, block_on};
use crate::shard_stores::ShardStoreArg;
use crate::stores::S3ObjectStore;
use crate::tokens::element_dtype;

/// The resolved root and the process it was resolved in.
struct Current {
    pid: u32,
    root: Resolved,
}

/// A dataset root, resolved once: `Root(uri, *, s3=None, gcs=None, azure=None, mount=False,
/// object_store=None, shard_store=None, storage_options=None, http_listing=False)`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct Root {
    uri: String,
    /// The facade options of every call (store registry, staging, root options).
    options: DatasetOptions,
    /// `shard_store=` as passed (`None` without one).
    shard_store: Option<Py<PyAny>>,
    /// The ArrayRecord writer options when `shard_store` is an `ArrayRecordShardStore`: its
    /// shards are written and read as ArrayRecord files.
    array_record: Option<ArrayRecordWriterOptions>,
    /// The store's description (credentials redacted), which errors name.
    pub(crate) name: String,
    state: Mutex<Current>,
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root").field("root", &self.name).finish()
    }
}

/// How one of the caller's records becomes bytes (called with the GIL).
type Encode = Box<dyn FnMut(&Bound<'_, PyAny>) -> PyResult<Bytes> + Send>;

/// The caller's records, pulled and encoded one at a time (with the GIL, only for that).
struct Records {
    iter: Py<PyIterator>,
    encode: Encode,
}

impl Iterator for Records {
    type Item = Result<Bytes, PyErr>;

    fn next(&mut self) -> Option<Self::Item> {
        Python::attach(|py| {
            let mut iter = self.iter.bind(py).clone();
            match iter.next()? {
                Ok(record) => Some((self.encode)(&record)),
                Err(e) => Some(Err(e)),
            }
        })
    }
}

impl Root {
    /// The root `root` (a `str` or `os.PathLike`) with the store arguments `args`, resolved.
    pub(crate) fn resolve(
        root: &Bound<'_, PyAny>,
        args: StoreArgs<'_, '_>,
        http_listing: bool,
    ) -> PyResult<Self> {
        let uri = root_uri(root)?;
        let shard_store = args.shard_store.as_ref().map(|s| match s {
            ShardStoreArg::Staging(s) => s.as_any().clone().unbind(),
            ShardStoreArg::ArrayRecord(s) => s.as_any().clone().unbind(),
        });
        let array_record = args
            .shard_store
            .as_ref()
            .and_then(ShardStoreArg::array_record)
            .map(|s| s.get().writer_options());
        let mut options = call_options(&uri, args)?;
        options.store.http_listing = http_listing;
        let resolved = guideloom::resolve_root(&uri, &options).map_err(Error::from)?;
        let name = resolved.store().describe();
        Ok(Root {
            uri,
            options,
            shard_store,
            array_record,
            name,
            state: Mutex::new(Current {
                pid: runtime::pid(),
                root: resolved,
            }),
        })
    }

    /// The resolved root of this process (resolved again in a forked child).
    pub(crate) fn current(&self) -> PyResult<Resolved> {
        let pid = runtime::pid();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.pid != pid {
            let fresh = guideloom::resolve_root(&self.uri, &self.options).map_err(Error::from)?;
            let stale = std::mem::replace(&mut *state, Current { pid, root: fresh });
            // Its clients belong to the parent's runtime: dropping them here could
            // deregister the parent's sockets (see `crate::dataset`).
            std::mem::forget(stale);
        }
        Ok(state.root.clone())
    }

    /// The record format of `write_shard` and `open`: `format=`, else raw bytes for an
    /// ArrayRecord root and CBOR otherwise.
    pub(crate) fn record_format(
        array_record: bool,
        format: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RecordFormat> {
        let default = if array_record {
            RecordFormat::Raw
        } else {
            RecordFormat::Cbor
        };
        RecordFormat::extract(format, default)
    }

    /// Writes `records` as shard `shard` of `work_id` (see `write_shard`).
    pub(crate) fn write_records(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        work_id: String,
        shard: u64,
        format: RecordFormat,
    ) -> PyResult<ShardRef> {
        let root = self.current()?;
        let name = self.name.clone();
        let array_record = self.array_record;
        let records = Records {
            iter: PyIterator::from_object(records)?.unbind(),
            encode: Box::new(move |record| format.encode(record)),
        };
        let written = block_on(py, async move {
            let written = match array_record {
                Some(options) => {
                    root.try_write_array_record_shard(&work_id, shard, options, records)
                        .await
                }
                None => {
                    let meta = ShardMetadata::new(format.name(), "documents");
                    root.try_write_shard(&work_id, shard, meta, records).await
                }
            };
            written.map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(ShardRef::from(written?))
    }

    /// Adopts the ArrayRecord file at `key` (see `adopt_array_record`).
    pub(crate) fn adopt(&self, py: Python<'_>, key: String) -> PyResult<ShardRef> {
        let root = self.current()?;
        let name = self.name.clone();
        let adopted = block_on(py, async move {
            root.adopt_array_record(&key)
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(ShardRef::from(adopted))
    }

    /// Publishes `request` (see `publish`).
    pub(crate) fn publish_request(
        &self,
        py: Python<'_>,
        request: PublishRequest,
        options: guideloom::PublicationOptions,
    ) -> PyResult<Snapshot> {
        let root = self.current()?;
        let name = self.name.clone();
        let published = block_on(py, async move {
            root.publish(&request, &options)
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(Snapshot::published(published))
    }

    /// Migrates a stream storage directory into this root (see `convert_stream_storage`).
    pub(crate) fn convert_stream_storage(
        &self,
        py: Python<'_>,
        directory: PathBuf,
        request: ConvertRequest,
    ) -> PyResult<Snapshot> {
        let root = self.current()?;
        let name = self.name.clone();
        let converted = block_on(py, async move {
            stream_to_root(&directory, &root, &request)
                .await
                .map_err(|e| {
                    let e = match e {
                        ConvertError::Source(e) => Error::from(e),
                        ConvertError::Publish(e) => Error::from(e),
                        refused => Error::from(guideloom::format::Error::InvalidArgument {
                            message: refused.to_string(),
                        }),
                    };
                    e.in_root(name)
                })
        })?;
        Ok(Snapshot::published(converted.published))
    }

    /// Publishes annotation values (see `publish_annotations`).
    pub(crate) fn annotate(
        &self,
        py: Python<'_>,
        name: String,
        version: String,
        values: Vec<Value>,
        snapshot: Option<String>,
    ) -> PyResult<()> {
        let root = self.current()?;
        let root_name = self.name.clone();
        block_on(py, async move {
            let published = async {
                let snapshot = match snapshot {
                    Some(id) => root.snapshot(&id).await?,
                    None => root.latest().await?,
                };
                let retry = RetryPolicy::contended_update();
                root.publish_annotations(&name, &version, &snapshot, &values, &retry)
                    .await
            };
            match published.await {
                Ok(_) => Ok(()),
                Err(e) => Err(Error::from(e).in_root(root_name)),
            }
        })
    }
}

/// One JSON-compatible value per item of `values` (annotations).
pub(crate) fn annotation_values(values: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    PyIterator::from_object(values)?
        .map(|v| crate::format::annotation_value(&v?))
        .collect()
}

/// `numpy.ascontiguousarray`, looked up once.
fn ascontiguousarray(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static FUNCTION: OnceLock<Py<PyAny>> = OnceLock::new();
    if let Some(f) = FUNCTION.get() {
        return Ok(f.bind(py).clone());
    }
    let f = py.import("numpy")?.getattr("ascontiguousarray")?;
    Ok(FUNCTION.get_or_init(|| f.unbind()).bind(py).clone())
}

#[pymethods]
impl Root {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (uri, *, s3 = None, gcs = None, azure = None, mount = false, object_store = None, shard_store = None, storage_options = None, http_listing = false))]
    fn new(
        uri: &Bound<'_, PyAny>,
        s3: Option<&Bound<'_, S3Options>>,
        gcs: Option<&Bound<'_, GcsOptions>>,
        azure: Option<&Bound<'_, AzureOptions>>,
        mount: bool,
        object_store: Option<&Bound<'_, S3ObjectStore>>,
        shard_store: Option<&Bound<'_, PyAny>>,
        storage_options: Option<&Bound<'_, StorageOptions>>,
        http_listing: bool,
    ) -> PyResult<Self> {
        let args = StoreArgs {
            schemes: SchemeArgs { s3, gcs, azure },
            mount,
            object_store,
            shard_store: ShardStoreArg::extract(shard_store)?,
            storage: storage_options,
        };
        Root::resolve(uri, args, http_listing)
    }

    /// The root as given (a path or URI).
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The `shard_store=` the root was built with, or `None`.
    #[getter]
    fn shard_store(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.shard_store.as_ref().map(|s| s.clone_ref(py))
    }

    /// Writes `records` (any iterable) as shard `shard` of worker `work_id`, create-only at
    /// `shards/<work_id>/<shard>.glm` (an ArrayRecord file
    /// `shards/<work_id>/<shard>.array_record` when the root's `shard_store` is an
    /// `ArrayRecordShardStore`), and returns its reference.
    #[pyo3(signature = (records, *, work_id, shard = 0, format = None))]
    fn write_shard(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        work_id: String,
        shard: u64,
        format: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ShardRef> {
        let format = Root::record_format(self.array_record.is_some(), format)?;
        self.write_records(py, records, work_id, shard, format)
    }

    /// Writes `documents` (any iterable of array-likes of `dtype`) as stream shard `shard`
    /// of worker `work_id`: one record per document, its tokens little-endian, and the
    /// element type and token count in the reference, so that a snapshot of stream shards
    /// is a token stream (`Dataset.tokens`).
    #[pyo3(signature = (documents, *, work_id, dtype, shard = 0))]
    fn write_stream_shard(
        &self,
        py: Python<'_>,
        documents: &Bound<'_, PyAny>,
        work_id: String,
        dtype: &Bound<'_, PyAny>,
        shard: u64,
    ) -> PyResult<ShardRef> {
        let (element, width, le) = element_dtype(dtype)?;
        let root = self.current()?;
        let name = self.name.clone();
        let elements = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&elements);
        let le = le.unbind();
        let records = Records {
            iter: PyIterator::from_object(documents)?.unbind(),
            encode: Box::new(move |document| {
                let py = document.py();
                let array = ascontiguousarray(py)?.call1((document, le.bind(py)))?;
                let bytes = raw_bytes(&array.getattr("data")?.call_method1("cast", ("B",))?)?;
                counted.fetch_add(bytes.len() as u64 / width, Ordering::Relaxed);
                Ok(bytes)
            }),
        };
        let written = block_on(py, async move {
            let meta = ShardMetadata::new("raw", KIND_STREAM).with_element(element);
            root.try_write_shard(&work_id, shard, meta, records)
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        let mut written = written?;
        written.stream = Some(StreamRef {
            element: element.to_owned(),
            elements: elements.load(Ordering::Relaxed),
            meta: None,
        });
        Ok(ShardRef::from(written))
    }

    /// A reference to the ArrayRecord file at `key` (relative to the root), for `publish`.
    fn adopt_array_record(&self, py: Python<'_>, key: String) -> PyResult<ShardRef> {
        self.adopt(py, key)
    }

    /// Publishes `shards` as snapshot `snapshot_id` of dataset `dataset_id` (`mode="full"`
    /// or `"append"`), declaring `schema` (a `pyarrow.Schema`, or anything with
    /// `__arrow_c_schema__`) when its records have one.
    #[pyo3(signature = (shards, *, dataset_id, snapshot_id, mode = "full", options = None, schema = None))]
    #[allow(clippy::too_many_arguments)]
    fn publish(
        &self,
        py: Python<'_>,
        shards: Vec<Bound<'_, ShardRef>>,
        dataset_id: String,
        snapshot_id: String,
        mode: &str,
        options: Option<&Bound<'_, PublicationOptions>>,
        schema: Option<pyo3_arrow::PySchema>,
    ) -> PyResult<Snapshot> {
        let request = PublishRequest {
            dataset_id,
            snapshot_id,
            shards: shards.iter().map(|s| s.get().to_rust()).collect(),
            mode: publish_mode(mode)?,
            schema: schema
                .map(|s| crate::columns::stored_schema(&s))
                .transpose()?,
        };
        let options = options.map(|o| o.get().to_rust()).unwrap_or_default();
        self.publish_request(py, request, options)
    }

    /// Publishes annotation set `name` at `version` for the latest snapshot (or `snapshot`):
    /// one JSON-compatible value per record, in record order.
    #[pyo3(signature = (name, version, values, *, snapshot = None))]
    fn publish_annotations(
        &self,
        py: Python<'_>,
        name: String,
        version: String,
        values: &Bound<'_, PyAny>,
        snapshot: Option<String>,
    ) -> PyResult<()> {
        let values = annotation_values(values)?;
        self.annotate(py, name, version, values, snapshot)
    }

    /// Opens the latest snapshot (or `snapshot`) as a `Dataset`, through this root's store;
    /// `cache_dir` (and `cache_bytes`) read it through the shared node cache in that
    /// directory, as `guideloom.open` does.
    #[pyo3(signature = (*, snapshot = None, format = None, cache_dir = None, cache_bytes = None))]
    fn open(
        &self,
        py: Python<'_>,
        snapshot: Option<String>,
        format: Option<&Bound<'_, PyAny>>,
        cache_dir: Option<std::path::PathBuf>,
        cache_bytes: Option<u64>,
    ) -> PyResult<Dataset> {
        let mut root = self.current()?;
        let mut options = self.options.clone();
        if let Some(cache) = cache_options(cache_dir, cache_bytes)? {
            // The same store (and its clients), read through the cache.
            root = guideloom::publish::Root::new(
                std::sync::Arc::clone(root.store()),
                root.options().clone().with_cache(cache.clone()),
            );
            options.root.cache = cache;
        }
        open_in(
            py,
            self.uri.clone(),
            options,
            Some(root),
            snapshot,
            format,
            self.array_record.is_some(),
        )
    }

    /// The latest snapshot (`NotFoundError` when nothing was published).
    fn latest(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let root = self.current()?;
        let name = self.name.clone();
        let snapshot = block_on(py, async move {
            root.latest()
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(Snapshot::opened(snapshot))
    }

    /// Snapshot `snapshot_id` (`NotFoundError` when there is none).
    fn snapshot(&self, py: Python<'_>, snapshot_id: String) -> PyResult<Snapshot> {
        let root = self.current()?;
        let name = self.name.clone();
        let snapshot = block_on(py, async move {
            root.snapshot(&snapshot_id)
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(Snapshot::opened(snapshot))
    }

    /// Every snapshot, oldest first (an empty list when nothing was published).
    fn snapshots<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let root = self.current()?;
        let name = self.name.clone();
        let snapshots = block_on(py, async move {
            root.snapshots()
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        PyList::new(py, snapshots.into_iter().map(Snapshot::opened))
    }

    fn __repr__(&self) -> String {
        format!("guideloom.Root({:?})", self.name)
    }
}

/// `raise` for the constructor's callers that build a root for one call and must refuse an
/// argument first (kept here so the message is the same everywhere).
pub(crate) fn staging_refused_for_writes() -> PyErr {
    raise(
        "InvalidArgumentError",
        "an EphemeralFileStaging stages shards for reading: pass it to open(); write_shard \
         takes shard_store=ArrayRecordShardStore(...) to write ArrayRecord files",
    )
}
