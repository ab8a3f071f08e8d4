//! Unit tests of garbage collection (`crate::gc`), tags and expiry on local and memory roots; the races
//! with real publishers (threads, processes, moto and RGW) are in `tests/tests/it/gc_*.rs`,
//! the protocol's every interleaving in `model/publication.pml`.

use std::time::Duration;

use bytes::Bytes;
use guideloom_format::ShardMetadata;
use guideloom_io::RetryPolicy;

use crate::error::Error;
use crate::manifest::{PublishMode, ShardRef};
use crate::{
    PublicationOptions, PublishRequest, Registry, RetentionPolicy, Root, RootOptions, StoreOptions,
};

fn roots() -> Vec<(tempfile::TempDir, Root)> {
    let local = tempfile::tempdir().unwrap();
    let store = Registry::new()
        .resolve(local.path().to_str().unwrap(), &StoreOptions::default())
        .unwrap();
    let memory = tempfile::tempdir().unwrap();
    let mem = Registry::new()
        .resolve("memory://gc-unit", &StoreOptions::default())
        .unwrap();
    vec![
        (local, Root::new(store, RootOptions::default())),
        (memory, Root::new(mem, RootOptions::default())),
    ]
}

fn now_policy(keep_last: usize) -> RetentionPolicy {
    RetentionPolicy {
        keep_last,
        grace: Duration::ZERO,
        ..RetentionPolicy::default()
    }
}

fn retry() -> RetryPolicy {
    RetryPolicy::contended_update()
}

async fn shard(root: &Root, work: &str, n: u64, records: u64) -> ShardRef {
    let recs: Vec<Bytes> = (0..records)
        .map(|i| Bytes::from(format!("{work}/{n}/{i}")))
        .collect();
    root.write_shard(work, n, ShardMetadata::new("raw", "documents"), &recs)
        .await
        .unwrap()
}

async fn publish(
    root: &Root,
    id: &str,
    shards: Vec<ShardRef>,
    mode: PublishMode,
) -> crate::Result<crate::Published> {
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: id.into(),
        shards,
        mode,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default()).await
}

async fn keys(root: &Root, prefix: &str) -> Vec<String> {
    let mut k: Vec<String> = root
        .store()
        .list(prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    k.sort();
    k
}

/// Three snapshots of their own work ids and a failed write: keep the last one; the other
/// two expire, their shards and the failed write's go, the log keeps its three entries (no
/// gap), the latest reads whole, and the dry run said exactly what the run did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn superseded_snapshots_expire_and_their_shards_and_failed_writes_go() {
    for (_dir, root) in roots() {
        for (i, id) in ["s1", "s2", "s3"].iter().enumerate() {
            let work = format!("w{i}");
            let s = shard(&root, &work, 0, 10).await;
            publish(&root, id, vec![s], PublishMode::Full)
                .await
                .unwrap();
        }
        let orphan = shard(&root, "failed", 0, 5).await;
        let dry = root.gc(&now_policy(1), true, &retry()).await.unwrap();
        assert!(dry.dry_run && dry.run.is_empty());
        let ids: Vec<&str> = dry.expired.iter().map(|e| e.snapshot_id.as_str()).collect();
        assert_eq!(ids, ["s1", "s2"]);
        let dry_keys: Vec<&str> = dry.deleted.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(
            dry_keys,
            [
                "shards/failed/00000000.glm",
                "shards/w0/00000000.glm",
                "shards/w1/00000000.glm"
            ]
        );
        assert_eq!(
            keys(&root, "shards").await.len(),
            4,
            "a dry run deletes nothing"
        );
        let report = root.gc(&now_policy(1), false, &retry()).await.unwrap();
        assert_eq!(report.deleted, dry.deleted);
        assert_eq!(report.bytes, dry.bytes);
        assert!(report.bytes >= orphan.size);
        assert_eq!(keys(&root, "shards").await, ["shards/w2/00000000.glm"]);
        assert_eq!(
            root.snapshots().await.unwrap().len(),
            3,
            "the log keeps every entry"
        );
        assert!(root.audit_log().await.unwrap().gaps.is_empty());
        let expired: Vec<String> = root
            .expired()
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.snapshot_id)
            .collect();
        assert_eq!(expired, ["s1", "s2"]);
        let latest = root.open_latest().await.unwrap();
        assert_eq!(latest.get_async(9).await.unwrap(), Bytes::from("w2/0/9"));
        // An expired snapshot's manifest still opens; its records are a typed error.
        let old = root.reader(root.snapshot("s1").await.unwrap());
        let err = old.get_async(0).await.unwrap_err();
        assert!(
            matches!(err, Error::SnapshotExpired { ref snapshot_id, seq: 1 } if snapshot_id == "s1"),
            "{err}"
        );
        // A second run has nothing left to do; publication goes on after it.
        let again = root.gc(&now_policy(1), false, &retry()).await.unwrap();
        assert!(
            again.deleted.is_empty() && again.expired.is_empty(),
            "{again:?}"
        );
        let s = shard(&root, "w3", 0, 3).await;
        let p = publish(&root, "s4", vec![s], PublishMode::Append)
            .await
            .unwrap();
        assert_eq!(p.snapshot.total_records(), 13);
    }
}

