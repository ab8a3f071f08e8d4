//! The local store's operations over [`beneath`](super::beneath)'s confined directories:
//! bounded reads, create-only writes (hard-linked or exclusive), the locked
//! compare-and-swap, listings and the temporaries sweep. Each runs on tokio's blocking pool.

use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use guideloom_io::{AsyncReader, MmapIo, PreadIo};

use super::LocalReads;
use super::beneath::{Create, Dir, Kind, Regular};
use crate::error::{Error, Result};
use crate::key::{nonce, sha256_hex};
use crate::store::{CasOutcome, CreateOutcome, Etag, ObjectInfo, Sweep};

/// An object (or prefix) of a local root: where the root is, the key, and whether links
/// beneath the root are followed.
#[derive(Debug, Clone)]
pub(super) struct At {
    pub(super) root: PathBuf,
    pub(super) key: String,
    pub(super) follow: bool,
}

impl At {
    pub(super) fn parts(&self) -> Result<(Vec<&str>, &str)> {
        crate::key::check_key(&self.key)?;
        let mut parts: Vec<&str> = self.key.split('/').collect();
        let name = parts.pop().unwrap_or_default();
        Ok((parts, name))
    }

    pub(super) fn not_found(&self) -> Error {
        Error::NotFound {
            key: self.key.clone(),
        }
    }

    /// The directory holding the object, if it exists (`create`: made if missing).
    pub(super) fn parent(&self, create: Create) -> Result<Option<(Dir, &str)>> {
        let (dirs, name) = self.parts()?;
        let Some(root) = Dir::root(&self.root, create != Create::No, self.follow)? else {
            return Ok(None);
        };
        Ok(root.descend(&dirs, create)?.map(|dir| (dir, name)))
    }

    fn open_regular(&self) -> Result<Regular> {
        let (dir, name) = self.parent(Create::No)?.ok_or_else(|| self.not_found())?;
        dir.open_regular(name)?.ok_or_else(|| self.not_found())
    }
}

pub(super) fn temp_name(final_name: &str) -> String {
    format!(".{final_name}.{}.{}.tmp", std::process::id(), nonce())
}

/// Reads `file` (whose `fstat` size is `size`) whole, at most `limit` bytes: a larger file is
/// refused before a byte is read, and one that grows past `limit` while being read is cut
/// there and refused. Memory is reserved fallibly: an allocation failure is an error.
pub(super) fn read_bounded(
    key: &str,
    path: &std::path::Path,
    reg: Regular,
    limit: u64,
) -> Result<Vec<u8>> {
    if reg.size > limit {
        return Err(Error::TooLarge {
            key: key.to_owned(),
            limit,
            size: Some(reg.size),
        });
    }
    let mut buf = Vec::new();
    let want = usize::try_from(reg.size).unwrap_or(usize::MAX);
    buf.try_reserve_exact(want).map_err(|e| {
        Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::OutOfMemory, e),
        )
    })?;
    reg.file
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    if buf.len() as u64 > limit {
        return Err(Error::TooLarge {
            key: key.to_owned(),
            limit,
            size: None,
        });
    }
    Ok(buf)
}

/// The whole object, at most `limit` bytes.
pub(super) fn read_whole(at: &At, limit: u64) -> Result<Vec<u8>> {
    let (dir, name) = at.parent(Create::No)?.ok_or_else(|| at.not_found())?;
    let reg = dir.open_regular(name)?.ok_or_else(|| at.not_found())?;
    read_bounded(&at.key, &dir.child_path(name), reg, limit)
}

/// Exactly `range` of the object.
pub(super) fn read_range(at: &At, range: Range<u64>) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let reg = at.open_regular()?;
    let len = range
        .end
        .checked_sub(range.start)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(|| Error::invalid(format!("bad range {range:?} for {}", at.key)))?;
    let location = at.root.join(&at.key).display().to_string();
    if range.end > reg.size {
        return Err(Error::Read {
            key: at.key.clone(),
            source: guideloom_io::Error::OutOfRange {
                location,
                offset: range.start,
                len: range.end - range.start,
                size: reg.size,
            },
        });
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|e| {
        Error::io(
            at.root.join(&at.key),
            std::io::Error::new(std::io::ErrorKind::OutOfMemory, e),
        )
    })?;
    buf.resize(len, 0);
    reg.file
        .read_exact_at(&mut buf, range.start)
        .map_err(|e| Error::io(at.root.join(&at.key), e))?;
    Ok(buf)
}

