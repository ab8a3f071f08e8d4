//! The cache directory's protocol, shared by every process that uses the directory. All of
//! it is synchronous file work (callers run it on tokio's blocking pool).
//!
//! ```text
//! <dir>/v1/lock                          flock(LOCK_EX) around every change below
//! <dir>/v1/entries/<group>-<name>        complete, verified shards (immutable)
//! <dir>/v1/tmp/<group>-<name>.<pid>.<n>  fills in progress, sized to the shard at creation
//! ```
//!
//! - **The index is the listing.** Bytes in use are the lengths of every file under
//!   `entries/` and `tmp/`, read under the lock; there is no index file to get out of date,
//!   so nothing needs rebuilding after a crash.
//! - **Reservations.** A fill creates its temporary file under the lock and sets its length
//!   to the shard's size before giving the lock back: the budget counts it from then on,
//!   whatever the filler does.
//! - **Who holds what.** A filler holds `LOCK_EX` on its temporary file until it has renamed
//!   it into `entries/` (then `LOCK_SH`, like every reader). A reader holds `LOCK_SH` on an
//!   entry for as long as its descriptor is open, so for the life of the opened shard. Those
//!   are `flock` locks: one per open file description, released by the kernel when the
//!   process dies.
//! - **Eviction** takes `LOCK_EX | LOCK_NB` on an entry under the directory lock: it fails
//!   while anyone reads the entry, so data in use is never removed; a reader opens and locks
//!   an entry under the directory lock, so no eviction falls between its look-up and its
//!   lock. Readers never re-open a path.
//! - **Stale fills.** A temporary file whose `LOCK_EX | LOCK_NB` succeeds has no filler
//!   (the filler died): it is removed by the next process that takes the lock to reserve.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::error::{Error, Result};

/// Length of the root-group prefix of an entry name (hex digits).
pub(super) const GROUP_HEX: usize = 16;

/// Temporary file names made by this process: `<entry>.<pid>.<n>`.
static TEMP_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The directory's paths.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub(super) root: PathBuf,
}

/// What a look-up under the lock decided.
#[derive(Debug)]
pub(super) enum Lookup {
    /// The entry, opened and share-locked, its mtime touched (LRU).
    Hit(File),
    /// Another process (or task) is filling it: wait on this temporary file.
    Filling(PathBuf),
    /// A reservation: a temporary file of the shard's size, exclusively locked.
    Fill(File, PathBuf),
    /// It does not fit beside the entries in use (or is larger than the budget).
    NoRoom,
}

/// What changed while reserving (for the counters).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Swept {
    pub(super) evicted: u64,
    pub(super) stale: u64,
}

