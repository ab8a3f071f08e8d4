//! Prefetch and parallel ranged downloads: requests overlap (seen by a store that records
//! what is in flight and holds chosen requests until others have started), the budget and the
//! request limit hold, a failed prefetch is the typed error of its shard, a dropped scan
//! cancels its downloads, a read that needs room takes it from prefetches, and results equal
//! the sequential scan's.

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::{RunBudget, ShardMetadata};
use guideloom_io::AsyncReader;
use proptest::prelude::*;
use tokio::sync::Notify;

use crate::store::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, StoreCapabilities};
use crate::{
    Dataset, Error, PublicationOptions, PublishMode, PublishRequest, Registry, Result, Root,
    RootOptions, RootStore, StagingOptions, StoreOptions,
};

/// When a ranged read of `key` may proceed: once a ranged read of `after_key` starting at
/// `after_offset` has started.
#[derive(Debug, Clone)]
struct Hold {
    key: String,
    after_key: String,
    after_offset: u64,
}

/// A remote-looking store over memory that records the ranged reads in flight (and the most
/// at once), holds reads as planned, and fails every ranged read of one key.
#[derive(Debug)]
struct Gated {
    inner: Arc<dyn RootStore>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    started: Mutex<Vec<(String, u64)>>,
    holds: Mutex<Vec<Hold>>,
    fail: Mutex<Option<String>>,
    changed: Notify,
}

/// Decrements the in-flight count when a read ends, also when it is dropped (cancelled).
struct InFlight<'a>(&'a Gated);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

impl Gated {
    fn new(name: &str) -> Arc<Self> {
        let inner = Registry::new()
            .resolve(
                &format!("memory://staging-{name}-{}", rand::random::<u64>()),
                &StoreOptions::default(),
            )
            .unwrap();
        Arc::new(Gated {
            inner,
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            started: Mutex::default(),
            holds: Mutex::default(),
            fail: Mutex::default(),
            changed: Notify::new(),
        })
    }

    fn hold(&self, key: &str, after_key: &str, after_offset: u64) {
        self.holds.lock().unwrap().push(Hold {
            key: key.into(),
            after_key: after_key.into(),
            after_offset,
        });
    }

    fn release(&self) {
        self.holds.lock().unwrap().clear();
        self.changed.notify_waiters();
    }

    fn started(&self, key: &str, offset: u64) -> bool {
        self.started.lock().unwrap().contains(&(key.into(), offset))
    }

    fn started_count(&self, key: &str) -> usize {
        let started = self.started.lock().unwrap();
        started.iter().filter(|(k, _)| k == key).count()
    }

    /// Waits (bounded, as a hang guard) until `done` holds.
    async fn until(&self, done: impl Fn(&Gated) -> bool) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if done(self) {
                    return;
                }
                changed.await;
            }
        };
        guard(wait).await;
    }
}

/// A hang guard for tests whose failure would be a deadlock (not a timing assertion).
async fn guard<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the test hung: an expected request never came")
}

