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
use std::time::Duration;

use guideloom_io::RetryPolicy;
use object_store::ObjectStore;

use crate::error::{Error, Result};
use crate::store::{LocalReads, LocalStore, ObjectStoreBucket, RootStore};
use crate::uri::RootUri;

mod cloud;
#[cfg(any(feature = "gcs", test))]
mod generation;
mod http;
mod remote;
pub(crate) mod s3;

pub use cloud::{
    AZURE_ALLOW_HTTP_VARIABLE, AzureOptions, GCS_ALLOW_HTTP_VARIABLE, GCS_SKIP_SIGNATURE_VARIABLE,
    GcsOptions,
};
pub(crate) use remote::is_true;
pub use remote::{
    DEFAULT_OBJECT_STORE_CONNECT_TIMEOUT, DEFAULT_OBJECT_STORE_RETRY, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_TIMEOUT,
};
pub use s3::{
    ALLOW_HTTP_VARIABLE, ENDPOINT_VARIABLES, REGION_VARIABLES, S3Addressing, S3Environment,
    S3Options,
};

/// How the stores of root URIs are built, the store concern's one options type: the mount
/// declaration and local reads of local paths; the endpoint of each remote backend (`s3://`,
/// `gs://`, `az://`, `http(s)://`); and, set once for all of them, the retry policy and the
/// timeouts of their clients (flat, as object_store's `ClientOptions` and `RetryConfig` are).
/// What a root does with its store (the shard size limit, whole-shard staging) is
/// [`RootOptions`](crate::RootOptions).
///
/// An unset retry or timeout is each client's default: object-store clients retry
/// [`DEFAULT_OBJECT_STORE_RETRY`] (5 attempts) and connect within
/// [`DEFAULT_OBJECT_STORE_CONNECT_TIMEOUT`] (5 s); `http(s)://` roots take guideloom-io's
/// `HttpOptions` defaults (4 attempts, 10 s); all of them allow
/// [`DEFAULT_REQUEST_TIMEOUT`] (30 s) per attempt and start no retry after
/// [`DEFAULT_RETRY_TIMEOUT`] (60 s).
///
/// ```
/// use std::time::Duration;
/// use guideloom_publish::{LocalReads, Registry, RetryPolicy, S3Options, StoreOptions};
///
/// let options = StoreOptions::default().with_mount(true).with_local_reads(LocalReads::Pread);
/// let store = Registry::new().resolve("/mnt/bucket/datasets/captures", &options)?;
/// assert!(!store.capabilities().compare_and_swap, "a declared mount cannot annotate");
///
/// // An S3-compatible server, 3 attempts of at most 5 s each, nothing retried after 12 s.
/// let remote = StoreOptions::default()
///     .with_s3(S3Options::default().with_endpoint("http://127.0.0.1:9000").with_allow_http(true))
///     .with_retry(RetryPolicy::new(3, Duration::from_millis(100), Duration::from_secs(1)))
///     .with_request_timeout(Duration::from_secs(5))
///     .with_retry_timeout(Duration::from_secs(12));
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// The local path is a mounted bucket (e.g. Mountpoint for S3): exclusive create and
    /// sequential writes only, no annotation updates.
    pub mount: bool,
    /// How local and mounted roots read shards (default: mmap on a local root, pread on a
    /// declared mount).
    pub local_reads: LocalReads,
    /// Local and mounted roots follow symbolic links beneath the root directory (default
    /// `false`: a link is refused with [`Error::RefusedFile`], so a root can never make a
    /// reader read, or a writer write, outside its directory). Opt in only for roots whose
    /// every link you control.
    pub follow_symlinks: bool,
    /// How `s3://` roots are reached (endpoint, region, addressing, profile) when no store is
    /// registered for the bucket.
    pub s3: S3Options,
    /// How `gs://` roots are reached (feature `gcs`) when no store is registered.
    pub gcs: GcsOptions,
    /// How `az://` roots are reached (feature `azure`) when no store is registered.
    pub azure: AzureOptions,
    /// `http(s)://` origins serve JSON directory listings (nginx `autoindex on;
    /// autoindex_format json;`, Caddy `file_server browse`): the latest snapshot is then
    /// found with one listing of `log/` and one `GET`, at any sequence number, instead of
    /// probing (`HttpRootStore::with_listing`). Default `false`.
    pub http_listing: bool,
    /// Attempts and backoff bounds of every request of a remote client (`None`: each
    /// client's default, see above). object_store draws its jittered waits itself, within
    /// these bounds ([`RetryPolicy::object_store_config`]).
    pub retry: Option<RetryPolicy>,
    /// No retry starts after this long since a request's first attempt (object_store's
    /// `retry_timeout`); for an `http(s)://` root, the deadline of one read, which also cuts
    /// off the attempt running then (`None`: [`DEFAULT_RETRY_TIMEOUT`]).
    pub retry_timeout: Option<Duration>,
    /// Time allowed for one attempt, from connecting to the end of the body (`None`:
    /// [`DEFAULT_REQUEST_TIMEOUT`]).
    pub request_timeout: Option<Duration>,
    /// Time allowed to connect (`None`: each client's default, see above).
    pub connect_timeout: Option<Duration>,
}