/// The size of the regular file at `at` ([`Error::RefusedFile`] for anything else).
pub(super) fn regular_size(at: &At) -> Result<u64> {
    let (dir, name) = at.parent(Create::No)?.ok_or_else(|| at.not_found())?;
    let entry = dir.stat(name)?.ok_or_else(|| at.not_found())?;
    match entry.kind {
        Kind::Regular => Ok(entry.size),
        kind => Err(Error::RefusedFile {
            path: dir.child_path(name),
            kind: match kind {
                Kind::Directory => "a directory",
                Kind::Symlink => "a symbolic link",
                Kind::Other(what) => what,
                Kind::Regular => "a regular file",
            },
            expected: "regular files",
        }),
    }
}

/// The object's size and modification time (a regular file, as [`regular_size`] checks).
pub(super) fn regular_info(at: &At) -> Result<(u64, SystemTime)> {
    let size = regular_size(at)?;
    let (dir, name) = at.parent(Create::No)?.ok_or_else(|| at.not_found())?;
    let entry = dir.stat(name)?.ok_or_else(|| at.not_found())?;
    Ok((size, entry.modified))
}

/// Deletes `keys` under `root` (absent ones count as deleted): the files of one directory
/// are unlinked, then the directory is fsynced once, so the deletions are durable when this
/// returns. Nothing outside the root is reached: every directory is opened beneath it
/// without following links (unless the root was opened with `follow`), and a name that is
/// a directory is refused by the kernel (`unlinkat` without `AT_REMOVEDIR`).
pub(super) fn delete_many(root: &Path, follow: bool, keys: &[String]) -> Result<u64> {
    let mut by_dir: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for key in keys {
        crate::key::check_key(key)?;
        let (dir, name) = key.rsplit_once('/').unwrap_or(("", key.as_str()));
        by_dir.entry(dir).or_default().push(name);
    }
    let mut deleted = 0u64;
    for (dir, names) in by_dir {
        let parts: Vec<&str> = if dir.is_empty() {
            Vec::new()
        } else {
            dir.split('/').collect()
        };
        let Some(base) = Dir::root(root, false, follow)? else {
            return Ok(keys.len() as u64);
        };
        let Some(d) = base.descend(&parts, Create::No)? else {
            deleted += names.len() as u64;
            continue;
        };
        for name in &names {
            d.remove(name)?;
            deleted += 1;
        }
        d.sync()?;
    }
    Ok(deleted)
}

/// A reader of the object, whose size must be `size` (the reference's).
pub(super) fn open_reader(at: &At, size: u64, reads: LocalReads) -> Result<Box<dyn AsyncReader>> {
    let reg = at.open_regular()?;
    if reg.size != size {
        return Err(Error::Verification {
            key: at.key.clone(),
            what: "size",
            expected: size.to_string(),
            actual: reg.size.to_string(),
        });
    }
    let location = at.root.join(&at.key).display().to_string();
    let reader = match reads {
        LocalReads::Pread => PreadIo::new().open_file_async(reg.file, &location),
        _ => MmapIo::new().open_file_async(reg.file, &location),
    };
    reader.map_err(|source| Error::Read {
        key: at.key.clone(),
        source,
    })
}

/// Writes `body`, fsyncs, and closes the file **checking the close**: a FUSE mount such as
/// rclone uploads the object when the file is closed (its fsync does nothing), so an upload
/// that fails surfaces only as an error from `close(2)`, which dropping a `File` discards.
pub(super) fn write_synced(
    path: &std::path::Path,
    mut file: std::fs::File,
    body: &[u8],
) -> Result<()> {
    file.write_all(body).map_err(|e| Error::io(path, e))?;
    file.sync_all().map_err(|e| Error::io(path, e))?;
    nix::unistd::close(file).map_err(|e| Error::io(path, std::io::Error::from(e)))
}

