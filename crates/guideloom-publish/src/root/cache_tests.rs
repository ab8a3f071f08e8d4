//! The node cache (`cache/`, beside the reader, which may import both `root` and `cache`)
//! on `memory://` roots (cached through `remote_only: false`), counted by a
//! `CountingStore`: a second reader makes no data request, the budget holds and keeps a
//! root's own entries, stale and damaged files are not trusted, entry names never collide.

use std::sync::Arc;

use guideloom_format::ShardMetadata;

use crate::{
    CacheOptions, CountingStore, Counts, Dataset, Error, NodeCache, PublicationOptions,
    PublishMode, PublishRequest, Registry, Root, RootOptions, StoreOptions,
};

/// Records of shard `s`: `n` payloads of `len` bytes.
fn records(s: u64, n: u64, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| vec![u8::try_from((s * 31 + i) % 251).unwrap(); len])
        .collect()
}

/// Publishes `shards` shards of `n` records of `len` bytes on a fresh `memory://` root.
async fn publish(name: &str, shards: u64, n: u64, len: usize) -> Arc<dyn crate::RootStore> {
    let store = Registry::new()
        .resolve(&format!("memory://{name}"), &StoreOptions::default())
        .unwrap();
    let root = Root::new(Arc::clone(&store), RootOptions::default());
    let mut refs = Vec::new();
    for s in 0..shards {
        let meta = ShardMetadata::new("raw", "documents");
        refs.push(
            root.write_shard("w", s, meta, records(s, n, len))
                .await
                .unwrap(),
        );
    }
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s".into(),
        shards: refs,
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
    store
}

/// A reader of the latest snapshot through a fresh counting wrapper and cache handle (as a
/// new process would have).
async fn reader(
    store: &Arc<dyn crate::RootStore>,
    cache: &CacheOptions,
) -> (Dataset, CountingStore) {
    let counting = CountingStore::new(Arc::clone(store));
    let options = RootOptions::default().with_cache(cache.clone());
    let root = Root::new(Arc::new(counting.clone()), options);
    (root.open_latest().await.unwrap(), counting)
}

fn data_requests(c: &Counts) -> u64 {
    c.get_range.requests + c.reader_reads.requests
}

fn options(dir: &tempfile::TempDir, budget: u64) -> CacheOptions {
    CacheOptions::default()
        .with_dir(dir.path())
        .with_budget_bytes(budget)
        .with_remote_only(false)
}

async fn read_all(reader: &Dataset) {
    read_in(reader, 0..reader.len()).await;
}

async fn read_in(reader: &Dataset, order: impl Iterator<Item = u64>) {
    for i in order {
        check(reader, i, &reader.get_async(i).await.unwrap());
    }
}

