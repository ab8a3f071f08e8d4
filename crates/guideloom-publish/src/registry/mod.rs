//! The scheme registry: root URIs to stores, and the options stores are built with.
//!
//! [`Registry::resolve`] turns a URI into the [`RootStore`] at its prefix, the way
//! object_store's `parse_url_opts` turns one into a store and a path: a store registered for
//! its scheme and bucket wins (so a store a user registered is used everywhere); otherwise a
//! store built from [`StoreOptions`] (`memory://` names are remembered per registry, so two
//! roots of `memory://x` share data); otherwise a typed [`Error::Unsupported`] naming the
//! missing feature. A [`Root`](crate::Root) is built from the store on the root side
//! (`Root::open`, `Root::new`); the registry knows nothing of roots.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use object_store::ObjectStore;

use crate::error::{Error, Result};
use crate::store::{LocalReads, LocalStore, ObjectStoreBucket, RootStore};
use crate::uri::RootUri;

mod cloud;
#[cfg(any(feature = "gcs", test))]
mod generation;
mod http;
pub(crate) mod s3;

pub use cloud::{AzureOptions, GcsOptions};
pub use http::HttpRootOptions;
pub use s3::{S3Addressing, S3Options, S3Retry};

/// How the stores of root URIs are built: the mount declaration and local reads of local
/// paths, and the clients of `s3://`, `gs://`, `az://` and `http(s)://` roots. What a root
/// does with its store (the shard size limit, whole-shard staging) is
/// [`RootOptions`](crate::RootOptions).
///
/// ```
/// use guideloom_publish::{LocalReads, Registry, StoreOptions};
///
/// let options = StoreOptions { mount: true, local_reads: LocalReads::Pread, ..StoreOptions::default() };
/// let store = Registry::new().resolve("/mnt/bucket/datasets/captures", &options)?;
/// assert!(!store.capabilities().compare_and_swap, "a declared mount cannot annotate");
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// The local path is a mounted bucket (e.g. Mountpoint for S3): exclusive create and
    /// sequential writes only, no annotation updates.
    pub mount: bool,
    /// How `s3://` roots are built when no store is registered for the bucket.
    pub s3: S3Options,
    /// How `gs://` roots are built (feature `gcs`) when no store is registered.
    pub gcs: GcsOptions,
    /// How `az://` roots are built (feature `azure`) when no store is registered.
    pub azure: AzureOptions,
    /// How `http(s)://` roots are reached (feature `http`): timeouts, attempts, deadline.
    pub http: HttpRootOptions,
    /// How local and mounted roots read shards (default: mmap on a local root, pread on a
    /// declared mount).
    pub local_reads: LocalReads,
    /// Local and mounted roots follow symbolic links beneath the root directory (default
    /// `false`: a link is refused with [`Error::RefusedFile`], so a root can never make a
    /// reader read, or a writer write, outside its directory). Opt in only for roots whose
    /// every link you control.
    pub follow_symlinks: bool,
}

