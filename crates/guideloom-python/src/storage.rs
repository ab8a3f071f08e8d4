//! `DocumentStorage` from Python: a directory of numbered shards written by a sync writer and
//! read by sync or async readers over a chosen IO backend (`guideloom.io`).
//!
//! Records are encoded in Python's format (CBOR, pickle, raw) and stored through the format
//! crate's `DocumentStorage` with a [`Stored`] format that carries the bytes as they are and
//! the format's name into the shard metadata, so a reader refuses shards of another format.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use guideloom::format::Format;
use guideloom::io::{Backend, BoxError, SeekIo};
use guideloom::storage::{
    AsyncDocumentReader, DocumentReader as RustReader, DocumentStorage as RustStorage,
    DocumentWriter as RustWriter, WriterOptions,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice};

use crate::aio::awaitable;
use crate::format::RecordFormat;
use crate::options::writer_options;
use crate::runtime::{block_on, detached};
use crate::slices::{PyIndex, Slot, index_error, resolve_each, slice_indices};
use crate::source::{BoxFuture, Source, running_loop, with_backend};
use crate::stream::unfinished;

/// How many records an iterator reads at a time.
const ITER_CHUNK: u64 = 1024;

/// Records as bytes already encoded by Python, under the Python format's name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored(RecordFormat);

impl Format for Stored {
    type Record = Bytes;

    fn name(&self) -> &str {
        self.0.name()
    }

    fn encode(&self, record: &Bytes, out: &mut Vec<u8>) -> Result<(), BoxError> {
        out.extend_from_slice(record);
        Ok(())
    }

    fn decode(&self, bytes: Bytes) -> Result<Bytes, BoxError> {
        Ok(bytes)
    }

    fn encoded_ref<'a>(&self, record: &'a Bytes) -> Option<&'a [u8]> {
        Some(record)
    }
}

/// Documents (one record each) in numbered shards under a directory.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct DocumentStorage {
    source: Source,
    format: RecordFormat,
    writer_options: WriterOptions,
}

impl DocumentStorage {
    fn storage<B: Backend>(&self, backend: B, dir: B::Location) -> RustStorage<Stored, B> {
        RustStorage::new(dir, Stored(self.format), backend)
    }

    /// A sync reader through `backend`: its sync readers, or its async ones on the runtime.
    fn sync_through<B: Backend>(
        &self,
        py: Python<'_>,
        backend: B,
        dir: B::Location,
    ) -> PyResult<ReaderImpl> {
        let sync = backend.capabilities().sync;
        let storage = self.storage(backend, dir);
        if !sync {
            let reader = block_on(py, async move { Ok(storage.async_reader().await?) })?;
            return Ok(ReaderImpl::Async(Arc::new(reader)));
        }
        detached(py, || {
            Ok(ReaderImpl::Sync(Arc::new(storage.sync_reader()?)))
        })
    }

    fn open_sync(&self, py: Python<'_>) -> PyResult<ReaderImpl> {
        with_backend!(&self.source, None, |backend, dir| self
            .sync_through(py, backend, dir))
    }

    /// Opening an async reader (`event_loop`: where a Python backend's coroutines run).
    fn open_async_future(
        &self,
        event_loop: Option<Arc<Py<PyAny>>>,
    ) -> PyResult<BoxFuture<AsyncDocumentReader<Stored>>> {
        Ok(with_backend!(&self.source, event_loop, |backend, dir| {
            let storage = self.storage(backend, dir);
            Box::pin(async move { Ok(storage.async_reader().await?) })
        }))
    }
}

#[pymethods]
impl DocumentStorage {
    #[new]
    #[pyo3(signature = (directory, format = None, *, read_interface = None, max_shard_records = None, max_shard_bytes = None))]
    fn new(
        directory: &Bound<'_, PyAny>,
        format: Option<&Bound<'_, PyAny>>,
        read_interface: Option<&Bound<'_, PyAny>>,
        max_shard_records: Option<u64>,
        max_shard_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let writer_options = writer_options(max_shard_records, max_shard_bytes, None);
        let source = Source::new(directory, read_interface)?;
        Ok(DocumentStorage {
            source,
            format: RecordFormat::extract(format, RecordFormat::Pickle)?,
            writer_options,
        })
    }

    /// A writer appending documents 0, 1, 2, ... (a context manager: leaving the block
    /// finishes the last shard; leaving it by an exception discards the unfinished shard).
    fn sync_writer(&self, py: Python<'_>) -> PyResult<DocumentWriter> {
        let dir = self.source.writable_dir()?;
        let storage = self
            .storage(SeekIo::new(), dir)
            .with_writer_options(self.writer_options.clone());
        let writer = detached(py, || Ok(storage.sync_writer()?))?;
        Ok(DocumentWriter {
            inner: Some(writer),
            format: self.format,
        })
    }

    /// A reader over the shards finished now (one tail read per shard).
    fn sync_reader(&self, py: Python<'_>) -> PyResult<DocumentReader> {
        Ok(DocumentReader {
            inner: Slot::new(self.open_sync(py)?),
            format: self.format,
        })
    }

