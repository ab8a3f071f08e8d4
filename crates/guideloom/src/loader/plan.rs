//! The pure plan of an epoch for one rank: the global order, padding or dropping for
//! equalisation, and the interleave of global batches across ranks. No IO.

use std::sync::Arc;

use super::mixture::MixOrder;
use super::order::{DEFAULT_WINDOW, EpochOrder, ShuffleMode};

use super::{DynSource, Equalize, LoaderOptions, LoaderState};

/// The pure plan of one epoch for one rank: which global positions each of its batches
/// holds and which record each position is. No IO; useful to inspect or test the order.
#[derive(Debug, Clone)]
pub struct EpochPlan {
    order: PlanOrder,
    n: u64,
    pub(super) total: u64,
    batch_size: u64,
    rank: u64,
    world_size: u64,
    start: u64,
    pub(super) epoch: u64,
    seed: u64,
}

/// Where the positions of an epoch come from.
#[derive(Debug, Clone)]
enum PlanOrder {
    /// One source's records, shuffled.
    Single(EpochOrder),
    /// A weighted mixture's ids.
    Mixture(Arc<MixOrder>),
}

impl EpochPlan {
    pub(super) fn new(
        opts: &LoaderOptions,
        source: &DynSource,
        mixture: Option<&Arc<MixOrder>>,
        epoch: u64,
        start: u64,
    ) -> Self {
        let (order, n) = match mixture {
            Some(m) => (PlanOrder::Mixture(Arc::clone(m)), m.epoch_size),
            None => {
                let order = Self::single(opts, source, epoch);
                let n = order.len();
                (PlanOrder::Single(order), n)
            }
        };
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

    fn single(opts: &LoaderOptions, source: &DynSource, epoch: u64) -> EpochOrder {
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
        EpochOrder::new(mode, opts.seed, epoch, n, bounds)
    }

    /// The records (a mixture's ids) at positions `positions` (`< n`), appended to `out`.
    fn records(&self, positions: std::ops::Range<u64>, out: &mut Vec<u64>) {
        match &self.order {
            PlanOrder::Single(order) => order.records(positions, out),
            PlanOrder::Mixture(m) => m.ids(self.epoch, positions, out),
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
    /// `p < n`, and the record at position `(p - n) mod n` for padding. For a mixture, the
    /// record id ([`Mixture::locate`](crate::Mixture::locate)).
    pub fn record_at(&self, p: u64) -> u64 {
        let p = if p < self.n { p } else { (p - self.n) % self.n };
        let mut one = Vec::with_capacity(1);
        self.records(p..p + 1, &mut one);
        one[0]
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
        let positions = self.batch_positions(k);
        let mut records =
            Vec::with_capacity(usize::try_from(positions.end - positions.start).unwrap_or(0));
        // Positions of records (computed together), then padding (positions past `n`).
        self.records(
            positions.start.min(self.n)..positions.end.min(self.n),
            &mut records,
        );
        records.extend((positions.start.max(self.n)..positions.end).map(|p| self.record_at(p)));
        records
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
