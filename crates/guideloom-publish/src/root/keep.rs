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
    /// use guideloom_publish::{RetentionPolicy, RetryPolicy, Root};
    /// let dir = tempfile::tempdir().unwrap();
    /// let root = Root::local(dir.path());
    /// let policy = RetentionPolicy { keep_last: 5, grace: Duration::from_secs(3600), ..Default::default() };
    /// # let _ = &root;
    /// // On a root with snapshots: root.gc(&policy, true, &RetryPolicy::contended_update()).await?
    /// # let _ = policy;
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
