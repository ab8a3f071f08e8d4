//! Unit tests of [`Root`] end to end, across its protocols: the futures are `Send`, the log
//! search with and without listings, gaps, and shards verified by their footers.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::ShardMetadata;
use guideloom_io::AsyncReader;

use super::*;
use crate::error::Error;
use crate::manifest::{Checksum, PublishMode, log_key};
use crate::shards::FooterInspector;
use crate::store::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, StoreCapabilities};

fn assert_send<T: Send>(_: &T) {}

#[test]
fn public_futures_are_send() {
    let store = Registry::new()
        .resolve("memory://send", &StoreOptions::default())
        .unwrap();
    let root = Root::new(store, RootOptions::default());
    let req = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s".into(),
        shards: vec![],
        mode: PublishMode::Full,
        schema: None,
    };
    let opts = PublicationOptions::default();
    assert_send(&root.publish(&req, &opts));
    assert_send(&root.latest());
    assert_send(&root.snapshot("s"));
    assert_send(&root.snapshots());
    assert_send(&root.init("d"));
    assert_send(&root.upload_shard("w", 0, Bytes::new(), 0));
    // Records pulled on the task, across the hand-overs to the encoder's thread.
    let records = vec![vec![1u8; 3]];
    assert_send(&root.write_shard("w", 0, ShardMetadata::new("raw", "documents"), &records));
    let fallible = records.iter().map(Ok::<_, String>);
    assert_send(&root.try_write_shard("w", 0, ShardMetadata::new("raw", "documents"), fallible));
    assert_send(&root.write_array_record_shard("w", 0, Default::default(), &records));
    assert_send(&root.catalog());
    assert_send(&root.audit_log());
    assert_send(&root.annotations("a", None, &snapshot_of_nothing(), false));
}

/// A snapshot value for futures that are only built, never run.
fn snapshot_of_nothing() -> Snapshot {
    Snapshot {
        manifest: crate::manifest::Manifest {
            format: crate::manifest::MANIFEST_FORMAT.to_owned(),
            version: crate::manifest::CONTROL_VERSION,
            seq: 1,
            snapshot_id: "s".into(),
            dataset_id: "d".into(),
            parent_seq: None,
            mode: PublishMode::Full,
            shards: vec![],
            total_records: 0,
            claim_nonce: "n".into(),
            schema: None,
        },
        log_key: log_key(1),
        log_size: 0,
        log_sha256: String::new(),
    }
}

/// Forwards to a memory root, counts probes of the log (HEADs, and GETs of `log/` keys),
/// cannot list when `list` is false, and claims
/// network reads when `remote` is true.
#[derive(Debug)]
struct NoList {
    inner: Arc<dyn RootStore>,
    probes: AtomicU64,
    list: bool,
    remote: bool,
}

#[async_trait]
impl RootStore for NoList {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        StoreCapabilities {
            list: self.list,
            remote_reads: self.remote,
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
        if key.starts_with("log/") {
            self.probes.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.get(key, limit).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.probes.fetch_add(1, Ordering::Relaxed);
        self.inner.head(key).await
    }
    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        self.inner.open_reader(key, size).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        if self.list {
            self.inner.list(prefix).await
        } else {
            Err(Error::Unsupported {
                what: "no listing in this test".into(),
            })
        }
    }
}

/// The documented count: `2 * (floor(log2 n) + 1)` probes for latest `n >= 1` (GETs of at
/// most 64 KiB that also bring the latest entry: no further request).
fn documented_probes(n: u64) -> u64 {
    2 * (u64::from(n.ilog2()) + 1)
}

