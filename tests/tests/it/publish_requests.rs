//! Requests as an object store sees them: the conditional-write probe against a fake S3 HTTP
//! server on loopback that ignores conditions, the request counts stated in
//! docs/publication.md, and size-first collision checks of large shards.

use crate::publish_common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use guideloom_publish::{
    Error, ObjectStoreBucket, PublicationOptions, PublishMode, Registry, Root, RootOptions,
    StoreOptions,
};
use object_store::memory::InMemory;
use publish_common::*;

// ---- a fake S3 server that ignores If-None-Match / If-Match --------------------------------

/// A tiny S3 lookalike on 127.0.0.1: PUT stores (ignoring every condition), GET/HEAD return,
/// DELETE and `POST ?delete` remove. Stopped when dropped.
struct FakeS3 {
    port: u16,
    objects: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeS3 {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let objects: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let stop2 = Arc::clone(&stop);
        let served = Arc::clone(&objects);
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let objects = Arc::clone(&served);
                        std::thread::spawn(move || serve(conn, &objects));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeS3 {
            port,
            objects,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeS3 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn serve(conn: TcpStream, objects: &Mutex<HashMap<String, Vec<u8>>>) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let mut map = objects.lock().unwrap();
        let etag = |b: &[u8]| {
            format!(
                "\"{:x}-{}\"",
                b.iter().map(|x| u64::from(*x)).sum::<u64>(),
                b.len()
            )
        };
        let date = "Mon, 30 Nov 2026 00:00:00 GMT";
        let response = match method.as_str() {
            "PUT" => {
                let e = etag(&body);
                map.insert(path.to_owned(), body);
                format!("HTTP/1.1 200 OK\r\nETag: {e}\r\nContent-Length: 0\r\n\r\n").into_bytes()
            }
            "GET" | "HEAD" => match map.get(path) {
                Some(b) => {
                    let mut r = format!(
                        "HTTP/1.1 200 OK\r\nETag: {}\r\nLast-Modified: {date}\r\nContent-Length: {}\r\n\r\n",
                        etag(b),
                        b.len()
                    )
                    .into_bytes();
                    if method == "GET" {
                        r.extend_from_slice(b);
                    }
                    r
                }
                None => {
                    let msg = "<Error><Code>NoSuchKey</Code><Message>no</Message></Error>";
                    let mut r = format!(
                        "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\n\r\n",
                        msg.len()
                    )
                    .into_bytes();
                    if method == "GET" {
                        r.extend_from_slice(msg.as_bytes());
                    }
                    r
                }
            },
            "DELETE" => {
                map.remove(path);
                b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()
            }
            "POST" if query.starts_with("delete") => {
                let text = String::from_utf8_lossy(&body).into_owned();
                let bucket = path.trim_end_matches('/');
                let mut deleted = String::new();
                for chunk in text.split("<Key>").skip(1) {
                    let key = chunk.split("</Key>").next().unwrap_or("");
                    map.remove(&format!("{bucket}/{key}"));
                    deleted.push_str(&format!("<Deleted><Key>{key}</Key></Deleted>"));
                }
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{deleted}</DeleteResult>"
                );
                let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", xml.len())
                    .into_bytes();
                r.extend_from_slice(xml.as_bytes());
                r
            }
            _ => b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        drop(map);
        if out.write_all(&response).is_err() {
            return;
        }
    }
}

#[test]
fn probe_refuses_a_fake_s3_that_ignores_conditional_headers() {
    let server = FakeS3::start();
    let endpoint = format!("http://127.0.0.1:{}", server.port);
    guideloom_io::tls::install_crypto_provider();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_bucket_name("bucket")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_region("us-east-1")
        .with_allow_http(true)
        .with_retry(object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        })
        .build()
        .unwrap();
    let registry = Registry::new();
    registry.register(
        "s3",
        "bucket",
        Arc::new(store),
        format!("s3://bucket at {endpoint}"),
    );
    let root = Root::new(
        registry
            .resolve("s3://bucket/ds", &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    );
    rt().block_on(async {
        let err = root.init("captures").await.unwrap_err();
        match &err {
            Error::ConditionalWritesUnsupported {
                endpoint: e,
                problem,
            } => {
                assert!(e.contains(&endpoint), "{e}");
                assert!(problem.contains("second create-only PUT"), "{problem}");
            }
            other => panic!("expected a refusal, got {other}"),
        }
        // Reads still work against it (the refusal is about writes only), and nothing but the
        // deleted probe was ever written.
        assert!(
            root.store()
                .get("dataset.json", 1 << 16)
                .await
                .unwrap_err()
                .is_not_found()
        );
    });
    let left: Vec<String> = server.objects.lock().unwrap().keys().cloned().collect();
    assert!(left.is_empty(), "probe object not deleted: {left:?}");
    drop(server);
}

/// The request costs stated in docs/publication.md, counted on an object-store root.
#[test]
fn request_counts_are_as_documented() {
    rt().block_on(async {
        let bucket = ObjectStoreBucket::new(Arc::new(InMemory::new()), "counted");
        let new_root = || Root::new(Arc::new(bucket.root("ds").unwrap()), RootOptions::default());
        let root = new_root();
        let mut cost = {
            let mut last = 0;
            move |b: &ObjectStoreBucket| {
                let now = b.requests();
                let d = now - last;
                last = now;
                d
            }
        };
        let mut shards = Vec::new();
        for i in 0..4 {
            shards.push(shard(&root, &format!("w{i}"), 2).await);
            // The first write of the process also pays the one-time probe: 4 PUT + GET + DELETE.
            assert_eq!(cost(&bucket), if i == 0 { 7 } else { 1 }, "upload {i}");
        }
        publish(&root, "s1", shards).await;
        // First publication: GET + PUT dataset.json, 4 HEAD, claim, LIST log/, log entry, pointer,
        // and the two LISTs of gc/ (the handshake with a running garbage collection).
        assert_eq!(cost(&bucket), 4 + 6 + 2);
        let extra = shard(&root, "w9", 1).await;
        cost(&bucket);
        root.publish(
            &request("s2", vec![extra], PublishMode::Append),
            &PublicationOptions::default(),
        )
        .await
        .unwrap();
        // Append, identity cached: 1 HEAD, claim, LIST, GET parent entry, log entry, pointer,
        // 2 LISTs of gc/.
        assert_eq!(cost(&bucket), 1 + 5 + 2);

        let reader = new_root();
        let latest = reader.latest().await.unwrap();
        // Open latest: LIST log/ and GET dataset.json concurrently (two requests, one round
        // trip), then GET log entry, checked against the dataset id.
        assert_eq!(cost(&bucket), 3);
        new_root().snapshot("s1").await.unwrap();
        // Open by id: GET pointer and GET dataset.json concurrently, then GET log entry.
        assert_eq!(cost(&bucket), 3);
        let values: Vec<u32> = (0..9).collect();
        reader
            .publish_annotations("labels", "v1", &latest, &values, &fast_retry())
            .await
            .unwrap();
        // Annotate, uncontended, from a root that has only read (its identity read when it
        // opened the latest): PUT values + GET catalog + PUT catalog.
        assert_eq!(cost(&bucket), 3);
        reader
            .annotations("labels", None, &latest, false)
            .await
            .unwrap();
        // Read a set: GET catalog + GET values.
        assert_eq!(cost(&bucket), 2);
    });
}

/// Re-uploading a large shard: a size difference is a collision after one HEAD (no download);
/// identical bytes are confirmed by reading back.
#[test]
fn large_shard_collisions_are_decided_by_size_first() {
    rt().block_on(async {
        let bucket = ObjectStoreBucket::new(Arc::new(InMemory::new()), "big");
        let root = Root::new(Arc::new(bucket.root("").unwrap()), RootOptions::default());
        let body = Bytes::from(vec![5u8; 2 << 20]);
        root.upload_shard("w", 0, body.clone(), 1).await.unwrap();
        let before = bucket.requests();
        let mut longer = body.to_vec();
        longer.push(0);
        let err = root
            .upload_shard("w", 0, Bytes::from(longer), 1)
            .await
            .unwrap_err();
        assert!(err.is_collision(), "{err}");
        assert_eq!(bucket.requests() - before, 2, "PUT + HEAD, no GET");
        let before = bucket.requests();
        root.upload_shard("w", 0, body, 1).await.unwrap();
        assert_eq!(bucket.requests() - before, 3, "PUT + HEAD + GET");
    });
}
