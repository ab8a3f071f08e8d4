//! Opening a [`Dataset`] from a URI, and its synchronous reads: each the async twin driven by
//! the process's one [`Bridge`], after a fast path that needs no executor at all (an open
//! local shard read on the calling thread).

use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{Format, ReadOptions, RecordSource, RunBudget};
use guideloom_io::bridge::Bridge;
use serde::de::DeserializeOwned;

use super::{Dataset, InOrder};
use crate::annotations::AnnotationSet;
use crate::cache::CacheOptions;
use crate::error::{Error, Result};
use crate::registry::{Registry, StoreOptions};
use crate::root::{Root, RootOptions};

/// How to open a [`Dataset`]: which snapshot, through which registry, and one options value
/// of each concern involved — the store ([`StoreOptions`]), the root ([`RootOptions`]) and
/// the shard reads ([`ReadOptions`]). It holds no setting of its own beside the snapshot and
/// the registry.
///
/// ```
/// use std::time::Duration;
/// use guideloom_format::ReadOptions;
/// use guideloom_publish::{DatasetOptions, StoreOptions};
///
/// let options = DatasetOptions::default()
///     .with_snapshot("2024-06-01")
///     .with_store(StoreOptions::default().with_request_timeout(Duration::from_secs(5)))
///     .with_read(ReadOptions::default().with_verify_records(false));
/// assert_eq!(options.snapshot.as_deref(), Some("2024-06-01"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct DatasetOptions {
    /// The snapshot to open (`None`: the latest).
    pub snapshot: Option<String>,
    /// Options of the root's store (mount flag, S3 endpoint, retries and timeouts...).
    pub store: StoreOptions,
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
    #[must_use]
    pub fn with_snapshot(mut self, id: impl Into<String>) -> Self {
        self.snapshot = Some(id.into());
        self
    }
    /// Sets the store options.
    #[must_use]
    pub fn with_store(mut self, store: StoreOptions) -> Self {
        self.store = store;
        self
    }
    /// Sets the root options.
    #[must_use]
    pub fn with_root(mut self, root: RootOptions) -> Self {
        self.root = root;
        self
    }
    /// Sets the shard read options.
    #[must_use]
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }
    /// Resolves URIs through `registry`.
    #[must_use]
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }
}

/// Resolves `uri` to a [`Root`] (to write shards, publish, read the snapshot log) with the
/// store options and registry of `options`, as [`Dataset::open_with`] does. `http(s)://`
/// base URLs are read-only roots (feature `http`; without it, [`Error::Unsupported`]).
/// When `options.root` turns no node cache on, the environment may
/// ([`CacheOptions::from_env`]: `GUIDELOOM_CACHE_DIR`, `GUIDELOOM_CACHE_BYTES`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> guideloom_publish::Result<()> {
/// use guideloom_publish::{DatasetOptions, resolve_root};
///
/// let root = resolve_root("memory://resolve-root-doc", &DatasetOptions::default())?;
/// assert!(root.latest().await.unwrap_err().is_not_found()); // nothing published yet
/// # Ok(()) }
/// ```
pub fn resolve_root(uri: &str, options: &DatasetOptions) -> Result<Root> {
    let mut root = options.root.clone();
    if !root.cache.is_on() {
        root.cache = CacheOptions::from_env()?;
    }
    Ok(match &options.registry {
        Some(r) => Root::new(r.resolve(uri, &options.store)?, root),
        None => Root::open(uri, &options.store, root)?,
    })
}

/// Runs `future` to completion through the process's [`Bridge`], from any thread.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output> {
    let bridge = Bridge::shared().map_err(|source| Error::Runtime { source })?;
    Ok(bridge.block_on(future))
}

/// Decodes one CBOR record (one item, no trailing bytes) as `CborFormat` does, without
/// requiring `T: Serialize`.
pub(crate) fn decode_cbor<T: DeserializeOwned>(index: u64, bytes: &[u8]) -> Result<T> {
    guideloom_format::cbor::decode_one(bytes).map_err(|e| Error::Decode {
        index,
        source: Box::new(e),
    })
}

