//! Writing and publishing datasets: [`Publisher`] (sync) and the async helpers
//! [`write_cbor_shard`] and [`publish_cbor`], re-exported at the crate root.

use std::sync::Arc;

use guideloom_format::ShardMetadata;
use guideloom_publish::{
    AnnotationEntry, PublicationOptions, PublishMode, PublishRequest, Published, Registry,
    RetryPolicy, Root, RootOptions, ShardRef, Snapshot, StoreOptions,
};
use serde::Serialize;

use crate::error::{Error, Result};
use guideloom_io::bridge::Bridge;
use guideloom_publish::{Dataset, DatasetOptions, resolve_root};

/// The record format name of shards written by [`Publisher::write_shard`] (the same as
/// [`CborFormat`](crate::CborFormat)'s).
const CBOR_FORMAT: &str = "cbor";

/// Encodes record `index` of shard `shard` of `work_id` as CBOR (one item, as [`CborFormat`]
/// does), naming the record at fault in the error.
///
/// [`CborFormat`]: crate::CborFormat
fn encode_one<T: Serialize>(
    work_id: &str,
    shard: u64,
    index: usize,
    record: &T,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    guideloom_format::cbor::encode_into(record, &mut out).map_err(|e| Error::Encode {
        work_id: work_id.to_owned(),
        shard,
        index: index as u64,
        source: Box::new(e),
    })?;
    Ok(out)
}

/// Writes `records` as CBOR shard `n` of `work_id` in `root` (create-only), each record
/// encoded as it is written into the store (see [`Root::write_shard`]): memory is one record
/// and the shard's index, on a local root and on an object store (whose spool is a file in
/// the staging directory). The async piece behind [`Publisher::write_shard`]
/// and [`publish_cbor`]. A record that does not encode stops the write with
/// [`Error::Encode`]; nothing is written.
pub async fn write_cbor_shard<I>(root: &Root, work_id: &str, n: u64, records: I) -> Result<ShardRef>
where
    I: IntoIterator,
    I::Item: Serialize,
{
    let meta = ShardMetadata::new(CBOR_FORMAT, "documents");
    let encoded = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| encode_one(work_id, n, i, &r));
    root.try_write_shard(work_id, n, meta, encoded).await?
}

