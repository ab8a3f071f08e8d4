//! [`StreamWithMetaStorage`]: a stream of elements cut into documents, each with metadata.

use std::marker::PhantomData;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use guideloom_format::spec::HEADER_LEN;
use guideloom_format::{
    AsyncShard, CborFormat, Corruption, Element, Elements, Error, Expected, Format, Located,
    ReadOptions, Result, ShardInfo, ShardTable, ShardWriter, SyncShard,
};
use guideloom_io::{Backend, Location, SeekIo};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::discovery::{
    FileSystemDocument, FileSystemStream, META_PREFIX, SHARD_PREFIX, discover_async, discover_sync,
    open_async, open_sync, shard_name,
};
use crate::options::{WriterOptions, locate, read_grouped, read_grouped_async};
use crate::stream::{AsyncStreamReader, StreamReader};

/// A stream of elements `E` cut into documents, each with metadata `M` (any serde type,
/// stored as CBOR).
///
/// Shard `n` is a pair: `shard-n.glm` (a stream shard with one record per document) and
/// `meta-n.glm` (a document shard of the same documents' metadata). The meta shard is
/// published first, so a reader that sees `shard-n` also sees `meta-n`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use guideloom_storage::StreamWithMetaStorage;
/// # let tmp = tempfile::tempdir()?;
/// # let dir = tmp.path().join("corpus");
/// let storage = StreamWithMetaStorage::<u16, String>::local(dir);
/// let mut w = storage.sync_writer()?;
/// assert_eq!(w.append(&[1, 2, 3], &"a".to_owned())?, 0);
/// assert_eq!(w.append(&[], &"empty".to_owned())?, 1);
/// assert_eq!(w.append(&[9], &"b".to_owned())?, 2);
/// w.finish()?;
///
/// let r = storage.sync_reader()?;
/// assert_eq!((r.num_docs(), r.len()), (3, 4));
/// let (tokens, meta) = r.read_doc(2)?;
/// assert_eq!((&*tokens, meta.as_str()), (&[9u16][..], "b"));
/// assert_eq!(&*r.read(2, 2)?, &[3, 9]); // the raw slice API
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StreamWithMetaStorage<E: Element, M, B: Backend = SeekIo> {
    dir: B::Location,
    backend: Arc<B>,
    read_options: ReadOptions,
    writer_options: WriterOptions,
    _types: PhantomData<fn() -> (E, M)>,
}

type Meta<M> = CborFormat<M>;

