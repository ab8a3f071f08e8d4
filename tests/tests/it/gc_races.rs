//! Garbage collection racing real publishers, and a fault at every call of a collection.
//!
//! The invariant (docs/publication.md, "Garbage collection"): no object referenced by a kept
//! snapshot, or by a publication that commits, is ever deleted. Each round runs publishers
//! (appending and full) and collectors (keep the latest, no grace: the worst case, where
//! every unreferenced shard is old enough) at once on one root; then every snapshot that is
//! not expired must have every shard, whole, and every publication that reported success
//! must be in the log. A publication may lose to a collection only with a typed error
//! (`Collected`, or `NotFound` when its shard was gone before it verified), never by
//! committing over a deleted shard.

use crate::publish_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use guideloom_io::ErrorKind;
use guideloom_publish::faulty::{Fault, FaultKind, FaultyStore, Operation};
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, RetentionPolicy, RetryPolicy, Root, RootOptions,
};
use publish_common::*;

fn worst_case() -> RetentionPolicy {
    RetentionPolicy {
        keep_last: 1,
        grace: Duration::ZERO,
        ..RetentionPolicy::default()
    }
}

/// Every kept snapshot's shards are present with their sizes; the log is sound.
async fn check_kept(root: &Root) -> (usize, usize) {
    let expired: BTreeSet<String> = root
        .expired()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.snapshot_id)
        .collect();
    let all = root.snapshots().await.unwrap();
    let mut kept = 0;
    for s in &all {
        if expired.contains(s.id()) {
            continue;
        }
        kept += 1;
        for shard in s.shards() {
            let info = root
                .store()
                .head(&shard.key)
                .await
                .unwrap_or_else(|e| panic!("kept snapshot {} lost {}: {e}", s.id(), shard.key));
            assert_eq!(info.size, shard.size, "{}", shard.key);
        }
    }
    assert!(root.audit_log().await.unwrap().is_sound());
    let latest = root.latest().await.unwrap();
    assert!(!expired.contains(latest.id()), "the latest expired");
    (kept, expired.len())
}

