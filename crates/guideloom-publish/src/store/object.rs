//! Roots on an [`object_store::ObjectStore`] (memory, S3, and any store a user brings).
//!
//! Create-only writes are `PutMode::Create` (`If-None-Match: *` on S3) and compare-and-swap
//! is `PutMode::Update` (`If-Match: <etag>`). Before the first write through a bucket, a
//! one-time probe checks that the store really honours both (see [`ObjectStoreBucket::probe`]);
//! a store that does not is refused with [`Error::ConditionalWritesUnsupported`].

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use guideloom_io::objstore::ObjectStoreIo;
use guideloom_io::{AsyncReader, RetryPolicy};
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};
use tokio::sync::OnceCell;
use tracing::{Instrument, debug, info, info_span, warn};

use super::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, RootStore, StoreCapabilities};
use crate::error::{Error, Result};
use crate::key::nonce;

/// How a store wants etags in `If-Match`, as learned by the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtagStyle {
    /// Send the etag exactly as the store returned it (quoted, per HTTP).
    AsReturned,
    /// Send the etag without surrounding quotes (Ceph RGW 16 rejects the quoted form).
    Unquoted,
}

#[derive(Debug, Clone)]
enum Verdict {
    Safe(EtagStyle),
    Refused(String),
}

/// One object store (a bucket, or an in-memory store) shared by every root under it.
///
/// It carries the store, a description of the endpoint for errors and logs (never
/// credentials) and the result of the one-time conditional-write probe, so the probe runs
/// once per bucket however many roots use it. Requests made through it are counted
/// ([`ObjectStoreBucket::requests`]).
#[derive(Debug)]
pub struct ObjectStoreBucket {
    store: Arc<dyn ObjectStore>,
    endpoint: String,
    verdict: OnceCell<Verdict>,
    requests: AtomicU64,
    io: ObjectStoreIo,
}

impl ObjectStoreBucket {
    /// Wraps `store`; `endpoint` describes it in errors (e.g. `"s3://bucket at
    /// http://127.0.0.1:9000"`).
    ///
    /// When `endpoint` begins with the bucket's URL (`s3://bucket`, as the registry's do),
    /// that URL names the bucket's objects in read errors (`s3://bucket/prefix/key`); else
    /// the store's own `Display` does.
    pub fn new(store: Arc<dyn ObjectStore>, endpoint: impl Into<String>) -> Arc<Self> {
        let endpoint = endpoint.into();
        let mut io = ObjectStoreIo::new(Arc::clone(&store));
        if let Some(url) = endpoint
            .split_whitespace()
            .next()
            .filter(|u| u.contains("://"))
        {
            io = io.with_label(url.trim_end_matches('/'));
        }
        Arc::new(ObjectStoreBucket {
            io,
            store,
            endpoint,
            verdict: OnceCell::new(),
            requests: AtomicU64::new(0),
        })
    }

    /// A root at `prefix` inside this bucket (`""` for the bucket's top level).
    pub fn root(self: &Arc<Self>, prefix: &str) -> Result<ObjectStoreRoot> {
        let prefix = prefix.trim_matches('/').to_owned();
        if !prefix.is_empty() {
            crate::key::check_key(&prefix)?;
        }
        Ok(ObjectStoreRoot {
            bucket: Arc::clone(self),
            prefix,
        })
    }

    /// The wrapped store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The endpoint description.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The IO-layer backend that reads shards of this bucket by byte ranges; its
    /// [`stats`](ObjectStoreIo::stats) count the record reads (not counted in
    /// [`requests`](Self::requests)).
    pub fn io(&self) -> &ObjectStoreIo {
        &self.io
    }

