//! Whole-shard staging (`Dataset::scan`): the budget holds (counted independently
//! through the process's open file descriptors), staged files have no name, each shard is
//! fetched once per scan and reused, bytes equal ranged reads, corrupt and truncated
//! downloads are typed errors, and over-budget shards are refused naming both numbers.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::ShardMetadata;
use guideloom_io::AsyncReader;
use guideloom_publish::{
    CasOutcome, CreateOutcome, Error, Etag, Object, ObjectInfo, PublicationOptions, PublishMode,
    PublishRequest, Registry, Result, Root, RootOptions, RootStore, ShardRef, Snapshot,
    StagingOptions, StoreCapabilities, StoreOptions,
};

/// What the wrapper does to whole-object ranged reads of shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    None,
    /// Flip one byte in the middle.
    Flip,
    /// Drop the last byte.
    Truncate,
}

/// Counts ranged reads per key and can damage them.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn RootStore>,
    ranged: Mutex<HashMap<String, u64>>,
    damage: Mutex<Damage>,
}

impl Counting {
    fn new(inner: Arc<dyn RootStore>) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            ranged: Mutex::new(HashMap::new()),
            damage: Mutex::new(Damage::None),
        })
    }

    fn ranged_reads(&self) -> HashMap<String, u64> {
        self.ranged.lock().unwrap().clone()
    }

    fn total_ranged(&self) -> u64 {
        self.ranged.lock().unwrap().values().sum()
    }

    fn set_damage(&self, d: Damage) {
        *self.damage.lock().unwrap() = d;
    }
}

#[async_trait]
impl RootStore for Counting {
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
        *self
            .ranged
            .lock()
            .unwrap()
            .entry(key.to_owned())
            .or_default() += 1;
        let bytes = self.inner.get_range(key, range).await?;
        let damage = *self.damage.lock().unwrap();
        Ok(match damage {
            Damage::None => bytes,
            Damage::Flip => {
                let mut v = bytes.to_vec();
                let mid = v.len() / 3;
                v[mid] ^= 0x5a;
                Bytes::from(v)
            }
            Damage::Truncate => bytes.slice(..bytes.len().saturating_sub(1)),
        })
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
    format!("{i:06}:{}", "r".repeat(usize::try_from(i % 200).unwrap())).into_bytes()
}

