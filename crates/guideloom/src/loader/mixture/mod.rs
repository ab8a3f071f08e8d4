//! Weighted mixtures of sources: [`Mixture`] (what to mix and how much of each), its order
//! (`order.rs`, on the split tree of `split.rs`), its reads (`reads.rs`) and their
//! read-ahead (`ahead.rs`).

mod ahead;
mod order;
mod reads;
mod split;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::RecordSource;
use serde::{Deserialize, Serialize};

use super::order::ShuffleMode;
use super::{Adapted, DynSource};
use crate::error::{Error, Result};

pub(crate) use order::MixOrder;
pub use order::SALT_SOURCES;
use order::{Phase, SourceOrder};
pub(crate) use reads::MixtureReads;
use split::{MAX_SOURCES, SplitTree, units};

/// The most schedule phases a mixture takes (a linear ramp makes one per `every` steps).
pub const MAX_PHASES: usize = 1 << 20;

/// How much of a source a mixture takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Take {
    /// A relative weight (finite, not negative): the source's share of every span of
    /// positions is `weight / Σ weights`. The epoch is [`Mixture::with_epoch_size`]
    /// positions, by default the sum of the sources' record counts.
    Weight(f64),
    /// Exactly this many samples per epoch (MDS's `choose`): fewer than the source holds
    /// walks on through its records next epoch; more repeats them.
    Choose(u64),
    /// This many passes over the source per epoch (MDS's `repeat`): `floor(repeat · n + 0.5)`
    /// samples, computed in IEEE-754 doubles. `0.5` takes half the records each epoch.
    Repeat(f64),
}

/// Weights that change with the training step (Megatron-Energon's weight schedules): from
/// step `points[i].0` on, the weights are `points[i].1`, one per source; [`Ramp::Linear`]
/// moves between consecutive points in stages instead of at once. A step is a global batch
/// of the loader: step `t` starts at global position `t · batch_size`, counted across
/// epochs (`epoch · epoch_size + position`). Before the first point the sources' own
/// [`Take::Weight`]s apply; after the last, its weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightSchedule {
    /// `(step, weights)`, steps strictly increasing.
    pub points: Vec<(u64, Vec<f64>)>,
    /// How the weights go from one point to the next.
    pub ramp: Ramp,
}

/// How a [`WeightSchedule`] moves between points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Ramp {
    /// The weights change at each point and hold until the next.
    Step,
    /// Linear interpolation, in stages of `every` steps: from point `(a, wa)` to `(b, wb)`,
    /// the stage starting at step `t` (`t = a, a + every, ... < b`) has the weights
    /// `wa + (wb − wa) · ((t − a) / (b − a))`, in IEEE-754 doubles in that order.
    Linear {
        /// Steps per stage (at least 1).
        every: u64,
    },
}

struct Part {
    source: Arc<DynSource>,
    range: Option<Range<u64>>,
    take: Take,
}

/// Several sources read as one, each with a weight or a per-epoch sample count: the
/// sources of a [`Loader::mixture`](crate::Loader::mixture).
///
/// A source is any [`RecordSource`] (a [`Dataset`](crate::Dataset) of a root or snapshot,
/// a storage's reader, a [`MemorySource`](crate::MemorySource)) or a range of its records.
/// The loader's batches hold record *ids*: source `s`'s record `i` (of its range starting at
/// `r`) is id `offset(s) + i − r`, where `offset(s)` is the number of records in the ranges of
/// the sources before it; [`Mixture::locate`] turns an id back into `(s, i)`.
///
/// The order is exact and a pure function of `(seed, epoch, position)`: docs/loader.md,
/// "Weighted mixtures", specifies it bit for bit and states the proportion bounds.
///
/// ```
/// use guideloom::{Bytes, Loader, LoaderOptions, MemorySource, Mixture, Take};
///
/// let web = MemorySource::new((0..1000u32).map(|_| Bytes::from_static(b"w")).collect());
/// let code = MemorySource::new((0..100u32).map(|_| Bytes::from_static(b"c")).collect());
/// let mixture = Mixture::new()
///     .with_source(web, Take::Weight(0.7))
///     .with_source(code, Take::Weight(0.3))
///     .with_epoch_size(1000);
/// let loader = Loader::mixture(mixture.clone(), LoaderOptions::new(10), |_id, b: Bytes| {
///     Ok::<u8, guideloom::Error>(b[0])
/// })?;
/// let batch = loader.epoch(0)?.next().unwrap()?;
/// assert_eq!(batch.records.iter().filter(|&&r| r == b'c').count(), 3); // 30 % of every batch
/// assert_eq!(mixture.locate(batch.indices[0]).unwrap().0, 0); // (source, record)
/// # Ok::<(), guideloom::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Mixture {
    parts: Vec<Arc<Part>>,
    epoch_size: Option<u64>,
    schedule: Option<WeightSchedule>,
}