    /// Requests sent through this bucket so far (probe included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The probe's verdict, running it on first use (`prefix`: where the probe object goes).
    ///
    /// Steps, on a fresh key `<prefix>/_probe/conditional-put-<pid>-<nonce>`:
    /// 1. create-only put → must succeed;
    /// 2. create-only put again → must be "already exists" (negative control for
    ///    `If-None-Match`);
    /// 3. update with the etag exactly as step 1 returned it → must succeed (positive
    ///    control for `If-Match`); if it fails with a precondition error but the same update
    ///    with the etag unquoted succeeds, the store gets [`EtagStyle::Unquoted`]. A
    ///    precondition error after which the object holds the update's bytes is the client's
    ///    retry of an update whose answer was lost (one GET tells), not a refusal;
    /// 4. update with that now-stale etag → must fail with a precondition error (negative
    ///    control);
    /// 5. read → must hold step 3's bytes;
    /// 6. delete the probe object (best effort).
    ///
    /// A failed control is cached and every later write is refused with
    /// [`Error::ConditionalWritesUnsupported`]. A transport error is returned and not cached.
    pub async fn probe(&self, prefix: &str) -> Result<EtagStyle> {
        let verdict = self
            .verdict
            .get_or_try_init(|| self.run_probe(prefix))
            .await?;
        match verdict {
            Verdict::Safe(style) => Ok(*style),
            Verdict::Refused(problem) => Err(Error::ConditionalWritesUnsupported {
                endpoint: self.endpoint.clone(),
                problem: problem.clone(),
            }),
        }
    }

    async fn run_probe(&self, prefix: &str) -> Result<Verdict> {
        let rel = format!("_probe/conditional-put-{}-{}", std::process::id(), nonce());
        let key = if prefix.is_empty() {
            rel
        } else {
            format!("{prefix}/{rel}")
        };
        let span = info_span!("conditional_put_probe", endpoint = %self.endpoint, key);
        let verdict = async {
            let path = Path::parse(&key).map_err(|e| Error::storage(&key, "probe", e))?;
            let verdict = self.probe_steps(&key, &path).await;
            self.count();
            if let Err(e) = self.store.delete(&path).await {
                warn!(error = %e, "could not delete the probe object");
            }
            verdict
        }
        .instrument(span)
        .await?;
        match &verdict {
            Verdict::Safe(style) => {
                info!(endpoint = %self.endpoint, ?style, "conditional writes verified")
            }
            Verdict::Refused(problem) => {
                warn!(endpoint = %self.endpoint, problem, "conditional writes NOT honoured")
            }
        }
        Ok(verdict)
    }

    async fn put(
        &self,
        path: &Path,
        body: &'static [u8],
        mode: PutMode,
    ) -> object_store::Result<object_store::PutResult> {
        self.count();
        self.store
            .put_opts(path, PutPayload::from_static(body), PutOptions::from(mode))
            .await
    }

    /// Whether the probe object holds `want` (one GET).
    async fn holds(&self, key: &str, path: &Path, want: &[u8]) -> Result<bool> {
        self.count();
        let r = self
            .store
            .get(path)
            .await
            .map_err(|e| Error::storage(key, "probe get", e))?;
        let content = r
            .bytes()
            .await
            .map_err(|e| Error::storage(key, "probe get", e))?;
        Ok(content.as_ref() == want)
    }