async fn round(root: Root, publishers: usize, collectors: usize) -> (u32, u32) {
    let base = shard(&root, "base", 3).await;
    publish(&root, "s0", vec![base]).await;
    let mut shards = Vec::new();
    for i in 0..publishers {
        shards.push(shard(&root, &format!("w{i}"), 2).await);
    }
    let mut tasks = Vec::new();
    for (i, s) in shards.into_iter().enumerate() {
        let root = root.clone();
        tasks.push(tokio::spawn(async move {
            let mode = if i % 2 == 0 {
                PublishMode::Append
            } else {
                PublishMode::Full
            };
            let id = format!("p{i}");
            let r = root
                .publish(&request(&id, vec![s], mode), &PublicationOptions::default())
                .await;
            (id, r.map(|p| p.snapshot))
        }));
    }
    let mut gcs = Vec::new();
    for _ in 0..collectors {
        let root = root.clone();
        gcs.push(tokio::spawn(async move {
            for _ in 0..3 {
                root.gc(&worst_case(), false, &RetryPolicy::contended_update())
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    let (mut ok, mut stopped) = (0, 0);
    for t in tasks {
        let (id, r) = t.await.unwrap();
        match r {
            Ok(s) => {
                ok += 1;
                assert_eq!(root.snapshot(&id).await.unwrap(), s, "{id}");
            }
            Err(e @ (Error::Collected { .. } | Error::NotFound { .. })) => {
                stopped += 1;
                assert!(matches!(
                    e.kind(),
                    ErrorKind::Conflict | ErrorKind::NotFound
                ));
            }
            Err(e) => panic!("{id}: {e}"),
        }
    }
    for g in gcs {
        g.await.unwrap();
    }
    check_kept(&root).await;
    // A last collection afterwards leaves the same invariant.
    root.gc(&worst_case(), false, &RetryPolicy::contended_update())
        .await
        .unwrap();
    check_kept(&root).await;
    (ok, stopped)
}

#[test]
fn collections_racing_publishers_never_delete_what_a_kept_snapshot_references() {
    let kinds: Vec<(&str, usize)> = vec![
        ("local", 12),
        ("mount", 6),
        ("memory", 12),
        ("moto", 3),
        ("rgw", 3),
        ("gcs", 3),
        ("azure", 3),
    ];
    for (kind, rounds) in kinds {
        let (mut ok, mut stopped) = (0, 0);
        for _ in 0..rounds {
            let fixture = match kind {
                "local" => local(),
                "mount" => mounted(),
                "memory" => memory(),
                "moto" => match moto() {
                    Some(f) => f,
                    None => break,
                },
                "gcs" => match gcs() {
                    Some(f) => f,
                    None => break,
                },
                "azure" => match azure() {
                    Some(f) => f,
                    None => break,
                },
                _ => match rgw() {
                    Some(f) => f,
                    None => break,
                },
            };
            let (o, s) = block_on(round(fixture.root.clone(), 4, 2));
            ok += o;
            stopped += s;
        }
        println!("{kind}: {ok} publications committed, {stopped} stopped by a collection");
    }
}

const FAULTS: [Fault; 3] = [
    Fault::Fail(FaultKind::Transport),
    Fault::Fail(FaultKind::DiskFull),
    Fault::LoseReply,
];

/// Three snapshots and a failed write; the collection keeps the last one.
async fn prepare(clean: &Root) {
    for i in 0..3 {
        let s = shard(clean, &format!("w{i}"), 2).await;
        publish(clean, &format!("s{i}"), vec![s]).await;
    }
    shard(clean, "failed", 1).await;
}

/// A fault (an error before the call, a full disk, a reply lost after the call took
/// effect) at every call of every store operation a collection makes: the collection fails
/// typed or succeeds, the kept snapshot is whole either way, and a collection run afterwards
/// without faults finishes the work (it resumes the stopped run's record). On local and
/// memory roots, and on moto, RGW, fake-gcs-server and Azurite when they run (`cargo xtask
/// ci` starts them).
#[test]
fn every_fault_at_every_call_of_a_collection_is_resolved() {
    rt().block_on(async {
        for kind in ["local", "memory", "moto", "rgw", "gcs", "azure"] {
            let fresh = || match kind {
                "local" => Some(local()),
                "memory" => Some(memory()),
                "moto" => moto(),
                "gcs" => gcs(),
                "azure" => azure(),
                _ => rgw(),
            };
            let Some(f) = fresh() else {
                continue;
            };
            prepare(&f.root).await;
            let faulty = Arc::new(FaultyStore::new(Arc::clone(f.root.store())));
            let root = Root::new(faulty.clone(), RootOptions::default());
            root.gc(&worst_case(), false, &RetryPolicy::contended_update())
                .await
                .unwrap();
            let counts: Vec<(Operation, u64)> = Operation::ALL
                .iter()
                .map(|&op| (op, faulty.calls(op)))
                .collect();
            assert!(
                counts
                    .iter()
                    .any(|&(op, n)| op == Operation::Delete && n >= 1),
                "{counts:?}"
            );
            let mut cases = 0;
            for &(op, n) in &counts {
                for call in 1..=n {
                    for fault in FAULTS {
                        cases += 1;
                        let what = format!("{kind}: {fault:?} at {op:?} #{call}");
                        let f = fresh().expect("the server is still there");
                        prepare(&f.root).await;
                        let faulty = Arc::new(FaultyStore::new(Arc::clone(f.root.store())));
                        faulty.plan(op, call, fault);
                        let root = Root::new(faulty.clone(), RootOptions::default());
                        let first = root
                            .gc(&worst_case(), false, &RetryPolicy::contended_update())
                            .await;
                        if let Err(e) = &first {
                            assert!(!e.is_collision(), "{what}: {e}");
                        }
                        check_kept(&f.root).await;
                        f.root
                            .gc(&worst_case(), false, &RetryPolicy::contended_update())
                            .await
                            .unwrap_or_else(|e| panic!("{what}: the clean run failed: {e}"));
                        check_kept(&f.root).await;
                        let mut left: Vec<String> = f
                            .root
                            .store()
                            .list("shards")
                            .await
                            .unwrap()
                            .into_iter()
                            .map(|o| o.key)
                            .filter(|k| k.ends_with(".glm"))
                            .collect();
                        left.sort();
                        assert_eq!(left, ["shards/w2/00000000.glm"], "{what}");
                        let expired: Vec<String> = f
                            .root
                            .expired()
                            .await
                            .unwrap()
                            .into_iter()
                            .map(|e| e.snapshot_id)
                            .collect();
                        assert_eq!(expired, ["s0", "s1"], "{what}");
                    }
                }
            }
            println!("{kind}: {cases} fault cases");
        }
    });
}