/// Create-only on a local root: a fsynced temporary file hard-linked to the final name
/// (`EEXIST`: the object exists), the temporary unlinked, the directory fsynced.
pub(super) fn create_linked(at: &At, body: &[u8]) -> Result<CreateOutcome> {
    let (dir, name) = at
        .parent(Create::Yes { durable: true })?
        .ok_or_else(|| at.not_found())?;
    let tmp = temp_name(name);
    let tmp_path = dir.child_path(&tmp);
    let file = dir.create_new(&tmp)?.ok_or_else(|| {
        Error::io(
            &tmp_path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "temporary name taken"),
        )
    })?;
    if let Err(e) = write_synced(&tmp_path, file, body) {
        let _ = dir.remove(&tmp);
        return Err(e);
    }
    let linked = dir.link(&tmp, name);
    let _ = dir.remove(&tmp);
    if linked? {
        dir.sync()?;
        Ok(CreateOutcome::Created)
    } else {
        Ok(CreateOutcome::AlreadyExists)
    }
}

/// Bytes per read when [`same_contents`] compares two files.
const COMPARE_CHUNK: usize = 1 << 20;

/// Whether the regular file `theirs` holds exactly the bytes of our file `ours`, both in
/// `dir`: sizes first, then the contents in 1 MiB pieces. Anything at `theirs` that is not a
/// regular file (or nothing at all) holds other bytes.
pub(super) fn same_contents(dir: &Dir, ours: &str, theirs: &str) -> Result<bool> {
    use std::os::unix::fs::FileExt;
    let ours_path = dir.child_path(ours);
    let ours = dir.open_regular(ours)?.ok_or_else(|| {
        Error::io(
            &ours_path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "temporary file vanished"),
        )
    })?;
    let theirs_path = dir.child_path(theirs);
    let theirs = match dir.open_regular(theirs) {
        Ok(Some(theirs)) => theirs,
        Ok(None) | Err(Error::RefusedFile { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    if ours.size != theirs.size {
        return Ok(false);
    }
    let piece = usize::try_from(ours.size).map_or(COMPARE_CHUNK, |s| s.min(COMPARE_CHUNK));
    let (mut a, mut b) = (vec![0; piece], vec![0; piece]);
    let mut at = 0;
    while at < ours.size {
        let len = usize::try_from(ours.size - at).map_or(piece, |rest| rest.min(piece));
        ours.file
            .read_exact_at(&mut a[..len], at)
            .map_err(|e| Error::io(&ours_path, e))?;
        match theirs.file.read_exact_at(&mut b[..len], at) {
            Ok(()) => {}
            // Shrunk under us: not our bytes.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(Error::io(&theirs_path, e)),
        }
        if a[..len] != b[..len] {
            return Ok(false);
        }
        at += len as u64;
    }
    Ok(true)
}

/// Create-only on a declared mount: exclusive create of the final name, sequential writes,
/// fsync (when such a mount uploads the object).
pub(super) fn create_exclusive(at: &At, body: &[u8]) -> Result<CreateOutcome> {
    let (dir, name) = at
        .parent(Create::Yes { durable: false })?
        .ok_or_else(|| at.not_found())?;
    let Some(file) = dir.create_new(name)? else {
        return Ok(CreateOutcome::AlreadyExists);
    };
    let path = dir.child_path(name);
    if let Err(e) = write_synced(&path, file, body) {
        // Best effort: a mount may refuse deletes.
        let _ = dir.remove(name);
        return Err(e);
    }
    Ok(CreateOutcome::Created)
}

/// Compare-and-swap under an exclusive `flock` on a `.`-prefixed lock file beside the object;
/// the etag is the SHA-256 of the content (read bounded by `limit`).
pub(super) fn cas_locked(
    at: &At,
    body: &[u8],
    expected: Option<&Etag>,
    limit: u64,
) -> Result<CasOutcome> {
    let (dir, name) = at
        .parent(Create::Yes { durable: true })?
        .ok_or_else(|| at.not_found())?;
    let lock_name = format!(".{name}.lock");
    let lock_path = dir.child_path(&lock_name);
    let lock = dir.open_or_create(&lock_name)?;
    // flock (not fcntl) so that two threads of one process exclude each other as well:
    // each open() gets its own open file description.
    let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| Error::io(&lock_path, std::io::Error::from(errno)))?;
    let current = match dir.open_regular(name)? {
        Some(reg) => Some(Etag(sha256_hex(&read_bounded(
            &at.key,
            &dir.child_path(name),
            reg,
            limit,
        )?))),
        None => None,
    };
    if current.as_ref() != expected {
        return Ok(CasOutcome::Conflict);
    }
    let tmp = temp_name(name);
    let tmp_path = dir.child_path(&tmp);
    let file = dir.create_new(&tmp)?.ok_or_else(|| {
        Error::io(
            &tmp_path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "temporary name taken"),
        )
    })?;
    if let Err(e) = write_synced(&tmp_path, file, body) {
        let _ = dir.remove(&tmp);
        return Err(e);
    }
    if let Err(e) = dir.rename(&tmp, name) {
        let _ = dir.remove(&tmp);
        return Err(e);
    }
    dir.sync()?;
    Ok(CasOutcome::Written(Some(Etag(sha256_hex(body)))))
}

