//! Every call site of the publication protocol under a fault: for each store operation
//! (`FaultyStore`'s `Operation::ALL`), each of its calls during a publication, and each kind of
//! fault (a transport error before the call, a full disk, a reply lost after the call took
//! effect), the publication either succeeds with its snapshot really in the log, or fails
//! without blaming another writer — and then a retry of the same request succeeds, leaving one
//! log entry for the snapshot. The root validates afterwards whatever happened.

use crate::publish_common;

use std::sync::Arc;

use bytes::Bytes;
use guideloom_publish::faulty::{Fault, FaultKind, FaultyStore, Operation};
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, PublishRequest, Registry, Root, RootOptions, RootStore,
    ShardRef, Snapshot, StoreOptions,
};
use publish_common::*;

const FAULTS: [Fault; 3] = [
    Fault::Fail(FaultKind::Transport),
    Fault::Fail(FaultKind::DiskFull),
    Fault::LoseReply,
];

/// A fresh store of `kind` (`"local"` or `"memory"`) and what keeps it alive.
fn store(kind: &str) -> (Arc<dyn RootStore>, Option<tempfile::TempDir>) {
    match kind {
        "local" => {
            let dir = tempfile::tempdir().unwrap();
            let store = Registry::new()
                .resolve(dir.path().to_str().unwrap(), &StoreOptions::default())
                .unwrap();
            (store, Some(dir))
        }
        _ => (
            Registry::new()
                .resolve(
                    &format!("memory://{}", unique("faults")),
                    &StoreOptions::default(),
                )
                .unwrap(),
            None,
        ),
    }
}

/// Publishes `s1` (one shard) through a clean root and uploads the shard of `s2`, returning
/// the request for `s2` (appending).
async fn prepare(clean: &Root) -> PublishRequest {
    let a = clean
        .upload_shard("a", 0, Bytes::from_static(b"first shard"), 2)
        .await
        .unwrap();
    publish(clean, "s1", vec![a]).await;
    let b: ShardRef = clean
        .upload_shard("b", 0, Bytes::from_static(b"second shard!"), 3)
        .await
        .unwrap();
    PublishRequest {
        dataset_id: "captures".into(),
        snapshot_id: "s2".into(),
        shards: vec![b],
        mode: PublishMode::Append,
        schema: None,
    }
}

/// Checks the root through a clean view: `latest` opens, every snapshot's shards exist with
/// their sizes, and `s2` appears in the log at most once.
async fn check_root(clean: &Root) -> Vec<Snapshot> {
    let all = clean.snapshots().await.unwrap();
    let latest = clean.latest().await.unwrap();
    assert_eq!(Some(&latest), all.last());
    for s in &all {
        for shard in s.shards() {
            let info = clean.store().head(&shard.key).await.unwrap();
            assert_eq!(info.size, shard.size, "{}", shard.key);
        }
    }
    let s2 = all.iter().filter(|s| s.id() == "s2").count();
    assert!(s2 <= 1, "snapshot s2 committed {s2} times");
    assert!(clean.audit_log().await.unwrap().is_sound());
    all
}

#[test]
fn every_fault_at_every_call_of_a_publication_is_resolved() {
    rt().block_on(async {
        for kind in ["local", "memory"] {
            // A clean run counts the calls of each operation one publication makes.
            let (inner, _keep) = store(kind);
            let faulty = Arc::new(FaultyStore::new(Arc::clone(&inner)));
            let request = prepare(&Root::new(Arc::clone(&inner), RootOptions::default())).await;
            let root = Root::new(faulty.clone(), RootOptions::default());
            root.publish(&request, &PublicationOptions::default())
                .await
                .unwrap();
            let counts: Vec<(Operation, u64)> = Operation::ALL
                .iter()
                .map(|&op| (op, faulty.calls(op)))
                .collect();
            assert!(
                counts
                    .iter()
                    .any(|&(op, n)| op == Operation::PutCreate && n >= 2),
                "{counts:?}"
            );
            let mut cases = 0u32;
            for &(op, n) in &counts {
                for call in 1..=n {
                    for fault in FAULTS {
                        cases += 1;
                        let what = format!("{kind}: {fault:?} at {op:?} #{call}");
                        let (inner, _keep) = store(kind);
                        let clean = Root::new(Arc::clone(&inner), RootOptions::default());
                        let request = prepare(&clean).await;
                        let faulty = Arc::new(FaultyStore::new(Arc::clone(&inner)));
                        faulty.plan(op, call, fault);
                        let root = Root::new(faulty.clone(), RootOptions::default());
                        let first = root
                            .publish(&request, &PublicationOptions::default())
                            .await
                            .map(|published| published.snapshot);
                        assert_eq!(faulty.injected(), 1, "{what}: the fault did not fire");
                        match &first {
                            Ok(snapshot) => {
                                // Success means the snapshot is there, whole.
                                assert_eq!(
                                    &clean.snapshot("s2").await.unwrap(),
                                    snapshot,
                                    "{what}"
                                );
                            }
                            Err(e) => {
                                assert!(!e.is_collision(), "{what}: blamed another writer: {e}");
                                if matches!(fault, Fault::Fail(FaultKind::DiskFull)) {
                                    assert!(matches!(e, Error::DiskFull { .. }), "{what}: {e:?}");
                                }
                            }
                        }
                        check_root(&clean).await;
                        // A retry of the same request succeeds and agrees with the log.
                        let again = root
                            .publish(&request, &PublicationOptions::default())
                            .await
                            .map(|published| published.snapshot)
                            .unwrap_or_else(|e| panic!("{what}: the retry failed: {e}"));
                        assert_eq!(again.total_records(), 5, "{what}");
                        if let Ok(first) = first {
                            assert_eq!(again, first, "{what}");
                        }
                        assert_eq!(clean.snapshot("s2").await.unwrap(), again, "{what}");
                        let all = check_root(&clean).await;
                        assert_eq!(
                            all.iter().map(Snapshot::id).collect::<Vec<_>>(),
                            ["s1", "s2"],
                            "{what}"
                        );
                    }
                }
            }
            println!("{kind}: {cases} fault cases over {counts:?}");
        }
    });
}

