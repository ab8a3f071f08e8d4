//! guideloom-storage storages read straight from an S3 endpoint (moto, started by
//! `cargo xtask ci` / `cargo xtask servers up moto`) through `ObjectStoreIo`: shards written
//! locally, uploaded unchanged, then read by byte ranges with byte-identical results — the
//! storages need no change but the backend they are given.
//!
//! Without `GUIDELOOM_S3_ENDPOINT`/`GUIDELOOM_S3_BUCKET` the tests print `skipped: ...`;
//! with `GUIDELOOM_CI=1` a missing server is a failure.

use std::path::Path as FsPath;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::RawFormat;
use guideloom_io::blocking::BlockingIo;
use guideloom_io::objstore::ObjectStoreIo;
use guideloom_storage::{DocumentStorage, StreamStorage, WriterOptions};
use guideloom_tests::unique;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

fn moto(test: &str) -> Option<Arc<dyn ObjectStore>> {
    guideloom_tests::moto(test).map(|m| m.store)
}

fn records() -> Vec<Bytes> {
    (0..25u8)
        .map(|i| Bytes::from(vec![i; usize::from(i) * 100]))
        .collect()
}

/// Uploads every regular file of `dir` (the shards; temp files start with `.`) under `prefix`.
async fn upload_dir(store: &dyn ObjectStore, dir: &FsPath, prefix: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.starts_with('.') {
            continue;
        }
        let body = std::fs::read(entry.path()).unwrap();
        store
            .put(&prefix.clone().join(name.as_str()), body.into())
            .await
            .unwrap();
        n += 1;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_over_s3_async() {
    let Some(store) = moto("documents_over_s3_async") else {
        return;
    };
    let local_dir = tempfile::tempdir().unwrap();
    let local = DocumentStorage::local(local_dir.path().to_path_buf(), RawFormat)
        .with_writer_options(WriterOptions::default().max_shard_records(10));
    let mut w = local.sync_writer().unwrap();
    for (i, r) in records().iter().enumerate() {
        w.append(i as u64, r).unwrap();
    }
    assert_eq!(w.finish().unwrap().len(), 3);
    let prefix = Path::from(unique("format-s3"));
    assert_eq!(
        upload_dir(store.as_ref(), local_dir.path(), &prefix).await,
        3
    );

    let io = ObjectStoreIo::new(store.clone());
    let stats = io.stats().clone();
    let storage = DocumentStorage::new(prefix.clone(), RawFormat, io);
    stats.reset();
    let r = storage.async_reader().await.unwrap();
    let opened = stats.reset().requests;
    // One suffix GET per shard, plus the request(s) that found shard 3 missing.
    assert!((4..=5).contains(&opened), "{opened} requests to open");
    assert_eq!((r.len(), r.shards().len()), (25, 3));

    let recs = records();
    for i in [0u64, 9, 10, 17, 24] {
        let usize_i = usize::try_from(i).unwrap();
        assert_eq!(r.read(i).await.unwrap(), recs[usize_i], "record {i}");
    }
    // Record 0 is empty and costs no request; each other record is one ranged GET.
    assert_eq!(
        stats.reset().requests,
        4,
        "one ranged GET per non-empty record"
    );
    let many = r.read_many(&[11, 12, 13]).await.unwrap();
    assert_eq!(many, recs[11..14].to_vec());
    assert_eq!(stats.reset().requests, 1, "neighbouring records coalesce");

    // The same bytes as the local reader, record for record.
    let local_reader = local.sync_reader().unwrap();
    for i in 0..25u64 {
        assert_eq!(r.read(i).await.unwrap(), local_reader.read(i).unwrap());
    }
}

#[test]
fn documents_and_streams_over_s3_sync() {
    let Some(store) = moto("documents_and_streams_over_s3_sync") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // Documents through the blocking adapter.
    let doc_dir = tempfile::tempdir().unwrap();
    let local = DocumentStorage::local(doc_dir.path().to_path_buf(), RawFormat)
        .with_writer_options(WriterOptions::default().max_shard_records(7));
    let mut w = local.sync_writer().unwrap();
    for (i, r) in records().iter().enumerate() {
        w.append(i as u64, r).unwrap();
    }
    w.finish().unwrap();
    let doc_prefix = Path::from(unique("format-s3-docs"));
    rt.block_on(upload_dir(store.as_ref(), doc_dir.path(), &doc_prefix));
    let io = BlockingIo::new(ObjectStoreIo::new(store.clone())).unwrap();
    let r = DocumentStorage::new(doc_prefix, RawFormat, io)
        .sync_reader()
        .unwrap();
    assert_eq!(r.len(), 25);
    let all: Vec<Bytes> = r.iter().map(Result::unwrap).collect();
    assert_eq!(all, records());

    // A token stream spanning several shards: a slice across a shard boundary.
    let stream_dir = tempfile::tempdir().unwrap();
    let local = StreamStorage::<u32>::local(stream_dir.path().to_path_buf())
        .with_writer_options(WriterOptions::default().max_shard_bytes(40_000));
    let mut w = local.sync_writer().unwrap();
    let tokens: Vec<u32> = (0..30_000).collect();
    w.append(&tokens).unwrap();
    w.finish().unwrap();
    let stream_prefix = Path::from(unique("format-s3-stream"));
    let shards = rt.block_on(upload_dir(
        store.as_ref(),
        stream_dir.path(),
        &stream_prefix,
    ));
    assert!(shards > 1, "{shards} stream shards");
    let io = BlockingIo::new(ObjectStoreIo::new(store)).unwrap();
    let sr = StreamStorage::<u32, _>::new(stream_prefix, io)
        .sync_reader()
        .unwrap();
    assert_eq!(sr.len(), 30_000);
    assert_eq!(&*sr.read(9_000, 2048).unwrap(), &tokens[9_000..11_048]);
    assert_eq!(&*sr.read(0, 30_000).unwrap(), &tokens[..]);
}
