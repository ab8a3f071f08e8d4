//! The training-loop reader: shuffled, batched, multi-threaded, multi-rank and resumable.
//!
//! A [`Loader`] reads a [`RecordSource`] (a [`Dataset`](crate::Dataset), or anything that
//! can fetch records by index) and yields [`Batch`]es of decoded records for one epoch at a
//! time ([`Loader::epoch`], [`Loader::resume`]). The order is a pure function of
//! `(seed, epoch, position)` ([`crate::order`]), the same on every machine and whatever the
//! number of ranks or workers; ranks take a deterministic interleave of it. `docs/loader.md`
//! specifies the order, the rank split, equalisation, resume and the memory bound.
//!
//! ```
//! use bytes::Bytes;
//! use guideloom::loader::{Loader, LoaderOptions, MemorySource};
//!
//! let records: Vec<Bytes> = (0..10u8).map(|i| Bytes::from(vec![i])).collect();
//! let source = MemorySource::new(records);
//! let options = LoaderOptions::new(4).seed(7).workers(2);
//! // The decode function gets (record index, bytes); any error type converting to BoxError.
//! let loader = Loader::new(source, options, |_index, bytes: Bytes| {
//!     Ok::<u8, guideloom::Error>(bytes[0])
//! })?;
//!
//! let mut seen = Vec::new();
//! for batch in loader.epoch(0)? {
//!     seen.extend(batch?.records);
//! }
//! seen.sort_unstable();
//! assert_eq!(seen, (0..10).collect::<Vec<u8>>()); // every record once, shuffled
//! # Ok::<(), guideloom::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use guideloom_format::Format;
use serde::{Deserialize, Serialize};

use crate::error::{BoxError, Error, Result};
use crate::order::{DEFAULT_WINDOW, EpochOrder, ShuffleMode};

/// Anything the loader can read records from, by index.
///
/// [`Dataset`](crate::Dataset) implements it; tests and custom pipelines implement it in
/// memory ([`MemorySource`]). Called from the loader's worker threads.
pub trait RecordSource: Send + Sync + 'static {
    /// A short name for error messages.
    fn name(&self) -> String {
        "record source".to_owned()
    }

    /// The number of records.
    fn len(&self) -> u64;

    /// `true` when there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw bytes of records `indices` (each `< len()`), in the same order. One call per
    /// batch: implementations should batch their reads (one request per shard touched).
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>>;

    /// Cumulative record starts of the shards, `[0, len(shard 0), ..., len()]`, when the
    /// source is sharded. Used by [`ShuffleMode::ShardWindow`].
    fn shard_bounds(&self) -> Option<&[u64]> {
        None
    }

    /// `true` for sources where each read is a network request (object stores, HTTP): then
    /// [`ShuffleMode::Auto`] picks the shard-window shuffle.
    fn is_remote(&self) -> bool {
        false
    }
}

impl<S: RecordSource + ?Sized> RecordSource for Arc<S> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        (**self).get_many(indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        (**self).shard_bounds()
    }
    fn is_remote(&self) -> bool {
        (**self).is_remote()
    }
}

/// Records held in memory, optionally split into shards: a [`RecordSource`] for tests,
/// examples and small pipelines.
#[derive(Debug, Clone)]
pub struct MemorySource {
    records: Arc<[Bytes]>,
    bounds: Option<Vec<u64>>,
    remote: bool,
}

impl MemorySource {
    /// A source over `records` (one shard).
    pub fn new(records: Vec<Bytes>) -> Self {
        MemorySource {
            records: records.into(),
            bounds: None,
            remote: false,
        }
    }

    /// Declares shard sizes (they must sum to the record count) and whether the source
    /// should be treated as remote by [`ShuffleMode::Auto`].
    pub fn with_shards(mut self, shard_sizes: &[u64], remote: bool) -> Result<Self> {
        let mut bounds = vec![0u64];
        for s in shard_sizes {
            bounds.push(bounds[bounds.len() - 1] + s);
        }
        if bounds[bounds.len() - 1] != self.records.len() as u64 {
            return Err(Error::InvalidOptions {
                reason: format!(
                    "shard sizes sum to {}, not the {} records",
                    bounds[bounds.len() - 1],
                    self.records.len()
                ),
            });
        }
        self.bounds = Some(bounds);
        self.remote = remote;
        Ok(self)
    }
}

