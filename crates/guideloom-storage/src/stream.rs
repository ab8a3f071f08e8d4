//! [`StreamStorage`]: an append-only stream of fixed-width elements, sliced across shards.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_io::{Backend, Location, SeekIo};

use guideloom_format::{
    AsyncShard, Element, Elements, Error, Expected, ReadOptions, Result, ShardInfo, ShardTable,
    ShardWriter, SyncShard,
};

use crate::discovery::{FileSystemStream, SHARD_PREFIX, discover_async, discover_sync};
use crate::options::WriterOptions;

/// A directory of stream shards of element `E`, read through backend `B`.
///
/// Each shard's records are chunks of elements (default 8 KiB each, each with a CRC32C);
/// the stream is the concatenation of all shards. `len` and offsets count elements.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use guideloom_storage::StreamStorage;
/// # let tmp = tempfile::tempdir()?;
/// # let dir = tmp.path().join("tokens");
/// let storage = StreamStorage::<u32>::local(dir);
/// let mut w = storage.sync_writer()?;
/// w.append(&[1, 2, 3])?;
/// w.append(&[4, 5])?;
/// w.finish()?;
///
/// let r = storage.sync_reader()?;
/// assert_eq!(r.len(), 5);
/// assert_eq!(&*r.read(1, 3)?, &[2, 3, 4]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StreamStorage<E: Element, B: Backend = SeekIo> {
    dir: B::Location,
    backend: Arc<B>,
    read_options: ReadOptions,
    writer_options: WriterOptions,
    _element: PhantomData<fn() -> E>,
}

impl<E: Element, B: Backend> StreamStorage<E, B> {
    /// A stream in `dir` read through `backend`.
    pub fn new(dir: B::Location, backend: B) -> Self {
        StreamStorage {
            dir,
            backend: Arc::new(backend),
            read_options: ReadOptions::default(),
            writer_options: WriterOptions::default(),
            _element: PhantomData,
        }
    }

    /// Sets how shards are read.
    pub fn with_read_options(mut self, options: ReadOptions) -> Self {
        self.read_options = options;
        self
    }

