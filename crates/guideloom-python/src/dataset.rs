//! `guideloom.open(root)`: a published snapshot read from Python.
//!
//! A thin layer over the facade's `Dataset`, read with the GIL released (an open local shard
//! on the calling thread, anything else on the process's one runtime); records are decoded (CBOR, pickle) or handed out as zero-copy buffers (raw) once
//! the GIL is back. The snapshot is pinned when the dataset is opened, so a dataset re-opened
//! in a forked child (see [`crate::runtime`]) reads exactly the same records.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;

use bytes::Bytes;
use guideloom::Dataset as Snapshot;
use guideloom::DatasetOptions;
use guideloom::format::Value;
use guideloom::publish::ShardFormat;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PySlice};

use crate::cloud_options::{AzureOptions, GcsOptions};
use crate::errors::raise;
use crate::format::{RecordFormat, from_value};
use crate::options::StorageOptions;
use crate::options::{S3Options, root_uri};
use crate::root_args::{SchemeArgs, StoreArgs, call_options};
use crate::runtime::{self, block_on};
use crate::shard_stores::ShardStoreArg;
use crate::slices::{PyIndex, index_error, resolve_each, slice_indices};
use crate::stores::S3ObjectStore;

/// How many records an iterator reads at a time (one in-order read per shard run).
const ITER_CHUNK: u64 = 1024;

/// The facade's dataset and the process it was opened in.
struct Opened {
    pid: u32,
    dataset: Snapshot,
}

/// One snapshot of a dataset root: `len`, `[i]`, `[a:b]`, `get_many`, iteration,
/// annotations.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct Dataset {
    pub(crate) uri: String,
    /// With the snapshot pinned (re-opening after a fork reads the same snapshot).
    options: DatasetOptions,
    format: RecordFormat,
    pub(crate) snapshot_id: String,
    pub(crate) len: u64,
    /// The snapshot's schema (records are then CBOR maps of its columns).
    pub(crate) schema: Option<guideloom::format::schema::Schema>,
    /// The column type of each annotation set joined so far (by its values' key), inferred
    /// once.
    /// The batch decoder of `get_batch` (kept between calls; `None` until the first).
    pub(crate) decoder: Mutex<Option<guideloom_arrow::BatchDecoder>>,
    pub(crate) annotation_types:
        std::sync::Arc<Mutex<std::collections::HashMap<String, arrow_schema::DataType>>>,
    state: Mutex<Opened>,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("uri", &self.uri)
            .field("snapshot", &self.snapshot_id)
            .field("len", &self.len)
            .finish()
    }
}

/// Opens the latest snapshot of `root` (or `snapshot`): a local path, `file://`, `memory://`,
/// `s3://bucket/prefix` or a read-only `http(s)://` base URL. `object_store` reuses an
/// `S3ObjectStore`; `shard_store` stages whole shards, or declares the shards ArrayRecord
/// files (see `crate::shard_stores`); `storage_options` sets the root's options;
/// `http_listing` declares that an `http(s)://` root's server lists directories as JSON, so
/// the latest snapshot is found with 2 requests instead of probing. `cache_dir` turns on
/// the shared node cache of a remote root's whole shards in that directory, shared by every
/// process given it, under `cache_bytes` (default 16 GiB; docs/cache.md); without it, the
/// environment's `GUIDELOOM_CACHE_DIR` / `GUIDELOOM_CACHE_BYTES` apply.
#[pyfunction]
#[pyo3(signature = (root, *, snapshot = None, format = None, s3 = None, gcs = None, azure = None, mount = false, object_store = None, shard_store = None, http_listing = false, storage_options = None, cache_dir = None, cache_bytes = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open(
    py: Python<'_>,
    root: &Bound<'_, PyAny>,
    snapshot: Option<String>,
    format: Option<&Bound<'_, PyAny>>,
    s3: Option<&Bound<'_, S3Options>>,
    gcs: Option<&Bound<'_, GcsOptions>>,
    azure: Option<&Bound<'_, AzureOptions>>,
    mount: bool,
    object_store: Option<&Bound<'_, S3ObjectStore>>,
    shard_store: Option<&Bound<'_, PyAny>>,
    http_listing: bool,
    storage_options: Option<&Bound<'_, StorageOptions>>,
    cache_dir: Option<std::path::PathBuf>,
    cache_bytes: Option<u64>,
) -> PyResult<Dataset> {
    let uri = root_uri(root)?;
    let shard_store = ShardStoreArg::extract(shard_store)?;
    // ArrayRecord shards hold bytes: "raw" unless the caller says how they were encoded.
    let array_record = shard_store
        .as_ref()
        .is_some_and(|s| s.array_record().is_some());
    let args = StoreArgs {
        schemes: SchemeArgs { s3, gcs, azure },
        mount,
        object_store,
        shard_store,
        storage: storage_options,
    };
    let mut options: DatasetOptions = call_options(&uri, args)?;
    options.store.http_listing = http_listing;
    if let Some(cache) = cache_options(cache_dir, cache_bytes)? {
        options.root.cache = cache;
    }
    open_in(py, uri, options, None, snapshot, format, array_record)
}

