//! The shared node cache across processes and over a far store: two processes
//! (`src/bin/cache_reader.rs`) filling one cache directory never take it above its budget
//! and never fill a shard twice; a process killed with SIGKILL in the middle of a fill
//! leaves nothing a reader trusts (the next reader removes the partial file and refetches);
//! and over an `http://` root behind the fault proxy's far link (20 ms per round trip), a
//! second epoch makes no data request.
//!
//! The far-root test prints its epoch times (`--nocapture`); docs/cache.md quotes them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use guideloom_faultproxy::{FaultProxy, Link, Script};
use guideloom_format::ShardMetadata;
use guideloom_publish::{
    CacheOptions, CountingStore, Dataset, DatasetOptions, NodeCache, ReadAheadOptions, Registry,
    Root, RootOptions, StoreOptions,
};
use guideloom_tests::cache::{RECORDS, SHARDS, record};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Publishes [`SHARDS`] shards of [`RECORDS`] records of root `seed` into `dir`; the size
/// of its first shard.
fn publish(dir: &Path, seed: u8) -> u64 {
    let store = Registry::new()
        .resolve(dir.to_str().unwrap(), &StoreOptions::default())
        .unwrap();
    let root = Root::new(store, RootOptions::default());
    crate::publish_common::block_on(async {
        let mut shards = Vec::new();
        for s in 0..SHARDS {
            let meta = ShardMetadata::new("raw", "documents");
            let records = (s * RECORDS..(s + 1) * RECORDS).map(|i| record(seed, i));
            shards.push(root.write_shard("w", s, meta, records).await.unwrap());
        }
        let size = shards[0].size;
        crate::publish_common::publish(&root, "s", shards).await;
        size
    })
}

fn cache_options(dir: &Path, budget: u64) -> CacheOptions {
    CacheOptions::default()
        .with_dir(dir)
        .with_budget_bytes(budget)
        .with_remote_only(false)
}