    async fn probe_steps(&self, key: &str, path: &Path) -> Result<Verdict> {
        use object_store::Error as OsError;
        let refused = |p: &str| Ok(Verdict::Refused(p.to_owned()));
        let update = |e: Option<String>| {
            PutMode::Update(UpdateVersion {
                e_tag: e,
                version: None,
            })
        };

        let first = match self.put(path, b"a", PutMode::Create).await {
            Ok(r) => r,
            Err(OsError::NotImplemented { .. } | OsError::NotSupported { .. }) => {
                return refused("create-only puts (If-None-Match: *) are not implemented");
            }
            Err(e) => return Err(Error::storage(key, "probe put", e)),
        };
        match self.put(path, b"b", PutMode::Create).await {
            Err(OsError::AlreadyExists { .. } | OsError::Precondition { .. }) => {}
            Ok(_) => {
                return refused(
                    "a second create-only PUT (If-None-Match: *) of an existing object \
                     succeeded and overwrote it: the endpoint ignores If-None-Match",
                );
            }
            Err(e) => return Err(Error::storage(key, "probe put", e)),
        }
        let Some(etag) = first.e_tag else {
            return refused("the store returned no etag for a put, so If-Match cannot be used");
        };
        let mut style = EtagStyle::AsReturned;
        match self.put(path, b"c", update(Some(etag.clone()))).await {
            Ok(_) => {}
            // A precondition failure can be the client's own retry of an update that landed
            // (its first answer lost in transport): the object then holds "c" already.
            Err(OsError::Precondition { .. }) if self.holds(key, path, b"c").await? => {}
            Err(OsError::Precondition { .. }) => {
                let bare = super::bare_etag(&etag);
                if bare == etag {
                    return refused(
                        "a conditional update (If-Match) with the current etag was rejected: \
                         updates can never succeed",
                    );
                }
                match self.put(path, b"c", update(Some(bare.to_owned()))).await {
                    Ok(_) => style = EtagStyle::Unquoted,
                    Err(OsError::Precondition { .. }) if self.holds(key, path, b"c").await? => {
                        style = EtagStyle::Unquoted;
                    }
                    Err(OsError::Precondition { .. }) => {
                        return refused(
                            "a conditional update (If-Match) with the current etag was rejected, \
                             quoted and unquoted: updates can never succeed",
                        );
                    }
                    Err(e) => return Err(Error::storage(key, "probe put", e)),
                }
            }
            Err(OsError::NotImplemented { .. } | OsError::NotSupported { .. }) => {
                return refused("conditional updates (If-Match) are not implemented");
            }
            Err(e) => return Err(Error::storage(key, "probe put", e)),
        }
        let stale = match style {
            EtagStyle::AsReturned => etag.clone(),
            EtagStyle::Unquoted => super::bare_etag(&etag).to_owned(),
        };
        match self.put(path, b"d", update(Some(stale))).await {
            Err(OsError::Precondition { .. }) => {}
            Ok(_) => {
                return refused(
                    "a conditional update (If-Match) with a stale etag succeeded: the endpoint \
                     ignores If-Match",
                );
            }
            Err(e) => return Err(Error::storage(key, "probe put", e)),
        }
        self.count();
        let content = match self.store.get(path).await {
            Ok(r) => r
                .bytes()
                .await
                .map_err(|e| Error::storage(key, "probe get", e))?,
            Err(e) => return Err(Error::storage(key, "probe get", e)),
        };
        if content.as_ref() != b"c" {
            return refused(&format!(
                "after the probe the object holds {:?}, not the positive control's \"c\"",
                String::from_utf8_lossy(&content)
            ));
        }
        Ok(Verdict::Safe(style))
    }
}

/// A root at a prefix of an [`ObjectStoreBucket`].
#[derive(Debug, Clone)]
pub struct ObjectStoreRoot {
    bucket: Arc<ObjectStoreBucket>,
    prefix: String,
}

impl ObjectStoreRoot {
    /// The bucket this root lives in.
    pub fn bucket(&self) -> &Arc<ObjectStoreBucket> {
        &self.bucket
    }

    /// The key prefix of this root inside the bucket (`""` at the top).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn full(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    fn path(&self, key: &str) -> Result<Path> {
        Path::parse(self.full(key)).map_err(|e| Error::invalid(format!("key {key:?}: {e}")))
    }

    fn map_err(key: &str, operation: &'static str, e: object_store::Error) -> Error {
        match e {
            // A 404 of a missing bucket is not "no such object": every key fails alike.
            object_store::Error::NotFound { .. }
                if !guideloom_io::cause_of(&e)
                    .is_some_and(|c| c.kind == guideloom_io::CauseKind::BucketNotFound) =>
            {
                Error::NotFound {
                    key: key.to_owned(),
                }
            }
            other => Error::storage(key, operation, other),
        }
    }

    fn span(&self, operation: &'static str, key: &str) -> tracing::Span {
        info_span!("object_store_request", endpoint = %self.bucket.endpoint, operation, key)
    }
}