impl<E, M, B> StreamWithMetaStorage<E, M, B>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + 'static,
    B: Backend,
{
    /// A storage in `dir` read through `backend`.
    pub fn new(dir: B::Location, backend: B) -> Self {
        StreamWithMetaStorage {
            dir,
            backend: Arc::new(backend),
            read_options: ReadOptions::default(),
            writer_options: WriterOptions::default(),
            _types: PhantomData,
        }
    }

    /// Sets how shards are read.
    pub fn with_read_options(mut self, options: ReadOptions) -> Self {
        self.read_options = options;
        self
    }

    /// Sets how shards are written (rollover counts documents and element bytes).
    pub fn with_writer_options(mut self, options: WriterOptions) -> Self {
        self.writer_options = options;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &B::Location {
        &self.dir
    }

    fn meta_expected() -> Expected {
        Expected::Documents(Meta::<M>::new().name().to_owned())
    }

    /// A synchronous reader over the shard pairs finished now.
    pub fn sync_reader(&self) -> Result<StreamWithMetaReader<E, M>> {
        let (b, o) = (&*self.backend, &self.read_options);
        let shards = discover_sync(b, &self.dir, SHARD_PREFIX, 0, o, &Expected::stream::<E>())?;
        let mut metas = Vec::with_capacity(shards.len());
        for (n, s) in shards.iter().enumerate() {
            let loc = self.dir.child(&shard_name(META_PREFIX, n as u64));
            let meta = open_sync(b, &loc, o)?.ok_or_else(|| missing_meta(s.name()))?;
            meta.expect(&Self::meta_expected())?;
            check_pair(s.name(), s.len(), meta.len())?;
            metas.push(meta);
        }
        let docs = ShardTable::from_counts(shards.iter().map(SyncShard::len))?;
        Ok(StreamWithMetaReader {
            stream: StreamReader::new(self.dir.describe(), shards)?,
            metas,
            docs,
            format: Meta::new(),
        })
    }

    /// An asynchronous reader over the shard pairs finished now.
    pub async fn async_reader(&self) -> Result<AsyncStreamWithMetaReader<E, M>> {
        let (b, o) = (&*self.backend, &self.read_options);
        let shards =
            discover_async(b, &self.dir, SHARD_PREFIX, 0, o, &Expected::stream::<E>()).await?;
        let mut metas = Vec::with_capacity(shards.len());
        for (n, s) in shards.iter().enumerate() {
            let loc = self.dir.child(&shard_name(META_PREFIX, n as u64));
            let meta = open_async(b, &loc, o)
                .await?
                .ok_or_else(|| missing_meta(s.name()))?;
            meta.expect(&Self::meta_expected())?;
            check_pair(s.name(), s.len(), meta.len())?;
            metas.push(meta);
        }
        let docs = ShardTable::from_counts(shards.iter().map(AsyncShard::len))?;
        Ok(AsyncStreamWithMetaReader {
            stream: AsyncStreamReader::new(shards)?,
            metas,
            docs,
            format: Meta::new(),
        })
    }
}

/// [`Error::Corrupt`] of `shard` (format's own constructor is crate-private).
fn corrupt(shard: &str, what: Corruption) -> Error {
    Error::Corrupt {
        shard: shard.to_owned(),
        what,
    }
}

fn missing_meta(shard: &str) -> Error {
    corrupt(
        shard,
        Corruption::Companion {
            detail: "its meta shard is missing".into(),
        },
    )
}

fn check_pair(shard: &str, docs: u64, metas: u64) -> Result<()> {
    if docs != metas {
        return Err(corrupt(
            shard,
            Corruption::Companion {
                detail: format!("{docs} documents but {metas} metadata records"),
            },
        ));
    }
    Ok(())
}

impl<E, M> StreamWithMetaStorage<E, M, SeekIo>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + 'static,
{
    /// A storage in local directory `dir`, read with the default backend, [`SeekIo`].
    pub fn local(dir: impl Into<PathBuf>) -> Self {
        Self::new(dir.into(), SeekIo::new())
    }
}

impl<E, M, B> StreamWithMetaStorage<E, M, B>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + 'static,
    B: Backend<Location = PathBuf>,
{
    /// A writer appending documents after those already stored.
    pub fn sync_writer(&self) -> Result<StreamWithMetaWriter<E, M>> {
        let stream = FileSystemStream::<E>::new(self.dir.clone());
        let meta = FileSystemDocument::with_prefix(self.dir.clone(), META_PREFIX, "cbor");
        let existing = stream.discover()?;
        Ok(StreamWithMetaWriter {
            next_shard: existing.len() as u64,
            docs: existing.iter().map(|s| s.records).sum(),
            stream,
            meta,
            options: self.writer_options.clone(),
            current: None,
            buf: Vec::new(),
            failed: false,
            written: Vec::new(),
            format: Meta::new(),
        })
    }
}

/// Appends documents (elements + metadata) to a [`StreamWithMetaStorage`].
///
/// Finish/drop semantics are those of [`StreamWriter`](crate::StreamWriter):
/// dropping without [`finish`](StreamWithMetaWriter::finish) discards the unfinished pair.
#[derive(Debug)]
pub struct StreamWithMetaWriter<E: Element, M> {
    stream: FileSystemStream<E>,
    meta: FileSystemDocument,
    options: WriterOptions,
    current: Option<(ShardWriter, ShardWriter)>,
    next_shard: u64,
    docs: u64,
    buf: Vec<u8>,
    failed: bool,
    written: Vec<ShardInfo>,
    format: Meta<M>,
}

impl<E, M> StreamWithMetaWriter<E, M>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + 'static,
{
    /// Appends one document; returns its number.
    pub fn append(&mut self, elements: &[E], meta: &M) -> Result<u64> {
        if self.failed {
            return Err(Error::WriterFailed {
                dir: self.stream.dir().to_owned(),
            });
        }
        let mut meta_bytes = Vec::new();
        self.format
            .encode(meta, &mut meta_bytes)
            .map_err(|source| Error::Encode {
                index: self.docs,
                format: "cbor".into(),
                source,
            })?;
        self.buf.clear();
        E::extend_le(elements, &mut self.buf);
        let result = self.write(&meta_bytes);
        if result.is_err() {
            self.failed = true;
            self.current = None;
        }
        result
    }

    fn write(&mut self, meta_bytes: &[u8]) -> Result<u64> {
        let next = self.buf.len() as u64;
        if let Some((s, _)) = &self.current
            && self.options.must_roll(s.records(), s.data_len(), next)
        {
            self.roll()?;
        }
        let (s, m) = match &mut self.current {
            Some(pair) => pair,
            None => {
                let user = self.options.user().clone();
                let m = self.meta.create_shard(self.next_shard, user.clone())?;
                let s = self.stream.create_shard(self.next_shard, user)?;
                self.next_shard += 1;
                self.current.insert((s, m))
            }
        };
        s.append(&self.buf)?;
        m.append(meta_bytes)?;
        self.docs += 1;
        Ok(self.docs - 1)
    }

    fn roll(&mut self) -> Result<()> {
        if let Some((s, m)) = self.current.take() {
            // Meta first: a reader that sees shard-n also sees meta-n.
            let meta = m.finish()?;
            self.written.push(meta);
            self.written.push(s.finish()?);
        }
        Ok(())
    }

    /// Documents in the storage after this writer's appends.
    pub fn num_docs(&self) -> u64 {
        self.docs
    }

    /// Publishes the last pair of shards; returns every shard published (meta and stream).
    pub fn finish(mut self) -> Result<Vec<ShardInfo>> {
        if self.failed {
            return Err(Error::WriterFailed {
                dir: self.stream.dir().to_owned(),
            });
        }
        self.roll()?;
        Ok(std::mem::take(&mut self.written))
    }
}

impl<E: Element, M> Drop for StreamWithMetaWriter<E, M> {
    fn drop(&mut self) {
        if self.current.is_some() {
            tracing::warn!(
                dir = %self.stream.dir().display(),
                "stream-with-meta writer dropped without finish: unfinished shards discarded"
            );
        }
    }
}

fn decode_meta<M>(format: &Meta<M>, shard: &str, local: u64, b: bytes::Bytes) -> Result<M>
where
    M: Serialize + DeserializeOwned + Send + 'static,
{
    format.decode(b).map_err(|source| Error::Decode {
        shard: shard.to_owned(),
        index: local,
        format: "cbor".into(),
        source,
    })
}

/// Element range of document `local` of a shard whose data starts at global element `base`.
fn doc_span(base: u64, record: Range<u64>, width: u64) -> Range<u64> {
    base + (record.start - HEADER_LEN) / width..base + (record.end - HEADER_LEN) / width
}

macro_rules! meta_reader_common {
    () => {
        /// Number of documents.
        pub fn num_docs(&self) -> u64 {
            self.docs.len()
        }

        /// The shards' document counts: where each document lives.
        pub fn docs(&self) -> &ShardTable {
            &self.docs
        }

        /// Elements in the stream.
        pub fn len(&self) -> u64 {
            self.stream.len()
        }

        /// `true` when the stream has no elements.
        pub fn is_empty(&self) -> bool {
            self.stream.len() == 0
        }

        /// Pairs the element and metadata bytes read for `indices` (in that order).
        fn pair_up(
            &self,
            indices: &[u64],
            elements: Vec<bytes::Bytes>,
            metas: Vec<bytes::Bytes>,
        ) -> Result<Vec<(Elements<E>, M)>> {
            indices
                .iter()
                .zip(elements)
                .zip(metas)
                .map(|((&i, el), meta)| {
                    let at = locate(&self.docs, i)?;
                    let name = self.metas[at.shard].name();
                    let meta = decode_meta(&self.format, name, at.local, meta)?;
                    Ok((Elements::from_le_bytes(el), meta))
                })
                .collect()
        }

        /// Element range of document `i` in the stream.
        pub fn doc_range(&self, i: u64) -> Result<Range<u64>> {
            let at = locate(&self.docs, i)?;
            let shard = &self.stream.shards()[at.shard];
            let base = self.stream.elements().bounds(at.shard).start;
            Ok(doc_span(base, shard.record_range(at.local)?, E::WIDTH))
        }
    };
}

/// Reads a [`StreamWithMetaStorage`] synchronously.
#[derive(Debug)]
pub struct StreamWithMetaReader<E: Element, M> {
    stream: StreamReader<E>,
    metas: Vec<SyncShard>,
    docs: ShardTable,
    format: Meta<M>,
}

impl<E, M> StreamWithMetaReader<E, M>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + 'static,
{
    meta_reader_common!();

    /// Document `i`: its elements and metadata (two ranged reads).
    pub fn read_doc(&self, i: u64) -> Result<(Elements<E>, M)> {
        let Located { shard: k, local } = locate(&self.docs, i)?;
        let elements = Elements::from_le_bytes(self.stream.shards()[k].read(local)?);
        let m = &self.metas[k];
        let meta = decode_meta(&self.format, m.name(), local, m.read(local)?)?;
        Ok((elements, meta))
    }

    /// Documents `indices` (any order, repeats allowed), each with its metadata: one
    /// batched read per stream shard and one per meta shard touched;
    /// [`Error::IndexOutOfRange`] for an index past the end (nothing is read then).
    pub fn read_docs(&self, indices: &[u64]) -> Result<Vec<(Elements<E>, M)>> {
        let elements = read_grouped(&self.docs, self.stream.shards(), indices)?;
        let metas = read_grouped(&self.docs, &self.metas, indices)?;
        self.pair_up(indices, elements, metas)
    }

    /// Metadata of document `i` only (one ranged read).
    pub fn read_meta(&self, i: u64) -> Result<M> {
        let Located { shard: k, local } = locate(&self.docs, i)?;
        let m = &self.metas[k];
        decode_meta(&self.format, m.name(), local, m.read(local)?)
    }

    /// Elements `offset .. offset + len` of the whole stream (see
    /// [`StreamReader::read`]).
    pub fn read(&self, offset: u64, len: u64) -> Result<Elements<E>> {
        self.stream.read(offset, len)
    }

    /// The stream part.
    pub fn stream(&self) -> &StreamReader<E> {
        &self.stream
    }
}

/// Reads a [`StreamWithMetaStorage`] asynchronously.
#[derive(Debug)]
pub struct AsyncStreamWithMetaReader<E: Element, M> {
    stream: AsyncStreamReader<E>,
    metas: Vec<AsyncShard>,
    docs: ShardTable,
    format: Meta<M>,
}

impl<E, M> AsyncStreamWithMetaReader<E, M>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + 'static,
{
    meta_reader_common!();

    /// Document `i`: its elements and metadata.
    pub async fn read_doc(&self, i: u64) -> Result<(Elements<E>, M)> {
        let Located { shard: k, local } = locate(&self.docs, i)?;
        let elements = Elements::from_le_bytes(self.stream.shards()[k].read(local).await?);
        let m = &self.metas[k];
        let bytes = m.read(local).await?;
        let meta = decode_meta(&self.format, m.name(), local, bytes)?;
        Ok((elements, meta))
    }

    /// Documents `indices` (see [`StreamWithMetaReader::read_docs`]).
    pub async fn read_docs(&self, indices: &[u64]) -> Result<Vec<(Elements<E>, M)>> {
        let elements = read_grouped_async(&self.docs, self.stream.shards(), indices).await?;
        let metas = read_grouped_async(&self.docs, &self.metas, indices).await?;
        self.pair_up(indices, elements, metas)
    }

    /// Metadata of document `i` only.
    pub async fn read_meta(&self, i: u64) -> Result<M> {
        let Located { shard: k, local } = locate(&self.docs, i)?;
        let m = &self.metas[k];
        let bytes = m.read(local).await?;
        decode_meta(&self.format, m.name(), local, bytes)
    }

    /// Elements `offset .. offset + len` of the whole stream.
    pub async fn read(&self, offset: u64, len: u64) -> Result<Elements<E>> {
        self.stream.read(offset, len).await
    }

    /// The stream part.
    pub fn stream(&self) -> &AsyncStreamReader<E> {
        &self.stream
    }
}