#[tokio::test]
async fn probing_finds_the_latest_entry_with_logarithmic_probes() {
    let inner = Registry::new()
        .resolve("memory://probe", &StoreOptions::default())
        .unwrap();
    let probing = Arc::new(NoList {
        inner: Arc::clone(&inner),
        probes: AtomicU64::new(0),
        remote: false,
        list: false,
    });
    // Publishing through the non-listing store exercises the probe in `commit` too.
    let writer = Root::new(probing.clone(), RootOptions::default());
    let reader = Root::new(probing.clone(), RootOptions::default());
    let listing = Root::new(inner, RootOptions::default());
    assert!(reader.latest().await.unwrap_err().is_not_found());
    for n in 1..=37u64 {
        let request = PublishRequest {
            dataset_id: "d".into(),
            snapshot_id: format!("s{n}"),
            shards: vec![],
            mode: PublishMode::Full,
            schema: None,
        };
        let published = writer
            .publish(&request, &PublicationOptions::default())
            .await
            .unwrap()
            .snapshot;
        assert_eq!(published.seq(), n);
        let before = probing.probes.load(Ordering::Relaxed);
        let latest = reader.latest().await.unwrap();
        let probes = probing.probes.load(Ordering::Relaxed) - before;
        assert_eq!((latest.seq(), latest.id()), (n, format!("s{n}").as_str()));
        assert_eq!(latest, listing.latest().await.unwrap());
        assert_eq!(probes, documented_probes(n), "latest seq {n}");
    }
    let all = reader.snapshots().await.unwrap();
    assert_eq!(all, listing.snapshots().await.unwrap());
    assert_eq!(all.len(), 37);
    assert_eq!(documented_probes(100), 14);
}

#[tokio::test]
async fn a_hand_made_gap_gives_every_reader_the_same_latest_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn RootStore> = Arc::new(crate::store::LocalStore::new(dir.path()));
    let probing = Arc::new(NoList {
        inner: Arc::clone(&local),
        probes: AtomicU64::new(0),
        remote: false,
        list: false,
    });
    let root = Root::new(probing, RootOptions::default());
    let listing = Root::new(Arc::clone(&local), RootOptions::default());
    let publish = |n: u64| PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: format!("s{n}"),
        shards: vec![],
        mode: PublishMode::Full,
        schema: None,
    };
    for n in 1..=6u64 {
        root.publish(&publish(n), &PublicationOptions::default())
            .await
            .unwrap();
    }
    assert!(listing.audit_log().await.unwrap().is_sound());
    // Deleting entry 3 by hand: the probe (1, 2, 4, 8 absent, 6, 7 absent) still sees 6,
    // and so does the reader that lists.
    std::fs::remove_file(dir.path().join(log_key(3))).unwrap();
    assert_eq!(root.latest().await.unwrap().seq(), 6);
    assert_eq!(listing.latest().await.unwrap().seq(), 6);
    let seqs = |all: Vec<Snapshot>| all.iter().map(Snapshot::seq).collect::<Vec<_>>();
    assert_eq!(seqs(root.snapshots().await.unwrap()), vec![1, 2, 4, 5, 6]);
    assert_eq!(
        seqs(listing.snapshots().await.unwrap()),
        vec![1, 2, 4, 5, 6]
    );
    for r in [&root, &listing] {
        let audit = r.audit_log().await.unwrap();
        assert_eq!(audit.gaps, vec![std::ops::Range { start: 3, end: 4 }]);
        assert!(audit.unreachable.is_empty());
        assert_eq!(audit.latest, Some(6));
        assert!(!audit.is_sound());
    }
    // Deleting entry 2 too: every reader stops at 1, which exists and has no successor;
    // the listing reader knows 4..=6 exist beyond the gap.
    std::fs::remove_file(dir.path().join(log_key(2))).unwrap();
    assert_eq!(root.latest().await.unwrap().seq(), 1);
    assert_eq!(listing.latest().await.unwrap().seq(), 1);
    assert_eq!(seqs(listing.snapshots().await.unwrap()), vec![1]);
    assert_eq!(seqs(root.snapshots().await.unwrap()), vec![1]);
    let audit = listing.audit_log().await.unwrap();
    assert_eq!(
        (audit.gaps, audit.unreachable),
        (vec![std::ops::Range { start: 2, end: 4 }], vec![4, 5, 6])
    );
    // Without a listing the entries past the gap are found by the audit's probes.
    let audit = root.audit_log().await.unwrap();
    assert_eq!(
        (audit.gaps, audit.unreachable),
        (vec![std::ops::Range { start: 2, end: 4 }], vec![4, 5, 6])
    );
    // Open by id still reaches an entry beyond the gap (its pointer names it).
    assert_eq!(listing.snapshot("s5").await.unwrap().seq(), 5);
    // Publication refuses to build on a damaged log, naming the first missing entry.
    let err = listing
        .publish(&publish(7), &PublicationOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::LogGap {
                missing: 2,
                newest: 6
            }
        ),
        "{err:?}"
    );
}

