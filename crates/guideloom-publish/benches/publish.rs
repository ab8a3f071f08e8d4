//! Publication benchmarks: publishing shards, opening a snapshot, and random record reads,
//! on a local root and on moto (S3), each beside a raw ceiling measured in the same run, plus
//! a table of the requests each operation makes, counted by kind.
//!
//! Run with `cargo xtask bench` (which starts the servers and prints the summary with ratios
//! and the request table) or `cargo bench -p guideloom-publish --features s3 --bench publish`
//! with the servers' variables set (`cargo xtask servers up`, then
//! `source .xtask/servers/up/env.sh`). Without `GUIDELOOM_S3_ENDPOINT`/`GUIDELOOM_S3_BUCKET`,
//! or without feature `s3`, the moto groups are skipped with a printed note.
//!
//! # What is measured
//! 16 shards of 64 records of 1 KiB (about 66 KiB each, native format, encoded once).
//! Groups `publish/<local|s3>/...`:
//! - `16_shards` (throughput: 16 elements, so the summary's records/s column reads as
//!   shards/s): into a fresh root whose `dataset.json` already exists,
//!   - `upload_publish`: `upload_shard` of the 16 shards one after another, then `publish`;
//!   - `upload_publish_verify`: the same with `verify_record_counts` and `FooterInspector`;
//!   - `ceiling_put`: the same 16 bodies written raw: a new file written and fsynced each
//!     (local), one plain unconditional PUT each (moto) — no create-only check, no control
//!     objects.
//! - `open_first_record`: `Registry::resolve` → `latest()` → `reader(snapshot).get(0)` on a
//!   published 16-shard snapshot, cold (a new `Root` per iteration; the registry, and so the
//!   S3 client, is reused); `ceiling_raw_reads` fetches the same bytes a reader must fetch,
//!   knowing where they are: the log entry (whole), the first shard's tail (as long as a
//!   shard open reads) and record 0's range — no listing, no `dataset.json`.
//! - `1KiB/random_get`: `Dataset::get` of a random record (seeded sequence, shards
//!   already open, record CRC checked as by default) beside the raw read of exactly that
//!   record's byte range (from the shard's index): `ceiling_pread` (a fresh `Vec` per read)
//!   on the local root, `ceiling_objectstore_io` (guideloom-io's `ObjectStoreIo`, same client)
//!   on moto. On the local root, `preadio_async` (guideloom-io's async `PreadIo` reader of
//!   the same ranges, files kept open) is a diagnostic between the two: the cost of the
//!   async hop alone; `snapshot_reader_get_pread` is `snapshot_reader_get` on the same root
//!   resolved with `LocalReads::Pread` (the default on a declared mount).
//! - `in_order_32MiB` (see `publish/in_order.rs`): a 4-shard, 32 MiB snapshot read in order,
//!   cold, by ranged runs (`read_in_order` with staging off) and by whole-shard staging
//!   (`scan`; what `read_in_order` picks by itself on remote roots), beside `ceiling_whole_objects` (each shard read whole, raw); then a
//!   counted pass of each strategy is printed (requests, bytes received).
//! - HTTP request counts (feature `http`, nginx; see `publish/http.rs`): issue 15's HTTP rows,
//!   a fresh reader's open and first 1 KiB get from a 100 000-record root, a warm get, and an
//!   open at sequence 3, each as requests and bytes received (no timing).
//! - `prefetch_64MiB` (moto only, see `publish/prefetch.rs`): a 16 × 4 MiB snapshot scanned
//!   cold with 4 requests in flight (prefetch, the default) and with 1 (no prefetch), beside
//!   object_store `get` of the same objects with 4 (`ceiling_parallel_get`) and 1 in flight.
//!
//! After the timed runs each operation is repeated once more through a counting store (every
//! `RootStore` method, and the reads of the readers it opens) and a markdown table is printed
//! and, when `GUIDELOOM_BENCH_COUNTS_DIR` is set (as `cargo xtask bench` does), written to
//! `publish.md` there for the summary. On moto the bucket's own request counter is shown
//! beside the counted operations as a cross-check.
//!
//! Times are wall-clock (these operations mostly wait on fsync or the network); the knobs of
//! the other benches apply: `GUIDELOOM_BENCH_MEASURE_SECS` (1.5),
//! `GUIDELOOM_BENCH_WARMUP_SECS` (0.3), `GUIDELOOM_BENCH_SAMPLES` (20; the publish and open
//! groups take 10 samples of one iteration each).

