//! Where a storage's shards are read from: its directory and the IO backend its
//! `read_interface` names. Shared by the document, stream, stream-with-meta and file-system
//! bindings, which are generic over the backend: [`with_backend!`] runs one generic body with
//! the backend and directory of the chosen interface bound.
//!
//! A backend without synchronous readers (`HttpIO`; `capabilities().sync` is false) still
//! serves `sync_reader()`: the binding opens the async reader and drives it on the process
//! runtime. A Python backend says it has sync readers; one whose `sync_reader()` raises
//! makes the storage raise with that exception as its `__cause__`.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use guideloom::io::Location;
use guideloom::io::http::HttpIo;
use pyo3::prelude::*;

use crate::errors::{Error, raise};
use crate::io::{Interface, interface};
use crate::options::root_uri;
use crate::pybackend::{PyBackend, PyLocation};

/// A boxed `Send` future (the type-erased readers' reads).
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'static>>;

/// A directory and the backend that reads it.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// The directory as text: a local path, a base URL, or the Python path's `str()`.
    directory: String,
    interface: Interface,
    /// A backend written in Python and the directory in its own path type.
    custom: Option<(Arc<Py<PyAny>>, PyLocation)>,
}

impl Source {
    /// The source of a storage built with `(directory, read_interface=...)`.
    pub(crate) fn new(
        directory: &Bound<'_, PyAny>,
        read_interface: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let interface = interface(read_interface)?;
        let (directory, custom) = match (interface, read_interface) {
            (Interface::Python, Some(backend)) => {
                let location = PyLocation::new(directory)?;
                (
                    location.describe(),
                    Some((Arc::new(backend.clone().unbind()), location)),
                )
            }
            _ => (root_uri(directory)?, None),
        };
        Ok(Source {
            directory,
            interface,
            custom,
        })
    }

    /// The directory as text.
    pub(crate) fn describe(&self) -> &str {
        &self.directory
    }

    /// The interface chosen.
    pub(crate) fn interface(&self) -> Interface {
        self.interface
    }

    /// The local directory behind a local backend.
    pub(crate) fn local_dir(&self) -> PathBuf {
        PathBuf::from(&self.directory)
    }

    /// The local directory writers write into; refused for `HttpIO` and Python backends,
    /// which only read.
    pub(crate) fn writable_dir(&self) -> PyResult<PathBuf> {
        if matches!(self.interface, Interface::Http | Interface::Python) {
            return Err(raise(
                "UnsupportedError",
                "this storage reads through HttpIO or a Python backend, which are read-only: \
                 write to the local directory behind it",
            ));
        }
        Ok(self.local_dir())
    }

    /// The HTTP backend below the base URL.
    pub(crate) fn http(&self) -> Result<HttpIo, Error> {
        Ok(HttpIo::new(&self.directory)?)
    }

    /// The Python backend (its async readers run on `event_loop`) and the directory.
    pub(crate) fn python(
        &self,
        event_loop: Option<Arc<Py<PyAny>>>,
    ) -> PyResult<(PyBackend, PyLocation)> {
        let (backend, directory) = self
            .custom
            .as_ref()
            .ok_or_else(|| raise("InternalError", "a Python backend without its object"))?;
        Ok((
            PyBackend::new(Arc::clone(backend), event_loop),
            directory.clone(),
        ))
    }
}

/// The running asyncio loop (an async reader's Python backend runs its coroutines there).
pub(crate) fn running_loop(py: Python<'_>) -> PyResult<Arc<Py<PyAny>>> {
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    Ok(Arc::new(event_loop.unbind()))
}

/// Evaluates `$body` with `$backend` and `$dir` bound to the backend and directory of
/// `$source` (a [`Source`]); `$event_loop` is the loop of a Python backend's async readers.
/// The body is type-checked once per backend type, so it calls generic code.
macro_rules! with_backend {
    ($source:expr, $event_loop:expr, |$backend:ident, $dir:ident| $body:expr) => {{
        use $crate::io::Interface;
        let source: &$crate::source::Source = $source;
        match source.interface() {
            Interface::Seek => {
                let ($backend, $dir) = (guideloom::io::SeekIo::new(), source.local_dir());
                $body
            }
            Interface::Pread => {
                let ($backend, $dir) = (guideloom::io::PreadIo::new(), source.local_dir());
                $body
            }
            Interface::Mmap => {
                let ($backend, $dir) = (guideloom::io::MmapIo::new(), source.local_dir());
                $body
            }
            Interface::Http => {
                let ($backend, $dir) = (source.http()?, guideloom::io::http::HttpPath::root());
                $body
            }
            Interface::Python => {
                let ($backend, $dir) = source.python($event_loop)?;
                $body
            }
        }
    }};
}

pub(crate) use with_backend;
