//! Whole-shard staging for in-order scans of remote roots.
//!
//! Random access reads a record with one ranged request ([`Dataset::get`]). A scan
//! that reads every record of a shard in order does better by fetching the shard whole, once,
//! and reading it locally: [`Dataset::scan`] does that through a [`Stager`].
//!
//! - **Ranged requests in parallel.** A shard is fetched with ranged reads of at most
//!   [`StagingOptions::download_chunk_bytes`] (64 MiB by default) through the root's own store
//!   (the store the root was built with: a store the user passed is the one that downloads —
//!   never a default one). Up to [`StagingOptions::parallel_requests`] (default 4) of a
//!   stager's requests are in flight at once, across the chunks of one shard and the shards
//!   scans fetch ahead; each chunk is written at its offset in the staged file (`pwrite`)
//!   as it arrives, and its request slot is given back only then, so a stager holds at most
//!   `parallel_requests` chunks in memory. With `parallel_requests: 1` a download is one
//!   request at a time, in order, and scans fetch no shard ahead (the sequential scan).
//! - **Prefetch.** A [`Scan`] (and an in-order read that stages,
//!   [`Dataset::read_in_order`]) starts downloading the next shards it will read —
//!   up to `parallel_requests` shards ahead of the one it reads — while the reader is still
//!   in the current one. A prefetch is only started when its shard fits the byte budget
//!   beside what is staged (it may evict unheld shards the way the read would, never a held
//!   one); otherwise it is skipped and retried later, and the shard is fetched when the
//!   reader reaches it, as without prefetch. A read that needs room takes it from prefetched
//!   shards nobody has reached yet (finished ones are evicted, running ones cancelled), so
//!   prefetch never turns into an [`Error::StagingBudget`] the sequential scan would not
//!   give. A failed prefetch reports its typed error (naming the shard) when the reader
//!   reaches that shard; a scan dropped early cancels its running prefetches and releases
//!   their reservations (a cancelled download stops at its next await: at most the chunk
//!   writes already handed to the blocking pool finish, into a file that is then closed).
//! - **Unnamed files.** Each staged shard lives in an unnamed temporary file
//!   (`tempfile::tempfile_in`: `O_TMPFILE` on Linux, an unlinked file elsewhere on unix) in
//!   [`StagingOptions::dir`]. No name appears in the directory, and the OS reclaims the
//!   space when the file is closed — also when the process crashes.
//! - **Byte budget.** At most [`StagingOptions::budget_bytes`] bytes are staged at once,
//!   prefetched shards included (a download reserves its shard's size before its first
//!   request). Before a download, least-recently-used staged shards that no reader holds are
//!   evicted (closed, so reclaimed). A shard larger than the whole budget, or one that does
//!   not fit beside the shards readers hold, is refused with [`Error::StagingBudget`], which
//!   names the shard's size, the budget and the bytes held — it is never read some other way
//!   behind the caller's back; read it by ranges ([`Dataset::get_many`]) or raise the
//!   budget.
//! - **Reuse.** A staged shard stays open and is reused by every read that stays in it, and
//!   by later scans while it is not evicted; concurrent scans of one shard share one
//!   download.
//! - **Checks.** The download must have the reference's size and, for shards published with
//!   a SHA-256 checksum, its hash (computed over the staged file once every chunk is in);
//!   the staged shard's footer must give the reference's record count; record CRCs are
//!   checked on read. A corrupt or truncated download is a typed error
//!   ([`Error::Verification`], [`Error::Read`] or [`Error::Corrupt`]) naming the shard, and is
//!   not kept (a shard whose records fail their CRC is dropped once no reader holds it).
//! - **Local reads.** Reads from the staged file go through guideloom-io's `PreadIo`
//!   ([`PreadIo::open_file_async`]), on tokio's blocking pool.
//!
//! The stager of a [`Root`](crate::Root) is shared by its clones and readers, so the budget
//! and the request limit hold for all of them together; two roots built separately have
//! separate ones.
//!
//! [`Dataset::get`]: crate::Dataset::get
//! [`Dataset::get_many`]: crate::Dataset::get_many
//! [`Dataset::scan`]: crate::Dataset::scan
//! [`Dataset::read_in_order`]: crate::Dataset::read_in_order
//! [`PreadIo::open_file_async`]: guideloom_io::PreadIo::open_file_async
//!
//! Tested in `root/prefetch_tests.rs` (beside the reader, which may import both `root` and
//! `staging`), and end to end in `tests/tests/it/publish_staging.rs`.

