//! A create-only write streamed into a local root ([`PendingFile`]): the bytes go straight
//! into the temporary file that [`create_linked`](super::ops::create_linked) would write
//! (on a declared mount, into the exclusively created final name), so memory stays one
//! write buffer whatever the object's size. Commit fsyncs and links exactly as a whole-body
//! create does.
//!
//! Nothing is hashed on the way: when the final name turns out to be taken, the temporary
//! file is compared with it before it is removed ([`Ours::Compared`]); only a declared mount
//! that finds the name taken when it opens it (and so writes nothing) hashes what it
//! discards ([`Ours::Sha256`]).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;

use super::beneath::{Create, Dir};
use super::ops::{self, At};
use crate::error::{Error, Result};
use crate::store::{Committed, CreateOutcome, Digest256, Ours, PendingObject};

/// Bytes collected before the file is opened, and the size of each write to it. An object
/// that fits is written by the whole-body path at commit: nothing is created before then.
const BUFFER: usize = 1 << 20;

/// The file being written.
#[derive(Debug)]
struct Open {
    dir: Dir,
    /// The temporary name (local root) or the final name (declared mount).
    name: String,
    path: PathBuf,
    file: File,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct PendingFile {
    at: At,
    mounted: bool,
    buf: Vec<u8>,
    open: Option<Open>,
    /// A declared mount found the final name taken when it opened it: the rest is discarded,
    /// hashed for the comparison, and the commit answers [`Committed::Taken`].
    exists: Option<Digest256>,
    /// Why a write failed (opening or writing the file), for
    /// [`take_write_error`](PendingObject::take_write_error).
    failure: Option<Error>,
    /// A write failed: the file is incomplete, so the commit refuses (even once the failure
    /// was taken).
    broken: bool,
}

impl PendingFile {
    pub(super) fn new(at: At, mounted: bool) -> Self {
        PendingFile {
            at,
            mounted,
            buf: Vec::new(),
            open: None,
            exists: None,
            failure: None,
            broken: false,
        }
    }

    fn open(&mut self) -> Result<()> {
        let durable = !self.mounted;
        let (dir, final_name) = self
            .at
            .parent(Create::Yes { durable })?
            .ok_or_else(|| self.at.not_found())?;
        let name = if self.mounted {
            final_name.to_owned()
        } else {
            ops::temp_name(final_name)
        };
        let path = dir.child_path(&name);
        match dir.create_new(&name)? {
            Some(file) => {
                self.open = Some(Open {
                    dir,
                    name,
                    path,
                    file,
                })
            }
            None if self.mounted => self.exists = Some(Digest256::default()),
            None => {
                return Err(Error::io(
                    &path,
                    std::io::Error::new(std::io::ErrorKind::AlreadyExists, "temporary name taken"),
                ));
            }
        }
        Ok(())
    }

    /// Writes the buffer out, opening the file first if needed.
    fn drain(&mut self) -> Result<()> {
        if self.open.is_none() && self.exists.is_none() {
            self.open()?;
        }
        self.forward(None)
    }

    /// Writes the buffer, then `data`, to the open file (or into the digest of discarded
    /// bytes), and empties the buffer.
    fn forward(&mut self, data: Option<&[u8]>) -> Result<()> {
        let pieces = [Some(&self.buf[..]), data];
        for piece in pieces.into_iter().flatten() {
            if let Some(open) = &mut self.open {
                open.file
                    .write_all(piece)
                    .map_err(|e| Error::io(&open.path, e))?;
            } else if let Some(discarded) = &mut self.exists {
                discarded.update(piece);
            }
        }
        self.buf.clear();
        Ok(())
    }

    /// Writes `data` past the buffer.
    fn write_through(&mut self, data: &[u8]) -> Result<()> {
        self.drain()?;
        if data.len() >= BUFFER {
            self.forward(Some(data))
        } else {
            self.buf.extend_from_slice(data);
            Ok(())
        }
    }
}

impl Write for PendingFile {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.broken {
            return Err(std::io::Error::other(format!(
                "writing {} failed earlier",
                self.at.key
            )));
        }
        if self.buf.len() + data.len() <= BUFFER {
            if self.buf.capacity() == 0 {
                self.buf.reserve_exact(BUFFER);
            }
            self.buf.extend_from_slice(data);
            return Ok(data.len());
        }
        if let Err(e) = self.write_through(data) {
            let kind = match &e {
                Error::DiskFull { source, .. } | Error::Io { source, .. } => source.kind(),
                _ => std::io::ErrorKind::Other,
            };
            let io = std::io::Error::new(kind, e.to_string());
            self.failure = Some(e);
            self.broken = true;
            return Err(io);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // The buffer is written at commit; until then nothing is meant to be durable.
        Ok(())
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        // Not committed: nothing may stay behind (best effort on a mount, as after a failed
        // whole-body create).
        if let Some(open) = self.open.take() {
            drop(open.file);
            let _ = open.dir.remove(&open.name);
        }
    }
}

impl PendingFile {
    /// The blocking half of the commit.
    fn finish(mut self) -> Result<Committed> {
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        if self.broken {
            return Err(Error::invalid(format!(
                "committing {} after a failed write",
                self.at.key
            )));
        }
        if let Some(mut discarded) = self.exists.take() {
            discarded.update(&self.buf);
            return Ok(Committed::Taken(Ours::Sha256(discarded.finish())));
        }
        let Some(open) = self.open.take() else {
            // Small enough to have stayed in the buffer: the whole-body create, which keeps
            // the buffer for the comparison.
            let body = std::mem::take(&mut self.buf);
            let outcome = if self.mounted {
                ops::create_exclusive(&self.at, &body)?
            } else {
                ops::create_linked(&self.at, &body)?
            };
            return Ok(match outcome {
                CreateOutcome::Created => Committed::Created,
                CreateOutcome::AlreadyExists => Committed::Taken(Ours::Body(Bytes::from(body))),
            });
        };
        let Open {
            dir,
            name,
            path,
            file,
        } = open;
        if let Err(e) = ops::write_synced(&path, file, &self.buf) {
            let _ = dir.remove(&name);
            return Err(e);
        }
        if self.mounted {
            return Ok(Committed::Created);
        }
        let (_, final_name) = self.at.parts()?;
        // The name is taken: compare before the temporary file goes.
        let taken = match dir.link(&name, final_name) {
            Ok(true) => Ok(None),
            Ok(false) => ops::same_contents(&dir, &name, final_name).map(Some),
            Err(e) => Err(e),
        };
        let _ = dir.remove(&name);
        match taken? {
            None => {
                dir.sync()?;
                Ok(Committed::Created)
            }
            Some(identical) => Ok(Committed::Taken(Ours::Compared { identical })),
        }
    }
}

#[async_trait]
impl PendingObject for PendingFile {
    async fn commit(self: Box<Self>) -> Result<Committed> {
        let span =
            tracing::info_span!("local_commit_create", key = %self.at.key, mounted = self.mounted);
        let pending = *self;
        tracing::Instrument::instrument(super::blocking(move || pending.finish()), span).await
    }

    fn take_write_error(&mut self) -> Option<Error> {
        self.failure.take()
    }
}
