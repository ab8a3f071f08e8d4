//! The scheme registry: root URIs to stores, and the options stores are built with.
//!
//! [`Registry::resolve`] turns a URI into the [`RootStore`] at its prefix, the way
//! object_store's `parse_url_opts` turns one into a store and a path: a store registered for
//! its scheme and bucket wins (so a store a user registered is used everywhere); otherwise a
//! store built from the [`SchemeBackend`] registered for the scheme, else from [`StoreOptions`]
//! (`memory://` names are remembered per registry, so two roots of `memory://x` share data);
//! otherwise a typed [`Error::Unsupported`] naming the missing feature. A [`Root`](crate::Root) is built from the store on the root side
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
pub use s3::{
    ALLOW_HTTP_VARIABLE, ENDPOINT_VARIABLES, REGION_VARIABLES, S3Addressing, S3Environment,
    S3Options, S3Retry,
};

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

/// How the stores of every bucket of one scheme are built, registered for the whole scheme
/// with [`Registry::register_backend`]: roots of that scheme then use these options instead
/// of their [`StoreOptions`] field (a store registered for one bucket still wins).
///
/// ```
/// use guideloom_publish::{SchemeBackend, Registry, S3Options};
///
/// let registry = Registry::new();
/// let options = S3Options { endpoint: Some("http://127.0.0.1:9000".into()), ..S3Options::default() };
/// registry.register_backend(SchemeBackend::S3(options.clone()), false)?;
/// // A second registration for the scheme must say that it replaces the first.
/// assert!(registry.register_backend(SchemeBackend::S3(S3Options::default()), false).is_err());
/// assert_eq!(registry.backend("s3"), Some(SchemeBackend::S3(options)));
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemeBackend {
    /// `s3://` buckets.
    S3(S3Options),
    /// `gs://` buckets (feature `gcs`).
    Gcs(GcsOptions),
    /// `az://` containers (feature `azure`).
    Azure(AzureOptions),
}

impl SchemeBackend {
    /// The URI scheme it serves: `"s3"`, `"gs"` or `"az"`.
    pub fn scheme(&self) -> &'static str {
        match self {
            SchemeBackend::S3(_) => "s3",
            SchemeBackend::Gcs(_) => "gs",
            SchemeBackend::Azure(_) => "az",
        }
    }

    /// `options` with this backend's client options in the field of its scheme.
    fn apply(&self, options: &StoreOptions) -> StoreOptions {
        let mut options = options.clone();
        match self {
            SchemeBackend::S3(s3) => options.s3 = s3.clone(),
            SchemeBackend::Gcs(gcs) => options.gcs = gcs.clone(),
            SchemeBackend::Azure(azure) => options.azure = azure.clone(),
        }
        options
    }
}

/// Maps `(scheme, bucket)` to object stores, and schemes to [`SchemeBackend`]s.
///
/// The stores a registry builds are reused by later roots of their bucket, in the process
/// that built them: in a child made by `fork` (a PyTorch `DataLoader` worker) the first use
/// builds fresh clients, since the parent's pooled connections are driven by a runtime whose
/// threads the child does not have. Stores registered with [`Registry::register`] belong to
/// the caller and are kept; register them again in the child if they hold connections.
#[derive(Debug, Default)]
pub struct Registry {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Stores registered for a bucket (and `memory://` names): never replaced by a backend.
    buckets: HashMap<(String, String), Arc<ObjectStoreBucket>>,
    /// Stores this registry built from options, reused by later roots of the bucket until
    /// the scheme's backend changes, in the process that built them (see [`State::pid`]).
    built: HashMap<(String, String), Arc<ObjectStoreBucket>>,
    /// The process the `built` stores belong to. A child made by `fork` inherits them, but
    /// their pooled connections are driven by the parent's runtime, whose threads the child
    /// does not have: a request on one would wait forever. The child builds its own.
    pid: u32,
    /// The backend of each scheme.
    backends: HashMap<String, SchemeBackend>,
}