/// The grace period leaves young unreferenced objects alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn young_unreferenced_shards_are_left_for_their_worker() {
    for (_dir, root) in roots() {
        let s = shard(&root, "w0", 0, 2).await;
        publish(&root, "s1", vec![s], PublishMode::Full)
            .await
            .unwrap();
        shard(&root, "pending", 0, 2).await;
        let policy = RetentionPolicy {
            grace: Duration::from_secs(3600),
            ..RetentionPolicy::default()
        };
        let report = root.gc(&policy, false, &retry()).await.unwrap();
        assert!(report.deleted.is_empty(), "{report:?}");
        assert_eq!(keys(&root, "shards/pending").await.len(), 1);
    }
}

/// Tags: resolved where a snapshot id is, kept by collection, refused on an expired
/// snapshot, movable and removable; a tag may not hide a snapshot id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_keep_their_snapshots_and_open_like_ids() {
    for (_dir, root) in roots() {
        for (i, id) in ["s1", "s2", "s3"].iter().enumerate() {
            let s = shard(&root, &format!("w{i}"), 0, 4).await;
            publish(&root, id, vec![s], PublishMode::Full)
                .await
                .unwrap();
        }
        assert_eq!(root.tag("prod", "s1", &retry()).await.unwrap(), None);
        assert_eq!(root.snapshot("prod").await.unwrap().id(), "s1");
        let err = root.tag("s2", "s1", &retry()).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        let report = root.gc(&now_policy(1), false, &retry()).await.unwrap();
        let ids: Vec<&str> = report
            .expired
            .iter()
            .map(|e| e.snapshot_id.as_str())
            .collect();
        assert_eq!(ids, ["s2"], "the tagged snapshot is kept");
        let reader = root.reader(root.snapshot("prod").await.unwrap());
        assert_eq!(reader.get_async(3).await.unwrap(), Bytes::from("w0/0/3"));
        let err = root.tag("eval", "s2", &retry()).await.unwrap_err();
        assert!(
            matches!(err, Error::SnapshotExpired { ref snapshot_id, .. } if snapshot_id == "s2"),
            "{err}"
        );
        let previous = root.tag("prod", "s3", &retry()).await.unwrap().unwrap();
        assert_eq!(previous.snapshot_id, "s1");
        assert_eq!(root.tags().await.unwrap()["prod"].snapshot_id, "s3");
        root.untag("prod", &retry()).await.unwrap();
        assert!(
            root.untag("prod", &retry())
                .await
                .unwrap_err()
                .is_not_found()
        );
        assert!(root.snapshot("prod").await.unwrap_err().is_not_found());
    }
}

/// Annotated snapshots are kept by default; values no catalog entry names are collected, and
/// an annotator arriving with them afterwards is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_snapshots_stay_and_orphaned_values_go() {
    for (_dir, root) in roots() {
        let s = shard(&root, "w0", 0, 3).await;
        let s1 = publish(&root, "s1", vec![s], PublishMode::Full)
            .await
            .unwrap()
            .snapshot;
        let s = shard(&root, "w1", 0, 3).await;
        publish(&root, "s2", vec![s], PublishMode::Full)
            .await
            .unwrap();
        root.publish_annotations("q", "v1", &s1, &[1, 2, 3], &retry())
            .await
            .unwrap();
        // An annotator that stopped between its values and the catalog.
        root.store()
            .put_create("annotations/q/v2/values.jsonl", Bytes::from("1\n2\n3\n"))
            .await
            .unwrap();
        let report = root.gc(&now_policy(1), false, &retry()).await.unwrap();
        assert!(report.expired.is_empty(), "annotated: kept");
        let gone: Vec<&str> = report.deleted.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(gone, ["annotations/q/v2/values.jsonl"]);
        let err = root
            .publish_annotations("q", "v2", &s1, &[1, 2, 3], &retry())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Collected { .. }), "{err}");
        assert_eq!(
            root.annotations("q", Some("v1"), &s1, false)
                .await
                .unwrap()
                .len(),
            3
        );
    }
}

