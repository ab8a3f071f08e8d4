//! guideloom-storage storages read straight from an HTTP range origin (nginx, started by
//! `cargo xtask ci` / `cargo xtask servers up nginx`): discovery stops at the first 404,
//! opening a shard is one suffix request, a record one ranged request.
//!
//! Without `GUIDELOOM_NGINX_URL`/`GUIDELOOM_NGINX_ROOT` the tests print `skipped: ...`;
//! with `GUIDELOOM_CI=1` a missing server is a failure.

use bytes::Bytes;
use guideloom_format::RawFormat;
use guideloom_io::blocking::BlockingIo;
use guideloom_io::http::{HttpIo, HttpPath};
use guideloom_storage::{DocumentStorage, StreamStorage, WriterOptions};

use guideloom_tests::{nginx, unique};

fn records() -> Vec<Bytes> {
    (0..25u8)
        .map(|i| Bytes::from(vec![i; usize::from(i) * 100]))
        .collect()
}

/// Writes 25 records in 3 shards (10 + 10 + 5) under the nginx root; returns the
/// subdirectory name.
fn write_documents(root: &std::path::Path) -> String {
    let name = unique("format-http");
    let local = DocumentStorage::local(root.join(&name), RawFormat)
        .with_writer_options(WriterOptions::default().max_shard_records(10));
    let mut w = local.sync_writer().unwrap();
    for (i, r) in records().iter().enumerate() {
        w.append(i as u64, r).unwrap();
    }
    assert_eq!(w.finish().unwrap().len(), 3);
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_over_http_async() {
    let Some((url, root)) = nginx("documents_over_http_async") else {
        return;
    };
    let name = write_documents(&root);
    let http = HttpIo::new(&url).unwrap();
    let stats = http.stats().clone();
    let storage = DocumentStorage::new(HttpPath::new(&name).unwrap(), RawFormat, http);
    stats.reset();
    let r = storage.async_reader().await.unwrap();
    let opened = stats.reset().requests;
    // Three suffix reads, plus the request(s) that found shard 3 missing.
    assert!((4..=5).contains(&opened), "{opened} requests to open");
    assert_eq!((r.len(), r.shards().len()), (25, 3));
    let recs = records();
    assert_eq!(r.read(17).await.unwrap(), recs[17]);
    assert_eq!(stats.reset().requests, 1, "one ranged GET per record");
    let many = r.read_many(&[11, 12, 13]).await.unwrap();
    assert_eq!(many, recs[11..14].to_vec());
    assert!(stats.reset().requests <= 1);
    let mut start = 0usize;
    loop {
        let batch = r.read_batch(start as u64).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for (k, b) in batch.iter().enumerate() {
            assert_eq!(b, &recs[start + k]);
        }
        start += batch.len();
    }
    assert_eq!(start, 25);
    // A directory that does not exist is an empty storage.
    let missing = DocumentStorage::new(
        HttpPath::new(&unique("absent")).unwrap(),
        RawFormat,
        HttpIo::new(&url).unwrap(),
    );
    assert!(missing.async_reader().await.unwrap().is_empty());
}

#[test]
fn documents_and_streams_over_http_sync() {
    let Some((url, root)) = nginx("documents_and_streams_over_http_sync") else {
        return;
    };
    let name = write_documents(&root);
    let io = BlockingIo::new(HttpIo::new(&url).unwrap()).unwrap();
    let storage = DocumentStorage::new(HttpPath::new(&name).unwrap(), RawFormat, io);
    let r = storage.sync_reader().unwrap();
    assert_eq!(r.len(), 25);
    assert_eq!(r.read(24).unwrap(), records()[24]);
    assert_eq!(r.iter().count(), 25);

    let sname = unique("format-http-stream");
    let local = StreamStorage::<u32>::local(root.join(&sname))
        .with_writer_options(WriterOptions::default().max_shard_bytes(40_000));
    let mut w = local.sync_writer().unwrap();
    let tokens: Vec<u32> = (0..30_000).collect();
    w.append(&tokens).unwrap();
    w.finish().unwrap();
    let io = BlockingIo::new(HttpIo::new(&url).unwrap()).unwrap();
    let s = StreamStorage::<u32, _>::new(HttpPath::new(&sname).unwrap(), io);
    let sr = s.sync_reader().unwrap();
    assert!(sr.shards().len() > 1);
    assert_eq!(sr.len(), 30_000);
    assert_eq!(&*sr.read(9_000, 2048).unwrap(), &tokens[9_000..11_048]);
}