#[async_trait]
impl RootStore for ObjectStoreRoot {
    fn describe(&self) -> String {
        if self.prefix.is_empty() {
            self.bucket.endpoint.clone()
        } else {
            format!("{} (prefix {})", self.bucket.endpoint, self.prefix)
        }
    }

    fn capabilities(&self) -> StoreCapabilities {
        StoreCapabilities {
            compare_and_swap: true,
            create_only_across_hosts: true,
            atomic_writes: true,
            list: true,
            remote_reads: !self.bucket.endpoint.starts_with("memory://"),
        }
    }

    // The default spool, over a shared copy of this root (an `Arc` and a prefix).
    fn begin_create_owned(
        &self,
        key: &str,
        spool_dir: &std::path::Path,
    ) -> Result<Option<Box<dyn super::PendingObject>>> {
        let store = Arc::new(self.clone());
        Ok(Some(Box::new(super::Spooled::shared(
            store, key, spool_dir,
        ))))
    }

    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        self.bucket.probe(&self.prefix).await?;
        let path = self.path(key)?;
        self.bucket.count();
        let res = self
            .bucket
            .store
            .put_opts(&path, payload(body), PutMode::Create.into())
            .instrument(self.span("put_create", key))
            .await;
        match res {
            Ok(_) => Ok(CreateOutcome::Created),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(CreateOutcome::AlreadyExists),
            Err(e) => Err(Self::map_err(key, "put_create", e)),
        }
    }

    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        let style = self.bucket.probe(&self.prefix).await?;
        let path = self.path(key)?;
        let mode = match expected {
            None => PutMode::Create,
            Some(etag) => {
                let e_tag = match style {
                    EtagStyle::AsReturned => etag.0.clone(),
                    EtagStyle::Unquoted => super::bare_etag(&etag.0).to_owned(),
                };
                PutMode::Update(UpdateVersion {
                    e_tag: Some(e_tag),
                    version: None,
                })
            }
        };
        self.bucket.count();
        let res = self
            .bucket
            .store
            .put_opts(&path, PutPayload::from(body), mode.into())
            .instrument(self.span("put_cas", key))
            .await;
        match res {
            Ok(r) => Ok(CasOutcome::Written(r.e_tag.map(Etag))),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => {
                debug!(key, "conditional put lost");
                Ok(CasOutcome::Conflict)
            }
            Err(e) => Err(Self::map_err(key, "put_cas", e)),
        }
    }

    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        retry_read(key, "get", || self.get_once(key, limit)).await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        Ok(self.get_range_once(key, range).await?.0)
    }

    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        self.get_range_once(key, range).await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.head_once(key).await
    }

    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        // ObjectStoreIo learns the size from its first (tail) read; the manifest's size only
        // spares a HEAD where suffix ranges are refused (Azure).
        Ok(Box::new(
            self.bucket.io.open_reader_with_size(&self.path(key)?, size),
        ))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        retry_read(prefix, "list", || self.list_once(prefix)).await
    }

    /// object_store's `delete_stream`: S3 sends `DeleteObjects` requests of up to 1 000
    /// keys; a key already absent is no error (S3 answers success for it, other stores'
    /// `NotFound` is ignored here).
    async fn delete_many(&self, keys: &[String]) -> Result<u64> {
        let paths = keys
            .iter()
            .map(|k| self.path(k))
            .collect::<Result<Vec<Path>>>()?;
        self.bucket.count();
        let first = keys.first().map_or("", String::as_str);
        let mut deleted = 0u64;
        let stream = self
            .bucket
            .store
            .delete_stream(futures::stream::iter(paths.into_iter().map(Ok)).boxed());
        let results: Vec<object_store::Result<Path>> = stream
            .collect()
            .instrument(self.span("delete", first))
            .await;
        for r in results {
            match r {
                Ok(_) => deleted += 1,
                Err(object_store::Error::NotFound { .. }) => deleted += 1,
                Err(e) => return Err(Self::map_err(first, "delete", e)),
            }
        }
        Ok(deleted)
    }
}

