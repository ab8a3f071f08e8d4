//! `DocumentStorage` from Python: a directory of numbered shards written by a sync writer and
//! read by sync or async readers over a chosen IO backend (`guideloom.io`).
//!
//! Records are encoded in Python's format (CBOR, pickle, raw) and stored through the format
//! crate's `DocumentStorage` with a [`Stored`] format that carries the bytes as they are and
//! the format's name into the shard metadata, so a reader refuses shards of another format.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use guideloom::format::{
    AsyncDocumentReader, DocumentReader as RustReader, DocumentStorage as RustStorage,
    DocumentWriter as RustWriter, Format, WriterOptions,
};
use guideloom::io::http::{HttpIo, HttpPath};
use guideloom::io::{Backend, BoxError, Location, MmapIo, PreadIo, SeekIo};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList, PySlice};

use crate::aio::awaitable;
use crate::errors::{Error, raise};
use crate::format::RecordFormat;
use crate::io::{Interface, interface};
use crate::options::root_uri;
use crate::pybackend::{PyBackend, PyLocation};
use crate::runtime::{block_on, detached};

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
    directory: String,
    format: RecordFormat,
    interface: Interface,
    writer_options: WriterOptions,
    /// A backend written in Python and the directory in its own path type.
    custom: Option<(Arc<Py<PyAny>>, PyLocation)>,
}

impl DocumentStorage {
    fn local<B: Backend<Location = PathBuf>>(&self, backend: B) -> RustStorage<Stored, B> {
        RustStorage::new(PathBuf::from(&self.directory), Stored(self.format), backend)
            .with_writer_options(self.writer_options.clone())
    }

    fn http(&self) -> Result<RustStorage<Stored, HttpIo>, Error> {
        let backend = HttpIo::new(&self.directory)?;
        Ok(RustStorage::new(
            HttpPath::root(),
            Stored(self.format),
            backend,
        ))
    }

    fn custom(
        &self,
        event_loop: Option<Arc<Py<PyAny>>>,
    ) -> PyResult<RustStorage<Stored, PyBackend>> {
        let (backend, directory) = self
            .custom
            .as_ref()
            .ok_or_else(|| raise("InternalError", "a Python backend without its object"))?;
        Ok(RustStorage::new(
            directory.clone(),
            Stored(self.format),
            PyBackend::new(Arc::clone(backend), event_loop),
        ))
    }

    fn open_sync(&self, py: Python<'_>) -> PyResult<ReaderImpl> {
        if self.interface == Interface::Http {
            return Ok(ReaderImpl::Async(Arc::new(block_on(
                py,
                self.open_async_future(None)?,
            )?)));
        }
        if self.interface == Interface::Python {
            let storage = self.custom(None)?;
            return detached(py, || {
                Ok(ReaderImpl::Sync(Arc::new(storage.sync_reader()?)))
            });
        }
        detached(py, || {
            let reader = match self.interface {
                Interface::Pread => self.local(PreadIo::new()).sync_reader()?,
                Interface::Mmap => self.local(MmapIo::new()).sync_reader()?,
                _ => self.local(SeekIo::new()).sync_reader()?,
            };
            Ok(ReaderImpl::Sync(Arc::new(reader)))
        })
    }

