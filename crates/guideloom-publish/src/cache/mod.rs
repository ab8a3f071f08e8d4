//! The shared node cache: whole shards of remote roots kept in a directory that every
//! process of a machine (DataLoader workers, ranks) uses together, under one byte budget.
//!
//! On when [`CacheOptions::dir`] is set ([`RootOptions::cache`](crate::RootOptions::cache),
//! or the environment variables [`CACHE_DIR_ENV`] and [`CACHE_BYTES_ENV`] read by
//! [`Dataset::open`](crate::Dataset::open)). A [`Dataset`](crate::Dataset) then opens each
//! shard it reads — by [`get`](crate::Dataset::get), [`get_many`](crate::Dataset::get_many),
//! read-ahead or an in-order read — from its cache entry, filling the entry whole first when
//! it is missing; a later reader of the same shard, in this process or another, makes no
//! data request. The design and its measurements: `docs/cache.md`.
//!
//! - **Entries** are immutable (a published shard never changes) and named by the SHA-256 of
//!   the root (its description) and the shard's whole reference (key, size, record count,
//!   checksums): two roots or two versions of a key never share an entry.
//! - **Fills** are crash-safe: the shard is downloaded into a temporary file in the cache
//!   directory, synced, checked against its reference (size, SHA-256 when the manifest has
//!   one, the footer or tail checksum and record count), and only then renamed into place.
//!   A filler killed at any point leaves a temporary file no reader trusts, removed by the
//!   next fill (`dir.rs`).
//! - **The budget** ([`CacheOptions::budget_bytes`]) counts entries and fills in progress
//!   (a fill reserves its shard's size before its first request) and is never exceeded:
//!   every change happens under a lock file in the directory. A shard that does not fit is
//!   read by ranges, as without the cache.
//! - **Eviction**: least recently used entries that no process has open, and never one of
//!   the root being filled for — a scan of a root larger than the cache keeps the part it
//!   cached instead of evicting it for the rest (which is read by ranges). An entry in use
//!   is never removed, and an open entry is never re-opened by path.
//! - **Damage**: an entry that fails its open checks is removed and refetched; a record that
//!   fails its CRC is [`Error::Shard`](crate::Error::Shard) naming the key, and the entry is
//!   removed so the next open refetches it.
//!
//! Tested in `root/cache_tests.rs` (beside the reader) and across processes in
//! `tests/tests/it/publish_cache.rs`.

mod dir;
mod fill;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use guideloom_format::ReadOptions;
use guideloom_io::{MmapIo, PreadIo};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use crate::error::{Error, Result};
use crate::key::hex;
use crate::manifest::ShardRef;
use crate::opened::{OpenedShard, open_checked};
use crate::store::{LocalReads, RootStore};
use dir::{GROUP_HEX, Layout, Lookup};
use fill::blocking;

/// The environment variable naming the cache directory ([`CacheOptions::from_env`]).
pub const CACHE_DIR_ENV: &str = "GUIDELOOM_CACHE_DIR";

/// The environment variable giving the cache's byte budget ([`CacheOptions::from_env`]).
pub const CACHE_BYTES_ENV: &str = "GUIDELOOM_CACHE_BYTES";

/// Default [`CacheOptions::budget_bytes`]: 16 GiB.
pub const DEFAULT_CACHE_BUDGET_BYTES: u64 = 16 << 30;

/// Default [`CacheOptions::fill_chunk_bytes`]: 1 MiB.
pub const DEFAULT_FILL_CHUNK_BYTES: u64 = 1 << 20;

/// Default [`CacheOptions::fill_requests`]: 16. Measured over a 20 ms, 100 MB/s link to a
/// threaded moto with two DataLoader workers (docs/cache.md): an epoch's fills kept the link
/// 55 % busy with 8 requests of 1 MiB in flight per process and about 80 % with 16 (32 did
/// no better; 2, 4 and 8 MiB chunks did worse).
pub const DEFAULT_FILL_REQUESTS: usize = 16;

/// Look-ups of one shard before giving up on the cache for it (each round follows another
/// process's fill or removes a damaged entry).
const ATTEMPTS: usize = 4;