    /// Sets how shards are written (including the chunk size).
    pub fn with_writer_options(mut self, options: WriterOptions) -> Self {
        self.writer_options = options;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &B::Location {
        &self.dir
    }

    /// A synchronous reader over the shards finished now (empty if there are none).
    pub fn sync_reader(&self) -> Result<StreamReader<E>> {
        let shards = discover_sync(
            &*self.backend,
            &self.dir,
            SHARD_PREFIX,
            0,
            &self.read_options,
            &Expected::stream::<E>(),
        )?;
        StreamReader::new(self.dir.describe(), shards)
    }

    /// An asynchronous reader over the shards finished now.
    pub async fn async_reader(&self) -> Result<AsyncStreamReader<E>> {
        let shards = discover_async(
            &*self.backend,
            &self.dir,
            SHARD_PREFIX,
            0,
            &self.read_options,
            &Expected::stream::<E>(),
        )
        .await?;
        AsyncStreamReader::new(shards)
    }
}

impl<E: Element> StreamStorage<E, SeekIo> {
    /// A stream in local directory `dir`, read with the default backend, [`SeekIo`].
    pub fn local(dir: impl Into<PathBuf>) -> Self {
        Self::new(dir.into(), SeekIo::new())
    }
}

impl<E: Element, B: Backend<Location = PathBuf>> StreamStorage<E, B> {
    /// A writer appending after the elements already stored (creating the directory).
    pub fn sync_writer(&self) -> Result<StreamWriter<E>> {
        let fs = FileSystemStream::<E>::new(self.dir.clone());
        let existing = fs.discover()?;
        let chunk = self.writer_options.chunk_elements(E::WIDTH) * E::WIDTH;
        Ok(StreamWriter {
            next_shard: existing.len() as u64,
            len: existing.iter().map(|s| s.data_len / E::WIDTH).sum(),
            fs,
            options: self.writer_options.clone(),
            chunk_bytes: usize::try_from(chunk).unwrap_or(usize::MAX),
            chunk: Vec::new(),
            current: None,
            failed: false,
            written: Vec::new(),
        })
    }
}

/// Appends elements to a [`StreamStorage`]. Memory: one chunk plus the shard index.
///
/// # Finishing and dropping
/// [`finish`](StreamWriter::finish) writes the last partial chunk and publishes the last
/// shard. Dropping without finishing **discards** the unfinished shard (and chunk); shards
/// already rolled over stay published.
#[derive(Debug)]
pub struct StreamWriter<E: Element> {
    fs: FileSystemStream<E>,
    options: WriterOptions,
    chunk_bytes: usize,
    chunk: Vec<u8>,
    current: Option<ShardWriter>,
    next_shard: u64,
    len: u64,
    failed: bool,
    written: Vec<ShardInfo>,
}

impl<E: Element> StreamWriter<E> {
    /// Appends elements to the stream.
    pub fn append(&mut self, elements: &[E]) -> Result<()> {
        if self.failed {
            return Err(Error::WriterFailed {
                dir: self.fs.dir().to_owned(),
            });
        }
        let width = usize::try_from(E::WIDTH).unwrap_or(1);
        let per_chunk = self.chunk_bytes / width;
        let mut rest = elements;
        while !rest.is_empty() {
            let room = per_chunk - self.chunk.len() / width;
            let (now, later) = rest.split_at(room.min(rest.len()));
            E::extend_le(now, &mut self.chunk);
            self.len += now.len() as u64;
            rest = later;
            if self.chunk.len() >= self.chunk_bytes {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        let result = self.try_flush_chunk();
        if result.is_err() {
            self.failed = true;
            self.current = None;
        }
        result
    }

    fn try_flush_chunk(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let next = self.chunk.len() as u64;
        if let Some(cur) = &self.current
            && self.options.must_roll(cur.records(), cur.data_len(), next)
            && let Some(cur) = self.current.take()
        {
            self.written.push(cur.finish()?);
        }
        let cur = match &mut self.current {
            Some(cur) => cur,
            None => {
                let w = self
                    .fs
                    .create_shard(self.next_shard, self.options.user().clone())?;
                self.next_shard += 1;
                self.current.insert(w)
            }
        };
        cur.append(&self.chunk)?;
        self.chunk.clear();
        Ok(())
    }

    /// Elements in the stream after this writer's appends.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `true` when the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the last chunk, publishes the last shard; returns the shards published.
    pub fn finish(mut self) -> Result<Vec<ShardInfo>> {
        if self.failed {
            return Err(Error::WriterFailed {
                dir: self.fs.dir().to_owned(),
            });
        }
        self.flush_chunk()?;
        if let Some(cur) = self.current.take() {
            self.written.push(cur.finish()?);
        }
        Ok(std::mem::take(&mut self.written))
    }
}

impl<E: Element> Drop for StreamWriter<E> {
    fn drop(&mut self) {
        if self.current.is_some() || !self.chunk.is_empty() {
            tracing::warn!(
                dir = %self.fs.dir().display(),
                "stream writer dropped without finish: unfinished shard discarded"
            );
        }
    }
}

/// When elements `offset .. offset + len` lie in one shard: that shard and the slice's
/// first element in it (the common case, read without planning pieces).
fn one_shard(elements: &ShardTable, offset: u64, len: u64) -> Option<(usize, u64)> {
    let end = offset.checked_add(len)?;
    let at = elements.locate(offset)?;
    (end <= elements.bounds(at.shard).end).then_some((at.shard, at.local))
}

/// The pieces (shard, data offset, data length in bytes) of an element slice.
pub(crate) fn plan_slice(
    elements: &ShardTable,
    width: u64,
    offset: u64,
    len: u64,
) -> Result<Vec<(usize, u64, u64)>> {
    let total = elements.len();
    if offset.checked_add(len).is_none_or(|e| e > total) {
        return Err(Error::SliceOutOfRange { offset, len, total });
    }
    Ok(elements
        .runs(offset..offset + len)
        .map(|run| (run.shard, run.first * width, run.count * width))
        .collect())
}

/// Reads slices of a stream synchronously (the stream part of both stream storages).
#[derive(Debug)]
pub struct StreamReader<E: Element> {
    location: String,
    shards: Vec<SyncShard>,
    elements: ShardTable,
    /// The shards' record (chunk) counts.
    records: ShardTable,
    _element: PhantomData<fn() -> E>,
}

impl<E: Element> StreamReader<E> {
    pub(crate) fn new(location: String, shards: Vec<SyncShard>) -> Result<Self> {
        let elements = ShardTable::from_counts(shards.iter().map(|s| s.data_len() / E::WIDTH))?;
        let records = ShardTable::from_counts(shards.iter().map(SyncShard::len))?;
        Ok(StreamReader {
            location,
            shards,
            elements,
            records,
            _element: PhantomData,
        })
    }

    /// The shards' element counts: where each element of the stream lives.
    pub fn elements(&self) -> &ShardTable {
        &self.elements
    }

    /// The shards' record counts. A stream shard's records are its checksummed chunks
    /// ([`WriterOptions::stream_chunk_bytes`]): the records a
    /// [`RecordSource`](guideloom_format::RecordSource) reading this stream hands out.
    pub fn records(&self) -> &ShardTable {
        &self.records
    }

    /// The storage directory, as its backend describes it.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Elements in the stream.
    pub fn len(&self) -> u64 {
        self.elements.len()
    }

    /// `true` when the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open shards, in order.
    pub fn shards(&self) -> &[SyncShard] {
        &self.shards
    }

    /// Elements `offset .. offset + len` as one contiguous slice, even across shards (one
    /// read per shard touched); [`Error::SliceOutOfRange`] past the end.
    pub fn read(&self, offset: u64, len: u64) -> Result<Elements<E>> {
        if let Some((k, at)) = one_shard(&self.elements, offset, len) {
            let bytes = self.shards[k].read_data(at * E::WIDTH, len * E::WIDTH)?;
            return Ok(Elements::from_le_bytes(bytes));
        }
        let pieces = plan_slice(&self.elements, E::WIDTH, offset, len)?;
        let mut bufs: Vec<Bytes> = Vec::with_capacity(pieces.len());
        for (k, at, n) in pieces {
            bufs.push(self.shards[k].read_data(at, n)?);
        }
        Ok(Elements::concat(bufs))
    }
}

/// Reads slices of a stream asynchronously.
#[derive(Debug)]
pub struct AsyncStreamReader<E: Element> {
    shards: Vec<AsyncShard>,
    elements: ShardTable,
    _element: PhantomData<fn() -> E>,
}

impl<E: Element> AsyncStreamReader<E> {
    pub(crate) fn new(shards: Vec<AsyncShard>) -> Result<Self> {
        let elements = ShardTable::from_counts(shards.iter().map(|s| s.data_len() / E::WIDTH))?;
        Ok(AsyncStreamReader {
            shards,
            elements,
            _element: PhantomData,
        })
    }

    /// The shards' element counts: where each element of the stream lives.
    pub fn elements(&self) -> &ShardTable {
        &self.elements
    }

    /// Elements in the stream.
    pub fn len(&self) -> u64 {
        self.elements.len()
    }

    /// `true` when the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open shards, in order.
    pub fn shards(&self) -> &[AsyncShard] {
        &self.shards
    }

    /// Elements `offset .. offset + len` (see [`StreamReader::read`]).
    pub async fn read(&self, offset: u64, len: u64) -> Result<Elements<E>> {
        if let Some((k, at)) = one_shard(&self.elements, offset, len) {
            let bytes = self.shards[k]
                .read_data(at * E::WIDTH, len * E::WIDTH)
                .await?;
            return Ok(Elements::from_le_bytes(bytes));
        }
        let pieces = plan_slice(&self.elements, E::WIDTH, offset, len)?;
        let mut bufs: Vec<Bytes> = Vec::with_capacity(pieces.len());
        for (k, at, n) in pieces {
            bufs.push(self.shards[k].read_data(at, n).await?);
        }
        Ok(Elements::concat(bufs))
    }
}
