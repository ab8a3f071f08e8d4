//! IO backends written in Python (`guideloom.types.IOReaderAbstract`), as a Rust
//! [`Backend`]: guideloom-storage's storages read through them like through any other backend.
//!
//! The Rust side enforces the reader contract whatever the Python code does: a read returns
//! exactly the bytes asked for (fewer is `ShortRead`, more `LongRead`), `close` runs once
//! however often it is asked (and after a failed `open` too), and a `FileNotFoundError` from
//! Python is a not-found error (which ends shard discovery). Other Python exceptions travel as
//! the typed source of the IO error and come back to the caller as its `__cause__`.
//!
//! Each call takes the GIL for the call only. Async readers run their coroutines on the event
//! loop of the `async with storage.async_reader()` block (`run_coroutine_threadsafe`), and the
//! Rust task waits for them without holding the GIL or blocking that loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom::io::{AsyncReader, Backend, Capabilities, Error, Location, Result, SyncReader};
use pyo3::exceptions::{PyException, PyFileNotFoundError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};

use crate::format::raw_bytes;

/// A path of the backend's own type (whatever the storage's directory was), joined with `/`.
#[derive(Clone)]
pub(crate) struct PyLocation {
    path: std::result::Result<Arc<Py<PyAny>>, JoinFailed>,
    text: String,
}

/// Why a path could not be joined: the message, and the exception the path type raised.
#[derive(Clone)]
struct JoinFailed {
    why: String,
    raised: Option<Arc<PyErr>>,
}

impl std::fmt::Debug for PyLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PyLocation {
    /// The storage's directory.
    pub(crate) fn new(path: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyLocation {
            text: path.str()?.to_string(),
            path: Ok(Arc::new(path.clone().unbind())),
        })
    }

    fn object(&self, py: Python<'_>) -> Result<Py<PyAny>> {
        match &self.path {
            Ok(p) => Ok(p.clone_ref(py)),
            // `KeyboardInterrupt` or `SystemExit` raised while joining travels as itself.
            Err(JoinFailed {
                raised: Some(raised),
                ..
            }) if !raised.is_instance_of::<PyException>(py) => {
                Err(io_error(raised.clone_ref(py), &self.text))
            }
            Err(JoinFailed { why, .. }) => Err(Error::InvalidArgument {
                message: format!("{}: {why}", self.text),
            }),
        }
    }
}

impl Location for PyLocation {
    fn child(&self, name: &str) -> Self {
        Python::attach(|py| match &self.path {
            Ok(p) => match p.bind(py).div(name) {
                Ok(child) => PyLocation {
                    text: child
                        .str()
                        .map(|s| s.to_string())
                        .unwrap_or_else(|_| format!("{}/{name}", self.text)),
                    path: Ok(Arc::new(child.unbind())),
                },
                Err(e) => PyLocation {
                    text: format!("{}/{name}", self.text),
                    path: Err(JoinFailed {
                        why: format!("the backend's path type cannot join {name:?}: {e}"),
                        raised: Some(Arc::new(e)),
                    }),
                },
            },
            Err(failed) => PyLocation {
                text: format!("{}/{name}", self.text),
                path: Err(failed.clone()),
            },
        })
    }

    fn describe(&self) -> String {
        self.text.clone()
    }
}

/// A Python exception as an IO error of `location`: `FileNotFoundError` is not-found, any
/// other exception a (non-retryable) remote error carrying it as its source.
fn io_error(err: PyErr, location: &str) -> Error {
    let not_found = Python::attach(|py| err.is_instance_of::<PyFileNotFoundError>(py));
    if not_found {
        Error::NotFound {
            location: location.to_owned(),
            source: Some(Box::new(err)),
        }
    } else {
        Error::Remote {
            location: location.to_owned(),
            message: err.to_string(),
            retryable: false,
            source: Some(Box::new(err)),
        }
    }
}

/// Exactly `len` bytes, or the contract error.
fn checked(location: &str, offset: u64, len: u64, data: &Bound<'_, PyAny>) -> Result<Bytes> {
    let bytes = raw_bytes(data).map_err(|e| io_error(e, location))?;
    let got = bytes.len() as u64;
    if got < len {
        return Err(Error::ShortRead {
            location: location.to_owned(),
            offset,
            requested: len,
            got,
        });
    }
    if got > len {
        return Err(Error::LongRead {
            location: location.to_owned(),
            offset,
            requested: len,
            got: Some(got),
        });
    }
    Ok(bytes)
}

/// A `guideloom.types.IOReaderAbstract` instance as a backend.
pub(crate) struct PyBackend {
    backend: Arc<Py<PyAny>>,
    /// The event loop async readers run their coroutines on (set by `async_reader()`).
    event_loop: Option<Arc<Py<PyAny>>>,
}

impl std::fmt::Debug for PyBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyBackend")
    }
}

impl PyBackend {
    pub(crate) fn new(backend: Arc<Py<PyAny>>, event_loop: Option<Arc<Py<PyAny>>>) -> Self {
        PyBackend {
            backend,
            event_loop,
        }
    }

    /// `backend.<method>()(path)`: a reader object of the backend's class.
    fn construct(&self, method: &str, location: &PyLocation) -> Result<Py<PyAny>> {
        let text = location.describe();
        Python::attach(|py| {
            let path = location.object(py)?;
            let ctor = self
                .backend
                .bind(py)
                .call_method0(method)
                .map_err(|e| io_error(e, &text))?;
            let reader = ctor.call1((path,)).map_err(|e| io_error(e, &text))?;
            Ok(reader.unbind())
        })
    }
}

#[async_trait]
impl Backend for PyBackend {
    type Location = PyLocation;

