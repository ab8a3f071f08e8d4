//! A dataset root: [`Root`], a store plus [`RootOptions`], and its public surface but for
//! the token-stream writers (`write_stream_shard[_with_meta]` and their `try_` twins, an
//! `impl Root` in `stream_write.rs`).
//!
//! Each method is a short delegation to the module of one protocol, written as free
//! functions over the store trait (`&dyn RootStore`), the way
//! [`create_object`](crate::create_object) and [`cas_update`](crate::cas_update) are:
//!
//! | methods | protocol module |
//! |---|---|
//! | [`identity`](Root::identity), [`init`](Root::init) | `identity`: `dataset.json` |
//! | [`publish`](Root::publish) | `publication`: verify, claim, commit, pointer |
//! | [`latest`](Root::latest), [`snapshot`](Root::snapshot), [`snapshots`](Root::snapshots), [`audit_log`](Root::audit_log) | `snapshot_log`: the log and its pointers |
//! | [`write_shard`](Root::write_shard), [`try_write_shard`](Root::try_write_shard), [`upload_shard`](Root::upload_shard) | `shards`: writing and checking shards |
//! | [`catalog`](Root::catalog), [`publish_annotations`](Root::publish_annotations), [`annotations`](Root::annotations) | `annotations`: values and the CAS catalog |
//! | [`reader`](Root::reader), [`reader_with`](Root::reader_with), [`open_latest`](Root::open_latest) | [`Dataset`] (this module's `reader`) |
//!
//! A root is built from a store on this side: [`Root::open`] resolves a URI through the
//! [global registry](Registry::global) (the one place a root calls the registry), and
//! [`Root::new`] takes any store.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use guideloom_format::{ReadOptions, ShardMetadata};
use guideloom_io::RetryPolicy;
use serde::Serialize;
use tracing::{Instrument, info_span};

use crate::annotations::{self, AnnotationEntry, AnnotationSet, Catalog};
use crate::cache::{CacheOptions, NodeCache};
use crate::error::Result;
use crate::identity::Identity;
use crate::manifest::{DatasetIdentity, ShardRef};
use crate::publication::{self, PublicationOptions, PublishRequest, Published};
use crate::registry::{Registry, StoreOptions};
use crate::shards;
use crate::snapshot_log::{self, LogAudit, Snapshot};
use crate::staging::{Stager, StagingOptions};
use crate::store::{RootStore, Sweep};

#[cfg(test)]
mod adopt_tests;
#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod capped_tests;
mod card;
#[cfg(test)]
mod card_tests;
mod compact;
#[cfg(test)]
mod compact_tests;
#[cfg(test)]
mod gc_tests;
#[cfg(test)]
mod here_tests;
mod keep;
#[cfg(test)]
mod prefetch_tests;
mod reader;
#[cfg(test)]
mod schema_tests;
mod stream_read;
mod stream_write;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_tests;

pub use card::{
    CARD_FORMAT, Card, MAX_CARD_JSON_BYTES, MAX_CARD_README_BYTES, MAX_CARD_WALK, Split,
    card_json_key, card_readme_key,
};
pub use compact::{CompactRequest, Compacted, DEFAULT_TARGET_SHARD_BYTES, PlannedShard};
pub use reader::{
    Capped, CappedRun, DEFAULT_READ_AHEAD_BATCHES, DEFAULT_READ_AHEAD_BYTES, Dataset,
    DatasetOptions, InOrder, PROBE_WINDOW_BEFORE, PROBE_WINDOW_RECORDS, ReadAhead,
    ReadAheadOptions, RecordRun, Records, resolve_root,
};

/// Default [`RootOptions::max_encoded_shard_bytes`]: S3's single-PUT cap, 5 GiB.
pub(crate) const DEFAULT_MAX_ENCODED_SHARD_BYTES: u64 = 5 << 30;