/// The shared node cache of a root (a field of [`RootOptions`](crate::RootOptions)): off
/// unless [`dir`](Self::dir) is set.
///
/// ```
/// use guideloom_publish::{CacheOptions, RootOptions};
/// let options = RootOptions::default()
///     .with_cache(CacheOptions::default().with_dir("/mnt/nvme/guideloom-cache").with_budget_bytes(64 << 30));
/// assert!(options.cache.is_on());
/// assert!(!RootOptions::default().cache.is_on());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    /// The cache directory (created if missing), shared by every process given the same
    /// one; `None`: no cache.
    pub dir: Option<PathBuf>,
    /// Most bytes of entries and fills in progress together (default 16 GiB).
    pub budget_bytes: u64,
    /// Cache only roots whose reads are network requests
    /// ([`StoreCapabilities::remote_reads`](crate::StoreCapabilities::remote_reads)), the
    /// default; `false` caches local and `memory://` roots too (tests, benchmarks).
    pub remote_only: bool,
    /// A fill downloads its shard in ranged reads of at most this many bytes (default
    /// [`DEFAULT_FILL_CHUNK_BYTES`]), several at once: measured over a 20 ms link, an 8 MB
    /// shard fills in 260 ms in 1 MiB chunks against 750 ms as one GET (docs/cache.md).
    pub fill_chunk_bytes: u64,
    /// Most ranged requests of fills in flight at once in this process, across all its
    /// fills (default [`DEFAULT_FILL_REQUESTS`]; at least 1).
    pub fill_requests: usize,
    /// How entries are read, as a local root's shards are: mapped (`Auto`, the default, and
    /// `Mmap`: records are zero-copy slices, and a second epoch reads at the local root's
    /// speed) or by positioned reads (`Pread`). Entries are immutable once committed, never
    /// truncated, and only unlinked (a mapping outlives that); truncating one by hand while
    /// it is mapped raises SIGBUS, as for a local root ([`LocalReads::Mmap`]).
    pub reads: LocalReads,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            dir: None,
            budget_bytes: DEFAULT_CACHE_BUDGET_BYTES,
            remote_only: true,
            fill_chunk_bytes: DEFAULT_FILL_CHUNK_BYTES,
            fill_requests: DEFAULT_FILL_REQUESTS,
            reads: LocalReads::Auto,
        }
    }
}

impl CacheOptions {
    /// Sets the cache directory ([`CacheOptions::dir`]), turning the cache on.
    #[must_use]
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Sets how entries are read ([`CacheOptions::reads`]).
    #[must_use]
    pub fn with_reads(mut self, reads: LocalReads) -> Self {
        self.reads = reads;
        self
    }

    /// Sets the byte budget ([`CacheOptions::budget_bytes`]).
    #[must_use]
    pub fn with_budget_bytes(mut self, bytes: u64) -> Self {
        self.budget_bytes = bytes;
        self
    }

    /// Sets whether only remote roots are cached ([`CacheOptions::remote_only`]).
    #[must_use]
    pub fn with_remote_only(mut self, remote_only: bool) -> Self {
        self.remote_only = remote_only;
        self
    }

    /// Sets the size of one ranged request of a fill ([`CacheOptions::fill_chunk_bytes`]).
    #[must_use]
    pub fn with_fill_chunk_bytes(mut self, bytes: u64) -> Self {
        self.fill_chunk_bytes = bytes;
        self
    }

    /// Sets the most fill requests in flight ([`CacheOptions::fill_requests`]).
    #[must_use]
    pub fn with_fill_requests(mut self, requests: usize) -> Self {
        self.fill_requests = requests;
        self
    }

    /// Whether a cache directory is set.
    pub fn is_on(&self) -> bool {
        self.dir.is_some()
    }

    /// The options the environment gives: the directory [`CACHE_DIR_ENV`] (unset or empty:
    /// no cache) and the budget [`CACHE_BYTES_ENV`] in bytes (default
    /// [`DEFAULT_CACHE_BUDGET_BYTES`]); a budget that is not a number is
    /// [`Error::InvalidArgument`].
    pub fn from_env() -> Result<CacheOptions> {
        let mut options = CacheOptions::default();
        if let Some(dir) = std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
            options.dir = Some(dir.into());
        }
        if let Ok(bytes) = std::env::var(CACHE_BYTES_ENV) {
            options.budget_bytes = bytes.trim().parse().map_err(|_| {
                Error::invalid(format!("{CACHE_BYTES_ENV}={bytes:?} is not a byte count"))
            })?;
        }
        Ok(options)
    }
}

/// Counters of a [`NodeCache`] in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Shards opened from an entry already there.
    pub hits: u64,
    /// Shards filled (downloaded whole) by this process, failed fills included.
    pub fills: u64,
    /// The ranged requests of those fills.
    pub fill_requests: u64,
    /// The bytes they received.
    pub fill_bytes: u64,
    /// Shards that did not fit and were read by ranges instead.
    pub bypasses: u64,
    /// Entries this process evicted to make room.
    pub evictions: u64,
    /// Temporary files of dead fillers this process removed.
    pub stale_removed: u64,
    /// Damaged entries removed (then refetched).
    pub discarded: u64,
    /// Times this process waited for another's fill of the same shard.
    pub waits: u64,
}

