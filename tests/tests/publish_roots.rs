//! Publication guarantees on every root kind: local directory, declared mount, memory://,
//! moto and Ceph RGW (when configured). Races use real concurrency: OS threads (each with its
//! own runtime) for local, mount and memory, tokio tasks on a multi-thread runtime for S3
//! (one HTTP client must not outlive the runtime that owns its connections), and separate
//! processes for the local root.

mod publish_common;

use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use bytes::Bytes;
use guideloom_publish::manifest::{DATASET_KEY, log_key, pointer_key};
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, Root, RootStore, Sha256Inspector, ShardRef,
    StorageOptions, cas_update,
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

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
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
                cas_update(&**root.store(), "counters/c", &fast_retry(), |cur| {
                    let n: u64 = match cur {
                        None => 0,
                        Some(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
                    };
                    Ok(Some((n + 1).to_string().into_bytes()))
                })
                .await
                .unwrap();
            }
        });
        let body = block_on(fx.root.store().get("counters/c")).unwrap().body;
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            (N as u64 * M).to_string(),
            "{}",
            fx.name
        );
    }
}

#[test]
fn truncated_shard_fails_verification_naming_it() {
    for fx in all_kinds() {
        block_on(async {
            let full = b"0123456789abcdef".to_vec();
            let key = "shards/w/00000000.glm";
            fx.root
                .store()
                .put_create(key, Bytes::from(full[..7].to_vec()))
                .await
                .unwrap();
            let reference = ShardRef {
                key: key.into(),
                size: full.len() as u64,
                record_count: 1,
                checksum: None,
            };
            let err = fx
                .root
                .publish(
                    &request("s", vec![reference], PublishMode::Full),
                    &PublicationOptions::default(),
                )
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::Verification { key: k, what: "size", expected, actual }
                    if k == key && expected == "16" && actual == "7"),
                "{}: {err}",
                fx.name
            );
            // Nothing was claimed: the id is still free once the shard is fixed.
            assert!(
                fx.root
                    .store()
                    .head("claims/s.json")
                    .await
                    .unwrap_err()
                    .is_not_found()
            );
            let missing = ShardRef {
                key: "shards/x/1.glm".into(),
                size: 1,
                record_count: 1,
                checksum: None,
            };
            let err = fx
                .root
                .publish(
                    &request("s", vec![missing], PublishMode::Full),
                    &PublicationOptions::default(),
                )
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::NotFound { key } if key == "shards/x/1.glm"),
                "{err}"
            );
        });
    }
}

#[test]
fn verify_record_counts_checks_checksums() {
    let fx = memory();
    block_on(async {
        let mut s = shard(&fx.root, "w", 3).await;
        let opts = PublicationOptions {
            verify_record_counts: true,
            ..PublicationOptions::default()
        };
        let err = fx
            .root
            .publish(&request("a", vec![s.clone()], PublishMode::Full), &opts)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        let opts = PublicationOptions {
            inspector: Some(Arc::new(Sha256Inspector)),
            ..opts
        };
        s.checksum = Some(guideloom_publish::Checksum::Sha256("0".repeat(64)));
        let err = fx
            .root
            .publish(&request("a", vec![s.clone()], PublishMode::Full), &opts)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Verification {
                    what: "checksum",
                    ..
                }
            ),
            "{err}"
        );
        let good = shard(&fx.root, "w2", 3).await;
        fx.root
            .publish(&request("a", vec![good], PublishMode::Full), &opts)
            .await
            .unwrap();
    });
}