/// Writes `records` as CBOR-encoded shards of `shard_records` records each and publishes
/// them as snapshot `snapshot_id` of dataset `dataset_id` in `root` (a convenience built on
/// [`write_cbor_shard`] and [`Root::publish`]). Returns the snapshot. Without tokio, use
/// [`Publisher`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> guideloom::Result<()> {
/// use guideloom::{DatasetOptions, publish_cbor, resolve_root};
///
/// let root = resolve_root("memory://publish-cbor-doc", &DatasetOptions::default())?;
/// let records: Vec<String> = (0..10).map(|i| format!("record {i}")).collect();
/// let snapshot = publish_cbor(&root, "example", "s1", &records, 4, "writer-0").await?;
/// assert_eq!((snapshot.total_records(), snapshot.shards().len()), (10, 3));
/// # Ok(()) }
/// ```
pub async fn publish_cbor<T>(
    root: &Root,
    dataset_id: &str,
    snapshot_id: &str,
    records: &[T],
    shard_records: usize,
    work_id: &str,
) -> Result<Snapshot>
where
    T: Serialize,
{
    let mut shards = Vec::new();
    for (n, chunk) in records.chunks(shard_records.max(1)).enumerate() {
        shards.push(write_cbor_shard(root, work_id, n as u64, chunk).await?);
    }
    let request = PublishRequest {
        dataset_id: dataset_id.to_owned(),
        snapshot_id: snapshot_id.to_owned(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    Ok(root
        .publish(&request, &PublicationOptions::default())
        .await?
        .into_snapshot())
}

/// Synchronous writing and publication to one dataset root. Cheap to clone.
///
/// A training-pipeline author who produces records in plain threads writes shards, publishes
/// them as a snapshot, and annotates it, all through blocking calls. [`Publisher`] drives
/// guideloom-publish's async root operations on the process's one runtime
/// (`io::bridge::Bridge`, as [`Dataset`] does): [`Root::write_shard`], [`Root::publish`] and
/// [`Root::publish_annotations`]. The guarantees are theirs (create-only shards, one
/// totally ordered log entry per snapshot, compare-and-swap catalog updates), see
/// `docs/publication.md`.
///
/// Call it from plain threads. A call made inside an async task runs too, but blocks that
/// task's thread: use [`Root`]'s async methods there ([`Publisher::root`]), or
/// [`write_cbor_shard`] and [`publish_cbor`].
///
/// ```
/// # fn main() -> guideloom::Result<()> {
/// use guideloom::{PublishMode, Publisher};
/// # let tmp = tempfile::tempdir().unwrap();
/// # let root = tmp.path().join("captions");
/// # let root = root.to_str().unwrap();
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Caption {
///     id: u64,
///     text: String,
/// }
///
/// let publisher = Publisher::open(root)?; // a path, file://, s3://..., memory://
/// let mut shards = Vec::new();
/// for (n, chunk) in (0..10u64).collect::<Vec<_>>().chunks(4).enumerate() {
///     let records: Vec<Caption> =
///         chunk.iter().map(|&id| Caption { id, text: format!("caption {id}") }).collect();
///     shards.push(publisher.write_shard("worker-0", n as u64, &records)?); // CBOR records
/// }
/// let snapshot = publisher.publish("captions", "v1", shards, PublishMode::Full)?;
/// assert_eq!(snapshot.total_records(), 10);
/// let quality: Vec<f32> = (0..10).map(|i| i as f32 / 10.0).collect();
/// publisher.publish_annotations("quality", "v1", &snapshot, &quality)?;
///
/// let ds = publisher.dataset()?; // read it back (the latest snapshot)
/// let third: Caption = ds.get_as(3)?;
/// assert_eq!(third.text, "caption 3");
/// assert_eq!(ds.annotation::<f32>("quality", 5)?, 0.5);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Publisher {
    root: Root,
    retry: RetryPolicy,
}

impl Publisher {
    /// Opens the root at `uri` for writing (a local path, `file://`, `memory://`, `s3://`
    /// with feature `s3`). A local directory is created by the first write.
    pub fn open(uri: &str) -> Result<Self> {
        Self::open_with(uri, StoreOptions::default())
    }

    /// Opens the root at `uri` with storage `options` (e.g. `mount: true` for a local path
    /// that is a mounted bucket, or S3 endpoint settings).
    pub fn open_with(uri: &str, options: StoreOptions) -> Result<Self> {
        Self::open_in(uri, options, None)
    }

    /// Like [`open_with`](Self::open_with), resolving `uri` through `registry` instead of
    /// [`Registry::global`].
    pub fn open_in(
        uri: &str,
        options: StoreOptions,
        registry: Option<Arc<Registry>>,
    ) -> Result<Self> {
        let dataset_options = DatasetOptions {
            store: options,
            registry,
            ..DatasetOptions::default()
        };
        let root = resolve_root(uri, &dataset_options)?;
        Ok(Publisher {
            root,
            retry: RetryPolicy::contended_update(),
        })
    }

    /// A publisher writing through `root`, already resolved (its store and options kept).
    pub fn from_root(root: Root) -> Self {
        Publisher {
            root,
            retry: RetryPolicy::contended_update(),
        }
    }

    /// Bounds the compare-and-swap retries of annotation publication (default
    /// [`RetryPolicy::contended_update`]: 64 attempts, 2 ms doubling up to 500 ms).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Rebuilds the root on the same store with `options` (the shard size limit, whole-shard
    /// staging; default [`RootOptions::default`]).
    ///
    /// ```
    /// use guideloom::publish::Error as PublishError;
    /// use guideloom::{Error, Publisher, RootOptions, ShardMetadata};
    ///
    /// let small = RootOptions { max_encoded_shard_bytes: 64, ..RootOptions::default() };
    /// let publisher = Publisher::open("memory://root-options-doc")?.root_options(small);
    /// let meta = ShardMetadata::new("raw", "documents");
    /// let err = publisher.write_raw_shard("w", 0, meta, [vec![0u8; 100]]).unwrap_err();
    /// assert!(matches!(err, Error::Publish(PublishError::ShardTooLarge { limit: 64, .. })));
    /// # Ok::<(), guideloom::Error>(())
    /// ```
    pub fn root_options(mut self, options: RootOptions) -> Self {
        self.root = Root::new(Arc::clone(self.root.store()), options);
        self
    }

    /// The root (for its async API).
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Writes `records` (any serde type, by value or by reference: a `&[T]`, a `Vec<T>`,
    /// an iterator) as CBOR shard `n` of worker `work_id`, create-only at
    /// `shards/<work_id>/<n>.glm`, encoding each record as it is written (see
    /// [`Root::write_shard`]: on a local root memory stays the shard's index, 12 bytes per
    /// record, whatever its size). Returns the reference to pass to
    /// [`publish`](Self::publish). Re-writing identical bytes succeeds; different bytes under
    /// the same key are a publication collision.
    pub fn write_shard<I>(&self, work_id: &str, n: u64, records: I) -> Result<ShardRef>
    where
        I: IntoIterator,
        I::Item: Serialize,
    {
        run(write_cbor_shard(&self.root, work_id, n, records))
    }

    /// Writes already encoded records (raw bytes, from any iterator) as an ArrayRecord file,
    /// shard `n` of `work_id` at `shards/<work_id>/<n>.array_record`, with array_record's
    /// writer `options` (e.g. `"group_size:1,zstd:3".parse()?`; see
    /// [`Root::write_array_record_shard`]). Published like any shard; read back by
    /// [`Dataset`] as raw bytes, and by the `array_record` package and Grain as they are.
    ///
    /// ```
    /// use guideloom::{PublishMode, Publisher, ShardFormat};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let publisher = Publisher::open("memory://publisher-array-record-doc")?;
    /// let records = [b"alpha".as_slice(), b"beta"];
    /// let shard = publisher.write_array_record_shard("w", 0, "group_size:1".parse()?, records)?;
    /// assert_eq!((shard.format, shard.record_count), (ShardFormat::ArrayRecord, 2));
    /// publisher.publish("d", "s1", vec![shard], PublishMode::Full)?;
    /// assert_eq!(&publisher.dataset()?.get(1)?[..], b"beta");
    /// # Ok(()) }
    /// ```
    pub fn write_array_record_shard<I, R>(
        &self,
        work_id: &str,
        n: u64,
        options: guideloom_arrayrecord::ArrayRecordWriterOptions,
        records: I,
    ) -> Result<ShardRef>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        run(self
            .root
            .write_array_record_shard(work_id, n, options, records))
    }

    /// Writes already encoded records (raw bytes, from any iterator) as shard `n` of
    /// `work_id`, with `metadata` naming their format (e.g.
    /// `ShardMetadata::new("raw", "documents")`), streamed as [`write_shard`](Self::write_shard)
    /// streams.
    pub fn write_raw_shard<I, R>(
        &self,
        work_id: &str,
        n: u64,
        metadata: ShardMetadata,
        records: I,
    ) -> Result<ShardRef>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        run(self.root.write_shard(work_id, n, metadata, records))
    }

    /// Writes `documents` (token slices of one [`Element`] type: `&[u16]`, `Vec<u32>`, ...)
    /// as stream shard `n` of `work_id`, create-only at `shards/<work_id>/<n>.glm`: one
    /// record per document, the reference recording the element type and token count
    /// ([`ShardRef::stream`]). A snapshot of stream shards is a token stream: read it by
    /// document or token slice ([`Dataset::tokens`]) and in fixed-length windows
    /// ([`TokenWindows`](crate::TokenWindows)). See [`Root::write_stream_shard`].
    ///
    /// [`Element`]: crate::Element
    pub fn write_stream_shard<E, I, D>(
        &self,
        work_id: &str,
        n: u64,
        documents: I,
    ) -> Result<ShardRef>
    where
        E: guideloom_format::Element,
        I: IntoIterator<Item = D>,
        D: AsRef<[E]>,
    {
        run(self.root.write_stream_shard(work_id, n, documents))
    }

    /// [`write_stream_shard`](Self::write_stream_shard) of `(tokens, metadata)` documents,
    /// the metadata (any serde type) stored as CBOR in a companion shard published with
    /// the stream shard, read back by [`Dataset::document_meta`]. See
    /// [`Root::write_stream_shard_with_meta`].
    ///
    /// ```
    /// # fn main() -> guideloom::Result<()> {
    /// use guideloom::{PublishMode, Publisher};
    ///
    /// let publisher = Publisher::open("memory://stream-meta-doc")?;
    /// let docs = [(vec![1u16, 2, 3], "https://a.example"), (vec![4], "https://b.example")];
    /// let shard = publisher.write_stream_shard_with_meta("w", 0, docs)?;
    /// publisher.publish("web", "v1", vec![shard], PublishMode::Full)?;
    /// let ds = publisher.dataset()?;
    /// assert_eq!(ds.document_meta::<String>(1)?, "https://b.example");
    /// assert_eq!(&*ds.document::<u16>(0)?, &[1, 2, 3]);
    /// # Ok(()) }
    /// ```
    pub fn write_stream_shard_with_meta<E, M, I, D>(
        &self,
        work_id: &str,
        n: u64,
        documents: I,
    ) -> Result<ShardRef>
    where
        E: guideloom_format::Element,
        M: Serialize,
        I: IntoIterator<Item = (D, M)>,
        D: AsRef<[E]>,
    {
        run(self
            .root
            .write_stream_shard_with_meta(work_id, n, documents))
    }

    /// Publishes `shards` as snapshot `snapshot_id` of dataset `dataset_id`:
    /// [`PublishMode::Full`] makes them the whole snapshot, [`PublishMode::Append`] extends
    /// the latest snapshot with them. Default [`PublicationOptions`]. Idempotent: an
    /// identical request (a retry, or the same publication running in another process)
    /// returns the same snapshot; [`publish_request`](Self::publish_request) also says
    /// whether this call committed it.
    pub fn publish(
        &self,
        dataset_id: &str,
        snapshot_id: &str,
        shards: Vec<ShardRef>,
        mode: PublishMode,
    ) -> Result<Snapshot> {
        let request = PublishRequest {
            dataset_id: dataset_id.to_owned(),
            snapshot_id: snapshot_id.to_owned(),
            shards,
            mode,
            schema: None,
        };
        Ok(self
            .publish_request(&request, &PublicationOptions::default())?
            .snapshot)
    }

    /// Publishes `request` with `options` (e.g. record-count verification): the snapshot, and
    /// whether this call committed it or found it committed by an identical request
    /// ([`PublishOutcome`](crate::PublishOutcome)).
    pub fn publish_request(
        &self,
        request: &PublishRequest,
        options: &PublicationOptions,
    ) -> Result<Published> {
        run(self.root.publish(request, options))
    }

    /// Publishes annotation set `set` at `version` for `snapshot`: one value per record, in
    /// record order. Refused on a declared mounted bucket (publish annotations through the
    /// `s3://` root of the same dataset).
    pub fn publish_annotations<T: Serialize>(
        &self,
        set: &str,
        version: &str,
        snapshot: &Snapshot,
        values: &[T],
    ) -> Result<AnnotationEntry> {
        run(self
            .root
            .publish_annotations(set, version, snapshot, values, &self.retry))
    }

    /// The latest snapshot.
    pub fn latest(&self) -> Result<Snapshot> {
        run(self.root.latest())
    }

    /// A [`Dataset`] over the latest snapshot.
    pub fn dataset(&self) -> Result<Dataset> {
        Ok(self.root.reader(self.latest()?))
    }
}

/// Runs `future` through the process's one [`Bridge`], from any thread.
pub(crate) fn run<T, E: Into<Error>>(
    future: impl std::future::Future<Output = std::result::Result<T, E>>,
) -> Result<T> {
    let bridge = Bridge::shared().map_err(Error::runtime)?;
    bridge.block_on(future).map_err(Into::into)
}