mod download;
mod prefetch;
mod scan;

pub(crate) use download::{check_version, chunks, hash_file};
pub(crate) use prefetch::Prefetcher;
pub use scan::Scan;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use guideloom_format::ReadOptions;
use guideloom_io::StatsSnapshot;
use tokio::sync::{OnceCell, Semaphore};
use tokio::task::AbortHandle;
use tracing::debug;

use crate::error::{Error, Result};
use crate::manifest::ShardRef;
use crate::opened::OpenedShard;
use crate::store::RootStore;

/// Default [`StagingOptions::budget_bytes`]: 4 GiB.
pub(crate) const DEFAULT_STAGING_BUDGET_BYTES: u64 = 4 << 30;

/// Default [`StagingOptions::download_chunk_bytes`]: 64 MiB.
pub(crate) const DEFAULT_DOWNLOAD_CHUNK_BYTES: u64 = 64 << 20;

/// Default [`StagingOptions::parallel_requests`]: 4.
pub const DEFAULT_PARALLEL_REQUESTS: usize = 4;

/// Where and how much whole-shard staging may store (a field of
/// [`RootOptions`](crate::RootOptions)).
///
/// ```
/// use guideloom_publish::{RootOptions, StagingOptions};
/// let options = RootOptions::default().with_staging(
///     StagingOptions::default()
///         .with_dir("/mnt/nvme/guideloom")
///         .with_budget_bytes(16 << 30)
///         .with_parallel_requests(8),
/// );
/// assert_eq!(options.staging.directory(), std::path::Path::new("/mnt/nvme/guideloom"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagingOptions {
    /// Directory of the unnamed staging files (must exist); `None`: the system temporary
    /// directory (`std::env::temp_dir()`, `TMPDIR` on unix). Pick a local disk with room for
    /// the budget; files there have no names and vanish when closed. Shard writes to object
    /// stores spool here too ([`Spooled`](crate::Spooled): up to
    /// [`RootOptions::max_encoded_shard_bytes`](crate::RootOptions::max_encoded_shard_bytes)
    /// per write in progress, outside the budget, which counts staged reads). A directory on
    /// `tmpfs` keeps those files in memory.
    pub dir: Option<PathBuf>,
    /// Most bytes staged at once (default 4 GiB), prefetched shards included. A scan needs
    /// at least its largest shard; prefetch uses what is left beside it.
    pub budget_bytes: u64,
    /// A shard is downloaded in ranged reads of at most this many bytes (default
    /// 64 MiB), each written at its offset in the staging file as it arrives: one request
    /// for shards up to this size.
    pub download_chunk_bytes: u64,
    /// Most ranged requests the stager has in flight at once (default
    /// [`DEFAULT_PARALLEL_REQUESTS`]), across the chunks of a shard and the shards scans
    /// fetch ahead; also how many shards a scan fetches ahead of the one it reads. At most
    /// this many chunks are in memory. `1` (or `0`): one request at a time and no prefetch.
    pub parallel_requests: usize,
}

impl Default for StagingOptions {
    fn default() -> Self {
        StagingOptions {
            dir: None,
            budget_bytes: DEFAULT_STAGING_BUDGET_BYTES,
            download_chunk_bytes: DEFAULT_DOWNLOAD_CHUNK_BYTES,
            parallel_requests: DEFAULT_PARALLEL_REQUESTS,
        }
    }
}