/// What a root does with its store, whatever the store (the root concern's one options
/// type): the shard size limit and whole-shard staging. How the store itself is reached is
/// [`StoreOptions`](crate::StoreOptions).
///
/// ```
/// use guideloom_publish::{Root, RootOptions, StoreOptions};
///
/// let options = RootOptions::default().with_max_encoded_shard_bytes(1 << 30);
/// let root = Root::open("memory://root-options-doc", &StoreOptions::default(), options)?;
/// assert_eq!(root.options().max_encoded_shard_bytes, 1 << 30);
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootOptions {
    /// Largest shard that may be written, uploaded or published (one PUT): default 5 GiB.
    pub max_encoded_shard_bytes: u64,
    /// Where and how much whole-shard staging (in-order scans) may store; its directory is
    /// also where shard writes to object stores spool their bytes before the PUT.
    pub staging: StagingOptions,
    /// The shared node cache of whole shards (off unless its directory is set; see
    /// [`NodeCache`]).
    pub cache: CacheOptions,
}

impl Default for RootOptions {
    fn default() -> Self {
        RootOptions {
            max_encoded_shard_bytes: DEFAULT_MAX_ENCODED_SHARD_BYTES,
            staging: StagingOptions::default(),
            cache: CacheOptions::default(),
        }
    }
}

impl RootOptions {
    /// Sets the largest shard written, uploaded or published
    /// ([`RootOptions::max_encoded_shard_bytes`]).
    #[must_use]
    pub fn with_max_encoded_shard_bytes(mut self, bytes: u64) -> Self {
        self.max_encoded_shard_bytes = bytes;
        self
    }

    /// Sets where and how much whole-shard staging may store ([`RootOptions::staging`]).
    #[must_use]
    pub fn with_staging(mut self, staging: StagingOptions) -> Self {
        self.staging = staging;
        self
    }

    /// Sets the shared node cache ([`RootOptions::cache`]).
    #[must_use]
    pub fn with_cache(mut self, cache: CacheOptions) -> Self {
        self.cache = cache;
        self
    }
}

/// A dataset root: a store plus options. Every operation of a call chain goes through this
/// one store. Cheap to clone: clones share the cached `dataset.json` and the stager.
#[derive(Debug, Clone)]
pub struct Root {
    store: Arc<dyn RootStore>,
    options: RootOptions,
    identity: Arc<Identity>,
    stager: Arc<OnceLock<Arc<Stager>>>,
    cache: Option<Arc<NodeCache>>,
}

impl Root {
    /// A root on an explicit store (never replaced by a registry default).
    pub fn new(store: Arc<dyn RootStore>, options: RootOptions) -> Self {
        Root {
            store,
            identity: Arc::default(),
            stager: Arc::default(),
            cache: NodeCache::new(&options.cache).map(Arc::new),
            options,
        }
    }

