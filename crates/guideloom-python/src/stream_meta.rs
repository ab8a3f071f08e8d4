//! The Rust half of `guideloom.StreamWithMetaStorage`: a stream of fixed-width elements cut
//! into documents, each with JSON-compatible metadata. It is the format crate's
//! `StreamWithMetaStorage<E, Value>`: shard pairs `shard-n.glm` (the elements, one record per
//! document) and `meta-n.glm` (the metadata as CBOR, the Rust `CborFormat`'s bytes), so a
//! corpus written from Rust with serde metadata reads here and back. The Python wrapper
//! (`python/guideloom/_stream_meta.py`) views the element bytes as numpy arrays, no copy.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use guideloom::format::{Element, Value};
use guideloom::io::{Backend, SeekIo};
use guideloom::storage::{
    AsyncStreamWithMetaReader, StreamWithMetaReader, StreamWithMetaStorage as RustStorage,
    StreamWithMetaWriter, WriterOptions,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::aio::awaitable;
use crate::errors::Error;
use crate::format::{annotation_value, from_value, raw_bytes};
use crate::options::writer_options;
use crate::runtime::{block_on, detached};
use crate::slices::Slot;
use crate::source::BoxFuture;
use crate::stream::{
    ElementSource, OnRuntime, StreamKind, buffer, elements_of, reader_methods, storage_methods,
    unfinished, whole_elements, writer_methods,
};

/// Documents as they leave Rust: little-endian element bytes and the metadata value.
type Docs = Vec<(Bytes, Value)>;

fn docs_of<E: Element>(docs: Vec<(guideloom::format::Elements<E>, Value)>) -> Docs {
    docs.into_iter()
        .map(|(elements, meta)| (elements.as_bytes().clone(), meta))
        .collect()
}

/// A sync reader of some element type.
trait ReadDocs: Send + Sync {
    fn num_docs(&self) -> u64;
    fn len(&self) -> u64;
    fn doc_range(&self, i: u64) -> Result<Range<u64>, Error>;
    fn read_docs(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Docs>;
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes>;
}

impl<E: Element> ReadDocs for StreamWithMetaReader<E, Value> {
    fn num_docs(&self) -> u64 {
        StreamWithMetaReader::num_docs(self)
    }
    fn len(&self) -> u64 {
        StreamWithMetaReader::len(self)
    }
    fn doc_range(&self, i: u64) -> Result<Range<u64>, Error> {
        Ok(StreamWithMetaReader::doc_range(self, i)?)
    }
    fn read_docs(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Docs> {
        detached(py, || {
            Ok(docs_of(StreamWithMetaReader::read_docs(self, &indices)?))
        })
    }
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes> {
        detached(py, || {
            Ok(StreamWithMetaReader::read(self, offset, len)?
                .as_bytes()
                .clone())
        })
    }
}

/// An async reader of some element type.
trait AsyncReadDocs: Send + Sync {
    fn num_docs(&self) -> u64;
    fn len(&self) -> u64;
    fn doc_range(&self, i: u64) -> Result<Range<u64>, Error>;
    fn read_docs(self: Arc<Self>, indices: Vec<u64>) -> BoxFuture<Docs>;
    fn read(self: Arc<Self>, offset: u64, len: u64) -> BoxFuture<Bytes>;
}

impl<E: Element> AsyncReadDocs for AsyncStreamWithMetaReader<E, Value> {
    fn num_docs(&self) -> u64 {
        AsyncStreamWithMetaReader::num_docs(self)
    }
    fn len(&self) -> u64 {
        AsyncStreamWithMetaReader::len(self)
    }
    fn doc_range(&self, i: u64) -> Result<Range<u64>, Error> {
        Ok(AsyncStreamWithMetaReader::doc_range(self, i)?)
    }
    fn read_docs(self: Arc<Self>, indices: Vec<u64>) -> BoxFuture<Docs> {
        Box::pin(async move {
            Ok(docs_of(
                AsyncStreamWithMetaReader::read_docs(&self, &indices).await?,
            ))
        })
    }
    fn read(self: Arc<Self>, offset: u64, len: u64) -> BoxFuture<Bytes> {
        Box::pin(async move {
            Ok(AsyncStreamWithMetaReader::read(&self, offset, len)
                .await?
                .as_bytes()
                .clone())
        })
    }
}

impl ReadDocs for OnRuntime<dyn AsyncReadDocs> {
    fn num_docs(&self) -> u64 {
        self.0.num_docs()
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn doc_range(&self, i: u64) -> Result<Range<u64>, Error> {
        self.0.doc_range(i)
    }
    fn read_docs(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Docs> {
        block_on(py, Arc::clone(&self.0).read_docs(indices))
    }
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes> {
        block_on(py, Arc::clone(&self.0).read(offset, len))
    }
}

/// A writer of some element type.
trait WriteDocs: Send + Sync {
    fn append(&mut self, le_bytes: &[u8], meta: &Value) -> Result<u64, Error>;
    fn num_docs(&self) -> u64;
    fn finish(self: Box<Self>) -> Result<usize, Error>;
}

impl<E: Element> WriteDocs for StreamWithMetaWriter<E, Value> {
    fn append(&mut self, le_bytes: &[u8], meta: &Value) -> Result<u64, Error> {
        let elements = elements_of::<E>(le_bytes);
        Ok(StreamWithMetaWriter::append(self, &elements, meta)?)
    }
    fn num_docs(&self) -> u64 {
        StreamWithMetaWriter::num_docs(self)
    }
    fn finish(self: Box<Self>) -> Result<usize, Error> {
        Ok(StreamWithMetaWriter::finish(*self)?.len())
    }
}

/// `StreamWithMetaStorage`: [`ReadDocs`], [`AsyncReadDocs`] and [`WriteDocs`].
enum WithMeta {}

impl StreamKind for WithMeta {
    type Sync = dyn ReadDocs;
    type Async = dyn AsyncReadDocs;
    type Write = dyn WriteDocs;
    fn opening<E: Element, B: Backend>(
        backend: B,
        dir: B::Location,
    ) -> BoxFuture<Arc<dyn AsyncReadDocs>> {
        let storage = RustStorage::<E, Value, B>::new(dir, backend);
        Box::pin(async move { Ok(Arc::new(storage.async_reader().await?) as Arc<_>) })
    }
    fn sync_reader<E: Element, B: Backend>(
        backend: B,
        dir: B::Location,
    ) -> Result<Arc<dyn ReadDocs>, Error> {
        let storage = RustStorage::<E, Value, B>::new(dir, backend);
        Ok(Arc::new(storage.sync_reader()?))
    }
    fn on_runtime(reader: Arc<dyn AsyncReadDocs>) -> Arc<dyn ReadDocs> {
        Arc::new(OnRuntime(reader))
    }
    fn writer<E: Element>(
        dir: PathBuf,
        options: WriterOptions,
    ) -> Result<Box<dyn WriteDocs>, Error> {
        let storage =
            RustStorage::<E, Value, SeekIo>::new(dir, SeekIo::new()).with_writer_options(options);
        Ok(Box::new(storage.sync_writer()?))
    }
}

/// Documents as a list of `(Bytes, metadata)` tuples.
fn docs_list<'py>(py: Python<'py>, docs: Docs) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (bytes, meta) in docs {
        let buffer = Bound::new(py, pyo3_bytes::PyBytes::new(bytes))?.into_any();
        list.append(PyTuple::new(py, [buffer, from_value(py, &meta)?])?)?;
    }
    Ok(list)
}

/// `StreamWithMetaStorage`'s engine: elements named by type, bytes and metadata in and out.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawStreamMetaStorage(ElementSource);

storage_methods!(
    RawStreamMetaStorage,
    WithMeta,
    RawStreamMetaReader,
    RawAsyncStreamMetaReader,
    RawStreamMetaWriter {
    #[new]
    #[pyo3(signature = (directory, element, *, read_interface = None, max_shard_records = None, max_shard_bytes = None))]
    fn new(
        directory: &Bound<'_, PyAny>,
        element: String,
        read_interface: Option<&Bound<'_, PyAny>>,
        max_shard_records: Option<u64>,
        max_shard_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let options = writer_options(max_shard_records, max_shard_bytes, None);
        Ok(RawStreamMetaStorage(ElementSource::new(
            directory,
            element,
            read_interface,
            options,
        )?))
    }
});

/// [`reader_methods!`] with `num_docs()` and `doc_range(i)` (the element range
/// `(start, stop)` of document `i`), written once for the sync and async twins.
macro_rules! doc_reader_methods {
    ($class:ident { $($methods:tt)* }) => {
        reader_methods!($class {
            /// Documents.
            fn num_docs(&self) -> PyResult<u64> {
                Ok(self.inner.get()?.num_docs())
            }

            /// Element range `(start, stop)` of document `i`.
            fn doc_range(&self, i: u64) -> PyResult<(u64, u64)> {
                let range = self.inner.get()?.doc_range(i)?;
                Ok((range.start, range.end))
            }

            $($methods)*
        });
    };
}

/// Reads documents (element bytes + metadata) and element ranges.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawStreamMetaReader {
    inner: Slot<Arc<dyn ReadDocs>>,
}

doc_reader_methods!(RawStreamMetaReader {
    /// Documents `indices`: `(element bytes, metadata)` each, one batched read per shard.
    fn read_docs<'py>(&self, py: Python<'py>, indices: Vec<u64>) -> PyResult<Bound<'py, PyList>> {
        let docs = self.inner.get()?.read_docs(py, indices)?;
        docs_list(py, docs)
    }

    /// Elements `offset..offset + len` as a zero-copy buffer.
    fn read(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<pyo3_bytes::PyBytes> {
        Ok(pyo3_bytes::PyBytes::new(
            self.inner.get()?.read(py, offset, len)?,
        ))
    }
});

/// The async twin of [`RawStreamMetaReader`]: reads are awaitables.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawAsyncStreamMetaReader {
    inner: Slot<Arc<dyn AsyncReadDocs>>,
}

