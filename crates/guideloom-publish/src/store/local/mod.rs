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
//! A create-only write can also be streamed ([`RootStore::begin_create`]): the bytes go
//! into the same temporary file as they come, and the commit fsyncs and links it.
//!
//! **Declared mounted bucket** (`LocalStore::mounted`): mounts such as Mountpoint for S3 have
//! no hard links, no locks, no rename and no directory fsync. A create-only write opens the
//! final name with `O_CREAT | O_EXCL` and writes it sequentially, then fsyncs the file (which
//! is when such a mount uploads). The exclusive create is checked only by the mount's own
//! lookup, not by the bucket: two hosts can both succeed. Compare-and-swap is refused with
//! [`Error::MountedBucketCannotAnnotate`].

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tracing::{Instrument, debug, info_span};

use super::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, RootStore, StoreCapabilities};
use crate::error::{Error, Result};
use guideloom_io::AsyncReader;

#[cfg(unix)]
mod beneath;
#[cfg_attr(not(unix), path = "unsupported.rs")]
mod ops;
#[cfg(unix)]
mod pending;

/// Largest object a local compare-and-swap reads to compute the current etag (the catalog's
/// cap, [`MAX_CATALOG_BYTES`](crate::manifest::MAX_CATALOG_BYTES)).
const MAX_CAS_OBJECT_BYTES: u64 = crate::manifest::MAX_CATALOG_BYTES;

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
    /// Positioned reads of one open file (guideloom-io's `PreadIo`). A small read whose
    /// bytes are in the page cache runs on the calling thread (Linux `RWF_NOWAIT`); any other
    /// read, and every read on a file system that refuses `RWF_NOWAIT` (FUSE mounts among
    /// them), runs on tokio's blocking pool.
    Pread,
}

/// A root in a local directory, or a declared mounted bucket.
///
/// **Confinement.** The root directory is opened by the path given; everything beneath it is
/// resolved one component at a time relative to its parent's descriptor with `O_NOFOLLOW`
/// (unix), so no read or write goes through a symbolic link or outside the directory, and a
/// link swapped in concurrently is refused rather than followed. Only regular files are
/// opened: a FIFO, device or socket where an object should be is refused at once with
/// [`Error::RefusedFile`], before it is opened. Listings skip such entries. Following links
/// beneath the root is an explicit opt-in ([`with_follow_symlinks`](Self::with_follow_symlinks),
/// `StoreOptions::follow_symlinks`), for roots whose every link you trust.
///
/// Local roots need a unix platform; elsewhere every operation answers
/// [`Error::Unsupported`].
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    mounted: bool,
    reads: LocalReads,
    follow_symlinks: bool,
}