/// The node cache of `cache_dir=` and `cache_bytes=` (`None`: neither given, the
/// environment's apply); `cache_bytes` alone is a `ValueError`.
pub(crate) fn cache_options(
    cache_dir: Option<std::path::PathBuf>,
    cache_bytes: Option<u64>,
) -> PyResult<Option<guideloom::publish::CacheOptions>> {
    match (cache_dir, cache_bytes) {
        (Some(dir), bytes) => {
            let cache = guideloom::publish::CacheOptions::default().with_dir(dir);
            Ok(Some(match bytes {
                Some(bytes) => cache.with_budget_bytes(bytes),
                None => cache,
            }))
        }
        (None, Some(_)) => Err(pyo3::exceptions::PyValueError::new_err(
            "cache_bytes needs cache_dir (the cache's directory)",
        )),
        (None, None) => Ok(None),
    }
}

/// `open` with the root's options decided and, from `guideloom.Root`, its store resolved.
pub(crate) fn open_in(
    py: Python<'_>,
    uri: String,
    mut options: DatasetOptions,
    resolved: Option<guideloom::publish::Root>,
    snapshot: Option<String>,
    format: Option<&Bound<'_, PyAny>>,
    array_record: bool,
) -> PyResult<Dataset> {
    options.snapshot = snapshot;
    // None: whatever the first shard says it holds.
    let chosen = match format {
        Some(f) if !f.is_none() => Some(RecordFormat::extract(Some(f), RecordFormat::Cbor)?),
        _ if array_record => Some(RecordFormat::Raw),
        _ => None,
    };
    let explicit = chosen.is_some();
    let (dataset, stored, mixed) = {
        let uri = uri.clone();
        let options = options.clone();
        block_on(py, async move {
            let root = match resolved {
                Some(root) => root,
                None => guideloom::resolve_root(&uri, &options)?,
            };
            let name = root.store().describe();
            let snapshot = match &options.snapshot {
                Some(id) => root.snapshot(id).await,
                None => root.latest().await,
            }
            .map_err(|e| crate::errors::Error::from(e).in_root(name.clone()))?;
            if array_record
                && let Some(native) = snapshot
                    .shards()
                    .iter()
                    .find(|s| s.format != ShardFormat::ArrayRecord)
            {
                return Err(
                    crate::errors::Error::from(guideloom::format::Error::FormatMismatch {
                        shard: native.key.clone(),
                        expected: "ArrayRecord shards (shard_store=ArrayRecordShardStore)"
                            .to_owned(),
                        found: "a native guideloom shard".to_owned(),
                    })
                    .in_root(name),
                );
            }
            let mixed = {
                let mut formats = snapshot.shards().iter().map(|s| s.format);
                let first = formats.next();
                formats.any(|f| Some(f) != first)
            };
            let dataset = root.reader_with(snapshot, options.read);
            let stored = if dataset.is_empty() {
                None
            } else if mixed && !explicit {
                // Decided below, with the GIL: no format fits every shard.
                None
            } else {
                // With the node cache on, from shard 0's footer and metadata: no fill.
                Some(dataset.record_format_async(0).await?)
            };
            Ok::<_, crate::errors::Error>((dataset, stored, mixed))
        })?
    };
    if mixed && !explicit {
        // Native shards name their records' format, ArrayRecord files do not (their records
        // are bytes): one format for the whole dataset must be chosen by the caller.
        return Err(raise(
            "UnsupportedError",
            format!(
                "{uri}: snapshot {} mixes native and ArrayRecord shards; pass format= \
                 (\"raw\" reads every record's bytes)",
                dataset.snapshot().id()
            ),
        ));
    }
    let format = match (chosen, stored) {
        (Some(f), _) => f,
        (None, None) => RecordFormat::Cbor,
        (None, Some(name)) => RecordFormat::from_name(&name).ok_or_else(|| {
            raise(
                "UnsupportedError",
                format!(
                    "{uri}: records of format {name:?} cannot be decoded here; pass format=\"raw\" \
                     to read their bytes"
                ),
            )
        })?,
    };
    let snapshot_id = dataset.snapshot().id().to_owned();
    options.snapshot = Some(snapshot_id.clone());
    Ok(Dataset {
        len: dataset.len(),
        schema: dataset.snapshot().manifest.schema.clone(),
        annotation_types: Default::default(),
        decoder: Mutex::new(None),
        uri,
        options,
        format,
        snapshot_id,
        state: Mutex::new(Opened {
            pid: runtime::pid(),
            dataset,
        }),
    })
}

