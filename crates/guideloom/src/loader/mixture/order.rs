//! The order of a mixture: global position → (source, the source's sample number) →
//! record, a pure function of `(seed, epoch, position)` (`docs/loader.md`, "Weighted
//! mixtures").

use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::split::SplitTree;
use crate::loader::order::{DEFAULT_WINDOW, EpochOrder, ShuffleMode, derive_key};

/// Salt of a mixture source's seed: source `s` orders its passes as a single-source loader
/// with seed `derive_key(seed, s, SALT_SOURCES, 0)`, its pass number as the epoch.
pub const SALT_SOURCES: u64 = 0x736F_7572_6365_7321; // "sources!"

/// A span of constant weights: from global position `start` on, positions are split by
/// `tree`; `base[s]` samples of source `s` came before `start`.
#[derive(Debug)]
pub(crate) struct Phase {
    pub(crate) start: u64,
    pub(crate) tree: SplitTree,
    pub(crate) base: Vec<u64>,
}

/// How one source orders its samples: pass `π` (samples `π·n .. (π+1)·n`) is the
/// single-source order of "epoch" `π` over its `n` records.
#[derive(Debug)]
pub(crate) struct SourceOrder {
    /// Records in the source's range.
    pub(crate) n: u64,
    /// The source's first id in the mixture's concatenated id space.
    pub(crate) offset: u64,
    /// The shuffle mode, `Auto` resolved for this source.
    pub(crate) mode: ShuffleMode,
    /// Shard bounds relative to the range, when the source has them.
    pub(crate) bounds: Option<Vec<u64>>,
    /// `derive_key(seed, s, SALT_SOURCES, 0)`.
    pub(crate) seed: u64,
    /// The order of the pass last used (workers share it; a batch rarely spans two passes).
    cache: Mutex<Option<(u64, Arc<EpochOrder>)>>,
}

impl SourceOrder {
    /// `mode` is the loader's; `Auto` becomes shard windows for a remote source with bounds.
    pub(crate) fn new(
        n: u64,
        offset: u64,
        mode: ShuffleMode,
        bounds: Option<Vec<u64>>,
        remote: bool,
        seed: u64,
        index: usize,
    ) -> Self {
        let mode = match mode {
            ShuffleMode::Auto if remote && bounds.is_some() => ShuffleMode::ShardWindow {
                window: DEFAULT_WINDOW,
            },
            ShuffleMode::Auto => ShuffleMode::Full,
            m => m,
        };
        SourceOrder {
            n,
            offset,
            mode,
            bounds,
            seed: derive_key(seed, index as u64, SALT_SOURCES, 0),
            cache: Mutex::new(None),
        }
    }

    fn pass(&self, pass: u64) -> Arc<EpochOrder> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, order)) = &*cache
            && *p == pass
        {
            return Arc::clone(order);
        }
        let order = Arc::new(EpochOrder::new(
            self.mode,
            self.seed,
            pass,
            self.n,
            self.bounds.as_deref(),
        ));
        *cache = Some((pass, Arc::clone(&order)));
        order
    }
}

/// A mixture's order: its phases and its sources' orders.
#[derive(Debug)]
pub(crate) struct MixOrder {
    /// Positions per loader epoch: epoch `e` covers global positions `e·E ..`.
    pub(crate) epoch_size: u64,
    pub(crate) phases: Vec<Phase>,
    pub(crate) sources: Vec<SourceOrder>,
}

impl MixOrder {
    /// Phase starts and source orders must be consistent (built by `Mixture`).
    pub(crate) fn global(&self, epoch: u64, p: u64) -> u64 {
        epoch.wrapping_mul(self.epoch_size).wrapping_add(p)
    }

    /// The source and sample of global position `g` (positions wrap at 2^64).
    pub(crate) fn sample_at(&self, g: u64) -> (usize, u64) {
        let phase = &self.phases[self.phases.partition_point(|ph| ph.start <= g) - 1];
        let (s, k) = phase.tree.locate(g - phase.start);
        (s, phase.base[s].wrapping_add(k))
    }

    /// The ids at positions `positions` of `epoch`, appended to `out`.
    pub(crate) fn ids(&self, epoch: u64, positions: Range<u64>, out: &mut Vec<u64>) {
        // One pass order per source at a time, looked up once per change.
        let mut held: Vec<Option<(u64, Arc<EpochOrder>)>> = vec![None; self.sources.len()];
        for p in positions {
            let (s, sample) = self.sample_at(self.global(epoch, p));
            let src = &self.sources[s];
            let pass = sample / src.n;
            let order = match &held[s] {
                Some((q, order)) if *q == pass => order,
                _ => &held[s].insert((pass, src.pass(pass))).1,
            };
            out.push(src.offset + order.record(sample % src.n));
        }
    }
}