/// Opening.
impl Dataset {
    /// Opens the latest snapshot of the root at `uri`: a local path, `file://`, `memory://`,
    /// `s3://` / `gs://` / `az://` with their features, a read-only `http(s)://` base URL
    /// with feature `http`, or a declared mount through [`DatasetOptions::store`].
    ///
    /// ```
    /// # fn main() -> guideloom_publish::Result<()> {
    /// # use guideloom_format::ShardMetadata;
    /// # use guideloom_publish::{PublicationOptions, PublishMode, PublishRequest, Root};
    /// # let rt = tokio::runtime::Runtime::new().unwrap();
    /// # rt.block_on(async {
    /// #     let root = Root::open("memory://dataset-open-doc", &Default::default(), Default::default())?;
    /// #     let meta = ShardMetadata::new("raw", "documents");
    /// #     let shard = root.write_shard("w", 0, meta, [b"a".as_slice(), b"b", b"c"]).await?;
    /// #     let request = PublishRequest { dataset_id: "d".into(), snapshot_id: "s".into(), shards: vec![shard], mode: PublishMode::Full, schema: None, };
    /// #     root.publish(&request, &PublicationOptions::default()).await
    /// # })?;
    /// use guideloom_publish::Dataset;
    ///
    /// let ds = Dataset::open("memory://dataset-open-doc")?; // the latest snapshot
    /// assert_eq!(ds.len(), 3);
    /// assert_eq!(ds.get(1)?, "b");
    /// # Ok(()) }
    /// ```
    pub fn open(uri: &str) -> Result<Dataset> {
        Self::open_with(uri, DatasetOptions::default())
    }

    /// Opens the root at `uri` with `options` (see [`open`](Self::open)).
    pub fn open_with(uri: &str, options: DatasetOptions) -> Result<Dataset> {
        block_on(Self::open_with_async(uri, options))?
    }

    /// The async twin of [`open`](Self::open).
    pub async fn open_async(uri: &str) -> Result<Dataset> {
        Self::open_with_async(uri, DatasetOptions::default()).await
    }

    /// The async twin of [`open_with`](Self::open_with).
    pub async fn open_with_async(uri: &str, options: DatasetOptions) -> Result<Dataset> {
        let root = resolve_root(uri, &options)?;
        let snapshot = match &options.snapshot {
            Some(id) => root.snapshot(id).await?,
            None => root.latest().await?,
        };
        Ok(root.reader_with(snapshot, options.read))
    }

    /// `true` when the root's reads are network requests (from the store's capabilities).
    pub fn is_remote(&self) -> bool {
        self.root().store().capabilities().remote_reads
    }

    /// Cumulative record starts of the shards: `[0, n0, n0 + n1, ..., len()]`.
    pub fn shard_bounds(&self) -> &[u64] {
        self.table().starts()
    }
}

/// Synchronous reads: each is its `_async` twin run to completion (see the module docs).
impl Dataset {
    /// The bytes of record `index`: one ranged read (plus one tail read the first time its
    /// shard is touched); on an open local shard, read on the calling thread with no
    /// executor. See [`get_async`](Self::get_async).
    #[inline]
    pub fn get(&self, index: u64) -> Result<Bytes> {
        if let Some(read) = self.try_get_here(index) {
            return read;
        }
        block_on(self.get_async(index))?
    }

