//! The Rust half of `guideloom.StreamStorage`: a stream of fixed-width elements sliced across
//! numbered shards. The element type is named by the format crate's names (`u8` ... `f64`);
//! the Python wrapper (`python/guideloom/_streams.py`) maps numpy dtypes onto them and views
//! the bytes read as numpy arrays without a copy.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use guideloom::format::{
    AsyncStreamReader, Element, StreamReader, StreamStorage as RustStorage, StreamWriter,
    WriterOptions,
};
use guideloom::io::{Backend, SeekIo};
use pyo3::prelude::*;

use crate::aio::awaitable;
use crate::errors::{Error, raise};
use crate::format::raw_bytes;
use crate::runtime::{block_on, detached};
use crate::source::{BoxFuture, Source, running_loop, with_backend};

/// A stream reader of some element type.
trait ReadElements: Send + Sync {
    fn len(&self) -> u64;
    /// Elements `offset..offset + len` as little-endian bytes.
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes>;
}

impl<E: Element> ReadElements for StreamReader<E> {
    fn len(&self) -> u64 {
        StreamReader::len(self)
    }
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes> {
        detached(py, || {
            Ok(StreamReader::read(self, offset, len)?.as_bytes().clone())
        })
    }
}

/// An async stream reader of some element type.
pub(crate) trait AsyncElements: Send + Sync {
    fn len(&self) -> u64;
    /// Elements `offset..offset + len` as little-endian bytes.
    fn read(self: Arc<Self>, offset: u64, len: u64) -> BoxFuture<Bytes>;
}

impl<E: Element> AsyncElements for AsyncStreamReader<E> {
    fn len(&self) -> u64 {
        AsyncStreamReader::len(self)
    }
    fn read(self: Arc<Self>, offset: u64, len: u64) -> BoxFuture<Bytes> {
        Box::pin(async move {
            Ok(AsyncStreamReader::read(&self, offset, len)
                .await?
                .as_bytes()
                .clone())
        })
    }
}

/// An async reader driven on the process runtime: the sync reader of a backend that has
/// only async readers (HTTP).
struct OnRuntime(Arc<dyn AsyncElements>);

impl ReadElements for OnRuntime {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes> {
        block_on(py, Arc::clone(&self.0).read(offset, len))
    }
}
/// A stream writer of some element type.
trait WriteElements: Send + Sync {
    fn append(&mut self, le_bytes: &[u8]) -> Result<(), Error>;
    fn len(&self) -> u64;
    fn finish(self: Box<Self>) -> Result<usize, Error>;
}

impl<E: Element> WriteElements for StreamWriter<E> {
    fn append(&mut self, le_bytes: &[u8]) -> Result<(), Error> {
        let width = usize::try_from(E::WIDTH).unwrap_or(1);
        let elements: Vec<E> = le_bytes.chunks_exact(width).map(E::from_le).collect();
        Ok(StreamWriter::append(self, &elements)?)
    }
    fn len(&self) -> u64 {
        StreamWriter::len(self)
    }
    fn finish(self: Box<Self>) -> Result<usize, Error> {
        Ok(StreamWriter::finish(*self)?.len())
    }
}

/// Calls `$f::<E>(args)` for the element type named `$name`.
macro_rules! by_element {
    ($name:expr, $f:ident ( $($arg:expr),* )) => {
        match $name {
            "u8" => $f::<u8>($($arg),*),
            "u16" => $f::<u16>($($arg),*),
            "u32" => $f::<u32>($($arg),*),
            "u64" => $f::<u64>($($arg),*),
            "i32" => $f::<i32>($($arg),*),
            "i64" => $f::<i64>($($arg),*),
            "f32" => $f::<f32>($($arg),*),
            "f64" => $f::<f64>($($arg),*),
            other => Err(raise(
                "InvalidArgumentError",
                format!("unknown element type {other:?}: use u8, u16, u32, u64, i32, i64, f32 or f64"),
            )),
        }
    };
}

pub(crate) use by_element;