impl StagingOptions {
    /// Sets the directory of the staging files ([`StagingOptions::dir`]).
    #[must_use]
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Sets the most bytes staged at once ([`StagingOptions::budget_bytes`]).
    #[must_use]
    pub fn with_budget_bytes(mut self, bytes: u64) -> Self {
        self.budget_bytes = bytes;
        self
    }

    /// Sets the size of one ranged download ([`StagingOptions::download_chunk_bytes`]).
    #[must_use]
    pub fn with_download_chunk_bytes(mut self, bytes: u64) -> Self {
        self.download_chunk_bytes = bytes;
        self
    }

    /// Sets the most ranged requests in flight ([`StagingOptions::parallel_requests`]).
    #[must_use]
    pub fn with_parallel_requests(mut self, requests: usize) -> Self {
        self.parallel_requests = requests;
        self
    }

    /// The directory staging files are created in.
    pub fn directory(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Requests in flight at once: [`parallel_requests`](Self::parallel_requests), at least 1.
    pub fn requests_in_flight(&self) -> usize {
        self.parallel_requests.max(1)
    }

    /// Shards a scan fetches ahead of the one it reads: 0 when one request at a time is
    /// allowed, otherwise [`parallel_requests`](Self::parallel_requests).
    pub fn prefetch_shards(&self) -> usize {
        match self.parallel_requests {
            0 | 1 => 0,
            n => n,
        }
    }
}

/// Counters of a [`Stager`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StagingStats {
    /// Shards downloaded, failed downloads included.
    pub downloads: u64,
    /// Of those, the downloads started ahead of the reader (prefetches), cancelled ones
    /// included.
    pub prefetches: u64,
    /// Prefetches cancelled before they finished: by a scan dropped early, or to make room
    /// for a shard a reader needs.
    pub prefetches_cancelled: u64,
    /// The store requests of those downloads, in guideloom-io's vocabulary: `requests` (one
    /// ranged read per [`StagingOptions::download_chunk_bytes`] chunk) and `bytes_received`.
    pub store: StatsSnapshot,
    /// Requests for a shard that was already staged (or being staged).
    pub reuses: u64,
    /// Staged shards evicted to make room.
    pub evictions: u64,
    /// Bytes staged now (reserved from the start of a download).
    pub staged_bytes: u64,
    /// The most bytes ever staged at once (never above the budget).
    pub peak_staged_bytes: u64,
}

/// One staged shard: an open unnamed file read through `PreadIo`, with its parsed footer.
#[derive(Debug)]
pub struct StagedShard {
    key: String,
    size: u64,
    shard: OpenedShard,
}

impl StagedShard {
    /// The shard's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The opened shard (local reads), in its format.
    pub fn shard(&self) -> &OpenedShard {
        &self.shard
    }
}

pub(crate) type Cell = Arc<OnceCell<Arc<StagedShard>>>;

#[derive(Debug)]
struct Slot {
    size: u64,
    last_used: u64,
    cell: Cell,
    /// Reserved by a prefetch that no reader has claimed yet; the running download's
    /// abort handle while it runs. Such a slot gives way to a read that needs room.
    prefetch: Option<Option<AbortHandle>>,
}

impl Slot {
    /// Nobody waits for it and no reader holds it.
    fn evictable(&self) -> bool {
        Arc::strong_count(&self.cell) == 1
            && self.cell.get().is_none_or(|s| Arc::strong_count(s) == 1)
    }

