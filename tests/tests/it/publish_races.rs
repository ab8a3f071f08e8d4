//! Publication races on every root kind: local directory, declared mount, memory://, moto and
//! Ceph RGW (when configured). Races use real concurrency: OS threads (each with its own
//! runtime) for local, mount and memory, tokio tasks on a multi-thread runtime for S3 (one HTTP
//! client must not outlive the runtime that owns its connections), and separate processes for
//! the local root. The other publication guarantees are in `publish_roots.rs`.

use crate::publish_common;

use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use guideloom_publish::{
    Error, PublicationOptions, PublishMode, Root, RootOptions, RootStore, ShardRef, StoreOptions,
    cas_update,
};
use publish_common::*;

/// Runs `n` copies of `f` at once and returns their results in order. Threads with their own
/// current-thread runtimes, released together by a barrier — except for moto and RGW, where
/// tasks on one multi-thread runtime (4 workers) are used.
fn race<T, F, Fut>(fixture: &Fixture, n: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize, Root) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let f = Arc::new(f);
    if is_s3(fixture) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        return rt.block_on(async {
            let barrier = Arc::new(tokio::sync::Barrier::new(n));
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let (f, root, barrier) =
                        (Arc::clone(&f), fixture.root.clone(), Arc::clone(&barrier));
                    tokio::spawn(async move {
                        barrier.wait().await;
                        f(i, root).await
                    })
                })
                .collect();
            let mut out = Vec::new();
            for h in handles {
                out.push(h.await.unwrap());
            }
            out
        });
    }
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (f, root, barrier) = (Arc::clone(&f), fixture.root.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                barrier.wait();
                rt.block_on(f(i, root))
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn eight_publishers_of_one_snapshot_id_exactly_one_wins() {
    for fx in all_kinds() {
        // Each publisher uploads its own shard first (different work ids), then all race.
        let shards: Vec<ShardRef> = block_on(async {
            let mut v = Vec::new();
            for i in 0..8 {
                v.push(shard(&fx.root, &format!("w{i}"), i + 1).await);
            }
            v
        });
        let shards = Arc::new(shards);
        let s2 = Arc::clone(&shards);
        let results = race(&fx, 8, move |i, root| {
            let shards = Arc::clone(&s2);
            async move {
                root.publish(
                    &request("run-001", vec![shards[i].clone()], PublishMode::Full),
                    &PublicationOptions::default(),
                )
                .await
                .map(|published| published.snapshot)
            }
        });
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_ok())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(winners.len(), 1, "{}: winners {winners:?}", fx.name);
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, Error::PublicationCollision { key } if key == "claims/run-001.json"),
                    "{}: {e}",
                    fx.name
                );
            }
        }
        let winner = results[winners[0]].as_ref().unwrap();
        let opened = block_on(fx.root.latest()).unwrap();
        assert_eq!(&opened, winner, "{}", fx.name);
        assert_eq!(opened.shards(), &[shards[winners[0]].clone()][..]);
        assert_eq!(block_on(fx.root.snapshot("run-001")).unwrap(), opened);
        assert_eq!(block_on(fx.root.snapshots()).unwrap().len(), 1);
    }
}

#[test]
fn two_concurrent_appenders_both_land() {
    for fx in all_kinds() {
        for round in 0..3 {
            let (base, a, b) = block_on(async {
                let base = shard(&fx.root, &format!("base{round}"), 2).await;
                let a = shard(&fx.root, &format!("a{round}"), 3).await;
                let b = shard(&fx.root, &format!("b{round}"), 4).await;
                (base, a, b)
            });
            if round == 0 {
                block_on(publish(&fx.root, "base", vec![base.clone()]));
            } else {
                block_on(fx.root.publish(
                    &request(
                        &format!("base{round}"),
                        vec![base.clone()],
                        PublishMode::Append,
                    ),
                    &PublicationOptions::default(),
                ))
                .unwrap();
            }
            let before = block_on(fx.root.latest()).unwrap();
            let new = Arc::new([a.clone(), b.clone()]);
            let results = race(&fx, 2, move |i, root| {
                let new = Arc::clone(&new);
                async move {
                    root.publish(
                        &request(
                            &format!("append-{round}-{i}"),
                            vec![new[i].clone()],
                            PublishMode::Append,
                        ),
                        &PublicationOptions::default(),
                    )
                    .await
                    .map(|published| published.snapshot)
                }
            });
            let snaps: Vec<_> = results.into_iter().map(|r| r.unwrap()).collect();
            let latest = block_on(fx.root.latest()).unwrap();
            assert_eq!(latest.seq(), before.seq() + 2, "{}", fx.name);
            let keys: Vec<&str> = latest.shards().iter().map(|s| s.key.as_str()).collect();
            for s in before.shards().iter().chain([&a, &b]) {
                assert!(
                    keys.contains(&s.key.as_str()),
                    "{}: {} dropped from {keys:?}",
                    fx.name,
                    s.key
                );
            }
            assert_eq!(latest.shards().len(), before.shards().len() + 2);
            assert_eq!(latest.total_records(), before.total_records() + 7);
            let seqs: Vec<u64> = snaps.iter().map(|s| s.seq()).collect();
            assert!(seqs.contains(&(before.seq() + 1)) && seqs.contains(&(before.seq() + 2)));
        }
    }
}

