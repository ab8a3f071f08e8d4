//! Shared helpers of the `publish_*` integration tests: fresh roots of every kind.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use bytes::Bytes;
use guideloom_publish::{
    PublicationOptions, PublishMode, PublishRequest, Registry, RetryPolicy, Root, ShardRef,
    Snapshot, StorageOptions,
};

/// A fresh root plus whatever keeps it alive (a temp dir).
pub struct Fixture {
    pub name: &'static str,
    pub root: Root,
    _dir: Option<tempfile::TempDir>,
}

pub use guideloom_tests::unique;

pub fn local() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = Registry::new()
        .resolve(dir.path().to_str().unwrap(), &StorageOptions::default())
        .unwrap();
    Fixture {
        name: "local",
        root,
        _dir: Some(dir),
    }
}

pub fn mounted() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let opts = StorageOptions {
        mount: true,
        ..StorageOptions::default()
    };
    let uri = format!("file://{}", dir.path().display());
    let root = Registry::new().resolve(&uri, &opts).unwrap();
    Fixture {
        name: "mount",
        root,
        _dir: Some(dir),
    }
}

pub fn memory() -> Fixture {
    let root = Registry::new()
        .resolve(
            &format!("memory://{}", unique("mem")),
            &StorageOptions::default(),
        )
        .unwrap();
    Fixture {
        name: "memory",
        root,
        _dir: None,
    }
}

/// A root on the moto server named by `GUIDELOOM_S3_ENDPOINT`/`GUIDELOOM_S3_BUCKET`, under a
/// unique prefix. `None` (after printing why) when the server is absent; a panic under
/// `GUIDELOOM_CI=1`.
pub fn moto() -> Option<Fixture> {
    let guideloom_tests::Moto {
        store,
        endpoint,
        bucket,
    } = guideloom_tests::moto("publish tests on moto")?;
    let registry = Registry::new();
    registry.register("s3", &bucket, store, format!("s3://{bucket} at {endpoint}"));
    let uri = format!("s3://{bucket}/{}", unique("publish-test"));
    let root = registry.resolve(&uri, &StorageOptions::default()).unwrap();
    Some(Fixture {
        name: "moto",
        root,
        _dir: None,
    })
}

/// Every root kind available here (moto only when configured).
pub fn all_kinds() -> Vec<Fixture> {
    let mut v = vec![local(), mounted(), memory()];
    v.extend(moto());
    v
}

pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 10_000,
        initial_backoff: Duration::from_micros(200),
        max_backoff: Duration::from_millis(20),
    }
}

/// Uploads a small shard of `records` records for `work_id`.
pub async fn shard(root: &Root, work_id: &str, records: u64) -> ShardRef {
    let body = Bytes::from(format!("shard of {work_id} with {records} records").into_bytes());
    root.upload_shard(work_id, 0, body, records).await.unwrap()
}

pub fn request(snapshot_id: &str, shards: Vec<ShardRef>, mode: PublishMode) -> PublishRequest {
    PublishRequest {
        dataset_id: "captures".into(),
        snapshot_id: snapshot_id.into(),
        shards,
        mode,
    }
}

pub async fn publish(root: &Root, snapshot_id: &str, shards: Vec<ShardRef>) -> Snapshot {
    root.publish(
        &request(snapshot_id, shards, PublishMode::Full),
        &PublicationOptions::default(),
    )
    .await
    .unwrap()
}