    /// A prefetch nobody claimed: finished and unheld, or still running (then cancelled).
    fn preemptible(&self) -> bool {
        match &self.prefetch {
            Some(Some(_)) => true,
            Some(None) => self.evictable(),
            None => false,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    slots: HashMap<String, Slot>,
    tick: u64,
    stats: StagingStats,
}

impl State {
    /// Removes slot `key`, giving its bytes back; counts it as an eviction or a cancelled
    /// prefetch (aborting its download).
    fn drop_slot(&mut self, key: &str) {
        if let Some(slot) = self.slots.remove(key) {
            self.stats.staged_bytes -= slot.size;
            match slot.prefetch {
                Some(Some(abort)) if slot.cell.get().is_none() => {
                    debug!(key, size = slot.size, "cancelling a prefetch to make room");
                    abort.abort();
                    self.stats.prefetches_cancelled += 1;
                }
                _ => {
                    debug!(key, size = slot.size, "evicting a staged shard");
                    self.stats.evictions += 1;
                }
            }
        }
    }

    /// Bytes that evicting unheld, claimed (or never prefetched) shards would free.
    fn evictable_bytes(&self) -> u64 {
        self.slots
            .values()
            .filter(|s| s.prefetch.is_none() && s.evictable())
            .map(|s| s.size)
            .sum()
    }

    /// Evicts least-recently-used unheld shards until `size` more bytes fit the budget;
    /// with `preempt`, then also unclaimed prefetches, farthest ahead first. Whether it fits.
    fn make_room(&mut self, size: u64, budget: u64, preempt: bool) -> bool {
        while self.stats.staged_bytes.saturating_add(size) > budget {
            let lru = self
                .slots
                .iter()
                .filter(|(_, s)| s.prefetch.is_none() && s.evictable())
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone());
            let victim = lru.or_else(|| {
                preempt
                    .then(|| {
                        self.slots
                            .iter()
                            .filter(|(_, s)| s.preemptible())
                            .max_by_key(|(_, s)| s.last_used)
                            .map(|(k, _)| k.clone())
                    })
                    .flatten()
            });
            let Some(victim) = victim else {
                return false;
            };
            self.drop_slot(&victim);
        }
        true
    }

    /// Inserts a new slot for `reference`.
    fn insert(&mut self, reference: &ShardRef, prefetch: bool) -> Cell {
        self.tick += 1;
        let cell: Cell = Arc::new(OnceCell::new());
        self.slots.insert(
            reference.key.clone(),
            Slot {
                size: reference.size,
                last_used: self.tick,
                cell: Arc::clone(&cell),
                prefetch: prefetch.then_some(None),
            },
        );
        self.stats.staged_bytes += reference.size;
        self.stats.peak_staged_bytes = self.stats.peak_staged_bytes.max(self.stats.staged_bytes);
        cell
    }
}

/// What [`Stager::prefetch`] did.
#[derive(Debug)]
pub(crate) enum Prefetch {
    /// A download started ahead of the reader: its reservation and task.
    Started(Cell, tokio::task::JoinHandle<Result<()>>),
    /// The shard is staged or being staged already (the reader will reuse it).
    Present,
    /// It does not fit the budget now (or there is no runtime to run it on).
    NoRoom,
}

/// Stages whole shards of one store into unnamed local files under a byte budget.
#[derive(Debug)]
pub struct Stager {
    store: Arc<dyn RootStore>,
    options: StagingOptions,
    read_options: ReadOptions,
    /// One permit per ranged request in flight (and chunk in memory).
    requests: Semaphore,
    state: Mutex<State>,
}

impl Stager {
    /// A stager downloading through `store`.
    pub fn new(store: Arc<dyn RootStore>, options: StagingOptions) -> Self {
        Stager {
            store,
            requests: Semaphore::new(options.requests_in_flight()),
            options,
            read_options: ReadOptions::default(),
            state: Mutex::new(State::default()),
        }
    }

    /// The options in force.
    pub fn options(&self) -> &StagingOptions {
        &self.options
    }

