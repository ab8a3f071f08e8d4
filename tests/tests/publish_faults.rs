//! Fault injection: ambiguous outcomes of create-only and conditional puts, and the
//! conditional-write probe against stores that ignore conditions (wrappers over
//! `InMemory`, and a fake S3 HTTP server on loopback).

mod publish_common;

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use guideloom_publish::manifest::LOG_PREFIX;
use guideloom_publish::{
    Error, EtagStyle, ObjectStoreBucket, PublicationOptions, PublishMode, Registry, Root,
    RootStore, StorageOptions, Written, cas_update, create_object,
};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, UpdateVersion,
};
use publish_common::*;

fn timeout_error() -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: "operation timed out (outcome unknown)".into(),
    }
}

/// What the next matching put does.
#[derive(Debug, Clone)]
enum Fault {
    /// The write lands; the caller sees a timeout.
    LandThenTimeout,
    /// The write lands; a client retry then reports "already exists".
    LandThenAlreadyExists,
    /// Another writer's bytes land first; the caller sees a timeout.
    OtherLandsThenTimeout(Bytes),
    /// Nothing lands; the caller sees a timeout.
    TimeoutWithoutLanding,
}

/// How a [`TestStore`] treats puts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    /// Faithful, except for injected faults.
    #[default]
    Faulty,
    /// Silently ignores conditions: every put overwrites (TEST-SERVERS.md §3's stub).
    Ignoring,
    /// Rejects a quoted etag in If-Match, like Ceph RGW 16.
    CephLike,
    /// No conditional updates at all, like object_store's LocalFileSystem.
    NoUpdates,
}

/// `InMemory` with a put behaviour and faults injected into puts whose path contains a marker.
#[derive(Debug, Default)]
struct TestStore {
    inner: InMemory,
    kind: Kind,
    faults: Mutex<Vec<(String, Fault)>>,
}

impl TestStore {
    fn new(kind: Kind) -> Self {
        TestStore {
            kind,
            ..TestStore::default()
        }
    }

    fn inject(&self, marker: &str, fault: Fault) {
        self.faults.lock().unwrap().push((marker.to_owned(), fault));
    }

    fn take(&self, location: &Path) -> Option<Fault> {
        let mut faults = self.faults.lock().unwrap();
        let i = faults
            .iter()
            .position(|(m, _)| location.as_ref().contains(m.as_str()))?;
        Some(faults.remove(i).1)
    }

    async fn put_quirky(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match (self.kind, &opts.mode) {
            (Kind::Ignoring, _) => {
                self.inner
                    .put_opts(location, payload, PutMode::Overwrite.into())
                    .await
            }
            (Kind::NoUpdates, PutMode::Update(_)) => Err(object_store::Error::NotImplemented {
                operation: "PutMode::Update".into(),
                implementer: "TestStore".into(),
            }),
            (
                Kind::CephLike,
                PutMode::Update(UpdateVersion {
                    e_tag: Some(etag),
                    version,
                }),
            ) => {
                if etag.starts_with('"') {
                    return Err(object_store::Error::Precondition {
                        path: location.to_string(),
                        source: "ETag mismatch (quoted etag rejected, like Ceph RGW 16)".into(),
                    });
                }
                let quoted = PutOptions::from(PutMode::Update(UpdateVersion {
                    e_tag: Some(format!("\"{etag}\"")),
                    version: version.clone(),
                }));
                self.inner.put_opts(location, payload, quoted).await
            }
            _ => self.inner.put_opts(location, payload, opts).await,
        }
    }
}

impl fmt::Display for TestStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TestStore({:?})", self.kind)
    }
}