impl StoreOptions {
    /// Declares the local path a mounted bucket ([`StoreOptions::mount`]).
    #[must_use]
    pub fn with_mount(mut self, mount: bool) -> Self {
        self.mount = mount;
        self
    }

    /// Sets how local and mounted roots read shards ([`StoreOptions::local_reads`]).
    #[must_use]
    pub fn with_local_reads(mut self, reads: LocalReads) -> Self {
        self.local_reads = reads;
        self
    }

    /// Follows symbolic links beneath local roots ([`StoreOptions::follow_symlinks`]).
    #[must_use]
    pub fn with_follow_symlinks(mut self, follow: bool) -> Self {
        self.follow_symlinks = follow;
        self
    }

    /// Sets how `s3://` roots are reached.
    #[must_use]
    pub fn with_s3(mut self, s3: S3Options) -> Self {
        self.s3 = s3;
        self
    }

    /// Sets how `gs://` roots are reached.
    #[must_use]
    pub fn with_gcs(mut self, gcs: GcsOptions) -> Self {
        self.gcs = gcs;
        self
    }

    /// Sets how `az://` roots are reached.
    #[must_use]
    pub fn with_azure(mut self, azure: AzureOptions) -> Self {
        self.azure = azure;
        self
    }

    /// Finds the snapshots of `http(s)://` roots by JSON listings ([`StoreOptions::http_listing`]).
    #[must_use]
    pub fn with_http_listing(mut self, listing: bool) -> Self {
        self.http_listing = listing;
        self
    }

    /// Sets the retry policy of every remote client ([`StoreOptions::retry`]).
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets the deadline after which no retry starts ([`StoreOptions::retry_timeout`]).
    #[must_use]
    pub fn with_retry_timeout(mut self, timeout: Duration) -> Self {
        self.retry_timeout = Some(timeout);
        self
    }

    /// Sets the time allowed for one attempt ([`StoreOptions::request_timeout`]).
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Sets the time allowed to connect ([`StoreOptions::connect_timeout`]).
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }
}

/// How the stores of every bucket of one scheme are built, registered for the whole scheme
/// with [`Registry::register_backend`]: roots of that scheme are then built from these
/// [`StoreOptions`] (their backend's endpoint and the retries and timeouts) instead of the
/// options passed to [`Registry::resolve`] (a store registered for one bucket still wins).
///
/// ```
/// use guideloom_publish::{SchemeBackend, Registry, S3Options, StoreOptions};
///
/// let registry = Registry::new();
/// let options = StoreOptions::default()
///     .with_s3(S3Options::default().with_endpoint("http://127.0.0.1:9000"));
/// registry.register_backend(SchemeBackend::S3(options.clone()), false)?;
/// // A second registration for the scheme must say that it replaces the first.
/// assert!(registry.register_backend(SchemeBackend::S3(StoreOptions::default()), false).is_err());
/// assert_eq!(registry.backend("s3"), Some(SchemeBackend::S3(options)));
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemeBackend {
    /// `s3://` buckets, built from the options' [`s3`](StoreOptions::s3) field and retries.
    S3(StoreOptions),
    /// `gs://` buckets (feature `gcs`), from the options' [`gcs`](StoreOptions::gcs) field and
    /// retries.
    Gcs(StoreOptions),
    /// `az://` containers (feature `azure`), from the options'
    /// [`azure`](StoreOptions::azure) field and retries.
    Azure(StoreOptions),
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

    /// The store options the buckets of its scheme are built from.
    pub fn options(&self) -> &StoreOptions {
        match self {
            SchemeBackend::S3(o) | SchemeBackend::Gcs(o) | SchemeBackend::Azure(o) => o,
        }
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
                let from_backend = backend.as_ref().map(SchemeBackend::options);
                let handle =
                    self.build_bucket(&scheme, &bucket, from_backend.unwrap_or(options))?;
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
            RootUri::Http(url) => http::http_store(&url, options),
        }
    }

    fn build_bucket(
        &self,
        scheme: &str,
        bucket: &str,
        options: &StoreOptions,
    ) -> Result<Arc<ObjectStoreBucket>> {
        match scheme {
            "s3" => s3::build_s3(bucket, options),
            #[cfg(feature = "gcs")]
            "gs" => cloud::build_gcs(bucket, options),
            #[cfg(not(feature = "gcs"))]
            "gs" => Err(Error::Unsupported {
                what: format!(
                    "gs://{bucket}: guideloom-publish was built without feature `gcs`; enable \
                     it, or register a Google Cloud Storage store for this bucket with \
                     Registry::register"
                ),
            }),
            #[cfg(feature = "azure")]
            _ => cloud::build_azure(bucket, options),
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
        let s3 = |endpoint: &str| {
            StoreOptions::default().with_s3(
                S3Options::default()
                    .with_endpoint(endpoint)
                    .with_allow_http(true)
                    .with_region("us-east-1"),
            )
        };
        // The options passed to resolve lose to the scheme's backend.
        let passed = s3("http://127.0.0.1:1");
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
