//! Peak memory and throughput of writing one shard through [`Publisher`], beside a ceiling
//! measured in the same run on the same bytes.
//!
//! ```text
//! cargo run --release -p guideloom --example write_shard_rss -- [TARGET] [MIB] [REPS]
//! ```
//!
//! `TARGET` is a directory (default: the system's temporary directory) or an `s3://bucket/
//! prefix` (its endpoint from `GUIDELOOM_S3_ENDPOINT`, plain HTTP allowed; the test servers'
//! `env.sh` sets it and the dummy keys). Each case runs in its own child process (so each peak
//! RSS, read from `VmHWM` in `/proc/self/status`, is that case's alone; the peak of `RssAnon`,
//! anonymous memory, is sampled every millisecond beside it):
//! - a directory: a raw `BufWriter` write of the record bytes to a file (then fsync), and
//!   `Publisher::write_raw_shard` (the raw-bytes form of `Publisher::write_shard`; both go
//!   through `Root::write_shard`) of the same records to a fresh local root under it;
//! - `s3://`: one create-only PUT (object_store's `put_opts`) of the shard encoded in memory
//!   beforehand (the same bytes from memory: the ceiling; the encoding is not timed), and
//!   `Publisher::write_raw_shard` of the records (encode, spool, PUT) under a fresh prefix,
//!   after a one-record shard that makes the bucket's conditional-write probe before the
//!   clock starts. The objects are deleted afterwards.
//!
//! Two shapes of a `MIB`-MiB shard: 1 Ki x 1 KiB and 4 x 256 KiB records per MiB. The
//! defaults (64 MiB, one run) keep `cargo xtask ci`'s run of every example short; the
//! measurements in `docs/publication.md` ("Writing a shard") are `-- DIR 1024 5` and
//! `-- s3://BUCKET/PREFIX 512 3`. The records are slices of one pool of pseudo-random bytes,
//! so producing them costs nothing in either case. Linux only (it reads `/proc`).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use guideloom::publish::{S3Options, StoreOptions};
use guideloom::{Publisher, ShardMetadata};

const POOL: usize = 4 << 20;

