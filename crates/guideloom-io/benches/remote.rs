//! Remote byte-range benchmarks: `HttpIo` against nginx and `ObjectStoreIo` against moto (S3),
//! both on loopback, judged by requests and bytes as much as by time.
//!
//! Needs features `http` and `s3` (`cargo bench -p guideloom-io --all-features --bench remote`)
//! and the test servers of `cargo xtask servers up` / `cargo xtask bench`
//! (`GUIDELOOM_NGINX_URL`, `GUIDELOOM_NGINX_ROOT`, `GUIDELOOM_S3_ENDPOINT`,
//! `GUIDELOOM_S3_BUCKET`); without them it prints `skipped: <reason>` and measures nothing.
//!
//! # What is measured
//! One object of 4096 records of 1 KiB after a 16-byte header, served by both servers (and
//! read locally for the ceiling). Groups `remote/1KiB/<pattern>`, benches `http_async`,
//! `s3_async` and `ceiling_pread` (raw local pread of the same ranges from the file nginx
//! serves — the floor a remote read is compared with, not a target):
//! - `random_single`: one random record per iteration;
//! - `random_batched`: `read_ranges` of 64 random records;
//! - `neighbour_batched`: `read_ranges` of 64 consecutive records;
//! - `open` (group `remote/64KiB/open`): open a reader and read its last 64 KiB (`read_tail`,
//!   how a shard opens).
//!
//! After the timed runs, each pattern is repeated 64 times on fresh counters and a second table
//! is printed: requests per operation and bytes received per byte requested (HTTP multipart
//! overhead included). Times are wall-clock (a remote read mostly waits); the knobs of the IO
//! bench (`GUIDELOOM_BENCH_MEASURE_SECS`, `..._WARMUP_SECS`, `..._SAMPLES`) apply.

use std::fs::File;
use std::hint::black_box;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, Throughput};
use guideloom_benchkit::{pread, random_bytes, random_records, record_range, us};
use guideloom_io::http::{HttpIo, HttpPath};
use guideloom_io::objstore::ObjectStoreIo;
use guideloom_io::{AsyncReader, Backend, RequestStats, StatsSnapshot};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::runtime::Runtime;

const HEADER: u64 = 16;
const RECORD: u64 = 1024;
const RECORDS: u64 = 4096;
const BATCH: usize = 64;
const SEQUENCE: usize = 4096;
const TAIL: u64 = 64 * 1024;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Opens a fresh reader of the bench object.
type Opener = Box<dyn Fn(&Runtime) -> Box<dyn AsyncReader>>;

/// A remote backend under test: its readers open per name, and its request counters.
struct Remote {
    id: &'static str,
    open: Opener,
    stats: Arc<RequestStats>,
}

/// The bench object, on disk (for nginx and the ceiling) and in the bucket.
struct Setup {
    local: PathBuf,
    size: u64,
    random: Vec<Range<u64>>,
    remotes: Vec<Remote>,
}

fn record(i: u64) -> Range<u64> {
    record_range(HEADER, RECORD, i)
}

fn setup(rt: &Runtime) -> Result<Setup, String> {
    let (Some(url), Some(root)) = (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT")) else {
        return Err(
            "GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT not set (run `cargo xtask bench`)".into(),
        );
    };
    let (Some(endpoint), Some(bucket)) = (var("GUIDELOOM_S3_ENDPOINT"), var("GUIDELOOM_S3_BUCKET"))
    else {
        return Err(
            "GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET not set (run `cargo xtask bench`)".into(),
        );
    };
    let name = format!("bench-remote-{}.bin", std::process::id());
    let size = HEADER + RECORDS * RECORD;
    let data = random_bytes(&mut StdRng::seed_from_u64(7), us(size));
    let local = PathBuf::from(root).join(&name);
    std::fs::write(&local, &data).map_err(|e| format!("{}: {e}", local.display()))?;

    guideloom_io::tls::install_crypto_provider();

    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .map_err(|e| format!("S3 store: {e}"))?;
    let store: Arc<dyn ObjectStore> = Arc::new(store);
    let key = StorePath::from(name.as_str());
    rt.block_on(store.put(&key, data.into()))
        .map_err(|e| format!("upload to S3: {e}"))?;

    let http = HttpIo::new(&url).map_err(|e| e.to_string())?;
    let http_path = HttpPath::new(&name).map_err(|e| e.to_string())?;
    let s3 = ObjectStoreIo::new(store);
    let random = random_records(
        &mut StdRng::seed_from_u64(11),
        HEADER,
        RECORD,
        RECORDS,
        SEQUENCE,
    );
    let remotes = vec![
        Remote {
            id: "http_async",
            stats: Arc::clone(http.stats()),
            open: Box::new(move |rt| {
                rt.block_on(http.open_async(&http_path))
                    .expect("open http reader")
            }),
        },
        Remote {
            id: "s3_async",
            stats: Arc::clone(s3.stats()),
            open: Box::new(move |rt| rt.block_on(s3.open_async(&key)).expect("open s3 reader")),
        },
    ];
    Ok(Setup {
        local,
        size,
        random,
        remotes,
    })
}