/// Most bytes of one piece of a PUT's body ([`payload`]).
const PUT_PIECE_BYTES: usize = 1 << 20;

/// `body` as a PUT payload of zero-copy slices of at most [`PUT_PIECE_BYTES`]. The HTTP
/// client sends a payload piece by piece; one whose connection cannot write vectored
/// (hyper's "flatten" strategy) copies each piece into its write buffer, so pieces bound
/// that copy to one piece, where a body of one piece would be copied whole. A body mapped
/// from a spool file ([`Spooled`](super::Spooled)) is thus sent from the file's pages.
/// (object_store's in-memory store joins the pieces into one buffer: its objects live on
/// the heap, as before.)
fn payload(body: Bytes) -> PutPayload {
    if body.len() <= PUT_PIECE_BYTES {
        return PutPayload::from(body);
    }
    (0..body.len())
        .step_by(PUT_PIECE_BYTES)
        .map(|start| body.slice(start..body.len().min(start + PUT_PIECE_BYTES)))
        .collect()
}

/// Retries of a whole-object GET or a LIST: 3 attempts, waits bounded by 50 ms doubling up
/// to 1 s. object_store retries a request that fails before its response head, not a body or
/// a listing page cut short after it. Both are reads, so repeating them is safe.
const READ_RETRY: RetryPolicy = RetryPolicy::new(
    3,
    std::time::Duration::from_millis(50),
    std::time::Duration::from_secs(1),
);

/// Whether `e` is a request that object_store's own retry loop gave up on (it failed before
/// its response head: refused, reset, timed out, or a retryable status), rather than a body
/// or listing page that broke off after the head. Repeating the former here would multiply
/// the attempts the caller configured (`--retries 1` must mean two attempts, not six).
///
/// object_store 0.14 does not export the type of that error (`client::retry::RetryError`,
/// in a private module); [`guideloom_io::request_of`] reads it from the chain, the one place
/// that reads object_store's text. `cli_faults.rs` (two attempts through a drip or a stall)
/// and `faults_proxy_roots.rs` (a listing cut after its head recovers) fail if this stops
/// telling the two apart.
fn retried_by_object_store(e: &Error) -> bool {
    guideloom_io::request_of(e).is_some()
}

