//! `EpochPlan`: the Rust [`guideloom::Loader`]'s plan of an epoch, for Python loaders.
//!
//! The plan is not re-implemented here: it is the facade's own
//! [`guideloom::order::EpochPlan`], taken from a [`guideloom::Loader`] built over a source
//! that only describes the records (their count, shard bounds and whether reads are remote;
//! it is never read). `guideloom.torch` draws every order from it, so a PyTorch epoch is the
//! same sequence of batches as the Rust loader's for the same seed, epoch, rank and world
//! size (`docs/loader.md` specifies it).

use bytes::Bytes;
use guideloom::order::{DEFAULT_WINDOW, EpochPlan as RustPlan};
use guideloom::{Equalize, Loader, LoaderOptions, RecordSource, ShuffleMode};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;

use crate::dataset::Dataset;
use crate::errors::{raise, to_pyerr};
use crate::mixture::Mixture;

/// What the plan needs to know about a source: never read.
struct Shape {
    len: u64,
    bounds: Option<Vec<u64>>,
    remote: bool,
}

impl RecordSource for Shape {
    type Error = std::io::Error;

    fn name(&self) -> String {
        "epoch plan (no reads)".to_owned()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn get_many(&self, _indices: &[u64]) -> Result<Vec<Bytes>, Self::Error> {
        Err(std::io::Error::other(
            "an epoch plan's source is never read",
        ))
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        self.bounds.as_deref()
    }
    fn is_remote(&self) -> bool {
        self.remote
    }
}

fn shuffle_mode(name: &str, window: u32) -> PyResult<ShuffleMode> {
    Ok(match name {
        "auto" => ShuffleMode::Auto,
        "full" => ShuffleMode::Full,
        "sequential" => ShuffleMode::Sequential,
        "window" => ShuffleMode::ShardWindow { window },
        other => {
            return Err(raise(
                "InvalidArgumentError",
                format!(
                    "shuffle must be \"auto\", \"full\", \"window\" or \"sequential\", not {other:?}"
                ),
            ));
        }
    })
}

fn equalize_mode(name: &str) -> PyResult<Equalize> {
    Ok(match name {
        "none" => Equalize::None,
        "pad" => Equalize::Pad,
        "drop" => Equalize::Drop,
        other => {
            return Err(raise(
                "InvalidArgumentError",
                format!("equalize must be \"none\", \"pad\" or \"drop\", not {other:?}"),
            ));
        }
    })
}

/// The plan of one epoch for one rank, as the Rust `Loader` computes it: which records each
/// of this rank's batches holds, in delivery order. No IO.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct EpochPlan {
    plan: RustPlan,
    options: LoaderOptions,
    batches: u64,
}

impl EpochPlan {
    /// Batches `start`, `start + step`, ... of this rank's plan, computed as they are asked
    /// for (an epoch's indices are never all held at once).
    pub(crate) fn batches(
        &self,
        start: u64,
        step: u64,
    ) -> Box<dyn Iterator<Item = Vec<u64>> + Send> {
        let plan = self.plan.clone();
        let step = usize::try_from(step.max(1)).unwrap_or(usize::MAX);
        Box::new(
            (start..self.batches)
                .step_by(step)
                .map(move |k| plan.batch_records(k)),
        )
    }

    /// The shape of a record count or a dataset.
    fn shape(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        shard_bounds: Option<Vec<u64>>,
        remote: bool,
    ) -> PyResult<Shape> {
        Ok(if let Ok(dataset) = source.cast::<Dataset>() {
            if shard_bounds.is_some() {
                return Err(raise(
                    "InvalidArgumentError",
                    "shard_bounds is taken from the dataset; pass it only with a record count",
                ));
            }
            let opened = dataset.get().current(py)?;
            Shape {
                len: opened.len(),
                bounds: Some(opened.shard_bounds().to_vec()),
                remote: opened.is_remote(),
            }
        } else {
            let len: u64 = source.extract()?;
            if let Some(b) = &shard_bounds {
                let valid = b.first() == Some(&0)
                    && b.last() == Some(&len)
                    && b.windows(2).all(|w| w[0] <= w[1]);
                if !valid {
                    return Err(raise(
                        "InvalidArgumentError",
                        format!("shard_bounds must rise from 0 to the record count {len}: {b:?}"),
                    ));
                }
            }
            Shape {
                len,
                bounds: shard_bounds,
                remote,
            }
        })
    }
}

