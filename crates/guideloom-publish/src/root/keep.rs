//! Keeping a root: retention and garbage collection, tags, expired snapshots and storage
//! accounting ([`crate::gc`], [`crate::tags`]), as [`Root`] methods.

use std::collections::BTreeMap;

use super::Root;
use crate::annotations::{ExpiredEntry, TagEntry};
use crate::error::Result;
use crate::gc::{self, GcReport, RetentionPolicy, StorageReport};
use crate::tags;
use guideloom_io::RetryPolicy;

impl Root {
    /// Garbage collection under `policy` (docs/publication.md, "Garbage collection"): the
    /// snapshots the policy does not keep expire (the latest, the tagged and, by default,
    /// the annotated ones are always kept), then every object no kept snapshot, tag,
    /// annotation set or in-flight publication references, and older than the policy's
    /// grace, is deleted: expired snapshots' shards, failed writes' leftovers, stale
    /// claims, orphaned annotation values, old probes. Safe while publishers, annotators
    /// and taggers run (a publication racing it is stopped with
    /// [`Error::Collected`](crate::Error::Collected), never committed over a deleted
    /// shard). `dry_run`: nothing is written; the report lists what would go.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use std::time::Duration;
    /// use guideloom_publish::{
    ///     PublicationOptions, PublishMode, PublishRequest, RetentionPolicy, RetryPolicy, Root,
    ///     RootOptions, StoreOptions,
    /// };
    /// let dir = tempfile::tempdir().unwrap();
    /// let root = Root::open(dir.path().to_str().unwrap(), &StoreOptions::default(), RootOptions::default())?;
    /// for id in ["run-1", "run-2"] {
    ///     let shard = root.upload_shard(id, 0, bytes::Bytes::from_static(b"records"), 1).await?;
    ///     let request = PublishRequest {
    ///         dataset_id: "captures".into(),
    ///         snapshot_id: id.into(),
    ///         shards: vec![shard],
    ///         mode: PublishMode::Full,
    ///         schema: None,
    ///     };
    ///     root.publish(&request, &PublicationOptions::default()).await?;
    /// }
    /// // Keep the latest; no grace, so the first run's shard goes at once.
    /// let policy = RetentionPolicy { keep_last: 1, grace: Duration::ZERO, ..Default::default() };
    /// let report = root.gc(&policy, false, &RetryPolicy::contended_update()).await?;
    /// assert_eq!(report.expired[0].snapshot_id, "run-1");
    /// assert_eq!(report.deleted.len(), 1);
    /// assert!(root.snapshot("run-2").await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn gc(
        &self,
        policy: &RetentionPolicy,
        dry_run: bool,
        retry: &RetryPolicy,
    ) -> Result<GcReport> {
        gc::collect(&*self.store, &self.identity, policy, dry_run, retry).await
    }

    /// Storage accounting: bytes live and reclaimable under `policy` (a dry-run
    /// collection), per snapshot and per work id. Lists `shards/` once, reads every log
    /// entry.
    pub async fn storage(
        &self,
        policy: &RetentionPolicy,
        retry: &RetryPolicy,
    ) -> Result<StorageReport> {
        gc::storage(&*self.store, &self.identity, policy, retry).await
    }

    /// Every snapshot the retention policy expired, in log order (one GET of the catalog,
    /// one LIST of `gc/`, one GET per collection record).
    pub async fn expired(&self) -> Result<Vec<ExpiredEntry>> {
        gc::expired(&*self.store, &self.identity).await
    }

    /// Points tag `name` at snapshot `snapshot_id` (creating or moving it) by
    /// compare-and-swap of the catalog: its previous target, if any. Refused for an
    /// expired snapshot ([`Error::SnapshotExpired`](crate::Error::SnapshotExpired)) and on
    /// a declared mount.
    pub async fn tag(
        &self,
        name: &str,
        snapshot_id: &str,
        retry: &RetryPolicy,
    ) -> Result<Option<TagEntry>> {
        if crate::snapshot_log::by_pointer(&*self.store, &self.identity, name)
            .await?
            .is_some()
        {
            return Err(crate::Error::invalid(format!(
                "tag {name:?}: a snapshot has that id (a tag must not hide one)"
            )));
        }
        let snapshot = self.snapshot(snapshot_id).await?;
        tags::set(&*self.store, &self.identity, name, &snapshot, retry).await
    }

    /// Removes tag `name`: its last target ([`Error::NotFound`](crate::Error::NotFound) if
    /// there is none).
    pub async fn untag(&self, name: &str, retry: &RetryPolicy) -> Result<TagEntry> {
        tags::remove(&*self.store, &self.identity, name, retry).await
    }

    /// Every tag, by name (one GET of the catalog).
    pub async fn tags(&self) -> Result<BTreeMap<String, TagEntry>> {
        tags::all(&*self.store, &self.identity).await
    }
}