impl fmt::Debug for Mixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<(String, Option<Range<u64>>, Take)> = self
            .parts
            .iter()
            .map(|p| (p.source.name(), p.range.clone(), p.take))
            .collect();
        f.debug_struct("Mixture")
            .field("parts", &parts)
            .field("epoch_size", &self.epoch_size)
            .field("schedule", &self.schedule)
            .finish()
    }
}

impl Mixture {
    /// An empty mixture.
    pub fn new() -> Self {
        Mixture::default()
    }

    /// Adds all of `source`'s records, taken as `take` says.
    #[must_use]
    pub fn with_source<S: RecordSource>(self, source: S, take: Take) -> Self {
        self.push(source, None, take)
    }

    /// Adds `source`'s records `range` (a subset by index range), taken as `take` says.
    #[must_use]
    pub fn with_range<S: RecordSource>(self, source: S, range: Range<u64>, take: Take) -> Self {
        self.push(source, Some(range), take)
    }

    fn push<S: RecordSource>(mut self, source: S, range: Option<Range<u64>>, take: Take) -> Self {
        self.parts.push(Arc::new(Part {
            source: Arc::new(Adapted(source)),
            range,
            take,
        }));
        self
    }

    /// Positions per epoch (default: the sources' record counts summed for weights, the
    /// samples per epoch summed for [`Take::Choose`] / [`Take::Repeat`]).
    #[must_use]
    pub fn with_epoch_size(mut self, positions: u64) -> Self {
        self.epoch_size = Some(positions);
        self
    }

    /// Weights that change with the step (sources taken by [`Take::Weight`] only).
    #[must_use]
    pub fn with_schedule(mut self, schedule: WeightSchedule) -> Self {
        self.schedule = Some(schedule);
        self
    }

    /// The number of sources.
    pub fn sources(&self) -> usize {
        self.parts.len()
    }

