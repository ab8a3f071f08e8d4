//! Shared helpers of the `publish_*` integration tests: fresh roots of every kind.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use bytes::Bytes;
use guideloom_publish::{
    PublicationOptions, PublishMode, PublishRequest, Registry, RetryPolicy, Root, RootOptions,
    ShardRef, Snapshot, StoreOptions,
};

/// A fresh root plus whatever keeps it alive (a temp dir).
pub struct Fixture {
    pub name: &'static str,
    pub root: Root,
    _dir: Option<tempfile::TempDir>,
}

pub use guideloom_tests::unique;

impl Fixture {
    /// The directory of a local or mounted root.
    pub fn dir(&self) -> &std::path::Path {
        self._dir.as_ref().expect("a local root").path()
    }
}

pub fn local() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(
        Registry::new()
            .resolve(dir.path().to_str().unwrap(), &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    );
    Fixture {
        name: "local",
        root,
        _dir: Some(dir),
    }
}

pub fn mounted() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        mount: true,
        ..StoreOptions::default()
    };
    let uri = format!("file://{}", dir.path().display());
    let root = Root::new(
        Registry::new().resolve(&uri, &opts).unwrap(),
        RootOptions::default(),
    );
    Fixture {
        name: "mount",
        root,
        _dir: Some(dir),
    }
}

pub fn memory() -> Fixture {
    let root = Root::new(
        Registry::new()
            .resolve(
                &format!("memory://{}", unique("mem")),
                &StoreOptions::default(),
            )
            .unwrap(),
        RootOptions::default(),
    );
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
    let server = guideloom_tests::moto("publish tests on moto")?;
    Some(s3_fixture("moto", server).0)
}

/// A root on the Ceph RGW named by `GUIDELOOM_RGW_ENDPOINT`/`GUIDELOOM_RGW_BUCKET`, under a
/// unique prefix. `None` (after printing why) when it is absent; a panic under
/// `GUIDELOOM_CI=1` unless `GUIDELOOM_XTASK_CEPH=0`.
pub fn rgw() -> Option<Fixture> {
    rgw_with_registry().map(|(fixture, _)| fixture)
}

/// [`rgw`] plus the registry holding its bucket (for the probe's verdict and request counts).
pub fn rgw_with_registry() -> Option<(Fixture, Registry)> {
    let server = guideloom_tests::rgw("publish tests on Ceph RGW")?;
    Some(s3_fixture("rgw", server))
}

fn s3_fixture(name: &'static str, server: guideloom_tests::Moto) -> (Fixture, Registry) {
    let guideloom_tests::Moto {
        store,
        endpoint,
        bucket,
    } = server;
    let registry = Registry::new();
    registry.register("s3", &bucket, store, format!("s3://{bucket} at {endpoint}"));
    let uri = format!("s3://{bucket}/{}", unique("publish-test"));
    let root = Root::new(
        registry.resolve(&uri, &StoreOptions::default()).unwrap(),
        RootOptions::default(),
    );
    let fixture = Fixture {
        name,
        root,
        _dir: None,
    };
    (fixture, registry)
}

/// A root on fake-gcs-server (`GUIDELOOM_GCS_ENDPOINT`/`GUIDELOOM_GCS_BUCKET`) under a unique
/// prefix, built as users build one (`gs://` through the registry). `None` (after printing
/// why) when it is absent; a panic under `GUIDELOOM_CI=1`.
pub fn gcs() -> Option<Fixture> {
    gcs_with_registry().map(|(fixture, _)| fixture)
}

/// A root on Azurite (`GUIDELOOM_AZURE_ENDPOINT`/`GUIDELOOM_AZURE_CONTAINER`), as [`gcs`].
pub fn azure() -> Option<Fixture> {
    azure_with_registry().map(|(fixture, _)| fixture)
}

/// [`gcs`] plus the registry holding its bucket (for request counts).
pub fn gcs_with_registry() -> Option<(Fixture, Registry)> {
    let cloud = guideloom_tests::gcs("publish tests on fake-gcs-server")?;
    Some(cloud_fixture("gcs", &cloud))
}

/// [`azure`] plus the registry holding its container (for request counts).
pub fn azure_with_registry() -> Option<(Fixture, Registry)> {
    let cloud = guideloom_tests::azure("publish tests on Azurite")?;
    Some(cloud_fixture("azure", &cloud))
}

fn cloud_fixture(name: &'static str, cloud: &guideloom_tests::Cloud) -> (Fixture, Registry) {
    let registry = Registry::new();
    let store = registry
        .resolve(&cloud.uri(&unique("publish-test")), &cloud.store_options())
        .unwrap();
    let fixture = Fixture {
        name,
        root: Root::new(store, RootOptions::default()),
        _dir: None,
    };
    (fixture, registry)
}

/// Whether races on this fixture run as tasks on one multi-thread runtime (the object-store
/// servers: one HTTP client must not outlive the runtime that owns its connections).
pub fn is_s3(fixture: &Fixture) -> bool {
    matches!(fixture.name, "moto" | "rgw" | "gcs" | "azure")
}

/// Every root kind available here (the servers only when configured).
pub fn all_kinds() -> Vec<Fixture> {
    let mut v = vec![local(), mounted(), memory()];
    v.extend(moto());
    v.extend(rgw());
    v.extend(gcs());
    v.extend(azure());
    v
}

pub fn fast_retry() -> RetryPolicy {
    RetryPolicy::new(
        10_000,
        Duration::from_micros(200),
        Duration::from_millis(20),
    )
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
        schema: None,
    }
}

pub async fn publish(root: &Root, snapshot_id: &str, shards: Vec<ShardRef>) -> Snapshot {
    root.publish(
        &request(snapshot_id, shards, PublishMode::Full),
        &PublicationOptions::default(),
    )
    .await
    .unwrap()
    .snapshot
}

/// A fresh current-thread runtime (the fault-injection and request-count tests).
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `f` to completion on a fresh two-worker multi-thread runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}
