//! `Dataset::get_capped_async`: a page of records of a large shard read without opening it
//! (its index entries, then the records), lengths looked at before any record is read.

use std::sync::Arc;

use guideloom_format::ShardMetadata;

use super::*;
use crate::error::Error;
use crate::manifest::PublishMode;
use crate::store::CountingStore;

/// Record `i`: 3 bytes, but every 97th is 5 000.
fn record(i: u64) -> Vec<u8> {
    let len = if i.is_multiple_of(97) { 5_000 } else { 3 };
    vec![(i % 251) as u8; len]
}

async fn root_of(shards: &[u64]) -> (Root, CountingStore, Dataset) {
    let inner = Registry::new()
        .resolve("memory://capped", &StoreOptions::default())
        .unwrap();
    let counting = CountingStore::new(inner);
    let root = Root::new(Arc::new(counting.clone()), RootOptions::default());
    let mut refs = Vec::new();
    let mut first = 0;
    for (n, &count) in shards.iter().enumerate() {
        let records: Vec<Vec<u8>> = (first..first + count).map(record).collect();
        let meta = ShardMetadata::new("raw", "documents");
        refs.push(
            root.write_shard("w", n as u64, meta, &records)
                .await
                .unwrap(),
        );
        first += count;
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
    let reader = root.reader(root.latest().await.unwrap());
    (root, counting, reader)
}

fn flat(runs: &[CappedRun]) -> Vec<Capped> {
    runs.iter().flat_map(|r| r.records.clone()).collect()
}

fn expected(range: std::ops::Range<u64>, cap: u64) -> Vec<Capped> {
    range
        .map(|i| match record(i) {
            r if r.len() as u64 > cap => Capped::TooLarge(r.len() as u64),
            r => Capped::Bytes(r.into()),
        })
        .collect()
}

#[tokio::test]
async fn a_page_of_a_large_shard_reads_its_entries_and_records_only() {
    // Shard 0: 10 000 records, an index of 120 KB; shard 1: 100 records, a small index.
    let (_root, counting, reader) = root_of(&[10_000, 100]).await;
    let before = counting.counts();
    let runs = reader.get_capped_async(4_321..4_371, 1_000).await.unwrap();
    let delta = counting.counts() - before;
    assert_eq!(flat(&runs), expected(4_321..4_371, 1_000));
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].shard, runs[0].start), (0, 4_321));
    assert_eq!(runs[0].record_format, "raw");
    // The probe's call (a window of index entries; footer and metadata allowance) and one
    // read of the records under the cap: record 4365 (97 × 45) is 5 000 bytes and is not
    // read (so two ranges). The window and the tail are read as one range when less than
    // 16 KiB apart, as here.
    let window = (PROBE_WINDOW_BEFORE + PROBE_WINDOW_RECORDS + 1) * 12 + 4_096 + (16 << 10);
    assert!(delta.reader_reads.requests <= 4, "{delta:?}");
    assert!(
        delta.reader_reads.bytes_received < window + 4_096 + 64 + 49 * 3 + 1,
        "{delta:?}"
    );
    assert!(matches!(runs[0].records[44], Capped::TooLarge(5_000)));

    // The next page, inside the kept probe's window: its records only, as an open shard.
    let before = counting.counts();
    let runs = reader.get_capped_async(4_371..4_421, 1_000).await.unwrap();
    let next = counting.counts() - before;
    assert_eq!(flat(&runs), expected(4_371..4_421, 1_000));
    assert_eq!(next.reader_reads.bytes_received, 50 * 3, "{next:?}");
    // Before the window (which, near the end of the index, reaches the tail): one read of
    // its 51 entries more.
    let before = counting.counts();
    let runs = reader.get_capped_async(1_000..1_050, 1_000).await.unwrap();
    let far = counting.counts() - before;
    assert_eq!(flat(&runs), expected(1_000..1_050, 1_000));
    assert_eq!(far.reader_reads.bytes_received, 51 * 12 + 50 * 3, "{far:?}");

    // Across the two shards: the small one is opened (one tail read holds its index).
    let runs = reader
        .get_capped_async(9_980..10_030, 10_000)
        .await
        .unwrap();
    assert_eq!(flat(&runs), expected(9_980..10_030, 10_000));
    assert_eq!(
        runs.iter().map(|r| (r.shard, r.start)).collect::<Vec<_>>(),
        [(0, 9_980), (1, 10_000)]
    );

    // An opened large shard gives its lengths from its index: the records under the cap are
    // read (record 0, 5 000 bytes, is not).
    reader.open_shard_async(0).await.unwrap();
    let before = counting.counts();
    let runs = reader.get_capped_async(0..50, 1_000).await.unwrap();
    let delta = counting.counts() - before;
    assert_eq!(flat(&runs), expected(0..50, 1_000));
    assert_eq!(delta.reader_reads.bytes_received, 49 * 3, "{delta:?}");

    // Empty, and past the end.
    assert!(reader.get_capped_async(7..7, 1).await.unwrap().is_empty());
    let err = reader
        .get_capped_async(10_090..10_101, 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::OutOfRange { index: 10_100, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_damaged_or_lying_shard_fails_the_page_as_it_fails_a_read() {
    let (root, _counting, reader) = root_of(&[10_000]).await;
    let shard = reader.snapshot().shards()[0].clone();
    // A reference that lies about its count or size: refused, as a whole open refuses it.
    for (count, size) in [(10_001, shard.size), (10_000, shard.size + 1)] {
        let mut lying = shard.clone();
        lying.record_count = count;
        lying.size = size;
        let mut snapshot = reader.snapshot().clone();
        snapshot.manifest.shards = vec![lying];
        snapshot.manifest.total_records = count;
        let err = root
            .reader(snapshot)
            .get_capped_async(5_000..5_010, 100)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Verification { .. } | Error::Shard { .. }),
            "count={count} size={size}: {err}"
        );
    }
}
