//! A real mounted bucket (`cargo xtask servers up rclone`: `rclone mount --vfs-cache-mode off`
//! of the Ceph RGW bucket, or moto's): publication through it as a declared mount
//! (`StoreOptions { mount: true, .. }`, `LocalStore::mounted`), records read back through
//! the mount and through the `s3://` root of the same bucket, create-only collisions found by
//! the mount's own lookup, and annotations refused on the mount but published over S3 and
//! read through the mount. Each test works in a unique subdirectory of the mount, which is
//! the key prefix `<subdirectory>/` in the bucket. Skipped without the mount (a failure
//! under `GUIDELOOM_CI=1` unless `GUIDELOOM_XTASK_MOUNT=0`).
//!
//! The syscall audit of the declared-mount path (no rename, hard link, symlink or lock on
//! the mount) runs the real binary under strace: `crates/guideloom-cli/tests/it/cli_mount.rs`.

use crate::publish_common;

use std::path::Path;
use std::sync::Arc;

use futures::TryStreamExt;
use guideloom_format::KIND_DOCUMENTS;
use guideloom_format::ShardMetadata;
use guideloom_publish::{
    Error, LocalStore, PublicationOptions, PublishMode, Registry, RetryPolicy, Root, RootOptions,
    ShardRef, Snapshot, StoreOptions,
};
use guideloom_tests::mount::{Mount, mount};
use object_store::{ObjectStore, ObjectStoreExt};
use publish_common::{block_on, request, unique};

/// Deterministic record bodies: `n` records of 1..=`max_len` pseudo-random bytes.
fn records(seed: u64, n: usize, max_len: u64) -> Vec<Vec<u8>> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|_| {
            let len = 1 + next() % max_len;
            (0..len).map(|_| next().to_le_bytes()[0]).collect()
        })
        .collect()
}

/// Indices spread over `0..len` (both ends included), from a fixed seed.
fn sample(len: u64, count: usize) -> Vec<u64> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut out = vec![0, len - 1];
    out.extend((0..count).map(|_| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % len
    }));
    out
}

/// The declared-mount root at `<mount>/<sub>` through the registry, and the `s3://` root of
/// the same prefix in a registry that holds the mount's bucket.
fn roots(m: &Mount, sub: &str) -> (Root, Root) {
    let options = StoreOptions {
        mount: true,
        ..StoreOptions::default()
    };
    let dir = m.dir.join(sub);
    let mounted = Root::new(
        Registry::new()
            .resolve(dir.to_str().unwrap(), &options)
            .unwrap(),
        RootOptions::default(),
    );
    let caps = mounted.store().capabilities();
    assert!(
        !caps.atomic_writes && !caps.compare_and_swap && !caps.create_only_across_hosts,
        "a declared mount: {caps:?}"
    );
    let registry = Registry::new();
    registry.register(
        "s3",
        &m.s3.bucket,
        Arc::clone(&m.s3.store),
        format!("s3://{} at {}", m.s3.bucket, m.s3.endpoint),
    );
    let s3 = Root::new(
        registry
            .resolve(
                &format!("s3://{}/{sub}", m.s3.bucket),
                &StoreOptions::default(),
            )
            .unwrap(),
        RootOptions::default(),
    );
    (mounted, s3)
}

async fn write(root: &Root, work_id: &str, index: u64, recs: &[Vec<u8>]) -> ShardRef {
    root.write_shard(
        work_id,
        index,
        ShardMetadata::new("bytes", KIND_DOCUMENTS),
        recs.iter(),
    )
    .await
    .unwrap_or_else(|e| panic!("write_shard {work_id}/{index}: {e}"))
}

/// The keys under `sub/` in the bucket, sorted.
async fn bucket_keys(m: &Mount, sub: &str) -> Vec<String> {
    let prefix = object_store::path::Path::from(sub);
    let mut keys: Vec<String> =
        m.s3.store
            .list(Some(&prefix))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap();
    keys.sort();
    keys
}

/// Removes `sub/` from the bucket over S3 (not through the mount: deletes are no part of the
/// declared-mount path).
async fn remove_prefix(m: &Mount, sub: &str) {
    for key in bucket_keys(m, sub).await {
        let _ =
            m.s3.store
                .delete(&object_store::path::Path::from(key))
                .await;
    }
}