/// Maps `(scheme, bucket)` to object stores.
#[derive(Debug, Default)]
pub struct Registry {
    buckets: Mutex<HashMap<(String, String), Arc<ObjectStoreBucket>>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// The process-wide default registry, used by [`Root::open`](crate::Root::open).
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::new)
    }

    /// Registers `store` for every root under `<scheme>://<bucket>/` (`scheme`: `"s3"`,
    /// `"gs"`, `"az"` or `"memory"`), replacing an earlier entry. `endpoint` describes it in
    /// errors and logs. Returns the bucket handle (which carries the probe result).
    pub fn register(
        &self,
        scheme: &str,
        bucket: &str,
        store: Arc<dyn ObjectStore>,
        endpoint: impl Into<String>,
    ) -> Arc<ObjectStoreBucket> {
        let handle = ObjectStoreBucket::new(store, endpoint);
        self.register_bucket(scheme, bucket, Arc::clone(&handle));
        handle
    }

    /// Registers an existing bucket handle.
    pub fn register_bucket(&self, scheme: &str, bucket: &str, handle: Arc<ObjectStoreBucket>) {
        self.lock()
            .insert((scheme.to_ascii_lowercase(), bucket.to_owned()), handle);
    }

    /// The handle registered for `(scheme, bucket)`.
    pub fn lookup(&self, scheme: &str, bucket: &str) -> Option<Arc<ObjectStoreBucket>> {
        self.lock()
            .get(&(scheme.to_ascii_lowercase(), bucket.to_owned()))
            .cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<ObjectStoreBucket>>> {
        self.buckets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The store of `uri`, at its prefix, the way object_store's `parse_url_opts` gives a
    /// store and a path: a store registered for the URI's scheme and bucket wins; otherwise
    /// one is built from `options` (and registered, so later roots of the bucket share it;
    /// `memory://` names are remembered per registry); otherwise a typed
    /// [`Error::Unsupported`] naming the missing feature. `uri` is a local path, `file://`,
    /// `memory://`, `s3://`, `gs://`, `az://` or `http(s)://` URI ([`RootUri`]); an invalid
    /// one is [`Error::InvalidUri`].
    pub fn resolve(&self, uri: &str, options: &StoreOptions) -> Result<Arc<dyn RootStore>> {
        let parsed = RootUri::parse(uri)?;
        if options.mount && !matches!(parsed, RootUri::Local(_)) {
            return Err(Error::invalid(format!(
                "the mount flag declares a local directory that is a mounted bucket; {uri} is not a local path"
            )));
        }
        match parsed {
            RootUri::Local(path) => Ok(if options.mount {
                Arc::new(
                    LocalStore::mounted(path)
                        .with_reads(options.local_reads)
                        .with_follow_symlinks(options.follow_symlinks),
                )
            } else {
                Arc::new(
                    LocalStore::new(path)
                        .with_reads(options.local_reads)
                        .with_follow_symlinks(options.follow_symlinks),
                )
            }),
            RootUri::Memory { name, prefix } => {
                let handle = {
                    let mut map = self.lock();
                    Arc::clone(
                        map.entry(("memory".to_owned(), name.clone()))
                            .or_insert_with(|| {
                                ObjectStoreBucket::new(
                                    Arc::new(object_store::memory::InMemory::new()),
                                    format!("memory://{name}"),
                                )
                            }),
                    )
                };
                Ok(Arc::new(handle.root(&prefix)?))
            }
            RootUri::Bucket {
                scheme,
                bucket,
                prefix,
            } => {
                if let Some(handle) = self.lookup(&scheme, &bucket) {
                    return Ok(Arc::new(handle.root(&prefix)?));
                }
                let handle = self.build_bucket(&scheme, &bucket, options)?;
                self.register_bucket(&scheme, &bucket, Arc::clone(&handle));
                Ok(Arc::new(handle.root(&prefix)?))
            }
            RootUri::Http(url) => http::http_store(&url, &options.http),
        }
    }

    fn build_bucket(
        &self,
        scheme: &str,
        bucket: &str,
        options: &StoreOptions,
    ) -> Result<Arc<ObjectStoreBucket>> {
        match scheme {
            "s3" => s3::build_s3(bucket, &options.s3),
            #[cfg(feature = "gcs")]
            "gs" => cloud::build_gcs(bucket, &options.gcs),
            #[cfg(not(feature = "gcs"))]
            "gs" => Err(Error::Unsupported {
                what: format!(
                    "gs://{bucket}: guideloom-publish was built without feature `gcs`; enable \
                     it, or register a Google Cloud Storage store for this bucket with \
                     Registry::register"
                ),
            }),
            #[cfg(feature = "azure")]
            _ => cloud::build_azure(bucket, &options.azure),
            #[cfg(not(feature = "azure"))]
            _ => Err(Error::Unsupported {
                what: format!(
                    "{scheme}://{bucket}: guideloom-publish was built without feature `azure`; \
                     enable it, or register an Azure store for this container with \
                     Registry::register"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_roots_of_one_name_share_a_store() {
        let reg = Registry::new();
        let opts = StoreOptions::default();
        reg.resolve("memory://a", &opts).unwrap();
        let h1 = reg.lookup("memory", "a").unwrap();
        reg.resolve("memory://a/p", &opts).unwrap();
        let h2 = reg.lookup("memory", "a").unwrap();
        assert!(Arc::ptr_eq(&h1, &h2));
    }

    #[cfg(not(all(feature = "s3", feature = "gcs", feature = "azure")))]
    #[test]
    fn unsupported_schemes_say_which_feature() {
        let reg = Registry::new();
        let opts = StoreOptions::default();
        #[cfg(not(feature = "gcs"))]
        {
            let err = reg.resolve("gs://b/p", &opts).unwrap_err();
            assert!(
                matches!(&err, Error::Unsupported { what } if what.contains("`gcs`")),
                "{err}"
            );
        }
        #[cfg(not(feature = "azure"))]
        {
            let err = reg.resolve("az://b/p", &opts).unwrap_err();
            assert!(
                matches!(&err, Error::Unsupported { what } if what.contains("`azure`")),
                "{err}"
            );
        }
        #[cfg(not(feature = "s3"))]
        assert!(matches!(
            reg.resolve("s3://b/p", &opts),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn registered_store_wins_for_any_scheme() {
        let reg = Registry::new();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let handle = reg.register("gs", "b", mem, "test store");
        let store = reg.resolve("gs://b/x", &StoreOptions::default()).unwrap();
        assert!(store.describe().contains("test store"));
        assert!(Arc::ptr_eq(&handle, &reg.lookup("gs", "b").unwrap()));
    }

    #[test]
    fn http_roots_resolve_with_the_feature_and_name_it_without() {
        let resolved =
            Registry::new().resolve("http://u:pw@127.0.0.1:9/ds?t=s", &Default::default());
        #[cfg(feature = "http")]
        {
            let store = resolved.unwrap();
            assert!(!store.capabilities().list);
            assert_eq!(store.describe(), "http://127.0.0.1:9/ds/?<redacted>");
        }
        #[cfg(not(feature = "http"))]
        {
            let err = resolved.unwrap_err();
            assert!(
                matches!(&err, Error::Unsupported { what } if what.contains("feature `http`")
                    && !what.contains("pw") && !what.contains("t=s")),
                "{err}"
            );
        }
    }

    #[cfg(feature = "s3")]
    #[test]
    fn s3_options_configure_without_network() {
        let reg = Registry::new();
        let mut opts = StoreOptions::default();
        opts.s3.endpoint = Some("http://u:p@127.0.0.1:1".into());
        opts.s3.allow_http = true;
        opts.s3.region = Some("eu-west-1".into());
        opts.s3.addressing = S3Addressing::VirtualHosted;
        let store = reg.resolve("s3://bkt/pre/fix", &opts).unwrap();
        let d = store.describe();
        assert!(d.contains("s3://bkt at http://127.0.0.1:1"), "{d}");
        assert!(d.contains("pre/fix") && !d.contains("u:p"), "{d}");
        // Registered once: a second resolve reuses the same bucket handle.
        let h = reg.lookup("s3", "bkt").unwrap();
        reg.resolve("s3://bkt/other", &opts).unwrap();
        assert!(Arc::ptr_eq(&h, &reg.lookup("s3", "bkt").unwrap()));
        // Without the credentials bridge a profile is refused, never ignored.
        #[cfg(not(feature = "aws-profile"))]
        {
            opts.s3.profile = Some("dev".into());
            let err = Registry::new().resolve("s3://bkt", &opts).unwrap_err();
            assert!(
                matches!(&err, Error::Unsupported { what }
                    if what.contains("profile") && what.contains("aws-profile")),
                "{err}"
            );
        }
    }

    #[test]
    fn mount_flag_needs_a_local_path() {
        let reg = Registry::new();
        let opts = StoreOptions {
            mount: true,
            ..StoreOptions::default()
        };
        assert!(matches!(
            reg.resolve("memory://x", &opts),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(
            !reg.resolve("/tmp/x", &opts)
                .unwrap()
                .capabilities()
                .compare_and_swap
        );
    }
}
