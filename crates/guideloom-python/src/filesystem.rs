//! The Rust half of `guideloom.FileSystemDocument` / `guideloom.FileSystemStream`: shard
//! files managed one by one, for users who decide themselves which shard a worker writes.
//!
//! Shards are named as guideloom-storage names them (`<prefix>-<n:06>.glm`, prefix `shard`
//! by default; stream shards always `shard`). Writing goes through guideloom-storage's
//! `FileSystemDocument` / `FileSystemStream` into a local directory (create-only: a taken
//! name is `ShardExistsError`). Discovery and reading go through the storage's IO backend,
//! any of them, a Python one included: shards `0, 1, ...` are opened until the first the
//! backend reports missing (a `FileNotFoundError` from a Python backend ends discovery);
//! every other error is raised, not taken for the end.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use guideloom::format::{
    AsyncShard, ELEMENT_TYPES, Element, Error as FormatError, Expected, ReadOptions, ShardWriter,
    SyncShard, Value,
};
use guideloom::io::{Backend, Location};
use guideloom::storage::discovery::{discover_async, discover_sync, open_async, open_sync};
use guideloom::storage::{FileSystemDocument, FileSystemStream, shard_name};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{Error, raise};
use crate::format::{RecordFormat, annotation_value, from_value, raw_bytes};
use crate::runtime::{block_on, detached};
use crate::source::{Source, with_backend};
use crate::stream::by_element;

/// What the shards hold.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Documents of a record format.
    Documents(RecordFormat),
    /// A stream of the named element type and width.
    Stream(&'static str, u64),
}

impl Kind {
    fn expected(self) -> Expected {
        match self {
            Kind::Documents(format) => Expected::Documents(format.name().to_owned()),
            Kind::Stream(element, width) => Expected::Stream { element, width },
        }
    }
}

/// One open shard: a sync shard, or an async one driven on the runtime (HTTP).
#[derive(Debug, Clone)]
enum Shard {
    Sync(Arc<SyncShard>),
    Async(Arc<AsyncShard>),
}

impl Shard {
    fn name(&self) -> &str {
        match self {
            Shard::Sync(s) => s.name(),
            Shard::Async(s) => s.name(),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Shard::Sync(s) => s.len(),
            Shard::Async(s) => s.len(),
        }
    }

    fn data_len(&self) -> u64 {
        match self {
            Shard::Sync(s) => s.data_len(),
            Shard::Async(s) => s.data_len(),
        }
    }

    fn user(&self) -> &BTreeMap<String, Value> {
        match self {
            Shard::Sync(s) => &s.metadata().user,
            Shard::Async(s) => &s.metadata().user,
        }
    }

    fn read_many(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Vec<Bytes>> {
        match self {
            Shard::Sync(s) => detached(py, || Ok(s.read_many(&indices)?)),
            Shard::Async(s) => {
                let s = Arc::clone(s);
                block_on(py, async move { Ok(s.read_many(&indices).await?) })
            }
        }
    }

    fn read_data(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<Bytes> {
        match self {
            Shard::Sync(s) => detached(py, || Ok(s.read_data(offset, len)?)),
            Shard::Async(s) => {
                let s = Arc::clone(s);
                block_on(py, async move { Ok(s.read_data(offset, len).await?) })
            }
        }
    }
}

/// Shards `prefix-0, 1, ...` of `dir` through `backend`, up to the first missing one.
fn discover_through<B: Backend>(
    py: Python<'_>,
    backend: B,
    dir: B::Location,
    prefix: &str,
    expected: Expected,
) -> PyResult<Vec<Shard>> {
    let options = ReadOptions::default();
    if !backend.capabilities().sync {
        let prefix = prefix.to_owned();
        let shards = block_on(py, async move {
            Ok(discover_async(&backend, &dir, &prefix, 0, &options, &expected).await?)
        })?;
        return Ok(shards
            .into_iter()
            .map(|s| Shard::Async(Arc::new(s)))
            .collect());
    }
    let shards = detached(py, || {
        Ok(discover_sync(
            &backend, &dir, prefix, 0, &options, &expected,
        )?)
    })?;
    Ok(shards
        .into_iter()
        .map(|s| Shard::Sync(Arc::new(s)))
        .collect())
}

/// Shard `name` of `dir` through `backend`: `NotFoundError` when it does not exist.
fn open_through<B: Backend>(
    py: Python<'_>,
    backend: B,
    dir: B::Location,
    name: &str,
    expected: Expected,
) -> PyResult<Shard> {
    let options = ReadOptions::default();
    let location = dir.child(name);
    let missing = || -> Error {
        FormatError::NotFound {
            location: location.describe(),
        }
        .into()
    };
    if !backend.capabilities().sync {
        let at = location.clone();
        let found = block_on(py, async move {
            let found = open_async(&backend, &at, &options).await?;
            if let Some(s) = &found {
                s.expect(&expected)?;
            }
            Ok(found)
        })?;
        return Ok(Shard::Async(Arc::new(found.ok_or_else(missing)?)));
    }
    let found = detached(py, || {
        let found = open_sync(&backend, &location, &options)?;
        if let Some(s) = &found {
            s.expect(&expected)?;
        }
        Ok(found)
    })?;
    Ok(Shard::Sync(Arc::new(found.ok_or_else(missing)?)))
}

/// User metadata from a Python mapping of `str` keys to JSON-compatible values.
fn user_map(user: Option<&Bound<'_, PyDict>>) -> PyResult<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    if let Some(user) = user {
        for (key, value) in user.iter() {
            out.insert(key.extract::<String>()?, annotation_value(&value)?);
        }
    }
    Ok(out)
}

/// Starts stream shard `n` of element type `E`.
type CreateStream = fn(PathBuf, u64, BTreeMap<String, Value>) -> Result<ShardWriter, Error>;

fn create_stream<E: Element>(
    dir: PathBuf,
    n: u64,
    user: BTreeMap<String, Value>,
) -> Result<ShardWriter, Error> {
    Ok(FileSystemStream::<E>::new(dir).create_shard(n, user)?)
}

fn stream_creator<E: Element>() -> PyResult<CreateStream> {
    Ok(create_stream::<E>)
}

/// The shard files of a directory: naming, discovery, one shard's reader and writer.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawFileSystem {
    source: Source,
    prefix: String,
    kind: Kind,
}

