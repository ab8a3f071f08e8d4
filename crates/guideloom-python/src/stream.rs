//! The Rust half of `guideloom.StreamStorage`: a stream of fixed-width elements sliced across
//! numbered shards. The element type is named by the format crate's names (`u8` ... `f64`);
//! the Python wrapper (`python/guideloom/_streams.py`) maps numpy dtypes onto them and views
//! the bytes read as numpy arrays without a copy.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use guideloom::format::Element;
use guideloom::io::{Backend, SeekIo};
use guideloom::storage::{
    AsyncStreamReader, StreamReader, StreamStorage as RustStorage, StreamWriter, WriterOptions,
};
use pyo3::prelude::*;

use crate::aio::awaitable;
use crate::errors::{Error, raise};
use crate::format::raw_bytes;
use crate::options::writer_options;
use crate::runtime::{block_on, detached};
use crate::slices::Slot;
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
pub(crate) struct OnRuntime<T: ?Sized>(pub(crate) Arc<T>);

impl ReadElements for OnRuntime<dyn AsyncElements> {
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
        Ok(StreamWriter::append(self, &elements_of::<E>(le_bytes))?)
    }
    fn len(&self) -> u64 {
        StreamWriter::len(self)
    }
    fn finish(self: Box<Self>) -> Result<usize, Error> {
        Ok(StreamWriter::finish(*self)?.len())
    }
}

/// Calls `$f::<E>(args)` (or `$f::<K, E>(args)`, given `$f::<K>`) for the element type
/// named `$name`.
macro_rules! by_element {
    ($name:expr, $f:ident $(::<$k:ty>)? ( $($arg:expr),* )) => {
        match $name {
            "u8" => $f::<$($k,)? u8>($($arg),*),
            "u16" => $f::<$($k,)? u16>($($arg),*),
            "u32" => $f::<$($k,)? u32>($($arg),*),
            "u64" => $f::<$($k,)? u64>($($arg),*),
            "i32" => $f::<$($k,)? i32>($($arg),*),
            "i64" => $f::<$($k,)? i64>($($arg),*),
            "f32" => $f::<$($k,)? f32>($($arg),*),
            "f64" => $f::<$($k,)? f64>($($arg),*),
            other => Err(raise(
                "InvalidArgumentError",
                format!("unknown element type {other:?}: use u8, u16, u32, u64, i32, i64, f32 or f64"),
            )),
        }
    };
}

pub(crate) use by_element;

/// The `#[pymethods]` of a stream storage class (a newtype over [`ElementSource`]) whose
/// readers and writer are `$reader`, `$async_reader` and `$writer` of kind `$kind`: the
/// class's own `$methods` (its constructor), then `sync_reader()`, `open_async()`,
/// `sync_writer()` and `directory`, written once for both stream storages.
macro_rules! storage_methods {
    (
        $class:ident, $kind:ty, $reader:ident, $async_reader:ident, $writer:ident
        { $($methods:tt)* }
    ) => {
        #[pyo3::pymethods]
        impl $class {
            $($methods)*

            fn sync_reader(&self, py: Python<'_>) -> PyResult<$reader> {
                let inner = $crate::slices::Slot::new(self.0.sync_reader::<$kind>(py)?);
                Ok($reader { inner })
            }

            /// Opens an async reader (an awaitable; needs a running loop, where a Python
            /// backend's coroutines run).
            fn open_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                let opening = self.0.open_async::<$kind>(py)?;
                $crate::aio::awaitable(py, opening, |py, reader| {
                    let inner = $crate::slices::Slot::new(reader);
                    Ok(Py::new(py, $async_reader { inner })?.into_any())
                })
            }

            fn sync_writer(&self, py: Python<'_>) -> PyResult<$writer> {
                let (writer, width) = self.0.sync_writer::<$kind>(py)?;
                Ok($writer {
                    inner: Some(writer),
                    width,
                })
            }

            /// The directory (or base URL, or the Python backend's path as text).
            #[getter]
            fn directory(&self) -> &str {
                self.0.describe()
            }
        }
    };
}

/// The `#[pymethods]` of a reader class holding its engine in `inner: Slot<_>`: `len()`
/// (elements in the stream) and `close()`, written once for the sync and async twins, then
/// the class's own `$methods`.
macro_rules! reader_methods {
    ($class:ident { $($methods:tt)* }) => {
        #[pyo3::pymethods]
        impl $class {
            /// Elements in the stream.
            fn len(&self) -> PyResult<u64> {
                Ok(self.inner.get()?.len())
            }

            /// Releases the shards; later reads raise.
            fn close(&self) {
                self.inner.close();
            }

            $($methods)*
        }
    };
}

/// The `#[pymethods]` of a writer class holding its writer in `inner: Option<Box<_>>`:
/// `finish()` (finishes the last shard; returns the number of shards written) and
/// `abort()` (drops the writer, discarding its unfinished shard), then the class's own
/// `$methods`.
macro_rules! writer_methods {
    ($class:ident { $($methods:tt)* }) => {
        #[pyo3::pymethods]
        impl $class {
            /// Finishes the last shard; returns the number of shards written.
            fn finish(&mut self, py: Python<'_>) -> PyResult<usize> {
                let writer = $crate::stream::unfinished(self.inner.take())?;
                $crate::runtime::detached(py, || writer.finish())
            }

            /// Drops the writer without finishing (its unfinished shard is discarded).
            fn abort(&mut self) {
                self.inner.take();
            }

            $($methods)*
        }
    };
}