doc_reader_methods!(RawAsyncStreamMetaReader {
    fn read_docs<'py>(&self, py: Python<'py>, indices: Vec<u64>) -> PyResult<Bound<'py, PyAny>> {
        let reading = self.inner.get()?.read_docs(indices);
        awaitable(py, reading, |py, docs| {
            Ok(docs_list(py, docs)?.into_any().unbind())
        })
    }

    fn read<'py>(&self, py: Python<'py>, offset: u64, len: u64) -> PyResult<Bound<'py, PyAny>> {
        let reading = self.inner.get()?.read(offset, len);
        awaitable(py, reading, buffer)
    }
});

/// Appends documents: element bytes (little-endian) and a JSON-compatible metadata value.
#[pyclass(module = "guideloom._guideloom")]
pub(crate) struct RawStreamMetaWriter {
    inner: Option<Box<dyn WriteDocs>>,
    width: u64,
}

impl std::fmt::Debug for RawStreamMetaWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawStreamMetaWriter")
    }
}

writer_methods!(RawStreamMetaWriter {
    /// Appends one document; returns its number.
    fn append(
        &mut self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        meta: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let bytes = raw_bytes(data)?;
        whole_elements(bytes.len(), self.width)?;
        let meta = annotation_value(meta)?;
        let writer = unfinished(self.inner.as_mut())?;
        detached(py, || writer.append(&bytes, &meta))
    }

    /// Documents in the storage after this writer's appends.
    fn num_docs(&self) -> u64 {
        self.inner.as_ref().map_or(0, |w| w.num_docs())
    }
});