#[pymethods]
impl RawFileSystem {
    /// Document shards of `format` (when `element` is `None`) or stream shards of `element`.
    #[new]
    #[pyo3(signature = (directory, *, format = None, element = None, prefix = None, read_interface = None))]
    fn new(
        directory: &Bound<'_, PyAny>,
        format: Option<&Bound<'_, PyAny>>,
        element: Option<String>,
        prefix: Option<String>,
        read_interface: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let kind = match element.as_deref() {
            None => Kind::Documents(RecordFormat::extract(format, RecordFormat::Pickle)?),
            Some(name) => {
                let (name, width) = ELEMENT_TYPES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .copied()
                    .ok_or_else(|| {
                        raise(
                            "InvalidArgumentError",
                            format!("unknown element type {name:?}"),
                        )
                    })?;
                Kind::Stream(name, width)
            }
        };
        let prefix = prefix.unwrap_or_else(|| "shard".to_owned());
        if matches!(kind, Kind::Stream(..)) && prefix != "shard" {
            return Err(raise(
                "InvalidArgumentError",
                "stream shards are always named shard-NNNNNN.glm",
            ));
        }
        if prefix.is_empty() || prefix.contains(['/', '\\']) {
            return Err(raise(
                "InvalidArgumentError",
                format!("shard prefix {prefix:?} must be a non-empty name without '/'"),
            ));
        }
        Ok(RawFileSystem {
            source: Source::new(directory, read_interface)?,
            prefix,
            kind,
        })
    }

    /// The file name of shard `n`.
    fn shard_name(&self, n: u64) -> String {
        shard_name(&self.prefix, n)
    }

    /// The finished shards, `(number, location, records, data_len)` each, up to the first
    /// missing one.
    fn discover(&self, py: Python<'_>) -> PyResult<Vec<(u64, String, u64, u64)>> {
        let expected = self.kind.expected();
        let prefix = self.prefix.as_str();
        let shards = with_backend!(&self.source, None, |backend, dir| discover_through(
            py, backend, dir, prefix, expected
        ))?;
        Ok(shards
            .iter()
            .enumerate()
            .map(|(n, s)| (n as u64, s.name().to_owned(), s.len(), s.data_len()))
            .collect())
    }

    /// Opens finished shard `n` (one tail read); `NotFoundError` if it does not exist.
    fn open_shard(&self, py: Python<'_>, n: u64) -> PyResult<RawShard> {
        let expected = self.kind.expected();
        let name = shard_name(&self.prefix, n);
        let shard = with_backend!(&self.source, None, |backend, dir| open_through(
            py, backend, dir, &name, expected
        ))?;
        Ok(RawShard {
            shard,
            number: n,
            format: match self.kind {
                Kind::Documents(f) => Some(f),
                Kind::Stream(..) => None,
            },
        })
    }

