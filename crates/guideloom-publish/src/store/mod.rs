//! Root stores: the small object-safe trait every root kind implements, and the two
//! protocols built on it — create-only writes with ambiguous-outcome resolution
//! ([`create_object`]) and bounded compare-and-swap ([`cas_update`]).

use std::fmt::Debug;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::{AsyncReader, RetryPolicy};
use tracing::{Instrument, debug, info_span, warn};

use crate::error::{Error, Result};

mod counting;
#[cfg(feature = "testing")]
pub mod faulty;
#[cfg(feature = "http")]
mod http;
#[cfg(any(feature = "http", feature = "fuzzing"))]
pub(crate) mod http_listing;
mod local;
mod object;
mod pending;
mod spool;
mod sweep;

pub use counting::{CountingStore, Counts};
#[cfg(feature = "http")]
pub use http::HttpRootStore;
pub use local::{LocalReads, LocalStore};
pub use object::{EtagStyle, ObjectStoreBucket, ObjectStoreRoot};
pub(crate) use pending::Digest256;
pub use pending::{Committed, Ours, PendingObject, create_streamed};
pub use spool::{SPOOL_MEMORY_BYTES, Spooled};
pub use sweep::Sweep;

/// An opaque entity tag identifying one version of an object, as the store reports it.
///
/// Object stores hand out their own etags (quoted, as HTTP sends them); local roots use the
/// SHA-256 of the content.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Etag(pub String);

impl Etag {
    /// The tag without HTTP's surrounding quotes (`"abc"` → `abc`): the form Ceph RGW 16
    /// accepts in `If-Match`.
    pub fn bare(&self) -> &str {
        bare_etag(&self.0)
    }
}

/// See [`Etag::bare`].
pub(crate) fn bare_etag(etag: &str) -> &str {
    etag.strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or(etag)
}

impl std::fmt::Display for Etag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An object's body with the etag of the version read.
#[derive(Debug, Clone)]
pub struct Object {
    /// The bytes.
    pub body: Bytes,
    /// The version read, when the store reports one.
    pub etag: Option<Etag>,
}

/// Metadata of one object (HEAD or listing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The key relative to the root.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// The version, when the store reports one cheaply.
    pub etag: Option<Etag>,
    /// When the object was last written, by the store's clock, when the store reports it
    /// (local files' mtime, object stores' `Last-Modified`). Garbage collection's grace
    /// period is measured on it.
    pub modified: Option<std::time::SystemTime>,
}

/// Result of a create-only put at the storage level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The object was created by this request.
    Created,
    /// The store reported that the object already exists (content unknown).
    AlreadyExists,
}

/// Result of a conditional update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasOutcome {
    /// The write happened; this is the new version.
    Written(Option<Etag>),
    /// The object changed (or appeared, or vanished) since the expected version was read.
    Conflict,
}

/// What a root kind can do, as named booleans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreCapabilities {
    /// Conditional updates ([`RootStore::put_cas`]) are available.
    pub compare_and_swap: bool,
    /// Create-only puts are enforced by the storage service itself, so writers on different
    /// hosts exclude each other. `false` for a declared mounted bucket, where the mount's
    /// own lookup does the check.
    pub create_only_across_hosts: bool,
    /// An object appears whole or not at all. `false` on a declared mounted bucket, where a
    /// create-only write is an exclusive create followed by sequential writes: a reader can
    /// see an object while it is written, and a killed writer leaves it partial (readers then
    /// skip an incomplete newest log entry, see [`Root::latest`](crate::Root::latest)).
    pub atomic_writes: bool,
    /// [`RootStore::list`] works. Without it (`http(s)://` roots), the latest snapshot is
    /// found by probing log entries with HEAD requests (see [`Root::latest`](crate::Root::latest)).
    pub list: bool,
    /// Reads are network requests (object stores other than `memory://`, HTTP origins), each
    /// a round trip: an in-order read of most of a shard is then cheaper as one whole-shard
    /// download into a local file than as many ranged runs (measured by the `publish` bench's
    /// `in_order_32MiB` group), so [`Dataset::read_in_order`](crate::Dataset::read_in_order)
    /// stages such shards. `false` for local directories, declared mounts and memory.
    pub remote_reads: bool,
}

