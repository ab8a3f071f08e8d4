//! Etag compare-and-swap on a store whose conditional update matches object generations
//! (Google Cloud Storage).
//!
//! object_store's GCS client sends `PutMode::Update` as `x-goog-if-generation-match` and
//! refuses an update that carries only an etag (`MissingVersion`). Roots compare-and-swap on
//! etags, so [`EtagCasOnGenerations`] turns an etag-only update into a generation match: it
//! HEADs the object; a different etag (or no object) is a `Precondition` failure at once;
//! otherwise it updates on the generation that HEAD saw. Any write between the HEAD and the
//! PUT changes the generation, so the PUT then fails its precondition: the compare-and-swap
//! stays atomic, at the cost of one HEAD per update. Everything else passes through.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    UpdateVersion,
};

use crate::store::bare_etag;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct EtagCasOnGenerations {
    inner: Arc<dyn ObjectStore>,
}

impl EtagCasOnGenerations {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Self {
        EtagCasOnGenerations { inner }
    }
}

impl fmt::Display for EtagCasOnGenerations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtagCasOnGenerations({})", self.inner)
    }
}

fn same_etag(a: &str, b: &str) -> bool {
    // Weak or strong, quoted or not: the same version.
    let bare = |e: &str| bare_etag(e.strip_prefix("W/").unwrap_or(e)).to_owned();
    bare(a) == bare(b)
}

fn precondition(location: &Path, why: String) -> object_store::Error {
    object_store::Error::Precondition {
        path: location.to_string(),
        source: why.into(),
    }
}

#[async_trait]
impl ObjectStore for EtagCasOnGenerations {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if let PutMode::Update(UpdateVersion {
            e_tag: Some(expected),
            version: None,
        }) = &opts.mode
        {
            let meta = match self.inner.head(location).await {
                Ok(meta) => meta,
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(precondition(location, "the object no longer exists".into()));
                }
                Err(e) => return Err(e),
            };
            if !meta
                .e_tag
                .as_deref()
                .is_some_and(|e| same_etag(e, expected))
            {
                return Err(precondition(
                    location,
                    "the object changed since its etag was read".into(),
                ));
            }
            let Some(generation) = meta.version else {
                return Err(object_store::Error::Generic {
                    store: "GCS",
                    source: format!("HEAD of {location} returned no generation").into(),
                });
            };
            opts.mode = PutMode::Update(UpdateVersion {
                e_tag: Some(expected.clone()),
                version: Some(generation),
            });
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
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

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
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

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use crate::store::EtagStyle;
    use crate::store::ObjectStoreBucket;

    /// An in-memory store with GCS's update contract: `PutMode::Update` must carry the
    /// generation (`version`, here `gen-<etag>`), and an etag alone is refused.
    #[derive(Debug, Default)]
    struct GcsLike {
        inner: InMemory,
    }

    impl fmt::Display for GcsLike {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("GcsLike")
        }
    }

    fn generation(e_tag: &Option<String>) -> Option<String> {
        e_tag.as_ref().map(|e| format!("gen-{e}"))
    }

    #[async_trait]
    impl ObjectStore for GcsLike {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            mut opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            if let PutMode::Update(v) = &opts.mode {
                let Some(version) = &v.version else {
                    return Err(object_store::Error::Generic {
                        store: "GcsLike",
                        source: "MissingVersion: an update needs the generation".into(),
                    });
                };
                let e_tag = version.strip_prefix("gen-").map(str::to_owned);
                opts.mode = PutMode::Update(UpdateVersion {
                    e_tag,
                    version: None,
                });
            }
            let mut res = self.inner.put_opts(location, payload, opts).await?;
            res.version = generation(&res.e_tag);
            Ok(res)
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }

        async fn get_opts(
            &self,
            location: &Path,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            let mut res = self.inner.get_opts(location, options).await?;
            res.meta.version = generation(&res.meta.e_tag);
            Ok(res)
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<ListResult> {
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

    #[tokio::test]
    async fn the_probe_fails_on_generations_alone_and_passes_through_the_bridge() {
        let bare = ObjectStoreBucket::new(Arc::new(GcsLike::default()), "gs://bare");
        let err = bare.probe("p").await.unwrap_err();
        assert!(err.to_string().contains("MissingVersion"), "{err}");

        let bridged = EtagCasOnGenerations::new(Arc::new(GcsLike::default()));
        let bucket = ObjectStoreBucket::new(Arc::new(bridged), "gs://bridged");
        assert_eq!(bucket.probe("p").await.unwrap(), EtagStyle::AsReturned);
    }

    #[tokio::test]
    async fn updates_match_the_etag_then_the_generation() {
        let store = EtagCasOnGenerations::new(Arc::new(GcsLike::default()));
        let path = Path::from("catalog.json");
        let update = |e: &str| {
            PutOptions::from(PutMode::Update(UpdateVersion {
                e_tag: Some(e.to_owned()),
                version: None,
            }))
        };
        // No object: a precondition failure, not a creation.
        let err = store
            .put_opts(&path, PutPayload::from_static(b"x"), update("\"e\""))
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );
        assert!(matches!(
            store.head(&path).await,
            Err(object_store::Error::NotFound { .. })
        ));

        let first = store
            .put(&path, PutPayload::from_static(b"a"))
            .await
            .unwrap();
        let first = first.e_tag.unwrap();
        let second = store
            .put_opts(&path, PutPayload::from_static(b"b"), update(&first))
            .await
            .unwrap();
        // The first etag is stale now.
        let err = store
            .put_opts(&path, PutPayload::from_static(b"c"), update(&first))
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );
        let body = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&body[..], b"b");
        // An unquoted form of the current etag matches too (the probe may learn that style).
        let current = second.e_tag.unwrap();
        store
            .put_opts(
                &path,
                PutPayload::from_static(b"d"),
                update(current.trim_matches('"')),
            )
            .await
            .unwrap();
        assert!(same_etag("W/\"abc\"", "abc") && !same_etag("abc", "abd"));
    }
}