    /// Starts writing shard `n` into the local directory (created if needed), with `user`
    /// metadata; published at `finish()`.
    #[pyo3(signature = (n, user_metadata = None))]
    fn create_shard(
        &self,
        py: Python<'_>,
        n: u64,
        user_metadata: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RawShardWriter> {
        let dir = self.source.writable_dir()?;
        let user = user_map(user_metadata)?;
        let writer = match self.kind {
            Kind::Documents(format) => {
                let fs = FileSystemDocument::with_prefix(dir, &self.prefix, format.name());
                detached(py, || Ok(fs.create_shard(n, user)?))?
            }
            Kind::Stream(element, _) => {
                let create = by_element!(element, stream_creator())?;
                detached(py, || create(dir, n, user))?
            }
        };
        Ok(RawShardWriter {
            inner: Some(writer),
            number: n,
            kind: self.kind,
        })
    }

    /// The directory (or base URL, or the Python backend's path as text).
    #[getter]
    fn directory(&self) -> &str {
        self.source.describe()
    }

    /// The shard name prefix.
    #[getter]
    fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// One finished shard: records by local index, or the data region of a stream shard.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawShard {
    shard: Shard,
    number: u64,
    format: Option<RecordFormat>,
}

#[pymethods]
impl RawShard {
    /// Records (documents, or a stream shard's chunks).
    fn len(&self) -> u64 {
        self.shard.len()
    }

    /// Bytes in the data region.
    fn data_len(&self) -> u64 {
        self.shard.data_len()
    }

    /// The shard's number.
    #[getter]
    fn number(&self) -> u64 {
        self.number
    }

    /// The shard's location, as its backend describes it.
    #[getter]
    fn location(&self) -> &str {
        self.shard.name()
    }

    /// The user metadata written with the shard.
    fn user_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, value) in self.shard.user() {
            dict.set_item(key, from_value(py, value)?)?;
        }
        Ok(dict)
    }

    /// Records `indices` as zero-copy buffers (one batched read).
    fn read_records(
        &self,
        py: Python<'_>,
        indices: Vec<u64>,
    ) -> PyResult<Vec<pyo3_bytes::PyBytes>> {
        let records = self.shard.read_many(py, indices)?;
        Ok(records.into_iter().map(pyo3_bytes::PyBytes::new).collect())
    }

    /// Documents `indices`, decoded with the shard's format (one batched read).
    fn read_documents<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let format = self
            .format
            .ok_or_else(|| raise("UnsupportedError", "a stream shard holds no documents"))?;
        let list = PyList::empty(py);
        for record in self.shard.read_many(py, indices)? {
            list.append(format.decode(py, record)?)?;
        }
        Ok(list)
    }

    /// `len` bytes at `offset` of the data region (a stream shard's elements), no copy.
    fn read_data(&self, py: Python<'_>, offset: u64, len: u64) -> PyResult<pyo3_bytes::PyBytes> {
        Ok(pyo3_bytes::PyBytes::new(
            self.shard.read_data(py, offset, len)?,
        ))
    }
}

/// Writes one shard; nothing appears under its name until `finish()`.
#[pyclass(module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawShardWriter {
    inner: Option<ShardWriter>,
    number: u64,
    kind: Kind,
}

impl RawShardWriter {
    fn writer(&mut self) -> PyResult<&mut ShardWriter> {
        self.inner
            .as_mut()
            .ok_or_else(|| raise("GuideloomError", "the shard writer is finished"))
    }
}

#[pymethods]
impl RawShardWriter {
    /// Appends one record (a document, or a run of little-endian elements); returns its
    /// local index.
    fn append(&mut self, py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<u64> {
        let bytes = match self.kind {
            Kind::Documents(format) => format.encode(record)?,
            Kind::Stream(_, width) => {
                let bytes = raw_bytes(record)?;
                if !(bytes.len() as u64).is_multiple_of(width) {
                    return Err(raise(
                        "InvalidArgumentError",
                        format!(
                            "{} bytes are not a whole number of {width}-byte elements",
                            bytes.len()
                        ),
                    ));
                }
                bytes
            }
        };
        let writer = self.writer()?;
        detached(py, || Ok(writer.append(&bytes)?))
    }

    /// Records appended so far.
    fn len(&mut self) -> PyResult<u64> {
        Ok(self.writer()?.records())
    }

    /// Payload bytes appended so far.
    fn data_len(&mut self) -> PyResult<u64> {
        Ok(self.writer()?.data_len())
    }

    /// The shard's number.
    #[getter]
    fn number(&self) -> u64 {
        self.number
    }

    /// Publishes the shard; returns `(path, records, size in bytes)`.
    fn finish(&mut self, py: Python<'_>) -> PyResult<(String, u64, u64)> {
        let writer = self
            .inner
            .take()
            .ok_or_else(|| raise("GuideloomError", "the shard writer is finished"))?;
        let info = detached(py, || Ok(writer.finish()?))?;
        Ok((info.path.display().to_string(), info.records, info.size))
    }

    /// Drops the writer unfinished: its temporary file is deleted, nothing is published.
    fn abort(&mut self) {
        self.inner.take();
    }
}