    /// Opening an async reader (`event_loop`: where a Python backend's coroutines run).
    fn open_async_future(
        &self,
        event_loop: Option<Arc<Py<PyAny>>>,
    ) -> PyResult<
        impl std::future::Future<Output = Result<AsyncDocumentReader<Stored>, Error>> + Send + 'static,
    > {
        enum Any {
            Seek(RustStorage<Stored, SeekIo>),
            Pread(RustStorage<Stored, PreadIo>),
            Mmap(RustStorage<Stored, MmapIo>),
            Http(RustStorage<Stored, HttpIo>),
            Python(RustStorage<Stored, PyBackend>),
        }
        let storage = match self.interface {
            Interface::Seek => Any::Seek(self.local(SeekIo::new())),
            Interface::Pread => Any::Pread(self.local(PreadIo::new())),
            Interface::Mmap => Any::Mmap(self.local(MmapIo::new())),
            Interface::Http => Any::Http(self.http()?),
            Interface::Python => Any::Python(self.custom(event_loop)?),
        };
        Ok(async move {
            Ok(match storage {
                Any::Seek(s) => s.async_reader().await?,
                Any::Pread(s) => s.async_reader().await?,
                Any::Mmap(s) => s.async_reader().await?,
                Any::Http(s) => s.async_reader().await?,
                Any::Python(s) => s.async_reader().await?,
            })
        })
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
        let mut writer_options = WriterOptions::default();
        if let Some(n) = max_shard_records {
            writer_options = writer_options.max_shard_records(n);
        }
        if let Some(n) = max_shard_bytes {
            writer_options = writer_options.max_shard_bytes(n);
        }
        let interface = interface(read_interface)?;
        let (text, custom) = match (interface, read_interface) {
            (Interface::Python, Some(backend)) => {
                let location = PyLocation::new(directory)?;
                (
                    location.describe(),
                    Some((Arc::new(backend.clone().unbind()), location)),
                )
            }
            _ => (root_uri(directory)?, None),
        };
        Ok(DocumentStorage {
            directory: text,
            format: RecordFormat::extract(format, RecordFormat::Pickle)?,
            interface,
            writer_options,
            custom,
        })
    }

    /// A writer appending documents 0, 1, 2, ... (a context manager: leaving the block
    /// finishes the last shard; leaving it by an exception discards the unfinished shard).
    fn sync_writer(&self, py: Python<'_>) -> PyResult<DocumentWriter> {
        if matches!(self.interface, Interface::Http | Interface::Python) {
            return Err(raise(
                "UnsupportedError",
                "this storage reads through HttpIO or a Python backend, which are read-only: \
                 write to the local directory behind it",
            ));
        }
        let writer = detached(py, || Ok(self.local(SeekIo::new()).sync_writer()?))?;
        Ok(DocumentWriter {
            inner: Some(writer),
            format: self.format,
        })
    }

    /// A reader over the shards finished now (one tail read per shard).
    fn sync_reader(&self, py: Python<'_>) -> PyResult<DocumentReader> {
        Ok(DocumentReader {
            inner: Mutex::new(Some(self.open_sync(py)?)),
            format: self.format,
        })
    }

    /// An async reader (`async with storage.async_reader() as reader`), opened on entry.
    fn async_reader(slf: Bound<'_, Self>) -> AsyncDocumentReaderContext {
        AsyncDocumentReaderContext {
            storage: slf.unbind(),
        }
    }

    /// The directory (or base URL).
    #[getter]
    fn directory(&self) -> &str {
        &self.directory
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
        self.inner
            .as_mut()
            .ok_or_else(|| raise("GuideloomError", "the writer is finished"))
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
        let writer = self
            .inner
            .take()
            .ok_or_else(|| raise("GuideloomError", "the writer is finished"))?;
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

/// A sync reader's engine: the format crate's sync reader (local backends), or its async
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

/// Python indices (negative from the end) as record indices of a storage of `len`.
fn resolve_index(i: i64, len: u64) -> PyResult<u64> {
    let resolved = if i < 0 {
        i128::from(i) + i128::from(len)
    } else {
        i128::from(i)
    };
    match u64::try_from(resolved) {
        Ok(index) if index < len => Ok(index),
        _ => Err(raise(
            "IndexOutOfRangeError",
            format!("document {i} is out of range for a storage of {len} documents"),
        )),
    }
}

fn resolve_indices(indices: &Bound<'_, PyAny>, len: u64) -> PyResult<Vec<u64>> {
    PyIterator::from_object(indices)?
        .map(|i| resolve_index(i?.extract::<i64>()?, len))
        .collect()
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
    inner: Mutex<Option<ReaderImpl>>,
    format: RecordFormat,
}

impl DocumentReader {
    fn engine(&self) -> PyResult<ReaderImpl> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| raise("GuideloomError", "the reader is closed"))
    }
}