#[async_trait]
impl RootStore for Gated {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        StoreCapabilities {
            remote_reads: true,
            ..self.inner.capabilities()
        }
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
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let _in_flight = InFlight(self);
        self.started
            .lock()
            .unwrap()
            .push((key.to_owned(), range.start));
        self.changed.notify_waiters();
        loop {
            let changed = self.changed.notified();
            let held = self
                .holds
                .lock()
                .unwrap()
                .iter()
                .any(|h| h.key == key && !self.started(&h.after_key, h.after_offset));
            if !held {
                break;
            }
            changed.await;
        }
        if self.fail.lock().unwrap().as_deref() == Some(key) {
            return Err(Error::storage(
                key,
                "get_range",
                std::io::Error::other("planned"),
            ));
        }
        self.inner.get_range(key, range).await
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

fn record(i: u64) -> Vec<u8> {
    format!("{i:06}:{}", "r".repeat(usize::try_from(i % 97).unwrap())).into_bytes()
}

/// Publishes shards of `sizes[k]` records (numbered on across shards) through `store`'s
/// memory root; returns a root on `store` with `staging` and its reader.
async fn setup(store: Arc<Gated>, sizes: &[u64], staging: StagingOptions) -> (Root, Dataset) {
    let writer = Root::new(Arc::clone(&store.inner), RootOptions::default());
    let mut shards = Vec::new();
    let mut next = 0;
    for (k, n) in (0u64..).zip(sizes) {
        let records = (next..next + n).map(record);
        next += n;
        let meta = ShardMetadata::new("raw", "documents");
        shards.push(writer.write_shard("w", k, meta, records).await.unwrap());
    }
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s".into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    writer
        .publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
    let root = Root::new(
        store,
        RootOptions {
            staging,
            ..RootOptions::default()
        },
    );
    let reader = root.open_latest().await.unwrap();
    (root, reader)
}

fn staging(dir: &tempfile::TempDir, parallel_requests: usize) -> StagingOptions {
    StagingOptions {
        dir: Some(dir.path().to_owned()),
        parallel_requests,
        ..StagingOptions::default()
    }
}

/// Every record of `range` by a scan, or the records before the first error and the error.
async fn scan_all(reader: &Dataset, range: Range<u64>) -> (Vec<Bytes>, Option<Error>) {
    let mut scan = reader.scan(range).unwrap();
    let mut got = Vec::new();
    loop {
        match scan.next_batch().await {
            Ok(Some(batch)) => got.extend(batch),
            Ok(None) => return (got, None),
            Err(e) => return (got, Some(e)),
        }
    }
}

fn expected(range: Range<u64>) -> Vec<Bytes> {
    range.map(|i| Bytes::from(record(i))).collect()
}

/// The next shard's request starts before the reader is past the current shard: shard 0's
/// download is held until shard 1's has started, which only a prefetch can do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_fetches_the_next_shards_while_it_reads_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Gated::new("ahead");
    let (root, reader) = setup(
        Arc::clone(&store),
        &[40, 50, 60, 70, 80, 90],
        staging(&dir, 4),
    )
    .await;
    let keys: Vec<String> = reader
        .snapshot()
        .shards()
        .iter()
        .map(|s| s.key.clone())
        .collect();
    store.hold(&keys[0], &keys[1], 0);
    let (got, err) = guard(scan_all(&reader, 0..reader.len())).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, expected(0..reader.len()));
    let in_flight = store.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=4).contains(&in_flight), "most in flight: {in_flight}");
    let stats = root.stager().stats();
    assert_eq!(stats.downloads, 6, "{stats:?}");
    assert!(stats.prefetches >= 4, "{stats:?}");
    assert_eq!(stats.prefetches_cancelled, 0, "{stats:?}");
}

/// A large shard is fetched as several ranged requests at once (chunk 0 held until chunk 2
/// has started), never more than `parallel_requests`, and its bytes are the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_shard_downloads_in_parallel_chunks_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Gated::new("chunks");
    let options = StagingOptions {
        download_chunk_bytes: 4096,
        ..staging(&dir, 3)
    };
    let (root, reader) = setup(Arc::clone(&store), &[1500], options).await;
    let key = reader.snapshot().shards()[0].key.clone();
    store.hold(&key, &key, 2 * 4096);
    let (got, err) = guard(scan_all(&reader, 0..reader.len())).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, expected(0..1500));
    let size = reader.snapshot().shards()[0].size;
    let chunks = size.div_ceil(4096);
    assert!(chunks > 10, "{size} bytes");
    assert_eq!(store.started_count(&key) as u64, chunks);
    let in_flight = store.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=3).contains(&in_flight), "most in flight: {in_flight}");
    assert_eq!(root.stager().stats().store.requests, chunks);
}