impl RecordSource for MemorySource {
    fn name(&self) -> String {
        "memory source".to_owned()
    }
    fn len(&self) -> u64 {
        self.records.len() as u64
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        indices
            .iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.records.get(i).cloned())
                    .ok_or(Error::OutOfRange {
                        index: i,
                        len: self.records.len() as u64,
                    })
            })
            .collect()
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        self.bounds.as_deref()
    }
    fn is_remote(&self) -> bool {
        self.remote
    }
}

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

/// The loader's configuration. Build with [`LoaderOptions::new`] and the setters.
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
}

impl LoaderOptions {
    /// Defaults with `batch_size`: seed 0, [`ShuffleMode::Auto`], keep the last batch, rank
    /// 0 of 1, 2 workers, prefetch 2, ordered, no equalisation.
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
        }
    }
    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Sets the shuffle mode.
    pub fn shuffle(mut self, mode: ShuffleMode) -> Self {
        self.shuffle = mode;
        self
    }
    /// Sets `drop_last`.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }
    /// Sets the rank and the world size.
    pub fn rank(mut self, rank: u64, world_size: u64) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }
    /// Sets the number of worker threads.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }
    /// Sets the prefetch depth (batches).
    pub fn prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }
    /// Ordered (`true`) or unordered delivery.
    pub fn ordered(mut self, ordered: bool) -> Self {
        self.ordered = ordered;
        self
    }
    /// Sets the equalisation.
    pub fn equalize(mut self, equalize: Equalize) -> Self {
        self.equalize = equalize;
        self
    }

    fn validate(&self) -> Result<()> {
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

/// The pure plan of one epoch for one rank: which global positions each of its batches
/// holds and which record each position is. No IO; useful to inspect or test the order.
#[derive(Debug, Clone)]
pub struct EpochPlan {
    order: EpochOrder,
    n: u64,
    total: u64,
    batch_size: u64,
    rank: u64,
    world_size: u64,
    start: u64,
    epoch: u64,
    seed: u64,
}

impl EpochPlan {
    fn new(opts: &LoaderOptions, source: &dyn RecordSource, epoch: u64, start: u64) -> Self {
        let n = source.len();
        let bounds = source.shard_bounds();
        let mode = match opts.shuffle {
            ShuffleMode::Auto if source.is_remote() && bounds.is_some() => {
                ShuffleMode::ShardWindow {
                    window: DEFAULT_WINDOW,
                }
            }
            ShuffleMode::Auto => ShuffleMode::Full,
            m => m,
        };
        let order = EpochOrder::new(mode, opts.seed, epoch, n, bounds);
        let total = epoch_len(
            n,
            opts.batch_size,
            opts.world_size,
            opts.drop_last,
            opts.equalize,
        );
        EpochPlan {
            order,
            n,
            total,
            batch_size: opts.batch_size,
            rank: opts.rank,
            world_size: opts.world_size,
            start: start.min(total),
            epoch,
            seed: opts.seed,
        }
    }

    /// Global positions in this epoch (records, plus padding or minus dropped ones).
    pub fn total_positions(&self) -> u64 {
        self.total
    }

    /// The position this plan starts at (0, or the resumed `consumed`).
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The record at global position `p` (`p < total_positions()`): the order's record for
    /// `p < n`, and the record at position `(p - n) mod n` for padding.
    pub fn record_at(&self, p: u64) -> u64 {
        if p < self.n {
            self.order.record(p)
        } else {
            self.order.record((p - self.n) % self.n)
        }
    }

    /// Global batches from `start()` to the end, all ranks together.
    pub fn global_batches(&self) -> u64 {
        (self.total - self.start).div_ceil(self.batch_size)
    }

    /// Batches this rank delivers: relative batches `rank, rank + world, ...`.
    pub fn rank_batches(&self) -> u64 {
        let j = self.global_batches();
        if self.rank < j {
            (j - self.rank - 1) / self.world_size + 1
        } else {
            0
        }
    }

    /// The global positions of this rank's `k`-th batch.
    pub fn batch_positions(&self, k: u64) -> std::ops::Range<u64> {
        let j = self.rank + k * self.world_size;
        let lo = self.start + j * self.batch_size;
        lo..(lo + self.batch_size).min(self.total)
    }

    /// The record indices of this rank's `k`-th batch.
    pub fn batch_records(&self, k: u64) -> Vec<u64> {
        self.batch_positions(k).map(|p| self.record_at(p)).collect()
    }

    /// The global batch number of this rank's `k`-th batch.
    pub fn global_batch(&self, k: u64) -> u64 {
        self.batch_positions(k).start / self.batch_size
    }

    /// The state after this rank delivered its first `k` batches (all ranks in lockstep).
    pub fn state_after(&self, k: u64) -> LoaderState {
        let consumed = self
            .start
            .saturating_add(k.saturating_mul(self.world_size * self.batch_size))
            .min(self.total);
        LoaderState {
            seed: self.seed,
            epoch: self.epoch,
            consumed,
        }
    }
}

/// The number of global positions of an epoch of `n` records (see [`Equalize`]).
pub fn epoch_len(n: u64, batch: u64, world: u64, drop_last: bool, eq: Equalize) -> u64 {
    if n == 0 {
        return 0;
    }
    let batches = if drop_last {
        n / batch
    } else {
        n.div_ceil(batch)
    };
    let base = if drop_last { batches * batch } else { n };
    match eq {
        Equalize::None => base,
        Equalize::Drop => base.min((batches / world) * world * batch),
        Equalize::Pad => batches.div_ceil(world) * world * batch,
    }
}

type DecodeFn<T> = dyn Fn(u64, Bytes) -> std::result::Result<T, BoxError> + Send + Sync;

/// The loader: a source, options and a decode function. Cheap to keep; each epoch starts
/// its own workers ([`Loader::epoch`]).
pub struct Loader<T> {
    source: Arc<dyn RecordSource>,
    decode: Arc<DecodeFn<T>>,
    options: LoaderOptions,
}

impl<T> fmt::Debug for Loader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader")
            .field("source", &self.source.name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Loader<T> {
    /// A loader decoding each record with `decode(index, bytes)`.
    pub fn new<S, D, E>(source: S, options: LoaderOptions, decode: D) -> Result<Self>
    where
        S: RecordSource,
        D: Fn(u64, Bytes) -> std::result::Result<T, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        options.validate()?;
        Ok(Loader {
            source: Arc::new(source),
            decode: Arc::new(move |i, b| decode(i, b).map_err(Into::into)),
            options,
        })
    }

    /// A loader decoding records with a record [`Format`] (e.g. `CborFormat::<T>::new()`).
    pub fn with_format<S, F>(source: S, options: LoaderOptions, format: F) -> Result<Self>
    where
        S: RecordSource,
        F: Format<Record = T>,
    {
        Loader::new(source, options, move |_i, b| format.decode(b))
    }

    /// The options.
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// The plan of `epoch` for this rank from position `start` (no IO).
    pub fn plan(&self, epoch: u64, start: u64) -> EpochPlan {
        EpochPlan::new(&self.options, &*self.source, epoch, start)
    }

    /// Starts `epoch` from its beginning.
    pub fn epoch(&self, epoch: u64) -> Result<Epoch<T>> {
        self.start(self.plan(epoch, 0))
    }

    /// Continues from `state` (taken from [`Epoch::state`], possibly by a run with another
    /// worker count or world size): delivers exactly the batches not yet delivered, in the
    /// same order, without replaying the epoch. The seed must match and `consumed` must be a
    /// multiple of the batch size (or the end of the epoch).
    pub fn resume(&self, state: &LoaderState) -> Result<Epoch<T>> {
        if state.seed != self.options.seed {
            return Err(Error::Resume {
                reason: format!(
                    "state has seed {}, loader has seed {}",
                    state.seed, self.options.seed
                ),
            });
        }
        let plan = self.plan(state.epoch, state.consumed);
        if !state.consumed.is_multiple_of(self.options.batch_size) && state.consumed < plan.total {
            return Err(Error::Resume {
                reason: format!(
                    "consumed {} is not a multiple of the batch size {}",
                    state.consumed, self.options.batch_size
                ),
            });
        }
        self.start(plan)
    }

    fn start(&self, plan: EpochPlan) -> Result<Epoch<T>> {
        let plan = Arc::new(plan);
        let total = plan.rank_batches();
        let window = (self.options.prefetch + self.options.workers) as u64;
        let ctrl = Arc::new(Control {
            state: Mutex::new(Ctrl {
                next_claim: 0,
                delivered: 0,
                cancelled: false,
            }),
            changed: Condvar::new(),
        });
        let (tx, rx) = channel();
        let mut epoch = Epoch {
            plan: Arc::clone(&plan),
            ctrl: Arc::clone(&ctrl),
            rx: Some(rx),
            threads: Vec::new(),
            total,
            delivered: 0,
            prefix: 0,
            done_beyond_prefix: BTreeSet::new(),
            reorder: BTreeMap::new(),
            ordered: self.options.ordered,
            finished: false,
            ended: false,
        };
        let workers = self
            .options
            .workers
            .min(usize::try_from(total).unwrap_or(usize::MAX));
        for w in 0..workers {
            let job = Worker {
                plan: Arc::clone(&plan),
                ctrl: Arc::clone(&ctrl),
                tx: tx.clone(),
                source: Arc::clone(&self.source),
                decode: Arc::clone(&self.decode),
                total,
                window,
            };
            let handle = std::thread::Builder::new()
                .name(format!("guideloom-loader-{w}"))
                .spawn(move || job.run())
                .map_err(|source| Error::Runtime { source })?;
            epoch.threads.push(handle);
        }
        Ok(epoch)
    }
}

struct Control {
    state: Mutex<Ctrl>,
    changed: Condvar,
}

struct Ctrl {
    next_claim: u64,
    delivered: u64,
    cancelled: bool,
}

impl Control {
    fn lock(&self) -> MutexGuard<'_, Ctrl> {
        // A panic never happens while the lock is held (user code runs outside it).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Msg<T> = (u64, Result<Batch<T>>);

struct Worker<T> {
    plan: Arc<EpochPlan>,
    ctrl: Arc<Control>,
    tx: Sender<Msg<T>>,
    source: Arc<dyn RecordSource>,
    decode: Arc<DecodeFn<T>>,
    total: u64,
    window: u64,
}

impl<T> Worker<T> {
    fn run(self) {
        loop {
            let k = {
                let mut g = self.ctrl.lock();
                loop {
                    if g.cancelled || g.next_claim >= self.total {
                        return;
                    }
                    if g.next_claim < g.delivered + self.window {
                        break;
                    }
                    g = self.ctrl.changed.wait(g).unwrap_or_else(|p| p.into_inner());
                }
                g.next_claim += 1;
                g.next_claim - 1
            };
            let result = catch_unwind(AssertUnwindSafe(|| self.build(k))).unwrap_or_else(|p| {
                let message = p
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".to_owned());
                Err(Error::WorkerPanic { batch: k, message })
            });
            if self.tx.send((k, result)).is_err() {
                return;
            }
        }
    }

    fn build(&self, k: u64) -> Result<Batch<T>> {
        let indices = self.plan.batch_records(k);
        let bytes = self.source.get_many(&indices)?;
        if bytes.len() != indices.len() {
            return Err(Error::fetch(
                self.source.name(),
                format!(
                    "get_many returned {} records for {} indices",
                    bytes.len(),
                    indices.len()
                ),
            ));
        }
        let records = indices
            .iter()
            .zip(bytes)
            .map(|(&index, b)| {
                (self.decode)(index, b).map_err(|source| Error::Decode { index, source })
            })
            .collect::<Result<Vec<T>>>()?;
        Ok(Batch {
            epoch: self.plan.epoch,
            batch: self.plan.global_batch(k),
            indices,
            records,
        })
    }
}

/// One epoch in progress: an iterator of batches. Dropping it stops and joins its workers
/// (a worker inside a fetch finishes that fetch first).
///
/// After an error (fetch, decode, worker panic) the iterator yields that error once and
/// then ends; its [`state`](Epoch::state) still points at the failed batch, so resuming
/// retries it.
pub struct Epoch<T> {
    plan: Arc<EpochPlan>,
    ctrl: Arc<Control>,
    rx: Option<Receiver<Msg<T>>>,
    threads: Vec<JoinHandle<()>>,
    total: u64,
    delivered: u64,
    prefix: u64,
    done_beyond_prefix: BTreeSet<u64>,
    reorder: BTreeMap<u64, Result<Batch<T>>>,
    ordered: bool,
    finished: bool,
    ended: bool,
}

impl<T> fmt::Debug for Epoch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Epoch")
            .field("epoch", &self.plan.epoch)
            .field("batches", &self.total)
            .field("delivered", &self.delivered)
            .finish_non_exhaustive()
    }
}

