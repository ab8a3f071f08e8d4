//! Local-directory roots and declared mounted buckets.
//!
//! **Local root** (`LocalStore::new`): a create-only write goes to a temporary file in the
//! final directory, is fsynced, then hard-linked to its final name (`EEXIST` = the object
//! exists), the temporary name is unlinked and the directory fsynced. Nothing partial ever
//! appears under a final name, and a crash leaves at most a `.`-prefixed temporary file that
//! listings ignore. The mutable catalog is updated under an exclusive `flock` on a `.`-prefixed
//! lock file beside it, with the SHA-256 of the content as its etag, and replaced by
//! `rename` of a fsynced temporary file.
//!
//! **Declared mounted bucket** (`LocalStore::mounted`): mounts such as Mountpoint for S3 have
//! no hard links, no locks, no rename and no directory fsync. A create-only write opens the
//! final name with `O_CREAT | O_EXCL` and writes it sequentially, then fsyncs the file (which
//! is when such a mount uploads). The exclusive create is checked only by the mount's own
//! lookup, not by the bucket: two hosts can both succeed. Compare-and-swap is refused with
//! [`Error::MountedBucketCannotAnnotate`].

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use tracing::{Instrument, debug, info_span};

use super::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, RootStore, StoreCapabilities};
use crate::error::{Error, Result};
use crate::key::{nonce, sha256_hex};
use guideloom_io::{AsyncReader, MmapIo, PreadIo};

/// How [`LocalStore::open_reader`] reads published objects (shards).
///
/// Either way the file is opened once per reader, not once per read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LocalReads {
    /// The default: [`Mmap`](LocalReads::Mmap) on a local root, [`Pread`](LocalReads::Pread)
    /// on a declared mounted bucket (a FUSE mount pages over the network; `pread` keeps the
    /// request sizes explicit).
    #[default]
    Auto,
    /// Map the file (guideloom-io's `MmapIo`): records are zero-copy slices and async reads
    /// answer inline, with no blocking-pool hand-off. Published objects are create-only and
    /// never rewritten; truncating one by hand while it is mapped raises SIGBUS (see
    /// `MmapIo`'s `# Risks`).
    Mmap,
    /// Positioned reads of one open file (guideloom-io's `PreadIo`), each run on tokio's
    /// blocking pool.
    Pread,
}

/// A root in a local directory, or a declared mounted bucket.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    mounted: bool,
    reads: LocalReads,
}

impl LocalStore {
    /// A local-directory root (created on first write if missing).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            mounted: false,
            reads: LocalReads::Auto,
        }
    }

    /// A declared mounted bucket at `root`: exclusive create and sequential writes only.
    pub fn mounted(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            mounted: true,
            reads: LocalReads::Auto,
        }
    }

    /// Chooses how readers read published objects.
    pub fn with_reads(mut self, reads: LocalReads) -> Self {
        self.reads = reads;
        self
    }

    /// How readers read published objects, with [`LocalReads::Auto`] resolved.
    pub fn reads(&self) -> LocalReads {
        match self.reads {
            LocalReads::Auto if self.mounted => LocalReads::Pread,
            LocalReads::Auto => LocalReads::Mmap,
            other => other,
        }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this is a declared mounted bucket.
    pub fn is_mounted(&self) -> bool {
        self.mounted
    }

    fn path(&self, key: &str) -> PathBuf {
        let mut p = self.root.clone();
        p.extend(key.split('/'));
        p
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(Error::Unsupported {
            what: format!("blocking file task failed: {e}"),
        }),
    }
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Creates `dir` and missing ancestors below `root`, fsyncing each parent whose entries
/// changed (when `durable`).
fn ensure_dir(root: &Path, dir: &Path, durable: bool) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if !root.is_dir() {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    }
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    let mut cur = root.to_path_buf();
    for comp in rel.components() {
        let parent = cur.clone();
        cur.push(comp);
        match std::fs::create_dir(&cur) {
            Ok(()) => {
                if durable {
                    fsync_dir(&parent)?;
                }
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(&cur, e)),
        }
    }
    Ok(())
}

fn not_found_or(key: &str, path: &Path, e: std::io::Error) -> Error {
    if e.kind() == ErrorKind::NotFound {
        Error::NotFound {
            key: key.to_owned(),
        }
    } else {
        Error::io(path, e)
    }
}

fn temp_name(dir: &Path, final_name: &str) -> PathBuf {
    dir.join(format!(
        ".{final_name}.{}.{}.tmp",
        std::process::id(),
        nonce()
    ))
}

fn write_synced(path: &Path, body: &[u8]) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.write_all(body).map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))
}