    /// The number of record ids: the records of every source's range.
    pub fn len(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| part_range(p).end - part_range(p).start)
            .sum()
    }

    /// `true` with no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The source and the source's own record index of a record id from a batch (`None`
    /// past the last id).
    pub fn locate(&self, id: u64) -> Option<(usize, u64)> {
        let mut offset = 0u64;
        for (s, part) in self.parts.iter().enumerate() {
            let range = part_range(part);
            let n = range.end - range.start;
            if id - offset < n {
                return Some((s, range.start + id - offset));
            }
            offset += n;
        }
        None
    }

    /// The records with ids `ids` (any order, repeats allowed), as a batch of the loader
    /// reads them: each source its share with one `get_many`, remote sources at the same
    /// time.
    ///
    /// # Errors
    /// An id past [`len`](Self::len) is out of range; a source's error as the loader
    /// reports it.
    pub fn get_many(&self, ids: &[u64]) -> Result<Vec<Bytes>> {
        MixtureReads::new(self).get_many(ids)
    }

    /// The records of `batches` (lists of ids), batch after batch, read ahead of the caller
    /// as the loader reads them: every remote source keeps up to `depth` of its shares in
    /// flight or waiting, within about `bytes` of payload shared evenly among them; local
    /// sources read their share when the batch is taken (so does every source when none is
    /// remote).
    pub fn read_ahead(
        &self,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> guideloom_format::ReadAheadBatches<Error> {
        let reads = MixtureReads::new(self);
        if reads.is_remote() {
            ahead::read_ahead(&reads, batches, depth.max(1), bytes)
        } else {
            Box::new(DirectBatches { reads, batches })
        }
    }

    /// Checks the mixture as [`Loader::mixture`](crate::Loader::mixture) does (placing a
    /// schedule's steps with batches of 1), without starting a loader.
    ///
    /// # Errors
    /// [`Error::InvalidOptions`], naming what is wrong.
    pub fn check(&self) -> Result<()> {
        self.build(0, ShuffleMode::Auto, 1).map(drop)
    }

    /// Checks the mixture and builds its order for `seed`, the loader's shuffle mode and
    /// batch size (which places the schedule's steps).
    pub(crate) fn build(&self, seed: u64, shuffle: ShuffleMode, batch: u64) -> Result<MixOrder> {
        let bad = |reason: String| Err(Error::InvalidOptions { reason });
        if self.parts.is_empty() {
            return bad("a mixture needs at least one source".into());
        }
        if self.parts.len() > MAX_SOURCES {
            return bad(format!(
                "a mixture takes at most {MAX_SOURCES} sources, not {}",
                self.parts.len()
            ));
        }
        let mut sources = Vec::with_capacity(self.parts.len());
        let mut offset = 0u64;
        for (s, part) in self.parts.iter().enumerate() {
            let len = part.source.len();
            let range = part_range(part);
            if range.start > range.end || range.end > len {
                return bad(format!(
                    "source {s} ({}): range {range:?} is not within its {len} records",
                    part.source.name()
                ));
            }
            let bounds = part.source.shard_bounds().map(|b| clip_bounds(b, &range));
            sources.push(SourceOrder::new(
                range.end - range.start,
                offset,
                shuffle,
                bounds,
                part.source.is_remote(),
                seed,
                s,
            ));
            offset += range.end - range.start;
        }
        let (first_units, samples) = self.base_units()?;
        let epoch_size = match self.epoch_size {
            Some(e) => e,
            None => samples,
        };
        let mut stages = vec![(0u64, first_units)];
        if let Some(schedule) = &self.schedule {
            if self
                .parts
                .iter()
                .any(|p| !matches!(p.take, Take::Weight(_)))
            {
                return bad("a weight schedule needs every source taken by Take::Weight".into());
            }
            stages.extend(self.schedule_stages(schedule, batch)?);
        }
        // A point at step 0 replaces the sources' own weights.
        if stages.len() > 1 && stages[1].0 == 0 {
            stages.remove(0);
        }
        let mut phases: Vec<Phase> = Vec::with_capacity(stages.len());
        for (start, units) in stages {
            for (s, &u) in units.iter().enumerate() {
                if u > 0 && sources[s].n == 0 {
                    return bad(format!(
                        "source {s} ({}) has no records but a positive weight",
                        self.parts[s].source.name()
                    ));
                }
            }
            let tree = SplitTree::new(&units);
            let base = match phases.last() {
                None => vec![0; units.len()],
                Some(prev) => (0..units.len())
                    .map(|s| prev.base[s] + prev.tree.count_before(s, start - prev.start))
                    .collect(),
            };
            phases.push(Phase { start, tree, base });
        }
        Ok(MixOrder {
            epoch_size,
            phases,
            sources,
        })
    }

    /// The first phase's units, and the default epoch size.
    fn base_units(&self) -> Result<(Vec<u64>, u64)> {
        let weights = self.parts.iter().all(|p| matches!(p.take, Take::Weight(_)));
        if weights {
            let w: Vec<f64> = self
                .parts
                .iter()
                .map(|p| match p.take {
                    Take::Weight(w) => w,
                    _ => 0.0,
                })
                .collect();
            check_weights(&w, "the sources' weights")?;
            let records = self.len();
            return Ok((units(&w), records));
        }
        let mut counts = Vec::with_capacity(self.parts.len());
        for (s, part) in self.parts.iter().enumerate() {
            let range = part_range(part);
            let n = range.end - range.start;
            let count = match part.take {
                Take::Choose(c) => c,
                Take::Repeat(r) if r.is_finite() && r >= 0.0 => {
                    // n < 2^53 in practice; as f64 then back, floor(r·n + 0.5).
                    #[allow(
                        clippy::cast_possible_truncation,
                        clippy::cast_sign_loss,
                        clippy::cast_precision_loss
                    )]
                    let c = (r * n as f64 + 0.5).floor() as u64;
                    c
                }
                Take::Repeat(r) => {
                    return Err(Error::InvalidOptions {
                        reason: format!(
                            "source {s}: repeat {r} is not a finite, non-negative number"
                        ),
                    });
                }
                Take::Weight(_) => {
                    return Err(Error::InvalidOptions {
                        reason: "a mixture takes every source by Take::Weight, or none".into(),
                    });
                }
            };
            counts.push(count);
        }
        let total = counts
            .iter()
            .try_fold(0u64, |a, &c| a.checked_add(c))
            .ok_or_else(|| Error::InvalidOptions {
                reason: "the samples per epoch sum past 2^64".into(),
            })?;
        if total == 0 {
            return Err(Error::InvalidOptions {
                reason: "a mixture takes no samples from any source".into(),
            });
        }
        Ok((counts, total))
    }

    /// The schedule's stages: `(start position, units)`.
    fn schedule_stages(
        &self,
        schedule: &WeightSchedule,
        batch: u64,
    ) -> Result<Vec<(u64, Vec<u64>)>> {
        let bad = |reason: String| Error::InvalidOptions { reason };
        let points = &schedule.points;
        if points.is_empty() {
            return Err(bad("a weight schedule needs at least one point".into()));
        }
        for (i, (step, w)) in points.iter().enumerate() {
            if w.len() != self.parts.len() {
                return Err(bad(format!(
                    "schedule point {i} (step {step}) has {} weights for {} sources",
                    w.len(),
                    self.parts.len()
                )));
            }
            check_weights(w, &format!("schedule point {i} (step {step})"))?;
            if i > 0 && points[i - 1].0 >= *step {
                return Err(bad("schedule steps must increase strictly".into()));
            }
        }
        let start = |step: u64| {
            step.checked_mul(batch)
                .ok_or_else(|| bad(format!("schedule step {step} is past 2^64 positions")))
        };
        let mut stages = Vec::new();
        for (i, (a, wa)) in points.iter().enumerate() {
            match (schedule.ramp, points.get(i + 1)) {
                (Ramp::Linear { every }, Some((b, wb))) => {
                    if every == 0 {
                        return Err(bad("a linear ramp's stage must be at least 1 step".into()));
                    }
                    let mut t = *a;
                    while t < *b {
                        if stages.len() >= MAX_PHASES {
                            return Err(bad(format!(
                                "the schedule makes more than {MAX_PHASES} stages; raise `every`"
                            )));
                        }
                        #[allow(clippy::cast_precision_loss)]
                        let f = (t - a) as f64 / (b - a) as f64;
                        let w: Vec<f64> =
                            wa.iter().zip(wb).map(|(&x, &y)| x + (y - x) * f).collect();
                        check_weights(&w, &format!("the schedule at step {t}"))?;
                        stages.push((start(t)?, units(&w)));
                        t = t.saturating_add(every);
                    }
                }
                _ => stages.push((start(*a)?, units(wa))),
            }
            if stages.len() > MAX_PHASES {
                return Err(bad(format!(
                    "the schedule makes more than {MAX_PHASES} stages"
                )));
            }
        }
        Ok(stages)
    }
}

/// Batches read when taken (a mixture with no remote source).
struct DirectBatches {
    reads: MixtureReads,
    batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
}

impl Iterator for DirectBatches {
    type Item = Result<Vec<Bytes>>;
    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.batches.next()?;
        Some(self.reads.get_many(&batch))
    }
}

fn part_range(part: &Part) -> Range<u64> {
    part.range.clone().unwrap_or(0..part.source.len())
}

/// Finite, not negative, one positive.
fn check_weights(w: &[f64], what: &str) -> Result<()> {
    if w.iter().any(|x| !x.is_finite() || *x < 0.0) || !w.iter().any(|x| *x > 0.0) {
        return Err(Error::InvalidOptions {
            reason: format!("{what}: weights must be finite and not negative, one positive: {w:?}"),
        });
    }
    Ok(())
}

/// A source's shard bounds restricted to `range` and rebased to 0.
fn clip_bounds(bounds: &[u64], range: &Range<u64>) -> Vec<u64> {
    let mut out = vec![0u64];
    for &b in bounds {
        if b > range.start && b < range.end {
            out.push(b - range.start);
        }
    }
    out.push(range.end - range.start);
    out.dedup();
    out
}
