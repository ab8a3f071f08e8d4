//! ArrayRecord files served by real servers, counted: nginx through `HttpIo` and moto (S3)
//! through `ObjectStoreIo`. Opening costs one request, a random record one request of its
//! chunk's bytes, a batch a fraction of the file; no request fetches the whole object.
//!
//! Needs `cargo xtask servers up` (or `cargo xtask ci`); without the servers it prints
//! `skipped: ...`, unless `GUIDELOOM_CI=1`, where a missing server is a failure.

use std::sync::Arc;

use guideloom_arrayrecord::{ArrayRecordReadOptions, ArrayRecordWriter, AsyncArrayRecordReader};
use guideloom_io::http::{HttpIo, HttpPath};
use guideloom_io::objstore::ObjectStoreIo;
use guideloom_io::{AsyncReader, Location, RequestStats};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

const RECORDS: u64 = 3000;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn skip(what: &str) {
    assert!(
        std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
        "GUIDELOOM_CI=1 but {what} is not set: the test server is missing"
    );
    println!("skipped: {what} is not set (run `cargo xtask servers up`)");
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("arrayrecord-{}-{nanos}", std::process::id())
}

/// Record `i`: `(i % 200) * 10` pseudo-random bytes (incompressible, so the file is ~3 MB).
fn record(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..(i % 200) * 10)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

/// A file with the Python writer's defaults (group size 1, zstd).
fn file() -> Vec<u8> {
    let mut w = ArrayRecordWriter::new(Vec::new(), Default::default());
    for i in 0..RECORDS {
        w.write(&record(i)).unwrap();
    }
    w.finish().unwrap()
}

async fn exercise(reader: impl AsyncReader, stats: Arc<RequestStats>, size: u64) {
    let ar = AsyncArrayRecordReader::open(reader, &ArrayRecordReadOptions::default())
        .await
        .unwrap();
    let s = stats.snapshot();
    assert_eq!(s.requests, 1, "open = one request");
    assert!(s.bytes_received <= ArrayRecordReadOptions::default().tail_len());
    assert_eq!(ar.len(), RECORDS);
    for i in [2999, 17, 1500, 1234] {
        let before = stats.snapshot();
        assert_eq!(ar.get(i).await.unwrap(), record(i));
        let d = stats.snapshot() - before;
        let chunk = ar.layout().chunks()[usize::try_from(i).unwrap()];
        assert_eq!(d.requests, 1, "record {i} = one request");
        assert_eq!(
            d.bytes_received,
            chunk.end - chunk.offset,
            "record {i}: its chunk only"
        );
    }
    let batch: Vec<u64> = (0..64).map(|k| (k * 467 + 11) % RECORDS).collect();
    let before = stats.snapshot();
    let got = ar.get_many(&batch).await.unwrap();
    let d = stats.snapshot() - before;
    for (g, &i) in got.iter().zip(&batch) {
        assert_eq!(g[..], record(i)[..]);
    }
    // The backend merges neighbouring chunks (64 KiB gaps by default), but never reads it all.
    assert!(
        d.requests >= 1 && d.bytes_received < size / 2,
        "batch: {d:?} of {size} bytes"
    );
    println!(
        "open 1 request; get 1 request of its chunk; get_many(64): {d:?} of a {size}-byte file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_nginx() {
    let (Some(url), Some(root)) = (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT")) else {
        return skip("GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT");
    };
    let dir = unique();
    let bytes = file();
    std::fs::create_dir_all(std::path::Path::new(&root).join(&dir)).unwrap();
    std::fs::write(
        std::path::Path::new(&root)
            .join(&dir)
            .join("a.array_record"),
        &bytes,
    )
    .unwrap();
    let io = HttpIo::new(&url).unwrap();
    let reader = io
        .open_reader(&HttpPath::new(&dir).unwrap().child("a.array_record"))
        .unwrap();
    let stats = Arc::clone(reader.stats());
    exercise(reader, stats, bytes.len() as u64).await;
    let _ = std::fs::remove_dir_all(std::path::Path::new(&root).join(&dir));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_moto_s3() {
    let (Some(endpoint), Some(bucket)) = (var("GUIDELOOM_S3_ENDPOINT"), var("GUIDELOOM_S3_BUCKET"))
    else {
        return skip("GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET");
    };
    // reqwest takes the process's rustls provider: ring, the one TLS stack.
    guideloom_io::tls::install_crypto_provider();
    // Not from_env: the machine may set AWS_CA_BUNDLE and other variables.
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .build()
            .unwrap(),
    );
    let path = StorePath::from(format!("{}/a.array_record", unique()));
    let bytes = file();
    store
        .put(&path, PutPayload::from(bytes.clone()))
        .await
        .unwrap();
    let reader = ObjectStoreIo::new(Arc::clone(&store)).open_reader(&path);
    let stats = Arc::clone(reader.stats());
    exercise(reader, stats, bytes.len() as u64).await;
    store.delete(&path).await.unwrap();
}