impl Dataset {
    /// `<root> (snapshot <id>)`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} (snapshot {})", self.uri, self.snapshot_id)
    }

    /// The facade dataset of this process: in a forked child, the same snapshot on a root
    /// resolved afresh (its own connections), with no request: the parent's snapshot (log
    /// entry and manifest, already checked) is kept, so a DataLoader worker starts reading
    /// at once (over a 20 ms link, each worker's re-open cost three round trips).
    pub(crate) fn current(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let pid = runtime::pid();
        let snapshot = {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.pid == pid {
                return Ok(state.dataset.clone());
            }
            state.dataset.snapshot().clone()
        };
        let uri = self.uri.clone();
        let options = self.options.clone();
        let fresh = block_on(py, async move {
            let root = guideloom::resolve_root(&uri, &options)?;
            Ok::<_, crate::errors::Error>(root.reader_with(snapshot, options.read))
        })?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.pid != pid {
            let stale = std::mem::replace(
                &mut *state,
                Opened {
                    pid,
                    dataset: fresh.clone(),
                },
            );
            // Its connections belong to the parent's runtime (and its epoll set, which the
            // child shares): dropping them here could deregister the parent's sockets.
            std::mem::forget(stale);
        }
        Ok(state.dataset.clone())
    }

    /// The number of records.
    pub(crate) fn record_count(&self) -> u64 {
        self.len
    }

    /// How this dataset's records decode.
    pub(crate) fn record_format(&self) -> RecordFormat {
        self.format
    }

    /// A Python index (negative from the end) as a record index (for the other modules).
    pub(crate) fn resolve_index(&self, i: &PyIndex) -> PyResult<u64> {
        self.index(i)
    }

    /// A Python index (negative from the end) as a record index.
    fn index(&self, i: &PyIndex) -> PyResult<u64> {
        i.resolve(self.len)
            .ok_or_else(|| Python::attach(|py| index_error(py, i, self.len, "record", "dataset")))
    }

    fn fetch(&self, py: Python<'_>, index: u64) -> PyResult<Bytes> {
        let dataset = self.current(py)?;
        runtime::detached(py, move || Ok(dataset.get(index)?))
    }

    pub(crate) fn fetch_many(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Vec<Bytes>> {
        let dataset = self.current(py)?;
        runtime::detached(py, move || Ok(dataset.get_many(&indices)?))
    }

    fn fetch_range(&self, py: Python<'_>, range: Range<u64>) -> PyResult<Vec<Bytes>> {
        if range.start >= range.end {
            return Ok(Vec::new());
        }
        let dataset = self.current(py)?;
        block_on(py, async move {
            Ok::<_, crate::errors::Error>(dataset.get_range_async(range).await?)
        })
    }

    pub(crate) fn decode_all<'py>(
        &self,
        py: Python<'py>,
        records: Vec<Bytes>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for record in records {
            list.append(self.format.decode(py, record)?)?;
        }
        Ok(list)
    }

    /// Record indices from any iterable of integers (a list, a range, a numpy array).
    pub(crate) fn indices(&self, indices: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        resolve_each(indices, |i| self.index(i))
    }
}

#[pymethods]
impl Dataset {
    fn __len__(&self) -> PyResult<usize> {
        usize::try_from(self.len).map_err(|_| {
            raise(
                "GuideloomError",
                "the dataset is longer than this platform's len()",
            )
        })
    }