/// Runs `read` until it succeeds, fails for a reason other than transport, or has been tried
/// [`READ_RETRY`]`.max_attempts` times (jittered backoff between attempts).
async fn retry_read<T, F, Fut>(key: &str, what: &'static str, mut read: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        match read().await {
            Err(e)
                if e.is_ambiguous()
                    && !retried_by_object_store(&e)
                    && attempt < READ_RETRY.max_attempts =>
            {
                warn!(key, what, attempt, error = %e, "read broke off; retrying");
                READ_RETRY.sleep_backoff(attempt).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

impl ObjectStoreRoot {
    async fn get_once(&self, key: &str, limit: u64) -> Result<Object> {
        let path = self.path(key)?;
        self.bucket.count();
        async {
            let res = self
                .bucket
                .store
                .get(&path)
                .await
                .map_err(|e| Self::map_err(key, "get", e))?;
            // Refused on the announced size, before the body is read (dropping the response
            // closes its stream).
            if res.meta.size > limit {
                return Err(Error::TooLarge {
                    key: key.to_owned(),
                    limit,
                    size: Some(res.meta.size),
                });
            }
            let etag = res.meta.e_tag.clone().map(Etag);
            let announced = res.meta.size;
            let mut body = BytesMut::with_capacity(usize::try_from(announced).unwrap_or(0));
            let mut stream = res.into_stream();
            // A store that sends more than it announced is cut off at the limit.
            while let Some(chunk) = stream
                .try_next()
                .await
                .map_err(|e| Self::map_err(key, "get", e))?
            {
                if (body.len() + chunk.len()) as u64 > limit {
                    return Err(Error::TooLarge {
                        key: key.to_owned(),
                        limit,
                        size: None,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Object {
                body: body.freeze(),
                etag,
            })
        }
        .instrument(self.span("get", key))
        .await
    }

    /// One ranged GET: the bytes and the entity tag of the version they came from.
    async fn get_range_once(&self, key: &str, range: Range<u64>) -> Result<(Bytes, Option<Etag>)> {
        let path = self.path(key)?;
        self.bucket.count();
        let want = range.end.saturating_sub(range.start);
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let (bytes, etag) = async {
            let got = self.bucket.store.get_opts(&path, options).await?;
            let etag = got.meta.e_tag.clone().map(Etag);
            Ok::<_, object_store::Error>((got.bytes().await?, etag))
        }
        .instrument(self.span("get_range", key))
        .await
        .map_err(|e| Self::map_err(key, "get_range", e))?;
        if bytes.len() as u64 != want {
            return Err(Error::Read {
                key: key.to_owned(),
                source: guideloom_io::Error::ShortRead {
                    location: self.full(key),
                    offset: range.start,
                    requested: want,
                    got: bytes.len() as u64,
                },
            });
        }
        Ok((bytes, etag))
    }

    async fn head_once(&self, key: &str) -> Result<ObjectInfo> {
        let path = self.path(key)?;
        self.bucket.count();
        let meta = self
            .bucket
            .store
            .head(&path)
            .instrument(self.span("head", key))
            .await
            .map_err(|e| Self::map_err(key, "head", e))?;
        Ok(ObjectInfo {
            key: key.to_owned(),
            size: meta.size,
            etag: meta.e_tag.map(Etag),
            modified: Some(meta.last_modified.into()),
        })
    }

    async fn list_once(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let full = self.full(prefix);
        let path =
            Path::parse(&full).map_err(|e| Error::invalid(format!("prefix {prefix:?}: {e}")))?;
        self.bucket.count();
        let metas: Vec<object_store::ObjectMeta> = self
            .bucket
            .store
            .list(Some(&path))
            .try_collect()
            .instrument(self.span("list", prefix))
            .await
            .map_err(|e| Self::map_err(prefix, "list", e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut out = Vec::with_capacity(metas.len());
        for m in metas {
            let loc = m.location.as_ref();
            let Some(rel) = loc.strip_prefix(strip.as_str()) else {
                continue;
            };
            out.push(ObjectInfo {
                key: rel.to_owned(),
                size: m.size,
                etag: m.e_tag.map(Etag),
                modified: Some(m.last_modified.into()),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    //! The spool over an object-store root (here, not in `spool`: the spool is this
    //! module's, and a test there importing the bucket would make the two import each other).
    use std::io::Write;
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::ObjectStoreBucket;
    use crate::error::Error;
    use crate::store::spool::{SPOOL_MEMORY_BYTES, Spooled};
    use crate::store::{PendingObject, RootStore};

    /// A spool directory that cannot hold the file: the write that needs it fails, the typed
    /// error names the directory, and a commit afterwards (even once the error was taken)
    /// sends nothing.
    #[tokio::test]
    async fn a_failed_spool_refuses_to_commit_and_sends_nothing() {
        let store = ObjectStoreBucket::new(Arc::new(InMemory::new()), "memory://spool-unit")
            .root("")
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let mut pending = Box::new(Spooled::new(&store, "shards/w/0.glm", &missing));
        pending.write_all(&[7; SPOOL_MEMORY_BYTES]).unwrap();
        assert!(!pending.is_spilled());
        let err = pending.write_all(&[7; 10]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        let typed = pending.take_write_error().unwrap();
        assert!(
            matches!(&typed, Error::Io { path, .. } if *path == missing),
            "{typed}"
        );
        assert!(pending.write_all(&[7; 10]).is_err());
        assert!(pending.commit().await.is_err());
        assert!(
            store
                .head("shards/w/0.glm")
                .await
                .unwrap_err()
                .is_not_found()
        );
    }
}
