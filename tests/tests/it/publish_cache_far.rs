//! The measurement behind docs/cache.md (ignored by default; it writes 100 MB and takes a
//! minute): 100 000 records of 1 KiB in shards of about 8 MB, served by nginx behind the
//! fault proxy at 20 ms per round trip and a bandwidth cap, read in a shuffled order in
//! batches of 64 through `Dataset::read_ahead` — without the cache, then with it (epoch 1
//! fills, epoch 2 reads entries), beside the same epoch on the local root; plus the cost of
//! a first random `get` of a shard with and without the cache.
//!
//! ```text
//! cargo xtask servers up nginx && set -a && source .xtask/servers/up/env.sh && set +a
//! cargo test -p guideloom-tests --test it publish_cache_far -- --ignored --nocapture
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use guideloom_faultproxy::{FaultProxy, Link, Script};
use guideloom_format::ShardMetadata;
use guideloom_publish::{
    CacheOptions, Dataset, DatasetOptions, ReadAheadOptions, Registry, Root, RootOptions,
    StoreOptions,
};

const RECORDS: u64 = 100_000;
const PER_SHARD: u64 = 8_000;
const LEN: usize = 1024;
const BATCH: usize = 64;

fn record(i: u64) -> Vec<u8> {
    let mut r = format!("far {i:07} ").into_bytes();
    r.resize(LEN, b'a' + u8::try_from(i % 26).unwrap());
    r
}

fn publish(dir: &Path) {
    let store = Registry::new()
        .resolve(dir.to_str().unwrap(), &StoreOptions::default())
        .unwrap();
    let root = Root::new(store, RootOptions::default());
    crate::publish_common::block_on(async {
        let mut shards = Vec::new();
        for s in 0..RECORDS.div_ceil(PER_SHARD) {
            let meta = ShardMetadata::new("raw", "documents");
            let records = (s * PER_SHARD..RECORDS.min((s + 1) * PER_SHARD)).map(record);
            shards.push(root.write_shard("w", s, meta, records).await.unwrap());
        }
        crate::publish_common::publish(&root, "s", shards).await;
    });
}

/// A fixed shuffle of every index (xorshift Fisher–Yates), in batches.
fn batches() -> Vec<Vec<u64>> {
    let mut order: Vec<u64> = (0..RECORDS).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, usize::try_from(x % (i as u64 + 1)).unwrap());
    }
    order.chunks(BATCH).map(<[u64]>::to_vec).collect()
}

/// The shard-window order (windows of 4 shards) of `ds`, in batches.
fn window_batches(ds: &Dataset) -> Vec<Vec<u64>> {
    use guideloom::ShuffleMode;
    use guideloom::order::EpochOrder;
    let mode = ShuffleMode::ShardWindow { window: 4 };
    let order = EpochOrder::new(mode, 7, 0, ds.len(), Some(ds.shard_bounds()));
    let mut all = Vec::new();
    order.records(0..ds.len(), &mut all);
    all.chunks(BATCH).map(<[u64]>::to_vec).collect()
}

/// One epoch in the full shuffle: (records per second, shard GETs, bytes the proxy sent).
fn epoch(ds: &Dataset, proxy: Option<&FaultProxy>) -> (f64, usize, u64) {
    epoch_of(ds, proxy, batches())
}