#[test]
fn hostile_manifests_are_rejected_on_open() {
    for fx in all_kinds() {
        block_on(async {
            let store = fx.root.store();
            fx.root.init("captures").await.unwrap();
            let hostile = [
                r#"{"key":"../escape.glm","size":1,"record_count":1,"checksum":null}"#,
                r#"{"key":"/etc/passwd","size":1,"record_count":1,"checksum":null}"#,
                r#"{"key":"s3://other-bucket/x.glm","size":1,"record_count":1,"checksum":null}"#,
                r#"{"key":"shards//x.glm","size":1,"record_count":1,"checksum":null}"#,
                r#"{"key":"shards/x.glm","size":1152921504606846976,"record_count":1,"checksum":null}"#,
                r#"{"key":"shards/x.glm","size":1,"record_count":1152921504606846976,"checksum":null}"#,
            ];
            for (i, shard_json) in hostile.iter().enumerate() {
                let seq = i as u64 + 1;
                let body = format!(
                    r#"{{"format":"guideloom-snapshot","version":1,"seq":{seq},"snapshot_id":"h{seq}",
                    "dataset_id":"captures","parent_seq":null,"mode":"full","shards":[{shard_json}],
                    "total_records":1,"claim_nonce":"x"}}"#
                );
                store
                    .put_create(&log_key(seq), Bytes::from(body))
                    .await
                    .unwrap();
                let err = fx.root.latest().await.unwrap_err();
                assert!(
                    matches!(err, Error::Corrupt { .. }),
                    "{} {shard_json}: {err}",
                    fx.name
                );
            }
            // A manifest of another dataset, and one whose seq disagrees with its key.
            for (seq, body) in [
                (
                    7u64,
                    r#"{"format":"guideloom-snapshot","version":1,"seq":7,"snapshot_id":"o","dataset_id":"other","parent_seq":null,"mode":"full","shards":[],"total_records":0,"claim_nonce":"x"}"#,
                ),
                (
                    8,
                    r#"{"format":"guideloom-snapshot","version":1,"seq":3,"snapshot_id":"o","dataset_id":"captures","parent_seq":null,"mode":"full","shards":[],"total_records":0,"claim_nonce":"x"}"#,
                ),
                (9, "not json"),
            ] {
                store
                    .put_create(&log_key(seq), Bytes::from(body))
                    .await
                    .unwrap();
                let err = fx.root.latest().await.unwrap_err();
                assert!(matches!(err, Error::Corrupt { .. }), "{}: {err}", fx.name);
            }
            // A pointer whose hash does not match the entry it names.
            let good = r#"{"format":"guideloom-snapshot","version":1,"seq":10,"snapshot_id":"p","dataset_id":"captures","parent_seq":null,"mode":"full","shards":[],"total_records":0,"claim_nonce":"x"}"#;
            store
                .put_create(&log_key(10), Bytes::from(good))
                .await
                .unwrap();
            let pointer = format!(
                r#"{{"format":"guideloom-snapshot-pointer","version":1,"snapshot_id":"p","seq":10,"log_key":"{}","log_size":{},"log_sha256":"{}"}}"#,
                log_key(10),
                good.len(),
                "0".repeat(64)
            );
            store
                .put_create(&pointer_key("p"), Bytes::from(pointer))
                .await
                .unwrap();
            let err = fx.root.snapshot("p").await.unwrap_err();
            assert!(
                matches!(err, Error::Verification { what: "sha256", .. }),
                "{}: {err}",
                fx.name
            );
            // The latest entry itself is fine.
            assert_eq!(fx.root.latest().await.unwrap().id(), "p");
        });
    }
}

#[test]
fn open_by_id_without_pointer_scans_the_log() {
    // A publisher that crashed between commit and pointer leaves no snapshots/<id>.json.
    let fx = local();
    block_on(async {
        let a = shard(&fx.root, "a", 1).await;
        let sa = publish(&fx.root, "first", vec![a]).await;
        publish(&fx.root, "second", vec![]).await;
        std::fs::remove_file(tempdir_of(&fx).join("snapshots/first.json")).unwrap();
        assert_eq!(fx.root.snapshot("first").await.unwrap(), sa);
        assert!(fx.root.snapshot("nope").await.unwrap_err().is_not_found());
    });
}

fn tempdir_of(fx: &Fixture) -> std::path::PathBuf {
    let d = fx.root.store().describe();
    std::path::PathBuf::from(d.strip_prefix("file://").unwrap())
}

