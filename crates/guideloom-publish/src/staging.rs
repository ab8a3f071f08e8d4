//! Whole-shard staging for in-order scans of remote roots.
//!
//! Random access reads a record with one ranged request ([`SnapshotReader::get`]). A scan
//! that reads every record of a shard in order does better by fetching the shard whole, once,
//! and reading it locally: [`SnapshotReader::scan`] does that through a [`Stager`].
//!
//! - **One request per shard** (per [`StagingOptions::download_chunk_bytes`], 64 MiB by
//!   default, for larger shards). A shard is fetched with ranged reads through the root's
//!   own store (the store the root was built with: a store the user passed is the one that
//!   downloads — never a default one); each chunk is written to the file before the next is
//!   fetched, so a download holds at most one chunk in memory.
//! - **Unnamed files.** Each staged shard lives in an unnamed temporary file
//!   (`tempfile::tempfile_in`: `O_TMPFILE` on Linux, an unlinked file elsewhere on unix) in
//!   [`StagingOptions::dir`]. No name appears in the directory, and the OS reclaims the
//!   space when the file is closed — also when the process crashes.
//! - **Byte budget.** At most [`StagingOptions::budget_bytes`] bytes are staged at once.
//!   Before a download, least-recently-used staged shards that no reader holds are evicted
//!   (closed, so reclaimed). A shard larger than the whole budget, or one that does not fit
//!   beside the shards readers hold, is refused with [`Error::StagingBudget`], which names
//!   the shard's size, the budget and the bytes held — it is never read some other way
//!   behind the caller's back; read it by ranges ([`SnapshotReader::get_many`]) or raise the
//!   budget.
//! - **Reuse.** A staged shard stays open and is reused by every read that stays in it, and
//!   by later scans while it is not evicted; concurrent scans of one shard share one
//!   download.
//! - **Checks.** The download must have the reference's size and, for shards published with
//!   a SHA-256 checksum, its hash; the staged shard's footer must give the reference's record
//!   count; record CRCs are checked on read. A corrupt or truncated download is a typed error
//!   ([`Error::Verification`], [`Error::Read`] or [`Error::Corrupt`]) naming the shard, and is
//!   not kept (a shard whose records fail their CRC is dropped once no reader holds it).
//! - **Local reads.** Reads from the staged file go through guideloom-io's `PreadIo`
//!   ([`PreadIo::open_file_async`]), on tokio's blocking pool.
//!
//! The stager of a [`Root`](crate::Root) is shared by its clones and readers, so the budget
//! holds for all of them together; two roots built separately have separate budgets.
//!
//! [`SnapshotReader::get`]: crate::SnapshotReader::get
//! [`SnapshotReader::get_many`]: crate::SnapshotReader::get_many
//! [`SnapshotReader::scan`]: crate::SnapshotReader::scan

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use guideloom_format::{ReadOptions, Run, RunBudget, Runs, ShardTable};
use guideloom_io::{PreadIo, StatsSnapshot};
use tokio::sync::OnceCell;
use tracing::{Instrument, debug, info_span};

use crate::error::{Error, Result};
use crate::key::hex;
use crate::manifest::{Checksum, ShardRef};
use crate::opened::{OpenedShard, open_checked};
use crate::store::RootStore;
use sha2::{Digest, Sha256};

/// Default [`StagingOptions::budget_bytes`]: 4 GiB.
pub(crate) const DEFAULT_STAGING_BUDGET_BYTES: u64 = 4 << 30;

/// Default [`StagingOptions::download_chunk_bytes`]: 64 MiB.
pub(crate) const DEFAULT_DOWNLOAD_CHUNK_BYTES: u64 = 64 << 20;

/// Where and how much whole-shard staging may store (a field of
/// [`RootOptions`](crate::RootOptions)).
///
/// ```
/// use guideloom_publish::{RootOptions, StagingOptions};
/// let options = RootOptions {
///     staging: StagingOptions {
///         dir: Some("/mnt/nvme/guideloom".into()),
///         budget_bytes: 16 << 30,
///         ..StagingOptions::default()
///     },
///     ..RootOptions::default()
/// };
/// assert_eq!(options.staging.directory(), std::path::Path::new("/mnt/nvme/guideloom"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagingOptions {
    /// Directory of the unnamed staging files (must exist); `None`: the system temporary
    /// directory (`std::env::temp_dir()`, `TMPDIR` on unix). Pick a local disk with room for
    /// the budget; files there have no names and vanish when closed.
    pub dir: Option<PathBuf>,
    /// Most bytes staged at once (default 4 GiB). A scan needs at
    /// least its largest shard.
    pub budget_bytes: u64,
    /// A shard is downloaded in ranged reads of at most this many bytes (default
    /// 64 MiB), each written to the staging file before the
    /// next: one request for shards up to this size, and never more than this in memory.
    pub download_chunk_bytes: u64,
}

