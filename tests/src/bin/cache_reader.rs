//! Helper process of `tests/tests/it/publish_cache.rs`: reads every record of a local root
//! through the node cache in a given directory, with every ranged read of the store slowed
//! down by a delay (so a fill lasts long enough to be killed, and two processes' fills
//! overlap), checks each record's bytes, and prints its cache counters.
//!
//! Usage: `cache_reader <root-dir> <seed> <cache-dir> <budget-bytes> <delay-ms>`. It prints
//! `opened` once the snapshot is open, then `stats <fills> <hits> <bypasses> <evictions>
//! <waits> <stale_removed>` at the end; on failure, a message on stderr and status 1.

use std::ops::Range;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::AsyncReader;
use guideloom_publish::{
    CacheOptions, CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, Registry, Result, Root,
    RootOptions, RootStore, StoreCapabilities, StoreOptions,
};
use guideloom_tests::cache::record;

/// A store whose ranged reads (the cache's fills) each wait `delay` first.
#[derive(Debug)]
struct Slow {
    inner: Arc<dyn RootStore>,
    delay: Duration,
}

#[async_trait]
impl RootStore for Slow {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        self.inner.capabilities()
    }
    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        self.inner.put_create(key, body).await
    }
    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        self.inner.put_cas(key, body, expected).await
    }
    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        self.inner.get(key, limit).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        tokio::time::sleep(self.delay).await;
        self.inner.get_range(key, range).await
    }
    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        tokio::time::sleep(self.delay).await;
        self.inner.get_range_tagged(key, range).await
    }
    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        self.inner.open_reader(key, size).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, seed, cache, budget, delay] = args.as_slice() else {
        eprintln!("usage: cache_reader <root-dir> <seed> <cache-dir> <budget-bytes> <delay-ms>");
        return ExitCode::from(2);
    };
    let (Ok(seed), Ok(budget), Ok(delay)) = (
        seed.parse::<u8>(),
        budget.parse::<u64>(),
        delay.parse::<u64>(),
    ) else {
        eprintln!("cache_reader: seed, budget and delay are numbers");
        return ExitCode::from(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(dir, seed, cache, budget, Duration::from_millis(delay))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cache_reader: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(dir: &str, seed: u8, cache: &str, budget: u64, delay: Duration) -> Result<()> {
    let inner = Registry::new().resolve(dir, &StoreOptions::default())?;
    let store = Arc::new(Slow { inner, delay });
    let options = RootOptions::default().with_cache(
        CacheOptions::default()
            .with_dir(cache)
            .with_budget_bytes(budget)
            .with_remote_only(false)
            .with_fill_chunk_bytes(64 << 10)
            .with_fill_requests(2),
    );
    let root = Root::new(store, options);
    let reader = root.open_latest().await?;
    println!("opened");
    for i in 0..reader.len() {
        let got = reader.get_async(i).await?;
        if got != record(seed, i) {
            return Err(guideloom_publish::Error::Verification {
                key: format!("record {i}"),
                what: "bytes",
                expected: "the record written".into(),
                actual: format!("{} other bytes", got.len()),
            });
        }
    }
    let s = root.cache().map(|c| c.stats()).unwrap_or_default();
    println!(
        "stats {} {} {} {} {} {}",
        s.fills, s.hits, s.bypasses, s.evictions, s.waits, s.stale_removed
    );
    Ok(())
}
