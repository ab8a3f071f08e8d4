//! [`DocumentStorage`]: records of a [`Format`] with random access by index.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_io::{Backend, Location, SeekIo};

use guideloom_format::{
    AsyncShard, Error, Expected, Format, ReadOptions, Result, RunBudget, ShardGroup, ShardInfo,
    ShardTable, ShardWriter, SyncShard,
};
use guideloom_format::{RUN_BYTES, RUN_RECORDS};

use crate::discovery::{FileSystemDocument, SHARD_PREFIX, discover_async, discover_sync};
use crate::options::{WriterOptions, locate, out_of_range};

/// Bytes read per request while iterating in order: the default [`RunBudget`]'s
/// [`RUN_BYTES`] (1 MiB).
pub const ITER_BATCH_BYTES: u64 = RUN_BYTES;

/// Records read per request while iterating in order, at most: the default [`RunBudget`]'s
/// [`RUN_RECORDS`].
pub const ITER_BATCH_RECORDS: u64 = RUN_RECORDS;

/// A directory of document shards (`shard-NNNNNN.glm`) holding records of format `F`,
/// read through backend `B`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use guideloom_format::CborFormat;
/// use guideloom_storage::DocumentStorage;
/// # let tmp = tempfile::tempdir()?;
/// # let dir = tmp.path().join("docs");
/// // Any backend works for reading; `local` uses guideloom_io::SeekIo.
/// let storage = DocumentStorage::local(dir, CborFormat::<(u32, String)>::new());
///
/// let mut w = storage.sync_writer()?;
/// w.append(0, &(1, "one".into()))?;
/// w.append(1, &(2, "two".into()))?;
/// w.finish()?;
///
/// let r = storage.sync_reader()?;
/// assert_eq!(r.len(), 2);
/// assert_eq!(r.read(1)?, (2, "two".to_owned()));
/// let all: Vec<_> = r.iter().collect::<Result<_, _>>()?;
/// assert_eq!(all.len(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DocumentStorage<F: Format, B: Backend = SeekIo> {
    dir: B::Location,
    format: Arc<F>,
    backend: Arc<B>,
    read_options: ReadOptions,
    writer_options: WriterOptions,
}

impl<F: Format, B: Backend> DocumentStorage<F, B> {
    /// A storage in `dir` with records of `format`, read through `backend`.
    pub fn new(dir: B::Location, format: F, backend: B) -> Self {
        DocumentStorage {
            dir,
            format: Arc::new(format),
            backend: Arc::new(backend),
            read_options: ReadOptions::default(),
            writer_options: WriterOptions::default(),
        }
    }

    /// Sets how shards are read.
    pub fn with_read_options(mut self, options: ReadOptions) -> Self {
        self.read_options = options;
        self
    }