#[test]
fn a_full_disk_between_claim_and_commit_is_retried_by_the_same_request() {
    rt().block_on(async {
        let (inner, keep) = store("local");
        let clean = Root::new(Arc::clone(&inner), RootOptions::default());
        let request = prepare(&clean).await;
        let faulty = Arc::new(FaultyStore::new(inner));
        // put_create #1 is the claim, #2 the log entry: the disk fills between them.
        faulty.plan(Operation::PutCreate, 2, Fault::Fail(FaultKind::DiskFull));
        let root = Root::new(faulty.clone(), RootOptions::default());
        let err = root
            .publish(&request, &PublicationOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::DiskFull { .. }), "{err:?}");
        assert!(err.to_string().contains("no space left"), "{err}");
        assert!(
            keep.as_ref()
                .unwrap()
                .path()
                .join("claims/s2.json")
                .is_file(),
            "the claim stays"
        );
        let snapshot = root
            .publish(&request, &PublicationOptions::default())
            .await
            .unwrap()
            .snapshot;
        assert_eq!(snapshot.seq(), 2);
        // Another request with the same snapshot id is a collision: that id is taken.
        let mut other = request.clone();
        other.mode = PublishMode::Full;
        let err = root
            .publish(&other, &PublicationOptions::default())
            .await
            .unwrap_err();
        assert!(err.is_collision(), "{err:?}");
        assert!(err.to_string().contains("claims/s2.json"), "{err}");
    });
}

#[test]
fn faults_during_annotation_and_upload_are_resolved_by_a_retry() {
    rt().block_on(async {
        for kind in ["local", "memory"] {
            for op in [Operation::PutCreate, Operation::PutCas, Operation::Get] {
                for call in 1..=2 {
                    for fault in FAULTS {
                        let what = format!("{kind}: {fault:?} at {op:?} #{call}");
                        let (inner, _keep) = store(kind);
                        let clean = Root::new(Arc::clone(&inner), RootOptions::default());
                        let request = prepare(&clean).await;
                        let snapshot = clean
                            .publish(&request, &PublicationOptions::default())
                            .await
                            .unwrap()
                            .snapshot;
                        let faulty = Arc::new(FaultyStore::new(Arc::clone(&inner)));
                        faulty.plan(op, call, fault);
                        let root = Root::new(faulty.clone(), RootOptions::default());
                        let values = ["a", "b", "c", "d", "e"];
                        let retry = fast_retry();
                        let first = root
                            .publish_annotations("labels", "v1", &snapshot, &values, &retry)
                            .await;
                        if let Err(e) = &first {
                            assert!(!e.is_collision(), "{what}: {e}");
                        }
                        // Only the first attempt is faulted (a call number it never reached
                        // does not fire at all).
                        faulty.clear();
                        let entry = root
                            .publish_annotations("labels", "v1", &snapshot, &values, &retry)
                            .await
                            .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
                        let set = clean
                            .annotations("labels", Some("v1"), &snapshot, false)
                            .await
                            .unwrap();
                        assert_eq!(set.entry(), &entry, "{what}");
                        assert_eq!(set.get::<String>(4).unwrap(), "e", "{what}");
                        assert_eq!(clean.catalog().await.unwrap().entries.len(), 1, "{what}");
                        // An upload under the same fault.
                        let faulty = Arc::new(FaultyStore::new(Arc::clone(&inner)));
                        faulty.plan(op, call, fault);
                        let root = Root::new(faulty.clone(), RootOptions::default());
                        let body = Bytes::from_static(b"third shard");
                        if let Err(e) = root.upload_shard("c", 0, body.clone(), 1).await {
                            assert!(!e.is_collision(), "{what}: {e}");
                        }
                        faulty.clear();
                        let shard = root.upload_shard("c", 0, body, 1).await.unwrap();
                        assert_eq!(shard.size, 11, "{what}");
                    }
                }
            }
        }
    });
}