#[path = "publish/economy.rs"]
mod economy;
#[cfg(feature = "http")]
#[path = "publish/http.rs"]
mod http;
#[path = "publish/in_order.rs"]
mod in_order;
#[path = "publish/prefetch.rs"]
mod prefetch;
#[path = "publish/target.rs"]
mod target;

use std::fs::File;
use std::hint::black_box;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, SamplingMode, Throughput};
use guideloom_benchkit::{pread, random_indices};
use guideloom_format::{AsyncShard, ReadOptions};
use guideloom_io::{AsyncReader, Backend, PreadIo};
use guideloom_publish::{
    FooterInspector, LocalReads, PublicationOptions, PublishMode, PublishRequest, Root, ShardRef,
    Snapshot,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::runtime::Runtime;

use crate::target::{DATASET, RECORD, RECORDS, SHARDS, Target};

/// Length of the random record sequence.
const SEQUENCE: usize = 4096;

/// Publication options without and with footer verification.
pub(crate) fn publication(verify: bool) -> PublicationOptions {
    PublicationOptions {
        verify_record_counts: verify,
        inspector: verify.then(|| Arc::new(FooterInspector) as _),
        ..PublicationOptions::default()
    }
}

/// Uploads the shards one after another into `root`, then publishes them as `snapshot_id`.
pub(crate) async fn upload_publish(
    root: &Root,
    shards: &[Bytes],
    snapshot_id: &str,
    options: &PublicationOptions,
) -> Snapshot {
    let refs = upload(root, shards).await;
    publish(root, refs, snapshot_id, options).await
}

pub(crate) async fn upload(root: &Root, shards: &[Bytes]) -> Vec<ShardRef> {
    let mut refs = Vec::with_capacity(shards.len());
    for (i, body) in (0u64..).zip(shards) {
        refs.push(
            root.upload_shard("worker", i, body.clone(), RECORDS)
                .await
                .expect("upload shard"),
        );
    }
    refs
}

pub(crate) async fn publish(
    root: &Root,
    shards: Vec<ShardRef>,
    snapshot_id: &str,
    options: &PublicationOptions,
) -> Snapshot {
    let request = PublishRequest {
        dataset_id: DATASET.into(),
        snapshot_id: snapshot_id.into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, options)
        .await
        .expect("publish")
        .snapshot
}

/// A fresh root whose `dataset.json` exists (untimed setup of a publish iteration).
fn fresh_root(rt: &Runtime, t: &Target, tag: &str) -> (String, Root) {
    let sub = t.fresh(tag);
    let root = t.resolve(&sub);
    rt.block_on(root.init(DATASET)).expect("init root");
    (sub, root)
}

fn publish_group(c: &mut Criterion, rt: &Runtime, t: &Target, shards: &[Bytes]) {
    let mut g = c.benchmark_group(format!("publish/{}/16_shards", t.name));
    g.throughput(Throughput::Elements(SHARDS));
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.bench_function("ceiling_put", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let sub = t.fresh("ceiling");
                let start = Instant::now();
                for (i, body) in shards.iter().enumerate() {
                    t.raw_put(rt, &sub, &format!("shards/worker/{i}.glm"), body);
                }
                total += start.elapsed();
            }
            total
        })
    });
    for (id, verify) in [("upload_publish", false), ("upload_publish_verify", true)] {
        let options = publication(verify);
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (_, root) = fresh_root(rt, t, "publish");
                    let start = Instant::now();
                    let snap = rt.block_on(upload_publish(&root, shards, "s1", &options));
                    total += start.elapsed();
                    assert_eq!(snap.total_records(), SHARDS * RECORDS);
                }
                total
            })
        });
    }
    g.finish();
}

/// A published snapshot to read, with every record's shard and byte range.
pub(crate) struct Published {
    pub(crate) sub: String,
    pub(crate) snapshot: Snapshot,
    /// `(shard, byte range)` of each record, by snapshot index.
    ranges: Vec<(usize, Range<u64>)>,
    /// The random record sequence.
    sequence: Vec<u64>,
}