/// The ranges of operation `k` of a pattern.
fn ranges(s: &Setup, pattern: &str, k: usize) -> Vec<Range<u64>> {
    match pattern {
        "random_single" => vec![s.random[k % SEQUENCE].clone()],
        "random_batched" => (0..BATCH)
            .map(|j| s.random[(k * BATCH + j) % SEQUENCE].clone())
            .collect(),
        "neighbour_batched" => {
            let first = (k as u64 * BATCH as u64 * 7) % (RECORDS - BATCH as u64);
            (first..first + BATCH as u64).map(record).collect()
        }
        "open" => std::iter::once(s.size - TAIL..s.size).collect(),
        other => panic!("no pattern {other}"),
    }
}

/// One operation of `pattern`: on `reader`, or for `open` on a reader opened for it.
/// Returns the bytes received by the caller.
fn op(
    rt: &Runtime,
    remote: &Remote,
    reader: &dyn AsyncReader,
    pattern: &str,
    rs: &[Range<u64>],
) -> u64 {
    if pattern == "open" {
        let fresh = (remote.open)(rt);
        let tail = rt.block_on(fresh.read_tail(TAIL)).expect("read_tail");
        return tail.bytes.len() as u64;
    }
    rt.block_on(async {
        if let [r] = rs {
            return reader
                .read(r.start, r.end - r.start)
                .await
                .expect("read")
                .len() as u64;
        }
        let got = reader.read_ranges(rs).await.expect("read_ranges");
        got.iter().map(|b| b.len() as u64).sum()
    })
}

/// The ceiling's operation: raw local pread of the same ranges into fresh buffers.
fn ceiling(file: &File, rs: &[Range<u64>]) -> u64 {
    rs.iter()
        .map(|r| black_box(pread(file, r.clone())).len() as u64)
        .sum()
}

/// The group of a pattern: `remote/<unit>/<pattern>`, where the unit is what one operation
/// reads per "record" in the summary table (a 64 KiB tail for `open`, so records/s = opens/s).
fn group(pattern: &str) -> String {
    let unit = if pattern == "open" { "64KiB" } else { "1KiB" };
    format!("remote/{unit}/{pattern}")
}

const PATTERNS: [&str; 4] = [
    "random_single",
    "random_batched",
    "neighbour_batched",
    "open",
];

/// Requests and bytes of 64 operations of each pattern, on fresh counters.
fn economy(rt: &Runtime, s: &Setup) -> String {
    let mut out = String::from(
        "\nRemote request economy (64 operations each, after the timed runs):\n\n\
         | group | bench | requests/op | requests/record | bytes received / requested |\n\
         |---|---|---:|---:|---:|\n",
    );
    for pattern in PATTERNS {
        for remote in &s.remotes {
            let reader = (remote.open)(rt);
            // The first operation may also learn the size (HEAD); count steady state.
            let _ = op(rt, remote, &*reader, pattern, &ranges(s, pattern, 0));
            let before: StatsSnapshot = remote.stats.snapshot();
            let (mut asked, mut records) = (0u64, 0u64);
            for k in 1..=64 {
                let rs = ranges(s, pattern, k);
                asked += rs.iter().map(|r| r.end - r.start).sum::<u64>();
                records += rs.len() as u64;
                let got = op(rt, remote, &*reader, pattern, &rs);
                assert_eq!(got, rs.iter().map(|r| r.end - r.start).sum::<u64>());
            }
            let after = remote.stats.snapshot();
            let requests = after.requests - before.requests;
            let bytes = after.bytes_received - before.bytes_received;
            out.push_str(&format!(
                "| {} | {} | {:.2} | {:.3} | {:.3} |\n",
                group(pattern),
                remote.id,
                requests as f64 / 64.0,
                requests as f64 / records as f64,
                bytes as f64 / asked as f64,
            ));
        }
    }
    out
}

fn bench(c: &mut Criterion, rt: &Runtime, s: &Setup) {
    let file = File::open(&s.local).expect("open local copy");
    for pattern in PATTERNS {
        let mut g = c.benchmark_group(group(pattern));
        let per_op = ranges(s, pattern, 0)
            .iter()
            .map(|r| r.end - r.start)
            .sum::<u64>();
        g.throughput(Throughput::Bytes(per_op));
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k += 1;
                ceiling(&file, &ranges(s, pattern, k))
            })
        });
        for remote in &s.remotes {
            let reader = (remote.open)(rt);
            g.bench_function(remote.id, |b| {
                let mut k = 0;
                b.iter(|| {
                    k += 1;
                    op(rt, remote, &*reader, pattern, &ranges(s, pattern, k))
                })
            });
        }
        g.finish();
    }
}

fn main() {
    let rt = guideloom_benchkit::multi_thread_runtime();
    let s = match setup(&rt) {
        Ok(s) => s,
        Err(reason) => {
            println!("skipped: remote benches: {reason}");
            return;
        }
    };
    let mut c = guideloom_benchkit::wall_config().configure_from_args();
    bench(&mut c, &rt, &s);
    c.final_summary();
    println!("{}", economy(&rt, &s));
    let _ = std::fs::remove_file(&s.local);
}