    /// An async reader (`async with storage.async_reader() as reader`), opened on entry.
    fn async_reader(slf: Bound<'_, Self>) -> AsyncDocumentReaderContext {
        AsyncDocumentReaderContext {
            storage: slf.unbind(),
            opened: Arc::default(),
        }
    }

    /// The directory (or base URL).
    #[getter]
    fn directory(&self) -> &str {
        self.source.describe()
    }
}

/// Writes documents into a storage's shards.
#[pyclass(module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct DocumentWriter {
    inner: Option<RustWriter<Stored>>,
    format: RecordFormat,
}

impl DocumentWriter {
    fn writer(&mut self) -> PyResult<&mut RustWriter<Stored>> {
        unfinished(self.inner.as_mut())
    }
}

#[pymethods]
impl DocumentWriter {
    /// Appends document `index` (must be the next one: 0, 1, 2, ...).
    fn append(&mut self, py: Python<'_>, index: u64, document: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = self.format.encode(document)?;
        let writer = self.writer()?;
        detached(py, || Ok(writer.append(index, &bytes)?))
    }

    /// Appends the next document; returns its index.
    fn push(&mut self, py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<u64> {
        let bytes = self.format.encode(document)?;
        let writer = self.writer()?;
        detached(py, || Ok(writer.push(&bytes)?))
    }

    /// Documents written so far.
    fn __len__(&self) -> usize {
        self.inner
            .as_ref()
            .map_or(0, |w| usize::try_from(w.len()).unwrap_or(usize::MAX))
    }

    /// Finishes the last shard; returns the number of shards written by this writer.
    fn finish(&mut self, py: Python<'_>) -> PyResult<usize> {
        let writer = unfinished(self.inner.take())?;
        detached(py, || Ok(writer.finish()?.len()))
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (kind, _value, _traceback))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if kind.is_some_and(|k| !k.is_none()) {
            // Dropping an unfinished writer discards its unfinished shard.
            self.inner.take();
        } else if self.inner.is_some() {
            self.finish(py)?;
        }
        Ok(false)
    }
}

/// A sync reader's engine: guideloom-storage's sync reader (local backends), or its async
/// reader driven on the process runtime (HTTP).
#[derive(Debug, Clone)]
enum ReaderImpl {
    Sync(Arc<RustReader<Stored>>),
    Async(Arc<AsyncDocumentReader<Stored>>),
}

impl ReaderImpl {
    fn len(&self) -> u64 {
        match self {
            ReaderImpl::Sync(r) => r.len(),
            ReaderImpl::Async(r) => r.len(),
        }
    }

    fn read(&self, py: Python<'_>, i: u64) -> PyResult<Bytes> {
        match self {
            ReaderImpl::Sync(r) => detached(py, || Ok(r.read_raw(i)?)),
            ReaderImpl::Async(r) => {
                let r = Arc::clone(r);
                block_on(py, async move { Ok(r.read_raw(i).await?) })
            }
        }
    }

    fn read_many(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Vec<Bytes>> {
        match self {
            ReaderImpl::Sync(r) => detached(py, || Ok(r.read_many_raw(&indices)?)),
            ReaderImpl::Async(r) => {
                let r = Arc::clone(r);
                block_on(py, async move { Ok(r.read_many(&indices).await?) })
            }
        }
    }
}

/// Python index `i` (negative from the end) as a record index of a storage of `len`.
fn resolve_index(i: &PyIndex, len: u64) -> PyResult<u64> {
    i.resolve(len)
        .ok_or_else(|| Python::attach(|py| index_error(py, i, len, "document", "storage")))
}

fn resolve_indices(indices: &Bound<'_, PyAny>, len: u64) -> PyResult<Vec<u64>> {
    resolve_each(indices, |i| resolve_index(i, len))
}

fn decode_list<'py>(
    py: Python<'py>,
    format: RecordFormat,
    records: Vec<Bytes>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for r in records {
        list.append(format.decode(py, r)?)?;
    }
    Ok(list)
}

/// Reads documents by index: `read(i)`, `read_many(indices)`, `len()`, `[i]`, `[a:b]`,
/// iteration. A context manager; `close()` (or leaving the block) releases the shards.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct DocumentReader {
    inner: Slot<ReaderImpl>,
    format: RecordFormat,
}

