//! Times `Root::write_shard` of 200 MiB of 1 KiB records into a local root, on a
//! `current_thread` and on a multi-thread runtime, and measures the longest wait of a 1 ms
//! timer task meanwhile (a write that keeps the executor's thread busy starves it: on a
//! `current_thread` runtime the wait is then the whole encoding).
//!
//! ```text
//! cargo run --release -p guideloom-publish --example write_shard_timing -- [runs] [MiB] [dir]
//! ```
//!
//! Prints one line per run and the minimum and median per runtime flavour. Nothing is
//! asserted: the numbers are for `docs/publication.md`.
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // timing arithmetic

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use guideloom_format::ShardMetadata;
use guideloom_publish::{Registry, Root, RootOptions, StoreOptions};

const RECORD: usize = 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(5, |a| a.parse().expect("runs"));
    let mib: u64 = args.next().map_or(200, |a| a.parse().expect("MiB"));
    let base = args.next().map_or_else(std::env::temp_dir, Into::into);
    let count = mib * 1024 * 1024 / RECORD as u64;
    for flavour in ["current_thread", "multi_thread"] {
        let rt = match flavour {
            "current_thread" => tokio::runtime::Builder::new_current_thread(),
            _ => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(2);
                b
            }
        }
        .enable_all()
        .build()
        .unwrap();
        let mut times = Vec::new();
        for run in 0..runs {
            let dir = tempfile::tempdir_in(&base).unwrap();
            let store = Registry::new()
                .resolve(dir.path().to_str().unwrap(), &StoreOptions::default())
                .unwrap();
            let root = Root::new(store, RootOptions::default());
            let ticks = Arc::new(AtomicU64::new(0));
            let longest = Arc::new(AtomicU64::new(0));
            let (elapsed, size) = rt.block_on(async {
                let (counter, worst) = (Arc::clone(&ticks), Arc::clone(&longest));
                let ticker = tokio::spawn(async move {
                    let mut every = tokio::time::interval(Duration::from_millis(1));
                    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    let mut last = Instant::now();
                    loop {
                        every.tick().await;
                        let now = Instant::now();
                        let gap = u64::try_from((now - last).as_micros()).unwrap_or(u64::MAX);
                        worst.fetch_max(gap, Ordering::Relaxed);
                        last = now;
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                });
                // Let the ticker start, then count only the ticks during the write.
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(3)).await;
                longest.store(0, Ordering::Relaxed);
                let records = (0..count).map(|i| {
                    let mut r = [(i % 251) as u8; RECORD];
                    r[..8].copy_from_slice(&i.to_le_bytes());
                    r
                });
                let before = ticks.load(Ordering::Relaxed);
                let start = Instant::now();
                let meta = ShardMetadata::new("raw", "documents");
                let shard = root.write_shard("w", 0, meta, records).await.unwrap();
                let elapsed = start.elapsed();
                // The ticker records the wait the write ended, if it was starved to the end.
                tokio::time::sleep(Duration::from_millis(2)).await;
                ticker.abort();
                ticks.fetch_sub(before, Ordering::Relaxed);
                (elapsed, shard.size)
            });
            let secs = elapsed.as_secs_f64();
            println!(
                "{flavour} run {run}: {:.3} s, {:.0} MiB/s, {} ticks of a 1 ms timer, \
                 its longest wait {:.1} ms",
                secs,
                size as f64 / secs / (1 << 20) as f64,
                ticks.load(Ordering::Relaxed),
                longest.load(Ordering::Relaxed) as f64 / 1000.0
            );
            times.push(secs);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{flavour}: min {:.3} s, median {:.3} s over {runs} runs of {mib} MiB",
            times[0],
            times[times.len() / 2]
        );
    }
}