/// The storage operations a dataset root needs: create-only put, conditional update, get,
/// ranged get, head and list. Keys are relative to the root and already validated
/// (relative, no `.`/`..`/empty/dot-prefixed segment, no scheme, backslash or control
/// character, at most 768 bytes).
///
/// Object-safe: roots are handled as `Arc<dyn RootStore>`. Implementations must not retry
/// create-only or conditional puts in a way that hides their outcome; the protocols in this
/// module resolve ambiguous outcomes themselves.
#[async_trait]
pub trait RootStore: Send + Sync + Debug + 'static {
    /// How the root is shown in errors and logs (a URI; never credentials).
    fn describe(&self) -> String;

    /// What this root can do.
    fn capabilities(&self) -> StoreCapabilities;

    /// `Ok` when [`put_cas`](RootStore::put_cas) is available, otherwise the typed error that
    /// says why (a declared mounted bucket: [`Error::MountedBucketCannotAnnotate`]). Callers
    /// check this before writing anything else.
    fn check_cas(&self) -> Result<()> {
        Ok(())
    }

    /// `Ok` when the root accepts writes, otherwise the typed error that says why (an
    /// `http(s)://` root: [`Error::ReadOnlyRoot`]). Publication checks this before any
    /// request; stores that omit it still refuse in [`put_create`](RootStore::put_create).
    fn check_writable(&self) -> Result<()> {
        Ok(())
    }

    /// Writes `body` under `key` only if no object exists there.
    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome>;

    /// Starts a create-only write of `key` whose bytes the caller streams in, committed by
    /// [`PendingObject::commit`] with [`put_create`](RootStore::put_create)'s outcome; resolve
    /// it with [`create_streamed`]. `spool_dir` is where a store that needs the whole body
    /// for one request may keep it meanwhile (a root passes
    /// [`StagingOptions::directory`](crate::StagingOptions::directory)).
    ///
    /// The default is [`Spooled`] (what a store that needs one PUT does): the first
    /// [`SPOOL_MEMORY_BYTES`] in memory, the rest in an unnamed file in `spool_dir`, sent by
    /// one `put_create` at commit from the file's mapping. A local root writes the bytes into
    /// its create-only temporary file as they come (fsync and link at commit) and ignores
    /// `spool_dir`. Either way memory stays a write buffer whatever the object's size.
    fn begin_create(&self, key: &str, spool_dir: &Path) -> Result<Box<dyn PendingObject + '_>> {
        Ok(Box::new(Spooled::new(self, key, spool_dir)))
    }

    /// [`begin_create`](RootStore::begin_create)'s write as an object that borrows nothing
    /// from the store (`'static`), when the store can make one: a root's shard writer then
    /// hands it, with the encoder, to a blocking thread, so the encoding and the writes
    /// (a local root's temporary file, a spool's file) run off the async executor while
    /// the records are pulled on the writing task. It must write and commit exactly as
    /// `begin_create`'s would.
    ///
    /// The default, `None`, keeps the writes on the writing task (`begin_create`'s object):
    /// a store that overrides `begin_create` overrides this too to gain the blocking thread.
    /// The built-in stores all answer `Some` (a shared [`Spooled`] for those that need one
    /// PUT, [`Spooled::shared`]).
    fn begin_create_owned(
        &self,
        key: &str,
        spool_dir: &Path,
    ) -> Result<Option<Box<dyn PendingObject>>> {
        let _ = (key, spool_dir);
        Ok(None)
    }

    /// Writes `body` under `key` only if the current version is `expected` (`None`: only if
    /// the object does not exist).
    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome>;

    /// Reads a whole object of at most `limit` bytes. A missing object is
    /// [`Error::NotFound`]; a larger one is [`Error::TooLarge`], refused **before** its body
    /// is read when the store knows the size (a local `fstat`, a response's announced
    /// length), and after at most `limit + 1` bytes otherwise. Callers pass the size the
    /// reference pointing at the object gives, or the documented cap of its kind
    /// (`docs/publication.md`): no object a root holds can make a reader allocate more.
    async fn get(&self, key: &str, limit: u64) -> Result<Object>;

    /// Reads `range` of an object; exactly `range.end - range.start` bytes or an error.
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes>;

    /// [`get_range`](RootStore::get_range), with the entity tag of the version the bytes
    /// came from when the store reports one in the same response (object stores, HTTP
    /// origins): whole-shard staging compares the tags of a download's ranges, so a shard
    /// replaced mid-download is an error rather than a staged mix of two objects. The
    /// default reports none; a store (or a wrapper) that can should override it.
    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        Ok((self.get_range(key, range).await?, None))
    }

    /// An object's metadata. A missing object is [`Error::NotFound`].
    async fn head(&self, key: &str) -> Result<ObjectInfo>;

    /// A byte-range reader of `key`, whose size the caller knows from a reference (a
    /// manifest). Opening costs no request; reads go through the IO layer's reader contract
    /// (exact lengths, typed errors).
    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>>;

    /// All objects whose key lies under the directory-like `prefix` (`"log"` lists
    /// `log/...`), recursively, in no particular order. Stores that cannot list report
    /// [`StoreCapabilities::list`] `false` and answer [`Error::Unsupported`].
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>>;

    /// Removes temporary files that crashed writers left, when the store has any: on a local
    /// root, `.…tmp` files at least `min_age` old whose writer process no longer runs (see
    /// [`Sweep`]). Object stores and declared mounts have none (an upload either lands whole
    /// or not at all; a mount writes final names directly): the default does nothing.
    async fn sweep_temporaries(&self, min_age: Duration) -> Result<Sweep> {
        let _ = min_age;
        Ok(Sweep::default())
    }

    /// Deletes `keys`; an object already absent counts as deleted (deletion is idempotent,
    /// so a garbage collection that stopped half way is finished by running it again).
    /// Only garbage collection calls this, on objects its protocol proved unreferenced
    /// (docs/publication.md, "Garbage collection"). Object stores send batch deletes (S3's
    /// `DeleteObjects`, up to 1 000 keys a request); a local root unlinks each file and
    /// fsyncs its directory. Returns how many keys were requested and deleted. The default
    /// refuses: a store that cannot delete cannot be collected.
    async fn delete_many(&self, keys: &[String]) -> Result<u64> {
        let _ = keys;
        Err(Error::Unsupported {
            what: format!("deleting objects from {}", self.describe()),
        })
    }
}