/// A publisher that claimed before the collection recorded: its shards are spared. One
/// that claims after a record names its shards: stopped with `Collected`, nothing committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_spares_claimed_shards_and_stops_late_publishers() {
    for (_dir, root) in roots() {
        let s = shard(&root, "w0", 0, 2).await;
        publish(&root, "s1", vec![s], PublishMode::Full)
            .await
            .unwrap();
        // A claim in flight (its publisher paused after claiming) covering shards/w1.
        let late = shard(&root, "w1", 0, 2).await;
        let claim = serde_json::json!({
            "format": "guideloom-snapshot-claim", "version": 1, "snapshot_id": "s2",
            "dataset_id": "d", "nonce": "n", "created_at_unix_ms": 0,
            "prefixes": ["shards/w1"]
        });
        root.store()
            .put_create("claims/s2.json", Bytes::from(claim.to_string()))
            .await
            .unwrap();
        let report = root.gc(&now_policy(1), false, &retry()).await.unwrap();
        assert!(
            report
                .deleted
                .iter()
                .all(|d| !d.key.starts_with("shards/w1")),
            "{report:?}"
        );
        assert_eq!(keys(&root, "shards/w1").await.len(), 1);
        // A record naming a shard, not done (a collection running now): a publication of
        // it that claims afterwards stops.
        let record = serde_json::json!({
            "format": "guideloom-gc-record", "version": 1, "dataset_id": "d",
            "run": "9999999999999-x", "created_at_unix_ms": 0, "expired": [],
            "delete": [{"key": late.key, "size": late.size}]
        });
        root.store()
            .put_create("gc/9999999999999-x.json", Bytes::from(record.to_string()))
            .await
            .unwrap();
        let err = publish(&root, "s3", vec![late.clone()], PublishMode::Full)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Collected { ref key, .. } if *key == late.key),
            "{err}"
        );
        assert_eq!(
            root.latest().await.unwrap().id(),
            "s1",
            "nothing was committed"
        );
    }
}

/// A retry of a publication that committed, after a collection expired its snapshot and
/// deleted its shards: it was published, and says so (not `NotFound`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_publication_whose_snapshot_expired_is_already_published() {
    for (_dir, root) in roots() {
        let first = shard(&root, "w0", 0, 2).await;
        let s1 = publish(&root, "s1", vec![first.clone()], PublishMode::Full)
            .await
            .unwrap();
        let s = shard(&root, "w1", 0, 2).await;
        publish(&root, "s2", vec![s], PublishMode::Full)
            .await
            .unwrap();
        root.gc(&now_policy(1), false, &retry()).await.unwrap();
        assert!(
            root.store()
                .head(&first.key)
                .await
                .unwrap_err()
                .is_not_found()
        );
        let again = publish(&root, "s1", vec![first.clone()], PublishMode::Full)
            .await
            .unwrap();
        assert_eq!(again.outcome, crate::PublishOutcome::AlreadyPublished);
        assert_eq!(again.snapshot, s1.snapshot);
        // Another request under that id still collides or fails: never a second entry.
        let other = publish(&root, "s1", vec![], PublishMode::Full)
            .await
            .unwrap_err();
        assert!(other.is_collision(), "{other}");
        assert_eq!(root.snapshots().await.unwrap().len(), 2);
    }
}

/// `keep_younger_than` keeps every snapshot committed within it; `keep_annotated: false`
/// lets an annotated snapshot expire (its set stays in the catalog).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_snapshots_are_kept_and_annotated_ones_may_go_when_asked() {
    for (_dir, root) in roots() {
        let mut first = None;
        for (i, id) in ["s1", "s2", "s3"].iter().enumerate() {
            let s = shard(&root, &format!("w{i}"), 0, 2).await;
            let p = publish(&root, id, vec![s], PublishMode::Full)
                .await
                .unwrap();
            first.get_or_insert(p.snapshot);
        }
        let first = first.unwrap();
        root.publish_annotations("q", "v1", &first, &[1, 2], &retry())
            .await
            .unwrap();
        let recent = RetentionPolicy {
            keep_younger_than: Some(Duration::from_secs(3600)),
            ..now_policy(1)
        };
        let r = root.gc(&recent, true, &retry()).await.unwrap();
        assert!(r.expired.is_empty() && r.deleted.is_empty(), "{r:?}");
        let harsh = RetentionPolicy {
            keep_annotated: false,
            ..now_policy(1)
        };
        let r = root.gc(&harsh, false, &retry()).await.unwrap();
        let ids: Vec<&str> = r.expired.iter().map(|e| e.snapshot_id.as_str()).collect();
        assert_eq!(ids, ["s1", "s2"]);
        assert_eq!(root.catalog().await.unwrap().entries.len(), 1);
    }
}