impl Published {
    pub(crate) fn create(rt: &Runtime, t: &Target, shards: &[Bytes]) -> Published {
        let (sub, root) = fresh_root(rt, t, "read");
        let snapshot = rt.block_on(upload_publish(&root, shards, "s1", &publication(false)));
        // Record ranges from each shard's index, as guideloom-format reads it.
        let mut ranges = Vec::new();
        for (i, r) in snapshot.shards().iter().enumerate() {
            let shard = rt.block_on(async {
                let reader = root
                    .store()
                    .open_reader(&r.key, r.size)
                    .await
                    .expect("open reader");
                AsyncShard::open(reader, &ReadOptions::default())
                    .await
                    .expect("open shard")
            });
            for k in 0..shard.len() {
                ranges.push((i, shard.record_range(k).expect("record range")));
            }
        }
        assert_eq!(ranges.len() as u64, SHARDS * RECORDS);
        let sequence = random_indices(
            &mut StdRng::seed_from_u64(17),
            ranges.len() as u64,
            SEQUENCE,
        );
        Published {
            sub,
            snapshot,
            ranges,
            sequence,
        }
    }

    fn key(&self, shard: usize) -> &str {
        &self.snapshot.shards()[shard].key
    }
}

/// What `ceiling_raw_reads` fetches: the log entry, the first shard's tail, record 0.
fn raw_open(rt: &Runtime, t: &Target, p: &Published) -> u64 {
    let log = t.raw_get(rt, &p.sub, &p.snapshot.log_key);
    let shard = &p.snapshot.shards()[0];
    let tail_len = ReadOptions::default().tail_len().min(shard.size);
    let record = p.ranges[0].1.clone();
    let (tail, rec) = match t.local_path(&p.sub, &shard.key) {
        Some(path) => {
            let file = File::open(path).expect("open shard file");
            (
                pread(&file, shard.size - tail_len..shard.size),
                pread(&file, record),
            )
        }
        None => {
            let reader = t.raw_reader(&p.sub, &shard.key).expect("raw reader");
            rt.block_on(async {
                let tail = reader.read_tail(tail_len).await.expect("tail").bytes;
                let rec = reader
                    .read(record.start, record.end - record.start)
                    .await
                    .expect("record");
                (tail.to_vec(), rec.to_vec())
            })
        }
    };
    (log.len() + tail.len() + rec.len()) as u64
}

/// `Registry::resolve` → `latest()` → `reader(snapshot).get(0)`.
pub(crate) async fn open_first_record(root: Root) -> Bytes {
    let snapshot = root.latest().await.expect("latest");
    root.reader(snapshot).get_async(0).await.expect("get(0)")
}

fn open_group(c: &mut Criterion, rt: &Runtime, t: &Target, p: &Published) {
    let mut g = c.benchmark_group(format!("publish/{}/open_first_record", t.name));
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.bench_function("ceiling_raw_reads", |b| b.iter(|| raw_open(rt, t, p)));
    g.bench_function("resolve_latest_get0", |b| {
        b.iter(|| {
            let got = rt.block_on(open_first_record(t.resolve(&p.sub)));
            assert_eq!(got.len(), RECORD);
            got
        })
    });
    g.finish();
}

