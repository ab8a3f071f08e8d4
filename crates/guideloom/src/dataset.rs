//! The unified dataset API: open a published root, read records by index ([`Dataset`],
//! [`AsyncDataset`], re-exported at the crate root).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{Format, ReadOptions, RecordSource, RunBudget};
use guideloom_publish::{
    AnnotationSet, InOrder, Registry, Root, RootOptions, RootUri, Snapshot, SnapshotReader,
    StoreOptions,
};
use serde::de::DeserializeOwned;

use crate::blocking::SyncRuntime;
use crate::error::{Error, Result};

/// How to open a dataset.
#[derive(Debug, Clone, Default)]
pub struct DatasetOptions {
    /// The snapshot to open (`None`: the latest).
    pub snapshot: Option<String>,
    /// Options of the root's store (mount flag, S3 endpoint...).
    pub storage: StoreOptions,
    /// Options of the root itself (whole-shard staging, the shard size limit).
    pub root: RootOptions,
    /// Shard read options (record CRC verification, speculative tail).
    pub read: ReadOptions,
    /// The registry resolving URIs (`None`: [`Registry::global`], so `memory://` roots and
    /// registered stores are shared across the process).
    pub registry: Option<Arc<Registry>>,
}

impl DatasetOptions {
    /// Selects a snapshot by id.
    pub fn snapshot(mut self, id: impl Into<String>) -> Self {
        self.snapshot = Some(id.into());
        self
    }
    /// Sets the store options.
    pub fn storage(mut self, storage: StoreOptions) -> Self {
        self.storage = storage;
        self
    }
    /// Sets the root options.
    pub fn root(mut self, root: RootOptions) -> Self {
        self.root = root;
        self
    }
    /// Sets the shard read options.
    pub fn read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }
    /// Resolves URIs through `registry`.
    pub fn registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }
}

/// Resolves `uri` to a [`Root`] (for its async API: writing shards, publishing, reading
/// the snapshot log) with the storage options and registry of `options`, as
/// [`Dataset::open_with`] does. `http(s)://` base URLs are read-only roots (feature `http`;
/// without it they are refused with `publish::Error::Unsupported`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> guideloom::Result<()> {
/// use guideloom::{DatasetOptions, resolve_root};
///
/// let root = resolve_root("memory://resolve-root-doc", &DatasetOptions::default())?;
/// assert!(root.latest().await.unwrap_err().is_not_found()); // nothing published yet
/// # Ok(()) }
/// ```
pub fn resolve_root(uri: &str, options: &DatasetOptions) -> Result<Root> {
    let root = match &options.registry {
        Some(r) => Root::new(r.resolve(uri, &options.storage)?, options.root.clone()),
        None => Root::open(uri, &options.storage, options.root.clone())?,
    };
    Ok(root)
}

#[derive(Debug)]
struct Inner {
    uri: String,
    /// Shards are opened (once, one tail read each, size and record count checked against
    /// the manifest) and cached by guideloom-publish's reader.
    reader: Arc<SnapshotReader>,
    remote: bool,
}

/// A dataset snapshot, read asynchronously (call it from your tokio runtime): the same
/// reads as [`Dataset`], which is the synchronous flavour. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct AsyncDataset {
    inner: Arc<Inner>,
}

impl AsyncDataset {
    /// Opens the latest snapshot of the root at `uri`.
    pub async fn open(uri: &str) -> Result<Self> {
        Self::open_with(uri, DatasetOptions::default()).await
    }

    /// Opens the root at `uri` with `options`.
    pub async fn open_with(uri: &str, options: DatasetOptions) -> Result<Self> {
        let root = resolve_root(uri, &options)?;
        let snapshot = match &options.snapshot {
            Some(id) => root.snapshot(id).await?,
            None => root.latest().await?,
        };
        Ok(Self::from_snapshot(uri, root, snapshot, options.read))
    }

