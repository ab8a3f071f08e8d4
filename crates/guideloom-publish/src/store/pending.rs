//! Create-only writes whose bytes are streamed in: [`PendingObject`] (its default for stores
//! that need a single PUT is [`Spooled`](super::Spooled)), and the read-back that resolves
//! an "already exists" or an ambiguous outcome for streamed and whole bodies alike
//! ([`create_streamed`], [`create_object`](super::create_object)).

use std::fmt::Debug;
use std::io::Write;

use async_trait::async_trait;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use tracing::{Instrument, debug, info_span, warn};

use super::{READ_BACK_HEAD_THRESHOLD, RootStore, Written};
use crate::error::{Error, Result};

/// Bytes per ranged read when an existing object larger than
/// [`READ_BACK_HEAD_THRESHOLD`] is compared with ours: memory stays one chunk.
pub(crate) const READ_BACK_CHUNK: u64 = 8 << 20;

/// A create-only write in progress, from [`RootStore::begin_create`]: write the bytes through
/// [`Write`], then [`commit`](PendingObject::commit). Nothing appears under the key before
/// the commit; dropping it uncommitted leaves nothing (a local root removes its temporary
/// file; a declared mount removes the partial object, best effort).
///
/// Writes may block (a local root writes its temporary file as they come): a root's shard
/// writer makes them on a blocking thread when the store hands out an object that borrows
/// nothing ([`RootStore::begin_create_owned`]).
#[async_trait]
pub trait PendingObject: Write + Send + Debug {
    /// Makes the object appear under its key if no object is there, as
    /// [`put_create`](RootStore::put_create) does for a whole body.
    ///
    /// Anything but [`Committed::Created`] carries what the pending object offers for the
    /// comparison [`create_streamed`] makes ([`Ours`]); an error that leaves the outcome
    /// unknown is [`Committed::Unknown`], not `Err`.
    async fn commit(self: Box<Self>) -> Result<Committed>;

    /// The typed error behind a failed [`Write`] call, when the object has one to give (the
    /// `io::Error` a writer in front of it saw says less): a [`Spooled`](super::Spooled)
    /// object whose spool directory is full gives [`Error::DiskFull`] naming it, a local root
    /// whose disk is full gives [`Error::DiskFull`] naming the root's directory. Taken once;
    /// the default has none.
    fn take_write_error(&mut self) -> Option<Error> {
        None
    }
}

/// The SHA-256 of bytes as they are written: what a pending object that cannot keep its
/// bytes offers for the comparison ([`Ours::Sha256`]), and what an ArrayRecord reference
/// publishes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Digest256 {
    hasher: Sha256,
}

impl Digest256 {
    /// Adds `bytes`.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    /// The digest of everything added.
    pub(crate) fn finish(self) -> [u8; 32] {
        self.hasher.finalize().into()
    }
}

/// What a [`PendingObject`] whose commit did not create the object offers for the comparison
/// with the object found under its key: its own bytes, kept at no cost where it still holds
/// them, or a digest computed only once it knew the key was taken.
#[derive(Debug)]
pub enum Ours {
    /// The whole body (a [`Spooled`](super::Spooled) object keeps it: its buffer, or the
    /// mapping of its spool file; no copy). Compared byte for byte, in the ranges the
    /// existing object is read back in.
    Body(Bytes),
    /// The SHA-256 of the body (an object that discarded its bytes, such as a declared mount
    /// that found the key taken when it opened it).
    Sha256([u8; 32]),
    /// The pending object compared its bytes with the object under the key itself (a local
    /// root: its temporary file beside the final name, read back in chunks).
    Compared {
        /// The object under the key holds exactly our bytes.
        identical: bool,
    },
}

/// How a [`PendingObject`]'s commit ended.
#[derive(Debug)]
pub enum Committed {
    /// The object now exists under its key with our bytes.
    Created,
    /// An object was already under the key.
    Taken(Ours),
    /// The commit failed in a way that leaves the outcome unknown
    /// ([`Error::is_ambiguous`]): our write may have landed.
    Unknown {
        /// The failure, returned if no object turns out to be there.
        error: Error,
        /// For the comparison if one is.
        ours: Ours,
    },
}