pub(crate) use {reader_methods, storage_methods, writer_methods};

/// Checks an element type name.
pub(crate) fn check_element(element: &str) -> PyResult<u64> {
    guideloom::format::element_width(element).ok_or_else(|| {
        raise(
            "InvalidArgumentError",
            format!("unknown element type {element:?}"),
        )
    })
}

/// Elements from little-endian bytes (a whole number of elements: checked by
/// [`whole_elements`]).
pub(crate) fn elements_of<E: Element>(le_bytes: &[u8]) -> Vec<E> {
    let width = usize::try_from(E::WIDTH).unwrap_or(1);
    le_bytes.chunks_exact(width).map(E::from_le).collect()
}

/// Refuses `bytes` that are not a whole number of `width`-byte elements.
pub(crate) fn whole_elements(bytes: usize, width: u64) -> PyResult<()> {
    let width = usize::try_from(width).unwrap_or(1);
    if bytes.is_multiple_of(width) {
        return Ok(());
    }
    Err(raise(
        "InvalidArgumentError",
        format!("{bytes} bytes are not a whole number of {width}-byte elements"),
    ))
}

/// The writer `inner` until it is finished.
pub(crate) fn unfinished<T>(inner: Option<T>) -> PyResult<T> {
    inner.ok_or_else(|| raise("GuideloomError", "the writer is finished"))
}

/// A guideloom-storage storage of elements behind type-erased readers and writers: what
/// `StreamStorage` and `StreamWithMetaStorage` bind the same way.
pub(crate) trait StreamKind {
    /// The sync reader.
    type Sync: ?Sized + Send + Sync;
    /// The async reader.
    type Async: ?Sized + Send + Sync;
    /// The writer.
    type Write: ?Sized + Send;
    /// Opening an async reader of `E` through `backend`.
    fn opening<E: Element, B: Backend>(backend: B, dir: B::Location)
    -> BoxFuture<Arc<Self::Async>>;
    /// A sync reader of `E` through `backend`'s sync readers.
    fn sync_reader<E: Element, B: Backend>(
        backend: B,
        dir: B::Location,
    ) -> Result<Arc<Self::Sync>, Error>;
    /// The sync reader that drives `reader` on the process runtime.
    fn on_runtime(reader: Arc<Self::Async>) -> Arc<Self::Sync>;
    /// A writer of `E` into the local `dir`.
    fn writer<E: Element>(dir: PathBuf, options: WriterOptions) -> Result<Box<Self::Write>, Error>;
}

/// `StreamStorage`: [`ReadElements`], [`AsyncElements`] and [`WriteElements`].
enum Streams {}

impl StreamKind for Streams {
    type Sync = dyn ReadElements;
    type Async = dyn AsyncElements;
    type Write = dyn WriteElements;
    fn opening<E: Element, B: Backend>(
        backend: B,
        dir: B::Location,
    ) -> BoxFuture<Arc<dyn AsyncElements>> {
        let storage = RustStorage::<E, B>::new(dir, backend);
        Box::pin(async move { Ok(Arc::new(storage.async_reader().await?) as Arc<_>) })
    }
    fn sync_reader<E: Element, B: Backend>(
        backend: B,
        dir: B::Location,
    ) -> Result<Arc<dyn ReadElements>, Error> {
        let storage = RustStorage::<E, B>::new(dir, backend);
        Ok(Arc::new(storage.sync_reader()?))
    }
    fn on_runtime(reader: Arc<dyn AsyncElements>) -> Arc<dyn ReadElements> {
        Arc::new(OnRuntime(reader))
    }
    fn writer<E: Element>(
        dir: PathBuf,
        options: WriterOptions,
    ) -> Result<Box<dyn WriteElements>, Error> {
        let storage =
            RustStorage::<E, SeekIo>::new(dir, SeekIo::new()).with_writer_options(options);
        Ok(Box::new(storage.sync_writer()?))
    }
}

/// A sync reader through `backend`: its sync readers, or its async ones on the runtime.
fn sync_through<K: StreamKind, E: Element, B: Backend>(
    py: Python<'_>,
    backend: B,
    dir: B::Location,
) -> PyResult<Arc<K::Sync>> {
    if !backend.capabilities().sync {
        let reader = block_on(py, K::opening::<E, B>(backend, dir))?;
        return Ok(K::on_runtime(reader));
    }
    detached(py, || K::sync_reader::<E, B>(backend, dir))
}

fn open_reader<K: StreamKind, E: Element>(
    storage: &ElementSource,
    py: Python<'_>,
) -> PyResult<Arc<K::Sync>> {
    with_backend!(
        &storage.source,
        None,
        |backend, dir| sync_through::<K, E, _>(py, backend, dir)
    )
}