#[pymethods]
impl DocumentReader {
    /// Document `index`, decoded.
    fn read<'py>(&self, py: Python<'py>, index: PyIndex) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.get()?;
        let bytes = engine.read(py, resolve_index(&index, engine.len())?)?;
        self.format.decode(py, bytes)
    }

    /// Documents at `indices` (any order), decoded: one batched read per shard touched.
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let engine = self.inner.get()?;
        let indices = resolve_indices(indices, engine.len())?;
        decode_list(py, self.format, engine.read_many(py, indices)?)
    }

    /// The number of documents.
    fn len(&self) -> PyResult<u64> {
        Ok(self.inner.get()?.len())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(usize::try_from(self.inner.get()?.len()).unwrap_or(usize::MAX))
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.inner.get()?;
        if let Ok(slice) = key.cast::<PySlice>() {
            let indices = slice_indices(slice, engine.len(), "storage")?.to_vec();
            return Ok(decode_list(py, self.format, engine.read_many(py, indices)?)?.into_any());
        }
        let i: PyIndex = key.extract().map_err(|e: PyErr| {
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err("storage indices must be integers or slices")
            } else {
                e
            }
        })?;
        self.read(py, i)
    }

    fn __iter__(slf: Bound<'_, Self>) -> PyResult<DocumentIter> {
        let engine = slf.get().inner.get()?;
        Ok(DocumentIter {
            end: engine.len(),
            engine,
            format: slf.get().format,
            next: 0,
            buffer: VecDeque::new(),
        })
    }

    /// Releases the shards; later reads raise.
    fn close(&self) {
        self.inner.close();
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}

/// In-order iteration, `ITER_CHUNK` documents per batched read.
#[pyclass(module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct DocumentIter {
    engine: ReaderImpl,
    format: RecordFormat,
    next: u64,
    end: u64,
    buffer: VecDeque<Bytes>,
}

#[pymethods]
impl DocumentIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.buffer.is_empty() && self.next < self.end {
            let stop = self.end.min(self.next.saturating_add(ITER_CHUNK));
            let records = self.engine.read_many(py, (self.next..stop).collect())?;
            self.next = stop;
            self.buffer.extend(records);
        }
        match self.buffer.pop_front() {
            Some(r) => Ok(Some(self.format.decode(py, r)?)),
            None => Ok(None),
        }
    }
}

/// `async with storage.async_reader() as reader:` — opens the reader on entry and closes it
/// on exit (later reads raise, as a closed sync reader's do).
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct AsyncDocumentReaderContext {
    storage: Py<DocumentStorage>,
    /// The reader `__aenter__` opened, for `__aexit__` to close.
    opened: Arc<std::sync::Mutex<Option<Py<AsyncDocumentReaderPy>>>>,
}

#[pymethods]
impl AsyncDocumentReaderContext {
    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let storage = self.storage.bind(py).get();
        let format = storage.format;
        let opening = storage.open_async_future(Some(running_loop(py)?))?;
        let future = async move {
            let reader = opening.await?;
            Ok((reader, format))
        };
        let opened = Arc::clone(&self.opened);
        awaitable(py, future, move |py, (reader, format)| {
            let reader = Py::new(
                py,
                AsyncDocumentReaderPy {
                    inner: Slot::new(Arc::new(reader)),
                    format,
                },
            )?;
            let previous = opened
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .replace(reader.clone_ref(py));
            if let Some(previous) = previous {
                previous.get().close();
            }
            Ok(reader.into_any())
        })
    }

    #[pyo3(signature = (*_args))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _args: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(reader) = opened {
            reader.get().close();
        }
        awaitable(py, async { Ok(()) }, |py, ()| Ok(py.None()))
    }
}

/// An async reader: `await reader.read(i)`, `await reader.read_many(indices)`, `len()`,
/// `close()` (later reads raise).
#[pyclass(frozen, name = "AsyncDocumentReader", module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct AsyncDocumentReaderPy {
    inner: Slot<Arc<AsyncDocumentReader<Stored>>>,
    format: RecordFormat,
}

#[pymethods]
impl AsyncDocumentReaderPy {
    /// Document `index`, decoded (an awaitable).
    fn read<'py>(&self, py: Python<'py>, index: PyIndex) -> PyResult<Bound<'py, PyAny>> {
        let reader = self.inner.get()?;
        let i = resolve_index(&index, reader.len())?;
        let format = self.format;
        awaitable(
            py,
            async move { Ok(reader.read_raw(i).await?) },
            move |py, bytes| Ok(format.decode(py, bytes)?.unbind()),
        )
    }

    /// Documents at `indices`, decoded (an awaitable).
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let reader = self.inner.get()?;
        let indices = resolve_indices(indices, reader.len())?;
        let format = self.format;
        awaitable(
            py,
            async move { Ok(reader.read_many(&indices).await?) },
            move |py, records| Ok(decode_list(py, format, records)?.into_any().unbind()),
        )
    }

    /// The number of documents.
    fn len(&self) -> PyResult<u64> {
        Ok(self.inner.get()?.len())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(usize::try_from(self.inner.get()?.len()).unwrap_or(usize::MAX))
    }

    /// Releases the shards; later reads raise (leaving the `async with` block closes it).
    fn close(&self) {
        self.inner.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_records_keep_their_bytes_and_format_name() {
        let f = Stored(RecordFormat::Pickle);
        assert_eq!(f.name(), "pickle");
        let record = Bytes::from_static(b"\x80\x05N.");
        let mut out = Vec::new();
        f.encode(&record, &mut out).unwrap();
        assert_eq!(out, record);
        let decoded = f.decode(record.clone()).unwrap();
        assert_eq!(decoded.as_ptr(), record.as_ptr());
        assert_eq!(f.encoded_ref(&record), Some(&record[..]));
    }
}