impl LocalStore {
    /// A local-directory root (created on first write if missing).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            mounted: false,
            reads: LocalReads::Auto,
            follow_symlinks: false,
        }
    }

    /// A declared mounted bucket at `root`: exclusive create and sequential writes only.
    pub fn mounted(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            mounted: true,
            ..LocalStore::new(root)
        }
    }

    /// Chooses how readers read published objects.
    pub fn with_reads(mut self, reads: LocalReads) -> Self {
        self.reads = reads;
        self
    }

    /// Follows symbolic links beneath the root (default `false`: a link is refused with
    /// [`Error::RefusedFile`]). Only for roots whose every link you control: a link can make
    /// a reader read, and a writer write, outside the root. Non-regular files are refused
    /// either way.
    pub fn with_follow_symlinks(mut self, follow: bool) -> Self {
        self.follow_symlinks = follow;
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

    /// Whether symbolic links beneath the root are followed.
    pub fn follows_symlinks(&self) -> bool {
        self.follow_symlinks
    }

    fn at(&self, key: &str) -> ops::At {
        ops::At {
            root: self.root.clone(),
            key: key.to_owned(),
            follow: self.follow_symlinks,
        }
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
            // A declared mount reads through the kernel (page cache, readahead) like a disk.
            remote_reads: false,
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
        let at = self.at(key);
        let mounted = self.mounted;
        let span = info_span!("local_put_create", key, mounted, size = body.len());
        blocking(move || {
            if mounted {
                ops::create_exclusive(&at, &body)
            } else {
                ops::create_linked(&at, &body)
            }
        })
        .instrument(span)
        .await
    }

    /// Streams into the temporary file of [`put_create`](RootStore::put_create) (the final
    /// name on a declared mount), opened once the first 1 MiB is written; an object that
    /// stays smaller is written whole at commit.
    #[cfg(unix)]
    fn begin_create(
        &self,
        key: &str,
        _spool_dir: &Path,
    ) -> Result<Box<dyn super::PendingObject + '_>> {
        crate::key::check_key(key)?;
        Ok(Box::new(pending::PendingFile::new(
            self.at(key),
            self.mounted,
        )))
    }

    fn begin_create_owned(
        &self,
        key: &str,
        _spool_dir: &Path,
    ) -> Result<Option<Box<dyn super::PendingObject>>> {
        crate::key::check_key(key)?;
        Ok(Some(Box::new(pending::PendingFile::new(
            self.at(key),
            self.mounted,
        ))))
    }

    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        self.check_cas()?;
        let at = self.at(key);
        let expected = expected.cloned();
        debug!(key, "local compare-and-swap");
        blocking(move || ops::cas_locked(&at, &body, expected.as_ref(), MAX_CAS_OBJECT_BYTES)).await
    }

    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        let at = self.at(key);
        blocking(move || {
            let body = ops::read_whole(&at, limit)?;
            let etag = Some(Etag(crate::key::sha256_hex(&body)));
            Ok(Object {
                body: Bytes::from(body),
                etag,
            })
        })
        .await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let at = self.at(key);
        blocking(move || ops::read_range(&at, range).map(Bytes::from)).await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        let at = self.at(key);
        blocking(move || {
            let (size, modified) = ops::regular_info(&at)?;
            Ok(ObjectInfo {
                key: at.key,
                size,
                etag: None,
                modified: Some(modified),
            })
        })
        .await
    }

    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        let at = self.at(key);
        let reads = self.reads();
        // One open (and, for mmap, one mapping) per reader; reads then cost one `pread` or
        // one slice.
        blocking(move || ops::open_reader(&at, size, reads)).await
    }

    async fn sweep_temporaries(&self, min_age: Duration) -> Result<super::Sweep> {
        if self.mounted {
            return Ok(super::Sweep::default());
        }
        let at = self.at("");
        blocking(move || ops::sweep(&at, min_age)).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let at = self.at(prefix);
        blocking(move || ops::list(&at)).await
    }

    /// Unlinks each file beneath the root, then fsyncs each directory once (a declared
    /// mount's delete is the mount's: the same calls, durable when the mount says so).
    async fn delete_many(&self, keys: &[String]) -> Result<u64> {
        let at = self.at("");
        let keys = keys.to_vec();
        let span = info_span!("local_delete", root = %at.root.display(), keys = keys.len());
        blocking(move || ops::delete_many(&at.root, at.follow, &keys))
            .instrument(span)
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

    /// What [`Sweep`](crate::store::Sweep) removes: old temporaries whose writer is gone.
    #[tokio::test]
    async fn only_old_temporaries_of_dead_writers_go() {
        let dir = tempfile::tempdir().unwrap();
        let shards = dir.path().join("shards/w");
        std::fs::create_dir_all(&shards).unwrap();
        // A PID that cannot be running: beyond the kernel's pid_max (2^22 at most).
        let dead = ".0.glm.2147483000.aa.tmp";
        let live = format!(".1.glm.{}.bb.tmp", std::process::id());
        for name in [dead, live.as_str(), "0.glm", ".catalog.json.lock"] {
            std::fs::write(shards.join(name), b"12345").unwrap();
        }
        // Too young for a one-hour minimum age: nothing goes.
        let store = LocalStore::new(dir.path());
        let young = store
            .sweep_temporaries(Duration::from_secs(3600))
            .await
            .unwrap();
        assert_eq!((young.removed.len(), young.kept), (0, 2));
        let swept = store.sweep_temporaries(Duration::ZERO).await.unwrap();
        assert_eq!(swept.removed, vec![format!("shards/w/{dead}")]);
        assert_eq!((swept.bytes, swept.kept), (5, 1));
        for kept in [live.as_str(), "0.glm", ".catalog.json.lock"] {
            assert!(shards.join(kept).exists(), "{kept} kept");
        }
        assert!(!shards.join(dead).exists());
    }

    /// A streamed create whose name is taken is compared with what is there, without a
    /// hash on the way in: identical bytes (of any size, and one byte off at the very end),
    /// other sizes, and names that are not regular files.
    #[tokio::test]
    async fn a_streamed_create_compares_with_whatever_took_its_name() {
        use crate::store::Written;
        use std::io::Write as _;
        async fn stream(store: &LocalStore, key: &str, body: &[u8]) -> Result<Written> {
            let mut pending = store.begin_create(key, &std::env::temp_dir()).unwrap();
            // Odd pieces, so some writes straddle the buffer.
            for piece in body.chunks(300_007) {
                pending.write_all(piece).unwrap();
            }
            crate::store::create_streamed(store, key, pending, body.len() as u64).await
        }
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let small = &big[..1_000];
        for mounted in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let store = if mounted {
                LocalStore::mounted(dir.path())
            } else {
                LocalStore::new(dir.path())
            };
            for (key, body) in [("a/big", &big[..]), ("a/small", small)] {
                assert_eq!(stream(&store, key, body).await.unwrap(), Written::Created);
                let again = stream(&store, key, body).await.unwrap();
                assert_eq!(again, Written::AlreadyIdentical, "mounted={mounted} {key}");
                let mut last = body.to_vec();
                *last.last_mut().unwrap() ^= 1;
                let shorter = &body[..body.len() - 1];
                let longer = [body, b"x"].concat();
                for other in [&last[..], shorter, &longer[..]] {
                    let err = stream(&store, key, other).await.unwrap_err();
                    assert!(
                        matches!(&err, Error::PublicationCollision { key: k } if k == key),
                        "mounted={mounted} {key} {}: {err:?}",
                        other.len()
                    );
                }
                assert_eq!(std::fs::read(dir.path().join(key)).unwrap(), body);
            }
            // A directory and a symbolic link to an identical file hold no bytes of ours.
            std::fs::create_dir(dir.path().join("a/dir")).unwrap();
            std::os::unix::fs::symlink(dir.path().join("a/big"), dir.path().join("a/link"))
                .unwrap();
            for key in ["a/dir", "a/link"] {
                let err = stream(&store, key, &big).await.unwrap_err();
                assert!(
                    matches!(
                        &err,
                        Error::PublicationCollision { .. } | Error::RefusedFile { .. }
                    ),
                    "mounted={mounted} {key}: {err:?}"
                );
            }
            let mut names: Vec<_> = std::fs::read_dir(dir.path().join("a"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(
                names,
                ["big", "dir", "link", "small"],
                "no temporaries left"
            );
        }
    }
}