#[async_trait]
impl ObjectStore for TestStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        match self.take(location) {
            None => self.put_quirky(location, payload, opts).await,
            Some(Fault::LandThenTimeout) => {
                self.put_quirky(location, payload, opts).await?;
                Err(timeout_error())
            }
            Some(Fault::LandThenAlreadyExists) => {
                self.put_quirky(location, payload.clone(), opts.clone())
                    .await?;
                // The client's retry of the same request finds our own first attempt.
                self.put_quirky(location, payload, opts).await
            }
            Some(Fault::OtherLandsThenTimeout(other)) => {
                self.inner
                    .put_opts(location, PutPayload::from(other), PutMode::Overwrite.into())
                    .await?;
                Err(timeout_error())
            }
            Some(Fault::TimeoutWithoutLanding) => Err(timeout_error()),
        }
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn root_on(store: Arc<dyn ObjectStore>, name: &str) -> (Root, Arc<ObjectStoreBucket>) {
    let bucket = ObjectStoreBucket::new(store, name);
    let root = Root::new(
        Arc::new(bucket.root("ds").unwrap()),
        StorageOptions::default(),
    );
    (root, bucket)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn ambiguous_create_that_landed_is_our_success() {
    rt().block_on(async {
        let faulty = Arc::new(TestStore::new(Kind::Faulty));
        let (root, _) = root_on(Arc::clone(&faulty) as Arc<dyn ObjectStore>, "faulty");
        let store = root.store();

        faulty.inject("a.bin", Fault::LandThenTimeout);
        let w = create_object(&**store, "a.bin", Bytes::from_static(b"ours"))
            .await
            .unwrap();
        assert_eq!(w, Written::AlreadyIdentical);

        faulty.inject("b.bin", Fault::LandThenAlreadyExists);
        let w = create_object(&**store, "b.bin", Bytes::from_static(b"ours"))
            .await
            .unwrap();
        assert_eq!(w, Written::AlreadyIdentical);

        // The commit point itself: the log entry times out after landing; publish succeeds
        // and exactly one entry exists.
        let s = shard(&root, "w", 2).await;
        faulty.inject(LOG_PREFIX, Fault::LandThenTimeout);
        let snap = publish(&root, "s1", vec![s]).await;
        assert_eq!(snap.seq(), 1);
        assert_eq!(store.list(LOG_PREFIX).await.unwrap().len(), 1);
        assert_eq!(root.latest().await.unwrap(), snap);
    });
}

#[test]
fn ambiguous_create_with_other_bytes_is_a_collision() {
    rt().block_on(async {
        let faulty = Arc::new(TestStore::new(Kind::Faulty));
        let (root, _) = root_on(Arc::clone(&faulty) as Arc<dyn ObjectStore>, "faulty");
        let store = root.store();
        faulty.inject(
            "c.bin",
            Fault::OtherLandsThenTimeout(Bytes::from_static(b"theirs")),
        );
        let err = create_object(&**store, "c.bin", Bytes::from_static(b"ours"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::PublicationCollision { key } if key == "c.bin"),
            "{err}"
        );
        assert_eq!(store.get("c.bin").await.unwrap().body.as_ref(), b"theirs");

        // Nothing landed: the original (ambiguous) error is returned, not a guess.
        faulty.inject("d.bin", Fault::TimeoutWithoutLanding);
        let err = create_object(&**store, "d.bin", Bytes::from_static(b"ours"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Storage { key, .. } if key == "d.bin"),
            "{err}"
        );

        // A claim stolen by another publisher during an ambiguous put: collision on the claim.
        faulty.inject(
            "claims/",
            Fault::OtherLandsThenTimeout(Bytes::from_static(b"{}")),
        );
        let err = root
            .publish(
                &request("s2", vec![], PublishMode::Full),
                &PublicationOptions::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::PublicationCollision { key } if key == "claims/s2.json"),
            "{err}"
        );
    });
}