    /// `ds[i]` (negative from the end) or `ds[a:b:c]` (a list).
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = key.cast::<PySlice>() {
            let ix = slice_indices(slice, self.len, "dataset")?;
            if ix.step == 1 {
                let (start, stop) = (ix.start.max(0) as u64, ix.stop.max(0) as u64);
                let records = self.fetch_range(py, start..stop.max(start))?;
                return Ok(self.decode_all(py, records)?.into_any());
            }
            let records = self.fetch_many(py, ix.to_vec())?;
            return Ok(self.decode_all(py, records)?.into_any());
        }
        if key.is_instance_of::<PyInt>() || key.hasattr("__index__")? {
            let i: PyIndex = key.extract()?;
            return self.get(py, i);
        }
        Err(PyTypeError::new_err(format!(
            "dataset indices must be integers or slices, not {}",
            key.get_type().name()?
        )))
    }

    /// Record `index`, decoded.
    fn get<'py>(&self, py: Python<'py>, index: PyIndex) -> PyResult<Bound<'py, PyAny>> {
        let bytes = self.fetch(py, self.index(&index)?)?;
        self.format.decode(py, bytes)
    }

    /// Records at `indices` (any order, repeats allowed), decoded: one batched read per shard
    /// touched, shards read concurrently.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let indices = self.indices(indices)?;
        let records = self.fetch_many(py, indices)?;
        self.decode_all(py, records)
    }

    /// Record `index`'s bytes as a read-only buffer (no copy; `memoryview(...)` works).
    fn get_raw(&self, py: Python<'_>, index: PyIndex) -> PyResult<pyo3_bytes::PyBytes> {
        Ok(pyo3_bytes::PyBytes::new(
            self.fetch(py, self.index(&index)?)?,
        ))
    }

    /// The bytes of the records at `indices`, as read-only buffers (no copy).
    fn get_many_raw(
        &self,
        py: Python<'_>,
        indices: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<pyo3_bytes::PyBytes>> {
        let indices = self.indices(indices)?;
        let records = self.fetch_many(py, indices)?;
        Ok(records.into_iter().map(pyo3_bytes::PyBytes::new).collect())
    }

    fn __iter__(slf: Bound<'_, Self>) -> DatasetIter {
        let end = slf.get().len;
        DatasetIter {
            dataset: slf.unbind(),
            next: 0,
            end,
            buffer: VecDeque::new(),
        }
    }

    /// The value of annotation set `name` for record `index`.
    fn annotation<'py>(
        &self,
        py: Python<'py>,
        name: String,
        index: PyIndex,
    ) -> PyResult<Bound<'py, PyAny>> {
        let index = self.index(&index)?;
        let dataset = self.current(py)?;
        let value: Value = block_on(py, async move {
            Ok::<_, crate::errors::Error>(dataset.annotation_async::<Value>(&name, index).await?)
        })?;
        from_value(py, &value)
    }

    /// Every value of annotation set `name`, in record order.
    fn annotations<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyList>> {
        let dataset = self.current(py)?;
        let values: Vec<Value> = block_on(py, async move {
            let set = dataset.annotations_async(&name).await?;
            let values = (0..set.len() as u64)
                .map(|i| set.get::<Value>(i))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok::<_, crate::errors::Error>(values)
        })?;
        let list = PyList::empty(py);
        for v in &values {
            list.append(from_value(py, v)?)?;
        }
        Ok(list)
    }

    /// The snapshot read (pinned when the dataset was opened).
    #[getter]
    fn snapshot_id(&self) -> &str {
        &self.snapshot_id
    }

    /// The root URI.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The record format's name (`"cbor"`, `"pickle"`, `"raw"`).
    #[getter]
    fn format(&self) -> &'static str {
        self.format.name()
    }

    fn __repr__(&self) -> String {
        format!(
            "guideloom.Dataset({:?}, snapshot={:?}, len={}, format={:?})",
            self.uri,
            self.snapshot_id,
            self.len,
            self.format.name()
        )
    }
}

/// In-order iteration over a dataset, `ITER_CHUNK` records per read (one in-order read per
/// shard run), decoded one at a time as Python asks.
#[pyclass(module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct DatasetIter {
    dataset: Py<Dataset>,
    next: u64,
    end: u64,
    buffer: VecDeque<Bytes>,
}

#[pymethods]
impl DatasetIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let dataset = self.dataset.bind(py).get();
        if self.buffer.is_empty() && self.next < self.end {
            let stop = self.end.min(self.next.saturating_add(ITER_CHUNK));
            let records = dataset.fetch_range(py, self.next..stop)?;
            self.next = stop;
            self.buffer.extend(records);
        }
        match self.buffer.pop_front() {
            Some(record) => Ok(Some(dataset.format.decode(py, record)?)),
            None => Ok(None),
        }
    }
}
