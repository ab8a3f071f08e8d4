//! Garbage collection on a root of 20 superseded snapshots and failed writes: the bytes it
//! reclaims and how long it takes, beside a ceiling measured in the same run (the same number
//! of objects of the same sizes, written under a scratch prefix and deleted by one raw
//! `delete_many`, which is what the collection's sweep is, without its reading and records).
//!
//! `cargo run --release -p guideloom-publish --features s3 --example gc_timing -- ROOT [MIB] [SHARD_MIB]`
//! (defaults: 1024 MiB in all, 8 MiB shards). ROOT is a local directory (emptied first) or an
//! `s3://bucket/prefix` URI configured by the environment (`AWS_ENDPOINT_URL`, keys, region).
//! Without arguments it runs on 22 MiB in a temporary directory (a smoke run).

#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // timing arithmetic

use std::time::{Duration, Instant};

use bytes::Bytes;
use guideloom_publish::{
    PublicationOptions, PublishMode, PublishRequest, RetentionPolicy, RetryPolicy, Root,
    RootOptions, S3Environment, S3Options, StoreOptions,
};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map_or(default, |a| a.parse().expect("a number"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> guideloom_publish::Result<()> {
    // Without ROOT (as `cargo xtask ci`'s examples step runs it): a temporary directory and
    // a small root, so the example is exercised; the measurement takes ROOT and 1 GiB.
    let scratch = tempfile::tempdir().unwrap();
    let (uri, default_mib, default_shard) = match std::env::args().nth(1) {
        Some(u) => (u, 1024, 8),
        None => (scratch.path().join("gc").display().to_string(), 22, 1),
    };
    let (mib, shard_mib) = (arg(2, default_mib), arg(3, default_shard));
    let local = !uri.contains("://");
    if local {
        let _ = std::fs::remove_dir_all(&uri);
    }
    let options = StoreOptions {
        s3: S3Options::default().with_environment(&S3Environment::read()),
        ..StoreOptions::default()
    };
    let root = Root::open(&uri, &options, RootOptions::default())?;
    // 20 full snapshots of their own work ids and 2 failed writes: 22 equal parts.
    let part = (mib << 20) / 22;
    let shards_per = (part / (shard_mib << 20)).max(1);
    let shard_bytes = part / shards_per;
    let body = Bytes::from(vec![7u8; shard_bytes as usize]);
    let t = Instant::now();
    for s in 0..22u64 {
        let work = if s < 20 {
            format!("w{s}")
        } else {
            format!("failed{s}")
        };
        let mut refs = Vec::new();
        for n in 0..shards_per {
            refs.push(root.upload_shard(&work, n, body.clone(), 1).await?);
        }
        if s < 20 {
            let request = PublishRequest {
                dataset_id: "gc-timing".into(),
                snapshot_id: format!("s{s}"),
                shards: refs,
                mode: PublishMode::Full,
                schema: None,
            };
            root.publish(&request, &PublicationOptions::default())
                .await?;
        }
    }
    let total = 22 * shards_per * shard_bytes;
    println!(
        "root: {uri}: 20 snapshots + 2 failed writes, {} shards of {:.1} MiB, {:.0} MiB in all (written in {:.1} s)",
        22 * shards_per,
        shard_bytes as f64 / 1048576.0,
        total as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    let policy = RetentionPolicy {
        keep_last: 1,
        grace: Duration::ZERO,
        ..RetentionPolicy::default()
    };
    let retry = RetryPolicy::contended_update();
    let t = Instant::now();
    let dry = root.gc(&policy, true, &retry).await?;
    let dry_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let report = root.gc(&policy, false, &retry).await?;
    let gc_s = t.elapsed().as_secs_f64();
    assert_eq!(report.deleted, dry.deleted);
    let gb = report.bytes as f64 / 1e9;
    println!(
        "gc --dry-run: {dry_s:.3} s; gc: {gc_s:.3} s, expired {} snapshots, deleted {} objects, reclaimed {:.1} MiB ({:.1} % of the shards), {:.3} s per GB reclaimed",
        report.expired.len(),
        report.deleted.len(),
        report.bytes as f64 / 1048576.0,
        100.0 * report.bytes as f64 / total as f64,
        gc_s / gb
    );
    // The ceiling: the same objects, deleted raw.
    let keys: Vec<String> = (0..report.deleted.len())
        .map(|i| format!("scratch/ceiling/{i:08}.bin"))
        .collect();
    for (k, d) in keys.iter().zip(&report.deleted) {
        root.store()
            .put_create(k, Bytes::from(vec![1u8; d.size as usize]))
            .await?;
    }
    let t = Instant::now();
    for batch in keys.chunks(1000) {
        root.store().delete_many(batch).await?;
    }
    let raw_s = t.elapsed().as_secs_f64();
    println!(
        "ceiling (raw delete_many of {} objects of the same sizes): {raw_s:.3} s, {:.3} s per GB; gc / ceiling = {:.2}x the time",
        keys.len(),
        raw_s / gb,
        gc_s / raw_s
    );
    Ok(())
}
