//! The default [`PendingObject`], [`Spooled`]: for stores whose create-only write is one
//! request carrying the whole body (object stores), the bytes are spooled — kept in memory
//! up to [`SPOOL_MEMORY_BYTES`], then written to an unnamed temporary file in the spool
//! directory — and the commit sends them from there. The file is mapped (guideloom-io's
//! `MmapIo`) and the request body is made of slices of the mapping, so the pages the PUT
//! reads are the file's (page cache, reclaimable), not a heap copy: anonymous memory stays
//! one buffer whatever the object's size. Measured in `docs/publication.md`, "Writing a
//! shard".
//!
//! The file has no name (`tempfile::tempfile_in`: `O_TMPFILE` on Linux, created and
//! unlinked at once elsewhere on unix), so nothing is left behind however the process ends:
//! the OS reclaims the space when the file is closed, by the commit or by a kill.

use std::fmt::Debug;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::{MmapIo, SyncReader};
use tracing::debug;

use super::{Committed, CreateOutcome, Ours, PendingObject, RootStore};
use crate::error::{Error, Result};

/// Bytes a [`Spooled`] object keeps in memory. An object that stays within it is sent from
/// memory (no file is made); a larger one moves to an unnamed file in the spool directory,
/// written in pieces of this size. The same first MiB a local root buffers before it opens
/// its temporary file.
pub const SPOOL_MEMORY_BYTES: usize = 1 << 20;

/// A create-only write for a store that needs the whole body in one request (see the module
/// documentation): the bytes are kept in memory up to [`SPOOL_MEMORY_BYTES`], then in an
/// unnamed file in the spool directory; the commit is one
/// [`put_create`](RootStore::put_create) of them, read from the file's mapping. Dropped
/// uncommitted, it leaves nothing: the file has no name.
///
/// A failure to create or write the file (a full disk, a missing directory) is remembered as
/// [`Error::DiskFull`] or [`Error::Io`] naming the spool directory
/// ([`take_write_error`](PendingObject::take_write_error)); the write that met it, and every
/// later one, fails, and nothing is sent.
pub struct Spooled<'a, S: ?Sized> {
    store: Handle<'a, S>,
    key: String,
    dir: PathBuf,
    /// Bytes not in the file yet (all of them until the object outgrows the buffer).
    buf: Vec<u8>,
    file: Option<File>,
    /// Bytes written to the file.
    spilled: u64,
    failure: Option<Error>,
    /// A write failed: the bytes are incomplete, so the commit refuses (even once the
    /// failure was taken).
    broken: bool,
}

/// The store a [`Spooled`] object commits to: borrowed, or shared by an object that borrows
/// nothing ([`Spooled::shared`]).
enum Handle<'a, S: ?Sized> {
    Borrowed(&'a S),
    Shared(Arc<S>),
}

impl<S: ?Sized> std::ops::Deref for Handle<'_, S> {
    type Target = S;

    fn deref(&self) -> &S {
        match self {
            Handle::Borrowed(s) => s,
            Handle::Shared(s) => s,
        }
    }
}

impl<'a, S: RootStore + ?Sized> Spooled<'a, S> {
    /// A spooled write of `key` in `store` whose file, if it needs one, goes in `dir`
    /// (typically [`StagingOptions::directory`](crate::StagingOptions::directory)).
    pub fn new(store: &'a S, key: &str, dir: &Path) -> Self {
        Self::with_handle(Handle::Borrowed(store), key, dir)
    }

    fn with_handle(store: Handle<'a, S>, key: &str, dir: &Path) -> Self {
        Spooled {
            store,
            key: key.to_owned(),
            dir: dir.to_owned(),
            buf: Vec::new(),
            file: None,
            spilled: 0,
            failure: None,
            broken: false,
        }
    }
}

impl<S: RootStore + ?Sized> Spooled<'static, S> {
    /// [`new`](Self::new) over a shared `store`: an object that borrows nothing, for
    /// [`RootStore::begin_create_owned`] (its bytes can then be written on a blocking thread).
    pub fn shared(store: Arc<S>, key: &str, dir: &Path) -> Self {
        Self::with_handle(Handle::Shared(store), key, dir)
    }
}