#[pymethods]
impl DocumentReader {
    /// Document `index`, decoded.
    fn read<'py>(&self, py: Python<'py>, index: i64) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.engine()?;
        let bytes = engine.read(py, resolve_index(index, engine.len())?)?;
        self.format.decode(py, bytes)
    }

    /// Documents at `indices` (any order), decoded: one batched read per shard touched.
    fn read_many<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let engine = self.engine()?;
        let indices = resolve_indices(indices, engine.len())?;
        decode_list(py, self.format, engine.read_many(py, indices)?)
    }

    /// The number of documents.
    fn len(&self) -> PyResult<u64> {
        Ok(self.engine()?.len())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(usize::try_from(self.engine()?.len()).unwrap_or(usize::MAX))
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.engine()?;
        if let Ok(slice) = key.cast::<PySlice>() {
            let len = isize::try_from(engine.len())
                .map_err(|_| raise("GuideloomError", "the storage is too long to slice"))?;
            let ix = slice.indices(len)?;
            let indices: Vec<u64> = (0..ix.slicelength)
                .map(|k| (ix.start + k as isize * ix.step) as u64)
                .collect();
            return Ok(decode_list(py, self.format, engine.read_many(py, indices)?)?.into_any());
        }
        let i: i64 = key
            .extract()
            .map_err(|_| PyTypeError::new_err("storage indices must be integers or slices"))?;
        self.read(py, i)
    }

    fn __iter__(slf: Bound<'_, Self>) -> PyResult<DocumentIter> {
        let engine = slf.get().engine()?;
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
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
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

/// `async with storage.async_reader() as reader:` — opens the reader on entry.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct AsyncDocumentReaderContext {
    storage: Py<DocumentStorage>,
}

#[pymethods]
impl AsyncDocumentReaderContext {
    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let storage = self.storage.bind(py).get();
        let format = storage.format;
        let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
        let opening = storage.open_async_future(Some(Arc::new(event_loop.unbind())))?;
        let future = async move {
            let reader = opening.await?;
            Ok((reader, format))
        };
        awaitable(py, future, |py, (reader, format)| {
            Ok(Py::new(
                py,
                AsyncDocumentReaderPy {
                    inner: Arc::new(reader),
                    format,
                },
            )?
            .into_any())
        })
    }

    #[pyo3(signature = (*_args))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _args: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, async { Ok(()) }, |py, ()| Ok(py.None()))
    }
}

/// An async reader: `await reader.read(i)`, `await reader.read_many(indices)`, `len()`.
#[pyclass(frozen, name = "AsyncDocumentReader", module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct AsyncDocumentReaderPy {
    inner: Arc<AsyncDocumentReader<Stored>>,
    format: RecordFormat,
}

#[pymethods]
impl AsyncDocumentReaderPy {
    /// Document `index`, decoded (an awaitable).
    fn read<'py>(&self, py: Python<'py>, index: i64) -> PyResult<Bound<'py, PyAny>> {
        let i = resolve_index(index, self.inner.len())?;
        let reader = Arc::clone(&self.inner);
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
        let indices = resolve_indices(indices, self.inner.len())?;
        let reader = Arc::clone(&self.inner);
        let format = self.format;
        awaitable(
            py,
            async move { Ok(reader.read_many(&indices).await?) },
            move |py, records| Ok(decode_list(py, format, records)?.into_any().unbind()),
        )
    }

    /// The number of documents.
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.inner.len()).unwrap_or(usize::MAX)
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

    #[test]
    fn negative_indices_count_from_the_end_and_the_end_is_refused() {
        assert_eq!(resolve_index(-1, 10).ok(), Some(9));
        assert_eq!(resolve_index(0, 10).ok(), Some(0));
        // Out of range builds a Python exception, which needs an interpreter: only check
        // that the in-range arithmetic never wraps.
        assert_eq!(
            resolve_index(i64::MIN + 1, u64::MAX).ok(),
            Some(u64::MAX - (1 << 63) + 1)
        );
    }
}
