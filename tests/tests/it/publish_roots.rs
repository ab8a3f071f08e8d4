//! Publication guarantees on every root kind: local directory, declared mount, memory://,
//! moto and Ceph RGW (when configured): verification, hostile manifests, snapshot lookup,
//! collisions, annotations, dataset identity, and shards read back through the format layer.
//! The concurrency races (threads, tasks and separate processes) are in `publish_races.rs`.

use crate::publish_common;

use std::sync::Arc;

use bytes::Bytes;
use guideloom_publish::fuzzing::{DATASET_KEY, log_key, pointer_key};
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, Root, RootOptions, RootStore, Sha256Inspector,
    ShardRef, StoreOptions,
};
use publish_common::*;

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
                tail: None,
                format: Default::default(),
                stream: None,
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
                tail: None,
                format: Default::default(),
                stream: None,
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

/// A log entry naming another dataset, written beside a real one by anyone who can write
/// the root, is `Corrupt` naming the entry for every reader — a fresh `Root` too, which
/// reads `dataset.json` beside its first log request — by `latest`, by id and in
/// `snapshots`. On a declared mount an entry that does not validate is taken for one still
/// being written: `latest` and `snapshots` pass over it to the entry before (never serving
/// the foreign one), and a lookup by id still refuses it.
#[test]
fn a_log_entry_of_another_dataset_is_corrupt_for_a_fresh_reader() {
    for fx in all_kinds() {
        block_on(async {
            let a = shard(&fx.root, "a", 2).await;
            publish(&fx.root, "s1", vec![a]).await;
            let store = fx.root.store();
            let first = store.get(&log_key(1), 1 << 20).await.unwrap().body;
            let mut foreign: serde_json::Value = serde_json::from_slice(&first).unwrap();
            foreign["seq"] = 2.into();
            foreign["parent_seq"] = 1.into();
            foreign["snapshot_id"] = "foreign".into();
            foreign["dataset_id"] = "other".into();
            let body = serde_json::to_vec(&foreign).unwrap();
            let pointer = format!(
                r#"{{"format":"guideloom-snapshot-pointer","version":1,"snapshot_id":"foreign","seq":2,"log_key":"{}","log_size":{},"log_sha256":"{}"}}"#,
                log_key(2),
                body.len(),
                "0".repeat(64)
            );
            store
                .put_create(&log_key(2), Bytes::from(body))
                .await
                .unwrap();
            store
                .put_create(&pointer_key("foreign"), Bytes::from(pointer))
                .await
                .unwrap();
            let foreign_entry = |err: &Error| {
                matches!(err, Error::Corrupt { key, what }
                    if *key == log_key(2) && what.contains("\"other\"") && what.contains("\"captures\""))
            };
            let fresh = || Root::new(Arc::clone(store), RootOptions::default());
            let mounted = fx.name == "mount";
            match fresh().latest().await {
                Ok(s) if mounted => assert_eq!(s.id(), "s1"),
                Err(e) if !mounted => assert!(foreign_entry(&e), "{}: latest: {e}", fx.name),
                other => panic!("{}: latest: {other:?}", fx.name),
            }
            let err = fresh().snapshot("foreign").await.unwrap_err();
            assert!(foreign_entry(&err), "{}: by id: {err}", fx.name);
            match fresh().snapshots().await {
                Ok(all) if mounted => assert_eq!(all.len(), 1),
                Err(e) if !mounted => assert!(foreign_entry(&e), "{}: snapshots: {e}", fx.name),
                other => panic!("{}: snapshots: {other:?}", fx.name),
            }
            assert_eq!(fresh().snapshot("s1").await.unwrap().id(), "s1");
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
    let opts = RootOptions {
        max_encoded_shard_bytes: 10,
        ..RootOptions::default()
    };
    let dir_uri = dir.path().to_str().unwrap();
    let root = Root::open(dir_uri, &StoreOptions::default(), opts).unwrap();
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
            .unwrap()
            .snapshot;
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

fn record(i: u64) -> Vec<u8> {
    format!("record number {i}").into_bytes()
}

#[test]
fn written_shards_read_back_by_index() {
    for fx in all_kinds() {
        block_on(async {
            let meta = || guideloom_format::ShardMetadata::new("raw", "documents");
            let a = fx
                .root
                .write_shard("w0", 0, meta(), (0..10).map(record))
                .await
                .unwrap();
            let empty = fx
                .root
                .write_shard("w1", 0, meta(), Vec::<Vec<u8>>::new())
                .await
                .unwrap();
            let b = fx
                .root
                .write_shard("w2", 0, meta(), (10..25).map(record))
                .await
                .unwrap();
            publish(&fx.root, "s1", vec![a, empty, b]).await;
            let reader = fx.root.open_latest().await.unwrap();
            assert_eq!(reader.len(), 25);
            for i in [0, 9, 10, 24, 17] {
                assert_eq!(
                    reader.get_async(i).await.unwrap().as_ref(),
                    record(i).as_slice(),
                    "{} {i}",
                    fx.name
                );
            }
            let many = reader.get_many_async(&[24, 0, 11, 3]).await.unwrap();
            let want: Vec<Vec<u8>> = [24, 0, 11, 3].into_iter().map(record).collect();
            assert_eq!(many.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), want);
            assert!(reader.get_async(25).await.is_err());
        });
    }
}

#[test]
fn reading_one_record_from_an_object_store_costs_two_ranged_requests() {
    let registry = guideloom_publish::Registry::new();
    let root = Root::new(
        registry
            .resolve("memory://reads", &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    );
    let bucket = registry.lookup("memory", "reads").unwrap();
    block_on(async {
        let meta = guideloom_format::ShardMetadata::new("raw", "documents");
        let big: Vec<Vec<u8>> = (0..2000)
            .map(|i| vec![u8::try_from(i % 251).unwrap(); 1000])
            .collect();
        let s = root.write_shard("w", 0, meta, &big).await.unwrap();
        publish(&root, "s1", vec![s.clone()]).await;
        let reader = root.open_latest().await.unwrap();
        let before = bucket.io().stats().snapshot();
        assert_eq!(
            reader.get_async(1234).await.unwrap().as_ref(),
            big[1234].as_slice()
        );
        let after = bucket.io().stats().snapshot();
        // One tail read to open the shard, one ranged read for the record; far fewer bytes than
        // the 2 MB shard.
        assert_eq!(after.requests - before.requests, 2);
        assert!(
            after.bytes_received - before.bytes_received < s.size / 10,
            "{} bytes read",
            after.bytes_received - before.bytes_received
        );
        // The next record of an open shard: one more request.
        reader.get_async(7).await.unwrap();
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
    let mut opts = StoreOptions::default();
    opts.s3.endpoint = Some(endpoint);
    opts.s3.allow_http = true;
    opts.s3.region = Some(std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()));
    opts.retry = Some(guideloom_publish::RetryPolicy::remote_request().with_max_attempts(2));
    let uri = format!("s3://{bucket}/{}", unique("s3-options"));
    let store = guideloom_publish::Registry::new()
        .resolve(&uri, &opts)
        .unwrap();
    let root = Root::new(store, RootOptions::default());
    block_on(async {
        let s = shard(&root, "w", 3).await;
        let snap = publish(&root, "s1", vec![s]).await;
        assert_eq!(root.latest().await.unwrap(), snap);
    });
}