fn request(id: &str, shards: Vec<ShardRef>) -> PublishRequest {
    PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: id.into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    }
}

#[tokio::test]
async fn written_shards_verify_by_footer_with_one_small_read_each() {
    let reg = Registry::new();
    let store = reg
        .resolve("memory://shards-test", &StoreOptions::default())
        .unwrap();
    let root = Root::new(store, RootOptions::default());
    let meta = || ShardMetadata::new("raw", "documents");
    let records: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; usize::from(i) + 1]).collect();
    let a = root.write_shard("w0", 0, meta(), &records).await.unwrap();
    let b = root
        .write_shard("w1", 0, meta(), &records[..2])
        .await
        .unwrap();
    assert_eq!((a.record_count, b.record_count), (5, 2));
    assert!(matches!(a.checksum, Some(Checksum::FooterCrc32c(_))));

    let bucket = reg.lookup("memory", "shards-test").unwrap();
    let opts = PublicationOptions {
        verify_record_counts: true,
        inspector: Some(Arc::new(FooterInspector)),
        ..PublicationOptions::default()
    };
    // Warm the identity so the count below is the verification plus the commit only.
    root.init("d").await.unwrap();
    let before = bucket.requests();
    let snap = root
        .publish(&request("s1", vec![a.clone(), b.clone()]), &opts)
        .await
        .unwrap()
        .snapshot;
    assert_eq!(snap.total_records(), 7);
    // 2 HEAD + 2 tail reads + claim PUT + LIST + log PUT + pointer PUT, and the two LISTs
    // of `gc/` around them (the handshake with a running garbage collection).
    assert_eq!(bucket.requests() - before, 10);

    let mut wrong_count = a.clone();
    wrong_count.record_count = 6;
    let err = root
        .publish(&request("s2", vec![wrong_count]), &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Verification { what: "record count", key, .. } if *key == a.key),
        "{err}"
    );
    let mut wrong_crc = a.clone();
    wrong_crc.checksum = Some(Checksum::FooterCrc32c(0));
    let err = root
        .publish(&request("s2", vec![wrong_crc]), &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Verification {
                what: "checksum",
                ..
            }
        ),
        "{err}"
    );
    // A non-shard object fails footer decoding with a typed error naming it.
    let junk = root
        .upload_shard("junk", 0, Bytes::from(vec![7u8; 100]), 1)
        .await
        .unwrap();
    let err = root
        .publish(&request("s2", vec![junk.clone()]), &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Shard { key, source } if *key == junk.key && source.is_corrupt()),
        "{err}"
    );
}

#[tokio::test]
async fn oversized_written_shard_is_refused_before_upload() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RootOptions {
        max_encoded_shard_bytes: 100,
        ..RootOptions::default()
    };
    let store = Registry::new()
        .resolve(
            dir.path().join("root").to_str().unwrap(),
            &StoreOptions::default(),
        )
        .unwrap();
    let root = Root::new(store, opts);
    let err = root
        .write_shard(
            "w",
            0,
            ShardMetadata::new("raw", "documents"),
            [vec![0u8; 500]],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ShardTooLarge { limit: 100, .. }),
        "{err}"
    );
    assert!(!dir.path().join("root").exists(), "nothing was written");
}

