//! In-order reads of a whole snapshot, the two strategies of the one snapshot reader side by
//! side: ranged runs (`Dataset::read_in_order` on a root whose staging budget is 0, so
//! it never stages: one ranged read of up to 1 MiB per run, shards opened by one tail read)
//! and whole-shard staging (`Dataset::scan`: each shard fetched whole, in 64 MiB
//! chunks, into a local temporary file, then read locally), beside the ceiling of plain
//! whole-object reads of the same shards (no shard open, no decoding). These numbers decide
//! which one `read_in_order` (and so `Dataset::iter`) picks by itself: staging where reads are
//! network requests (`StoreCapabilities::remote_reads`), ranged runs elsewhere. Group `publish/<local|s3>/in_order_32MiB`, then one counted
//! pass of each strategy printed as a table (requests and bytes received).
//!
//! The snapshot: 4 shards of 8 192 incompressible records of 1 KiB (about 8 MiB each). Every
//! iteration starts cold: a new `Root` (so a new stager with no staged shard) and a new
//! reader (no shard opened).

use std::fmt::Write as _;

use criterion::{Criterion, SamplingMode, Throughput};
use guideloom_format::{RunBudget, ShardMetadata};
use std::sync::Arc;

use guideloom_publish::{Root, RootOptions, RootStore, Snapshot, StagingOptions};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use tokio::runtime::Runtime;

use crate::target::{DATASET, RECORD, Target};
use crate::{publication, publish};

/// Shards of the in-order snapshot.
const SHARDS: u64 = 4;
/// Records per shard.
const RECORDS: u64 = 8192;

/// The published snapshot the group reads.
pub(crate) struct InOrderSnapshot {
    sub: String,
    snapshot: Snapshot,
    /// Record payload bytes in the snapshot.
    payload: u64,
}

/// Writes and publishes the snapshot (untimed).
pub(crate) fn create(rt: &Runtime, t: &Target) -> InOrderSnapshot {
    let sub = t.fresh("in-order");
    let root = t.resolve(&sub);
    let snapshot = rt.block_on(async {
        root.init(DATASET).await.expect("init root");
        let mut rng = StdRng::seed_from_u64(23);
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
                root.write_shard("in-order", n, meta, &records)
                    .await
                    .expect("write shard"),
            );
        }
        publish(&root, refs, "s1", &publication(false)).await
    });
    InOrderSnapshot {
        sub,
        snapshot,
        payload: SHARDS * RECORDS * RECORD as u64,
    }
}

/// A root on `store` that never stages (a staging budget of 0 bytes fits no shard).
fn never_staging(store: Arc<dyn RootStore>) -> Root {
    let staging = StagingOptions {
        budget_bytes: 0,
        ..StagingOptions::default()
    };
    Root::new(
        store,
        RootOptions {
            staging,
            ..RootOptions::default()
        },
    )
}

/// Every record through ranged runs (`root` must never stage); returns the payload bytes.
async fn ranged(root: &Root, snapshot: &Snapshot) -> u64 {
    let reader = root.reader(snapshot.clone());
    let mut runs = reader
        .read_in_order(0..reader.len(), RunBudget::default())
        .expect("read_in_order");
    let mut bytes = 0;
    while let Some(run) = runs.next_run().await {
        bytes += run
            .expect("run")
            .records
            .iter()
            .map(|r| r.len() as u64)
            .sum::<u64>();
    }
    bytes
}

/// Every record through whole-shard staging; returns the payload bytes read.
async fn staged(root: &Root, snapshot: &Snapshot) -> u64 {
    let reader = root.reader(snapshot.clone());
    let mut scan = reader.scan(0..reader.len()).expect("scan");
    let mut bytes = 0;
    while let Some(batch) = scan.next_batch().await.expect("batch") {
        bytes += batch.iter().map(|r| r.len() as u64).sum::<u64>();
    }
    bytes
}

/// The ceiling: each shard object read whole, one after another.
fn whole_objects(rt: &Runtime, t: &Target, s: &InOrderSnapshot) -> u64 {
    s.snapshot
        .shards()
        .iter()
        .map(|r| t.raw_get(rt, &s.sub, &r.key).len() as u64)
        .sum()
}

/// The timed group.
pub(crate) fn group(c: &mut Criterion, rt: &Runtime, t: &Target, s: &InOrderSnapshot) {
    let mut g = c.benchmark_group(format!("publish/{}/in_order_32MiB", t.name));
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.throughput(Throughput::Bytes(s.payload));
    g.bench_function("ceiling_whole_objects", |b| {
        b.iter(|| whole_objects(rt, t, s))
    });
    g.bench_function("ranged_runs", |b| {
        b.iter(|| {
            let root = never_staging(Arc::clone(t.resolve(&s.sub).store()));
            let got = rt.block_on(ranged(&root, &s.snapshot));
            assert_eq!(got, s.payload);
            got
        })
    });
    g.bench_function("staged_scan", |b| {
        b.iter(|| {
            let root = t.resolve(&s.sub);
            let got = rt.block_on(staged(&root, &s.snapshot));
            assert_eq!(got, s.payload);
            got
        })
    });
    g.finish();
}

/// One counted pass of each strategy: a markdown table of requests and bytes received.
pub(crate) fn counts(rt: &Runtime, t: &Target, s: &InOrderSnapshot) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| target | in-order strategy | requests | bytes received | payload bytes |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    type Strategy = for<'a> fn(
        &'a Root,
        &'a Snapshot,
    )
        -> std::pin::Pin<Box<dyn std::future::Future<Output = u64> + 'a>>;
    let strategies: [(&str, Strategy); 2] = [
        ("ranged_runs", |r, s| Box::pin(ranged(r, s))),
        ("staged_scan", |r, s| Box::pin(staged(r, s))),
    ];
    for (name, run) in strategies {
        let (root, counting) = t.counted(&s.sub);
        let root = if name == "ranged_runs" {
            never_staging(Arc::new(counting.clone()))
        } else {
            root
        };
        let got = rt.block_on(run(&root, &s.snapshot));
        let total = counting.counts().total();
        let _ = writeln!(
            out,
            "| {} | {name} | {} | {} | {got} |",
            t.name, total.requests, total.bytes_received
        );
    }
    out
}
