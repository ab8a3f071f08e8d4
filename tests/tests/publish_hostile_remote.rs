//! Hostile remote roots: objects larger than their caps, stores that announce gigabytes, and
//! bodies that never end. Every read is bounded before it is made: an object store's response
//! is refused on its announced size before its body is read, a body that runs past what it
//! announced is cut at the limit, and an HTTP root learns the size from a suffix read no
//! larger than the limit. Peak memory stays within a few MiB of the caps.

#[path = "it/publish_common/mod.rs"]
mod publish_common;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use guideloom_publish::fuzzing::{DATASET_KEY, MAX_CATALOG_BYTES, MAX_IDENTITY_BYTES};
use guideloom_publish::{Error, ObjectStoreBucket, Registry, Root, RootOptions, StoreOptions};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use publish_common::*;

/// How a [`Lying`] store answers GETs of keys containing its marker.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// Announce this size (e.g. 3 GiB) and stream zeros up to it.
    Announce(u64),
    /// Announce the real size but stream zeros forever.
    Endless,
}

/// `InMemory`, except that GETs of keys containing `marker` lie; counts the body bytes it
/// handed out for those.
#[derive(Debug)]
struct Lying {
    inner: InMemory,
    marker: String,
    lie: Lie,
    sent: Arc<AtomicU64>,
}

impl fmt::Display for Lying {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lying({})", self.marker)
    }
}

const CHUNK: usize = 64 << 10;

#[async_trait]
impl ObjectStore for Lying {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let real = self.inner.get_opts(location, options).await?;
        if !location.as_ref().contains(&self.marker) {
            return Ok(real);
        }
        let sent = Arc::clone(&self.sent);
        let mut meta = real.meta.clone();
        let (size, endless) = match self.lie {
            Lie::Announce(size) => (size, false),
            Lie::Endless => (meta.size, true),
        };
        meta.size = size;
        let mut left = size;
        let body = stream::iter(std::iter::from_fn(move || {
            if !endless && left == 0 {
                return None;
            }
            let n = if endless {
                CHUNK
            } else {
                usize::try_from(left.min(CHUNK as u64)).unwrap()
            };
            left = left.saturating_sub(n as u64);
            sent.fetch_add(n as u64, Ordering::Relaxed);
            Some(Ok(Bytes::from(vec![b' '; n])))
        }))
        .boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(body),
            range: 0..size,
            meta,
            attributes: real.attributes,
            extensions: real.extensions,
        })
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

/// A published root on a [`Lying`] store, the lie aimed at keys containing `marker`.
async fn lying_root(marker: &str, lie: Lie) -> (Root, Arc<AtomicU64>) {
    let sent = Arc::new(AtomicU64::new(0));
    let store = Arc::new(Lying {
        inner: InMemory::new(),
        marker: marker.to_owned(),
        lie,
        sent: Arc::clone(&sent),
    });
    let bucket = ObjectStoreBucket::new(store, "lying");
    let root = Root::new(Arc::new(bucket.root("ds").unwrap()), RootOptions::default());
    let s = shard(&root, "w", 3).await;
    let snapshot = publish(&root, "s1", vec![s]).await;
    root.publish_annotations("labels", "v1", &snapshot, &[1, 2, 3], &fast_retry())
        .await
        .unwrap();
    sent.store(0, Ordering::Relaxed);
    (root, sent)
}

fn fresh(root: &Root) -> Root {
    // No identity cached.
    Root::new(Arc::clone(root.store()), RootOptions::default())
}

#[test]
fn an_announced_3_gib_control_object_is_refused_before_its_body_is_read() {
    rt().block_on(async {
        for marker in [DATASET_KEY, "snapshots/", "log/", "catalog.json", "values.jsonl"] {
            let (root, sent) = lying_root(marker, Lie::Announce(3 << 30)).await;
            let root = fresh(&root);
            let err = match marker {
                "catalog.json" => root.catalog().await.unwrap_err(),
                "values.jsonl" => {
                    let s = root.snapshot("s1").await.unwrap();
                    root.annotations("labels", None, &s, false).await.unwrap_err()
                }
                "snapshots/" => root.snapshot("s1").await.unwrap_err(),
                DATASET_KEY => root.identity().await.unwrap_err(),
                _ => root.latest().await.unwrap_err(),
            };
            let bounded = matches!(&err, Error::TooLarge { size: Some(s), .. } if *s == 3 << 30)
                || matches!(&err, Error::Verification { what: "size", actual, .. } if *actual == (3u64 << 30).to_string());
            assert!(bounded, "{marker}: {err:?}");
            assert_eq!(
                sent.load(Ordering::Relaxed),
                0,
                "{marker}: body bytes were read before the refusal"
            );
        }
    });
}

