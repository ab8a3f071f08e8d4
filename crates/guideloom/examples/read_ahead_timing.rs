//! Read-ahead over a far store: a shuffled pass of batches through `Dataset::get_many` one
//! batch at a time, then through `Dataset::read_ahead` at several depths, and a `Loader`
//! epoch with read-ahead off and on, from an `http://`
//! root served by nginx behind the fault proxy's link (a round trip of `RTT` ms, and a rate
//! cap), beside the same batches from the local root the files are in (the ceiling).
//!
//! ```text
//! cargo xtask servers up nginx && source .xtask/servers/up/env.sh
//! cargo run --release -p guideloom --example read_ahead_timing -- [records] [rtt_ms] [mb_per_s]
//! ```
//!
//! Defaults: 4 096 records of 1 KiB, 20 ms, no rate cap (small, for CI's examples step, which
//! runs it in a debug build). Without nginx (`GUIDELOOM_NGINX_URL`/`GUIDELOOM_NGINX_ROOT`) it
//! says so and exits. Nothing is asserted beyond the bytes: the numbers compare depths.
#![allow(clippy::cast_precision_loss)] // rates for display

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use guideloom::{
    Dataset, Loader, LoaderOptions, PublishMode, Publisher, ReadAheadOptions, ShardMetadata,
};
use guideloom_faultproxy::{FaultProxy, Link, Script};

const RECORD: usize = 1024;
const PER_SHARD: u64 = 8192;
const BATCH: u64 = 64;

/// Removes the published directory whatever the outcome.
struct Served(PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(i: u64) -> Vec<u8> {
    let mut r = i.to_le_bytes().to_vec();
    r.resize(RECORD, u8::try_from(i % 251).unwrap_or(0));
    r
}

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn publish(dir: &Path, records: u64) -> BoxResult<()> {
    let publisher = Publisher::open(dir.to_str().ok_or("non-UTF-8 path")?)?;
    let mut refs = Vec::new();
    for (n, start) in (0..records)
        .step_by(usize::try_from(PER_SHARD)?)
        .enumerate()
    {
        let end = (start + PER_SHARD).min(records);
        let meta = ShardMetadata::new("raw", "documents");
        refs.push(publisher.write_raw_shard("w", n as u64, meta, (start..end).map(record))?);
    }
    publisher.publish("ahead-bench", "s1", refs, PublishMode::Full)?;
    Ok(())
}

/// Batches of `BATCH` records in a fixed pseudo-random order (an LCG over a permutation).
fn batches(records: u64) -> Vec<Vec<u64>> {
    let mut order: Vec<u64> = (0..records).collect();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..order.len()).rev() {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = usize::try_from((x >> 33) % (i as u64 + 1)).unwrap_or(0);
        order.swap(i, j);
    }
    order
        .chunks(usize::try_from(BATCH).unwrap_or(64))
        .map(<[u64]>::to_vec)
        .collect()
}

/// Checks a batch's records and counts them.
fn check(batch: &[u64], got: &[guideloom::Bytes]) -> u64 {
    assert_eq!(got.len(), batch.len());
    for (&i, r) in batch.iter().zip(got) {
        assert_eq!(&r[..8], &i.to_le_bytes(), "record {i}");
    }
    batch.len() as u64
}

fn rate(records: u64, took: Duration) -> String {
    format!("{:>9.0} rec/s", records as f64 / took.as_secs_f64())
}

fn main() -> BoxResult<()> {
    let mut args = std::env::args().skip(1);
    let records: u64 = args.next().map_or(Ok(4096), |a| a.parse())?;
    let rtt = Duration::from_millis(args.next().map_or(Ok(20), |a| a.parse())?);
    let cap: Option<u64> = args.next().map(|a| a.parse()).transpose()?;
    let (Ok(url), Ok(served_root)) = (
        std::env::var("GUIDELOOM_NGINX_URL"),
        std::env::var("GUIDELOOM_NGINX_ROOT"),
    ) else {
        println!("read_ahead_timing: no nginx (GUIDELOOM_NGINX_URL/ROOT): nothing measured");
        return Ok(());
    };
    let subdir = format!("read-ahead-timing-{}", std::process::id());
    let dir = Path::new(&served_root).join(&subdir);
    let _served = Served(dir.clone());
    publish(&dir, records)?;
    let plan = batches(records);

    let mut link = Link::round_trip(rtt);
    if let Some(mb) = cap {
        link = link.with_rate_to_client(mb * 1_000_000);
    }
    let proxy = FaultProxy::for_url_with(&url, Script::pass(), link)?;
    let far = proxy.proxied(&format!("{url}{subdir}"));
    println!(
        "{records} records of {RECORD} B, batches of {BATCH}, round trip {rtt:?}, rate cap {}",
        cap.map_or_else(|| "none".to_owned(), |mb| format!("{mb} MB/s"))
    );

    let local = Dataset::open(dir.to_str().ok_or("non-UTF-8 path")?)?;
    let started = Instant::now();
    let n: u64 = plan
        .iter()
        .map(|b| local.get_many(b).map(|got| check(b, &got)))
        .sum::<std::result::Result<u64, _>>()?;
    println!(
        "local root, get_many per batch (ceiling)   {}",
        rate(n, started.elapsed())
    );

    // Each run opens the far root afresh: shard opens are paid in every row alike.
    let ds = Dataset::open(&far)?;
    let started = Instant::now();
    let n: u64 = plan
        .iter()
        .map(|b| ds.get_many(b).map(|got| check(b, &got)))
        .sum::<std::result::Result<u64, _>>()?;
    println!(
        "far root, get_many per batch (no read-ahead) {}",
        rate(n, started.elapsed())
    );

    for depth in [4, 16, 64] {
        let ds = Dataset::open(&far)?;
        let started = Instant::now();
        let options = ReadAheadOptions::default().with_batches(depth);
        let mut n = 0;
        for (got, b) in ds.read_ahead(plan.clone(), options)?.zip(&plan) {
            n += check(b, &got?);
        }
        println!(
            "far root, read_ahead {depth:>2} batches             {}",
            rate(n, started.elapsed())
        );
    }
    // The loader: one shuffled epoch (its own order), 2 workers, read-ahead off and on.
    for ahead in [0, 16] {
        let ds = Dataset::open(&far)?;
        let options = LoaderOptions::new(BATCH)
            .with_seed(1)
            .with_workers(2)
            .with_read_ahead(ahead, 64 << 20);
        let loader = Loader::new(ds, options, |i, b: guideloom::Bytes| {
            if b[..8] == i.to_le_bytes() {
                Ok(())
            } else {
                Err(guideloom::Error::fetch("check", format!("record {i}")))
            }
        })?;
        let started = Instant::now();
        let mut n = 0;
        for batch in loader.epoch(0)? {
            n += batch?.records.len() as u64;
        }
        assert_eq!(n, records);
        println!(
            "far root, Loader epoch, 2 workers, read_ahead {ahead:>2}  {}",
            rate(n, started.elapsed())
        );
    }
    println!("proxy: {:?}", proxy.stats());
    Ok(())
}