    /// Sets how shards are written.
    pub fn with_writer_options(mut self, options: WriterOptions) -> Self {
        self.writer_options = options;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &B::Location {
        &self.dir
    }

    fn expected(&self) -> Expected {
        Expected::Documents(self.format.name().to_owned())
    }

    /// A synchronous reader over the shards finished now (one tail read per shard).
    ///
    /// A directory without shard 0 — including one that does not exist — is an empty
    /// storage. Shards finished later are not seen: open a new reader to see them.
    pub fn sync_reader(&self) -> Result<DocumentReader<F>> {
        let shards = discover_sync(
            &*self.backend,
            &self.dir,
            SHARD_PREFIX,
            0,
            &self.read_options,
            &self.expected(),
        )?;
        DocumentReader::new(self.dir.describe(), self.format.clone(), shards)
    }

    /// An asynchronous reader over the shards finished now.
    pub async fn async_reader(&self) -> Result<AsyncDocumentReader<F>> {
        let shards = discover_async(
            &*self.backend,
            &self.dir,
            SHARD_PREFIX,
            0,
            &self.read_options,
            &self.expected(),
        )
        .await?;
        let table = ShardTable::from_counts(shards.iter().map(AsyncShard::len))?;
        Ok(AsyncDocumentReader {
            format: self.format.clone(),
            shards,
            table,
        })
    }
}

impl<F: Format> DocumentStorage<F, SeekIo> {
    /// A storage in local directory `dir`, read with the default backend, [`SeekIo`].
    pub fn local(dir: impl Into<PathBuf>, format: F) -> Self {
        Self::new(dir.into(), format, SeekIo::new())
    }
}

impl<F: Format, B: Backend<Location = PathBuf>> DocumentStorage<F, B> {
    /// A writer appending after the records already stored (creating the directory).
    pub fn sync_writer(&self) -> Result<DocumentWriter<F>> {
        let fs = FileSystemDocument::new(self.dir.clone(), self.format.name());
        let existing = fs.discover()?;
        Ok(DocumentWriter {
            next_shard: existing.len() as u64,
            next_index: existing.iter().map(|s| s.records).sum(),
            fs,
            format: self.format.clone(),
            options: self.writer_options.clone(),
            current: None,
            buf: Vec::new(),
            failed: false,
            written: Vec::new(),
        })
    }
}

/// Appends documents with dense, ascending indices; see [`DocumentStorage::sync_writer`].
///
/// # Finishing and dropping
/// [`finish`](DocumentWriter::finish) publishes the last shard. Dropping a writer without
/// finishing **discards** its unfinished shard (the records appended since the last
/// rollover) and logs a warning; shards already rolled over stay published. Nothing
/// incomplete ever appears under a shard name.
#[derive(Debug)]
pub struct DocumentWriter<F: Format> {
    fs: FileSystemDocument,
    format: Arc<F>,
    options: WriterOptions,
    current: Option<ShardWriter>,
    next_shard: u64,
    next_index: u64,
    buf: Vec<u8>,
    failed: bool,
    written: Vec<ShardInfo>,
}

impl<F: Format> DocumentWriter<F> {
    /// Appends `doc` as record `index`, which must be [`len`](DocumentWriter::len):
    /// otherwise [`Error::NonDenseIndex`] names the expected index.
    pub fn append(&mut self, index: u64, doc: &F::Record) -> Result<()> {
        if self.failed {
            return Err(Error::WriterFailed {
                dir: self.fs.dir().to_owned(),
            });
        }
        if index != self.next_index {
            return Err(Error::NonDenseIndex {
                expected: self.next_index,
                got: index,
            });
        }
        let format = &*self.format;
        let bytes = match format.encoded_ref(doc) {
            Some(bytes) => bytes,
            None => {
                self.buf.clear();
                format
                    .encode(doc, &mut self.buf)
                    .map_err(|source| Error::Encode {
                        index,
                        format: format.name().to_owned(),
                        source,
                    })?;
                &self.buf[..]
            }
        };
        let result = Self::write_encoded(
            &mut self.current,
            &self.fs,
            &self.options,
            &mut self.next_shard,
            &mut self.written,
            bytes,
        );
        match result {
            Ok(()) => self.next_index += 1,
            Err(_) => {
                self.failed = true;
                self.current = None;
            }
        }
        result
    }

    fn write_encoded(
        current: &mut Option<ShardWriter>,
        fs: &FileSystemDocument,
        options: &WriterOptions,
        next_shard: &mut u64,
        written: &mut Vec<ShardInfo>,
        bytes: &[u8],
    ) -> Result<()> {
        if let Some(cur) = current.as_ref()
            && options.must_roll(cur.records(), cur.data_len(), bytes.len() as u64)
            && let Some(cur) = current.take()
        {
            written.push(cur.finish()?);
        }
        let cur = match current {
            Some(cur) => cur,
            None => {
                let w = fs.create_shard(*next_shard, options.user().clone())?;
                *next_shard += 1;
                current.insert(w)
            }
        };
        cur.append(bytes)?;
        Ok(())
    }

    fn roll(&mut self) -> Result<()> {
        if let Some(cur) = self.current.take() {
            self.written.push(cur.finish()?);
        }
        Ok(())
    }

    /// Appends `doc` at the next index and returns that index.
    pub fn push(&mut self, doc: &F::Record) -> Result<u64> {
        let index = self.next_index;
        self.append(index, doc)?;
        Ok(index)
    }

    /// The next index to append (= records in the storage after this writer's appends).
    pub fn len(&self) -> u64 {
        self.next_index
    }

    /// `true` when the storage has no records yet.
    pub fn is_empty(&self) -> bool {
        self.next_index == 0
    }

