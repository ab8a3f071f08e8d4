//! `guideloom.storage`'s store objects.
//!
//! - `S3ObjectStore(options)`: an S3 store built once and reused. It owns a private
//!   [`Registry`], so the first root of a bucket builds that bucket's client (and resolves its
//!   credentials) and every later call passed the same store reuses it; it is never replaced
//!   by the process-wide registry's backend.
//! - `default_registry()` / `s3_backend(options)`, `gcs_backend(options)`,
//!   `azure_backend(options)`: the process-wide [`Registry::global`] and the [`SchemeBackend`]s
//!   registered in it, which roots of those schemes passed without options of their scheme
//!   (`s3=`, `gcs=`, `azure=`) nor `object_store=` use.
//!
//! `shard_store=` objects are in `crate::shard_stores`; how a call's arguments choose its
//! store is `crate::root_args`.

use std::sync::Arc;

use guideloom::publish::{Registry, S3Options as RustS3Options, SchemeBackend, StoreOptions};
use pyo3::prelude::*;

use crate::cloud_options::{AzureOptions, GcsOptions};
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

/// The backend of `gs://` roots, to register in the process-wide registry:
/// `default_registry().register(gcs_backend(GcsOptions(...)), replace=True)`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct GcsBackend {
    options: Py<GcsOptions>,
}

#[pymethods]
impl GcsBackend {
    #[new]
    #[pyo3(signature = (options = None))]
    fn new(py: Python<'_>, options: Option<Py<GcsOptions>>) -> PyResult<Self> {
        let options = match options {
            Some(options) => options,
            None => Py::new(py, GcsOptions::from_store_options(&StoreOptions::default()))?,
        };
        Ok(GcsBackend { options })
    }

    /// The URI scheme it serves: `"gs"`.
    #[getter]
    fn scheme(&self) -> &'static str {
        "gs"
    }

    /// The options the scheme's clients are built with.
    #[getter]
    fn options(&self, py: Python<'_>) -> Py<GcsOptions> {
        self.options.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("gcs_backend({})", self.options.bind(py).repr()?))
    }
}

/// `gcs_backend(options)`: the backend of `gs://` roots built with `options`.
#[pyfunction]
#[pyo3(signature = (options = None))]
pub(crate) fn gcs_backend(py: Python<'_>, options: Option<Py<GcsOptions>>) -> PyResult<GcsBackend> {
    GcsBackend::new(py, options)
}

/// The backend of `az://` roots, to register in the process-wide registry:
/// `default_registry().register(azure_backend(AzureOptions(...)), replace=True)`.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct AzureBackend {
    options: Py<AzureOptions>,
}

#[pymethods]
impl AzureBackend {
    #[new]
    #[pyo3(signature = (options = None))]
    fn new(py: Python<'_>, options: Option<Py<AzureOptions>>) -> PyResult<Self> {
        let options = match options {
            Some(options) => options,
            None => Py::new(
                py,
                AzureOptions::from_store_options(&StoreOptions::default()),
            )?,
        };
        Ok(AzureBackend { options })
    }

    /// The URI scheme it serves: `"az"`.
    #[getter]
    fn scheme(&self) -> &'static str {
        "az"
    }

    /// The options the scheme's clients are built with.
    #[getter]
    fn options(&self, py: Python<'_>) -> Py<AzureOptions> {
        self.options.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("azure_backend({})", self.options.bind(py).repr()?))
    }
}

/// `azure_backend(options)`: the backend of `az://` roots built with `options`.
#[pyfunction]
#[pyo3(signature = (options = None))]
pub(crate) fn azure_backend(
    py: Python<'_>,
    options: Option<Py<AzureOptions>>,
) -> PyResult<AzureBackend> {
    AzureBackend::new(py, options)
}

/// A backend object from Python as the Rust [`SchemeBackend`].
fn scheme_backend(backend: &Bound<'_, PyAny>) -> PyResult<SchemeBackend> {
    if let Ok(b) = backend.cast::<S3Backend>() {
        return Ok(SchemeBackend::S3(b.get().options.get().store_options()));
    }
    if let Ok(b) = backend.cast::<GcsBackend>() {
        return Ok(SchemeBackend::Gcs(b.get().options.get().store_options()));
    }
    if let Ok(b) = backend.cast::<AzureBackend>() {
        return Ok(SchemeBackend::Azure(b.get().options.get().store_options()));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "register takes a backend made by s3_backend(), gcs_backend() or azure_backend(), not \
         {}",
        backend.get_type().name()?
    )))
}

/// The registry's name of `scheme`: its aliases (`s3a`, `azure`, `abfs`) as root URIs read
/// them.
fn canonical_scheme(scheme: &str) -> String {
    match scheme.to_ascii_lowercase().as_str() {
        "s3a" => "s3".to_owned(),
        "azure" | "abfs" => "az".to_owned(),
        other => other.to_owned(),
    }
}

/// The process-wide registry of scheme backends (`default_registry()`): roots opened without
/// options of their scheme (`s3=`, `gcs=`, `azure=`) nor `object_store=` are built from the
/// backend of their scheme.
#[pyclass(frozen, module = "guideloom._guideloom", name = "Registry")]
#[derive(Debug)]
pub(crate) struct DefaultRegistry;

#[pymethods]
impl DefaultRegistry {
    /// Registers `backend` (`s3_backend`, `gcs_backend` or `azure_backend`) for its scheme.
    /// A scheme with a backend already is refused with `InvalidArgumentError` unless
    /// `replace=True`; clients built from the replaced backend are dropped, so later roots use
    /// the new options.
    #[pyo3(signature = (backend, *, replace = false))]
    fn register(&self, backend: &Bound<'_, PyAny>, replace: bool) -> PyResult<()> {
        Registry::global()
            .register_backend(scheme_backend(backend)?, replace)
            .map_err(crate::errors::Error::from)?;
        Ok(())
    }

    /// Removes the backend of `scheme`; `True` if there was one.
    fn unregister(&self, scheme: &str) -> bool {
        Registry::global()
            .unregister_backend(&canonical_scheme(scheme))
            .is_some()
    }

    /// The backend registered for `scheme`, or `None`.
    fn backend(&self, py: Python<'_>, scheme: &str) -> PyResult<Option<Py<PyAny>>> {
        Ok(
            match Registry::global().backend(&canonical_scheme(scheme)) {
                Some(SchemeBackend::S3(options)) => Some(
                    Py::new(
                        py,
                        S3Backend {
                            options: Py::new(py, S3Options::from_store_options(&options))?,
                        },
                    )?
                    .into_any(),
                ),
                Some(SchemeBackend::Gcs(options)) => Some(
                    Py::new(
                        py,
                        GcsBackend {
                            options: Py::new(py, GcsOptions::from_store_options(&options))?,
                        },
                    )?
                    .into_any(),
                ),
                Some(SchemeBackend::Azure(options)) => Some(
                    Py::new(
                        py,
                        AzureBackend {
                            options: Py::new(py, AzureOptions::from_store_options(&options))?,
                        },
                    )?
                    .into_any(),
                ),
                _ => None,
            },
        )
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