/// In-order reads stage a shard whole exactly where the reader's rule says (a store with
/// network reads, a piece of at least half the shard) and give the same records either way.
#[tokio::test]
async fn in_order_reads_stage_most_of_a_remote_shard_and_range_the_rest() {
    let memory = Registry::new()
        .resolve("memory://in-order-staging", &StoreOptions::default())
        .unwrap();
    assert!(!memory.capabilities().remote_reads);
    let writer = Root::new(Arc::clone(&memory), RootOptions::default());
    let mut shards = Vec::new();
    for n in 0..2u64 {
        let records: Vec<Vec<u8>> = (0..10u64)
            .map(|i| format!("{n}:{i}").into_bytes())
            .collect();
        let meta = ShardMetadata::new("raw", "documents");
        shards.push(writer.write_shard("w", n, meta, &records).await.unwrap());
    }
    writer
        .publish(&request("s", shards), &PublicationOptions::default())
        .await
        .unwrap();
    let expected: Vec<Bytes> = (0..2u64)
        .flat_map(|n| (0..10u64).map(move |i| Bytes::from(format!("{n}:{i}"))))
        .collect();

    async fn read(root: &Root, range: Range<u64>) -> Vec<Bytes> {
        let reader = root.open_latest().await.unwrap();
        let mut runs = reader
            .read_in_order(range, guideloom_format::RunBudget::default())
            .unwrap();
        let mut got = Vec::new();
        while let Some(run) = runs.next_run().await {
            got.extend(run.unwrap().records);
        }
        got
    }

    // A memory root never stages.
    assert_eq!(read(&writer, 0..20).await, expected);
    assert_eq!(writer.stager().stats().downloads, 0);

    for remote in [false, true] {
        let store = Arc::new(NoList {
            inner: Arc::clone(&memory),
            probes: AtomicU64::new(0),
            list: true,
            remote,
        });
        let root = Root::new(store, RootOptions::default());
        // 3 of shard 0's 10 records: ranged whatever the store.
        assert_eq!(read(&root, 2..5).await, expected[2..5]);
        assert_eq!(root.stager().stats().downloads, 0);
        // 6 of shard 0's records and all of shard 1: both staged on a remote store.
        assert_eq!(read(&root, 4..20).await, expected[4..20]);
        let staged = if remote { 2 } else { 0 };
        assert_eq!(root.stager().stats().downloads, staged, "remote: {remote}");
        // Read again: the staged copies are reused, not downloaded twice.
        assert_eq!(read(&root, 0..20).await, expected);
        assert_eq!(root.stager().stats().downloads, staged, "remote: {remote}");
    }
}

#[tokio::test]
async fn a_shard_whose_index_outgrows_the_default_tail_opens_with_one_read() {
    let reg = Registry::new();
    let inner = reg
        .resolve("memory://sized-tail", &StoreOptions::default())
        .unwrap();
    let counting = crate::store::CountingStore::new(inner);
    let root = Root::new(Arc::new(counting.clone()), RootOptions::default());
    // 10 000 one-byte records: an index of 120 000 bytes, past the 64 KiB default tail.
    let records: Vec<[u8; 1]> = (0..10_000u32).map(|i| [(i % 251) as u8]).collect();
    let meta = ShardMetadata::new("raw", "documents");
    let shard = root.write_shard("w", 0, meta, &records).await.unwrap();
    root.publish(
        &request("s", vec![shard.clone()]),
        &PublicationOptions::default(),
    )
    .await
    .unwrap();
    let snapshot = root.latest().await.unwrap();
    let reader = root.reader(snapshot);
    let before = counting.counts();
    assert_eq!(
        &reader.get_async(4321).await.unwrap()[..],
        &[(4321 % 251) as u8]
    );
    let reads = counting.counts() - before;
    // One read for footer, metadata and the whole index (sized from the record count), one
    // for the record.
    assert_eq!(reads.reader_reads.requests, 2, "{reads:?}");
    assert!(
        reads.reader_reads.bytes_received < 120_000 + 64 + 4096 + 1 + 1,
        "{reads:?}"
    );
    // A reference that lies about its count is refused after one bounded read.
    let mut lying = shard;
    lying.record_count = 2_000_000;
    let reader = root.reader(Snapshot {
        manifest: crate::manifest::Manifest {
            shards: vec![lying],
            total_records: 2_000_000,
            ..snapshot_of_nothing().manifest
        },
        ..snapshot_of_nothing()
    });
    let err = reader.get_async(0).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Verification {
                what: "record count",
                ..
            }
        ),
        "{err}"
    );
}