impl<T> Epoch<T> {
    /// The plan this epoch follows.
    pub fn plan(&self) -> &EpochPlan {
        &self.plan
    }

    /// Batches this rank has still to deliver.
    pub fn remaining(&self) -> u64 {
        self.total - self.delivered
    }

    /// The resumable position: everything before it has been delivered. With unordered
    /// delivery it is the end of the contiguous prefix of delivered batches (batches
    /// delivered beyond a gap are delivered again after a resume).
    ///
    /// Ranks agree on it at every step (every rank has called `next` the same number of
    /// times): after `s` steps it is `min(start + s * world_size * batch_size, end)`. A rank
    /// whose `next` has returned `None` reports the end of the epoch.
    pub fn state(&self) -> LoaderState {
        if self.ended {
            self.plan.state_after(u64::MAX)
        } else {
            self.plan.state_after(self.prefix)
        }
    }

    fn mark_delivered(&mut self, k: u64) {
        self.delivered += 1;
        if k == self.prefix {
            self.prefix += 1;
            while self.done_beyond_prefix.remove(&self.prefix) {
                self.prefix += 1;
            }
        } else {
            self.done_beyond_prefix.insert(k);
        }
        let mut g = self.ctrl.lock();
        g.delivered = self.delivered;
        drop(g);
        self.ctrl.changed.notify_all();
    }