/// The regular files under the prefix `at.key` (`""`: the whole root) whose keys have no
/// `.`-prefixed component: temporary and lock files are not objects. Links, FIFOs, devices
/// and sockets inside it are not objects either: they are left out (with a warning), never
/// followed. A prefix directory that is itself a link is [`Error::RefusedFile`].
pub(super) fn list(at: &At) -> Result<Vec<ObjectInfo>> {
    let Some(root) = Dir::root(&at.root, false, at.follow)? else {
        return Ok(Vec::new());
    };
    let dir = if at.key.is_empty() {
        root
    } else {
        crate::key::check_key(&at.key)?;
        let parts: Vec<&str> = at.key.split('/').collect();
        // A prefix that exists but is not a real directory (a link, say) is refused by
        // name rather than listed as empty: the caller learns why its objects are missing.
        match root.descend(&parts, Create::No)? {
            Some(dir) => dir,
            None => return Ok(Vec::new()),
        }
    };
    let mut out = Vec::new();
    dir.walk(&at.key, &mut |key, dir, entry| {
        if key.split('/').any(|c| c.starts_with('.')) {
            return Ok(());
        }
        if entry.kind == Kind::Regular {
            out.push(ObjectInfo {
                key: key.to_owned(),
                size: entry.size,
                etag: None,
                modified: Some(entry.modified),
            });
        } else {
            tracing::warn!(path = %dir.child_path(&entry.name).display(), kind = ?entry.kind, "not a regular file; left out of the listing");
        }
        Ok(())
    })?;
    Ok(out)
}

/// Removes the `.…tmp` files under the root that are at least `min_age` old and whose writer
/// no longer runs (see [`crate::store::sweep`]).
pub(super) fn sweep(at: &At, min_age: Duration) -> Result<Sweep> {
    let mut sweep = Sweep::default();
    let Some(root) = Dir::root(&at.root, false, false)? else {
        return Ok(sweep);
    };
    let now = SystemTime::now();
    root.walk("", &mut |key, dir, entry| {
        let name = entry.name.as_str();
        if !(name.starts_with('.') && name.ends_with(".tmp") && entry.kind == Kind::Regular) {
            return Ok(());
        }
        if !crate::store::sweep::removable(name, entry.modified, now, min_age) {
            sweep.kept += 1;
            return Ok(());
        }
        // `false`: another sweeper (or the writer's own cleanup) got there first.
        if dir.remove(name)? {
            sweep.bytes += entry.size;
            sweep.removed.push(key.to_owned());
        }
        Ok(())
    })?;
    sweep.removed.sort();
    tracing::info!(root = %at.root.display(), removed = sweep.removed.len(), bytes = sweep.bytes, kept = sweep.kept, "swept temporaries");
    Ok(sweep)
}
