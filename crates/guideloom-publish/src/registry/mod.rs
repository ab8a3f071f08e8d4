//! Storage options and the scheme registry that turns root URIs into stores.
//!
//! Resolution order for a URI: a store registered for its scheme and bucket (always wins, so
//! a store a user registered is used everywhere); otherwise a store built from
//! [`StorageOptions`] (`memory://` names are remembered per registry, so two roots of
//! `memory://x` share data); otherwise a typed [`Error::Unsupported`] naming the missing
//! feature. A root built from an explicit store ([`Root::new`]) never consults a registry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use object_store::ObjectStore;

use crate::error::{Error, Result};
use crate::publish::Root;
use crate::store::{LocalReads, LocalStore, ObjectStoreBucket, RootStore};
use crate::uri::RootUri;

mod cloud;
#[cfg(any(feature = "gcs", test))]
mod generation;
mod http;
mod s3;

pub use cloud::{AzureOptions, GcsOptions};
pub use http::HttpRootOptions;
pub use s3::{S3Addressing, S3Options, S3Retry};

/// Default [`StorageOptions::max_encoded_shard_bytes`]: S3's single-PUT cap, 5 GiB.
pub(crate) const DEFAULT_MAX_ENCODED_SHARD_BYTES: u64 = 5 << 30;

/// Options of a root's storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageOptions {
    /// Largest shard that may be uploaded or published (one PUT): default 5 GiB.
    pub max_encoded_shard_bytes: u64,
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
    /// Where and how much whole-shard staging (in-order scans) may store.
    pub staging: crate::staging::StagingOptions,
    /// How local and mounted roots read shards (default: mmap on a local root, pread on a
    /// declared mount).
    pub local_reads: LocalReads,
    /// Local and mounted roots follow symbolic links beneath the root directory (default
    /// `false`: a link is refused with [`Error::RefusedFile`], so a root can never make a
    /// reader read, or a writer write, outside its directory). Opt in only for roots whose
    /// every link you control.
    pub follow_symlinks: bool,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            max_encoded_shard_bytes: DEFAULT_MAX_ENCODED_SHARD_BYTES,
            mount: false,
            s3: S3Options::default(),
            gcs: GcsOptions::default(),
            azure: AzureOptions::default(),
            http: HttpRootOptions::default(),
            staging: crate::staging::StagingOptions::default(),
            local_reads: LocalReads::Auto,
            follow_symlinks: false,
        }
    }
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

    /// The process-wide default registry, used by [`Root::open`].
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

    /// The store for `uri`.
    pub fn resolve_store(&self, uri: &str, options: &StorageOptions) -> Result<Arc<dyn RootStore>> {
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

    /// A [`Root`] for `uri`.
    pub fn resolve(&self, uri: &str, options: &StorageOptions) -> Result<Root> {
        Ok(Root::new(
            self.resolve_store(uri, options)?,
            options.clone(),
        ))
    }

    fn build_bucket(
        &self,
        scheme: &str,
        bucket: &str,
        options: &StorageOptions,
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

/// `scheme://user:secret@host/...` → `scheme://host/...`: endpoints are logged and put in
/// errors, credentials never are.
pub(crate) fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_roots_of_one_name_share_a_store() {
        let reg = Registry::new();
        let opts = StorageOptions::default();
        reg.resolve_store("memory://a", &opts).unwrap();
        let h1 = reg.lookup("memory", "a").unwrap();
        reg.resolve_store("memory://a/p", &opts).unwrap();
        let h2 = reg.lookup("memory", "a").unwrap();
        assert!(Arc::ptr_eq(&h1, &h2));
    }

    #[cfg(not(all(feature = "s3", feature = "gcs", feature = "azure")))]
    #[test]
    fn unsupported_schemes_say_which_feature() {
        let reg = Registry::new();
        let opts = StorageOptions::default();
        #[cfg(not(feature = "gcs"))]
        {
            let err = reg.resolve_store("gs://b/p", &opts).unwrap_err();
            assert!(
                matches!(&err, Error::Unsupported { what } if what.contains("`gcs`")),
                "{err}"
            );
        }
        #[cfg(not(feature = "azure"))]
        {
            let err = reg.resolve_store("az://b/p", &opts).unwrap_err();
            assert!(
                matches!(&err, Error::Unsupported { what } if what.contains("`azure`")),
                "{err}"
            );
        }
        #[cfg(not(feature = "s3"))]
        assert!(matches!(
            reg.resolve_store("s3://b/p", &opts),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn registered_store_wins_for_any_scheme() {
        let reg = Registry::new();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let handle = reg.register("gs", "b", mem, "test store");
        let store = reg
            .resolve_store("gs://b/x", &StorageOptions::default())
            .unwrap();
        assert!(store.describe().contains("test store"));
        assert!(Arc::ptr_eq(&handle, &reg.lookup("gs", "b").unwrap()));
    }

    #[test]
    fn endpoints_lose_their_credentials() {
        assert_eq!(
            redact_userinfo("http://key:secret@127.0.0.1:9000/x"),
            "http://127.0.0.1:9000/x"
        );
        assert_eq!(redact_userinfo("https://s3.example"), "https://s3.example");
    }

    #[cfg(feature = "s3")]
    #[test]
    fn s3_options_configure_without_network() {
        let reg = Registry::new();
        let mut opts = StorageOptions::default();
        opts.s3.endpoint = Some("http://u:p@127.0.0.1:1".into());
        opts.s3.allow_http = true;
        opts.s3.region = Some("eu-west-1".into());
        opts.s3.addressing = S3Addressing::VirtualHosted;
        let store = reg.resolve_store("s3://bkt/pre/fix", &opts).unwrap();
        let d = store.describe();
        assert!(d.contains("s3://bkt at http://127.0.0.1:1"), "{d}");
        assert!(d.contains("pre/fix") && !d.contains("u:p"), "{d}");
        // Registered once: a second resolve reuses the same bucket handle.
        let h = reg.lookup("s3", "bkt").unwrap();
        reg.resolve_store("s3://bkt/other", &opts).unwrap();
        assert!(Arc::ptr_eq(&h, &reg.lookup("s3", "bkt").unwrap()));
        // Without the credentials bridge a profile is refused, never ignored.
        #[cfg(not(feature = "aws-profile"))]
        {
            opts.s3.profile = Some("dev".into());
            let err = Registry::new()
                .resolve_store("s3://bkt", &opts)
                .unwrap_err();
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
        let opts = StorageOptions {
            mount: true,
            ..StorageOptions::default()
        };
        assert!(matches!(
            reg.resolve_store("memory://x", &opts),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(
            !reg.resolve_store("/tmp/x", &opts)
                .unwrap()
                .capabilities()
                .compare_and_swap
        );
    }
}