    /// A dataset over `snapshot` of an already resolved `root`.
    pub fn from_snapshot(uri: &str, root: Root, snapshot: Snapshot, read: ReadOptions) -> Self {
        Self::from_reader(uri, Arc::new(root.reader_with(snapshot, read)))
    }

    /// A dataset over an existing [`SnapshotReader`] (sharing its opened shards).
    pub fn from_reader(uri: &str, reader: Arc<SnapshotReader>) -> Self {
        let remote = !matches!(RootUri::parse(uri), Ok(RootUri::Local(_)));
        AsyncDataset {
            inner: Arc::new(Inner {
                uri: uri.to_owned(),
                reader,
                remote,
            }),
        }
    }

    /// The URI it was opened from.
    pub fn uri(&self) -> &str {
        &self.inner.uri
    }

    /// The root.
    pub fn root(&self) -> &Root {
        self.inner.reader.root()
    }

    /// The snapshot read.
    pub fn snapshot(&self) -> &Snapshot {
        self.inner.reader.snapshot()
    }

    /// The publish layer's reader this dataset reads through (per-shard access:
    /// [`SnapshotReader::open_shard`]).
    pub fn reader(&self) -> &Arc<SnapshotReader> {
        &self.inner.reader
    }

    /// The number of records.
    pub fn len(&self) -> u64 {
        self.inner.reader.len()
    }

    /// `true` when the snapshot has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cumulative record starts of the shards: `[0, n0, n0 + n1, ..., len()]`.
    pub fn shard_bounds(&self) -> &[u64] {
        self.inner.reader.table().starts()
    }

    /// `true` unless the root is a local directory (then reads are network requests).
    pub fn is_remote(&self) -> bool {
        self.inner.remote
    }

    /// The bytes of record `index`: one ranged read (plus one tail read the first time its
    /// shard is touched). See [`SnapshotReader::get`].
    pub async fn get(&self, index: u64) -> Result<Bytes> {
        Ok(self.inner.reader.get(index).await?)
    }

    /// The bytes of records `indices`, in that order: one batched (coalescing) read per
    /// shard touched, shards read concurrently. See [`SnapshotReader::get_many`].
    pub async fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        Ok(self.inner.reader.get_many(indices).await?)
    }

    /// The bytes of records `range`, in order: consecutive records of a shard are read
    /// together (see [`SnapshotReader::read_in_order`]). A range reaching past the end is
    /// [`Error::OutOfRange`].
    pub async fn get_range(&self, range: Range<u64>) -> Result<Vec<Bytes>> {
        Ok(self.inner.reader.get_range(range).await?)
    }

    /// Record `index` decoded as CBOR into `T` (records written with
    /// [`CborFormat`](crate::CborFormat)).
    pub async fn get_as<T: DeserializeOwned>(&self, index: u64) -> Result<T> {
        decode_as(index, self.get(index).await?)
    }

    /// Record `index` decoded with `format`.
    pub async fn get_with<F: Format>(&self, index: u64, format: &F) -> Result<F::Record> {
        let bytes = self.get(index).await?;
        format
            .decode(bytes)
            .map_err(|source| Error::Decode { index, source })
    }

    /// Annotation set `name` (its latest version when first asked for) for this snapshot:
    /// downloaded and verified once per dataset (clones share it), see
    /// [`SnapshotReader::annotations`].
    pub async fn annotations(&self, name: &str) -> Result<Arc<AnnotationSet>> {
        Ok(self.inner.reader.annotations(name).await?)
    }

    /// The value of annotation set `name` for record `index` (no request once the set is
    /// open: a loop over records downloads the set once).
    pub async fn annotation<T: DeserializeOwned>(&self, name: &str, index: u64) -> Result<T> {
        Ok(self.inner.reader.annotation(name, index).await?)
    }
}

/// Decodes one CBOR record exactly as [`CborFormat`](crate::CborFormat) does (one item, no trailing bytes),
/// without requiring `T: Serialize`.
fn decode_as<T: DeserializeOwned>(index: u64, bytes: Bytes) -> Result<T> {
    guideloom_format::cbor::decode_one(&bytes).map_err(|e| Error::Decode {
        index,
        source: Box::new(e),
    })
}

