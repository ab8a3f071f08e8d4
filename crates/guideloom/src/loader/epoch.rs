//! One epoch in progress: the worker threads that fetch and decode batches, the bounded
//! prefetch window that holds them back, and the [`Epoch`] iterator that delivers batches in
//! order (or as they come) and tracks the resumable position.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use guideloom_format::ReadAheadBatches;

use crate::error::{Error, Result};

use super::{Batch, DecodeFn, DynSource, EpochPlan, Loader, LoaderState};

impl<T: Send + 'static> Loader<T> {
    pub(super) fn start(&self, plan: EpochPlan) -> Result<Epoch<T>> {
        let plan = Arc::new(plan);
        let total = plan.rank_batches();
        let window = (self.options.prefetch + self.options.workers) as u64;
        let ctrl = Arc::new(Control {
            state: Mutex::new(Ctrl {
                next_claim: 0,
                delivered: 0,
                cancelled: false,
                waiting: 0,
            }),
            changed: Condvar::new(),
        });
        let (tx, rx) = channel();
        // A remote source fetches the rank's batches ahead, in order; workers take theirs.
        let ahead = (self.options.read_ahead > 0)
            .then(|| {
                let order = Arc::clone(&plan);
                self.source.read_ahead(
                    Box::new((0..total).map(move |k| order.batch_records(k))),
                    self.options.read_ahead,
                    self.options.read_ahead_bytes,
                )
            })
            .flatten()
            .map(|batches| {
                Mutex::new(Ahead {
                    batches,
                    next: 0,
                    taken: BTreeMap::new(),
                })
            });
        let builder = Arc::new(Builder {
            plan: Arc::clone(&plan),
            source: Arc::clone(&self.source),
            decode: Arc::clone(&self.decode),
            ahead,
        });
        let mut epoch = Epoch {
            plan: Arc::clone(&plan),
            ctrl: Arc::clone(&ctrl),
            builder: self.options.caller_builds.then(|| Arc::clone(&builder)),
            window,
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
                builder: Arc::clone(&builder),
                ctrl: Arc::clone(&ctrl),
                tx: tx.clone(),
                total,
                window,
            };
            let handle = std::thread::Builder::new()
                .name(format!("guideloom-loader-{w}"))
                .spawn(move || job.run())
                .map_err(Error::runtime)?;
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
    /// Workers asleep on `changed` (the window is full): a delivery wakes them only then,
    /// so the common case, workers ahead of the window's end, costs no futex call.
    waiting: usize,
}

impl Control {
    fn lock(&self) -> MutexGuard<'_, Ctrl> {
        // A panic never happens while the lock is held (user code runs outside it).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the next batch if one is left and the window has room (never waits).
    fn try_claim(&self, total: u64, window: u64) -> Option<u64> {
        match self.lock().claim(total, window) {
            Claim::Batch(k) => Some(k),
            Claim::Done | Claim::WindowFull => None,
        }
    }
}

/// What a claim found: the one rule by which workers and the caller take batches.
enum Claim {
    /// Batch `k` is now the claimer's to build.
    Batch(u64),
    /// Every batch is claimed, or the epoch was cancelled.
    Done,
    /// `prefetch + workers` batches are claimed but not delivered: wait for a delivery.
    WindowFull,
}

impl Ctrl {
    fn claim(&mut self, total: u64, window: u64) -> Claim {
        if self.cancelled || self.next_claim >= total {
            return Claim::Done;
        }
        if self.next_claim >= self.delivered + window {
            return Claim::WindowFull;
        }
        self.next_claim += 1;
        Claim::Batch(self.next_claim - 1)
    }
}

type Msg<T> = (u64, Result<Batch<T>>);

/// What builds batch `k` of the plan: the workers share it, and so does the caller's thread
/// when it builds a batch itself (`LoaderOptions::caller_builds`).
struct Builder<T> {
    plan: Arc<EpochPlan>,
    source: Arc<DynSource>,
    decode: Arc<DecodeFn<T>>,
    /// The batches' records read ahead by the source, when it does.
    ahead: Option<Mutex<Ahead>>,
}