/// Reads `indices` through `root`'s latest snapshot and compares them with `all`.
async fn check_records(root: &Root, what: &str, all: &[Vec<u8>], indices: &[u64]) -> Snapshot {
    let reader = root
        .open_latest()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(reader.len(), all.len() as u64, "{what}");
    for &i in indices {
        let got = reader
            .get_async(i)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let want = &all[usize::try_from(i).unwrap()];
        assert!(
            got[..] == want[..],
            "{what}: record {i}: {} bytes read, {} written",
            got.len(),
            want.len()
        );
    }
    let many = reader.get_many_async(indices).await.unwrap();
    for (got, &i) in many.iter().zip(indices) {
        assert!(
            got[..] == all[usize::try_from(i).unwrap()][..],
            "{what}: {i}"
        );
    }
    reader.snapshot().clone()
}

#[test]
fn mount_publishes_several_shards_and_the_s3_root_reads_the_same() {
    let Some(m) = mount("mount_publishes_several_shards_and_the_s3_root_reads_the_same") else {
        return;
    };
    let sub = unique("mount-publish");
    let (mounted, s3) = roots(&m, &sub);
    block_on(async {
        // Shard 0 is over rclone's 128 KiB FUSE write size (a streamed multipart upload);
        // the others are single PUTs.
        let batches = [
            records(1, 40, 8 << 10),
            records(2, 30, 2 << 10),
            records(3, 1, 100),
            records(4, 25, 3 << 10),
        ];
        let mut shards = Vec::new();
        for (i, batch) in batches.iter().take(3).enumerate() {
            shards.push(write(&mounted, "w", i as u64, batch).await);
        }
        let first = mounted
            .publish(
                &request("s1", shards, PublishMode::Full),
                &PublicationOptions::default(),
            )
            .await
            .unwrap()
            .snapshot;
        // A second snapshot, appended: "latest" must then mean s2 on both roots.
        let more = vec![write(&mounted, "w2", 0, &batches[3]).await];
        let second = mounted
            .publish(
                &request("s2", more, PublishMode::Append),
                &PublicationOptions::default(),
            )
            .await
            .unwrap()
            .snapshot;
        assert_eq!((first.seq(), second.seq()), (1, 2));
        assert_eq!(second.shards().len(), 4);

        let all: Vec<Vec<u8>> = batches.iter().flatten().cloned().collect();
        let indices = sample(all.len() as u64, 40);
        let via_mount = check_records(&mounted, "through the mount", &all, &indices).await;
        assert_eq!(via_mount, second);
        let via_s3 = check_records(&s3, "through s3://", &all, &indices).await;
        assert_eq!(via_s3, via_mount, "the same latest snapshot");
        assert_eq!(
            s3.snapshots().await.unwrap(),
            mounted.snapshots().await.unwrap()
        );
        // The first snapshot by id, too.
        assert_eq!(s3.snapshot("s1").await.unwrap(), first);

        // A second declared-mount root made from `LocalStore::mounted` reads the same.
        let local = Root::new(
            Arc::new(LocalStore::mounted(m.dir.join(&sub))),
            RootOptions::default(),
        );
        assert!(local.store().describe().starts_with("mounted bucket at "));
        let via_local = check_records(&local, "LocalStore::mounted", &all, &indices).await;
        assert_eq!(via_local, via_s3);

        // Every object the mount wrote is a plain key under the prefix: shards and control
        // objects, no temporary or lock file.
        let keys = bucket_keys(&m, &sub).await;
        for shard in second.shards() {
            assert!(keys.contains(&format!("{sub}/{}", shard.key)), "{keys:?}");
        }
        assert!(keys.contains(&format!("{sub}/dataset.json")), "{keys:?}");
        let hidden: Vec<&String> = keys
            .iter()
            .filter(|k| k.split('/').any(|c| c.starts_with('.')))
            .collect();
        assert!(hidden.is_empty(), "temporary or lock objects: {hidden:?}");
        remove_prefix(&m, &sub).await;
    });
}

