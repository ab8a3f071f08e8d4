//! The loader's options and the values it hands out: batches and resumable states.

use guideloom_publish::{DEFAULT_READ_AHEAD_BATCHES, DEFAULT_READ_AHEAD_BYTES};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::Loader;
use super::order::ShuffleMode;
use crate::error::{Error, Result};

/// How batch counts are made equal across ranks (uneven counts deadlock collective
/// operations in distributed training).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Equalize {
    /// No equalisation: every record exactly once; ranks may differ by one batch (and the
    /// last batch may be short unless `drop_last`).
    #[default]
    None,
    /// Pad: extend the epoch with records repeated from the start of the global order
    /// (position `n + i` is the record at position `i mod n`) until every rank has the same
    /// number of full batches. Every record at least once; only the padding repeats.
    Pad,
    /// Drop: cut the epoch to the largest number of batches divisible by `world_size`. The
    /// dropped records (the end of the global order) are not seen this epoch; a new epoch's
    /// order drops different ones.
    Drop,
}

/// The loader's configuration (the loader concern's one options type). Build with
/// [`LoaderOptions::new`] and the `with_*` builders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderOptions {
    /// Records per batch (at least 1).
    pub batch_size: u64,
    /// Shuffle seed.
    pub seed: u64,
    /// Shuffle mode (default [`ShuffleMode::Auto`]).
    pub shuffle: ShuffleMode,
    /// Drop the last, short global batch.
    pub drop_last: bool,
    /// This process's rank, `< world_size`.
    pub rank: u64,
    /// Number of ranks (at least 1).
    pub world_size: u64,
    /// Worker threads fetching and decoding batches (at least 1).
    pub workers: usize,
    /// Decoded batches that may wait for the consumer, beyond one being built per worker.
    pub prefetch: usize,
    /// Deliver batches in order (default); `false` delivers whichever is ready first.
    pub ordered: bool,
    /// Batch-count equalisation across ranks (default [`Equalize::None`]).
    pub equalize: Equalize,
    /// The thread iterating the epoch builds a batch itself (fetch and decode, on its own
    /// thread) when none is ready and the prefetch window has room, instead of sleeping
    /// until a worker delivers one (default `true`). It keeps every core busy when the
    /// workers fall behind and saves a wake-up per batch; the cost is that a batch a worker
    /// finishes meanwhile waits for the caller's build. `false`: only the workers build, so
    /// the decoder never runs on the caller's thread.
    #[serde(default = "caller_builds_default")]
    pub caller_builds: bool,
    /// Batches a source that reads over a network fetches ahead of the workers (default
    /// guideloom-publish's [`DEFAULT_READ_AHEAD_BATCHES`], 16; 0: each worker fetches its
    /// batch when it builds it). Only
    /// sources with [`RecordSource::read_ahead`](guideloom_format::RecordSource::read_ahead)
    /// (a remote [`Dataset`](crate::Dataset)) read ahead; others ignore it.
    #[serde(default = "read_ahead_default")]
    pub read_ahead: usize,
    /// Payload bytes fetched ahead and not yet taken by a worker, about (default
    /// [`DEFAULT_READ_AHEAD_BYTES`], 64 MiB).
    #[serde(default = "read_ahead_bytes_default")]
    pub read_ahead_bytes: u64,
}

fn caller_builds_default() -> bool {
    true
}

fn read_ahead_default() -> usize {
    DEFAULT_READ_AHEAD_BATCHES
}

fn read_ahead_bytes_default() -> u64 {
    DEFAULT_READ_AHEAD_BYTES
}

impl LoaderOptions {
    /// Defaults with `batch_size`: seed 0, [`ShuffleMode::Auto`], keep the last batch, rank
    /// 0 of 1, 2 workers, prefetch 2, ordered, no equalisation, the caller builds batches
    /// while it would wait.
    pub fn new(batch_size: u64) -> Self {
        LoaderOptions {
            batch_size,
            seed: 0,
            shuffle: ShuffleMode::Auto,
            drop_last: false,
            rank: 0,
            world_size: 1,
            workers: 2,
            prefetch: 2,
            ordered: true,
            equalize: Equalize::None,
            caller_builds: true,
            read_ahead: DEFAULT_READ_AHEAD_BATCHES,
            read_ahead_bytes: DEFAULT_READ_AHEAD_BYTES,
        }
    }

    /// Sets how far a remote source reads ahead: `batches` (0: not at all) and about `bytes`
    /// of payload fetched and not yet taken.
    #[must_use]
    pub fn with_read_ahead(mut self, batches: usize, bytes: u64) -> Self {
        self.read_ahead = batches;
        self.read_ahead_bytes = bytes;
        self
    }
    /// Sets the seed.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Sets the shuffle mode.
    #[must_use]
    pub fn with_shuffle(mut self, mode: ShuffleMode) -> Self {
        self.shuffle = mode;
        self
    }
    /// Sets `drop_last`.
    #[must_use]
    pub fn with_drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }
    /// Sets the rank and the world size.
    #[must_use]
    pub fn with_rank(mut self, rank: u64, world_size: u64) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }
    /// Sets the number of worker threads.
    #[must_use]
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }
    /// Sets the prefetch depth (batches).
    #[must_use]
    pub fn with_prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }
    /// Ordered (`true`) or unordered delivery.
    #[must_use]
    pub fn with_ordered(mut self, ordered: bool) -> Self {
        self.ordered = ordered;
        self
    }
    /// Whether the iterating thread builds batches while it would otherwise wait (see
    /// [`LoaderOptions::caller_builds`]).
    #[must_use]
    pub fn with_caller_builds(mut self, caller_builds: bool) -> Self {
        self.caller_builds = caller_builds;
        self
    }
    /// Sets the equalisation.
    #[must_use]
    pub fn with_equalize(mut self, equalize: Equalize) -> Self {
        self.equalize = equalize;
        self
    }

    pub(super) fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidOptions { reason });
        if self.batch_size == 0 {
            return bad("batch_size must be at least 1".into());
        }
        if self.world_size == 0 || self.rank >= self.world_size {
            return bad(format!(
                "rank {} is not in a world of {} ranks",
                self.rank, self.world_size
            ));
        }
        if self.workers == 0 {
            return bad("workers must be at least 1".into());
        }
        Ok(())
    }
}

/// A loader's position, small and serialisable: resuming from it delivers exactly the rest
/// of the epoch (see [`Loader::resume`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The seed of the order.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// Global samples consumed: positions `0..consumed` of the epoch's global order have
    /// been delivered (by all ranks together, which step in lockstep). A multiple of the
    /// batch size, or the end of the epoch.
    pub consumed: u64,
}

/// One batch of decoded records.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<T> {
    /// The epoch.
    pub epoch: u64,
    /// The global batch number: the batch covers global positions
    /// `batch * batch_size ..` of the epoch.
    pub batch: u64,
    /// The record index of each record.
    pub indices: Vec<u64>,
    /// The decoded records.
    pub records: Vec<T>,
}