/// The source's read-ahead of this rank's batches, `0..total` in order, and the batches
/// pulled from it for other claims than the puller's (at most the prefetch window).
struct Ahead {
    batches: ReadAheadBatches<Error>,
    next: u64,
    taken: BTreeMap<u64, Result<Vec<Bytes>>>,
}

impl Ahead {
    /// Batch `k`'s records: pulled in order until `k` comes, the others kept for their
    /// claimers.
    fn take(&mut self, k: u64) -> Result<Vec<Bytes>> {
        loop {
            if let Some(got) = self.taken.remove(&k) {
                return got;
            }
            let Some(got) = self.batches.next() else {
                return Err(Error::fetch(
                    "read-ahead",
                    format!(
                        "the read-ahead ended at batch {} before batch {k}",
                        self.next
                    ),
                ));
            };
            self.taken.insert(self.next, got);
            self.next += 1;
        }
    }
}

impl<T> Builder<T> {
    /// Batch `k`, with a panic of the source or the decoder caught as
    /// [`Error::WorkerPanic`].
    fn build_caught(&self, k: u64) -> Result<Batch<T>> {
        catch_unwind(AssertUnwindSafe(|| self.build(k))).unwrap_or_else(|p| {
            let message = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(Error::WorkerPanic { batch: k, message })
        })
    }

    fn build(&self, k: u64) -> Result<Batch<T>> {
        let indices = self.plan.batch_records(k);
        let bytes = match &self.ahead {
            // Claims are in order, so what is pulled for others is within the window.
            Some(ahead) => ahead.lock().unwrap_or_else(|p| p.into_inner()).take(k)?,
            None => self.source.get_many(&indices)?,
        };
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
                (self.decode)(index, b).map_err(|source| Error::decode(index, source))
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

struct Worker<T> {
    builder: Arc<Builder<T>>,
    ctrl: Arc<Control>,
    tx: Sender<Msg<T>>,
    total: u64,
    window: u64,
}

impl<T> Worker<T> {
    fn run(self) {
        loop {
            let k = {
                let mut g = self.ctrl.lock();
                loop {
                    match g.claim(self.total, self.window) {
                        Claim::Batch(k) => break k,
                        Claim::Done => return,
                        Claim::WindowFull => {
                            g.waiting += 1;
                            g = self.ctrl.changed.wait(g).unwrap_or_else(|p| p.into_inner());
                            g.waiting -= 1;
                        }
                    }
                }
            };
            if self.tx.send((k, self.builder.build_caught(k))).is_err() {
                return;
            }
        }
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
    /// Set when the caller's thread builds batches itself instead of waiting.
    builder: Option<Arc<Builder<T>>>,
    window: u64,
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
        let wake = g.waiting > 0;
        drop(g);
        if wake {
            self.ctrl.changed.notify_all();
        }
    }

    /// The next finished batch: one a worker sent or, when none is waiting and the caller
    /// builds (`LoaderOptions::caller_builds`), one built on this thread if the window has
    /// room; otherwise waits for a worker. `None` when every worker is gone.
    fn receive(&self) -> Option<Msg<T>> {
        let rx = self.rx.as_ref()?;
        if let Some(builder) = &self.builder {
            if let Ok(m) = rx.try_recv() {
                return Some(m);
            }
            // Building instead of sleeping: no wake-up to wait for, and one more core at
            // work when the workers fall behind. A batch a worker finishes meanwhile waits
            // at most one batch's build.
            if let Some(k) = self.ctrl.try_claim(self.total, self.window) {
                return Some((k, builder.build_caught(k)));
            }
        }
        rx.recv().ok()
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
        let (k, result) = if self.ordered {
            let want = self.prefix;
            loop {
                if let Some(r) = self.reorder.remove(&want) {
                    break (want, r);
                }
                match self.receive() {
                    Some((k, r)) => {
                        self.reorder.insert(k, r);
                    }
                    None => {
                        self.stop();
                        return Some(Err(Error::WorkersGone { batch: want }));
                    }
                }
            }
        } else {
            match self.receive() {
                Some(m) => m,
                None => {
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
