//! `guideloom.storage`'s store objects, and how a call's root arguments become the facade's
//! `DatasetOptions`.
//!
//! - `S3ObjectStore(options)`: an S3 store built once and reused. It owns a private
//!   [`Registry`], so the first root of a bucket builds that bucket's client (and resolves its
//!   credentials) and every later call passed the same store reuses it; it is never replaced
//!   by the process-wide registry's backend.
//! - `default_registry()` / `s3_backend(options)`: the process-wide [`Registry::global`] and
//!   the [`SchemeBackend`] registered in it, which roots passed with neither `s3=` nor
//!   `object_store=` use.
//! - `EphemeralFileStaging(objects=store, directory=, max_object_bytes=)`: the root's
//!   whole-shard staging ([`StagingOptions`]): unnamed files in `directory`, closed (so
//!   reclaimed) when the dataset is dropped.
//!
//! Where a call's store comes from ([`call_options`]): `object_store=` (or the staging's
//! `objects`) → that store's registry; `s3=` → a registry of the call alone (the options
//! apply exactly, never a store cached from other options); neither → the global registry.

use std::path::PathBuf;
use std::sync::Arc;

use guideloom::DatasetOptions;
use guideloom::publish::{
    Registry, RootUri, S3Options as RustS3Options, SchemeBackend, StagingOptions, StoreOptions,
};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::raise;
use crate::options::{S3Options, count_arg};

/// An S3 object store built once and reused across calls: `open(root, object_store=store)`
/// and the same for `write_shard`, `publish` and `publish_annotations`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct S3ObjectStore {
    options: Py<S3Options>,
    /// The store's own registry: one client per bucket, built on first use, then reused.
    registry: Arc<Registry>,
}

impl std::fmt::Debug for S3ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3ObjectStore").finish_non_exhaustive()
    }
}

fn options_or_default(py: Python<'_>, options: Option<Py<S3Options>>) -> PyResult<Py<S3Options>> {
    match options {
        Some(options) => Ok(options),
        None => Py::new(
            py,
            S3Options {
                inner: RustS3Options::default(),
            },
        ),
    }
}

#[pymethods]
impl S3ObjectStore {
    #[new]
    #[pyo3(signature = (options = None))]
    fn new(py: Python<'_>, options: Option<Py<S3Options>>) -> PyResult<Self> {
        Ok(S3ObjectStore {
            options: options_or_default(py, options)?,
            registry: Arc::new(Registry::new()),
        })
    }

    /// The options its clients are built with.
    #[getter]
    fn options(&self, py: Python<'_>) -> Py<S3Options> {
        self.options.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "S3ObjectStore(options={})",
            self.options.bind(py).repr()?
        ))
    }
}

impl S3ObjectStore {
    fn store_options(&self) -> StoreOptions {
        StoreOptions {
            s3: self.options.get().inner.clone(),
            ..StoreOptions::default()
        }
    }
}

/// The options of every `s3://` bucket, to register in the process-wide registry:
/// `default_registry().register(s3_backend(S3Options(...)), replace=True)`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct S3Backend {
    options: Py<S3Options>,
}

#[pymethods]
impl S3Backend {
    #[new]
    #[pyo3(signature = (options = None))]
    fn new(py: Python<'_>, options: Option<Py<S3Options>>) -> PyResult<Self> {
        Ok(S3Backend {
            options: options_or_default(py, options)?,
        })
    }

    /// The URI scheme it serves: `"s3"`.
    #[getter]
    fn scheme(&self) -> &'static str {
        "s3"
    }

    /// The options the scheme's clients are built with.
    #[getter]
    fn options(&self, py: Python<'_>) -> Py<S3Options> {
        self.options.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("s3_backend({})", self.options.bind(py).repr()?))
    }
}

/// `s3_backend(options)`: the backend of `s3://` roots built with `options`.
#[pyfunction]
#[pyo3(signature = (options = None))]
pub(crate) fn s3_backend(py: Python<'_>, options: Option<Py<S3Options>>) -> PyResult<S3Backend> {
    S3Backend::new(py, options)
}

/// The process-wide registry of scheme backends (`default_registry()`): roots opened with
/// neither `s3=` nor `object_store=` are built from the backend of their scheme.
#[pyclass(frozen, module = "guideloom._guideloom", name = "Registry")]
#[derive(Debug)]
pub(crate) struct DefaultRegistry;

#[pymethods]
impl DefaultRegistry {
    /// Registers `backend` for its scheme. A scheme with a backend already is refused with
    /// `InvalidArgumentError` unless `replace=True`; clients built from the replaced backend
    /// are dropped, so later roots use the new options.
    #[pyo3(signature = (backend, *, replace = false))]
    fn register(&self, backend: &Bound<'_, S3Backend>, replace: bool) -> PyResult<()> {
        let options = backend.get().options.get().inner.clone();
        Registry::global()
            .register_backend(SchemeBackend::S3(options), replace)
            .map_err(crate::errors::Error::from)?;
        Ok(())
    }

    /// Removes the backend of `scheme`; `True` if there was one.
    fn unregister(&self, scheme: &str) -> bool {
        Registry::global().unregister_backend(scheme).is_some()
    }

