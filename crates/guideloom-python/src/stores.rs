//! `guideloom.storage`'s store objects.
//!
//! - `S3ObjectStore(options)`: an S3 store built once and reused. It owns a private
//!   [`Registry`], so the first root of a bucket builds that bucket's client (and resolves its
//!   credentials) and every later call passed the same store reuses it; it is never replaced
//!   by the process-wide registry's backend.
//! - `default_registry()` / `s3_backend(options)`: the process-wide [`Registry::global`] and
//!   the [`SchemeBackend`] registered in it, which roots passed with neither `s3=` nor
//!   `object_store=` use.
//!
//! `shard_store=` objects are in `crate::shard_stores`; how a call's arguments choose its
//! store is `crate::root_args`.

use std::sync::Arc;

use guideloom::publish::{Registry, S3Options as RustS3Options, SchemeBackend, StoreOptions};
use pyo3::prelude::*;

use crate::options::S3Options;

/// An S3 object store built once and reused across calls: `open(root, object_store=store)`
/// and the same for `write_shard`, `publish` and `publish_annotations`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct S3ObjectStore {
    options: Py<S3Options>,
    /// The store's own registry: one client per bucket, built on first use, then reused.
    pub(crate) registry: Arc<Registry>,
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
                retry: None,
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
    /// A store with the default options (the AWS environment's).
    pub(crate) fn with_defaults(py: Python<'_>) -> PyResult<Self> {
        S3ObjectStore::new(py, None)
    }

    /// The store options its clients are built with.
    pub(crate) fn store_options(&self) -> StoreOptions {
        self.options.get().store_options()
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
        let options = backend.get().options.get().store_options();
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
            Some(SchemeBackend::S3(options)) => Ok(Some(S3Backend {
                options: Py::new(py, S3Options::from_store_options(&options))?,
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