#[test]
fn rerunning_a_worker_collides_and_oversized_shards_are_refused_before_upload() {
    for fx in all_kinds() {
        block_on(async {
            let body = Bytes::from_static(b"shard bytes");
            fx.root.upload_shard("w", 0, body.clone(), 1).await.unwrap();
            // Identical bytes: idempotent (a retried upload); different bytes: collision.
            fx.root.upload_shard("w", 0, body, 1).await.unwrap();
            let err = fx
                .root
                .upload_shard("w", 0, Bytes::from_static(b"other bytes"), 1)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::PublicationCollision { key } if key == "shards/w/00000000.glm"),
                "{err}"
            );
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = StorageOptions {
        max_encoded_shard_bytes: 10,
        ..StorageOptions::default()
    };
    let root = guideloom_publish::Registry::new()
        .resolve(dir.path().to_str().unwrap(), &opts)
        .unwrap();
    block_on(async {
        let err = root
            .upload_shard("w", 0, Bytes::from(vec![0u8; 11]), 1)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::ShardTooLarge {
                    size: 11,
                    limit: 10,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            root.store()
                .head("shards/w/00000000.glm")
                .await
                .unwrap_err()
                .is_not_found()
        );
    });
}

#[test]
fn mount_refuses_annotations_before_writing() {
    let fx = mounted();
    block_on(async {
        let s = shard(&fx.root, "w", 2).await;
        let snap = publish(&fx.root, "s", vec![s]).await;
        let err = fx
            .root
            .publish_annotations("labels", "v1", &snap, &[1, 2], &fast_retry())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::MountedBucketCannotAnnotate { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("s3://"));
        assert!(
            fx.root
                .store()
                .list("annotations")
                .await
                .unwrap()
                .is_empty()
        );
    });
}

#[test]
fn annotation_counts_and_snapshot_checks() {
    let fx = memory();
    block_on(async {
        let s = shard(&fx.root, "w", 3).await;
        let s1 = publish(&fx.root, "s1", vec![s.clone()]).await;
        let err = fx
            .root
            .publish_annotations("l", "v1", &s1, &[1, 2], &fast_retry())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::CountMismatch {
                    expected: 3,
                    actual: 2,
                    ..
                }
            ),
            "{err}"
        );
        fx.root
            .publish_annotations("l", "v1", &s1, &[1, 2, 3], &fast_retry())
            .await
            .unwrap();
        // Same set/version again with other values: collision, catalog unchanged.
        let err = fx
            .root
            .publish_annotations("l", "v1", &s1, &[7, 8, 9], &fast_retry())
            .await
            .unwrap_err();
        assert!(err.is_collision(), "{err}");
        // A second snapshot with the same record count: reading needs the explicit opt-in.
        let s2 = publish(&fx.root, "s2", vec![s]).await;
        let err = fx
            .root
            .annotations("l", None, &s2, false)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::AnnotationSnapshotMismatch { .. }),
            "{err}"
        );
        let set = fx
            .root
            .annotations("l", Some("v1"), &s2, true)
            .await
            .unwrap();
        assert_eq!(set.get::<i32>(2).unwrap(), 3);
        assert!(set.get::<i32>(3).is_err());
        // Against a snapshot with another record count even the opt-in is refused.
        let t = shard(&fx.root, "t", 1).await;
        let s3 = fx
            .root
            .publish(
                &request("s3", vec![t], PublishMode::Append),
                &PublicationOptions::default(),
            )
            .await
            .unwrap();
        let err = fx.root.annotations("l", None, &s3, true).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::CountMismatch {
                    expected: 4,
                    actual: 3,
                    ..
                }
            ),
            "{err}"
        );
    });
}

#[test]
fn dataset_identity_is_checked() {
    let fx = memory();
    block_on(async {
        fx.root.init("captures").await.unwrap();
        let err = fx.root.init("other").await.unwrap_err();
        assert!(matches!(err, Error::DatasetMismatch { .. }), "{err}");
        let mut r = request("x", vec![], PublishMode::Full);
        r.dataset_id = "other".into();
        let err = fx
            .root
            .publish(&r, &PublicationOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::DatasetMismatch { .. }), "{err}");
        assert!(fx.root.store().head(DATASET_KEY).await.is_ok());
    });
}

// ---- separate processes on a local root ----------------------------------------------------

const CHILD_ROOT: &str = "GUIDELOOM_PUBLISH_CHILD_ROOT";
const CHILD_ID: &str = "GUIDELOOM_PUBLISH_CHILD_ID";

/// Child mode: runs only when spawned by `local_publishers_in_separate_processes`.
#[test]
fn child_process_publisher() {
    let (Ok(dir), Ok(id)) = (std::env::var(CHILD_ROOT), std::env::var(CHILD_ID)) else {
        return;
    };
    let root = guideloom_publish::Registry::new()
        .resolve(&dir, &StorageOptions::default())
        .unwrap();
    let result = block_on(async {
        let s = shard(&root, &format!("p{id}"), 1).await;
        // Wait for the parent's start signal so the publications overlap.
        let go = std::path::Path::new(&dir).join("go");
        while !go.exists() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        root.publish(
            &request("run-001", vec![s], PublishMode::Full),
            &PublicationOptions::default(),
        )
        .await
    });
    match result {
        Ok(s) => println!("\nCHILD-RESULT ok {}", s.shards()[0].key),
        Err(Error::PublicationCollision { key }) => println!("\nCHILD-RESULT collision {key}"),
        Err(e) => println!("\nCHILD-RESULT error {e}"),
    }
}