    /// The backend registered for `scheme`, or `None`.
    fn backend(&self, py: Python<'_>, scheme: &str) -> PyResult<Option<S3Backend>> {
        match Registry::global().backend(scheme) {
            Some(SchemeBackend::S3(inner)) => Ok(Some(S3Backend {
                options: Py::new(py, S3Options { inner })?,
            })),
            _ => Ok(None),
        }
    }

    fn __repr__(&self) -> &'static str {
        "guideloom.storage.default_registry()"
    }
}

/// `default_registry()`: the process-wide registry.
#[pyfunction]
pub(crate) fn default_registry() -> DefaultRegistry {
    DefaultRegistry
}

/// Default `max_object_bytes`: the Rust staging budget's default, 4 GiB.
fn default_max_object_bytes() -> u64 {
    StagingOptions::default().budget_bytes
}

/// Whole-shard staging of a remote root's shards into a local directory, used through
/// `open(root, object_store=store, shard_store=staging)`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct EphemeralFileStaging {
    objects: Py<S3ObjectStore>,
    directory: Option<PathBuf>,
    max_object_bytes: u64,
}

impl std::fmt::Debug for EphemeralFileStaging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralFileStaging")
            .field("directory", &self.directory)
            .field("max_object_bytes", &self.max_object_bytes)
            .finish_non_exhaustive()
    }
}

#[pymethods]
impl EphemeralFileStaging {
    #[new]
    #[pyo3(signature = (*, objects, directory = None, max_object_bytes = None))]
    fn new(
        objects: Py<S3ObjectStore>,
        directory: Option<&Bound<'_, PyAny>>,
        max_object_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let directory = match directory.filter(|d| !d.is_none()) {
            None => None,
            Some(d) => {
                let path = d.py().import("os")?.getattr("fspath")?.call1((d,))?;
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
        Ok(EphemeralFileStaging {
            objects,
            directory,
            max_object_bytes,
        })
    }

    /// The store shards are downloaded through.
    #[getter]
    fn objects(&self, py: Python<'_>) -> Py<S3ObjectStore> {
        self.objects.clone_ref(py)
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
        Ok(format!(
            "EphemeralFileStaging(objects={}, directory={:?}, max_object_bytes={})",
            self.objects.bind(py).repr()?,
            self.directory(),
            self.max_object_bytes
        ))
    }
}

impl EphemeralFileStaging {
    fn staging_options(&self) -> StagingOptions {
        StagingOptions {
            dir: self.directory.clone(),
            budget_bytes: self.max_object_bytes,
            ..StagingOptions::default()
        }
    }
}

/// The store arguments of one call.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StoreArgs<'a, 'py> {
    pub(crate) s3: Option<&'a Bound<'py, S3Options>>,
    pub(crate) mount: bool,
    pub(crate) object_store: Option<&'a Bound<'py, S3ObjectStore>>,
    pub(crate) shard_store: Option<&'a Bound<'py, EphemeralFileStaging>>,
}

fn is_s3(uri: &str) -> bool {
    matches!(RootUri::parse(uri), Ok(RootUri::Bucket { scheme, .. }) if scheme == "s3")
}

fn invalid(text: String) -> PyErr {
    raise("InvalidArgumentError", text)
}

/// The facade options of a call on `uri` (see the module documentation for where its store
/// comes from). Conflicting arguments are an `InvalidArgumentError`.
pub(crate) fn call_options(uri: &str, args: StoreArgs<'_, '_>) -> PyResult<DatasetOptions> {
    let py_store = match (args.object_store, args.shard_store) {
        (Some(store), Some(staging)) => {
            if !staging.get().objects.bind(store.py()).is(store) {
                return Err(invalid(
                    "shard_store stages through another store than object_store: build the \
                     staging with objects=<the store passed as object_store>"
                        .to_owned(),
                ));
            }
            Some(store.clone())
        }
        (Some(store), None) => Some(store.clone()),
        (None, Some(staging)) => Some(staging.get().objects.bind(staging.py()).clone()),
        (None, None) => None,
    };
    let mut options = DatasetOptions::default();
    if let Some(staging) = args.shard_store {
        options.root.staging = staging.get().staging_options();
    }
    match (py_store, args.s3) {
        (Some(_), Some(_)) => Err(invalid(
            "pass either s3= or object_store= (the store carries its own S3Options)".to_owned(),
        )),
        (Some(store), None) => {
            if args.mount {
                return Err(invalid(
                    "mount=True declares a local directory; an object_store serves s3:// roots"
                        .to_owned(),
                ));
            }
            if !is_s3(uri) {
                return Err(invalid(format!(
                    "an S3ObjectStore serves s3://bucket/prefix roots, not {uri:?}"
                )));
            }
            let store = store.get();
            options.storage = store.store_options();
            options.registry = Some(Arc::clone(&store.registry));
            Ok(options)
        }
        (None, Some(s3)) => {
            options.storage = StoreOptions {
                s3: s3.get().inner.clone(),
                mount: args.mount,
                ..StoreOptions::default()
            };
            if is_s3(uri) {
                options.registry = Some(Arc::new(Registry::new()));
            }
            Ok(options)
        }
        (None, None) => {
            options.storage.mount = args.mount;
            Ok(options)
        }
    }
}