fn epoch_of(ds: &Dataset, proxy: Option<&FaultProxy>, order: Vec<Vec<u64>>) -> (f64, usize, u64) {
    let gets = |p: Option<&FaultProxy>| {
        p.map_or((0, 0), |p| {
            (
                p.count(|a| a.exchange.target.ends_with(".glm")),
                p.stats().bytes_to_client,
            )
        })
    };
    let before = gets(proxy);
    let start = Instant::now();
    let options = ReadAheadOptions::default();
    let mut n = 0u64;
    for (batch, want) in ds.read_ahead(order.clone(), options).unwrap().zip(order) {
        let batch = batch.unwrap();
        assert_eq!(batch[0], record(want[0]));
        n += batch.len() as u64;
    }
    assert_eq!(n, RECORDS);
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let after = gets(proxy);
    (rate, after.0 - before.0, after.1 - before.1)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
#[ignore = "a measurement (docs/cache.md): run it with --ignored --nocapture"]
fn measure_far_epochs_with_and_without_the_cache() {
    let Some((url, served_root)) = guideloom_tests::nginx("cache_far_measure") else {
        return;
    };
    let subdir = guideloom_tests::unique("cache-measure");
    let dir: PathBuf = served_root.join(&subdir);
    publish(&dir);
    let link = Link::round_trip(Duration::from_millis(20)).with_rate_to_client(100_000_000);
    let proxy = FaultProxy::for_url_with(&url, Script::pass(), link).unwrap();
    let base = proxy.proxied(&format!("{url}{subdir}"));
    let cache = tempfile::tempdir().unwrap();
    let cached = || {
        DatasetOptions::default().with_root(
            RootOptions::default().with_cache(CacheOptions::default().with_dir(cache.path())),
        )
    };

    let (local, ..) = epoch(&Dataset::open(dir.to_str().unwrap()).unwrap(), None);
    println!("local root: {local:.0} rec/s");
    let (plain, gets, bytes) = epoch(&Dataset::open(&base).unwrap(), Some(&proxy));
    println!("far, no cache: {plain:.0} rec/s, {gets} shard GETs, {bytes} bytes");
    let (first, gets, bytes) = epoch(&Dataset::open_with(&base, cached()).unwrap(), Some(&proxy));
    println!("far, cache epoch 1: {first:.0} rec/s, {gets} shard GETs, {bytes} bytes");
    let (second, gets, bytes) = epoch(&Dataset::open_with(&base, cached()).unwrap(), Some(&proxy));
    println!("far, cache epoch 2: {second:.0} rec/s, {gets} shard GETs, {bytes} bytes");
    println!(
        "ratios to local: no cache {:.3}, epoch 1 {:.3}, epoch 2 {:.3}",
        plain / local,
        first / local,
        second / local
    );

    // The shard-window shuffle: without the cache, then filling a fresh cache (the next
    // window's shards fill while the current one is read).
    let ds = Dataset::open(&base).unwrap();
    let (plain, gets, _) = epoch_of(&ds, Some(&proxy), window_batches(&ds));
    println!("far, window shuffle, no cache: {plain:.0} rec/s, {gets} shard GETs");
    let fresh = tempfile::tempdir().unwrap();
    let options = DatasetOptions::default().with_root(
        RootOptions::default().with_cache(CacheOptions::default().with_dir(fresh.path())),
    );
    let ds = Dataset::open_with(&base, options).unwrap();
    let (first, gets, _) = epoch_of(&ds, Some(&proxy), window_batches(&ds));
    println!("far, window shuffle, cache epoch 1: {first:.0} rec/s, {gets} shard GETs");

    // A first random read of a shard: one ranged GET, or the whole shard into the cache.
    let ds = Dataset::open(&base).unwrap();
    ds.get(PER_SHARD + 17).unwrap(); // warm the connection
    let start = Instant::now();
    ds.get(5 * PER_SHARD + 17).unwrap();
    let ranged = start.elapsed();
    let fresh = tempfile::tempdir().unwrap();
    let options = DatasetOptions::default().with_root(
        RootOptions::default().with_cache(
            CacheOptions::default()
                .with_dir(fresh.path())
                .with_fill_chunk_bytes(64 << 20),
        ),
    );
    let ds = Dataset::open_with(&base, options).unwrap();
    ds.get(PER_SHARD + 17).unwrap();
    let start = Instant::now();
    ds.get(5 * PER_SHARD + 17).unwrap();
    let filled = start.elapsed();
    let start = Instant::now();
    ds.get(5 * PER_SHARD + 18).unwrap();
    let hit = start.elapsed();
    // The same fill in ranged chunks of 1 MiB (the default), 8 at a time.
    let fresh = tempfile::tempdir().unwrap();
    let options = DatasetOptions::default().with_root(
        RootOptions::default().with_cache(CacheOptions::default().with_dir(fresh.path())),
    );
    let ds = Dataset::open_with(&base, options).unwrap();
    ds.get(PER_SHARD + 17).unwrap();
    let start = Instant::now();
    ds.get(5 * PER_SHARD + 17).unwrap();
    let chunked = start.elapsed();
    println!(
        "first get of a shard: ranged {:.1} ms, whole-shard fill {:.1} ms (1 GET), {:.1} ms \
         (1 MiB chunks, 8 in flight), then {:.3} ms",
        ms(ranged),
        ms(filled),
        ms(chunked),
        ms(hit)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
