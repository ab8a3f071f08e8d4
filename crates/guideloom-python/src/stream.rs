//! The Rust half of `guideloom.StreamStorage`: a stream of fixed-width elements sliced across
//! numbered shards. The element type is named by the format crate's names (`u8` ... `f64`);
//! the Python wrapper (`python/guideloom/_streams.py`) maps numpy dtypes onto them and views
//! the bytes read as numpy arrays without a copy.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use guideloom::format::{
    AsyncStreamReader, Element, StreamReader, StreamStorage as RustStorage, StreamWriter,
    WriterOptions,
};
use guideloom::io::http::{HttpIo, HttpPath};
use guideloom::io::{Backend, MmapIo, PreadIo, SeekIo};
use pyo3::prelude::*;

use crate::errors::{Error, raise};
use crate::format::raw_bytes;
use crate::io::{Interface, interface};
use crate::options::root_uri;
use crate::runtime::{block_on, detached};

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

impl<E: Element> ReadElements for Arc<AsyncStreamReader<E>> {
    fn len(&self) -> u64 {
        AsyncStreamReader::len(self)
    }
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes> {
        let reader = Arc::clone(self);
        block_on(py, async move {
            Ok(AsyncStreamReader::read(&reader, offset, len)
                .await?
                .as_bytes()
                .clone())
        })
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

fn local<E: Element, B: Backend<Location = PathBuf>>(
    storage: &RawStreamStorage,
    backend: B,
) -> RustStorage<E, B> {
    RustStorage::new(PathBuf::from(&storage.directory), backend)
        .with_writer_options(storage.writer_options.clone())
}

fn open_reader<E: Element>(
    storage: &RawStreamStorage,
    py: Python<'_>,
) -> PyResult<Box<dyn ReadElements>> {
    if storage.interface == Interface::Http {
        let backend = HttpIo::new(&storage.directory).map_err(Error::from)?;
        let http: RustStorage<E, HttpIo> = RustStorage::new(HttpPath::root(), backend);
        let reader = block_on(py, async move { Ok(http.async_reader().await?) })?;
        return Ok(Box::new(Arc::new(reader)));
    }
    detached(py, || {
        Ok(match storage.interface {
            Interface::Pread => Box::new(local::<E, _>(storage, PreadIo::new()).sync_reader()?)
                as Box<dyn ReadElements>,
            Interface::Mmap => Box::new(local::<E, _>(storage, MmapIo::new()).sync_reader()?),
            _ => Box::new(local::<E, _>(storage, SeekIo::new()).sync_reader()?),
        })
    })
}

fn open_writer<E: Element>(
    storage: &RawStreamStorage,
    py: Python<'_>,
) -> PyResult<Box<dyn WriteElements>> {
    detached(py, || {
        Ok(
            Box::new(local::<E, _>(storage, SeekIo::new()).sync_writer()?)
                as Box<dyn WriteElements>,
        )
    })
}

/// `StreamStorage`'s engine: elements named by type, bytes in and out.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawStreamStorage {
    directory: String,
    element: String,
    interface: Interface,
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
        if guideloom::format::element_width(&element).is_none() {
            return Err(raise(
                "InvalidArgumentError",
                format!("unknown element type {element:?}"),
            ));
        }
        let interface = interface(read_interface)?;
        if interface == Interface::Python {
            return Err(raise(
                "UnsupportedError",
                "backends written in Python read DocumentStorage only (not streams, yet)",
            ));
        }
        let mut writer_options = WriterOptions::default();
        if let Some(n) = max_shard_bytes {
            writer_options = writer_options.max_shard_bytes(n);
        }
        if let Some(n) = chunk_bytes {
            writer_options = writer_options.stream_chunk_bytes(n);
        }
        Ok(RawStreamStorage {
            directory: root_uri(directory)?,
            element,
            interface,
            writer_options,
        })
    }

    fn sync_reader(&self, py: Python<'_>) -> PyResult<RawStreamReader> {
        let reader = by_element!(self.element.as_str(), open_reader(self, py))?;
        Ok(RawStreamReader {
            inner: Mutex::new(Some(Arc::from(reader))),
        })
    }

    fn sync_writer(&self, py: Python<'_>) -> PyResult<RawStreamWriter> {
        if self.interface == Interface::Http {
            return Err(raise(
                "UnsupportedError",
                "an HttpIO storage is read-only: write to the directory the server serves",
            ));
        }
        let writer = by_element!(self.element.as_str(), open_writer(self, py))?;
        Ok(RawStreamWriter {
            inner: Some(writer),
            width: guideloom::format::element_width(&self.element).unwrap_or(1),
        })
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