#[test]
fn local_publishers_in_separate_processes() {
    let dir = tempfile::tempdir().unwrap();
    // The start signal `go` sits at the top level, outside every prefix the layout lists.
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_process_publisher",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ROOT, dir.path())
                .env(CHILD_ID, i.to_string())
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
        assert!(out.status.success());
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
    let root = guideloom_publish::Registry::new()
        .resolve(dir.path().to_str().unwrap(), &StorageOptions::default())
        .unwrap();
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

fn record(i: u64) -> Vec<u8> {
    format!("record number {i}").into_bytes()
}

#[test]
fn written_shards_read_back_by_index() {
    for fx in all_kinds() {
        block_on(async {
            let staging = tempfile::tempdir().unwrap();
            let meta = || guideloom_format::ShardMetadata::new("raw", "documents");
            let a = fx
                .root
                .write_shard("w0", 0, meta(), (0..10).map(record), staging.path())
                .await
                .unwrap();
            let empty = fx
                .root
                .write_shard("w1", 0, meta(), Vec::<Vec<u8>>::new(), staging.path())
                .await
                .unwrap();
            let b = fx
                .root
                .write_shard("w2", 0, meta(), (10..25).map(record), staging.path())
                .await
                .unwrap();
            publish(&fx.root, "s1", vec![a, empty, b]).await;
            let reader = fx.root.open_latest().await.unwrap();
            assert_eq!(reader.len(), 25);
            for i in [0, 9, 10, 24, 17] {
                assert_eq!(
                    reader.get(i).await.unwrap().as_ref(),
                    record(i).as_slice(),
                    "{} {i}",
                    fx.name
                );
            }
            let many = reader.get_many(&[24, 0, 11, 3]).await.unwrap();
            let want: Vec<Vec<u8>> = [24, 0, 11, 3].into_iter().map(record).collect();
            assert_eq!(many.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), want);
            assert!(reader.get(25).await.is_err());
        });
    }
}

#[test]
fn reading_one_record_from_an_object_store_costs_two_ranged_requests() {
    let registry = guideloom_publish::Registry::new();
    let root = registry
        .resolve("memory://reads", &StorageOptions::default())
        .unwrap();
    let bucket = registry.lookup("memory", "reads").unwrap();
    block_on(async {
        let staging = tempfile::tempdir().unwrap();
        let meta = guideloom_format::ShardMetadata::new("raw", "documents");
        let big: Vec<Vec<u8>> = (0..2000)
            .map(|i| vec![u8::try_from(i % 251).unwrap(); 1000])
            .collect();
        let s = root
            .write_shard("w", 0, meta, &big, staging.path())
            .await
            .unwrap();
        publish(&root, "s1", vec![s.clone()]).await;
        let reader = root.open_latest().await.unwrap();
        let before = bucket.io().stats().snapshot();
        assert_eq!(
            reader.get(1234).await.unwrap().as_ref(),
            big[1234].as_slice()
        );
        let after = bucket.io().stats().snapshot();
        // One tail read to open the shard, one ranged read for the record; far fewer bytes than
        // the 2 MB shard.
        assert_eq!(after.requests - before.requests, 2);
        assert!(
            after.bytes - before.bytes < s.size / 10,
            "{} bytes read",
            after.bytes - before.bytes
        );
        // The next record of an open shard: one more request.
        reader.get(7).await.unwrap();
        assert_eq!(bucket.io().stats().snapshot().requests - after.requests, 1);
    });
}

/// `s3://` roots built from `S3Options` (not a registered store), credentials from the
/// environment, against moto.
#[test]
fn s3_options_build_a_working_root_against_moto() {
    if moto().is_none() {
        return;
    }
    let (Ok(endpoint), Ok(bucket)) = (
        std::env::var("GUIDELOOM_S3_ENDPOINT"),
        std::env::var("GUIDELOOM_S3_BUCKET"),
    ) else {
        return;
    };
    let mut opts = StorageOptions::default();
    opts.s3.endpoint = Some(endpoint);
    opts.s3.allow_http = true;
    opts.s3.region = Some(std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()));
    opts.s3.retry.max_retries = 1;
    let uri = format!("s3://{bucket}/{}", unique("s3-options"));
    let root = guideloom_publish::Registry::new()
        .resolve(&uri, &opts)
        .unwrap();
    block_on(async {
        let s = shard(&root, "w", 3).await;
        let snap = publish(&root, "s1", vec![s]).await;
        assert_eq!(root.latest().await.unwrap(), snap);
    });
}