    /// A root for `uri`, its store resolved by the [global registry](Registry::global) with
    /// `store` options (a store registered for the URI's bucket wins; `memory://` names are
    /// shared across the process). For another registry, pass its store to
    /// [`Root::new`]: `Root::new(registry.resolve(uri, &store)?, options)`.
    ///
    /// ```
    /// use guideloom_publish::{Root, RootOptions, StoreOptions};
    ///
    /// let root = Root::open("memory://open-doc/captures", &StoreOptions::default(), RootOptions::default())?;
    /// assert!(root.store().describe().contains("memory://open-doc"));
    /// # Ok::<(), guideloom_publish::Error>(())
    /// ```
    pub fn open(uri: &str, store: &StoreOptions, options: RootOptions) -> Result<Self> {
        Ok(Root::new(Registry::global().resolve(uri, store)?, options))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn RootStore> {
        &self.store
    }

    /// The options.
    pub fn options(&self) -> &RootOptions {
        &self.options
    }

    /// The whole-shard stager of this root (created on first use from
    /// [`RootOptions::staging`], downloading through [`store`](Self::store)); shared by
    /// the root's clones and readers, so its budget holds for all of them.
    pub fn stager(&self) -> &Arc<Stager> {
        self.stager.get_or_init(|| {
            Arc::new(Stager::new(
                Arc::clone(&self.store),
                self.options.staging.clone(),
            ))
        })
    }

    /// The shared node cache of this root, when [`RootOptions::cache`] turns it on (clones
    /// share it).
    pub fn cache(&self) -> Option<&Arc<NodeCache>> {
        self.cache.as_ref()
    }

    /// The cache, when it serves this root's store (remote reads, or every store when
    /// [`CacheOptions::remote_only`] is off).
    pub(crate) fn read_cache(&self) -> Option<&Arc<NodeCache>> {
        self.cache
            .as_ref()
            .filter(|c| c.serves(self.store.as_ref()))
    }

    /// The options a shard write takes from this root's.
    fn shard_write(&self) -> shards::WriteOptions {
        shards::WriteOptions {
            max_bytes: self.options.max_encoded_shard_bytes,
            spool_dir: self.options.staging.directory(),
        }
    }

    /// Removes temporary files that crashed writers left in this root (local roots only; see
    /// [`RootStore::sweep_temporaries`]): `.…tmp` files at least `min_age` old whose writer
    /// process is gone. Safe beside running writers of this host; with writers on other
    /// hosts sharing the directory, pick a `min_age` longer than any write.
    pub async fn sweep_temporaries(&self, min_age: Duration) -> Result<Sweep> {
        self.store
            .sweep_temporaries(min_age)
            .instrument(info_span!("sweep_temporaries", root = %self.store.describe()))
            .await
    }

    /// Reads `dataset.json` (cached after the first success).
    /// [`Error::NotFound`](crate::Error::NotFound) if nothing was ever published.
    pub async fn identity(&self) -> Result<DatasetIdentity> {
        self.identity.get(&*self.store).await
    }

    /// Writes `dataset.json` for `dataset_id` if absent; fails with
    /// [`Error::DatasetMismatch`](crate::Error::DatasetMismatch) if the root belongs to
    /// another dataset.
    pub async fn init(&self, dataset_id: &str) -> Result<DatasetIdentity> {
        self.identity.init(&*self.store, dataset_id).await
    }

    /// Publishes a snapshot.
    ///
    /// 1. validate the request (shards within [`RootOptions::max_encoded_shard_bytes`]) and
    ///    `dataset.json` (written if absent);
    /// 2. verify shards: one HEAD each, sizes must match (and, with `verify_record_counts`,
    ///    the inspector's record counts and checksums) — nothing is written before this;
    /// 3. list `log/`: the latest entry is the claim's *base*;
    /// 4. claim the snapshot id (`claims/<id>.json`, create-only, recording the base): the
    ///    loser of a same-id race gets
    ///    [`Error::PublicationCollision`](crate::Error::PublicationCollision) here, unless its
    ///    request is identical (same dataset, id, mode and shards): it takes the claim over;
    /// 5. commit: read the log entries after the base (an identical request may have
    ///    committed already), build the manifest on the latest entry, create
    ///    `log/<latest+1>`; if another publisher took that number, re-list and retry
    ///    (bounded, jittered backoff) — an appender re-bases on the winner;
    /// 6. write the pointer `snapshots/<id>.json`.
    ///
    /// A retry of the same request after a failure resumes where the first attempt stopped,
    /// and identical requests running at once all succeed on one log entry: the one that
    /// wrote it gets [`PublishOutcome::Committed`](crate::PublishOutcome::Committed), the
    /// others [`PublishOutcome::AlreadyPublished`](crate::PublishOutcome::AlreadyPublished)
    /// with the same snapshot. A snapshot id is in the log at most once.
    pub async fn publish(
        &self,
        request: &PublishRequest,
        options: &PublicationOptions,
    ) -> Result<Published> {
        let limit = self.options.max_encoded_shard_bytes;
        publication::publish(&*self.store, &self.identity, limit, request, options).await
    }

    /// Opens the latest snapshot: LIST `log/`, GET the highest entry (size checked against
    /// the listing), validate. [`Error::NotFound`](crate::Error::NotFound) (`log/`) if
    /// nothing is published.
    ///
    /// On a store that cannot list (`http(s)://` roots, [`StoreCapabilities::list`]
    /// `false`), the highest entry is found by probing with GETs of at most 64 KiB instead:
    /// for latest sequence number `n`, `2 * (floor(log2 n) + 1)` GETs, the last of which
    /// usually brings the entry whole. `dataset.json` is not read: the entry's dataset id is
    /// checked against it only when this root has read it already (see
    /// [`identity`](Self::identity)). On a store without atomic writes (a declared mount) an
    /// incomplete newest entry (in flight, or left by a killed writer) is skipped.
    ///
    /// [`StoreCapabilities::list`]: crate::StoreCapabilities::list
    pub async fn latest(&self) -> Result<Snapshot> {
        snapshot_log::latest(&*self.store, &self.identity).await
    }

    /// Opens the snapshot `snapshot_id`, or the one tag `snapshot_id` names: GET its
    /// pointer, GET the log entry it names and check size and SHA-256 against the pointer.
    /// Without a pointer, the catalog's tags are read (one GET): a tag of that name opens
    /// its snapshot the same way. Otherwise (a publisher crashed after committing, before
    /// its pointer) this falls back to scanning `log/` from the newest entry (on a store
    /// that cannot list, the newest is found by probing, as in [`latest`](Self::latest)).
    /// A snapshot id wins over a tag of the same name (tagging refuses such a name, but a
    /// snapshot published later may take it). An expired snapshot opens (its manifest is
    /// history); its records are gone ([`expired`](Self::expired)).
    pub async fn snapshot(&self, snapshot_id: &str) -> Result<Snapshot> {
        crate::key::check_name("snapshot id", snapshot_id)?;
        let (store, identity) = (&*self.store, &*self.identity);
        match snapshot_log::by_pointer(store, identity, snapshot_id).await {
            Ok(Some(snapshot)) => return Ok(snapshot),
            Ok(None) => {}
            Err(e) if store.capabilities().atomic_writes => return Err(e),
            Err(_) => {}
        }
        let dataset_id = match identity.cached() {
            Some(id) => id.dataset_id.clone(),
            None => identity.get(store).await?.dataset_id,
        };
        if let Some(tag) = crate::tags::find(store, &dataset_id, snapshot_id).await? {
            let snapshot = snapshot_log::by_id(store, identity, &tag.snapshot_id).await?;
            if snapshot.seq() != tag.seq {
                return Err(crate::Error::corrupt(
                    crate::tags::tag_key(snapshot_id),
                    format!(
                        "names snapshot {:?} at #{}, which is #{}",
                        tag.snapshot_id,
                        tag.seq,
                        snapshot.seq()
                    ),
                ));
            }
            return Ok(snapshot);
        }
        snapshot_log::by_id(store, identity, snapshot_id).await
    }

    /// Every snapshot, in order (one LIST plus one GET per snapshot; on a store that cannot
    /// list, the probe of [`latest`](Self::latest) instead of the LIST).
    pub async fn snapshots(&self) -> Result<Vec<Snapshot>> {
        snapshot_log::all(&*self.store, &self.identity).await
    }

    /// Audits the log for gaps (see [`LogAudit`]): one LIST, or on a store that cannot list,
    /// the probe, one HEAD per entry below the latest, and about 75 HEADs above it (a gap
    /// whose later entries all avoid those numbers stays invisible without a listing).
    pub async fn audit_log(&self) -> Result<LogAudit> {
        snapshot_log::audit(&*self.store).await
    }

    /// Writes `records` (already-encoded payloads) as shard `index` of worker `work_id`,
    /// create-only at `shards/<work_id>/<index>.glm`, encoding each record once straight
    /// into the store ([`RootStore::begin_create`]): on a local root into the create-only
    /// temporary file (fsynced and linked once complete); on an object store into its spool
    /// (the first MiB in memory, the rest in an unnamed file in
    /// [`RootOptions::staging`]'s directory), sent by one create-only PUT from the file's
    /// mapping ([`Spooled`](crate::Spooled)). Either way anonymous memory is the index (12
    /// bytes per record) and a write buffer, whatever the shard's size. A shard is refused
    /// ([`Error::ShardTooLarge`](crate::Error::ShardTooLarge)) the moment its running size
    /// passes [`RootOptions::max_encoded_shard_bytes`]: no further record is pulled, nothing
    /// appears under the key, and no request is made. A full spool or root directory is
    /// [`Error::DiskFull`](crate::Error::DiskFull) naming it, with no request either.
    ///
    /// The records are pulled on this task (the iterator may borrow and need not be
    /// `Send`); the encoding (CRC32C, index) and the writes run on a blocking thread
    /// ([`RootStore::begin_create_owned`]), fed batches of about 1 MiB, under any runtime
    /// flavour: the executor's thread only copies the records into the batches.
    ///
    /// The reference carries the record count and the footer CRC (from the encoder, not
    /// parsed back), so `verify_record_counts` with
    /// [`FooterInspector`](crate::FooterInspector) costs one 64-byte ranged read per shard.
    /// Re-running a worker collides
    /// ([`Error::PublicationCollision`](crate::Error::PublicationCollision)) unless the
    /// bytes are identical. Nothing is hashed while writing: only when the key is already
    /// taken are the bytes compared with the object there (a local root compares its
    /// temporary file with the final file; a spool's bytes are compared with the object
    /// read back in 8 MiB ranges), see [`create_streamed`](crate::create_streamed).
    pub async fn write_shard<I, R>(
        &self,
        work_id: &str,
        index: u64,
        metadata: ShardMetadata,
        records: I,
    ) -> Result<ShardRef>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        shards::write(
            &*self.store,
            &self.shard_write(),
            work_id,
            index,
            metadata,
            records,
        )
        .await
    }