#[test]
fn ambiguous_catalog_update_is_resolved_by_re_reading() {
    rt().block_on(async {
        let faulty = Arc::new(TestStore::new(Kind::Faulty));
        let (root, _) = root_on(Arc::clone(&faulty) as Arc<dyn ObjectStore>, "faulty");
        let s = shard(&root, "w", 2).await;
        let snap = publish(&root, "s1", vec![s]).await;
        faulty.inject("catalog.json", Fault::LandThenTimeout);
        root.publish_annotations("a", "v1", &snap, &[1, 2], &fast_retry())
            .await
            .unwrap();
        faulty.inject("catalog.json", Fault::LandThenTimeout);
        root.publish_annotations("b", "v1", &snap, &[3, 4], &fast_retry())
            .await
            .unwrap();
        let catalog = root.catalog().await.unwrap();
        let names: Vec<&str> = catalog.entries.iter().map(|e| e.set.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    });
}

#[test]
fn probe_refuses_a_store_that_ignores_conditions() {
    rt().block_on(async {
        let (root, bucket) = root_on(Arc::new(TestStore::new(Kind::Ignoring)), "ignoring-store");
        let s = root
            .store()
            .put_create("x", Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        match &s {
            Error::ConditionalWritesUnsupported { endpoint, problem } => {
                assert_eq!(endpoint, "ignoring-store");
                assert!(problem.contains("second create-only PUT"), "{problem}");
            }
            other => panic!("{other}"),
        }
        // Cached: refused again without re-probing, and for CAS and publication too.
        let before = bucket.requests();
        let err = root.init("captures").await.unwrap_err();
        assert!(
            matches!(err, Error::ConditionalWritesUnsupported { .. }),
            "{err}"
        );
        let err = cas_update(&**root.store(), "k", &fast_retry(), |_| Ok(Some(vec![1])))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::ConditionalWritesUnsupported { .. }),
            "{err}"
        );
        assert_eq!(
            bucket.requests() - before,
            2,
            "only the two GETs, no new probe"
        );
        // The probe object was cleaned up; nothing else was written.
        assert!(
            futures::StreamExt::next(&mut bucket.store().list(None))
                .await
                .is_none()
        );
    });
}

#[test]
fn probe_learns_to_unquote_etags_for_ceph_like_stores() {
    rt().block_on(async {
        let (root, bucket) = root_on(Arc::new(TestStore::new(Kind::CephLike)), "ceph-like");
        assert_eq!(bucket.probe("ds").await.unwrap(), EtagStyle::Unquoted);
        for _ in 0..5 {
            cas_update(&**root.store(), "counter", &fast_retry(), |cur| {
                let n = cur.map_or(0, |b| b.len());
                Ok(Some(vec![b'x'; n + 1]))
            })
            .await
            .unwrap();
        }
        assert_eq!(root.store().get("counter").await.unwrap().body.len(), 5);

        let (_, plain) = root_on(Arc::new(InMemory::new()), "memory");
        assert_eq!(plain.probe("").await.unwrap(), EtagStyle::AsReturned);

        let (_, nocas) = root_on(Arc::new(TestStore::new(Kind::NoUpdates)), "no-updates");
        let err = nocas.probe("").await.unwrap_err();
        assert!(
            matches!(&err, Error::ConditionalWritesUnsupported { problem, .. } if problem.contains("not implemented")),
            "{err}"
        );
    });
}

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
    let root = registry
        .resolve("s3://bucket/ds", &StorageOptions::default())
        .unwrap();
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
                .get("dataset.json")
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
        let new_root = || {
            Root::new(
                Arc::new(bucket.root("ds").unwrap()),
                StorageOptions::default(),
            )
        };
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
        // First publication: GET + PUT dataset.json, 4 HEAD, claim, LIST log/, log entry, pointer.
        assert_eq!(cost(&bucket), 4 + 6);
        let extra = shard(&root, "w9", 1).await;
        cost(&bucket);
        root.publish(
            &request("s2", vec![extra], PublishMode::Append),
            &PublicationOptions::default(),
        )
        .await
        .unwrap();
        // Append, identity cached: 1 HEAD, claim, LIST, GET parent entry, log entry, pointer.
        assert_eq!(cost(&bucket), 1 + 5);

        let reader = new_root();
        let latest = reader.latest().await.unwrap();
        // Open latest: LIST log/ + GET dataset.json + GET log entry.
        assert_eq!(cost(&bucket), 3);
        new_root().snapshot("s1").await.unwrap();
        // Open by id: GET pointer + GET dataset.json + GET log entry.
        assert_eq!(cost(&bucket), 3);
        let values: Vec<u32> = (0..9).collect();
        reader
            .publish_annotations("labels", "v1", &latest, &values, &fast_retry())
            .await
            .unwrap();
        // Annotate, uncontended: PUT values + GET catalog + PUT catalog.
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
        let root = Root::new(
            Arc::new(bucket.root("").unwrap()),
            StorageOptions::default(),
        );
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
