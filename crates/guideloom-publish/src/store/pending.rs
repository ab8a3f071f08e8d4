//! Create-only writes whose bytes are streamed in: [`PendingObject`], the one-buffer default
//! for stores that need a single PUT, and the read-back that resolves an "already exists" or
//! an ambiguous outcome for streamed and buffered bodies alike ([`create_streamed`],
//! [`create_object`](super::create_object)).

use std::fmt::Debug;
use std::io::Write;

use async_trait::async_trait;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use tracing::{Instrument, debug, info_span, warn};

use super::{CreateOutcome, READ_BACK_HEAD_THRESHOLD, RootStore, Written};
use crate::error::{Error, Result};

/// Bytes per ranged read when an existing object larger than
/// [`READ_BACK_HEAD_THRESHOLD`] is compared with ours: memory stays one chunk.
pub(crate) const READ_BACK_CHUNK: u64 = 8 << 20;

/// A create-only write in progress, from [`RootStore::begin_create`]: write the bytes through
/// [`Write`], then [`commit`](PendingObject::commit). Nothing appears under the key before
/// the commit; dropping it uncommitted leaves nothing (a local root removes its temporary
/// file; a declared mount removes the partial object, best effort).
///
/// Writes may block (a local root writes its temporary file as they come).
#[async_trait]
pub trait PendingObject: Write + Send + Debug {
    /// Makes the object appear under its key if no object is there
    /// ([`CreateOutcome::AlreadyExists`] otherwise), as
    /// [`put_create`](RootStore::put_create) does for a whole body.
    async fn commit(self: Box<Self>) -> Result<CreateOutcome>;
}

/// The default [`PendingObject`]: the bytes collect in one buffer, which becomes the body of
/// one [`put_create`](RootStore::put_create) at commit (no copy).
pub struct Buffered<'a, S: ?Sized> {
    store: &'a S,
    key: String,
    body: Vec<u8>,
}

impl<'a, S: RootStore + ?Sized> Buffered<'a, S> {
    /// A buffer for `key` in `store`.
    pub fn new(store: &'a S, key: &str) -> Self {
        Buffered {
            store,
            key: key.to_owned(),
            body: Vec::new(),
        }
    }
}

impl<S: ?Sized> Debug for Buffered<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffered")
            .field("key", &self.key)
            .field("len", &self.body.len())
            .finish()
    }
}

impl<S: ?Sized> Write for Buffered<'_, S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.body.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.body.extend_from_slice(buf);
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[async_trait]
impl<S: RootStore + ?Sized> PendingObject for Buffered<'_, S> {
    async fn commit(self: Box<Self>) -> Result<CreateOutcome> {
        let Buffered { store, key, body } = *self;
        store.put_create(&key, Bytes::from(body)).await
    }
}

/// The SHA-256 of bytes as they are written, with their count: what [`create_streamed`]
/// needs to tell our own earlier attempt from someone else's object without reading ours
/// back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Digest256 {
    hasher: Sha256,
    len: u64,
}

impl Digest256 {
    /// Adds `bytes`.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
    }

    /// Bytes added so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The digest of everything added.
    pub(crate) fn finish(self) -> [u8; 32] {
        self.hasher.finalize().into()
    }
}

/// Commits `pending` (whose bytes were `size` long with SHA-256 `digest`) and resolves the
/// outcome as [`create_object`](super::create_object) does: "already exists", or an error that
/// leaves the outcome unknown, reads the object back — in 8 MiB ranges above 1 MiB, so memory stays one chunk — and compares digests: ours means
/// an earlier attempt landed ([`Written::AlreadyIdentical`]); anything else is
/// [`Error::PublicationCollision`].
pub async fn create_streamed(
    store: &dyn RootStore,
    key: &str,
    pending: Box<dyn PendingObject + '_>,
    size: u64,
    digest: [u8; 32],
) -> Result<Written> {
    let span = info_span!("create_streamed", root = %store.describe(), key, size);
    async {
        let first = pending.commit().await;
        let original = match first {
            Ok(CreateOutcome::Created) => return Ok(Written::Created),
            Ok(CreateOutcome::AlreadyExists) => None,
            Err(e) if e.is_ambiguous() => {
                warn!(error = %e, "create-only write failed ambiguously; reading back");
                Some(e)
            }
            Err(e) => return Err(e),
        };
        resolve_existing(store, key, size, &digest, original).await
    }
    .instrument(span)
    .await
}

fn unreadable(key: &str) -> Error {
    Error::corrupt(
        key,
        "the store reported that the object exists, but it cannot be read back",
    )
}

/// The read-back after a create-only write that found an object, or whose outcome is unknown
/// (`original`, returned if the object turns out to be absent).
pub(super) async fn resolve_existing(
    store: &dyn RootStore,
    key: &str,
    size: u64,
    digest: &[u8; 32],
    original: Option<Error>,
) -> Result<Written> {
    let collision = || Error::PublicationCollision {
        key: key.to_owned(),
    };
    let theirs = if size > READ_BACK_HEAD_THRESHOLD as u64 {
        // Large objects (shards): compare sizes first, so a re-run worker whose shard differs
        // in size is told so without downloading the existing shard; then hash it in ranges.
        match store.head(key).await {
            Ok(info) if info.size != size => return Err(collision()),
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Err(original.unwrap_or_else(|| unreadable(key))),
            Err(e) => return Err(original.unwrap_or(e)),
        }
        let mut hasher = Sha256::new();
        let mut at = 0;
        while at < size {
            let end = size.min(at + READ_BACK_CHUNK);
            match store.get_range(key, at..end).await {
                Ok(chunk) => hasher.update(&chunk),
                Err(e) if e.is_not_found() => {
                    return Err(original.unwrap_or_else(|| unreadable(key)));
                }
                Err(e) => return Err(original.unwrap_or(e)),
            }
            at = end;
        }
        <[u8; 32]>::from(hasher.finalize())
    } else {
        // An existing object larger than ours cannot hold our bytes: a collision, found
        // without reading more than our own size.
        match store.get(key, size).await {
            Err(Error::TooLarge { .. }) => return Err(collision()),
            Ok(existing) => Sha256::digest(&existing.body).into(),
            Err(e) if e.is_not_found() => return Err(original.unwrap_or_else(|| unreadable(key))),
            Err(e) => return Err(original.unwrap_or(e)),
        }
    };
    if &theirs == digest {
        debug!("object holds our bytes: the earlier attempt landed");
        Ok(Written::AlreadyIdentical)
    } else {
        Err(collision())
    }
}