    /// Publishes the last shard; returns every shard this writer published.
    pub fn finish(mut self) -> Result<Vec<ShardInfo>> {
        if self.failed {
            return Err(Error::WriterFailed {
                dir: self.fs.dir().to_owned(),
            });
        }
        self.roll()?;
        Ok(std::mem::take(&mut self.written))
    }
}

impl<F: Format> Drop for DocumentWriter<F> {
    fn drop(&mut self) {
        if let Some(cur) = &self.current
            && cur.records() > 0
        {
            tracing::warn!(
                shard = %cur.path().display(),
                records = cur.records(),
                "document writer dropped without finish: unfinished shard discarded"
            );
        }
    }
}

fn decode<F: Format>(format: &F, shard: &str, local: u64, bytes: Bytes) -> Result<F::Record> {
    format.decode(bytes).map_err(|source| Error::Decode {
        shard: shard.to_owned(),
        index: local,
        format: format.name().to_owned(),
        source,
    })
}

/// The body of both readers' `read_many`, which differ only in whether a shard's batched
/// read is awaited (pass `await` for the async reader): group `indices` by shard, one
/// batched read per shard touched, each record decoded into its place in the batch.
macro_rules! read_many_decoded {
    ($reader:expr, $indices:expr $(, $await:tt)?) => {{
        let reader = $reader;
        let indices: &[u64] = $indices;
        let groups = reader
            .table
            .group(indices)
            .map_err(|i| out_of_range(i, reader.table.len()))?;
        let mut out: Vec<Option<F::Record>> = (0..indices.len()).map(|_| None).collect();
        for ShardGroup {
            shard,
            positions,
            locals,
        } in groups
        {
            let shard = &reader.shards[shard];
            let bufs = shard.read_many(&locals)$(.$await)?;
            let bufs = bufs?;
            for ((pos, local), bytes) in positions.into_iter().zip(locals).zip(bufs) {
                out[pos] = Some(decode(&*reader.format, shard.name(), local, bytes)?);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }};
}

/// Reads documents from a [`DocumentStorage`] synchronously; shareable across threads.
#[derive(Debug)]
pub struct DocumentReader<F: Format> {
    location: String,
    format: Arc<F>,
    shards: Vec<SyncShard>,
    table: ShardTable,
}

impl<F: Format> DocumentReader<F> {
    fn new(location: String, format: Arc<F>, shards: Vec<SyncShard>) -> Result<Self> {
        let table = ShardTable::from_counts(shards.iter().map(SyncShard::len))?;
        Ok(DocumentReader {
            location,
            format,
            shards,
            table,
        })
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.table.len()
    }

    /// `true` when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open shards, in order.
    pub fn shards(&self) -> &[SyncShard] {
        &self.shards
    }

    /// The shards' record counts: where each global index lives.
    pub fn table(&self) -> &ShardTable {
        &self.table
    }

    /// The storage directory, as its backend describes it.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Where record `i` lives: the position of its shard in [`shards`](Self::shards) and
    /// the record's absolute byte range in that shard (e.g. to read the same bytes raw).
    pub fn record_location(&self, i: u64) -> Result<(usize, std::ops::Range<u64>)> {
        let at = locate(&self.table, i)?;
        Ok((at.shard, self.shards[at.shard].record_range(at.local)?))
    }

    fn locate(&self, i: u64) -> Result<(&SyncShard, u64)> {
        let at = locate(&self.table, i)?;
        Ok((&self.shards[at.shard], at.local))
    }

    /// The encoded bytes of record `i` (one ranged read).
    pub fn read_raw(&self, i: u64) -> Result<Bytes> {
        let (shard, local) = self.locate(i)?;
        shard.read(local)
    }

    /// Record `i` (one ranged read), or [`Error::IndexOutOfRange`].
    pub fn read(&self, i: u64) -> Result<F::Record> {
        let (shard, local) = self.locate(i)?;
        decode(&*self.format, shard.name(), local, shard.read(local)?)
    }

    /// The encoded bytes of many records, in the order asked: one batched read per shard
    /// involved.
    pub fn read_many_raw(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        crate::options::read_grouped(&self.table, &self.shards, indices)
    }

    /// Many records in the order asked: one batched, coalesced read per shard involved.
    pub fn read_many(&self, indices: &[u64]) -> Result<Vec<F::Record>> {
        read_many_decoded!(self, indices)
    }

    /// All records in order, read in batches of up to [`ITER_BATCH_BYTES`].
    pub fn iter(&self) -> DocumentIter<'_, F> {
        self.iter_from(0)
    }

    /// Records from `start` on, in order.
    pub fn iter_from(&self, start: u64) -> DocumentIter<'_, F> {
        DocumentIter {
            reader: self,
            next: start,
            shard: 0,
            local: 0,
            batch_end: 0,
            buf: Bytes::new(),
            buf_start: 0,
        }
    }
}

/// In-order iterator of a [`DocumentReader`]; stops after the first error.
///
/// Reads a batch of consecutive records (up to [`ITER_BATCH_BYTES`]) with one read and hands
/// the records out as zero-copy slices of it, each checked when it is handed out.
pub struct DocumentIter<'a, F: Format> {
    reader: &'a DocumentReader<F>,
    /// Global index of the next record.
    next: u64,
    /// Shard of the current batch.
    shard: usize,
    /// Local index of the next record in `shard`.
    local: u64,
    /// Local index past the current batch.
    batch_end: u64,
    /// The current batch's bytes, starting at absolute offset `buf_start` of the shard.
    buf: Bytes,
    buf_start: u64,
}

