//! Identical publication requests at once (issue 24, item 1), through the library: all of them
//! succeed, exactly one commits, the snapshot id is in the log once, and nobody hears
//! "different content". The processes version (the real CLI, 32 trials per root kind) is
//! `crates/guideloom-cli/tests/it/cli_publish_race.rs`; the protocol itself is checked
//! exhaustively by `model/publication.pml` (`cargo xtask model`).

use crate::publish_common;

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use guideloom_io::AsyncReader;
use guideloom_publish::faulty::{Fault, FaultKind, FaultyStore, Operation};
use guideloom_publish::{
    CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, PendingObject, PublicationOptions,
    PublishMode, PublishOutcome, Root, RootOptions, RootStore, ShardRef, StoreCapabilities, Sweep,
};
use publish_common::*;

/// Runs `n` publications of one request at once: threads with their own runtimes (tasks on
/// one multi-thread runtime for the S3 servers), as `publish_races.rs` does.
fn identical_race(
    fx: &Fixture,
    n: usize,
    shard: &ShardRef,
) -> Vec<guideloom_publish::Result<guideloom_publish::Published>> {
    let publish = |root: Root, shard: ShardRef| async move {
        root.publish(
            &request("s2", vec![shard], PublishMode::Append),
            &PublicationOptions::default(),
        )
        .await
    };
    if is_s3(fx) {
        return block_on(async {
            let barrier = Arc::new(tokio::sync::Barrier::new(n));
            let tasks: Vec<_> = (0..n)
                .map(|_| {
                    let (root, shard, barrier) =
                        (fx.root.clone(), shard.clone(), Arc::clone(&barrier));
                    tokio::spawn(async move {
                        barrier.wait().await;
                        publish(root, shard).await
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
    }
    let barrier = Arc::new(std::sync::Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (root, shard, barrier) = (fx.root.clone(), shard.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let rt = rt();
                barrier.wait();
                rt.block_on(publish(root, shard))
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn eight_identical_publishers_all_succeed_on_one_entry() {
    for trial in 0..4 {
        for fx in all_kinds() {
            let what = format!("{} trial {trial}", fx.name);
            let shard = block_on(async {
                let base = shard(&fx.root, "base", 2).await;
                fx.root
                    .publish(
                        &request("s1", vec![base], PublishMode::Full),
                        &PublicationOptions::default(),
                    )
                    .await
                    .unwrap();
                shard(&fx.root, "w1", 3).await
            });
            let published: Vec<_> = identical_race(&fx, 8, &shard)
                .into_iter()
                .map(|r| r.unwrap_or_else(|e| panic!("{what}: an identical publisher failed: {e}")))
                .collect();
            let committed = published
                .iter()
                .filter(|p| p.outcome == PublishOutcome::Committed)
                .count();
            assert_eq!(committed, 1, "{what}: {published:?}");
            let first = &published[0].snapshot;
            assert!(published.iter().all(|p| &p.snapshot == first), "{what}");
            assert_eq!((first.seq(), first.total_records()), (2, 5), "{what}");
            let all = block_on(fx.root.snapshots()).unwrap();
            assert_eq!(all.iter().filter(|s| s.id() == "s2").count(), 1, "{what}");
            assert_eq!(&block_on(fx.root.snapshot("s2")).unwrap(), first, "{what}");
            assert!(block_on(fx.root.audit_log()).unwrap().is_sound(), "{what}");
        }
    }
}

/// A store that runs `hook` once, just before the first LIST of `log/` that follows a GET of
/// a claim: the moment a publisher that took over an identical request's claim is about to
/// look at the log to commit.
struct HookStore {
    inner: Arc<dyn RootStore>,
    claim_read: Mutex<bool>,
    hook: Mutex<Option<BoxFuture<'static, ()>>>,
}

impl std::fmt::Debug for HookStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookStore")
            .field("inner", &self.inner)
            .finish()
    }
}

#[async_trait]
impl RootStore for HookStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        self.inner.capabilities()
    }
    async fn put_create(&self, key: &str, body: Bytes) -> guideloom_publish::Result<CreateOutcome> {
        self.inner.put_create(key, body).await
    }
    fn begin_create(
        &self,
        key: &str,
        spool_dir: &std::path::Path,
    ) -> guideloom_publish::Result<Box<dyn PendingObject + '_>> {
        self.inner.begin_create(key, spool_dir)
    }
    async fn put_cas(
        &self,
        key: &str,
        body: Bytes,
        expected: Option<&Etag>,
    ) -> guideloom_publish::Result<CasOutcome> {
        self.inner.put_cas(key, body, expected).await
    }
    async fn get(&self, key: &str, limit: u64) -> guideloom_publish::Result<Object> {
        if key.starts_with("claims/") {
            *self.claim_read.lock().unwrap() = true;
        }
        self.inner.get(key, limit).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> guideloom_publish::Result<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> guideloom_publish::Result<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn open_reader(
        &self,
        key: &str,
        size: u64,
    ) -> guideloom_publish::Result<Box<dyn AsyncReader>> {
        self.inner.open_reader(key, size).await
    }
    async fn list(&self, prefix: &str) -> guideloom_publish::Result<Vec<ObjectInfo>> {
        let fire = prefix.starts_with("log") && *self.claim_read.lock().unwrap();
        let hook = if fire {
            self.hook.lock().unwrap().take()
        } else {
            None
        };
        if let Some(hook) = hook {
            hook.await;
        }
        self.inner.list(prefix).await
    }
    async fn sweep_temporaries(&self, min_age: Duration) -> guideloom_publish::Result<Sweep> {
        self.inner.sweep_temporaries(min_age).await
    }
}

/// The interleaving the protocol model found (and the 8-process race hit 7 times in 30):
/// publisher A claims and stops before committing; B, running the identical request, takes
/// the claim over and, just before it lists the log to commit, A's retry commits and writes
/// the pointer. B must find A's entry, not commit a second one (0632596 did: `log/2` and
/// `log/3` both held s2, and B was told the pointer held "different content").
#[test]
fn a_takeover_finds_the_entry_an_identical_request_committed_meanwhile() {
    for fx in [local(), mounted(), memory()] {
        rt().block_on(async {
            let base = shard(&fx.root, "base", 2).await;
            publish(&fx.root, "s1", vec![base]).await;
            let w1 = shard(&fx.root, "w1", 3).await;
            let req = request("s2", vec![w1], PublishMode::Append);
            // A: the claim lands, the log entry does not (a full disk).
            let faulty = Arc::new(FaultyStore::new(Arc::clone(fx.root.store())));
            faulty.plan(Operation::PutCreate, 2, Fault::Fail(FaultKind::DiskFull));
            let a = Root::new(faulty, RootOptions::default());
            let err = a
                .publish(&req, &PublicationOptions::default())
                .await
                .unwrap_err();
            assert!(!err.is_collision(), "{}: {err}", fx.name);
            // B: takes the claim over; A's retry completes in between.
            let (a_root, a_req) = (fx.root.clone(), req.clone());
            let a_done = Arc::new(Mutex::new(None));
            let a_result = Arc::clone(&a_done);
            let hook: BoxFuture<'static, ()> = Box::pin(async move {
                let r = a_root.publish(&a_req, &PublicationOptions::default()).await;
                *a_result.lock().unwrap() = Some(r);
            });
            let hooked = HookStore {
                inner: Arc::clone(fx.root.store()),
                claim_read: Mutex::new(false),
                hook: Mutex::new(Some(hook)),
            };
            let b = Root::new(Arc::new(hooked), RootOptions::default());
            let b = b
                .publish(&req, &PublicationOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{}: the identical request B failed: {e}", fx.name));
            let a = a_done
                .lock()
                .unwrap()
                .take()
                .expect("the hook ran")
                .unwrap();
            assert_eq!(a.outcome, PublishOutcome::Committed, "{}", fx.name);
            assert_eq!(b.outcome, PublishOutcome::AlreadyPublished, "{}", fx.name);
            assert_eq!(a.snapshot, b.snapshot, "{}", fx.name);
            let all = fx.root.snapshots().await.unwrap();
            let ids: Vec<&str> = all.iter().map(|s| s.id()).collect();
            assert_eq!(ids, ["s1", "s2"], "{}", fx.name);
            assert!(fx.root.audit_log().await.unwrap().is_sound());
        });
    }
}

/// A claim is untrusted like every object of a root: one whose base lies past the end of the
/// log (hand-edited, or another tool's) cannot be taken over, and says so naming it.
#[test]
fn a_claim_whose_base_is_past_the_log_is_corrupt_naming_it() {
    let fx = local();
    rt().block_on(async {
        let base = shard(&fx.root, "base", 2).await;
        publish(&fx.root, "s1", vec![base]).await;
        let w1 = shard(&fx.root, "w1", 3).await;
        let req = request("s2", vec![w1], PublishMode::Full);
        // The claim lands, the log entry does not.
        let faulty = Arc::new(FaultyStore::new(Arc::clone(fx.root.store())));
        faulty.plan(Operation::PutCreate, 2, Fault::Fail(FaultKind::DiskFull));
        let a = Root::new(faulty, RootOptions::default());
        a.publish(&req, &PublicationOptions::default())
            .await
            .unwrap_err();
        let path = fx.dir().join("claims/s2.json");
        let mut claim: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(claim["log_base"], 1, "the claim records the latest entry before it");
        claim["log_base"] = 99.into();
        std::fs::write(&path, serde_json::to_vec(&claim).unwrap()).unwrap();
        let err = fx
            .root
            .publish(&req, &PublicationOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, guideloom_publish::Error::Corrupt { key, .. } if key == "claims/s2.json"),
            "{err:?}"
        );
        assert_eq!(fx.root.snapshots().await.unwrap().len(), 1, "nothing committed");
    });
}