/// A dataset snapshot, read synchronously through an internal tokio runtime.
///
/// A dataset is one snapshot of a root (the latest, or one chosen by id): its records are
/// the records of the snapshot's shards, in manifest order. Shards are opened lazily by
/// guideloom-publish's [`SnapshotReader`] (one per dataset, shared by clones): one tail read
/// each, size and record count checked against the manifest; a record is then one ranged
/// read, and [`Dataset::get_many`] makes one batched read per shard touched, shards read
/// concurrently.
///
/// Use it from plain threads (training loops, the [`Loader`](crate::Loader)): it never
/// exposes tokio. A call made inside a tokio runtime (an async task, `#[tokio::main]`, a
/// `spawn_blocking` thread) runs too, on this dataset's own runtime, and neither it nor the
/// dataset's drop panics; but it blocks the calling thread, so inside an async task prefer
/// [`AsyncDataset`] ([`Dataset::as_async`]).
///
/// ```
/// # fn main() -> guideloom::Result<()> {
/// use guideloom::{Dataset, DatasetOptions};
/// # let tmp = tempfile::tempdir().unwrap();
/// # let root = tmp.path().join("root");
/// # let root = root.to_str().unwrap();
/// # let publisher = guideloom::Publisher::open(root)?;
/// # let records: Vec<String> = (0..10).map(|i| format!("record {i}")).collect();
/// # let shards = records.chunks(4).enumerate().map(|(n, chunk)| publisher.write_shard("w", n as u64, chunk));
/// # let shards = shards.collect::<guideloom::Result<Vec<_>>>()?;
/// # publisher.publish("example", "s1", shards, guideloom::PublishMode::Full)?;
/// let ds = Dataset::open(root)?; // the latest snapshot
/// assert_eq!(ds.len(), 10);
/// let text: String = ds.get_as(3)?; // CBOR records decode through serde
/// assert_eq!(text, "record 3");
/// let all: Vec<String> = ds.iter_as::<String>().collect::<Result<_, _>>()?;
/// assert_eq!(all.len(), 10);
/// let same = Dataset::open_with(root, DatasetOptions::default().snapshot(ds.snapshot().id()))?;
/// assert_eq!(same.get(9)?, ds.get(9)?);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Dataset {
    inner: AsyncDataset,
    runtime: Arc<SyncRuntime>,
}

impl Dataset {
    /// Opens the latest snapshot of the root at `uri` (a local path, `file://`,
    /// `memory://`, `s3://` with feature `s3`, a read-only `http(s)://` base URL with
    /// feature `http`, or a declared mount through [`DatasetOptions::storage`]).
    pub fn open(uri: &str) -> Result<Self> {
        Self::open_with(uri, DatasetOptions::default())
    }

    /// Opens the root at `uri` with `options`.
    pub fn open_with(uri: &str, options: DatasetOptions) -> Result<Self> {
        let runtime = Arc::new(SyncRuntime::new()?);
        let inner = runtime.block_on(AsyncDataset::open_with(uri, options))?;
        Ok(Dataset { inner, runtime })
    }

    /// A dataset driving `inner` on `runtime` (shared with a [`Publisher`](crate::Publisher)).
    pub(crate) fn from_parts(inner: AsyncDataset, runtime: Arc<SyncRuntime>) -> Self {
        Dataset { inner, runtime }
    }

    /// The async flavour sharing this dataset's state (opened shards).
    pub fn as_async(&self) -> &AsyncDataset {
        &self.inner
    }

    /// Drives `future` on this dataset's runtime (see [`SyncRuntime::block_on`]).
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// The root.
    pub fn root(&self) -> &Root {
        self.inner.root()
    }

    /// The snapshot read.
    pub fn snapshot(&self) -> &Snapshot {
        self.inner.snapshot()
    }