fn random_get_group(c: &mut Criterion, rt: &Runtime, t: &Target, p: &Published) {
    let mut g = c.benchmark_group(format!("publish/{}/1KiB/random_get", t.name));
    g.throughput(Throughput::Bytes(RECORD as u64));
    let range_of = |k: usize| &p.ranges[usize::try_from(p.sequence[k % SEQUENCE]).expect("idx")];
    let files: Option<Vec<File>> = (0..p.snapshot.shards().len())
        .map(|i| {
            t.local_path(&p.sub, p.key(i))
                .map(|path| File::open(path).expect("open"))
        })
        .collect();
    match files {
        Some(files) => {
            g.bench_function("ceiling_pread", |b| {
                let mut k = 0;
                b.iter(|| {
                    k += 1;
                    let (i, r) = range_of(k);
                    black_box(pread(&files[*i], r.clone()))
                })
            });
            // Diagnostic, not a ceiling: guideloom-io's async pread reader on the same files
            // (one open file per shard, a blocking-pool hop per read), to tell the async
            // hop from what the local root's reader adds on top of it.
            let io: Vec<Box<dyn AsyncReader>> = (0..p.snapshot.shards().len())
                .map(|i| {
                    let path = t.local_path(&p.sub, p.key(i)).expect("local path");
                    rt.block_on(PreadIo::new().open_async(&path))
                        .expect("open PreadIo reader")
                })
                .collect();
            g.bench_function("preadio_async", |b| {
                let mut k = 0;
                b.iter(|| {
                    k += 1;
                    let (i, r) = range_of(k);
                    rt.block_on(io[*i].read(r.start, r.end - r.start))
                        .expect("PreadIo read")
                })
            });
        }
        None => {
            let readers: Vec<Box<dyn AsyncReader>> = (0..p.snapshot.shards().len())
                .map(|i| t.raw_reader(&p.sub, p.key(i)).expect("raw reader"))
                .collect();
            g.bench_function("ceiling_objectstore_io", |b| {
                let mut k = 0;
                b.iter(|| {
                    k += 1;
                    let (i, r) = range_of(k);
                    rt.block_on(readers[*i].read(r.start, r.end - r.start))
                        .expect("raw read")
                })
            });
        }
    }
    let root = t.resolve(&p.sub);
    let reader = root.reader(p.snapshot.clone());
    // Open every shard first: the group measures steady-state reads.
    for s in 0..SHARDS {
        rt.block_on(reader.get_async(s * RECORDS))
            .expect("open shard");
    }
    g.bench_function("snapshot_reader_get", |b| {
        let mut k = 0;
        b.iter(|| {
            k += 1;
            rt.block_on(reader.get_async(p.sequence[k % SEQUENCE]))
                .expect("get")
        })
    });
    // The same root read with `LocalReads::Pread`, the default on a declared mount.
    if let Some(root) = t.resolve_local_reads(&p.sub, LocalReads::Pread) {
        let reader = root.reader(p.snapshot.clone());
        for s in 0..SHARDS {
            rt.block_on(reader.get_async(s * RECORDS))
                .expect("open shard");
        }
        g.bench_function("snapshot_reader_get_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k += 1;
                rt.block_on(reader.get_async(p.sequence[k % SEQUENCE]))
                    .expect("get")
            })
        });
    }
    g.finish();
}

fn run(c: &mut Criterion, rt: &Runtime, t: &Target, shards: &[Bytes]) -> economy::Economy {
    // The first write through a bucket runs its conditional-write probe; do it untimed.
    let published = Published::create(rt, t, shards);
    publish_group(c, rt, t, shards);
    open_group(c, rt, t, &published);
    random_get_group(c, rt, t, &published);
    let ordered = in_order::create(rt, t);
    in_order::group(c, rt, t, &ordered);
    println!("{}", in_order::counts(rt, t, &ordered));
    if t.name == "local" {
        println!("skipped: publish/local/prefetch_64MiB: prefetch is for remote roots");
    } else {
        let prefetched = prefetch::create(rt, t);
        prefetch::group(c, rt, t, &prefetched);
    }
    economy::table(rt, t, shards, &published)
}

fn main() {
    let rt = guideloom_benchkit::multi_thread_runtime();
    let shards = target::encode_shards();
    let mut c = guideloom_benchkit::wall_config().configure_from_args();
    let mut tables = Vec::new();

    let local = Target::local();
    tables.push(run(&mut c, &rt, &local, &shards));
    local.cleanup(&rt);

    #[cfg(feature = "s3")]
    match Target::moto() {
        Ok(moto) => {
            tables.push(run(&mut c, &rt, &moto, &shards));
            moto.cleanup(&rt);
        }
        Err(reason) => println!("skipped: publish benches on moto: {reason}"),
    }
    #[cfg(not(feature = "s3"))]
    println!("skipped: publish benches on moto: built without feature `s3`");

    c.final_summary();
    economy::emit(&tables);

    #[cfg(feature = "http")]
    match http::table(&rt) {
        Ok(table) => {
            println!("\n{table}");
            guideloom_benchkit::write_counts("http", &table);
        }
        Err(reason) => println!("skipped: HTTP root request counts: {reason}"),
    }
    #[cfg(not(feature = "http"))]
    println!("skipped: HTTP root request counts: built without feature `http`");
}