/// Shards of `sizes[k]` records each (record numbers run on across shards).
async fn publish(root: &Root, sizes: &[u64], sha256: bool) -> Snapshot {
    let mut shards: Vec<ShardRef> = Vec::new();
    let mut next = 0;
    for (k, n) in sizes.iter().enumerate() {
        let records = (next..next + n).map(record);
        next += n;
        let work_id = format!("w{k}");
        let s = if sha256 {
            // Upload the encoded bytes ourselves: the reference then carries a SHA-256.
            let scratch = Root::new(
                Registry::new()
                    .resolve(
                        &format!("memory://{}", guideloom_tests::unique("scratch")),
                        &StoreOptions::default(),
                    )
                    .unwrap(),
                RootOptions::default(),
            );
            let r = scratch
                .write_shard(&work_id, 0, ShardMetadata::new("raw", "documents"), records)
                .await
                .unwrap();
            let body = scratch.store().get(&r.key, r.size).await.unwrap().body;
            root.upload_shard(&work_id, 0, body, r.record_count)
                .await
                .unwrap()
        } else {
            root.write_shard(&work_id, 0, ShardMetadata::new("raw", "documents"), records)
                .await
                .unwrap()
        };
        shards.push(s);
    }
    let request = PublishRequest {
        dataset_id: "staging".into(),
        snapshot_id: "s1".into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap()
        .snapshot
}

/// A memory root behind a counting wrapper, staging into `dir` under `budget` bytes.
fn make_root(dir: &Path, budget: u64) -> (Root, Arc<Counting>) {
    make_root_chunked(dir, budget, StagingOptions::default().download_chunk_bytes)
}

/// [`make_root`] downloading in ranged reads of `chunk` bytes.
fn make_root_chunked(dir: &Path, budget: u64, chunk: u64) -> (Root, Arc<Counting>) {
    let inner = Registry::new()
        .resolve(
            &format!("memory://{}", guideloom_tests::unique("staging")),
            &StoreOptions::default(),
        )
        .unwrap();
    let counting = Counting::new(inner);
    let options = RootOptions {
        staging: StagingOptions {
            dir: Some(dir.to_owned()),
            budget_bytes: budget,
            download_chunk_bytes: chunk,
            ..StagingOptions::default()
        },
        ..RootOptions::default()
    };
    (Root::new(counting.clone(), options), counting)
}

/// Bytes of open files of this process that live in `dir` (Linux: `/proc/self/fd`), and
/// whether every such file is unnamed (`(deleted)` or an `O_TMPFILE` `#inode` name).
#[cfg(target_os = "linux")]
fn open_staged_bytes(dir: &Path) -> (u64, usize, bool) {
    let dir = std::fs::canonicalize(dir).unwrap();
    let (mut bytes, mut files, mut unnamed) = (0, 0, true);
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.starts_with(&dir) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        files += 1;
        bytes += meta.len();
        unnamed &= target.to_string_lossy().ends_with("(deleted)");
    }
    (bytes, files, unnamed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_stay_within_the_budget_in_unnamed_files_and_fetch_each_shard_once() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [300, 0, 120, 500, 80, 260];
    // Learn the shard sizes, then give room for the two largest only.
    let (probe_root, _) = make_root(dir.path(), u64::MAX);
    let probe = publish(&probe_root, &sizes, false).await;
    let mut shard_sizes: Vec<u64> = probe.shards().iter().map(|s| s.size).collect();
    shard_sizes.sort_unstable();
    let budget = shard_sizes[shard_sizes.len() - 1] + shard_sizes[shard_sizes.len() - 2];

    let (root, counting) = make_root(dir.path(), budget);
    let snapshot = publish(&root, &sizes, false).await;
    let total = snapshot.total_records();
    let reader = root.reader(snapshot.clone());
    let ranged_before = counting.total_ranged();

    let mut scan = reader.scan(0..total).unwrap();
    let mut scanned = Vec::new();
    let mut checked_unnamed = false;
    while let Some(r) = scan.next_record().await {
        scanned.push(r.unwrap());
        let stats = root.stager().stats();
        assert!(stats.staged_bytes <= budget, "{stats:?} budget {budget}");
        #[cfg(target_os = "linux")]
        {
            let (bytes, files, unnamed) = open_staged_bytes(dir.path());
            assert!(
                bytes <= budget,
                "{bytes} bytes open in staging files, budget {budget}"
            );
            assert!(unnamed, "a staged file has a name");
            checked_unnamed |= files > 0;
        }
        // Nothing appears in the staging directory while a shard is staged and held.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
    #[cfg(target_os = "linux")]
    assert!(checked_unnamed, "no staged file was ever seen open");
    let _ = checked_unnamed;

    // The same bytes as ranged reads.
    let all: Vec<u64> = (0..total).collect();
    let ranged = reader.get_many_async(&all).await.unwrap();
    assert_eq!(scanned, ranged);
    assert_eq!(scanned, (0..total).map(record).collect::<Vec<_>>());

    // One whole-shard read per non-empty shard during the scan, none for the empty one
    // (get_many above used the shard readers, not get_range).
    let stats = root.stager().stats();
    assert!(stats.peak_staged_bytes <= budget, "{stats:?}");
    assert_eq!(stats.downloads, 5, "{stats:?}");
    assert_eq!(stats.store.requests, 5, "one chunk per shard: {stats:?}");
    assert!(stats.evictions >= 3, "{stats:?}");
    assert_eq!(counting.total_ranged() - ranged_before, 5);
    for s in snapshot.shards().iter().filter(|s| s.record_count > 0) {
        assert_eq!(counting.ranged_reads().get(&s.key), Some(&1), "{}", s.key);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_shards_are_reused_across_scans() {
    let dir = tempfile::tempdir().unwrap();
    let (root, counting) = make_root(dir.path(), 64 << 20);
    let snapshot = publish(&root, &[100, 100, 100], false).await;
    let reader = root.reader(snapshot);
    for range in [0..300, 50..250, 120..130, 0..300] {
        let mut scan = reader.scan(range.clone()).unwrap();
        let mut got = Vec::new();
        while let Some(batch) = scan.next_batch().await.unwrap() {
            got.extend(batch);
        }
        assert_eq!(got, range.map(record).collect::<Vec<_>>());
    }
    let stats = root.stager().stats();
    assert_eq!((stats.downloads, stats.evictions), (3, 0), "{stats:?}");
    assert_eq!(stats.store.requests, 3, "{stats:?}");
    let sizes: u64 = reader.snapshot().shards().iter().map(|s| s.size).sum();
    assert_eq!(stats.store.bytes_received, sizes, "{stats:?}");
    assert!(stats.reuses >= 5, "{stats:?}");
    assert_eq!(counting.total_ranged(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_shards_download_in_chunks_with_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for sha256 in [true, false] {
        let (root, counting) = make_root_chunked(dir.path(), 64 << 20, 1000);
        let snapshot = publish(&root, &[400, 3], sha256).await;
        let reader = root.reader(snapshot.clone());
        let before = counting.total_ranged();
        let mut scan = reader.scan(0..403).unwrap();
        let mut got = Vec::new();
        while let Some(batch) = scan.next_batch().await.unwrap() {
            got.extend(batch);
        }
        assert_eq!(got, (0..403).map(record).collect::<Vec<_>>());
        let chunks: u64 = snapshot
            .shards()
            .iter()
            .map(|s| s.size.div_ceil(1000))
            .sum();
        assert!(chunks > 2, "the test needs a multi-chunk shard");
        assert_eq!(counting.total_ranged() - before, chunks);
        let stats = root.stager().stats();
        assert_eq!(
            (stats.downloads, stats.store.requests),
            (2, chunks),
            "{stats:?}"
        );
        let sizes: u64 = snapshot.shards().iter().map(|s| s.size).sum();
        assert_eq!(stats.store.bytes_received, sizes, "{stats:?}");
        // A flipped byte in one chunk of a SHA-256-referenced shard is caught at download.
        if sha256 {
            let (root, counting) = make_root_chunked(dir.path(), 64 << 20, 1000);
            let snapshot = publish(&root, &[400], true).await;
            counting.set_damage(Damage::Flip);
            let reader = root.reader(snapshot);
            let err = reader
                .scan(0..400)
                .unwrap()
                .next_record()
                .await
                .unwrap()
                .unwrap_err();
            assert!(
                matches!(err, Error::Verification { what: "sha256", .. }),
                "{err}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_scans_of_one_shard_share_one_download() {
    let dir = tempfile::tempdir().unwrap();
    let (root, counting) = make_root(dir.path(), 64 << 20);
    let snapshot = publish(&root, &[300], false).await;
    let reader = root.reader(snapshot);
    let scan_all = |range: Range<u64>| {
        let reader = &reader;
        async move {
            let mut scan = reader.scan(range).unwrap();
            let mut n = 0u64;
            while let Some(r) = scan.next_record().await {
                r.unwrap();
                n += 1;
            }
            n
        }
    };
    let (a, b, c) = tokio::join!(scan_all(0..300), scan_all(100..300), scan_all(5..6));
    assert_eq!((a, b, c), (300, 200, 1));
    assert_eq!(root.stager().stats().downloads, 1);
    assert_eq!(counting.total_ranged(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_downloads_are_typed_errors_and_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    for (sha256, damage) in [
        (true, Damage::Flip),
        (false, Damage::Flip),
        (true, Damage::Truncate),
        (false, Damage::Truncate),
    ] {
        let (root, counting) = make_root(dir.path(), 64 << 20);
        let snapshot = publish(&root, &[150], sha256).await;
        let reader = root.reader(snapshot);
        counting.set_damage(damage);
        let mut scan = reader.scan(0..150).unwrap();
        let mut first_error = None;
        while let Some(r) = scan.next_record().await {
            if let Err(e) = r {
                first_error = Some(e);
                break;
            }
        }
        let err =
            first_error.unwrap_or_else(|| panic!("{damage:?} (sha256 {sha256}) went unnoticed"));
        match (sha256, damage) {
            (true, Damage::Flip) => assert!(
                matches!(&err, Error::Verification { what: "sha256", .. }),
                "{err}"
            ),
            // Without a SHA-256 reference, the record CRCs catch a flipped payload byte.
            (false, Damage::Flip) => assert!(
                matches!(&err, Error::Shard { source, .. } if source.is_corrupt()),
                "{err}"
            ),
            (_, Damage::Truncate) => assert!(
                matches!(&err, Error::Verification { what: "size", .. }),
                "{err}"
            ),
            _ => unreachable!(),
        }
        // A damaged shard holds no budget once the scan is gone; a clean retry works.
        drop(scan);
        assert_eq!(
            root.stager().stats().staged_bytes,
            0,
            "{damage:?} sha256 {sha256}"
        );
        counting.set_damage(Damage::None);
        let mut scan = reader.scan(0..150).unwrap();
        assert_eq!(scan.next_record().await.unwrap().unwrap(), record(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_budget_shards_are_refused_naming_both_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (root, counting) = make_root(dir.path(), 1000);
    let snapshot = publish(&root, &[400], false).await;
    let size = snapshot.shards()[0].size;
    assert!(size > 1000);
    let reader = root.reader(snapshot);
    let before = counting.total_ranged();
    let err = reader
        .scan(0..10)
        .unwrap()
        .next_record()
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, Error::StagingBudget { size: s, budget: 1000, held: 0, .. } if *s == size),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&size.to_string()) && msg.contains("1000"),
        "{msg}"
    );
    assert_eq!(
        counting.total_ranged(),
        before,
        "refused before downloading"
    );
    // Ranged reads still work.
    assert_eq!(reader.get_async(5).await.unwrap(), record(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_shards_are_not_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let (sizer, _) = make_root(dir.path(), u64::MAX);
    let largest = publish(&sizer, &[200, 200], false)
        .await
        .shards()
        .iter()
        .map(|s| s.size)
        .max()
        .unwrap();
    // Room for one shard: a second scan, in the other shard while the first holds its own,
    // is refused; once the first scan moves on, the second gets its shard.
    let (root, _) = make_root(dir.path(), largest + 10);
    let snapshot = publish(&root, &[200, 200], false).await;
    let reader = root.reader(snapshot);
    let mut first = reader.scan(0..400).unwrap();
    assert_eq!(first.next_record().await.unwrap().unwrap(), record(0));
    let mut second = reader.scan(200..400).unwrap();
    let err = second.next_record().await.unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::StagingBudget { held, .. } if *held > 0),
        "{err}"
    );
    drop(first);
    let mut second = reader.scan(200..400).unwrap();
    assert_eq!(second.next_record().await.unwrap().unwrap(), record(200));
    assert_eq!(root.stager().stats().evictions, 1);
}
