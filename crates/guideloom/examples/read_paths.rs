//! Read paths of the facade, timed: random `get`, `get_many` of 64 random indices and an
//! in-order pass (`iter`), on a local root and (when `GUIDELOOM_S3_ENDPOINT` and
//! `GUIDELOOM_S3_BUCKET` are set) an `s3://` root, with `RECORDS` CBOR records of ~1 KiB
//! (default 4 000, small for `cargo xtask ci`'s run of every example) in shards of 2 000.
//! Prints medians of 5 repetitions, and the first in-order pass on its own. Uses only the stable public API, so the same file builds
//! at commits before and after a refactor (compare in one session).
//!
//! `cargo run --release -p guideloom --features s3 --example read_paths -- [RECORDS]`

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use guideloom::{Dataset, DatasetOptions, PublishMode, Publisher, S3Options, StoreOptions};

const SHARD: u64 = 2_000;
const REPS: usize = 5;

fn records(shard: u64) -> Vec<String> {
    (shard * SHARD..(shard + 1) * SHARD)
        .map(|i| format!("{i:08}-{}", "x".repeat(1000)))
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn run(label: &str, uri: &str, storage: StoreOptions, total: u64, random: usize, batches: usize) {
    let publisher = Publisher::open_with(uri, storage.clone()).expect("open publisher");
    let shards = (0..total / SHARD)
        .map(|n| {
            publisher
                .write_shard("bench", n, records(n))
                .expect("write")
        })
        .collect();
    publisher
        .publish("bench", "s1", shards, PublishMode::Full)
        .expect("publish");
    let ds = Dataset::open_with(
        uri,
        DatasetOptions::default()
            .with_store(storage)
            .with_registry(std::sync::Arc::new(guideloom::Registry::new())),
    )
    .expect("open");
    // Warm: every shard opened.
    for n in 0..total / SHARD {
        ds.get(n * SHARD).expect("warm");
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut get_t, mut many_t, mut iter_t) = (vec![], vec![], vec![]);
    for _ in 0..REPS {
        let picks: Vec<u64> = (0..random).map(|_| xorshift(&mut seed) % total).collect();
        let t = Instant::now();
        for &i in &picks {
            ds.get(i).expect("get");
        }
        get_t.push(t.elapsed().div_f64(random as f64));
        let t = Instant::now();
        for _ in 0..batches {
            let batch: Vec<u64> = (0..64).map(|_| xorshift(&mut seed) % total).collect();
            assert_eq!(ds.get_many(&batch).expect("get_many").len(), 64);
        }
        many_t.push(t.elapsed().div_f64(batches as f64));
        let t = Instant::now();
        let mut n = 0usize;
        for record in ds.iter() {
            assert!(!record.expect("iter").is_empty());
            n += 1;
        }
        assert_eq!(n as u64, total);
        iter_t.push(t.elapsed());
    }
    // The first pass apart: a reader that keeps what an in-order pass fetched (whole-shard
    // staging) is faster on the later passes, which the median reports.
    let first = iter_t[0];
    let iter = median(iter_t);
    println!(
        "{label}: get {:.1} µs/record | get_many(64) {:.1} µs/batch | iter {:.1} ms ({:.0} records/s; first pass {:.1} ms)",
        median(get_t).as_secs_f64() * 1e6,
        median(many_t).as_secs_f64() * 1e6,
        iter.as_secs_f64() * 1e3,
        total as f64 / iter.as_secs_f64(),
        first.as_secs_f64() * 1e3
    );
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(4_000, |a| a.parse().expect("RECORDS"))
        .max(SHARD)
        / SHARD
        * SHARD;
    // Memory use of `n` as a usize: n records of ~1 KiB are held in memory anyway.
    let random = usize::try_from(n).expect("RECORDS fits in memory");
    let tmp = tempfile::tempdir().expect("tempdir");
    let local = tmp.path().join("root");
    run(
        "local",
        local.to_str().unwrap(),
        StoreOptions::default(),
        n,
        random,
        random / 40,
    );
    if let (Ok(endpoint), Ok(bucket)) = (
        std::env::var("GUIDELOOM_S3_ENDPOINT"),
        std::env::var("GUIDELOOM_S3_BUCKET"),
    ) {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let uri = format!("s3://{bucket}/bench-read-paths-{nanos}");
        let storage = StoreOptions {
            s3: S3Options {
                endpoint: Some(endpoint),
                allow_http: true,
                ..S3Options::default()
            },
            ..StoreOptions::default()
        };
        run("s3 (moto)", &uri, storage, n, 300, 20);
    }
}
