//! Load: 32 concurrent readers of one snapshot over HTTP (nginx) and S3 (moto, Ceph RGW) for a
//! bounded time (`GUIDELOOM_LOAD_SECONDS`, default 4 per root). Every record read is checked
//! byte for byte; no error is tolerated; resident memory after the run is within a margin of
//! what it was once warm (no growth with requests), and the open file descriptors come back
//! to the warm count (no leak per request).

#[path = "it/faults_common/mod.rs"]
mod faults_common;
#[path = "it/publish_common/mod.rs"]
mod publish_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use guideloom_format::KIND_DOCUMENTS;
use guideloom_format::ShardMetadata;
use guideloom_publish::{Dataset, Registry, Root, RootOptions, StoreOptions};
use publish_common::*;

const READERS: usize = 32;
const SHARDS: u64 = 4;
const PER_SHARD: u64 = 250;

/// Record `i`: about 1 KiB, unique bytes.
fn record(i: u64) -> Vec<u8> {
    let mut r = format!("record {i:08} ").into_bytes();
    r.extend((0..1000u64).map(|j| u8::try_from((i * 31 + j * 7) % 251).unwrap()));
    r
}

fn seconds() -> Duration {
    let s = std::env::var("GUIDELOOM_LOAD_SECONDS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(4.0);
    Duration::from_secs_f64(s)
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// Writes the dataset into `writer` (4 shards × 250 records of ~1 KiB).
async fn write_dataset(writer: &Root) {
    let mut shards = Vec::new();
    for n in 0..SHARDS {
        let records: Vec<Vec<u8>> = (n * PER_SHARD..(n + 1) * PER_SHARD).map(record).collect();
        shards.push(
            writer
                .write_shard(
                    "load",
                    n,
                    ShardMetadata::new("raw", KIND_DOCUMENTS),
                    records.iter(),
                )
                .await
                .unwrap(),
        );
    }
    publish(writer, "s1", shards).await;
}

/// What one run measured.
#[derive(Debug)]
struct Run {
    reads: u64,
    records: u64,
    warm_rss_kib: u64,
    end_rss_kib: u64,
    warm_fds: usize,
    end_fds: usize,
}

/// 32 tasks reading random records and batches of `reader` until `duration` is over.
/// [`hammer`] for [`seconds`], repeated (up to 8 rounds) until `enough()`: a loaded machine
/// serves fewer requests per second, and the fault runs are about how many faults the readers
/// absorbed, not how fast they read. The last round's measurements are returned.
async fn hammer_until(reader: &Arc<Dataset>, enough: impl Fn() -> bool) -> Run {
    let mut run = hammer(Arc::clone(reader), seconds()).await;
    for _ in 1..8 {
        if enough() {
            break;
        }
        run = hammer(Arc::clone(reader), seconds()).await;
    }
    run
}

async fn hammer(reader: Arc<Dataset>, duration: Duration) -> Run {
    let total = reader.len();
    let reads = Arc::new(AtomicU64::new(0));
    let records = Arc::new(AtomicU64::new(0));
    // Warm: every shard opened, the connection pool filled.
    for i in (0..total).step_by(usize::try_from(PER_SHARD).unwrap()) {
        assert_eq!(reader.get_async(i).await.unwrap(), record(i));
    }
    let run = |deadline: Instant, seed: u64| {
        let reader = Arc::clone(&reader);
        let (reads, records) = (Arc::clone(&reads), Arc::clone(&records));
        tokio::spawn(async move {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            while Instant::now() < deadline {
                if next() % 4 == 0 {
                    let batch: Vec<u64> = (0..16).map(|_| next() % total).collect();
                    let got = reader.get_many_async(&batch).await.unwrap();
                    for (i, r) in batch.iter().zip(&got) {
                        assert_eq!(r.as_ref(), record(*i).as_slice(), "record {i}");
                    }
                    records.fetch_add(16, Ordering::Relaxed);
                } else {
                    let i = next() % total;
                    assert_eq!(reader.get_async(i).await.unwrap(), record(i), "record {i}");
                    records.fetch_add(1, Ordering::Relaxed);
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // A first short round warms allocator and pools to their steady size.
    let warmup = Instant::now() + duration / 4;
    let tasks: Vec<_> = (0..READERS as u64).map(|s| run(warmup, s + 1)).collect();
    for t in tasks {
        t.await.unwrap();
    }
    let warm_rss_kib = status_kib("VmRSS:");
    let warm_fds = open_fds();
    let deadline = Instant::now() + duration;
    let tasks: Vec<_> = (0..READERS as u64)
        .map(|s| run(deadline, s + 101))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    Run {
        reads: reads.load(Ordering::Relaxed),
        records: records.load(Ordering::Relaxed),
        warm_rss_kib,
        end_rss_kib: status_kib("VmRSS:"),
        warm_fds,
        end_fds: open_fds(),
    }
}

/// Checks a run. `fd_slack`: descriptors that may be open at the end beyond the warm count
/// without a leak. The counts are taken with no request in flight, but a client's pool keeps
/// idle connections (object_store's for 90 s, with no cap), so its high-water mark can still
/// rise to the most connections ever in flight: a reader's batch reads its shards
/// concurrently, so up to `READERS * SHARDS`, and three descriptors each when the fault proxy
/// runs in this process (client, proxy's accepted side, proxy's upstream side). A leak per
/// request (thousands here) or per injected fault (over a thousand) shows far beyond that.
fn check(name: &str, run: &Run, fd_slack: usize) {
    println!("{name}: {run:?}");
    assert!(
        run.reads > READERS as u64,
        "{name}: too few reads to mean anything"
    );
    assert!(
        run.records >= run.reads,
        "{name}: every read returns a record"
    );
    // Flat memory: the second round (4x longer, 4x the requests) adds at most 48 MiB.
    assert!(
        run.end_rss_kib <= run.warm_rss_kib + 48 * 1024,
        "{name}: resident memory grew from {} KiB to {} KiB",
        run.warm_rss_kib,
        run.end_rss_kib
    );
    // No descriptor per request: at most the connections in flight more than when warm.
    assert!(
        run.end_fds <= run.warm_fds + fd_slack,
        "{name}: open descriptors went from {} to {}",
        run.warm_fds,
        run.end_fds
    );
}

/// Memory and descriptors are counted for the whole process, so the tests of this file run
/// one at a time even under `cargo test`'s threads (nextest gives each its own process).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn thirty_two_readers_over_http() {
    let _serial = serial();
    let Some((url, served)) = guideloom_tests::nginx("the HTTP load test") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let sub = unique("load-http");
        let dir = served.join(&sub);
        let writer = Root::new(
            Registry::new()
                .resolve(dir.to_str().unwrap(), &StoreOptions::default())
                .unwrap(),
            RootOptions::default(),
        );
        write_dataset(&writer).await;
        let base = format!("{}/{sub}", url.trim_end_matches('/'));
        let root = Root::new(
            Registry::new()
                .resolve(&base, &StoreOptions::default())
                .unwrap(),
            RootOptions::default(),
        );
        let reader = Arc::new(root.reader(root.latest().await.unwrap()));
        let run = hammer(reader, seconds()).await;
        let _ = std::fs::remove_dir_all(&dir);
        check("http", &run, 8);
    });
}

#[test]
fn thirty_two_readers_over_s3() {
    let _serial = serial();
    let mut fixtures = Vec::new();
    fixtures.extend(moto());
    fixtures.extend(rgw());
    if fixtures.is_empty() {
        return;
    }
    for fx in fixtures {
        let rt = runtime();
        rt.block_on(async {
            write_dataset(&fx.root).await;
            let reader = Arc::new(fx.root.reader(fx.root.latest().await.unwrap()));
            let run = hammer(reader, seconds()).await;
            check(fx.name, &run, READERS * usize::try_from(SHARDS).unwrap());
        });
    }
}

/// The same load through the fault proxy, which resets one request in 40 after the server
/// answered and turns another into a 503 (never the same request twice): the readers'
/// retries absorb every injected fault (no error reaches a reader), and memory and
/// descriptors stay flat.
#[test]
fn thirty_two_readers_over_http_with_injected_faults() {
    let _serial = serial();
    use guideloom_faultproxy::{Fault, FaultProxy, Script};
    let Some((url, served)) = guideloom_tests::nginx("the HTTP load test with faults") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let sub = unique("load-faults");
        let dir = served.join(&sub);
        let writer = Root::new(
            Registry::new()
                .resolve(dir.to_str().unwrap(), &StoreOptions::default())
                .unwrap(),
            RootOptions::default(),
        );
        write_dataset(&writer).await;
        // Each distinct request (method, target, range) is faulted at most once, so a retry
        // of it passes: every injected fault is one a reader's retries must absorb.
        let mut faulted = std::collections::HashSet::new();
        let proxy = FaultProxy::for_url(
            &url,
            Script::from_fn(move |e| {
                let fault = match e.request % 40 {
                    17 => Fault::ResetAfterResponseBytes(0),
                    33 => Fault::unavailable(0),
                    _ => return Fault::Pass,
                };
                if faulted.insert((e.method.clone(), e.target.clone(), e.range.clone())) {
                    fault
                } else {
                    Fault::Pass
                }
            }),
        )
        .unwrap();
        let base = format!("{}/{sub}", proxy.url().trim_end_matches('/'));
        let root = Root::new(
            Registry::new()
                .resolve(&base, &StoreOptions::default())
                .unwrap(),
            RootOptions::default(),
        );
        let reader = Arc::new(root.reader(root.latest().await.unwrap()));
        let run = hammer_until(&reader, || proxy.stats().faults > 10).await;
        let faults = proxy.stats().faults;
        let _ = std::fs::remove_dir_all(&dir);
        println!("{faults} faults injected");
        assert!(
            faults > 10,
            "too few faults injected ({faults}) to mean anything"
        );
        check("http through faults", &run, 3 * READERS);
    });
}

/// The load over S3 (moto, Ceph RGW) through the fault proxy: one GET in 10 reset after the
/// server answered, another a 503 (never the same request twice). object_store's retries
/// absorb them all: no error reaches a reader.
#[test]
fn thirty_two_readers_over_s3_with_injected_faults() {
    let _serial = serial();
    use guideloom_faultproxy::{Fault, FaultProxy, Script};
    for (name, endpoint, bucket) in faults_common::s3_servers("the S3 load test with faults") {
        let rt = runtime();
        rt.block_on(async {
            let prefix = unique("load-faults");
            let clean = faults_common::s3_root(&endpoint, &bucket, &prefix);
            write_dataset(&clean).await;
            let mut faulted = std::collections::HashSet::new();
            let proxy = FaultProxy::for_url(
                &endpoint,
                Script::from_fn(move |e| {
                    if e.method != "GET" {
                        return Fault::Pass;
                    }
                    let fault = match e.request % 10 {
                        3 => Fault::ResetAfterResponseBytes(0),
                        7 => Fault::unavailable(0),
                        _ => return Fault::Pass,
                    };
                    if faulted.insert((e.target.clone(), e.range.clone())) {
                        fault
                    } else {
                        Fault::Pass
                    }
                }),
            )
            .unwrap();
            let root = faults_common::s3_root(&proxy.url(), &bucket, &prefix);
            let reader = Arc::new(root.reader(root.latest().await.unwrap()));
            let run = hammer_until(&reader, || proxy.stats().faults > 100).await;
            let faults = proxy.stats().faults;
            println!("{name}: {faults} faults injected");
            assert!(faults > 100, "{name}: too few faults injected ({faults})");
            check(
                &format!("{name} through faults"),
                &run,
                3 * READERS * usize::try_from(SHARDS).unwrap(),
            );
        });
    }
}