fn create_linked(root: &Path, path: &Path, body: &[u8]) -> Result<CreateOutcome> {
    let dir = path.parent().unwrap_or(root);
    ensure_dir(root, dir, true)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("object");
    let tmp = temp_name(dir, name);
    if let Err(e) = write_synced(&tmp, body) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            fsync_dir(dir)?;
            Ok(CreateOutcome::Created)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(CreateOutcome::AlreadyExists),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn create_exclusive(root: &Path, path: &Path, body: &[u8]) -> Result<CreateOutcome> {
    let dir = path.parent().unwrap_or(root);
    ensure_dir(root, dir, false)?;
    let mut f = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(CreateOutcome::AlreadyExists),
        Err(e) => return Err(Error::io(path, e)),
    };
    // Sequential writes only, then fsync: a mount such as Mountpoint uploads the object when
    // the file is flushed and closed, so the bucket never sees a partial object.
    let written = f.write_all(body).and_then(|()| f.sync_all());
    if let Err(e) = written {
        drop(f);
        // Best effort: a mount may refuse deletes.
        let _ = std::fs::remove_file(path);
        return Err(Error::io(path, e));
    }
    Ok(CreateOutcome::Created)
}

fn read_file(key: &str, path: &Path) -> Result<Vec<u8>> {
    let mut f = File::open(path).map_err(|e| not_found_or(key, path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

#[cfg(unix)]
fn read_range(key: &str, path: &Path, range: Range<u64>) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = File::open(path).map_err(|e| not_found_or(key, path, e))?;
    let len = range
        .end
        .checked_sub(range.start)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(|| Error::invalid(format!("bad range {range:?} for {key}")))?;
    let size = f.metadata().map_err(|e| Error::io(path, e))?.len();
    if range.end > size {
        return Err(Error::Read {
            key: key.to_owned(),
            source: guideloom_io::Error::OutOfRange {
                location: path.display().to_string(),
                offset: range.start,
                len: range.end - range.start,
                size,
            },
        });
    }
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, range.start)
        .map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

#[cfg(not(unix))]
fn read_range(key: &str, path: &Path, range: Range<u64>) -> Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path).map_err(|e| not_found_or(key, path, e))?;
    let len = usize::try_from(range.end.saturating_sub(range.start))
        .map_err(|_| Error::invalid(format!("bad range {range:?} for {key}")))?;
    f.seek(SeekFrom::Start(range.start))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; len];
    f.read_exact(&mut buf).map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

/// The regular files under `dir` whose keys (`prefix/…`) have no `.`-prefixed component:
/// temporary and lock files are not objects.
fn list_dir(dir: &Path, prefix: &str, out: &mut Vec<ObjectInfo>) -> Result<()> {
    walk(dir, prefix, &mut |key, _, meta| {
        if meta.is_file() && !key.split('/').any(|c| c.starts_with('.')) {
            out.push(ObjectInfo {
                key: key.to_owned(),
                size: meta.len(),
                etag: None,
            });
        }
        Ok(())
    })
}

/// Calls `f(key, path, metadata)` for every non-directory entry under `dir`, recursively;
/// keys are `/`-joined below `prefix`. Symbolic links are not followed; a missing `dir`, or
/// an entry that vanishes during the walk, is skipped.
pub(super) fn walk(
    dir: &Path,
    prefix: &str,
    f: &mut dyn FnMut(&str, &Path, &std::fs::Metadata) -> Result<()>,
) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        if meta.is_dir() {
            walk(&path, &rel, f)?;
        } else {
            f(&rel, &path, &meta)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn lock_exclusive(path: &Path) -> Result<nix::fcntl::Flock<File>> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| Error::io(path, std::io::Error::from(errno)))
}

#[cfg(not(unix))]
fn lock_exclusive(_path: &Path) -> Result<File> {
    Err(Error::Unsupported {
        what: "compare-and-swap on local roots needs POSIX file locks (unix only)".into(),
    })
}