#[async_trait]
impl<T: RootStore + ?Sized> RootStore for Arc<T> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        (**self).capabilities()
    }
    fn check_cas(&self) -> Result<()> {
        (**self).check_cas()
    }
    fn check_writable(&self) -> Result<()> {
        (**self).check_writable()
    }
    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        (**self).put_create(key, body).await
    }
    fn begin_create(&self, key: &str, spool_dir: &Path) -> Result<Box<dyn PendingObject + '_>> {
        (**self).begin_create(key, spool_dir)
    }
    fn begin_create_owned(
        &self,
        key: &str,
        spool_dir: &Path,
    ) -> Result<Option<Box<dyn PendingObject>>> {
        (**self).begin_create_owned(key, spool_dir)
    }
    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        (**self).put_cas(key, body, expected).await
    }
    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        (**self).get(key, limit).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        (**self).get_range(key, range).await
    }
    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        (**self).get_range_tagged(key, range).await
    }
    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        (**self).head(key).await
    }
    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        (**self).open_reader(key, size).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        (**self).list(prefix).await
    }
    async fn sweep_temporaries(&self, min_age: Duration) -> Result<Sweep> {
        (**self).sweep_temporaries(min_age).await
    }
    async fn delete_many(&self, keys: &[String]) -> Result<u64> {
        (**self).delete_many(keys).await
    }
}

/// Above this size, [`create_object`] HEADs an existing object before reading it back.
pub(crate) const READ_BACK_HEAD_THRESHOLD: usize = 1 << 20;

