//! Prefetching scans of a remote root beside the plain parallel GET of the same objects:
//! group `publish/s3/prefetch_64MiB`, moto only (on a local root staging is never the
//! cheaper strategy, see `in_order.rs`).
//!
//! The snapshot: 16 shards of 4 096 incompressible records of 1 KiB (about 4 MiB each).
//! Rows (throughput: the shards' object bytes, the same for every row):
//! - `ceiling_parallel_get`: each shard object fetched whole with object_store `get` on the
//!   bucket's own client, bodies buffered, [`PREFETCH`] requests in flight
//!   (`futures::stream::buffer_unordered`) — no shard open, no decoding, no file;
//! - `ceiling_sequential_get`: the same, one object at a time;
//! - `scan_4_requests`: `Dataset::scan` of every record, cold (a new `Root`, so a new
//!   stager), with `StagingOptions::parallel_requests` = [`PREFETCH`] (the default): the next
//!   shards download while one is read;
//! - `scan_1_request`: the same with `parallel_requests` = 1, one request at a time and no
//!   prefetch — the scan as it was before prefetch.

use std::sync::Arc;

use criterion::{Criterion, SamplingMode, Throughput};
use guideloom_format::ShardMetadata;
use guideloom_publish::{Root, RootOptions, Snapshot, StagingOptions};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use tokio::runtime::Runtime;

use crate::target::{DATASET, RECORD, Target};
use crate::{publication, publish};

/// Shards of the snapshot.
const SHARDS: u64 = 16;
/// Records per shard (1 KiB each: about 4 MiB per shard).
const RECORDS: u64 = 4096;
/// Requests in flight of the parallel rows.
const PREFETCH: usize = 4;

/// The published snapshot the group reads.
pub(crate) struct PrefetchSnapshot {
    sub: String,
    snapshot: Snapshot,
    /// The shards' object bytes.
    object_bytes: u64,
    /// Record payload bytes.
    payload: u64,
}

/// Writes and publishes the snapshot (untimed).
pub(crate) fn create(rt: &Runtime, t: &Target) -> PrefetchSnapshot {
    let sub = t.fresh("prefetch");
    let root = t.resolve(&sub);
    let snapshot = rt.block_on(async {
        root.init(DATASET).await.expect("init root");
        let mut rng = StdRng::seed_from_u64(29);
        let mut refs = Vec::new();
        for n in 0..SHARDS {
            let records: Vec<Vec<u8>> = (0..RECORDS)
                .map(|_| {
                    let mut r = vec![0u8; RECORD];
                    rng.fill_bytes(&mut r);
                    r
                })
                .collect();
            let meta = ShardMetadata::new("raw", "documents");
            refs.push(
                root.write_shard("prefetch", n, meta, &records)
                    .await
                    .expect("write shard"),
            );
        }
        publish(&root, refs, "s1", &publication(false)).await
    });
    let object_bytes = snapshot.shards().iter().map(|s| s.size).sum();
    PrefetchSnapshot {
        sub,
        snapshot,
        object_bytes,
        payload: SHARDS * RECORDS * RECORD as u64,
    }
}

/// Every record by a cold scan with `parallel_requests`; returns the payload bytes.
async fn scan(root: &Root, snapshot: &Snapshot) -> u64 {
    let reader = root.reader(snapshot.clone());
    let mut scan = reader.scan(0..reader.len()).expect("scan");
    let mut bytes = 0;
    while let Some(batch) = scan.next_batch().await.expect("batch") {
        bytes += batch.iter().map(|r| r.len() as u64).sum::<u64>();
    }
    bytes
}

/// A root on sub-root `sub`'s store whose stager keeps `parallel_requests` in flight.
fn root_with(t: &Target, sub: &str, parallel_requests: usize) -> Root {
    let store = Arc::clone(t.resolve(sub).store());
    Root::new(
        store,
        RootOptions {
            staging: StagingOptions {
                parallel_requests,
                ..StagingOptions::default()
            },
            ..RootOptions::default()
        },
    )
}

/// The timed group (remote targets only).
pub(crate) fn group(c: &mut Criterion, rt: &Runtime, t: &Target, s: &PrefetchSnapshot) {
    let keys: Vec<String> = s.snapshot.shards().iter().map(|r| r.key.clone()).collect();
    let mut g = c.benchmark_group(format!("publish/{}/prefetch_64MiB", t.name));
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.throughput(Throughput::Bytes(s.object_bytes));
    for (id, n) in [
        ("ceiling_parallel_get", PREFETCH),
        ("ceiling_sequential_get", 1),
    ] {
        g.bench_function(id, |b| {
            b.iter(|| {
                let got = t.raw_get_parallel(rt, &s.sub, &keys, n);
                assert_eq!(got, s.object_bytes);
                got
            })
        });
    }
    for (id, n) in [("scan_4_requests", PREFETCH), ("scan_1_request", 1)] {
        g.bench_function(id, |b| {
            b.iter(|| {
                let root = root_with(t, &s.sub, n);
                let got = rt.block_on(scan(&root, &s.snapshot));
                assert_eq!(got, s.payload);
                let stats = root.stager().stats();
                assert_eq!(stats.downloads, SHARDS);
                got
            })
        });
    }
    g.finish();
}