/// Checks an element type name.
pub(crate) fn check_element(element: &str) -> PyResult<u64> {
    guideloom::format::element_width(element).ok_or_else(|| {
        raise(
            "InvalidArgumentError",
            format!("unknown element type {element:?}"),
        )
    })
}

/// Opening an async reader through `backend`.
fn opening<E: Element, B: Backend>(
    backend: B,
    dir: B::Location,
) -> BoxFuture<Arc<dyn AsyncElements>> {
    let storage = RustStorage::<E, B>::new(dir, backend);
    Box::pin(async move { Ok(Arc::new(storage.async_reader().await?) as Arc<dyn AsyncElements>) })
}

/// A sync reader through `backend`: its sync readers, or its async ones on the runtime.
fn sync_through<E: Element, B: Backend>(
    py: Python<'_>,
    backend: B,
    dir: B::Location,
) -> PyResult<Arc<dyn ReadElements>> {
    if !backend.capabilities().sync {
        let reader = block_on(py, opening::<E, B>(backend, dir))?;
        return Ok(Arc::new(OnRuntime(reader)));
    }
    let storage = RustStorage::<E, B>::new(dir, backend);
    detached(py, || {
        Ok(Arc::new(storage.sync_reader()?) as Arc<dyn ReadElements>)
    })
}

fn open_reader<E: Element>(
    storage: &RawStreamStorage,
    py: Python<'_>,
) -> PyResult<Arc<dyn ReadElements>> {
    with_backend!(&storage.source, None, |backend, dir| sync_through::<E, _>(
        py, backend, dir
    ))
}

fn open_async<E: Element>(
    storage: &RawStreamStorage,
    event_loop: Arc<Py<PyAny>>,
) -> PyResult<BoxFuture<Arc<dyn AsyncElements>>> {
    Ok(with_backend!(
        &storage.source,
        Some(event_loop),
        |backend, dir| opening::<E, _>(backend, dir)
    ))
}

fn open_writer<E: Element>(
    storage: &RawStreamStorage,
    py: Python<'_>,
) -> PyResult<Box<dyn WriteElements>> {
    let dir = storage.source.writable_dir()?;
    let rust = RustStorage::<E, SeekIo>::new(dir, SeekIo::new())
        .with_writer_options(storage.writer_options.clone());
    detached(py, || {
        Ok(Box::new(rust.sync_writer()?) as Box<dyn WriteElements>)
    })
}

/// `StreamStorage`'s engine: elements named by type, bytes in and out.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawStreamStorage {
    source: Source,
    element: String,
    writer_options: WriterOptions,
}

#[pymethods]
impl RawStreamStorage {
    #[new]
    #[pyo3(signature = (directory, element, *, read_interface = None, max_shard_bytes = None, chunk_bytes = None))]
    fn new(
        directory: &Bound<'_, PyAny>,
        element: String,
        read_interface: Option<&Bound<'_, PyAny>>,
        max_shard_bytes: Option<u64>,
        chunk_bytes: Option<u64>,
    ) -> PyResult<Self> {
        check_element(&element)?;
        let mut writer_options = WriterOptions::default();
        if let Some(n) = max_shard_bytes {
            writer_options = writer_options.max_shard_bytes(n);
        }
        if let Some(n) = chunk_bytes {
            writer_options = writer_options.stream_chunk_bytes(n);
        }
        Ok(RawStreamStorage {
            source: Source::new(directory, read_interface)?,
            element,
            writer_options,
        })
    }

    fn sync_reader(&self, py: Python<'_>) -> PyResult<RawStreamReader> {
        let reader = by_element!(self.element.as_str(), open_reader(self, py))?;
        Ok(RawStreamReader {
            inner: Mutex::new(Some(reader)),
        })
    }