    fn name(&self) -> &'static str {
        "PythonBackend"
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::default();
        capabilities.sync = true;
        capabilities.r#async = self.event_loop.is_some();
        capabilities
    }

    fn is_supported(&self) -> bool {
        Python::attach(|py| {
            self.backend
                .bind(py)
                .call_method0("is_supported")
                .and_then(|v| v.is_truthy())
                .unwrap_or(false)
        })
    }

    fn open(&self, location: &PyLocation) -> Result<Box<dyn SyncReader>> {
        let reader = PySyncReader {
            reader: self.construct("sync_reader", location)?,
            location: location.describe(),
            closed: AtomicBool::new(false),
        };
        let opened = Python::attach(|py| reader.reader.bind(py).call_method0("open").map(drop));
        if let Err(e) = opened {
            // Close after a partial open; its own failure is secondary to the open's.
            let _ = reader.close();
            return Err(io_error(e, &reader.location));
        }
        Ok(Box::new(reader))
    }

    async fn open_async(&self, location: &PyLocation) -> Result<Box<dyn AsyncReader>> {
        let event_loop = self.event_loop.clone().ok_or_else(|| {
            Error::unsupported(
                "PythonBackend",
                "async reader",
                "async readers of a Python backend run inside `async with storage.async_reader()`",
            )
        })?;
        let reader = PyAsyncReader {
            reader: Arc::new(self.construct("async_reader", location)?),
            event_loop,
            location: location.describe(),
            closed: AtomicBool::new(false),
        };
        if let Err(e) = reader.call("open", &[]).await {
            let _ = reader.close().await;
            return Err(e);
        }
        Ok(Box::new(reader))
    }
}

/// A `guideloom.types.IOSyncReaderAbstract` instance.
struct PySyncReader {
    reader: Py<PyAny>,
    location: String,
    closed: AtomicBool,
}

impl std::fmt::Debug for PySyncReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PySyncReader({})", self.location)
    }
}

impl SyncReader for PySyncReader {
    fn location(&self) -> &str {
        &self.location
    }

    fn size(&self) -> Result<u64> {
        Python::attach(|py| {
            self.reader
                .bind(py)
                .call_method0("filesize")
                .and_then(|v| v.extract::<u64>())
                .map_err(|e| io_error(e, &self.location))
        })
    }

    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        Python::attach(|py| {
            let data = self
                .reader
                .bind(py)
                .call_method1("read", (offset, len))
                .map_err(|e| io_error(e, &self.location))?;
            checked(&self.location, offset, len, &data)
        })
    }

    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        Python::attach(|py| {
            self.reader
                .bind(py)
                .call_method0("close")
                .map(drop)
                .map_err(|e| io_error(e, &self.location))
        })
    }
}

impl Drop for PySyncReader {
    /// The format layer drops readers rather than closing them: close here (once), unless the
    /// interpreter is gone.
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = Python::try_attach(|py| {
            let _ = self.reader.bind(py).call_method0("close");
        });
    }
}

/// A `guideloom.types.IOAsyncReaderAbstract` instance, its coroutines run on `event_loop`.
struct PyAsyncReader {
    reader: Arc<Py<PyAny>>,
    event_loop: Arc<Py<PyAny>>,
    location: String,
    closed: AtomicBool,
}

impl std::fmt::Debug for PyAsyncReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PyAsyncReader({})", self.location)
    }
}

impl PyAsyncReader {
    /// Awaits `reader.<method>(*args)` on the event loop, without the GIL while waiting.
    async fn call(&self, method: &str, args: &[u64]) -> Result<Py<PyAny>> {
        let (tx, rx) = tokio::sync::oneshot::channel::<PyResult<Py<PyAny>>>();
        Python::attach(|py| -> PyResult<()> {
            let coroutine = self
                .reader
                .bind(py)
                .call_method1(method, PyTuple::new(py, args)?)?;
            let future = py.import("asyncio")?.call_method1(
                "run_coroutine_threadsafe",
                (coroutine, self.event_loop.bind(py)),
            )?;
            let tx = Mutex::new(Some(tx));
            let done = PyCFunction::new_closure(
                py,
                None,
                None,
                move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
                    let result = args.get_item(0)?.call_method0("result").map(Bound::unbind);
                    if let Some(tx) = tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
                        let _ = tx.send(result);
                    }
                    Ok(())
                },
            )?;
            future.call_method1("add_done_callback", (done,))?;
            Ok(())
        })
        .map_err(|e| io_error(e, &self.location))?;
        match rx.await {
            Ok(result) => result.map_err(|e| io_error(e, &self.location)),
            Err(_) => Err(Error::Remote {
                location: self.location.clone(),
                message: format!("the event loop dropped the {method} coroutine"),
                retryable: false,
                source: None,
            }),
        }
    }
}

impl Drop for PyAsyncReader {
    /// Dropped unclosed: `close_sync` (no loop is needed), once.
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = Python::try_attach(|py| {
            let _ = self.reader.bind(py).call_method0("close_sync");
        });
    }
}

#[async_trait]
impl AsyncReader for PyAsyncReader {
    fn location(&self) -> &str {
        &self.location
    }

    async fn size(&self) -> Result<u64> {
        let size = self.call("filesize", &[]).await?;
        Python::attach(|py| size.bind(py).extract::<u64>()).map_err(|e| io_error(e, &self.location))
    }

    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let data = self.call("read", &[offset, len]).await?;
        Python::attach(|py| checked(&self.location, offset, len, data.bind(py)))
    }

    async fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.call("close", &[]).await.map(drop)
    }

    fn close_sync(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        Python::attach(|py| {
            let _ = self.reader.bind(py).call_method0("close_sync");
        });
    }
}