/// Commits `pending` (whose bytes were `size` long) and resolves the outcome as
/// [`create_object`](super::create_object) does. "Already exists", or an error that leaves
/// the outcome unknown, compares the object under the key with what the pending object
/// offers ([`Ours`]): the same bytes mean an earlier attempt landed
/// ([`Written::AlreadyIdentical`]); anything else is [`Error::PublicationCollision`]. The
/// object is read back in 8 MiB ranges above 1 MiB, so memory stays one chunk.
///
/// Nothing is hashed on the way in: the comparison costs only when the key was taken.
pub async fn create_streamed(
    store: &dyn RootStore,
    key: &str,
    pending: Box<dyn PendingObject + '_>,
    size: u64,
) -> Result<Written> {
    let span = info_span!("create_streamed", root = %store.describe(), key, size);
    async {
        let (ours, original) = match pending.commit().await? {
            Committed::Created => return Ok(Written::Created),
            Committed::Taken(ours) => (ours, None),
            Committed::Unknown { error, ours } => {
                warn!(error = %error, "create-only write failed ambiguously; reading back");
                (ours, Some(error))
            }
        };
        resolve_existing(store, key, size, ours, original).await
    }
    .instrument(span)
    .await
}

/// What the object under a key is compared with, piece by piece.
enum Against {
    /// Our bytes.
    Body(Bytes),
    /// Our bytes' SHA-256, and the hash of the pieces fed so far.
    Digest(Sha256, [u8; 32]),
}

impl Against {
    /// Feeds the piece `theirs` found at `at`: `false` once it differs from ours.
    fn feed(&mut self, at: u64, theirs: &[u8]) -> bool {
        match self {
            Against::Body(body) => {
                let at = usize::try_from(at).unwrap_or(usize::MAX);
                body.get(at..at.saturating_add(theirs.len())) == Some(theirs)
            }
            Against::Digest(hasher, _) => {
                hasher.update(theirs);
                true
            }
        }
    }

    /// Whether everything fed is ours (for a digest, known only at the end).
    fn finish(self) -> bool {
        match self {
            Against::Body(_) => true,
            Against::Digest(hasher, digest) => <[u8; 32]>::from(hasher.finalize()) == digest,
        }
    }
}

fn unreadable(key: &str) -> Error {
    Error::corrupt(
        key,
        "the store reported that the object exists, but it cannot be read back",
    )
}

/// The read-back after a create-only write that found an object, or whose outcome is unknown
/// (`original`, returned if the object turns out to be absent): is the object under `key`
/// our `size` bytes?
pub(super) async fn resolve_existing(
    store: &dyn RootStore,
    key: &str,
    size: u64,
    ours: Ours,
    original: Option<Error>,
) -> Result<Written> {
    let collision = || Error::PublicationCollision {
        key: key.to_owned(),
    };
    // Whether the store's failure or "not there" answer ends the read-back.
    let absent = |e: Error, original: Option<Error>| -> Error {
        if e.is_not_found() {
            original.unwrap_or_else(|| unreadable(key))
        } else {
            original.unwrap_or(e)
        }
    };
    let mut against = match ours {
        Ours::Compared { identical } => {
            return if identical {
                debug!("object holds our bytes: the earlier attempt landed");
                Ok(Written::AlreadyIdentical)
            } else {
                Err(collision())
            };
        }
        Ours::Body(body) if body.len() as u64 != size => {
            return Err(Error::corrupt(
                key,
                format!(
                    "the pending object kept {} bytes, not the {size} it wrote",
                    body.len()
                ),
            ));
        }
        Ours::Body(body) => Against::Body(body),
        Ours::Sha256(digest) => Against::Digest(Sha256::new(), digest),
    };
    let mut same = |at: u64, theirs: &[u8]| against.feed(at, theirs);
    let matches = if size > READ_BACK_HEAD_THRESHOLD as u64 {
        // Large objects (shards): compare sizes first, so a re-run worker whose shard differs
        // in size is told so without downloading the existing shard; then compare it in
        // ranges.
        match store.head(key).await {
            Ok(info) if info.size != size => return Err(collision()),
            Ok(_) => {}
            Err(e) => return Err(absent(e, original)),
        }
        let mut at = 0;
        let mut matches = true;
        while matches && at < size {
            let end = size.min(at + READ_BACK_CHUNK);
            match store.get_range(key, at..end).await {
                Ok(chunk) => matches = same(at, &chunk),
                Err(e) => return Err(absent(e, original)),
            }
            at = end;
        }
        matches
    } else {
        // An existing object larger than ours cannot hold our bytes: a collision, found
        // without reading more than our own size.
        match store.get(key, size).await {
            Err(Error::TooLarge { .. }) => return Err(collision()),
            Ok(existing) => existing.body.len() as u64 == size && same(0, &existing.body),
            Err(e) => return Err(absent(e, original)),
        }
    };
    let identical = matches && against.finish();
    if identical {
        debug!("object holds our bytes: the earlier attempt landed");
        Ok(Written::AlreadyIdentical)
    } else {
        Err(collision())
    }
}