impl<F: Format> std::fmt::Debug for DocumentIter<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentIter")
            .field("next", &self.next)
            .field("len", &self.reader.len())
            .field("shard", &self.shard)
            .field("local", &self.local)
            .field("batch_end", &self.batch_end)
            .field("batch_bytes", &self.buf.len())
            .finish()
    }
}

impl<F: Format> DocumentIter<'_, F> {
    /// Reads the batch starting at record `next`.
    fn fill(&mut self) -> Result<()> {
        let at = locate(&self.reader.table, self.next)?;
        let (k, local) = (at.shard, at.local);
        let shard = &self.reader.shards[k];
        let n = RunBudget::default().run_len(shard.index(), local, shard.len());
        // Release the previous batch first: when the caller has dropped its records, its
        // memory is reused for this read instead of faulting in a fresh buffer.
        self.buf = Bytes::new();
        let (range, buf) = shard.read_span(local, n)?;
        self.shard = k;
        self.local = local;
        self.batch_end = local + n;
        self.buf = buf;
        self.buf_start = range.start;
        Ok(())
    }

    /// The next record's bytes, checked.
    fn next_bytes(&mut self) -> Result<(&SyncShard, u64, Bytes)> {
        if self.local >= self.batch_end {
            self.fill()?;
        }
        let shard = &self.reader.shards[self.shard];
        let local = self.local;
        let r = shard.record_range(local)?;
        let rel = |x: u64| usize::try_from(x - self.buf_start).unwrap_or(usize::MAX);
        let bytes = if r.is_empty() {
            Bytes::new()
        } else {
            self.buf.slice(rel(r.start)..rel(r.end))
        };
        shard.check_record(local, &bytes)?;
        self.local += 1;
        self.next += 1;
        Ok((shard, local, bytes))
    }
}

impl<F: Format> Iterator for DocumentIter<'_, F> {
    type Item = Result<F::Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.reader.len() {
            return None;
        }
        let format = &*self.reader.format;
        match self.next_bytes() {
            Ok((shard, local, bytes)) => Some(decode(format, shard.name(), local, bytes)),
            Err(e) => {
                self.next = u64::MAX;
                self.buf = Bytes::new();
                Some(Err(e))
            }
        }
    }
}

/// Reads documents from a [`DocumentStorage`] asynchronously.
#[derive(Debug)]
pub struct AsyncDocumentReader<F: Format> {
    format: Arc<F>,
    shards: Vec<AsyncShard>,
    table: ShardTable,
}

impl<F: Format> AsyncDocumentReader<F> {
    /// Number of records.
    pub fn len(&self) -> u64 {
        self.table.len()
    }

    /// `true` when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open shards, in order.
    pub fn shards(&self) -> &[AsyncShard] {
        &self.shards
    }

    /// The shards' record counts: where each global index lives.
    pub fn table(&self) -> &ShardTable {
        &self.table
    }

    /// Where record `i` lives (see [`DocumentReader::record_location`]).
    pub fn record_location(&self, i: u64) -> Result<(usize, std::ops::Range<u64>)> {
        let at = locate(&self.table, i)?;
        Ok((at.shard, self.shards[at.shard].record_range(at.local)?))
    }

    fn locate(&self, i: u64) -> Result<(&AsyncShard, u64)> {
        let at = locate(&self.table, i)?;
        Ok((&self.shards[at.shard], at.local))
    }

    /// The encoded bytes of record `i` (one ranged read).
    pub async fn read_raw(&self, i: u64) -> Result<Bytes> {
        let (shard, local) = self.locate(i)?;
        shard.read(local).await
    }

    /// Record `i` (one ranged read), or [`Error::IndexOutOfRange`].
    pub async fn read(&self, i: u64) -> Result<F::Record> {
        let (shard, local) = self.locate(i)?;
        decode(&*self.format, shard.name(), local, shard.read(local).await?)
    }

    /// Many records in the order asked: one batched read per shard involved.
    pub async fn read_many(&self, indices: &[u64]) -> Result<Vec<F::Record>> {
        read_many_decoded!(self, indices, await)
    }

    /// The next in-order batch starting at record `start` (up to [`ITER_BATCH_BYTES`],
    /// never crossing a shard); empty at the end. Iterate with
    /// `start += batch.len()` until empty.
    pub async fn read_batch(&self, start: u64) -> Result<Vec<F::Record>> {
        if start >= self.len() {
            return Ok(Vec::new());
        }
        let (shard, local) = self.locate(start)?;
        let n = RunBudget::default().run_len(shard.index(), local, shard.len());
        let records = shard.read_run(local, n).await?;
        (local..local + n)
            .zip(records)
            .map(|(l, b)| decode(&*self.format, shard.name(), l, b))
            .collect()
    }
}