#[test]
fn eight_annotators_all_land_in_the_catalog() {
    for fx in all_kinds() {
        if fx.name == "mount" {
            continue; // refused on mounts; see mount_refuses_annotations
        }
        let snap = block_on(async {
            let s = shard(&fx.root, "w", 5).await;
            publish(&fx.root, "s1", vec![s]).await
        });
        let snap = Arc::new(snap);
        let s2 = Arc::clone(&snap);
        let results = race(&fx, 8, move |i, root| {
            let snap = Arc::clone(&s2);
            async move {
                let values: Vec<String> = (0..5).map(|r| format!("set{i}-rec{r}")).collect();
                root.publish_annotations(&format!("set{i}"), "v1", &snap, &values, &fast_retry())
                    .await
            }
        });
        for r in &results {
            assert!(r.is_ok(), "{}: {r:?}", fx.name);
        }
        let catalog = block_on(fx.root.catalog()).unwrap();
        assert_eq!(catalog.entries.len(), 8, "{}", fx.name);
        for i in 0..8 {
            let set =
                block_on(fx.root.annotations(&format!("set{i}"), None, &snap, false)).unwrap();
            assert_eq!(set.get::<String>(4).unwrap(), format!("set{i}-rec4"));
        }
    }
}

#[test]
fn cas_counter_race_ends_at_n_times_m() {
    const N: usize = 4;
    const M: u64 = 25;
    for fx in all_kinds() {
        if fx.name == "mount" {
            let err = block_on(cas_update(
                &**fx.root.store(),
                "counters/c",
                1 << 20,
                &fast_retry(),
                |_| Ok(Some(b"1".to_vec())),
            ))
            .unwrap_err();
            assert!(
                matches!(err, Error::MountedBucketCannotAnnotate { .. }),
                "{err}"
            );
            continue;
        }
        race(&fx, N, |_, root| async move {
            for _ in 0..M {
                cas_update(
                    &**root.store(),
                    "counters/c",
                    1 << 20,
                    &fast_retry(),
                    |cur| {
                        let n: u64 = match cur {
                            None => 0,
                            Some(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
                        };
                        Ok(Some((n + 1).to_string().into_bytes()))
                    },
                )
                .await
                .unwrap();
            }
        });
        let body = block_on(fx.root.store().get("counters/c", 1 << 20))
            .unwrap()
            .body;
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            (N as u64 * M).to_string(),
            "{}",
            fx.name
        );
    }
}

// ---- separate processes on a local root ----------------------------------------------------

#[test]
fn local_publishers_in_separate_processes() {
    let dir = tempfile::tempdir().unwrap();
    // The start signal `go` sits at the top level, outside every prefix the layout lists.
    // A separate binary (tests/src/bin/race_publisher.rs), one process per publisher.
    let exe = env!("CARGO_BIN_EXE_race_publisher");
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(exe)
                .arg(dir.path())
                .arg(i.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(dir.path().join("go"), b"").unwrap();
    let mut ok = Vec::new();
    let mut collisions = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("CHILD-RESULT"))
            .expect("child printed a result");
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts[1] {
            "ok" => ok.push(parts[2].to_owned()),
            "collision" => {
                assert_eq!(parts[2], "claims/run-001.json");
                collisions += 1;
            }
            _ => panic!("child failed: {line}"),
        }
    }
    assert_eq!(ok.len(), 1, "winners: {ok:?}");
    assert_eq!(collisions, 7);
    let dir_uri = dir.path().to_str().unwrap();
    let root = Root::open(dir_uri, &StoreOptions::default(), RootOptions::default()).unwrap();
    let latest = block_on(root.latest()).unwrap();
    assert_eq!(latest.shards()[0].key, ok[0]);
    // No temporary file was left under a final name, and none lingers.
    let leftovers: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|name| name.ends_with(".tmp"))
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}