    /// [`write_shard`](Self::write_shard) of records that are produced fallibly (encoded as
    /// they are written, say): the first `Err` stops the write — nothing appears under the
    /// key, no request is made — and is returned as the inner `Err`; the outer `Err` is the
    /// root's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::ShardMetadata;
    /// use guideloom_publish::Root;
    ///
    /// let root = Root::open("memory://try-write", &Default::default(), Default::default())?;
    /// let meta = || ShardMetadata::new("raw", "documents");
    /// let good = (0..3u8).map(|i| Ok::<_, String>(vec![i; 4]));
    /// let shard = root.try_write_shard("w", 0, meta(), good).await?.unwrap();
    /// assert_eq!(shard.record_count, 3);
    /// let bad = [Ok(vec![1u8]), Err("record 1 does not encode".to_owned())];
    /// let err = root.try_write_shard("w", 1, meta(), bad).await?.unwrap_err();
    /// assert_eq!(err, "record 1 does not encode");
    /// assert!(root.store().head("shards/w/00000001.glm").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn try_write_shard<I, R, E>(
        &self,
        work_id: &str,
        index: u64,
        metadata: ShardMetadata,
        records: I,
    ) -> Result<std::result::Result<ShardRef, E>>
    where
        I: IntoIterator<Item = std::result::Result<R, E>>,
        R: AsRef<[u8]>,
    {
        shards::try_write(
            &*self.store,
            &self.shard_write(),
            work_id,
            index,
            metadata,
            records,
        )
        .await
    }

    /// Uploads an encoded shard create-only as `shards/<work_id>/<index>.glm` and returns
    /// its reference (with a SHA-256 checksum): the same create-only write as
    /// [`write_shard`](Self::write_shard)'s. Refused before any request if it is larger
    /// than [`RootOptions::max_encoded_shard_bytes`]. Re-running a worker collides
    /// ([`Error::PublicationCollision`](crate::Error::PublicationCollision)) unless the
    /// bytes are identical.
    pub async fn upload_shard(
        &self,
        work_id: &str,
        index: u64,
        body: Bytes,
        record_count: u64,
    ) -> Result<ShardRef> {
        let limit = self.options.max_encoded_shard_bytes;
        shards::upload(&*self.store, limit, work_id, index, body, record_count).await
    }

    /// Writes `records` (already encoded bytes) as an ArrayRecord file, create-only as
    /// `shards/<work_id>/<index>.array_record`, with guideloom-arrayrecord's writer and
    /// `options` (array_record's option string parsed, e.g. `"group_size:1,zstd:3"`; the
    /// default is the Python writer's): a file the `array_record` package and Grain read.
    /// Streamed like [`write_shard`](Self::write_shard) (one group of records in memory, the
    /// writer and its writes on a blocking thread fed batches of about 1 MiB), refused past
    /// [`RootOptions::max_encoded_shard_bytes`] with nothing written (the refusal comes at a
    /// chunk's write, which the task pulling the records learns at its next batch: up to two
    /// batches more may have been pulled), and idempotent for identical bytes. The reference has format
    /// [`ShardFormat::ArrayRecord`](crate::ShardFormat::ArrayRecord) and a SHA-256 checksum.
    pub async fn write_array_record_shard<I, R>(
        &self,
        work_id: &str,
        index: u64,
        options: guideloom_arrayrecord::ArrayRecordWriterOptions,
        records: I,
    ) -> Result<ShardRef>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        shards::write_array_record(
            &*self.store,
            &self.shard_write(),
            work_id,
            index,
            options,
            records,
        )
        .await
    }

    /// [`write_array_record_shard`](Self::write_array_record_shard) of records produced
    /// fallibly (encoded as they are written, say), as
    /// [`try_write_shard`](Self::try_write_shard) is for native shards: the first `Err`
    /// stops the write — nothing appears under the key, no request is made — and is
    /// returned as the inner `Err`; the outer `Err` is the root's.
    pub async fn try_write_array_record_shard<I, R, E>(
        &self,
        work_id: &str,
        index: u64,
        options: guideloom_arrayrecord::ArrayRecordWriterOptions,
        records: I,
    ) -> Result<std::result::Result<ShardRef, E>>
    where
        I: IntoIterator<Item = std::result::Result<R, E>>,
        R: AsRef<[u8]>,
    {
        shards::try_write_array_record(
            &*self.store,
            &self.shard_write(),
            work_id,
            index,
            options,
            records,
        )
        .await
    }

    /// A reference to an ArrayRecord file already in the root at `key` — written by the
    /// `array_record` package, TFDS, Grain or guideloom-arrayrecord, copied or uploaded
    /// as-is — so it can be published as a shard of a snapshot ([`publish`](Self::publish))
    /// **without rewriting a byte**. Costs one HEAD (the size) and one tail read (the
    /// footer, every postscript and footer hash checked, giving the record count); the
    /// reference's format is [`ShardFormat::ArrayRecord`](crate::ShardFormat::ArrayRecord)
    /// and it has no checksum. A missing key is [`Error::NotFound`](crate::Error::NotFound),
    /// a key outside the root [`Error::InvalidArgument`](crate::Error::InvalidArgument), a
    /// file that is not ArrayRecord [`Error::ArrayRecordShard`](crate::Error::ArrayRecordShard).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use guideloom_arrayrecord::ArrayRecordWriter;
    /// use guideloom_publish::{
    ///     PublicationOptions, PublishMode, PublishRequest, Root, RootOptions, ShardFormat,
    ///     StoreOptions,
    /// };
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = ArrayRecordWriter::create(dir.path().join("train.array_record"), "".parse()?)?;
    /// for r in [&b"a"[..], b"bb", b"ccc"] {
    ///     w.write(r)?;
    /// }
    /// w.finish()?;
    /// let root = Root::open(dir.path().to_str().unwrap(), &StoreOptions::default(), RootOptions::default())?;
    /// let shard = root.adopt_array_record("train.array_record").await?;
    /// assert_eq!((shard.record_count, shard.format), (3, ShardFormat::ArrayRecord));
    /// let request = PublishRequest {
    ///     dataset_id: "d".into(),
    ///     snapshot_id: "s".into(),
    ///     shards: vec![shard],
    ///     mode: PublishMode::Full,
    ///     schema: None,
    /// };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    /// let reader = root.open_latest().await?;
    /// assert_eq!(&reader.get_async(1).await?[..], b"bb");
    /// # Ok(()) }
    /// ```
    pub async fn adopt_array_record(&self, key: &str) -> Result<ShardRef> {
        shards::adopt_array_record(&*self.store, key)
            .instrument(info_span!("adopt_array_record", key))
            .await
    }

    /// A reference to the native shard already at `key`, `size` bytes long (from a listing
    /// or a HEAD): the [`ShardRef`] its writer returned, for a shard written by another
    /// process or an earlier run, ready to [`publish`](Self::publish). Nothing is written.
    ///
    /// The record count and footer checksum come from the footer; a stream shard
    /// ([`write_stream_shard`](Self::write_stream_shard)) gets its
    /// [`stream`](ShardRef::stream) from its metadata (element type, element count), with
    /// its metadata companion `<n>.meta.glm` when one exists. Costs one ranged read of the
    /// shard's tail (no index, no data), and for a stream shard one HEAD for the companion
    /// plus one tail read of it. A damaged footer or metadata is [`Error::Shard`](crate::Error::Shard); a
    /// companion that does not match its shard is [`Error::Verification`](crate::Error::Verification).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_publish::Root;
    ///
    /// let root = Root::open("memory://adopt-shard-doc", &Default::default(), Default::default())?;
    /// let docs: [(&[u32], &str); 2] = [(&[1, 2, 3], "a"), (&[4], "b")];
    /// let written = root.write_stream_shard_with_meta("w", 0, docs).await?;
    /// // Another process sees only the object: the same reference, companion included.
    /// let adopted = root.adopt_shard(&written.key, written.size).await?;
    /// assert_eq!(adopted, written);
    /// assert_eq!(adopted.stream.as_ref().map(|s| s.elements), Some(4));
    /// # Ok(()) }
    /// ```
    pub async fn adopt_shard(&self, key: &str, size: u64) -> Result<ShardRef> {
        shards::adopt(&*self.store, key, size)
            .instrument(info_span!("adopt_shard", key, size))
            .await
    }

    /// Reads the annotation catalog (an empty one if none exists yet).
    pub async fn catalog(&self) -> Result<Catalog> {
        annotations::catalog(&*self.store, &self.identity).await
    }

    /// Publishes annotation set `set` at `version` for the records of `snapshot`: the values
    /// object create-only, then the catalog entry by compare-and-swap (bounded by `retry`).
    ///
    /// `values.len()` must equal the snapshot's record count
    /// ([`Error::CountMismatch`](crate::Error::CountMismatch)). Refused up front on a
    /// declared mounted bucket
    /// ([`Error::MountedBucketCannotAnnotate`](crate::Error::MountedBucketCannotAnnotate)).
    pub async fn publish_annotations<T: Serialize>(
        &self,
        set: &str,
        version: &str,
        snapshot: &Snapshot,
        values: &[T],
        retry: &RetryPolicy,
    ) -> Result<AnnotationEntry> {
        let (store, identity) = (&*self.store, &*self.identity);
        annotations::publish(store, identity, set, version, snapshot, values, retry).await
    }

    /// Opens annotation set `set` (at `version`, or its latest) for the records of
    /// `snapshot`: downloaded, its size and SHA-256 checked against the catalog. A set that
    /// annotates another snapshot is refused with
    /// [`Error::AnnotationSnapshotMismatch`](crate::Error::AnnotationSnapshotMismatch)
    /// unless `allow_other_snapshot`; even then its value count must equal `snapshot`'s
    /// record count. A reader caches opened sets ([`Dataset::annotations`]).
    pub async fn annotations(
        &self,
        set: &str,
        version: Option<&str>,
        snapshot: &Snapshot,
        allow_other_snapshot: bool,
    ) -> Result<AnnotationSet> {
        let (store, identity) = (&*self.store, &*self.identity);
        annotations::open(
            store,
            identity,
            set,
            version,
            snapshot,
            allow_other_snapshot,
        )
        .await
    }

    /// A reader of `snapshot`'s records (no request until the first read).
    pub fn reader(&self, snapshot: Snapshot) -> Dataset {
        self.reader_with(snapshot, ReadOptions::default())
    }

    /// A reader of `snapshot`'s records with shard read `options` (record CRC
    /// verification, speculative tail); no request until the first read.
    pub fn reader_with(&self, snapshot: Snapshot, options: ReadOptions) -> Dataset {
        Dataset::new(self.clone(), snapshot, options)
    }

    /// Opens the latest snapshot ([`latest`](Self::latest)) for reading.
    pub async fn open_latest(&self) -> Result<Dataset> {
        Ok(self.reader(self.latest().await?))
    }
}
