//! The local store's operations on platforms without `openat`-style confinement: every
//! operation is refused with [`Error::Unsupported`] rather than run unconfined (a root could
//! otherwise lead reads and writes outside its directory through a symbolic link).

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use guideloom_io::AsyncReader;

use super::LocalReads;
use crate::error::{Error, Result};
use crate::store::{CasOutcome, CreateOutcome, Etag, ObjectInfo, Sweep};

/// An object (or prefix) of a local root.
#[derive(Debug, Clone)]
pub(super) struct At {
    pub(super) root: PathBuf,
    pub(super) key: String,
    pub(super) follow: bool,
}

fn unsupported(at: &At) -> Error {
    let _ = at.follow;
    Error::Unsupported {
        what: format!(
            "local root {} ({}): local roots need a unix platform, where every path beneath the \
             root is resolved without following links",
            at.root.display(),
            at.key
        ),
    }
}

pub(super) fn read_whole(at: &At, _limit: u64) -> Result<Vec<u8>> {
    Err(unsupported(at))
}

pub(super) fn read_range(at: &At, _range: Range<u64>) -> Result<Vec<u8>> {
    Err(unsupported(at))
}

pub(super) fn regular_size(at: &At) -> Result<u64> {
    Err(unsupported(at))
}

pub(super) fn open_reader(at: &At, _size: u64, _reads: LocalReads) -> Result<Box<dyn AsyncReader>> {
    Err(unsupported(at))
}

pub(super) fn create_linked(at: &At, _body: &[u8]) -> Result<CreateOutcome> {
    Err(unsupported(at))
}

pub(super) fn create_exclusive(at: &At, _body: &[u8]) -> Result<CreateOutcome> {
    Err(unsupported(at))
}

pub(super) fn cas_locked(
    at: &At,
    _body: &[u8],
    _expected: Option<&Etag>,
    _limit: u64,
) -> Result<CasOutcome> {
    Err(unsupported(at))
}

pub(super) fn list(at: &At) -> Result<Vec<ObjectInfo>> {
    Err(unsupported(at))
}

pub(super) fn sweep(at: &At, _min_age: Duration) -> Result<Sweep> {
    Err(unsupported(at))
}
