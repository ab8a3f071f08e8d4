//! `guideloom.io`: the IO backends a storage reads through, named from Python.

use guideloom::io::{Backend, MmapIo, PreadIo, SeekIo};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// The IO backend a storage reads through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interface {
    Seek,
    Pread,
    Mmap,
    Http,
    /// A `guideloom.types.IOReaderAbstract` subclass (see `pybackend.rs`).
    Python,
}

macro_rules! io_class {
    ($name:ident, $backend:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(frozen, module = "guideloom._guideloom")]
        #[derive(Debug)]
        pub(crate) struct $name;

        #[pymethods]
        impl $name {
            #[new]
            fn new() -> Self {
                $name
            }
            /// Whether this backend works on this platform.
            #[staticmethod]
            fn is_supported() -> bool {
                Backend::is_supported(&$backend)
            }
            fn __repr__(&self) -> String {
                format!("{}()", stringify!($name))
            }
        }
    };
}

io_class!(
    SeekIO,
    SeekIo::new(),
    "Portable local reads: seek + read on one open file per shard (the default)."
);
io_class!(
    PosixPreadIO,
    PreadIo::new(),
    "Local positioned reads (`pread`), no shared file offset."
);
io_class!(
    MmapIO,
    MmapIo::new(),
    "Memory-mapped local shards: record bytes are slices of the mapping (no copy)."
);

/// HTTP range requests below a base URL (the storage's directory); async-first, its sync
/// readers drive the same async reader on the process runtime.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct HttpIO;

#[pymethods]
impl HttpIO {
    #[new]
    fn new() -> Self {
        HttpIO
    }
    /// Whether this backend works here (always: it needs only a network).
    #[staticmethod]
    fn is_supported() -> bool {
        true
    }
    fn __repr__(&self) -> &'static str {
        "HttpIO()"
    }
}

pub(crate) fn interface(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Interface> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Interface::Seek);
    };
    if obj.is_instance_of::<SeekIO>() {
        Ok(Interface::Seek)
    } else if obj.is_instance_of::<PosixPreadIO>() {
        Ok(Interface::Pread)
    } else if obj.is_instance_of::<MmapIO>() {
        Ok(Interface::Mmap)
    } else if obj.is_instance_of::<HttpIO>() {
        Ok(Interface::Http)
    } else if obj.is_instance(
        &obj.py()
            .import("guideloom.types")?
            .getattr("IOReaderAbstract")?,
    )? {
        Ok(Interface::Python)
    } else {
        Err(PyTypeError::new_err(format!(
            "read_interface must be SeekIO(), PosixPreadIO(), MmapIO(), HttpIO() or a \
             guideloom.types.IOReaderAbstract, not {}",
            obj.get_type().name()?
        )))
    }
}