fn cas_locked(
    root: &Path,
    key: &str,
    path: &Path,
    body: &[u8],
    expected: Option<&Etag>,
) -> Result<CasOutcome> {
    let dir = path.parent().unwrap_or(root);
    ensure_dir(root, dir, true)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("object");
    let lock_path = dir.join(format!(".{name}.lock"));
    // flock (not fcntl) so that two threads of one process exclude each other as well:
    // each open() gets its own open file description.
    let _guard = lock_exclusive(&lock_path)?;
    let current = match read_file(key, path) {
        Ok(b) => Some(Etag(sha256_hex(&b))),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    if current.as_ref() != expected {
        return Ok(CasOutcome::Conflict);
    }
    let tmp = temp_name(dir, name);
    if let Err(e) = write_synced(&tmp, body) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    fsync_dir(dir)?;
    Ok(CasOutcome::Written(Some(Etag(sha256_hex(body)))))
}

#[async_trait]
impl RootStore for LocalStore {
    fn describe(&self) -> String {
        if self.mounted {
            format!("mounted bucket at {}", self.root.display())
        } else {
            format!("file://{}", self.root.display())
        }
    }

    fn capabilities(&self) -> StoreCapabilities {
        StoreCapabilities {
            compare_and_swap: !self.mounted && cfg!(unix),
            create_only_across_hosts: !self.mounted,
            atomic_writes: !self.mounted,
            list: true,
        }
    }

    fn check_cas(&self) -> Result<()> {
        if self.mounted {
            Err(Error::MountedBucketCannotAnnotate {
                root: self.root.display().to_string(),
            })
        } else {
            Ok(())
        }
    }

    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        let root = self.root.clone();
        let path = self.path(key);
        let mounted = self.mounted;
        let span = info_span!("local_put_create", key, mounted, size = body.len());
        blocking(move || {
            if mounted {
                create_exclusive(&root, &path, &body)
            } else {
                create_linked(&root, &path, &body)
            }
        })
        .instrument(span)
        .await
    }

    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        self.check_cas()?;
        let root = self.root.clone();
        let path = self.path(key);
        let key = key.to_owned();
        let expected = expected.cloned();
        debug!(key, "local compare-and-swap");
        blocking(move || cas_locked(&root, &key, &path, &body, expected.as_ref())).await
    }

    async fn get(&self, key: &str) -> Result<Object> {
        let path = self.path(key);
        let key = key.to_owned();
        blocking(move || {
            let body = read_file(&key, &path)?;
            let etag = Some(Etag(sha256_hex(&body)));
            Ok(Object {
                body: Bytes::from(body),
                etag,
            })
        })
        .await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let path = self.path(key);
        let key = key.to_owned();
        blocking(move || read_range(&key, &path, range).map(Bytes::from)).await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let path = self.path(key);
        let key = key.to_owned();
        blocking(move || {
            let meta = std::fs::metadata(&path).map_err(|e| not_found_or(&key, &path, e))?;
            if !meta.is_file() {
                return Err(Error::NotFound { key });
            }
            Ok(ObjectInfo {
                key,
                size: meta.len(),
                etag: None,
            })
        })
        .await
    }

    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        let path = self.path(key);
        let key = key.to_owned();
        let reads = self.reads();
        // One open (and, for mmap, one mapping) per reader; reads then cost one `pread` or
        // one slice.
        blocking(move || {
            let file = File::open(&path).map_err(|e| not_found_or(&key, &path, e))?;
            let actual = file.metadata().map_err(|e| Error::io(&path, e))?.len();
            if actual != size {
                return Err(Error::Verification {
                    key,
                    what: "size",
                    expected: size.to_string(),
                    actual: actual.to_string(),
                });
            }
            let location = path.display().to_string();
            let reader = match reads {
                LocalReads::Pread => PreadIo::new().open_file_async(file, &location),
                _ => MmapIo::new().open_file_async(file, &location),
            };
            reader.map_err(|source| Error::Read { key, source })
        })
        .await
    }

    async fn sweep_temporaries(&self, min_age: std::time::Duration) -> Result<super::Sweep> {
        if self.mounted {
            return Ok(super::Sweep::default());
        }
        let root = self.root.clone();
        blocking(move || super::sweep::sweep_dir(&root, min_age)).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let dir = if prefix.is_empty() {
            self.root.clone()
        } else {
            self.path(prefix)
        };
        let prefix = prefix.to_owned();
        blocking(move || {
            let mut out = Vec::new();
            list_dir(&dir, &prefix, &mut out)?;
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_open_once_in_every_mode_and_check_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let body = Bytes::from((0..=255u8).cycle().take(10_000).collect::<Vec<u8>>());
        let base = LocalStore::new(dir.path());
        base.put_create("shards/w/0.glm", body.clone())
            .await
            .unwrap();
        assert_eq!(base.reads(), LocalReads::Mmap);
        assert_eq!(LocalStore::mounted(dir.path()).reads(), LocalReads::Pread);
        for reads in [LocalReads::Auto, LocalReads::Mmap, LocalReads::Pread] {
            let store = LocalStore::new(dir.path()).with_reads(reads);
            let reader = store.open_reader("shards/w/0.glm", 10_000).await.unwrap();
            assert_eq!(reader.size().await.unwrap(), 10_000);
            assert_eq!(reader.read(100, 50).await.unwrap(), body.slice(100..150));
            // The file is open: removing its name does not break the reader.
            if reads == LocalReads::Pread {
                std::fs::remove_file(dir.path().join("shards/w/0.glm")).unwrap();
                assert_eq!(reader.read(9_990, 10).await.unwrap(), body.slice(9_990..));
                std::fs::write(dir.path().join("shards/w/0.glm"), &body).unwrap();
            }
            assert!(reader.read(9_995, 10).await.is_err(), "past the end");
            let wrong = store
                .open_reader("shards/w/0.glm", 9_999)
                .await
                .unwrap_err();
            assert!(
                matches!(&wrong, Error::Verification { key, what: "size", .. } if key == "shards/w/0.glm"),
                "{wrong:?}"
            );
            let missing = store.open_reader("shards/w/1.glm", 10).await.unwrap_err();
            assert!(missing.is_not_found(), "{missing:?}");
        }
    }
}