    fn stop(&mut self) {
        self.finished = true;
        self.ctrl.lock().cancelled = true;
        self.ctrl.changed.notify_all();
    }
}

impl<T> Iterator for Epoch<T> {
    type Item = Result<Batch<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if self.delivered >= self.total {
            self.finished = true;
            self.ended = true;
            return None;
        }
        let rx = self.rx.as_ref()?;
        let (k, result) = if self.ordered {
            let want = self.prefix;
            loop {
                if let Some(r) = self.reorder.remove(&want) {
                    break (want, r);
                }
                match rx.recv() {
                    Ok((k, r)) => {
                        self.reorder.insert(k, r);
                    }
                    Err(_) => {
                        self.stop();
                        return Some(Err(Error::WorkersGone { batch: want }));
                    }
                }
            }
        } else {
            match rx.recv() {
                Ok(m) => m,
                Err(_) => {
                    self.stop();
                    return Some(Err(Error::WorkersGone { batch: self.prefix }));
                }
            }
        };
        match result {
            Ok(batch) => {
                self.mark_delivered(k);
                Some(Ok(batch))
            }
            Err(e) => {
                self.stop();
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.finished {
            return (0, Some(0));
        }
        let r = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        (0, Some(r))
    }
}

impl<T> Drop for Epoch<T> {
    fn drop(&mut self) {
        self.stop();
        self.rx = None;
        for t in self.threads.drain(..) {
            // A worker's panic is caught inside it; join errors cannot carry anything new.
            let _ = t.join();
        }
    }
}