/// On a remote root, a shard's first `get` is a probe (footer, metadata and the record's
/// index entries, then the record), its second opens it whole, and later ones are one read
/// of exactly the record; a probe checks the reference as a whole open does. Local roots
/// never probe.
#[tokio::test]
async fn a_remote_shards_first_get_reads_only_the_index_entries_it_needs() {
    for remote in [true, false] {
        let inner = Registry::new()
            .resolve("memory://probe-read", &StoreOptions::default())
            .unwrap();
        let flagged = Arc::new(NoList {
            inner,
            probes: AtomicU64::new(0),
            list: true,
            remote,
        });
        let counting = crate::store::CountingStore::new(flagged);
        let root = Root::new(Arc::new(counting.clone()), RootOptions::default());
        let records: Vec<[u8; 3]> = (0..10_000u32)
            .map(|i| [(i % 251) as u8, i.to_le_bytes()[1], 7])
            .collect();
        let meta = ShardMetadata::new("raw", "documents");
        let shard = root.write_shard("w", 0, meta, &records).await.unwrap();
        root.publish(
            &request("s", vec![shard.clone()]),
            &PublicationOptions::default(),
        )
        .await
        .unwrap();
        let reader = root.reader(root.latest().await.unwrap());
        let mut reads = Vec::new();
        for i in [4321usize, 8765, 99] {
            let before = counting.counts();
            assert_eq!(&reader.get_async(i as u64).await.unwrap()[..], &records[i]);
            let delta = counting.counts() - before;
            reads.push((
                delta.reader_reads.requests,
                delta.reader_reads.bytes_received,
            ));
        }
        let whole = 120_000 + 64 + 4096;
        if remote {
            // The probe: two ranges (index window; footer + metadata allowance), the record.
            assert_eq!(reads[0].0, 3, "{reads:?}");
            assert!(reads[0].1 < 2 * (4096 + 64 + 24) + 3, "{reads:?}");
            // The whole open (index + footer + allowance in one read), the record.
            assert_eq!(reads[1].0, 2, "{reads:?}");
            assert!(reads[1].1 <= whole + 3, "{reads:?}");
        } else {
            assert_eq!(reads[0].0, 2, "{reads:?}");
            assert!(reads[0].1 > 120_000, "{reads:?}");
            assert_eq!(reads[1], (1, 3), "{reads:?}");
        }
        assert_eq!(
            reads[2],
            (1, 3),
            "then one read of exactly the record: {reads:?}"
        );

        // A reference that lies about the count or the size fails the probe as it fails a
        // whole open.
        for (count, size) in [(10_001, shard.size), (10_000, shard.size + 1)] {
            let mut lying = shard.clone();
            lying.record_count = count;
            lying.size = size;
            let reader = root.reader(Snapshot {
                manifest: crate::manifest::Manifest {
                    shards: vec![lying],
                    total_records: count,
                    ..snapshot_of_nothing().manifest
                },
                ..snapshot_of_nothing()
            });
            let err = reader.get_async(5_000).await.unwrap_err();
            assert!(
                matches!(err, Error::Verification { .. }),
                "remote={remote} count={count} size={size}: {err}"
            );
        }
    }
}

#[tokio::test]
async fn a_failing_record_stops_an_array_record_write_with_nothing_written() {
    let root = Root::open(
        "memory://try-write-array-record/r",
        &StoreOptions::default(),
        RootOptions::default(),
    )
    .unwrap();
    let options = guideloom_arrayrecord::ArrayRecordWriterOptions::default();
    let bad = [
        Ok(vec![1u8; 8]),
        Err("record 1 does not encode"),
        Ok(vec![2u8; 8]),
    ];
    let err = root
        .try_write_array_record_shard("w", 0, options, bad)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err, "record 1 does not encode");
    let key = crate::manifest::array_record_shard_key("w", 0);
    assert!(
        root.store().head(&key).await.is_err(),
        "nothing under {key}"
    );
    // The same key is free for a write that succeeds.
    let good = (0..3u8).map(|i| Ok::<_, &str>(vec![i; 8]));
    let shard = root
        .try_write_array_record_shard("w", 0, options, good)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((shard.key, shard.record_count), (key, 3));
}