/// A node cache directory as used by this process (see the module docs). Built by a
/// [`Root`](crate::Root) whose options turn it on; shared by the root's clones and readers.
#[derive(Debug)]
pub struct NodeCache {
    layout: Layout,
    options: CacheOptions,
    stats: Mutex<CacheStats>,
    /// One permit per fill request in flight in this process.
    requests: Semaphore,
}

/// A cache entry opened by a reader: which entry, for removal when its records fail.
#[derive(Debug)]
pub(crate) struct CachedShard {
    pub(crate) shard: OpenedShard,
    pub(crate) name: String,
    pub(crate) file: File,
}

impl NodeCache {
    /// The cache of `options`, or `None` when it is off. Touches nothing on disk until the
    /// first shard is opened.
    pub fn new(options: &CacheOptions) -> Option<Self> {
        let dir = options.dir.as_ref()?;
        Some(NodeCache {
            layout: Layout::new(dir),
            options: options.clone(),
            stats: Mutex::default(),
            requests: Semaphore::new(options.fill_requests.max(1)),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &CacheOptions {
        &self.options
    }

    /// This process's counters.
    pub fn stats(&self) -> CacheStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes in the directory now (entries and fills in progress, every process's): never
    /// above the budget.
    pub fn used_bytes(&self) -> Result<u64> {
        self.layout.used()
    }

    /// The directory of complete entries (for inspection; its files are immutable).
    pub fn entries_dir(&self) -> PathBuf {
        self.layout.entries()
    }

    /// The directory of fills in progress.
    pub fn temp_dir(&self) -> PathBuf {
        self.layout.tmp()
    }

    /// Whether reads of `store` go through this cache.
    pub(crate) fn serves(&self, store: &dyn RootStore) -> bool {
        !self.options.remote_only || store.capabilities().remote_reads
    }

    fn count(&self, f: impl FnOnce(&mut CacheStats)) {
        f(&mut self.stats.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The entry name of `reference` of `store`: `<group>-<sha256>`, the group being the
    /// first hex digits of the hash of the root alone.
    pub(crate) fn entry_name(store: &dyn RootStore, reference: &ShardRef) -> String {
        let root = store.describe();
        let group = hex(&Sha256::digest(root.as_bytes()));
        let mut hasher = Sha256::new();
        hasher.update(root.as_bytes());
        hasher.update(b"\n");
        // A reference always serializes (plain strings and numbers).
        hasher.update(serde_json::to_vec(reference).unwrap_or_default());
        format!("{}-{}", &group[..GROUP_HEX], hex(&hasher.finalize()))
    }

    /// Whether `reference` of `store` has a complete entry now (a look, no lock: an entry
    /// may still go before it is opened, which then fills it again). Entries are only ever
    /// renamed into place whole, so one of the reference's size is complete.
    pub(crate) fn holds(&self, store: &dyn RootStore, reference: &ShardRef) -> bool {
        let entry = self
            .layout
            .entries()
            .join(Self::entry_name(store, reference));
        std::fs::metadata(entry).is_ok_and(|m| m.is_file() && m.len() == reference.size)
    }

    /// Shard `reference` of `store` opened from its entry (filled first if missing), or
    /// `None` when it does not fit the budget (the caller reads it by ranges). Errors of
    /// the shard's bytes (`Verification`, `Shard`) are the reference's; other errors concern
    /// the cache directory or the download.
    pub(crate) async fn open(
        &self,
        store: &Arc<dyn RootStore>,
        reference: &ShardRef,
        read_options: &ReadOptions,
    ) -> Result<Option<CachedShard>> {
        let name = Self::entry_name(store.as_ref(), reference);
        for _ in 0..ATTEMPTS {
            let (lookup, swept) = {
                let layout = self.layout.clone();
                let (name, size, budget) =
                    (name.clone(), reference.size, self.options.budget_bytes);
                blocking(self.layout.root.clone(), move || {
                    layout.lookup(&name, size, budget)
                })
                .await?
            };
            self.count(|s| {
                s.evictions += swept.evicted;
                s.stale_removed += swept.stale;
            });
            match lookup {
                Lookup::Hit(file) => match self.open_entry(&file, reference, read_options).await {
                    Ok(shard) => {
                        self.count(|s| s.hits += 1);
                        return Ok(Some(CachedShard { shard, name, file }));
                    }
                    Err(e) if is_damage(&e) => {
                        warn!(key = %reference.key, error = %e, "damaged cache entry; refetching");
                        self.discard(&name, file).await?;
                    }
                    Err(e) => return Err(e),
                },
                Lookup::Filling(temp) => {
                    self.count(|s| s.waits += 1);
                    let layout = self.layout.clone();
                    blocking(temp.clone(), move || layout.wait_fill(&temp)).await?;
                }
                Lookup::Fill(file, temp) => {
                    self.count(|s| s.fills += 1);
                    return self
                        .fill(store, reference, read_options, (file, temp), &name)
                        .await
                        .map(Some);
                }
                Lookup::NoRoom => {
                    debug!(key = %reference.key, size = reference.size, "no room in the cache");
                    self.count(|s| s.bypasses += 1);
                    return Ok(None);
                }
            }
        }
        self.count(|s| s.bypasses += 1);
        Ok(None)
    }

    /// Fills a reservation, checks it, commits it and opens it. A failure removes the
    /// temporary file (a cancelled fill leaves it to the next stale sweep).
    async fn fill(
        &self,
        store: &Arc<dyn RootStore>,
        reference: &ShardRef,
        read_options: &ReadOptions,
        (file, temp): (File, PathBuf),
        name: &str,
    ) -> Result<CachedShard> {
        let file = Arc::new(file);
        let filled = async {
            self.download(store, reference, Arc::clone(&file), &temp)
                .await?;
            let shard = self.open_entry(&file, reference, read_options).await?;
            let layout = self.layout.clone();
            let (commit_file, commit_temp, commit_name) =
                (Arc::clone(&file), temp.clone(), name.to_owned());
            blocking(temp.clone(), move || {
                layout.commit(&commit_file, &commit_temp, &commit_name)
            })
            .await?;
            Ok(shard)
        }
        .await;
        match filled {
            Ok(shard) => {
                let file = Arc::try_unwrap(file).map_err(|_| {
                    Error::io(
                        &temp,
                        std::io::Error::other("cache file still shared after its fill"),
                    )
                })?;
                Ok(CachedShard {
                    shard,
                    name: name.to_owned(),
                    file,
                })
            }
            Err(e) => {
                self.layout.abandon(&temp);
                Err(e)
            }
        }
    }

    /// Opens an entry's file for local reads (its own descriptor, sharing the lock's open
    /// file description) and checks it against `reference`.
    async fn open_entry(
        &self,
        file: &File,
        reference: &ShardRef,
        read_options: &ReadOptions,
    ) -> Result<OpenedShard> {
        let dup = file
            .try_clone()
            .map_err(|e| Error::io(&self.layout.root, e))?;
        let len = dup
            .metadata()
            .map_err(|e| Error::io(&self.layout.root, e))?
            .len();
        if len != reference.size {
            return Err(Error::Verification {
                key: reference.key.clone(),
                what: "size",
                expected: reference.size.to_string(),
                actual: format!("{len} (cache entry)"),
            });
        }
        let location = format!("cache entry of {}", reference.key);
        let reader = match self.options.reads {
            LocalReads::Pread => PreadIo::new().open_file_async(dup, &location),
            LocalReads::Auto | LocalReads::Mmap => MmapIo::new().open_file_async(dup, &location),
        };
        let reader = reader.map_err(|source| Error::Read {
            key: reference.key.clone(),
            source,
        })?;
        open_checked(reader, reference, read_options).await
    }

    /// Removes a damaged entry (if it is still `file`), so the next look-up refetches it.
    async fn discard(&self, name: &str, file: File) -> Result<()> {
        let layout = self.layout.clone();
        let name = name.to_owned();
        let removed = blocking(self.layout.root.clone(), move || {
            layout.discard(&name, &file)
        })
        .await?;
        if removed {
            self.count(|s| s.discarded += 1);
        }
        Ok(())
    }

    /// [`discard`](Self::discard) on the calling thread: a few file system calls under the
    /// directory lock, on the rare path of a record that failed its checks.
    pub(crate) fn discard_now(&self, name: &str, file: &File) -> Result<()> {
        if self.layout.discard(name, file)? {
            self.count(|s| s.discarded += 1);
        }
        Ok(())
    }

    /// The directory of this cache.
    pub fn dir(&self) -> &Path {
        self.layout.root.parent().unwrap_or(&self.layout.root)
    }
}

/// Errors that say the bytes are not the reference's (as opposed to a failing disk or
/// network).
pub(crate) fn is_damage(e: &Error) -> bool {
    e.is_shard_error() || matches!(e, Error::Verification { .. })
}