/// The directory lock, released when dropped (the file is closed).
#[derive(Debug)]
struct DirLock(#[allow(dead_code)] File);

/// One file of the listing.
#[derive(Debug)]
struct Listed {
    path: PathBuf,
    name: String,
    len: u64,
    modified: SystemTime,
}

impl Layout {
    pub(super) fn new(dir: &Path) -> Self {
        Layout {
            root: dir.join("v1"),
        }
    }

    pub(super) fn entries(&self) -> PathBuf {
        self.root.join("entries")
    }

    pub(super) fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    fn err(&self, path: &Path, e: std::io::Error) -> Error {
        Error::io(path, e)
    }

    /// Takes the directory lock (blocking), creating the layout the first time.
    fn lock(&self) -> Result<DirLock> {
        for dir in [self.entries(), self.tmp()] {
            fs::create_dir_all(&dir).map_err(|e| self.err(&dir, e))?;
        }
        let path = self.root.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| self.err(&path, e))?;
        file.lock().map_err(|e| self.err(&path, e))?;
        Ok(DirLock(file))
    }

    fn list(&self, dir: &Path) -> Result<Vec<Listed>> {
        let mut out = Vec::new();
        let read = match fs::read_dir(dir) {
            Ok(read) => read,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(self.err(dir, e)),
        };
        for item in read {
            let item = item.map_err(|e| self.err(dir, e))?;
            let Ok(meta) = item.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            out.push(Listed {
                path: item.path(),
                name: item.file_name().to_string_lossy().into_owned(),
                len: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
        Ok(out)
    }

    /// Bytes under `entries/` and `tmp/` now: what the budget counts (under the lock for
    /// an exact figure; without it, a snapshot).
    pub(super) fn used(&self) -> Result<u64> {
        Ok(self
            .list(&self.entries())?
            .iter()
            .chain(self.list(&self.tmp())?.iter())
            .map(|f| f.len)
            .sum())
    }

    /// Looks `name` up; on a miss, reserves `size` bytes for a fill (evicting least recently
    /// used unheld entries of other groups, and removing stale fills) if that fits `budget`.
    pub(super) fn lookup(&self, name: &str, size: u64, budget: u64) -> Result<(Lookup, Swept)> {
        let _lock = self.lock()?;
        let mut swept = Swept::default();
        let entry = self.entries().join(name);
        match File::open(&entry) {
            Ok(file) => {
                file.try_lock_shared()
                    .map_err(|e| self.err(&entry, e.into()))?;
                // LRU order: the last use is the entry's mtime (best effort).
                let _ = file.set_modified(SystemTime::now());
                return Ok((Lookup::Hit(file), swept));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(self.err(&entry, e)),
        }
        let mut temps = self.list(&self.tmp())?;
        // Fills in progress of this entry, and stale fills of any.
        let mut live = Vec::with_capacity(temps.len());
        for temp in temps.drain(..) {
            if is_unheld(&temp.path) {
                if fs::remove_file(&temp.path).is_ok() {
                    swept.stale += 1;
                }
                continue;
            }
            if temp.name.split('.').next() == Some(name) {
                return Ok((Lookup::Filling(temp.path), swept));
            }
            live.push(temp);
        }
        if size > budget {
            return Ok((Lookup::NoRoom, swept));
        }
        let mut entries = self.list(&self.entries())?;
        let mut used: u64 = entries.iter().chain(live.iter()).map(|f| f.len).sum();
        if used.saturating_add(size) > budget {
            // Entries of the same group (root) are never evicted to admit one of its own:
            // a cyclic scan of a root larger than the cache keeps what it has (MDS#507).
            let group = &name[..GROUP_HEX.min(name.len())];
            entries.retain(|e| !e.name.starts_with(group));
            entries.sort_by_key(|e| e.modified);
            for victim in entries {
                if used.saturating_add(size) <= budget {
                    break;
                }
                if let Some(freed) = evict_if_unheld(&victim.path) {
                    used -= freed.min(used);
                    swept.evicted += 1;
                }
            }
            if used.saturating_add(size) > budget {
                return Ok((Lookup::NoRoom, swept));
            }
        }
        let n = TEMP_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let path = self
            .tmp()
            .join(format!("{name}.{}.{n}", std::process::id()));
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| self.err(&path, e))?;
        file.try_lock().map_err(|e| self.err(&path, e.into()))?;
        if let Err(e) = file.set_len(size) {
            let _ = fs::remove_file(&path);
            return Err(self.err(&path, e));
        }
        Ok((Lookup::Fill(file, path), swept))
    }

    /// Publishes a verified, synced fill: renamed to its entry under the lock, the directory
    /// synced, and the filler's lock turned shared (it reads the entry like any reader).
    pub(super) fn commit(&self, file: &File, temp: &Path, name: &str) -> Result<()> {
        let _lock = self.lock()?;
        let entry = self.entries().join(name);
        fs::rename(temp, &entry).map_err(|e| self.err(&entry, e))?;
        if let Ok(dir) = File::open(self.entries()) {
            dir.sync_all().map_err(|e| self.err(&self.entries(), e))?;
        }
        // Under the directory lock no evictor can slip between the two calls.
        file.unlock().map_err(|e| self.err(&entry, e))?;
        file.try_lock_shared()
            .map_err(|e| self.err(&entry, e.into()))?;
        Ok(())
    }

    /// Removes an abandoned fill (failed or cancelled): its reservation is given back.
    pub(super) fn abandon(&self, temp: &Path) {
        let _ = fs::remove_file(temp);
    }

    /// Removes entry `name` if it is still the file `file` (a damaged entry): the next
    /// look-up refetches it. Readers holding it keep their descriptor.
    pub(super) fn discard(&self, name: &str, file: &File) -> Result<bool> {
        let _lock = self.lock()?;
        let entry = self.entries().join(name);
        let same = match (fs::metadata(&entry), file.metadata()) {
            (Ok(a), Ok(b)) => same_file(&a, &b),
            _ => false,
        };
        if same {
            fs::remove_file(&entry).map_err(|e| self.err(&entry, e))?;
        }
        Ok(same)
    }

    /// Waits (blocking) until the fill of `temp` is over: committed, abandoned or its filler
    /// dead.
    pub(super) fn wait_fill(&self, temp: &Path) -> Result<()> {
        match File::open(temp) {
            Ok(file) => file.lock_shared().map_err(|e| self.err(temp, e)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err(temp, e)),
        }
    }
}

#[cfg(unix)]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    a.len() == b.len() && a.modified().ok() == b.modified().ok()
}

/// Whether nobody holds a lock on `path` (a temporary file whose filler died).
fn is_unheld(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| f.try_lock().is_ok())
}

/// Removes `path` if nobody holds it (no reader's `LOCK_SH`): the bytes freed.
fn evict_if_unheld(path: &Path) -> Option<u64> {
    let file = File::open(path).ok()?;
    file.try_lock().ok()?;
    let len = file.metadata().ok()?.len();
    fs::remove_file(path).ok()?;
    Some(len)
}