/// A prefetch that fails is the error of its shard, typed and naming it, when the reader
/// reaches it — after every record before it — and is not fetched again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_prefetch_is_the_typed_error_of_its_shard() {
    let dir = tempfile::tempdir().unwrap();
    let store = Gated::new("fail");
    let (root, reader) = setup(Arc::clone(&store), &[30, 40, 50, 60], staging(&dir, 4)).await;
    let bad = reader.snapshot().shards()[2].key.clone();
    *store.fail.lock().unwrap() = Some(bad.clone());
    // Shard 0 held until shard 2's (failing) prefetch has started.
    let first = reader.snapshot().shards()[0].key.clone();
    store.hold(&first, &bad, 0);
    let (got, err) = guard(scan_all(&reader, 0..reader.len())).await;
    assert_eq!(got, expected(0..70), "the records before the failing shard");
    match err {
        Some(Error::Storage { key, operation, .. }) => {
            assert_eq!((key.as_str(), operation), (bad.as_str(), "get_range"));
        }
        other => panic!("expected the failing shard's storage error, got {other:?}"),
    }
    assert_eq!(
        store.started_count(&bad),
        1,
        "fetched once, by its prefetch"
    );
    let stats = root.stager().stats();
    assert!(stats.staged_bytes <= stats.peak_staged_bytes, "{stats:?}");
}

/// Dropping a scan cancels its running prefetches: their requests are dropped and their
/// reservations given back; the shard it read stays staged (unheld) for reuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_scan_cancels_its_prefetches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Gated::new("drop");
    let (root, reader) = setup(
        Arc::clone(&store),
        &[20, 20, 20, 20, 20, 20],
        staging(&dir, 4),
    )
    .await;
    let keys: Vec<String> = reader
        .snapshot()
        .shards()
        .iter()
        .map(|s| s.key.clone())
        .collect();
    // Shards 1.. never finish while held (they wait for a request that never comes).
    for key in &keys[1..] {
        store.hold(key, "never", 0);
    }
    let mut scan = reader.scan(0..reader.len()).unwrap();
    let batch = guard(scan.next_batch()).await.unwrap().unwrap();
    assert_eq!(batch, expected(0..20));
    store
        .until(|s| s.in_flight.load(Ordering::SeqCst) == 4)
        .await;
    assert_eq!(root.stager().stats().prefetches, 4);
    drop(scan);
    store
        .until(|s| s.in_flight.load(Ordering::SeqCst) == 0)
        .await;
    let stats = root.stager().stats();
    assert_eq!(stats.prefetches_cancelled, 4, "{stats:?}");
    assert_eq!(
        stats.staged_bytes,
        reader.snapshot().shards()[0].size,
        "{stats:?}"
    );
    // The stager is usable afterwards: a new scan reads everything.
    store.release();
    let (got, err) = guard(scan_all(&reader, 0..reader.len())).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, expected(0..reader.len()));
}