impl State {
    /// Forgets the stores built by the parent of a forked child. They are leaked, not
    /// dropped: their sockets are registered in the parent's epoll instance, which the child
    /// shares, and dropping them would deregister the parent's connections.
    fn leave_parent_stores(&mut self) {
        let pid = std::process::id();
        if self.pid != pid {
            std::mem::forget(std::mem::take(&mut self.built));
            self.pid = pid;
        }
    }
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
            .buckets
            .insert((scheme.to_ascii_lowercase(), bucket.to_owned()), handle);
    }

    /// The handle registered for `(scheme, bucket)`, or the one this registry built for it.
    pub fn lookup(&self, scheme: &str, bucket: &str) -> Option<Arc<ObjectStoreBucket>> {
        let key = (scheme.to_ascii_lowercase(), bucket.to_owned());
        let state = self.lock();
        state
            .buckets
            .get(&key)
            .or_else(|| state.built.get(&key))
            .cloned()
    }

    /// Registers `backend` for every bucket of its scheme: stores built for that scheme from
    /// now on use its options, and the stores built earlier from other options are dropped
    /// from this registry (roots already holding one keep it). A scheme that already has a
    /// backend is refused with [`Error::InvalidArgument`] unless `replace`; returns the
    /// backend replaced.
    pub fn register_backend(
        &self,
        backend: SchemeBackend,
        replace: bool,
    ) -> Result<Option<SchemeBackend>> {
        let scheme = backend.scheme();
        let mut state = self.lock();
        if !replace && state.backends.contains_key(scheme) {
            return Err(Error::invalid(format!(
                "a backend for {scheme}:// is already registered; replace it explicitly"
            )));
        }
        state.built.retain(|(s, _), _| s != scheme);
        Ok(state.backends.insert(scheme.to_owned(), backend))
    }

    /// Removes the backend of `scheme` (and the stores built from it); returns it.
    pub fn unregister_backend(&self, scheme: &str) -> Option<SchemeBackend> {
        let scheme = scheme.to_ascii_lowercase();
        let mut state = self.lock();
        state.built.retain(|(s, _), _| *s != scheme);
        state.backends.remove(&scheme)
    }

    /// The backend registered for `scheme`.
    pub fn backend(&self, scheme: &str) -> Option<SchemeBackend> {
        self.lock()
            .backends
            .get(&scheme.to_ascii_lowercase())
            .cloned()
    }

    /// The state, with the stores of a parent process forgotten (see [`State::pid`]).
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.leave_parent_stores();
        state
    }

    /// The store of `uri`, at its prefix, the way object_store's `parse_url_opts` gives a
    /// store and a path: a store registered for the URI's scheme and bucket wins; otherwise
    /// one is built from the scheme's [`SchemeBackend`] if one is registered, else from `options`
    /// (and kept, so later roots of the bucket share it; `memory://` names are remembered
    /// per registry); otherwise a typed
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
                    let mut state = self.lock();
                    Arc::clone(
                        state
                            .buckets
                            .entry(("memory".to_owned(), name.clone()))
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
                let backend = self.backend(&scheme);
                let from_backend = backend.as_ref().map(|b| b.apply(options));
                let handle =
                    self.build_bucket(&scheme, &bucket, from_backend.as_ref().unwrap_or(options))?;
                let handle = {
                    let mut state = self.lock();
                    // Keep it unless the backend changed meanwhile (then the next root
                    // builds from the new one); a concurrent build of the same bucket wins.
                    if state.backends.get(&scheme) == backend.as_ref() {
                        Arc::clone(
                            state
                                .built
                                .entry((scheme.clone(), bucket.clone()))
                                .or_insert(handle),
                        )
                    } else {
                        handle
                    }
                };
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
    fn a_forked_child_does_not_reuse_the_stores_its_parent_built() {
        let reg = Registry::new();
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let built = ObjectStoreBucket::new(mem, "built by the parent");
        reg.lock()
            .built
            .insert(("s3".to_owned(), "b".to_owned()), Arc::clone(&built));
        let registered = reg.register(
            "gs",
            "b",
            Arc::new(object_store::memory::InMemory::new()),
            "registered",
        );
        assert!(Arc::ptr_eq(&built, &reg.lookup("s3", "b").unwrap()));
        // What the first use in a forked child sees: the state names another process.
        reg.state.lock().unwrap().pid = std::process::id().wrapping_add(1);
        assert!(
            reg.lookup("s3", "b").is_none(),
            "the parent's client is not reused"
        );
        // Forgotten, not dropped (dropping could deregister the parent's sockets).
        assert_eq!(Arc::strong_count(&built), 2);
        // A store the caller registered is the caller's: it stays.
        assert!(Arc::ptr_eq(&registered, &reg.lookup("gs", "b").unwrap()));
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

    #[cfg(feature = "s3")]
    #[test]
    fn a_scheme_backend_builds_the_stores_of_its_scheme_until_replaced() {
        let reg = Registry::new();
        let s3 = |endpoint: &str| S3Options {
            endpoint: Some(endpoint.into()),
            allow_http: true,
            region: Some("us-east-1".into()),
            ..S3Options::default()
        };
        // The options passed to resolve lose to the scheme's backend.
        let passed = StoreOptions {
            s3: s3("http://127.0.0.1:1"),
            ..StoreOptions::default()
        };
        assert_eq!(
            reg.register_backend(SchemeBackend::S3(s3("http://127.0.0.1:2")), false)
                .unwrap(),
            None
        );
        let d = reg.resolve("s3://bkt/a", &passed).unwrap().describe();
        assert!(d.contains("http://127.0.0.1:2"), "{d}");
        let first = reg.lookup("s3", "bkt").unwrap();
        reg.resolve("s3://bkt/b", &passed).unwrap();
        assert!(Arc::ptr_eq(&first, &reg.lookup("s3", "bkt").unwrap()));
        // A second backend for the scheme is refused unless it says it replaces the first.
        let refused = reg
            .register_backend(SchemeBackend::S3(s3("http://127.0.0.1:3")), false)
            .unwrap_err();
        assert!(
            matches!(&refused, Error::InvalidArgument { what } if what.contains("s3://")),
            "{refused}"
        );
        let d = reg.resolve("s3://bkt/a", &passed).unwrap().describe();
        assert!(
            d.contains("http://127.0.0.1:2"),
            "refused, so unchanged: {d}"
        );
        let replaced = reg
            .register_backend(SchemeBackend::S3(s3("http://127.0.0.1:3")), true)
            .unwrap();
        assert_eq!(replaced, Some(SchemeBackend::S3(s3("http://127.0.0.1:2"))));
        // The store built from the old backend is dropped: the next root uses the new one.
        let d = reg.resolve("s3://bkt/a", &passed).unwrap().describe();
        assert!(d.contains("http://127.0.0.1:3"), "{d}");
        // A store registered for the bucket still wins over the backend.
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        reg.register("s3", "mine", mem, "my store");
        reg.register_backend(SchemeBackend::S3(s3("http://127.0.0.1:4")), true)
            .unwrap();
        let d = reg.resolve("s3://mine/x", &passed).unwrap().describe();
        assert!(d.contains("my store"), "{d}");
        // Without a backend, the passed options apply again.
        assert!(reg.unregister_backend("S3").is_some());
        assert_eq!(reg.backend("s3"), None);
        let d = reg.resolve("s3://bkt/a", &passed).unwrap().describe();
        assert!(d.contains("http://127.0.0.1:1"), "{d}");
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