#[test]
fn a_body_that_never_ends_is_cut_at_the_limit() {
    rt().block_on(async {
        for (marker, limit) in [
            (DATASET_KEY, MAX_IDENTITY_BYTES),
            ("catalog.json", MAX_CATALOG_BYTES),
        ] {
            let (root, sent) = lying_root(marker, Lie::Endless).await;
            let root = fresh(&root);
            let err = match marker {
                "catalog.json" => root.catalog().await.unwrap_err(),
                _ => root.identity().await.unwrap_err(),
            };
            assert!(
                matches!(&err, Error::TooLarge { size: None, limit: l, .. } if *l == limit),
                "{marker}: {err:?}"
            );
            let read = sent.load(Ordering::Relaxed);
            assert!(
                read <= limit + CHUNK as u64,
                "{marker}: {read} bytes pulled for a {limit}-byte limit"
            );
        }
    });
}

fn nginx() -> Option<(String, std::path::PathBuf)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT")) {
        (Some(url), Some(root)) => Some((url, std::path::PathBuf::from(root))),
        _ => {
            assert!(
                std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
                "GUIDELOOM_CI=1 but GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT are not set"
            );
            println!("skipped: nginx not configured");
            None
        }
    }
}

struct Served(std::path::PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Peak resident memory of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn an_http_root_of_gigabyte_objects_costs_a_few_kib() {
    let Some((url, served)) = nginx() else {
        return;
    };
    rt().block_on(async {
        let sub = unique("hostile-http");
        let dir = served.join(&sub);
        let _served = Served(dir.clone());
        let local = Root::new(Registry::new()
            .resolve(dir.to_str().unwrap(), &StoreOptions::default())
            .unwrap(), RootOptions::default());
        let s = shard(&local, "w", 3).await;
        let snapshot = publish(&local, "s1", vec![s]).await;
        local
            .publish_annotations("labels", "v1", &snapshot, &[1, 2, 3], &fast_retry())
            .await
            .unwrap();
        let base = format!("{}/{sub}", url.trim_end_matches('/'));
        for key in [
            DATASET_KEY,
            "annotations/catalog.json",
            "annotations/labels/v1/values.jsonl",
        ] {
            let root = Root::new(Registry::new()
                .resolve(&base, &StoreOptions::default())
                .unwrap(), RootOptions::default());
            // Opened before the damage where the read under test needs a snapshot.
            let s1 = (key != DATASET_KEY).then_some(());
            let opened = match s1 {
                Some(()) => Some(root.snapshot("s1").await.unwrap()),
                None => None,
            };
            let path = dir.join(key);
            let saved = std::fs::read(&path).unwrap();
            std::fs::File::create(&path).unwrap().set_len(1 << 30).unwrap();
            let before = peak_rss();
            let err = match (key, &opened) {
                (DATASET_KEY, _) => root.identity().await.unwrap_err(),
                ("annotations/catalog.json", _) => root.catalog().await.unwrap_err(),
                (_, Some(s)) => root.annotations("labels", None, s, false).await.unwrap_err(),
                (_, None) => unreachable!(),
            };
            let grew = peak_rss().saturating_sub(before);
            let bounded = matches!(&err, Error::TooLarge { size: Some(s), .. } if *s == 1 << 30)
                || matches!(&err, Error::Verification { what: "size", actual, .. } if *actual == (1u64 << 30).to_string());
            assert!(bounded, "{key}: {err:?}");
            assert!(grew < 16 << 20, "{key}: peak RSS grew {grew} bytes");
            std::fs::write(&path, saved).unwrap();
        }
    });
}