fn open_async<K: StreamKind, E: Element>(
    storage: &ElementSource,
    event_loop: Arc<Py<PyAny>>,
) -> PyResult<BoxFuture<Arc<K::Async>>> {
    Ok(with_backend!(
        &storage.source,
        Some(event_loop),
        |backend, dir| K::opening::<E, _>(backend, dir)
    ))
}

fn open_writer<K: StreamKind, E: Element>(
    storage: &ElementSource,
    py: Python<'_>,
) -> PyResult<Box<K::Write>> {
    let dir = storage.source.writable_dir()?;
    let options = storage.writer_options.clone();
    detached(py, || K::writer::<E>(dir, options))
}

/// What both stream storages hold: the source, the element type's name, writer options.
#[derive(Debug)]
pub(crate) struct ElementSource {
    source: Source,
    element: String,
    writer_options: WriterOptions,
}

impl ElementSource {
    /// The storage of `element`s under `directory` (`read_interface`: its backend).
    pub(crate) fn new(
        directory: &Bound<'_, PyAny>,
        element: String,
        read_interface: Option<&Bound<'_, PyAny>>,
        writer_options: WriterOptions,
    ) -> PyResult<Self> {
        check_element(&element)?;
        Ok(ElementSource {
            source: Source::new(directory, read_interface)?,
            element,
            writer_options,
        })
    }

    /// A sync reader of kind `K`.
    pub(crate) fn sync_reader<K: StreamKind>(&self, py: Python<'_>) -> PyResult<Arc<K::Sync>> {
        by_element!(self.element.as_str(), open_reader::<K>(self, py))
    }

    /// Opening an async reader of kind `K` (needs a running loop, where a Python backend's
    /// coroutines run).
    pub(crate) fn open_async<K: StreamKind>(
        &self,
        py: Python<'_>,
    ) -> PyResult<BoxFuture<Arc<K::Async>>> {
        let event_loop = running_loop(py)?;
        by_element!(self.element.as_str(), open_async::<K>(self, event_loop))
    }

    /// A writer of kind `K` and the element width in bytes.
    pub(crate) fn sync_writer<K: StreamKind>(
        &self,
        py: Python<'_>,
    ) -> PyResult<(Box<K::Write>, u64)> {
        let writer = by_element!(self.element.as_str(), open_writer::<K>(self, py))?;
        Ok((writer, check_element(&self.element)?))
    }

    /// The directory (or base URL, or the Python backend's path as text).
    pub(crate) fn describe(&self) -> &str {
        self.source.describe()
    }
}

/// `StreamStorage`'s engine: elements named by type, bytes in and out.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawStreamStorage(ElementSource);

storage_methods!(RawStreamStorage, Streams, RawStreamReader, RawAsyncStreamReader, RawStreamWriter {
    #[new]
    #[pyo3(signature = (directory, element, *, read_interface = None, max_shard_bytes = None, chunk_bytes = None))]
    fn new(
        directory: &Bound<'_, PyAny>,
        element: String,
        read_interface: Option<&Bound<'_, PyAny>>,
        max_shard_bytes: Option<u64>,
        chunk_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let options = writer_options(None, max_shard_bytes, chunk_bytes);
        Ok(RawStreamStorage(ElementSource::new(
            directory,
            element,
            read_interface,
            options,
        )?))
    }
});

/// Reads element ranges asynchronously, as little-endian bytes.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawAsyncStreamReader {
    inner: Slot<Arc<dyn AsyncElements>>,
}

reader_methods!(RawAsyncStreamReader {
    /// Elements `offset..offset + len` as a zero-copy buffer (an awaitable).
    fn read<'py>(&self, py: Python<'py>, offset: u64, len: u64) -> PyResult<Bound<'py, PyAny>> {
        let reading = self.inner.get()?.read(offset, len);
        awaitable(py, reading, buffer)
    }
});

/// `bytes` as a zero-copy Python buffer (an awaitable's result).
pub(crate) fn buffer(py: Python<'_>, bytes: Bytes) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, pyo3_bytes::PyBytes::new(bytes))?.into_any())
}

/// Reads element ranges as little-endian bytes.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawStreamReader {
    inner: Slot<Arc<dyn ReadElements>>,
}

reader_methods!(RawStreamReader {
    /// Elements `offset..offset + len` as a zero-copy buffer (copied only where the range
    /// spans shards or the bytes are not aligned for the element type).
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<pyo3_bytes::PyBytes> {
        Ok(pyo3_bytes::PyBytes::new(
            self.inner.get()?.read(py, offset, len)?,
        ))
    }
});

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

writer_methods!(RawStreamWriter {
    /// Appends the elements in `data` (a whole number of elements, little-endian).
    fn append(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = raw_bytes(data)?;
        whole_elements(bytes.len(), self.width)?;
        let writer = unfinished(self.inner.as_mut())?;
        detached(py, || writer.append(&bytes))
    }

    /// Elements written so far.
    fn len(&self) -> u64 {
        self.inner.as_ref().map_or(0, |w| w.len())
    }
});