fn pool() -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..POOL)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Record `i` of size `len`: a slice of the pool at a position that varies with `i`.
fn record(pool: &[u8], i: usize, len: usize) -> &[u8] {
    let start = (i.wrapping_mul(7919) * 64) % (pool.len() - len);
    &pool[start..start + len]
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The store options of `target`: S3 settings from the environment for `s3://`.
fn store_options() -> StoreOptions {
    let endpoint = std::env::var("GUIDELOOM_S3_ENDPOINT").ok();
    StoreOptions {
        s3: S3Options {
            allow_http: endpoint
                .as_deref()
                .is_some_and(|e| e.starts_with("http://")),
            endpoint,
            ..S3Options::default()
        },
        ..StoreOptions::default()
    }
}

fn meta() -> ShardMetadata {
    ShardMetadata::new("raw", "documents")
}

/// Runs `case` on `target` (a fresh directory, or a fresh `s3://` prefix); returns the
/// bytes written.
fn run(case: &str, target: &str, pool: &[u8], count: usize, len: usize) -> (u64, f64) {
    let records = (0..count).map(|i| record(pool, i, len));
    match case {
        "raw" => {
            let start = Instant::now();
            let path = std::path::Path::new(target).join("raw.bin");
            let file = std::fs::File::create(&path).expect("create raw file");
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let mut n = 0u64;
            for r in records {
                out.write_all(r).expect("write");
                n += r.len() as u64;
            }
            let file = out.into_inner().expect("flush");
            file.sync_all().expect("fsync");
            (n, start.elapsed().as_secs_f64())
        }
        "publisher" => {
            let root = if target.starts_with("s3://") {
                target.to_owned()
            } else {
                format!("{target}/root")
            };
            let publisher = Publisher::open_with(&root, store_options()).expect("open");
            if target.starts_with("s3://") {
                // The bucket's one-time conditional-write probe, before the clock (the
                // ceiling's bare PUT has none).
                publisher
                    .write_raw_shard("w", 1, meta(), [b"warm-up"])
                    .expect("warm-up shard");
            }
            let start = Instant::now();
            let shard = publisher
                .write_raw_shard("w", 0, meta(), records)
                .expect("write shard");
            let secs = start.elapsed().as_secs_f64();
            assert_eq!(shard.record_count, count as u64);
            (shard.size, secs)
        }
        "put" => {
            use object_store::{ObjectStore, PutMode, PutPayload};
            let mut encoder = guideloom::format::ShardEncoder::new(Vec::new(), meta()).unwrap();
            for r in records {
                encoder.append(r).expect("encode");
            }
            let body = guideloom::Bytes::from(encoder.finish().expect("encode").0);
            let size = body.len() as u64;
            let (store, key) = s3(target);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let start = Instant::now();
            runtime
                .block_on(store.put_opts(&key, PutPayload::from(body), PutMode::Create.into()))
                .expect("put");
            (size, start.elapsed().as_secs_f64())
        }
        other => panic!("unknown case {other}"),
    }
}

/// An S3 client for the bucket of the `s3://` prefix `target`, and the key of its shard.
fn s3(target: &str) -> (object_store::aws::AmazonS3, object_store::path::Path) {
    let rest = target.strip_prefix("s3://").expect("an s3:// target");
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let endpoint = std::env::var("GUIDELOOM_S3_ENDPOINT").unwrap_or_default();
    let store = object_store::aws::AmazonS3Builder::from_env()
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .build()
        .expect("an S3 client");
    let key = object_store::path::Path::from(format!("{prefix}/shards/w/00000000.glm"));
    (store, key)
}

/// Deletes what a case wrote under the `s3://` prefix `target`.
fn clean_up(target: &str) {
    use object_store::ObjectStoreExt;
    if !target.starts_with("s3://") {
        return;
    }
    let (store, key) = s3(target);
    let warm_up = object_store::path::Path::from(key.as_ref().replace("00000000", "00000001"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for key in [key, warm_up] {
        let _ = runtime.block_on(store.delete(&key));
    }
}

fn run_case(case: &str, target: &str, count: usize, len: usize) {
    let pool = pool();
    let peak_anon = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (Arc::clone(&peak_anon), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(status_kib("RssAnon:"), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let (bytes, secs) = run(case, target, &pool, count, len);
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let hwm = status_kib("VmHWM:");
    clean_up(target);
    println!(
        "{case} {count} {len} {bytes} {secs:.3} {hwm} {}",
        peak_anon.load(Ordering::Relaxed)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--case") {
        guideloom::io::tls::install_crypto_provider();
        run_case(
            &args[2],
            &args[3],
            args[4].parse().unwrap(),
            args[5].parse().unwrap(),
        );
        return;
    }
    let base = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| std::env::temp_dir().display().to_string());
    let remote = base.starts_with("s3://");
    let mib: usize = args.get(2).map_or(64, |m| m.parse().expect("MIB"));
    let reps: usize = args.get(3).map_or(1, |r| r.parse().expect("REPS"));
    let exe = std::env::current_exe().expect("current exe");
    let (ceiling, cases) = if remote {
        ("put", ["put", "publisher"])
    } else {
        ("raw", ["raw", "publisher"])
    };
    println!("median of {reps} runs, alternating; peak RSS is the largest of the runs");
    println!(
        "case        records  record   MiB/s  peak RSS MiB  peak anon MiB  ratio to {ceiling}"
    );
    for (count, len) in [(mib << 10, 1usize << 10), (mib << 2, 256 << 10)] {
        let mut rates = [Vec::new(), Vec::new()];
        let mut rss = [0f64; 2];
        let mut anon = [0f64; 2];
        for rep in 0..reps {
            for (c, case) in cases.into_iter().enumerate() {
                let dir =
                    (!remote).then(|| tempfile::tempdir_in(&base).expect("temporary directory"));
                let target = match &dir {
                    Some(dir) => dir.path().display().to_string(),
                    None => format!("{base}/{case}-{}-{rep}-{len}", std::process::id()),
                };
                let out = std::process::Command::new(&exe)
                    .args(["--case", case, &target])
                    .args([count.to_string(), len.to_string()])
                    .output()
                    .expect("run case");
                assert!(
                    out.status.success(),
                    "{case}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let line = String::from_utf8_lossy(&out.stdout);
                let f: Vec<&str> = line.split_whitespace().collect();
                let bytes: f64 = f[3].parse().expect("bytes");
                let secs: f64 = f[4].parse().expect("seconds");
                rates[c].push(bytes / secs / f64::from(1u32 << 20));
                rss[c] = rss[c].max(f[5].parse::<f64>().expect("rss") / 1024.0);
                anon[c] = anon[c].max(f[6].parse::<f64>().expect("anon") / 1024.0);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let first = median(&mut rates[0]);
        let publisher = median(&mut rates[1]);
        println!(
            "{:<10} {count:>8} {len:>7} {first:>7.0} {:>12.1} {:>14.1}  1.00",
            cases[0], rss[0], anon[0]
        );
        println!(
            "publisher  {count:>8} {len:>7} {publisher:>7.0} {:>12.1} {:>14.1}  {:.2}",
            rss[1],
            anon[1],
            publisher / first
        );
    }
}