impl Default for StagingOptions {
    fn default() -> Self {
        StagingOptions {
            dir: None,
            budget_bytes: DEFAULT_STAGING_BUDGET_BYTES,
            download_chunk_bytes: DEFAULT_DOWNLOAD_CHUNK_BYTES,
        }
    }
}

impl StagingOptions {
    /// The directory staging files are created in.
    pub fn directory(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// Counters of a [`Stager`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StagingStats {
    /// Shards downloaded, failed downloads included.
    pub downloads: u64,
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

type Cell = Arc<OnceCell<Arc<StagedShard>>>;

#[derive(Debug)]
struct Slot {
    size: u64,
    last_used: u64,
    cell: Cell,
}

impl Slot {
    /// Nobody waits for it and no reader holds it.
    fn evictable(&self) -> bool {
        Arc::strong_count(&self.cell) == 1
            && self.cell.get().is_none_or(|s| Arc::strong_count(s) == 1)
    }
}

#[derive(Debug, Default)]
struct State {
    slots: HashMap<String, Slot>,
    tick: u64,
    stats: StagingStats,
}

/// Stages whole shards of one store into unnamed local files under a byte budget.
#[derive(Debug)]
pub struct Stager {
    store: Arc<dyn RootStore>,
    options: StagingOptions,
    read_options: ReadOptions,
    state: Mutex<State>,
}

impl Stager {
    /// A stager downloading through `store`.
    pub fn new(store: Arc<dyn RootStore>, options: StagingOptions) -> Self {
        Stager {
            store,
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

    /// The staged shard for `reference`: reused if staged, otherwise downloaded (one ranged
    /// read of the whole shard) after evicting least-recently-used unheld shards to fit the
    /// budget. The returned handle keeps the shard from being evicted while it lives.
    pub async fn stage(&self, reference: &ShardRef) -> Result<Arc<StagedShard>> {
        let cell = self.reserve(reference)?;
        let result = cell
            .get_or_try_init(|| self.download(reference))
            .await
            .cloned();
        if result.is_err() {
            // Drop the reservation of a failed download (unless another attempt replaced it).
            let mut state = self.lock();
            if let Some(slot) = state.slots.get(&reference.key)
                && Arc::ptr_eq(&slot.cell, &cell)
                && slot.cell.get().is_none()
                && let Some(slot) = state.slots.remove(&reference.key)
            {
                state.stats.staged_bytes -= slot.size;
            }
        }
        result
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

    /// Finds or reserves the slot of `reference` under the budget.
    fn reserve(&self, reference: &ShardRef) -> Result<Cell> {
        let budget = self.options.budget_bytes;
        let mut state = self.lock();
        state.tick += 1;
        let tick = state.tick;
        if let Some(slot) = state.slots.get_mut(&reference.key) {
            slot.last_used = tick;
            let cell = Arc::clone(&slot.cell);
            state.stats.reuses += 1;
            return Ok(cell);
        }
        let size = reference.size;
        while state.stats.staged_bytes.saturating_add(size) > budget {
            let victim = state
                .slots
                .iter()
                .filter(|(_, s)| s.evictable())
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else {
                return Err(Error::StagingBudget {
                    key: reference.key.clone(),
                    size,
                    budget,
                    held: state.stats.staged_bytes,
                });
            };
            if let Some(slot) = state.slots.remove(&victim) {
                debug!(key = %victim, size = slot.size, "evicting a staged shard");
                state.stats.staged_bytes -= slot.size;
                state.stats.evictions += 1;
            }
        }
        let cell: Cell = Arc::new(OnceCell::new());
        state.slots.insert(
            reference.key.clone(),
            Slot {
                size,
                last_used: tick,
                cell: Arc::clone(&cell),
            },
        );
        state.stats.staged_bytes += size;
        state.stats.peak_staged_bytes = state.stats.peak_staged_bytes.max(state.stats.staged_bytes);
        Ok(cell)
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

    async fn download(&self, reference: &ShardRef) -> Result<Arc<StagedShard>> {
        let key = reference.key.clone();
        let size = reference.size;
        let span = info_span!("stage_shard", root = %self.store.describe(), key = %key, size);
        async {
            {
                let mut state = self.lock();
                state.stats.downloads += 1;
            }
            let want_sha = match &reference.checksum {
                Some(Checksum::Sha256(hex)) => Some(hex.clone()),
                _ => None,
            };
            let dir = self.options.directory();
            let blocking_dir = dir.clone();
            let mut file = self
                .blocking(move || {
                    tempfile::tempfile_in(&blocking_dir).map_err(|e| Error::io(&blocking_dir, e))
                })
                .await?;
            let mut hasher = want_sha.as_ref().map(|_| Sha256::new());
            let chunk = self.options.download_chunk_bytes.max(1);
            let mut offset = 0u64;
            while offset < size {
                let len = chunk.min(size - offset);
                self.lock().stats.store.requests += 1;
                let bytes = self.store.get_range(&key, offset..offset + len).await?;
                self.lock().stats.store.bytes_received += bytes.len() as u64;
                if bytes.len() as u64 != len {
                    return Err(Error::Verification {
                        key,
                        what: "size",
                        expected: size.to_string(),
                        actual: (offset + bytes.len() as u64).to_string(),
                    });
                }
                let write_dir = dir.clone();
                (file, hasher) = self
                    .blocking(move || {
                        if let Some(h) = hasher.as_mut() {
                            h.update(&bytes);
                        }
                        file.write_all(&bytes)
                            .map_err(|e| Error::io(&write_dir, e))?;
                        Ok((file, hasher))
                    })
                    .await?;
                offset += len;
            }
            if let (Some(want), Some(h)) = (want_sha, hasher) {
                let got = hex(&h.finalize());
                if got != want {
                    return Err(Error::Verification {
                        key,
                        what: "sha256",
                        expected: want,
                        actual: got,
                    });
                }
            }
            let location = format!("staged copy of {}/{key}", self.store.describe());
            let reader = PreadIo::new()
                .open_file_async(file, &location)
                .map_err(|source| Error::Read {
                    key: key.clone(),
                    source,
                })?;
            let shard = open_checked(reader, reference, &self.read_options).await?;
            debug!("staged");
            Ok(Arc::new(StagedShard { key, size, shard }))
        }
        .instrument(span)
        .await
    }
}

/// An in-order scan of a range of records through whole-shard staging, from
/// [`SnapshotReader::scan`](crate::SnapshotReader::scan).
///
/// It holds the staged shard it is reading (so it is not evicted) and releases it before
/// staging the next one, so a scan needs a budget of at least its largest shard.
#[derive(Debug)]
pub struct Scan<'a> {
    stager: &'a Stager,
    shards: &'a [ShardRef],
    /// The per-shard pieces of the range still to stage.
    pieces: Runs<'a>,
    /// The piece being read: its remaining local records.
    piece: Option<Run>,
    remaining: u64,
    current: Option<(usize, Arc<StagedShard>)>,
    buffered: VecDeque<Bytes>,
}

impl<'a> Scan<'a> {
    /// A scan of records `range` of a snapshot with `shards` located by `table`.
    pub(crate) fn new(
        stager: &'a Stager,
        shards: &'a [ShardRef],
        table: &'a ShardTable,
        range: Range<u64>,
    ) -> Self {
        Scan {
            stager,
            shards,
            remaining: range.end.saturating_sub(range.start),
            pieces: table.runs(range),
            piece: None,
            current: None,
            buffered: VecDeque::new(),
        }
    }

    /// Records not yet returned.
    pub fn remaining(&self) -> u64 {
        self.remaining + self.buffered.len() as u64
    }

    /// The next record, or `None` at the end of the range.
    pub async fn next_record(&mut self) -> Option<Result<Bytes>> {
        if self.buffered.is_empty() {
            match self.next_batch().await {
                Ok(Some(batch)) => self.buffered.extend(batch),
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        self.buffered.pop_front().map(Ok)
    }

    /// The next run of consecutive records (one local read of at most one
    /// [`RunBudget::default`]),
    /// or `None` at the end of the range. Records already buffered by
    /// [`next_record`](Self::next_record) come first.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Bytes>>> {
        if !self.buffered.is_empty() {
            return Ok(Some(self.buffered.drain(..).collect()));
        }
        let Some(piece) = self
            .piece
            .take()
            .filter(|p| p.count > 0)
            .or_else(|| self.pieces.next())
        else {
            self.current = None;
            return Ok(None);
        };
        let i = piece.shard;
        let staged = match &self.current {
            Some((c, s)) if *c == i => Arc::clone(s),
            _ => {
                // Release the previous shard first: it may have to make room.
                self.current = None;
                let s = self.stager.stage(&self.shards[i]).await?;
                self.current = Some((i, Arc::clone(&s)));
                s
            }
        };
        let shard = staged.shard();
        let run = shard.next_run(piece, RunBudget::default());
        let (first, count) = (run.first, run.count);
        let records = match shard.read_run(staged.key(), first, count).await {
            Ok(records) => records,
            Err(e) => {
                let key = staged.key().to_owned();
                drop(staged);
                self.current = None;
                self.stager.discard(&key);
                return Err(e);
            }
        };
        self.piece = Some(Run {
            shard: i,
            first: first + count,
            count: piece.count - count,
        });
        self.remaining -= count;
        Ok(Some(records))
    }
}