/// A `cache_reader` process on root `dir` (records of `seed`).
fn spawn(dir: &Path, seed: u8, cache: &Path, budget: u64, delay_ms: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_cache_reader"))
        .args([
            dir.to_str().unwrap(),
            &seed.to_string(),
            cache.to_str().unwrap(),
            &budget.to_string(),
            &delay_ms.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A finished reader's counters: fills, hits, bypasses, evictions, waits, stale removed.
fn stats(child: Child) -> [u64; 6] {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cache_reader failed: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().find(|l| l.starts_with("stats ")).unwrap();
    let numbers: Vec<u64> = line[6..].split(' ').map(|n| n.parse().unwrap()).collect();
    numbers.try_into().unwrap()
}

/// Samples the cache directory's bytes until `stop`, keeping the most seen.
fn watch(cache: &CacheOptions, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, u64)> {
    let handle = NodeCache::new(cache).unwrap();
    std::thread::spawn(move || {
        let (mut peak, mut samples) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            if let Ok(used) = handle.used_bytes() {
                peak = peak.max(used);
                samples += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (peak, samples)
    })
}

fn files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn two_processes_share_one_cache_within_its_budget() {
    let (a, b, cache) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let size = publish(a.path(), 1);
    publish(b.path(), 2);
    // Room for six of the eight shards of the two roots.
    let budget = size * 6 + size / 2;
    let options = cache_options(cache.path(), budget);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(&options, Arc::clone(&stop));

    // Two processes on one root: every shard filled once, by one of them.
    let first = spawn(a.path(), 1, cache.path(), budget, 5);
    let second = spawn(a.path(), 1, cache.path(), budget, 5);
    let (x, y) = (stats(first), stats(second));
    assert_eq!(x[0] + y[0], SHARDS, "fills {x:?} {y:?}");
    assert_eq!(x[1] + y[1], SHARDS, "hits {x:?} {y:?}");
    assert_eq!(
        files(&NodeCache::new(&options).unwrap().entries_dir()).len(),
        4
    );

    // Two processes on two roots that do not both fit: some of the second root is read by
    // ranges (or evicts what the first no longer holds), and the budget still holds.
    let first = spawn(a.path(), 1, cache.path(), budget, 5);
    let second = spawn(b.path(), 2, cache.path(), budget, 5);
    let (x, y) = (stats(first), stats(second));
    // Each shard hit, filled or read by ranges (the first root's entries may be evicted
    // by the second process before the first one reaches them, while nobody holds them).
    assert_eq!(x[0] + x[1] + x[2], SHARDS, "{x:?}");
    assert_eq!(y[0] + y[2], SHARDS, "filled or bypassed: {y:?}");
    // Eight shards in room for six and a half: someone bypassed or evicted.
    assert!(x[2] + x[3] + y[2] + y[3] > 0, "{x:?} {y:?}");

    stop.store(true, Ordering::Relaxed);
    let (peak, samples) = watcher.join().unwrap();
    println!("cache: peak {peak} of budget {budget} bytes over {samples} samples");
    assert!(samples > 0);
    assert!(peak <= budget, "peak {peak} above the budget {budget}");
    assert!(NodeCache::new(&options).unwrap().used_bytes().unwrap() <= budget);
}

#[test]
fn a_fill_killed_midway_is_never_trusted() {
    let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let size = publish(root.path(), 3);
    let budget = size * 8;
    let options = cache_options(cache.path(), budget);
    let handle = NodeCache::new(&options).unwrap();
    // About 17 chunks of 64 KiB, two at a time, 100 ms each: a fill lasts about 0.8 s.
    let mut child = spawn(root.path(), 3, cache.path(), budget, 100);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "opened");
    let deadline = Instant::now() + Duration::from_secs(30);
    while files(&handle.temp_dir()).is_empty() {
        assert!(Instant::now() < deadline, "no fill started");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(150));
    kill(
        Pid::from_raw(i32::try_from(child.id()).unwrap()),
        Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    // Killed in its first fill: no entry, one partial file (its reservation).
    assert!(
        files(&handle.entries_dir()).is_empty(),
        "a partial fill was committed"
    );
    let partial = files(&handle.temp_dir());
    assert_eq!(partial.len(), 1, "{partial:?}");

    // A reader does not trust it: it removes it and fills every shard itself.
    let counted = Arc::new(AtomicU64::new(0));
    let reader = Root::new(
        Registry::new()
            .resolve(root.path().to_str().unwrap(), &StoreOptions::default())
            .unwrap(),
        RootOptions::default().with_cache(options.clone()),
    );
    let ds = crate::publish_common::block_on(reader.open_latest()).unwrap();
    for i in 0..ds.len() {
        assert_eq!(ds.get(i).unwrap(), record(3, i));
        counted.fetch_add(1, Ordering::Relaxed);
    }
    let stats = reader.cache().unwrap().stats();
    assert_eq!((stats.stale_removed, stats.fills), (1, SHARDS), "{stats:?}");
    assert!(files(&handle.temp_dir()).is_empty());
    assert_eq!(files(&handle.entries_dir()).len(), 4);
}

/// The shard GETs the proxy saw (tail reads and ranges alike).
fn shard_gets(proxy: &FaultProxy) -> usize {
    proxy.count(|a| a.exchange.target.ends_with(".glm"))
}

/// One shuffled epoch in batches of 64 through `get_many`: records per second.
fn epoch(ds: &Dataset, seed: u8) -> f64 {
    let n = ds.len();
    let order: Vec<u64> = (0..n).map(|i| (i * 7919 + 13) % n).collect();
    let start = Instant::now();
    for batch in order.chunks(64) {
        let got = ds.get_many(batch).unwrap();
        for (&i, r) in batch.iter().zip(got) {
            assert_eq!(r, record(seed, i));
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

#[test]
fn a_second_epoch_over_a_far_root_makes_no_data_request() {
    let Some((url, served_root)) = guideloom_tests::nginx("cache_far_epoch") else {
        return;
    };
    let subdir = guideloom_tests::unique("cache");
    let dir = served_root.join(&subdir);
    struct Served(PathBuf);
    impl Drop for Served {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _served = Served(dir.clone());
    publish(&dir, 4);
    let proxy = FaultProxy::for_url_with(
        &url,
        Script::pass(),
        Link::round_trip(Duration::from_millis(20)),
    )
    .unwrap();
    let base = proxy.proxied(&format!("{url}{subdir}"));
    let cache = tempfile::tempdir().unwrap();
    let with_cache = DatasetOptions::default().with_root(
        RootOptions::default().with_cache(CacheOptions::default().with_dir(cache.path())),
    );

    let plain = Dataset::open(&base).unwrap();
    assert!(plain.is_remote());
    let before = shard_gets(&proxy);
    let uncached = epoch(&plain, 4);
    let uncached_gets = shard_gets(&proxy) - before;

    let first = Dataset::open_with(&base, with_cache.clone()).unwrap();
    let before = shard_gets(&proxy);
    let filling = epoch(&first, 4);
    let filled_gets = shard_gets(&proxy) - before;
    let chunks: u64 = plain
        .snapshot()
        .shards()
        .iter()
        .map(|s| s.size.div_ceil(guideloom_publish::DEFAULT_FILL_CHUNK_BYTES))
        .sum();
    assert_eq!(
        filled_gets as u64, chunks,
        "one GET per chunk of each shard"
    );
    drop(first);

    // A new reader, as the next epoch's worker process would be.
    let second = Dataset::open_with(&base, with_cache).unwrap();
    let before = shard_gets(&proxy);
    let cached = epoch(&second, 4);
    assert_eq!(
        shard_gets(&proxy) - before,
        0,
        "the second epoch asked for shard bytes"
    );
    let stats = second.root().cache().unwrap().stats();
    assert_eq!((stats.hits, stats.fills), (SHARDS, 0), "{stats:?}");
    println!(
        "far epoch (20 ms RTT, {} records of {} B): no cache {uncached:.0} rec/s \
         ({uncached_gets} shard GETs); cache epoch 1 {filling:.0} rec/s ({filled_gets}); \
         epoch 2 {cached:.0} rec/s (0)",
        SHARDS * RECORDS,
        guideloom_tests::cache::RECORD_LEN
    );
}

/// Over S3 (moto): the first reader fills every shard in 1 MiB ranged GETs whose entity tags
/// all agree; a second reader on a fresh counting store makes no data request at all.
#[test]
fn a_second_reader_of_an_s3_root_makes_no_data_request() {
    let Some(fixture) = crate::publish_common::moto() else {
        return;
    };
    crate::publish_common::block_on(async {
        let mut shards = Vec::new();
        for s in 0..SHARDS {
            let meta = ShardMetadata::new("raw", "documents");
            let records = (s * RECORDS..(s + 1) * RECORDS).map(|i| record(5, i));
            shards.push(
                fixture
                    .root
                    .write_shard("w", s, meta, records)
                    .await
                    .unwrap(),
            );
        }
        crate::publish_common::publish(&fixture.root, "s", shards).await;
    });
    let cache = tempfile::tempdir().unwrap();
    let options = RootOptions::default().with_cache(CacheOptions::default().with_dir(cache.path()));
    let read = |options: RootOptions| {
        let counting = CountingStore::new(Arc::clone(fixture.root.store()));
        let root = Root::new(Arc::new(counting.clone()), options);
        let ds = crate::publish_common::block_on(root.open_latest()).unwrap();
        assert!(ds.is_remote());
        let before = counting.counts();
        let all: Vec<u64> = (0..ds.len()).collect();
        for (i, r) in all.iter().zip(ds.get_many(&all).unwrap()) {
            assert_eq!(r, record(5, *i));
        }
        let spent = counting.counts() - before;
        (spent.get_range.requests + spent.reader_reads.requests, root)
    };
    let (first, root) = read(options.clone());
    assert!(first >= SHARDS, "{first} data requests");
    assert_eq!(root.cache().unwrap().stats().fills, SHARDS);
    let (second, root) = read(options);
    assert_eq!(second, 0, "the second reader asked for shard bytes");
    assert_eq!(root.cache().unwrap().stats().hits, SHARDS);
}

/// With the cache on, a remote read-ahead fills the shards of batches further down its list
/// before it reaches them (the next shard window's, under the window shuffle): one batch in
/// flight, in shard order, and while the reader is still in shard 0 the next shards fill.
#[test]
fn the_read_ahead_fills_the_next_shards_before_it_reaches_them() {
    let Some((url, served_root)) = guideloom_tests::nginx("cache_lookahead") else {
        return;
    };
    let subdir = guideloom_tests::unique("cache-lookahead");
    let dir = served_root.join(&subdir);
    publish(&dir, 6);
    let cache = tempfile::tempdir().unwrap();
    let options = DatasetOptions::default().with_root(
        RootOptions::default().with_cache(CacheOptions::default().with_dir(cache.path())),
    );
    let ds = Dataset::open_with(&format!("{url}{subdir}"), options).unwrap();
    let batches: Vec<Vec<u64>> = (0..SHARDS * RECORDS / 16)
        .map(|k| (k * 16..(k + 1) * 16).collect())
        .collect();
    let mut ahead = ds
        .read_ahead(batches, ReadAheadOptions::default().with_batches(1))
        .unwrap();
    assert_eq!(ahead.next().unwrap().unwrap()[0], record(6, 0));
    let stats = || ds.root().cache().unwrap().stats();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats().fills + stats().hits < 3 {
        assert!(
            Instant::now() < deadline,
            "no shard filled ahead: {:?}",
            stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The reader is still in shard 0 (one batch in flight, 16 batches per shard).
    assert_eq!(ahead.next().unwrap().unwrap()[0], record(6, 16));
    let rest: Vec<_> = ahead.map(|b| b.unwrap()[0].clone()).collect();
    assert_eq!(rest.len() as u64, SHARDS * RECORDS / 16 - 2);
    assert_eq!(stats().fills, SHARDS);
    let _ = std::fs::remove_dir_all(&dir);
}