/// Asserts that `got` is record `i` of `reader` (of 8-byte records).
fn check(reader: &Dataset, i: u64, got: &[u8]) {
    let located = reader.table().locate(i).unwrap();
    let (s, j) = (located.shard as u64, located.local);
    assert_eq!(got, records(s, j + 1, 8)[usize::try_from(j).unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_reader_makes_no_data_request() {
    let store = publish("cache-second-pass", 3, 50, 8).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = options(&dir, 1 << 20);

    let (first, counting) = reader(&store, &cache).await;
    read_all(&first).await;
    let filled = counting.counts();
    assert!(data_requests(&filled) >= 3, "{filled:?}");
    let stats = first.root().cache().unwrap().stats();
    assert_eq!((stats.fills, stats.hits), (3, 0), "{stats:?}");

    let (second, counting) = reader(&store, &cache).await;
    let before = counting.counts();
    read_all(&second).await;
    let many = second.get_many_async(&[149, 0, 75]).await.unwrap();
    assert_eq!(many.len(), 3);
    let spent = counting.counts() - before;
    assert_eq!(data_requests(&spent), 0, "{spent:?}");
    let stats = second.root().cache().unwrap().stats();
    assert_eq!((stats.fills, stats.hits), (0, 3), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_holds_and_a_root_keeps_its_own_entries() {
    let store = publish("cache-budget", 4, 100, 8).await;
    let dir = tempfile::tempdir().unwrap();
    let size = {
        let (r, _) = reader(&store, &CacheOptions::default()).await;
        r.snapshot().shards()[0].size
    };
    // Room for two shards and a half.
    let cache = options(&dir, size * 5 / 2);
    let (first, _) = reader(&store, &cache).await;
    read_all(&first).await;
    let stats = first.root().cache().unwrap().stats();
    assert_eq!(
        (stats.fills, stats.bypasses, stats.evictions),
        (2, 2, 0),
        "{stats:?}"
    );
    let handle = first.root().cache().unwrap();
    assert!(handle.used_bytes().unwrap() <= size * 5 / 2);
    drop(first);

    // Unheld now, but of the same root: a second pass keeps the two it has, even one that
    // starts with the shards that are not cached (LRU would evict the cached ones for
    // them, and then miss them: MDS#507).
    let (second, counting) = reader(&store, &cache).await;
    read_in(&second, (0..second.len()).rev()).await;
    let stats = second.root().cache().unwrap().stats();
    assert_eq!(
        (stats.hits, stats.fills, stats.evictions, stats.bypasses),
        (2, 0, 0, 2),
        "{stats:?}"
    );
    assert!(data_requests(&counting.counts()) > 0);
    drop(second);

    // Another root evicts the least recently used unheld entries it needs room for.
    let other = publish("cache-budget-other", 1, 100, 8).await;
    let (third, _) = reader(&other, &cache).await;
    read_all(&third).await;
    let stats = third.root().cache().unwrap().stats();
    assert_eq!((stats.fills, stats.evictions), (1, 1), "{stats:?}");
    assert!(third.root().cache().unwrap().used_bytes().unwrap() <= size * 5 / 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_in_use_is_never_evicted() {
    let a = publish("cache-held-a", 1, 100, 8).await;
    let b = publish("cache-held-b", 1, 100, 8).await;
    let dir = tempfile::tempdir().unwrap();
    let size = {
        let (r, _) = reader(&a, &CacheOptions::default()).await;
        r.snapshot().shards()[0].size
    };
    let cache = options(&dir, size * 3 / 2);
    let (held, _) = reader(&a, &cache).await;
    read_all(&held).await;
    let (other, _) = reader(&b, &cache).await;
    read_all(&other).await;
    let stats = other.root().cache().unwrap().stats();
    assert_eq!(
        (stats.fills, stats.evictions, stats.bypasses),
        (0, 0, 1),
        "{stats:?}"
    );
    // The held reader still reads, and its entry is still there.
    read_all(&held).await;
    assert_eq!(
        std::fs::read_dir(held.root().cache().unwrap().entries_dir())
            .unwrap()
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_fill_is_removed_and_a_damaged_entry_refetched() {
    let store = publish("cache-damage", 1, 100, 8).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = options(&dir, 1 << 20);
    let (first, _) = reader(&store, &cache).await;
    read_all(&first).await;
    let handle = Arc::clone(first.root().cache().unwrap());
    drop(first);
    // A dead filler's temporary file: nobody holds it.
    let stale = handle.temp_dir().join("0000-dead.1.0");
    std::fs::write(&stale, b"partial").unwrap();
    // Damage the entry's tail (its footer): the open check fails, the entry is refetched.
    let entry = std::fs::read_dir(handle.entries_dir())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 20;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();

    let (second, counting) = reader(&store, &cache).await;
    read_all(&second).await;
    let stats = second.root().cache().unwrap().stats();
    assert_eq!((stats.discarded, stats.fills), (1, 1), "{stats:?}");
    assert!(data_requests(&counting.counts()) > 0);
    assert!(!stale.exists());
    drop(second);

    // Damage a record in the middle: its CRC fails, a typed error naming the shard, and
    // the entry is removed so that the next reader refetches.
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes[40] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let (third, _) = reader(&store, &cache).await;
    let mut failed = None;
    for i in 0..third.len() {
        if let Err(e) = third.get_async(i).await {
            failed = Some(e);
            break;
        }
    }
    let failed = failed.expect("a damaged record must fail its check");
    assert!(matches!(failed, Error::Shard { .. }), "{failed:?}");
    assert!(!entry.exists(), "the damaged entry is removed");
    let (fourth, _) = reader(&store, &cache).await;
    read_all(&fourth).await;
    assert_eq!(fourth.root().cache().unwrap().stats().fills, 1);
}

#[tokio::test]
async fn entry_names_differ_by_root_and_reference() {
    let a = publish("cache-names-a", 2, 10, 8).await;
    let b = publish("cache-names-b", 2, 10, 8).await;
    let (ra, _) = reader(&a, &CacheOptions::default()).await;
    let (rb, _) = reader(&b, &CacheOptions::default()).await;
    let shards = ra.snapshot().shards();
    let name =
        |store: &Arc<dyn crate::RootStore>, i| NodeCache::entry_name(store.as_ref(), &shards[i]);
    assert_ne!(name(&a, 0), name(&a, 1));
    assert_ne!(name(&a, 0), name(&b, 0));
    // Same root: same group prefix; another root: another.
    assert_eq!(name(&a, 0)[..16], name(&a, 1)[..16]);
    assert_ne!(name(&a, 0)[..16], name(&b, 0)[..16]);
    let mut changed = shards[0].clone();
    changed.size += 1;
    assert_ne!(NodeCache::entry_name(a.as_ref(), &changed), name(&a, 0));
    drop(rb);
}

/// A reader whose every shard is in the node cache reads locally (so a read-ahead of a
/// remote root takes each batch on the taker's thread, as on a local root, rather than
/// through a task and a channel); one with a shard missing does not. The batches are the
/// same either way, and the cached reader's make no data request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_shards_are_all_cached_reads_locally() {
    let store = publish("cache-read-ahead", 3, 50, 8).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = options(&dir, 1 << 20);
    let batches: Vec<Vec<u64>> = (0..15u64)
        .map(|k| (0..10).map(|j| j * 15 + k).collect())
        .collect();
    let read = |reader: Dataset| {
        let batches = batches.clone();
        async move {
            let mut ahead = reader
                .read_ahead(batches.clone(), crate::ReadAheadOptions::default())
                .unwrap();
            for batch in &batches {
                let got = ahead.next_async().await.unwrap().unwrap();
                assert_eq!(got.len(), batch.len());
                for (bytes, &i) in got.iter().zip(batch) {
                    check(&reader, i, bytes);
                }
            }
            assert!(ahead.next_async().await.is_none());
        }
    };

    // Shard 0 cached, 1 and 2 not.
    let (first, _) = reader(&store, &cache).await;
    first.get_async(0).await.unwrap();
    let (partial, _) = reader(&store, &cache).await;
    assert!(!partial.reads_locally());
    read(partial).await;

    // Every shard cached now.
    let (second, counting) = reader(&store, &cache).await;
    assert!(second.reads_locally());
    let before = counting.counts();
    read(second.clone()).await;
    let spent = counting.counts() - before;
    assert_eq!(data_requests(&spent), 0, "{spent:?}");
    let stats = second.root().cache().unwrap().stats();
    assert_eq!((stats.fills, stats.hits), (0, 3), "{stats:?}");

    // Without a cache, a memory root's reader does not read from local files.
    let plain = Root::new(Arc::clone(&store), RootOptions::default())
        .open_latest()
        .await
        .unwrap();
    assert!(!plain.reads_locally());
}

/// Asking a cached reader for the record format reads the first shard's footer and metadata,
/// not the whole shard into the cache; once the entry exists, or the shard is open, no
/// request at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_format_does_not_fill_a_shard() {
    let store = publish("cache-record-format", 2, 400, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = options(&dir, 1 << 20);

    let (ds, counting) = reader(&store, &cache).await;
    let before = counting.counts();
    assert_eq!(ds.record_format_async(0).await.unwrap(), "raw");
    let spent = counting.counts() - before;
    assert_eq!(data_requests(&spent), 1, "{spent:?}");
    let shard_bytes = ds.snapshot().shards()[0].size;
    assert!(
        spent.get_range.bytes_received + spent.reader_reads.bytes_received < shard_bytes / 4,
        "{spent:?}"
    );
    let stats = ds.root().cache().unwrap().stats();
    assert_eq!((stats.fills, stats.hits), (0, 0), "{stats:?}");
    assert_eq!(ds.root().cache().unwrap().used_bytes().unwrap(), 0);

    // Read once (so filled): the format then costs nothing, in this reader and the next.
    ds.get_async(3).await.unwrap();
    let before = counting.counts();
    assert_eq!(ds.record_format_async(0).await.unwrap(), "raw");
    let (next, next_counting) = reader(&store, &cache).await;
    assert_eq!(next.record_format_async(0).await.unwrap(), "raw");
    assert_eq!(data_requests(&(counting.counts() - before)), 0);
    let next_spent = next_counting.counts();
    assert_eq!(
        next.root().cache().unwrap().stats().hits,
        1,
        "{next_spent:?}"
    );
    assert!(matches!(
        ds.record_format_async(2).await,
        Err(Error::InvalidArgument { .. })
    ));
}
