//! Dataset roots for guideloom: create-only publication, ordered snapshots and an
//! etag-compare-and-swap annotation catalog, on a local directory, a declared mounted
//! bucket, `memory://` and (feature `s3`) `s3://`; read-only `http(s)://` roots (feature
//! `http`); whole-shard staging for in-order scans ([`Stager`]).
//!
//! [`Registry::resolve`] turns a URI into a store ([`StoreOptions`]: how it is reached);
//! [`Root`] is a store plus [`RootOptions`] (the shard size limit, staging), and
//! [`Root::open`] does both.
//!
//! A root holds (see `docs/publication.md` in the repository for the guarantees and the
//! tests that prove them):
//! ```text
//! dataset.json                  create-only identity
//! shards/<work_id>/<n>.glm      create-only shards
//! claims/<snapshot_id>.json     create-only claim of a snapshot id
//! log/<seq:020>.json            create-only manifest: THE commit point, totally ordered
//! snapshots/<snapshot_id>.json  create-only pointer to a log entry (size + sha256)
//! annotations/<set>/<ver>/values.jsonl   create-only annotation values
//! annotations/catalog.json      the one mutable object, updated by etag CAS
//! cards/<snapshot_id>/README.md  create-only dataset card (and its card.json)
//! ```
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> guideloom_publish::Result<()> {
//! use bytes::Bytes;
//! use guideloom_publish::{
//!     PublicationOptions, PublishMode, PublishRequest, RetryPolicy, Root, RootOptions,
//!     StoreOptions,
//! };
//!
//! let root = Root::open("memory://example", &StoreOptions::default(), RootOptions::default())?;
//! let shard = root.upload_shard("worker-000", 0, Bytes::from_static(b"encoded shard"), 3).await?;
//! let request = PublishRequest {
//!     dataset_id: "captures".into(),
//!     snapshot_id: "run-001".into(),
//!     shards: vec![shard],
//!     mode: PublishMode::Full,
//!     schema: None,
//! };
//! root.publish(&request, &PublicationOptions::default()).await?;
//!
//! let latest = root.latest().await?;
//! assert_eq!(latest.total_records(), 3);
//! let retry = RetryPolicy::contended_update();
//! root.publish_annotations("labels", "v1", &latest, &["a", "b", "c"], &retry).await?;
//! let labels = root.annotations("labels", None, &latest, false).await?;
//! assert_eq!(labels.get::<String>(2)?, "c");
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod annotations;
mod cache;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gc;
mod identity;
mod key;
mod manifest;
mod opened;
mod publication;
mod registry;
mod root;
mod shard_pipe;
mod shards;
mod snapshot_log;
mod staging;
mod store;
mod stream;
mod tags;
mod uri;

pub use annotations::{AnnotationEntry, AnnotationSet, Catalog, ExpiredEntry, TagEntry};
pub use cache::{
    CACHE_BYTES_ENV, CACHE_DIR_ENV, CacheOptions, CacheStats, DEFAULT_CACHE_BUDGET_BYTES,
    DEFAULT_FILL_CHUNK_BYTES, DEFAULT_FILL_REQUESTS, NodeCache,
};
pub use error::{BoxError, Error, Result};
pub use gc::{
    CLAIM_LEASE, Doomed, GcReport, RetentionPolicy, SnapshotBytes, StorageReport, WorkBytes,
};
/// The retry policy of every retry loop here (annotation and commit races, object-store
/// re-reads) and of the store clients: guideloom-io's, re-exported at this one path.
pub use guideloom_io::RetryPolicy;
pub use key::check_name;
pub use manifest::{
    Checksum, CompanionRef, DatasetIdentity, MAX_TAIL_CHECK_BYTES, Manifest, PublishMode,
    ShardFormat, ShardRef, StreamRef, TailChecksum,
};
pub use opened::{ARRAY_RECORD_RECORD_FORMAT, OpenedShard};
pub use publication::{PublicationOptions, PublishOutcome, PublishRequest, Published};
#[cfg(feature = "aws-profile")]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-profile")))]
pub use registry::s3::credentials;
pub use registry::{
    ALLOW_HTTP_VARIABLE, AZURE_ALLOW_HTTP_VARIABLE, AzureOptions,
    DEFAULT_OBJECT_STORE_CONNECT_TIMEOUT, DEFAULT_OBJECT_STORE_RETRY, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_TIMEOUT, ENDPOINT_VARIABLES, GCS_ALLOW_HTTP_VARIABLE,
    GCS_SKIP_SIGNATURE_VARIABLE, GcsOptions, REGION_VARIABLES, Registry, S3Addressing,
    S3Environment, S3Options, SchemeBackend, StoreOptions,
};
pub use root::{
    CARD_FORMAT, Capped, CappedRun, Card, CompactRequest, Compacted, DEFAULT_READ_AHEAD_BATCHES,
    DEFAULT_READ_AHEAD_BYTES, DEFAULT_TARGET_SHARD_BYTES, Dataset, DatasetOptions, InOrder,
    MAX_CARD_JSON_BYTES, MAX_CARD_README_BYTES, MAX_CARD_WALK, PROBE_WINDOW_BEFORE,
    PROBE_WINDOW_RECORDS, PlannedShard, ReadAhead, ReadAheadOptions, RecordRun, Records, Root,
    RootOptions, Split, card_json_key, card_readme_key, resolve_root,
};
pub use shards::{FooterInspector, Sha256Inspector, ShardFacts, ShardInspector};
pub use snapshot_log::{LogAudit, Snapshot};
pub use staging::{
    DEFAULT_PARALLEL_REQUESTS, Scan, StagedShard, Stager, StagingOptions, StagingStats,
};
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use store::faulty;
pub use store::{
    CasOutcome, Committed, CountingStore, Counts, CreateOutcome, Etag, EtagStyle, LocalReads,
    LocalStore, Object, ObjectInfo, ObjectStoreBucket, ObjectStoreRoot, Ours, PendingObject,
    RootStore, SPOOL_MEMORY_BYTES, Spooled, StoreCapabilities, Sweep, Written, cas_update,
    create_object, create_streamed,
};
pub use stream::StreamLayout;
pub use uri::RootUri;

#[cfg(feature = "http")]
pub use store::HttpRootStore;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync + std::fmt::Debug + 'static>() {}

    #[test]
    fn public_types_are_send_sync_debug() {
        assert_send_sync::<super::Root>();
        assert_send_sync::<super::Dataset>();
        assert_send_sync::<super::Snapshot>();
        assert_send_sync::<super::Error>();
        assert_send_sync::<super::Registry>();
        assert_send_sync::<super::ObjectStoreBucket>();
        assert_send_sync::<super::ObjectStoreRoot>();
        assert_send_sync::<super::LocalStore>();
        assert_send_sync::<super::AnnotationSet>();
        assert_send_sync::<std::sync::Arc<dyn super::RootStore>>();
        assert_send_sync::<super::PublicationOptions>();
        assert_send_sync::<super::RootOptions>();
        assert_send_sync::<super::NodeCache>();
        assert_send_sync::<super::CacheOptions>();
        assert_send_sync::<super::StoreOptions>();
        assert_send_sync::<super::StreamLayout>();
        assert_send_sync::<super::StreamRef>();
        assert_send_sync::<super::CompanionRef>();
    }
}