/// A read that needs room takes it from another scan's unreached prefetch (cancelling it)
/// instead of failing with `StagingBudget`, which the sequential scans would not give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_needs_room_cancels_a_prefetch_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Gated::new("preempt");
    let (root, reader) = setup(Arc::clone(&store), &[20, 20, 20, 20], staging(&dir, 4)).await;
    let sizes: Vec<u64> = reader.snapshot().shards().iter().map(|s| s.size).collect();
    // Room for shards 0 and 3 (what two sequential scans hold), not for 0, 1 and 2.
    let budget = sizes[0] + sizes[3];
    assert!(sizes[1] + sizes[2] > sizes[3], "{sizes:?}");
    let (root, reader) = {
        drop(root);
        let options = StagingOptions {
            budget_bytes: budget,
            ..staging(&dir, 4)
        };
        let root = Root::new(
            Arc::clone(&store) as Arc<dyn RootStore>,
            RootOptions {
                staging: options,
                ..RootOptions::default()
            },
        );
        let reader = root.reader(reader.snapshot().clone());
        (root, reader)
    };
    let keys: Vec<String> = reader
        .snapshot()
        .shards()
        .iter()
        .map(|s| s.key.clone())
        .collect();
    store.hold(&keys[1], "never", 0);
    // Scan A holds shard 0 and prefetches shard 1 (held at the store): the budget is full.
    let mut a = reader.scan(0..reader.len()).unwrap();
    assert_eq!(
        guard(a.next_batch()).await.unwrap().unwrap(),
        expected(0..20)
    );
    assert_eq!(
        root.stager().stats().staged_bytes,
        shards_size(&reader, 0..2)
    );
    // Scan B needs shard 3: it takes the room of A's prefetch.
    let mut b = reader.scan(60..80).unwrap();
    assert_eq!(
        guard(b.next_batch()).await.unwrap().unwrap(),
        expected(60..80)
    );
    let stats = root.stager().stats();
    assert_eq!(stats.prefetches_cancelled, 1, "{stats:?}");
    assert!(stats.peak_staged_bytes <= budget, "{stats:?}");
    drop(b);
    store.release();
    let mut rest = Vec::new();
    while let Some(batch) = guard(a.next_batch()).await.unwrap() {
        rest.extend(batch);
    }
    assert_eq!(rest, expected(20..80));
}

fn shards_size(reader: &Dataset, shards: Range<usize>) -> u64 {
    reader.snapshot().shards()[shards]
        .iter()
        .map(|s| s.size)
        .sum()
}

/// `read_in_order` on a remote store stages with prefetch too: shard 0 held until shard 1's
/// download has started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_in_order_prefetches_the_shards_it_stages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Gated::new("in-order");
    let (root, reader) = setup(Arc::clone(&store), &[40, 40, 40], staging(&dir, 2)).await;
    let keys: Vec<String> = reader
        .snapshot()
        .shards()
        .iter()
        .map(|s| s.key.clone())
        .collect();
    store.hold(&keys[0], &keys[1], 0);
    let read = async {
        let mut runs = reader.read_in_order(0..120, RunBudget::default()).unwrap();
        let mut got = Vec::new();
        while let Some(run) = runs.next_run().await {
            got.extend(run.unwrap().records);
        }
        got
    };
    assert_eq!(guard(read).await, expected(0..120));
    assert!(root.stager().stats().prefetches >= 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the shard sizes, request limit, chunk size and budget (at least the largest
    /// shard, which the sequential scan needs), a scan returns exactly the records of the
    /// sequential scan, gives no budget error, stays within the budget and keeps at most
    /// `parallel_requests` requests in flight.
    #[test]
    fn prefetching_scans_equal_the_sequential_scan(
        sizes in prop::collection::vec(0u64..60, 1..7),
        parallel in 1usize..6,
        chunk in prop::sample::select(vec![512u64, 2048, 1 << 20]),
        extra_shards in 0u64..4,
        start in 0u64..40,
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = Gated::new("prop");
            let (_, probe) = setup(Arc::clone(&store), &sizes, staging(&dir, 1)).await;
            let largest = probe.snapshot().shards().iter().map(|s| s.size).max().unwrap();
            let options = StagingOptions {
                budget_bytes: largest * (1 + extra_shards),
                download_chunk_bytes: chunk,
                ..staging(&dir, parallel)
            };
            let root = Root::new(
                Arc::clone(&store) as Arc<dyn RootStore>,
                RootOptions { staging: options, ..RootOptions::default() },
            );
            let reader = root.reader(probe.snapshot().clone());
            let range = start.min(reader.len())..reader.len();
            let (got, err) = guard(scan_all(&reader, range.clone())).await;
            prop_assert!(err.is_none(), "{:?}", err);
            prop_assert_eq!(got, expected(range));
            let stats = root.stager().stats();
            prop_assert!(stats.peak_staged_bytes <= largest * (1 + extra_shards), "{:?}", stats);
            prop_assert!(store.max_in_flight.load(Ordering::SeqCst) <= parallel.max(1));
            Ok(())
        })?;
    }
}
