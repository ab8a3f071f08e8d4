//! `Dataset::try_get_here` / `try_get_many_here`, the synchronous facade's path through the
//! open shards' synchronous views (`OpenedShard::as_sync`): the same bytes and errors as
//! `get` / `get_many`, and `None` whenever the read needs the executor (a shard not yet
//! open, a store whose readers are not local).
#![allow(clippy::cast_possible_truncation)] // test indices are small

use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{ReadOptions, ShardMetadata};

use super::*;
use crate::error::Error;
use crate::manifest::PublishMode;
use crate::store::LocalReads;

/// Publishes 3 shards of 7 records (`"{shard}:{record}"`) into `root`.
async fn publish_three(root: &Root) -> Vec<Bytes> {
    let mut shards = Vec::new();
    for n in 0..3u64 {
        let records: Vec<Vec<u8>> = (0..7u64).map(|i| format!("{n}:{i}").into_bytes()).collect();
        let meta = ShardMetadata::new("raw", "documents");
        shards.push(root.write_shard("w", n, meta, &records).await.unwrap());
    }
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s".into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
    (0..3u64)
        .flat_map(|n| (0..7u64).map(move |i| Bytes::from(format!("{n}:{i}"))))
        .collect()
}

fn local_root(dir: &std::path::Path, reads: LocalReads) -> Root {
    let options = StoreOptions {
        local_reads: reads,
        ..StoreOptions::default()
    };
    let store = Registry::new()
        .resolve(dir.to_str().unwrap(), &options)
        .unwrap();
    Root::new(store, RootOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_reads_answer_on_the_calling_thread_once_open_with_the_async_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let expected = publish_three(&local_root(dir.path(), LocalReads::Auto)).await;
    for reads in [LocalReads::Mmap, LocalReads::Pread] {
        let reader = local_root(dir.path(), reads).open_latest().await.unwrap();
        // Not open yet: the executor's path opens it.
        assert!(reader.try_get_here(0).is_none(), "{reads:?}");
        assert!(reader.try_get_many_here(&[0, 8]).is_none(), "{reads:?}");
        assert_eq!(reader.get_async(0).await.unwrap(), expected[0]);
        // Shard 0 open, shard 1 not: a batch touching both waits for the executor.
        assert!(reader.try_get_many_here(&[1, 8]).is_none(), "{reads:?}");
        for i in 0..21 {
            let sync = reader.try_get_here(i);
            // Shard 0 is open; shards 1 and 2 open at their first record's async `get`.
            if i < 7 || i % 7 != 0 {
                assert_eq!(
                    sync.unwrap().unwrap(),
                    expected[i as usize],
                    "{reads:?} {i}"
                );
            } else {
                assert!(sync.is_none(), "{reads:?} {i}: shard not open");
            }
            assert_eq!(reader.get_async(i).await.unwrap(), expected[i as usize]);
        }
        // Every shard open: batches too, in the order asked, repeats included.
        let asked = [20, 0, 13, 0, 6, 7];
        let got = reader.try_get_many_here(&asked).unwrap().unwrap();
        let want: Vec<Bytes> = asked
            .iter()
            .map(|&i| expected[i as usize].clone())
            .collect();
        assert_eq!(got, want, "{reads:?}");
        assert_eq!(reader.get_many_async(&asked).await.unwrap(), want);
        // Past the end: the same typed error as the async path, before any read.
        for result in [
            reader.try_get_here(21).unwrap().map(|_| ()),
            reader.try_get_many_here(&[3, 99]).unwrap().map(|_| ()),
        ] {
            assert!(
                matches!(result, Err(Error::OutOfRange { .. })),
                "{reads:?}: {result:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_record_is_the_same_typed_error_on_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = local_root(dir.path(), LocalReads::Pread);
    let expected = publish_three(&root).await;
    let reader = root.open_latest().await.unwrap();
    let key = reader.snapshot().shards()[1].key.clone();
    // Open shard 1, then flip a byte of its record 2 (CRC checked on read by default).
    assert_eq!(reader.get_async(7).await.unwrap(), expected[7]);
    let path = dir.path().join(&key);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes
        .windows(3)
        .position(|w| w == b"1:2")
        .expect("record 1:2 in the shard");
    bytes[at + 2] = b'9';
    std::fs::write(&path, &bytes).unwrap();
    assert!(ReadOptions::default().verifies_records());
    let sync = reader.try_get_here(9).unwrap().unwrap_err();
    let r#async = reader.get_async(9).await.unwrap_err();
    for err in [&sync, &r#async] {
        assert!(
            matches!(err, Error::Shard { key: k, .. } if *k == key),
            "{err:?}"
        );
    }
    assert_eq!(sync.to_string(), r#async.to_string());
}

#[tokio::test]
async fn a_memory_root_always_takes_the_executors_path() {
    let store = Registry::new()
        .resolve("memory://blocking", &StoreOptions::default())
        .unwrap();
    let root = Root::new(Arc::clone(&store), RootOptions::default());
    let expected = publish_three(&root).await;
    let reader = root.open_latest().await.unwrap();
    assert_eq!(reader.get_async(0).await.unwrap(), expected[0]);
    assert!(reader.try_get_here(0).is_none());
    assert!(reader.try_get_many_here(&[0, 1]).is_none());
}

/// Through a counting store over a local root, the calling thread's reads (the store
/// reader's synchronous view) are counted exactly as the executor's: one request per
/// record, one per range of a batch, the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counting_stores_sync_view_counts_as_its_async_reads() {
    let dir = tempfile::tempdir().unwrap();
    let base = local_root(dir.path(), LocalReads::Pread);
    let expected = publish_three(&base).await;
    let counting = Arc::new(crate::store::CountingStore::new(Arc::clone(base.store())));
    let root = Root::new(counting.clone(), RootOptions::default());
    let reader = root.open_latest().await.unwrap();
    for i in [0, 7, 14] {
        reader.get_async(i).await.unwrap(); // opens the three shards
    }
    let asked = [20, 0, 13, 0, 6, 7];
    let before = counting.counts().reader_reads;
    for i in 0..21 {
        assert_eq!(
            reader.try_get_here(i).unwrap().unwrap(),
            expected[i as usize]
        );
    }
    let many = reader.try_get_many_here(&asked).unwrap().unwrap();
    let here = counting.counts().reader_reads - before;
    for i in 0..21 {
        reader.get_async(i).await.unwrap();
    }
    assert_eq!(reader.get_many_async(&asked).await.unwrap(), many);
    let there = counting.counts().reader_reads - before - here;
    assert_eq!(here, there);
    assert!(here.requests >= 21, "{here:?}");
}