/// How a create-only write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// This call created the object.
    Created,
    /// The object already held exactly these bytes: an earlier attempt of ours (a retried
    /// request, or an ambiguous error) had landed. Idempotent success.
    AlreadyIdentical,
}

/// Writes `body` under `key` create-only, resolving ambiguous outcomes.
///
/// When the store answers "already exists", or fails in a way that leaves the outcome
/// unknown (a timeout, a 5xx after which object_store retried and the retry found our own
/// first attempt), the object is read back and compared with `body` byte for byte:
/// identical bytes mean our write landed ([`Written::AlreadyIdentical`]); different bytes
/// are a genuine [`Error::PublicationCollision`] naming `key`. If the object is absent after
/// an error, the original error is returned. Above 1 MiB a HEAD compares sizes first
/// and the object is read back in 8 MiB ranges.
/// [`create_streamed`] is the same protocol for a body streamed into the store.
pub async fn create_object(store: &dyn RootStore, key: &str, body: Bytes) -> Result<Written> {
    let span = info_span!("create_object", root = %store.describe(), key, size = body.len());
    async {
        let first = store.put_create(key, body.clone()).await;
        let original = match first {
            Ok(CreateOutcome::Created) => return Ok(Written::Created),
            Ok(CreateOutcome::AlreadyExists) => None,
            Err(e) if e.is_ambiguous() => {
                warn!(error = %e, "create-only put failed ambiguously; reading back");
                Some(e)
            }
            Err(e) => return Err(e),
        };
        let size = body.len() as u64;
        pending::resolve_existing(store, key, size, Ours::Body(body), original).await
    }
    .instrument(span)
    .await
}

/// Read–modify–compare-and-swap–retry on `key`.
///
/// The current content is read bounded by `limit` ([`Error::TooLarge`] above it).
/// `change` gets the current content (`None` if absent) and returns the new content, or
/// `Ok(None)` when nothing needs writing (for example because the change is already
/// there — which also resolves an update whose success was reported as an error). On a
/// conflict the object is read again and `change` re-applied, up to
/// `policy.max_attempts` times with jittered backoff (typically
/// [`RetryPolicy::contended_update`]); then [`Error::CasExhausted`].
///
/// Returns the value `change` produced last (or the unchanged current content).
pub async fn cas_update<F>(
    store: &dyn RootStore,
    key: &str,
    limit: u64,
    policy: &RetryPolicy,
    mut change: F,
) -> Result<Bytes>
where
    F: FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>> + Send,
{
    store.check_cas()?;
    let span = info_span!("cas_update", root = %store.describe(), key);
    async {
        let attempts = policy.max_attempts.max(1);
        for attempt in 1..=attempts {
            let current = match store.get(key, limit).await {
                Ok(obj) => Some(obj),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e),
            };
            let current_body = current.as_ref().map(|o| o.body.as_ref());
            let Some(next) = change(current_body)? else {
                return Ok(current.map(|o| o.body).unwrap_or_default());
            };
            let next = Bytes::from(next);
            let expected = match &current {
                Some(obj) => Some(obj.etag.clone().ok_or_else(|| Error::Unsupported {
                    what: format!("{} returned no etag for {key}", store.describe()),
                })?),
                None => None,
            };
            match store.put_cas(key, next.clone(), expected.as_ref()).await {
                Ok(CasOutcome::Written(_)) => return Ok(next),
                Ok(CasOutcome::Conflict) => {
                    debug!(attempt, "compare-and-swap conflict; re-reading");
                }
                Err(e) if e.is_ambiguous() && attempt < attempts => {
                    // Unknown outcome: the next round re-reads, and `change` sees whether our
                    // write landed.
                    warn!(attempt, error = %e, "conditional put failed ambiguously; re-reading");
                }
                Err(e) => return Err(e),
            }
            if attempt < attempts {
                policy.sleep_backoff(attempt).await;
            }
        }
        Err(Error::CasExhausted {
            key: key.to_owned(),
            attempts,
        })
    }
    .instrument(span)
    .await
}