#[test]
fn mount_second_write_of_a_work_id_collides_also_with_objects_written_over_s3() {
    let Some(m) =
        mount("mount_second_write_of_a_work_id_collides_also_with_objects_written_over_s3")
    else {
        return;
    };
    let sub = unique("mount-collide");
    let (mounted, s3) = roots(&m, &sub);
    block_on(async {
        let again = |root: Root, work_id: &'static str, recs: Vec<Vec<u8>>| async move {
            root.write_shard(
                work_id,
                0,
                ShardMetadata::new("bytes", KIND_DOCUMENTS),
                recs.iter(),
            )
            .await
        };
        // Through the mount twice: the second O_EXCL create gets EEXIST from the mount's
        // lookup, the bytes differ, and that is a typed collision naming the shard.
        let first = write(&mounted, "w", 0, &records(5, 20, 1000)).await;
        let err = again(mounted.clone(), "w", records(6, 20, 1000))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::PublicationCollision { key } if key == &first.key),
            "{err:?}"
        );
        // The same bytes again are the idempotent retry of the same writer.
        let same = again(mounted.clone(), "w", records(5, 20, 1000))
            .await
            .unwrap();
        assert_eq!(same, first);

        // A shard written over S3 (never looked up through the mount) is seen by the mount's
        // lookup at once: the large one is compared by size first (a HEAD), the small one
        // byte for byte.
        for (work_id, len) in [("x", 900), ("big", 100_000)] {
            let over_s3 = write(&s3, work_id, 0, &records(7, 30, len)).await;
            let err = again(mounted.clone(), work_id, records(8, 30, len))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::PublicationCollision { key } if key == &over_s3.key),
                "{work_id}: {err:?}"
            );
            // Nothing was overwritten: the object still holds the S3 writer's bytes (writing
            // them again is the idempotent retry).
            let retried = again(s3.clone(), work_id, records(7, 30, len))
                .await
                .unwrap();
            assert_eq!(retried, over_s3, "{work_id}");
        }
        let keys = bucket_keys(&m, &sub).await;
        assert_eq!(
            keys,
            [
                format!("{sub}/shards/big/00000000.glm"),
                format!("{sub}/shards/w/00000000.glm"),
                format!("{sub}/shards/x/00000000.glm"),
            ]
        );
        remove_prefix(&m, &sub).await;
    });
}

#[test]
fn mount_refuses_annotations_and_s3_annotations_show_through_the_mount() {
    let Some(m) = mount("mount_refuses_annotations_and_s3_annotations_show_through_the_mount")
    else {
        return;
    };
    let sub = unique("mount-annotate");
    let (mounted, s3) = roots(&m, &sub);
    block_on(async {
        let recs = records(9, 12, 300);
        let shard = write(&mounted, "w", 0, &recs).await;
        let snapshot = mounted
            .publish(
                &request("s1", vec![shard], PublishMode::Full),
                &PublicationOptions::default(),
            )
            .await
            .unwrap()
            .snapshot;
        let values: Vec<serde_json::Value> = (0..12)
            .map(|i| serde_json::json!({"i": i, "label": format!("l{i}")}))
            .collect();
        let err = mounted
            .publish_annotations(
                "q",
                "v1",
                &snapshot,
                &values,
                &RetryPolicy::contended_update(),
            )
            .await
            .unwrap_err();
        let root_dir = m.dir.join(&sub);
        assert!(
            matches!(&err, Error::MountedBucketCannotAnnotate { root } if Path::new(root) == root_dir),
            "{err:?}"
        );
        assert!(err.to_string().contains("s3://"), "{err}");
        let before = bucket_keys(&m, &sub).await;
        assert!(
            !before
                .iter()
                .any(|k| k.contains("annotations") || k.ends_with("catalog.json")),
            "refused before writing anything: {before:?}"
        );

        // Over S3 it works, and the mount's reader sees the catalog and the values.
        let entry = s3
            .publish_annotations(
                "q",
                "v1",
                &snapshot,
                &values,
                &RetryPolicy::contended_update(),
            )
            .await
            .unwrap();
        let via_mount = mounted.latest().await.unwrap();
        assert_eq!(via_mount, snapshot);
        let catalog = mounted.catalog().await.unwrap();
        assert_eq!(catalog.find("q", None), Some(&entry));
        let set = mounted
            .annotations("q", None, &via_mount, false)
            .await
            .unwrap();
        assert_eq!(set.len(), 12);
        for (i, want) in values.iter().enumerate() {
            let got: serde_json::Value = set.get(i as u64).unwrap();
            assert_eq!(&got, want, "value {i}");
        }
        remove_prefix(&m, &sub).await;
    });
}

#[test]
fn the_mount_helper_checks_the_mount_table() {
    // The helper's own check, without a server: `/` is always a mount point, a fresh
    // directory never is.
    assert!(guideloom_tests::mount::is_mount_point(Path::new("/")));
    let dir = tempfile::tempdir().unwrap();
    assert!(!guideloom_tests::mount::is_mount_point(dir.path()));
}