#[pymethods]
impl EpochPlan {
    /// `source` is a record count or a `guideloom.Dataset` (whose shard bounds and
    /// remoteness decide what `shuffle="auto"` means, as for the Rust loader).
    #[new]
    #[pyo3(signature = (
        source, *, batch_size, epoch = 0, start = 0, seed = 0, shuffle = "auto",
        window = DEFAULT_WINDOW, drop_last = false, equalize = "none", rank = 0,
        world_size = 1, shard_bounds = None, remote = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        batch_size: u64,
        epoch: u64,
        start: u64,
        seed: u64,
        shuffle: &str,
        window: u32,
        drop_last: bool,
        equalize: &str,
        rank: u64,
        world_size: u64,
        shard_bounds: Option<Vec<u64>>,
        remote: bool,
    ) -> PyResult<Self> {
        let options = LoaderOptions::new(batch_size)
            .with_seed(seed)
            .with_shuffle(shuffle_mode(shuffle, window)?)
            .with_drop_last(drop_last)
            .with_equalize(equalize_mode(equalize)?)
            .with_rank(rank, world_size);
        let noop = |_index, _bytes: Bytes| Ok::<(), std::io::Error>(());
        let loader = if let Ok(mixture) = source.cast::<Mixture>() {
            if shard_bounds.is_some() || remote {
                return Err(raise(
                    "InvalidArgumentError",
                    "shard_bounds and remote are taken from the mixture's datasets",
                ));
            }
            Loader::mixture(mixture.get().facade(py)?, options.clone(), noop)
        } else {
            Loader::new(
                Self::shape(py, source, shard_bounds, remote)?,
                options.clone(),
                noop,
            )
        }
        .map_err(|e| to_pyerr(py, &e))?;
        let plan = loader.plan(epoch, start);
        if !start.is_multiple_of(batch_size) && start < plan.total_positions() {
            // As `Loader::resume`: a state is taken between whole global batches.
            return Err(raise(
                "InvalidArgumentError",
                format!("start {start} is not a multiple of the batch size {batch_size}"),
            ));
        }
        let batches = plan.rank_batches();
        Ok(EpochPlan {
            plan,
            options,
            batches,
        })
    }

    /// This rank's batches in the epoch (from `start`).
    fn __len__(&self) -> usize {
        usize::try_from(self.batches).unwrap_or(usize::MAX)
    }

    /// The record indices of this rank's `k`-th batch.
    fn batch(&self, k: u64) -> PyResult<Vec<u64>> {
        self.check(k)?;
        Ok(self.plan.batch_records(k))
    }

    /// The global batch number of this rank's `k`-th batch.
    fn global_batch(&self, k: u64) -> PyResult<u64> {
        self.check(k)?;
        Ok(self.plan.global_batch(k))
    }

    /// Every record index this rank reads, batch after batch.
    fn records(&self) -> Vec<u64> {
        (0..self.batches)
            .flat_map(|k| self.plan.batch_records(k))
            .collect()
    }

    /// The record at global position `p` of the epoch (all ranks together).
    fn record_at(&self, p: u64) -> PyResult<u64> {
        if p >= self.plan.total_positions() {
            return Err(PyIndexError::new_err(format!(
                "position {p} is outside the epoch's {} positions",
                self.plan.total_positions()
            )));
        }
        Ok(self.plan.record_at(p))
    }

    /// `(seed, epoch, consumed)` once this rank has delivered its first `k` batches (all
    /// ranks in lockstep): the Rust `LoaderState`.
    fn state_after(&self, k: u64) -> (u64, u64, u64) {
        let s = self.plan.state_after(k);
        (s.seed, s.epoch, s.consumed)
    }

    /// Global positions of the epoch (records, plus padding or minus dropped ones).
    #[getter]
    fn total_positions(&self) -> u64 {
        self.plan.total_positions()
    }

    /// The global position the plan starts at.
    #[getter]
    fn start(&self) -> u64 {
        self.plan.start()
    }

    #[getter]
    fn batch_size(&self) -> u64 {
        self.options.batch_size
    }

    #[getter]
    fn rank(&self) -> u64 {
        self.options.rank
    }

    #[getter]
    fn world_size(&self) -> u64 {
        self.options.world_size
    }

    fn __repr__(&self) -> String {
        format!(
            "EpochPlan(batch_size={}, rank={}, world_size={}, start={}, total_positions={}, \
             batches={})",
            self.options.batch_size,
            self.options.rank,
            self.options.world_size,
            self.plan.start(),
            self.plan.total_positions(),
            self.batches
        )
    }
}

impl EpochPlan {
    fn check(&self, k: u64) -> PyResult<()> {
        if k >= self.batches {
            return Err(PyIndexError::new_err(format!(
                "batch {k} is outside this rank's {} batches",
                self.batches
            )));
        }
        Ok(())
    }
}