    /// Opens an async reader (an awaitable; needs a running loop, where a Python
    /// backend's coroutines run).
    fn open_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let event_loop = running_loop(py)?;
        let opening = by_element!(self.element.as_str(), open_async(self, event_loop))?;
        awaitable(py, opening, |py, reader| {
            Ok(Py::new(
                py,
                RawAsyncStreamReader {
                    inner: Mutex::new(Some(reader)),
                },
            )?
            .into_any())
        })
    }

    fn sync_writer(&self, py: Python<'_>) -> PyResult<RawStreamWriter> {
        let writer = by_element!(self.element.as_str(), open_writer(self, py))?;
        Ok(RawStreamWriter {
            inner: Some(writer),
            width: check_element(&self.element)?,
        })
    }

    /// The directory (or base URL, or the Python backend's path as text).
    #[getter]
    fn directory(&self) -> &str {
        self.source.describe()
    }
}

/// Reads element ranges asynchronously, as little-endian bytes.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct RawAsyncStreamReader {
    inner: Mutex<Option<Arc<dyn AsyncElements>>>,
}

impl std::fmt::Debug for RawAsyncStreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawAsyncStreamReader")
    }
}

impl RawAsyncStreamReader {
    fn engine(&self) -> PyResult<Arc<dyn AsyncElements>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| raise("GuideloomError", "the reader is closed"))
    }
}

#[pymethods]
impl RawAsyncStreamReader {
    /// Elements in the stream.
    fn len(&self) -> PyResult<u64> {
        Ok(self.engine()?.len())
    }

    /// Elements `offset..offset + len` as a zero-copy buffer (an awaitable).
    fn read<'py>(&self, py: Python<'py>, offset: u64, len: u64) -> PyResult<Bound<'py, PyAny>> {
        let reading = self.engine()?.read(offset, len);
        awaitable(py, reading, |py, bytes| {
            Ok(Py::new(py, pyo3_bytes::PyBytes::new(bytes))?.into_any())
        })
    }

    fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Reads element ranges as little-endian bytes.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct RawStreamReader {
    inner: Mutex<Option<Arc<dyn ReadElements>>>,
}

impl std::fmt::Debug for RawStreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawStreamReader")
    }
}

impl RawStreamReader {
    fn engine(&self) -> PyResult<Arc<dyn ReadElements>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| raise("GuideloomError", "the reader is closed"))
    }
}

#[pymethods]
impl RawStreamReader {
    /// Elements in the stream.
    fn len(&self) -> PyResult<u64> {
        Ok(self.engine()?.len())
    }

    /// Elements `offset..offset + len` as a zero-copy buffer (copied only where the range
    /// spans shards or the bytes are not aligned for the element type).
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<pyo3_bytes::PyBytes> {
        Ok(pyo3_bytes::PyBytes::new(
            self.engine()?.read(py, offset, len)?,
        ))
    }

    fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Appends elements given as little-endian bytes.
#[pyclass(module = "guideloom._guideloom")]
pub(crate) struct RawStreamWriter {
    inner: Option<Box<dyn WriteElements>>,
    width: u64,
}

impl std::fmt::Debug for RawStreamWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawStreamWriter")
    }
}

#[pymethods]
impl RawStreamWriter {
    /// Appends the elements in `data` (a whole number of elements, little-endian).
    fn append(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = raw_bytes(data)?;
        let width = usize::try_from(self.width).unwrap_or(1);
        if !bytes.len().is_multiple_of(width) {
            return Err(raise(
                "InvalidArgumentError",
                format!(
                    "{} bytes are not a whole number of {width}-byte elements",
                    bytes.len()
                ),
            ));
        }
        let writer = self
            .inner
            .as_mut()
            .ok_or_else(|| raise("GuideloomError", "the writer is finished"))?;
        detached(py, || writer.append(&bytes))
    }

    /// Elements written so far.
    fn len(&self) -> u64 {
        self.inner.as_ref().map_or(0, |w| w.len())
    }

    /// Finishes the last shard; returns the number of shards written.
    fn finish(&mut self, py: Python<'_>) -> PyResult<usize> {
        let writer = self
            .inner
            .take()
            .ok_or_else(|| raise("GuideloomError", "the writer is finished"))?;
        detached(py, || writer.finish())
    }

    /// Drops the writer without finishing (its unfinished shard is discarded).
    fn abort(&mut self) {
        self.inner.take();
    }
}