    /// The bytes of records `indices`, in that order: one batched (coalescing) read per
    /// shard touched. See [`get_many_async`](Self::get_many_async).
    pub fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        if let Some(read) = self.try_get_many_here(indices) {
            return read;
        }
        block_on(self.get_many_async(indices))?
    }

    /// The bytes of records `range`, in order. See [`get_range_async`](Self::get_range_async).
    pub fn get_range(&self, range: Range<u64>) -> Result<Vec<Bytes>> {
        block_on(self.get_range_async(range))?
    }

    /// Record `index` decoded as CBOR into `T` (records written with `CborFormat`).
    pub fn get_as<T: DeserializeOwned>(&self, index: u64) -> Result<T> {
        decode_cbor(index, &self.get(index)?)
    }

    /// The async twin of [`get_as`](Self::get_as).
    pub async fn get_as_async<T: DeserializeOwned>(&self, index: u64) -> Result<T> {
        decode_cbor(index, &self.get_async(index).await?)
    }

    /// Record `index` decoded with `format`.
    pub fn get_with<F: Format>(&self, index: u64, format: &F) -> Result<F::Record> {
        format
            .decode(self.get(index)?)
            .map_err(|source| Error::Decode { index, source })
    }

    /// The async twin of [`get_with`](Self::get_with).
    pub async fn get_with_async<F: Format>(&self, index: u64, format: &F) -> Result<F::Record> {
        format
            .decode(self.get_async(index).await?)
            .map_err(|source| Error::Decode { index, source })
    }

    /// Annotation set `name` for this snapshot (its latest version when first asked for),
    /// downloaded and verified once per dataset. See
    /// [`annotations_async`](Self::annotations_async).
    pub fn annotations(&self, name: &str) -> Result<Arc<AnnotationSet>> {
        block_on(self.annotations_async(name))?
    }

    /// The value of annotation set `name` for record `index` (no request once the set is
    /// open).
    pub fn annotation<T: DeserializeOwned>(&self, name: &str, index: u64) -> Result<T> {
        self.annotations(name)?.get(index)
    }

    /// All records in order (consecutive records read together, see
    /// [`read_in_order`](Self::read_in_order)).
    pub fn iter(&self) -> Records<'_> {
        self.iter_range(0..self.len())
    }

    /// Records `range` in order (the range is clamped to the dataset).
    pub fn iter_range(&self, range: Range<u64>) -> Records<'_> {
        let end = range.end.min(self.len());
        let range = range.start.min(end)..end;
        let runs = self
            .read_in_order(range, RunBudget::default())
            .expect("a range clamped to the snapshot");
        Records {
            runs,
            buffer: VecDeque::new(),
        }
    }

    /// All records in order, decoded as CBOR into `T`.
    pub fn iter_as<T: DeserializeOwned>(&self) -> impl Iterator<Item = Result<T>> + '_ {
        self.iter()
            .zip(0u64..)
            .map(|(r, i)| r.and_then(|b| decode_cbor(i, &b)))
    }
}

/// In-order iterator over a [`Dataset`]'s records ([`Dataset::iter`]). After an error it
/// ends.
#[derive(Debug)]
pub struct Records<'a> {
    runs: InOrder<'a>,
    buffer: VecDeque<Bytes>,
}

impl Iterator for Records<'_> {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() {
            match block_on(self.runs.next_run()) {
                Err(e) => return Some(Err(e)),
                Ok(None) => return None,
                Ok(Some(Err(e))) => return Some(Err(e)),
                Ok(Some(Ok(run))) => self.buffer.extend(run.records),
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}

impl RecordSource for Dataset {
    type Error = Error;

    fn name(&self) -> String {
        format!(
            "{} (snapshot {})",
            self.root().store().describe(),
            self.snapshot().id()
        )
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
        Dataset::is_remote(self)
    }
    /// A remote dataset reads ahead ([`Dataset::read_ahead`]); a local one reads each batch
    /// when asked (`None`), as does one whose runtime cannot start.
    fn read_ahead(
        &self,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<guideloom_format::ReadAheadBatches<Error>> {
        if !Dataset::is_remote(self) {
            return None;
        }
        let options = crate::ReadAheadOptions::default()
            .with_batches(depth)
            .with_bytes(bytes);
        let ahead = Dataset::read_ahead(self, batches, options).ok()?;
        Some(Box::new(ahead))
    }
}
