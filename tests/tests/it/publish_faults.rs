//! Fault injection: ambiguous outcomes of create-only and conditional puts, and the
//! conditional-write probe against stores that ignore conditions (wrappers over `InMemory`).
//! The probe against a fake S3 HTTP server and the request counts are in `publish_requests.rs`.

use crate::publish_common;

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use guideloom_publish::fuzzing::LOG_PREFIX;
use guideloom_publish::{
    Error, EtagStyle, ObjectStoreBucket, PublicationOptions, PublishMode, Root, RootOptions,
    RootStore, Written, cas_update, create_object,
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
    let root = Root::new(Arc::new(bucket.root("ds").unwrap()), RootOptions::default());
    (root, bucket)
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
        assert_eq!(
            store.get("c.bin", 1 << 20).await.unwrap().body.as_ref(),
            b"theirs"
        );

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
        let err = cas_update(&**root.store(), "k", 1 << 20, &fast_retry(), |_| {
            Ok(Some(vec![1]))
        })
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
            cas_update(&**root.store(), "counter", 1 << 20, &fast_retry(), |cur| {
                let n = cur.map_or(0, |b| b.len());
                Ok(Some(vec![b'x'; n + 1]))
            })
            .await
            .unwrap();
        }
        assert_eq!(root.store().get("counter", 1 << 20).await.unwrap().body.len(), 5);

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