    /// The number of records.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// `true` when the snapshot has no records.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// See [`AsyncDataset::shard_bounds`].
    pub fn shard_bounds(&self) -> &[u64] {
        self.inner.shard_bounds()
    }

    /// See [`AsyncDataset::get`].
    #[inline]
    pub fn get(&self, index: u64) -> Result<Bytes> {
        // An open local shard is read on this thread: no future, no runtime.
        if let Some(read) = self.inner.inner.reader.get_blocking(index) {
            return Ok(read?);
        }
        self.runtime.block_on(self.inner.get(index))
    }

    /// See [`AsyncDataset::get_many`].
    pub fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        if let Some(read) = self.inner.inner.reader.get_many_blocking(indices) {
            return Ok(read?);
        }
        self.runtime.block_on(self.inner.get_many(indices))
    }

    /// See [`AsyncDataset::get_range`].
    pub fn get_range(&self, range: Range<u64>) -> Result<Vec<Bytes>> {
        self.runtime.block_on(self.inner.get_range(range))
    }

    /// See [`AsyncDataset::get_as`].
    pub fn get_as<T: DeserializeOwned>(&self, index: u64) -> Result<T> {
        self.runtime.block_on(self.inner.get_as(index))
    }

    /// See [`AsyncDataset::get_with`].
    pub fn get_with<F: Format>(&self, index: u64, format: &F) -> Result<F::Record> {
        self.runtime.block_on(self.inner.get_with(index, format))
    }

    /// See [`AsyncDataset::annotations`].
    pub fn annotations(&self, name: &str) -> Result<Arc<AnnotationSet>> {
        self.runtime.block_on(self.inner.annotations(name))
    }

    /// See [`AsyncDataset::annotation`].
    pub fn annotation<T: DeserializeOwned>(&self, name: &str, index: u64) -> Result<T> {
        self.runtime.block_on(self.inner.annotation(name, index))
    }

    /// All records in order (consecutive records read together, see
    /// [`SnapshotReader::read_in_order`]).
    pub fn iter(&self) -> Records<'_> {
        self.iter_range(0..self.len())
    }

    /// Records `range` in order (the range is clamped to the dataset).
    pub fn iter_range(&self, range: Range<u64>) -> Records<'_> {
        let end = range.end.min(self.len());
        let range = range.start.min(end)..end;
        let runs = self
            .inner
            .inner
            .reader
            .read_in_order(range, RunBudget::default())
            .expect("a range clamped to the snapshot");
        Records {
            runtime: &self.runtime,
            runs,
            buffer: std::collections::VecDeque::new(),
        }
    }

    /// All records in order, decoded as CBOR into `T`.
    pub fn iter_as<T: DeserializeOwned>(&self) -> impl Iterator<Item = Result<T>> + '_ {
        let mut index = 0u64;
        self.iter().map(move |r| {
            let i = index;
            index += 1;
            r.and_then(|b| decode_as(i, b))
        })
    }
}

/// In-order iterator over a [`Dataset`]'s records ([`Dataset::iter`]). After an error it
/// ends.
#[derive(Debug)]
pub struct Records<'a> {
    runtime: &'a SyncRuntime,
    runs: InOrder<'a>,
    buffer: std::collections::VecDeque<Bytes>,
}

impl Iterator for Records<'_> {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() {
            match self.runtime.block_on(self.runs.next_run())? {
                Ok(run) => self.buffer.extend(run.records),
                Err(e) => return Some(Err(e.into())),
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}

impl RecordSource for Dataset {
    type Error = Error;

    fn name(&self) -> String {
        format!("{} (snapshot {})", self.inner.uri(), self.snapshot().id())
    }
    fn len(&self) -> u64 {
        Dataset::len(self)
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        Dataset::get_many(self, indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        Some(Dataset::shard_bounds(self))
    }
    fn is_remote(&self) -> bool {
        self.inner.is_remote()
    }
}