impl<S: ?Sized> Spooled<'_, S> {
    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.spilled + self.buf.len() as u64
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the bytes have moved to the spool file.
    pub fn is_spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Moves the buffer, then `data`, to the file (created on first use).
    fn spill(&mut self, data: &[u8]) -> Result<()> {
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let file =
                    tempfile::tempfile_in(&self.dir).map_err(|e| Error::io_in(&self.dir, e))?;
                debug!(key = %self.key, dir = %self.dir.display(), "spooling to an unnamed file");
                self.buf.reserve_exact(SPOOL_MEMORY_BYTES - self.buf.len());
                self.file.insert(file)
            }
        };
        file.write_all(&self.buf)
            .map_err(|e| Error::io_in(&self.dir, e))?;
        self.spilled += self.buf.len() as u64;
        self.buf.clear();
        if data.len() >= SPOOL_MEMORY_BYTES {
            file.write_all(data)
                .map_err(|e| Error::io_in(&self.dir, e))?;
            self.spilled += data.len() as u64;
        } else {
            self.buf.extend_from_slice(data);
        }
        Ok(())
    }

    /// An `io::Error` for the writer in front (the encoder) standing for `failure`, which
    /// is kept for [`take_write_error`](PendingObject::take_write_error).
    fn failed(&self) -> std::io::Error {
        let kind = match &self.failure {
            Some(Error::DiskFull { source, .. } | Error::Io { source, .. }) => source.kind(),
            _ => std::io::ErrorKind::Other,
        };
        let what = self
            .failure
            .as_ref()
            .map_or_else(|| "an earlier write failed".to_owned(), ToString::to_string);
        std::io::Error::new(kind, format!("spooling {}: {what}", self.key))
    }
}

impl<S: ?Sized> Debug for Spooled<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spooled")
            .field("key", &self.key)
            .field("dir", &self.dir)
            .field("len", &self.len())
            .field("spilled", &self.is_spilled())
            .finish()
    }
}

impl<S: ?Sized> Write for Spooled<'_, S> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.broken {
            return Err(self.failed());
        }
        if self.buf.len() + data.len() <= SPOOL_MEMORY_BYTES {
            self.buf.extend_from_slice(data);
            return Ok(());
        }
        if let Err(e) = self.spill(data) {
            self.failure = Some(e);
            self.broken = true;
            return Err(self.failed());
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // The buffer reaches the file at commit; nothing here is meant to be durable.
        Ok(())
    }
}

#[async_trait]
impl<S: RootStore + ?Sized> PendingObject for Spooled<'_, S> {
    async fn commit(self: Box<Self>) -> Result<Committed> {
        let Spooled {
            store,
            key,
            dir,
            buf,
            file,
            spilled,
            failure,
            broken,
        } = *self;
        if let Some(e) = failure {
            return Err(e);
        }
        if broken {
            return Err(Error::io_in(
                &dir,
                std::io::Error::other(format!("spooling {key} failed earlier; nothing was sent")),
            ));
        }
        let body = match file {
            None => Bytes::from(buf),
            Some(file) => {
                let size = spilled + buf.len() as u64;
                let task_dir = dir.clone();
                tokio::task::spawn_blocking(move || map(file, &buf, size, &task_dir))
                    .await
                    .map_err(|e| {
                        Error::io_in(
                            &dir,
                            std::io::Error::other(format!("spool task failed: {e}")),
                        )
                    })??
            }
        };
        match store.put_create(&key, body.clone()).await {
            Ok(CreateOutcome::Created) => Ok(Committed::Created),
            Ok(CreateOutcome::AlreadyExists) => Ok(Committed::Taken(Ours::Body(body))),
            Err(error) if error.is_ambiguous() => Ok(Committed::Unknown {
                error,
                ours: Ours::Body(body),
            }),
            Err(e) => Err(e),
        }
    }

    fn take_write_error(&mut self) -> Option<Error> {
        self.failure.take()
    }
}

/// Writes the rest (`buf`) to the spool file and maps it: the `size` bytes as one buffer
/// whose pages are the file's (the mapping lives as long as the buffer or a slice of it).
fn map(mut file: File, buf: &[u8], size: u64, dir: &Path) -> Result<Bytes> {
    file.write_all(buf).map_err(|e| Error::io_in(dir, e))?;
    let location = format!("spool file in {}", dir.display());
    let mapped = MmapIo::new()
        .open_file(file, &location)
        .and_then(|reader| reader.read(0, size))
        .map_err(|e| Error::io_in(dir, std::io::Error::other(e)))?;
    Ok(mapped)
}
