//! How a root's shards are stored and read, from Python: `EphemeralFileStaging` (whole-shard
//! staging of a remote root's shards into unnamed local files) and `ArrayRecordShardStore`
//! (shards that are ArrayRecord files, written by `write_shard` and read by `open`, staged
//! through its `staging`). Both are passed as `shard_store=`; [`ShardStoreArg`] is that
//! argument, which `crate::stores::call_options` turns into the facade's options.

use std::path::PathBuf;

use guideloom::arrayrecord::ArrayRecordWriterOptions;
use guideloom::publish::StagingOptions;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::raise;
use crate::options::count_arg;
use crate::stores::S3ObjectStore;

/// Default `max_object_bytes`: the Rust staging budget's default, 4 GiB.
fn default_max_object_bytes() -> u64 {
    StagingOptions::default().budget_bytes
}

/// Whole-shard staging of a remote root's shards into a local directory:
/// `open(root, shard_store=EphemeralFileStaging(objects=store, ...))`.
///
/// Without `objects=` it builds its own default `S3ObjectStore()` (options from the AWS
/// environment), which serves the `s3://` roots it is passed with: that store shares
/// nothing with the caller's (not `object_store=`, not `s3=`, not a backend registered in
/// `default_registry()`), so conflicting arguments are refused and a registered backend is
/// not used. A store passed as `objects=` is always the one used, never replaced.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct EphemeralFileStaging {
    objects: Py<S3ObjectStore>,
    /// `true` when the staging built `objects` itself (no `objects=` given).
    own_store: bool,
    directory: Option<PathBuf>,
    max_object_bytes: u64,
}

impl std::fmt::Debug for EphemeralFileStaging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralFileStaging")
            .field("own_store", &self.own_store)
            .field("directory", &self.directory)
            .field("max_object_bytes", &self.max_object_bytes)
            .finish_non_exhaustive()
    }
}

#[pymethods]
impl EphemeralFileStaging {
    #[new]
    #[pyo3(signature = (*, objects = None, directory = None, max_object_bytes = None))]
    fn new(
        py: Python<'_>,
        objects: Option<Py<S3ObjectStore>>,
        directory: Option<&Bound<'_, PyAny>>,
        max_object_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let directory = match directory.filter(|d| !d.is_none()) {
            None => None,
            Some(d) => {
                let path = py.import("os")?.getattr("fspath")?.call1((d,))?;
                let path = PathBuf::from(path.cast::<PyString>()?.to_str()?);
                if !path.is_dir() {
                    return Err(raise(
                        "InvalidArgumentError",
                        format!("directory {} is not an existing directory", path.display()),
                    ));
                }
                Some(path)
            }
        };
        let max_object_bytes = match max_object_bytes.filter(|m| !m.is_none()) {
            None => default_max_object_bytes(),
            Some(m) => count_arg(m, "max_object_bytes")?,
        };
        let own_store = objects.is_none();
        let objects = match objects {
            Some(store) => store,
            None => Py::new(py, S3ObjectStore::with_defaults(py)?)?,
        };
        Ok(EphemeralFileStaging {
            objects,
            own_store,
            directory,
            max_object_bytes,
        })
    }

    /// The store shards are downloaded through (the one passed as `objects=`, or the default
    /// store this staging built).
    #[getter]
    fn objects(&self, py: Python<'_>) -> Py<S3ObjectStore> {
        self.objects.clone_ref(py)
    }

    /// `True` when no `objects=` was given and the staging built its own default store.
    #[getter]
    fn owns_store(&self) -> bool {
        self.own_store
    }

    /// The directory of the staging files (`None`: the system temporary directory).
    #[getter]
    fn directory(&self) -> Option<String> {
        self.directory.as_ref().map(|d| d.display().to_string())
    }

    /// The most bytes staged at once, so also the largest shard staged.
    #[getter]
    fn max_object_bytes(&self) -> u64 {
        self.max_object_bytes
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let objects = if self.own_store {
            "None".to_owned()
        } else {
            self.objects.bind(py).repr()?.to_string()
        };
        Ok(format!(
            "EphemeralFileStaging(objects={objects}, directory={:?}, max_object_bytes={})",
            self.directory(),
            self.max_object_bytes
        ))
    }
}

impl EphemeralFileStaging {
    /// The Rust staging options.
    pub(crate) fn staging_options(&self) -> StagingOptions {
        StagingOptions {
            dir: self.directory.clone(),
            budget_bytes: self.max_object_bytes,
            ..StagingOptions::default()
        }
    }