    /// The counters so far.
    pub fn stats(&self) -> StagingStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The staged shard for `reference`: reused if staged, otherwise downloaded (ranged
    /// reads, up to [`StagingOptions::parallel_requests`] at once) after evicting
    /// least-recently-used unheld shards (and, if that is not enough, prefetches nobody has
    /// reached) to fit the budget. The returned handle keeps the shard from being evicted
    /// while it lives.
    pub async fn stage(&self, reference: &ShardRef) -> Result<Arc<StagedShard>> {
        let cell = self.reserve(reference)?;
        self.complete(&cell, reference).await
    }

    /// Waits for (or runs) the download of a reserved slot; a failure gives the
    /// reservation back.
    pub(crate) async fn complete(
        &self,
        cell: &Cell,
        reference: &ShardRef,
    ) -> Result<Arc<StagedShard>> {
        let result = cell
            .get_or_try_init(|| self.download(reference))
            .await
            .cloned();
        if result.is_err() {
            self.abandon(&reference.key, cell);
        }
        result
    }

    /// Drops the reservation `cell` of `key` if it is still the slot's and holds no shard
    /// (a failed or cancelled download; another attempt's slot is left alone).
    pub(crate) fn abandon(&self, key: &str, cell: &Cell) {
        let mut state = self.lock();
        if let Some(slot) = state.slots.get(key)
            && Arc::ptr_eq(&slot.cell, cell)
            && slot.cell.get().is_none()
            && let Some(slot) = state.slots.remove(key)
        {
            state.stats.staged_bytes -= slot.size;
        }
    }

    /// Drops the staged copy of `key` unless someone still holds it (a shard whose records
    /// failed their checks is not kept for the next reader).
    pub(crate) fn discard(&self, key: &str) {
        let mut state = self.lock();
        if state.slots.get(key).is_some_and(Slot::evictable)
            && let Some(slot) = state.slots.remove(key)
        {
            state.stats.staged_bytes -= slot.size;
        }
    }

    /// Finds (claiming a prefetch) or reserves the slot of `reference` under the budget.
    pub(crate) fn reserve(&self, reference: &ShardRef) -> Result<Cell> {
        let budget = self.options.budget_bytes;
        let mut state = self.lock();
        state.tick += 1;
        let tick = state.tick;
        if let Some(slot) = state.slots.get_mut(&reference.key) {
            slot.last_used = tick;
            slot.prefetch = None;
            let cell = Arc::clone(&slot.cell);
            state.stats.reuses += 1;
            return Ok(cell);
        }
        if !state.make_room(reference.size, budget, true) {
            return Err(Error::StagingBudget {
                key: reference.key.clone(),
                size: reference.size,
                budget,
                held: state.stats.staged_bytes,
            });
        }
        Ok(state.insert(reference, false))
    }

    /// Starts downloading `reference` ahead of the reader, if it fits the budget beside
    /// what is staged without evicting a held shard or another prefetch.
    pub(crate) fn prefetch(self: &Arc<Self>, reference: &ShardRef) -> Prefetch {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Prefetch::NoRoom;
        };
        let budget = self.options.budget_bytes;
        let mut state = self.lock();
        if state.slots.contains_key(&reference.key) {
            return Prefetch::Present;
        }
        let free = budget.saturating_sub(state.stats.staged_bytes) + state.evictable_bytes();
        if reference.size > free || !state.make_room(reference.size, budget, false) {
            return Prefetch::NoRoom;
        }
        let cell = state.insert(reference, true);
        state.stats.prefetches += 1;
        let task = runtime.spawn({
            let stager = Arc::clone(self);
            let cell = Arc::clone(&cell);
            let reference = reference.clone();
            async move { stager.complete(&cell, &reference).await.map(drop) }
        });
        if let Some(slot) = state.slots.get_mut(&reference.key) {
            slot.prefetch = Some(Some(task.abort_handle()));
        }
        Prefetch::Started(cell, task)
    }

    /// A prefetch of `key` that its scan no longer wants (the scan was dropped): cancelled
    /// and its reservation given back unless it finished or a reader claimed it.
    pub(crate) fn cancel_prefetch(&self, key: &str, cell: &Cell) {
        let mut state = self.lock();
        if let Some(slot) = state.slots.get(key)
            && Arc::ptr_eq(&slot.cell, cell)
            && slot.prefetch.is_some()
            && slot.cell.get().is_none()
        {
            state.drop_slot(key);
        }
    }

    /// Runs file work on tokio's blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        tokio::task::spawn_blocking(f).await.map_err(|e| {
            Error::io(
                self.options.directory(),
                std::io::Error::other(format!("staging task failed: {e}")),
            )
        })?
    }
}