    /// The store shards are downloaded through.
    pub(crate) fn store<'py>(&self, py: Python<'py>) -> &Bound<'py, S3ObjectStore> {
        self.objects.bind(py)
    }

    /// Whether the staging built its store itself (no `objects=`).
    pub(crate) fn owns_its_store(&self) -> bool {
        self.own_store
    }
}

/// Shards that are ArrayRecord files (the format of Google's `array_record` package, TFDS
/// and Grain): `write_shard(records, root, ..., shard_store=ArrayRecordShardStore())` writes
/// one as `shards/<work_id>/<n>.array_record` (records as bytes, or encoded by `format=`),
/// and `open(root, shard_store=ArrayRecordShardStore(staging=...))` reads a snapshot whose
/// shards are all ArrayRecord files, staging them through `staging` (its `objects` serving
/// the root). `options` is array_record's option string (`"group_size:1,zstd:3"`).
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct ArrayRecordShardStore {
    staging: Option<Py<EphemeralFileStaging>>,
    options_text: Option<String>,
    options: ArrayRecordWriterOptions,
}

impl std::fmt::Debug for ArrayRecordShardStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayRecordShardStore")
            .field("options", &self.options_text)
            .finish_non_exhaustive()
    }
}

#[pymethods]
impl ArrayRecordShardStore {
    #[new]
    #[pyo3(signature = (*, staging = None, options = None))]
    fn new(staging: Option<Py<EphemeralFileStaging>>, options: Option<String>) -> PyResult<Self> {
        let parsed = match &options {
            None => ArrayRecordWriterOptions::default(),
            Some(text) => text.parse().map_err(|e: guideloom::arrayrecord::Error| {
                raise("InvalidArgumentError", e.to_string())
            })?,
        };
        Ok(ArrayRecordShardStore {
            staging,
            options_text: options,
            options: parsed,
        })
    }

    /// The staging remote shards are read through (`None`: the root's default staging).
    #[getter]
    fn staging(&self, py: Python<'_>) -> Option<Py<EphemeralFileStaging>> {
        self.staging.as_ref().map(|s| s.clone_ref(py))
    }

    /// The writer's option string (`None`: the defaults, `group_size:1` with zstd level 3).
    #[getter]
    fn options(&self) -> Option<&str> {
        self.options_text.as_deref()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let staging = match &self.staging {
            Some(s) => s.bind(py).repr()?.to_string(),
            None => "None".to_owned(),
        };
        let options = match &self.options_text {
            Some(o) => format!("{o:?}"),
            None => "None".to_owned(),
        };
        Ok(format!(
            "ArrayRecordShardStore(staging={staging}, options={options})"
        ))
    }
}

impl ArrayRecordShardStore {
    /// The ArrayRecord writer's options.
    pub(crate) fn writer_options(&self) -> ArrayRecordWriterOptions {
        self.options
    }
}

/// A `shard_store=` argument.
#[derive(Debug, Clone)]
pub(crate) enum ShardStoreArg<'py> {
    /// Whole-shard staging.
    Staging(Bound<'py, EphemeralFileStaging>),
    /// ArrayRecord shards (with their own staging, or the default).
    ArrayRecord(Bound<'py, ArrayRecordShardStore>),
}

impl<'py> ShardStoreArg<'py> {
    /// `shard_store=` as passed (`None` for a Python `None`); anything else is a `TypeError`.
    pub(crate) fn extract(value: Option<&Bound<'py, PyAny>>) -> PyResult<Option<Self>> {
        let Some(value) = value.filter(|v| !v.is_none()) else {
            return Ok(None);
        };
        if let Ok(staging) = value.cast::<EphemeralFileStaging>() {
            return Ok(Some(ShardStoreArg::Staging(staging.clone())));
        }
        if let Ok(store) = value.cast::<ArrayRecordShardStore>() {
            return Ok(Some(ShardStoreArg::ArrayRecord(store.clone())));
        }
        Err(PyTypeError::new_err(format!(
            "shard_store must be an EphemeralFileStaging or an ArrayRecordShardStore, not {}",
            value.get_type().name()?
        )))
    }

    /// The staging it reads through, if it names one.
    pub(crate) fn staging(&self) -> Option<Bound<'py, EphemeralFileStaging>> {
        match self {
            ShardStoreArg::Staging(s) => Some(s.clone()),
            ShardStoreArg::ArrayRecord(store) => store
                .get()
                .staging
                .as_ref()
                .map(|s| s.bind(store.py()).clone()),
        }
    }

    /// The ArrayRecord store, if it is one.
    pub(crate) fn array_record(&self) -> Option<&Bound<'py, ArrayRecordShardStore>> {
        match self {
            ShardStoreArg::ArrayRecord(store) => Some(store),
            ShardStoreArg::Staging(_) => None,
        }
    }
}
