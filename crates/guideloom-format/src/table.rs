//! The shard table and the run planner; documented in the crate root's "Where a record lives" section.

use std::collections::HashMap;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::index::Index;

/// Groups [`ShardTable::group`] finds by scanning before it builds a map.
const GROUP_SCAN: usize = 16;

/// How [`ShardTable::group`] finds the group of a shard.
enum GroupFinder {
    /// Few shards for the batch: a slot per shard (`u32::MAX` for none yet), one look-up
    /// per index.
    Direct(Vec<u32>),
    /// Many shards: the last group, then a scan of the groups so far, and a map only once
    /// there are more than [`GROUP_SCAN`] (batches are mostly runs of one shard, over a
    /// few shards).
    Scan(HashMap<usize, usize>),
}

impl GroupFinder {
    /// The finder for `batch` indices over `shards` shards: a direct table when it costs no
    /// more than a few words per index.
    fn new(shards: usize, batch: usize) -> Self {
        if shards <= batch.saturating_mul(4).max(64) {
            GroupFinder::Direct(vec![u32::MAX; shards])
        } else {
            GroupFinder::Scan(HashMap::new())
        }
    }

    /// The group of `shard`, appended to `groups` (as `(shard, 0)`) when it is new.
    fn group(&mut self, groups: &mut Vec<(usize, usize)>, shard: usize) -> usize {
        let add = |groups: &mut Vec<(usize, usize)>| {
            groups.push((shard, 0));
            groups.len() - 1
        };
        match self {
            GroupFinder::Direct(slots) => match slots[shard] {
                u32::MAX => {
                    let g = add(groups);
                    // At most `shards` groups, and a direct table has fewer than 2^32 slots.
                    slots[shard] = u32::try_from(g).unwrap_or(u32::MAX);
                    g
                }
                g => g as usize,
            },
            GroupFinder::Scan(by_shard) => match groups.last() {
                Some(&(last, _)) if last == shard => groups.len() - 1,
                _ if groups.len() <= GROUP_SCAN => groups
                    .iter()
                    .position(|&(s, _)| s == shard)
                    .unwrap_or_else(|| add(groups)),
                _ => {
                    if by_shard.is_empty() {
                        by_shard.extend(groups.iter().enumerate().map(|(g, &(s, _))| (s, g)));
                    }
                    *by_shard.entry(shard).or_insert_with(|| add(groups))
                }
            },
        }
    }
}

/// Cumulative record counts of an ordered list of shards.
///
/// `starts()[i]` is the global index of shard `i`'s first record; one last entry is the
/// total. Empty shards are allowed anywhere: they own no index and are skipped by
/// [`locate`](Self::locate), [`group`](Self::group) and [`runs`](Self::runs). The total is at
/// most [`ShardTable::MAX_LEN`].
///
/// ```
/// use guideloom_format::{Located, ShardTable};
/// let table = ShardTable::from_counts([2, 0, 3]).unwrap();
/// assert_eq!(table.len(), 5);
/// assert_eq!(table.starts(), &[0, 2, 2, 5]);
/// assert_eq!(table.bounds(2), 2..5);
/// assert_eq!(table.locate(2), Some(Located { shard: 2, local: 0 }));
/// assert_eq!(table.locate(5), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardTable {
    starts: Vec<u64>,
}

impl Default for ShardTable {
    /// A table of no shards.
    fn default() -> Self {
        ShardTable { starts: vec![0] }
    }
}

/// Where a global index lives: shard position and the record's index inside that shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Located {
    /// The shard's position in the table.
    pub shard: usize,
    /// The record's index inside the shard.
    pub local: u64,
}

/// The indices of one shard in a batch (see [`ShardTable::group`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardGroup {
    /// The shard's position in the table.
    pub shard: usize,
    /// The positions, in the batch asked, of this shard's indices (ascending).
    pub positions: Vec<usize>,
    /// The local index of each, in the same order as `positions`.
    pub locals: Vec<u64>,
}

/// Consecutive records `first .. first + count` of one shard (local indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Run {
    /// The shard's position in the table.
    pub shard: usize,
    /// The local index of the run's first record.
    pub first: u64,
    /// The number of records.
    pub count: u64,
}

impl Run {
    /// The local indices of the run, `first .. first + count`.
    pub fn locals(&self) -> Range<u64> {
        self.first..self.first + self.count
    }
}

impl ShardTable {
    /// The largest total a table holds: 2⁶³ − 1, so every global index is also a valid
    /// `i64` (Python, Arrow, NumPy indices).
    pub const MAX_LEN: u64 = i64::MAX as u64;

    /// A table of shards holding `counts[i]` records each, in order.
    ///
    /// [`Error::TableOverflow`] names the first shard whose records would take the total
    /// past [`MAX_LEN`](Self::MAX_LEN).
    pub fn from_counts(counts: impl IntoIterator<Item = u64>) -> Result<Self> {
        let counts = counts.into_iter();
        let mut starts = Vec::with_capacity(counts.size_hint().0 + 1);
        let mut total = 0u64;
        starts.push(0);
        for (shard, count) in counts.enumerate() {
            total = total
                .checked_add(count)
                .filter(|&t| t <= Self::MAX_LEN)
                .ok_or(Error::TableOverflow {
                    shard,
                    limit: Self::MAX_LEN,
                })?;
            starts.push(total);
        }
        Ok(ShardTable { starts })
    }

    /// Total records.
    #[inline]
    pub fn len(&self) -> u64 {
        self.starts[self.starts.len() - 1]
    }

    /// `true` when no shard holds a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of shards (empty ones included).
    pub fn shard_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// The first global index of every shard, then the total: `shard_count() + 1` entries,
    /// `[0, n0, n0 + n1, ..., len()]`.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// The global indices of shard `shard`'s records; for a shard past the end, the empty
    /// range `len()..len()`.
    pub fn bounds(&self, shard: usize) -> Range<u64> {
        match (self.starts.get(shard), self.starts.get(shard + 1)) {
            (Some(&start), Some(&end)) => start..end,
            _ => self.len()..self.len(),
        }
    }

    /// Records in shard `shard` (0 past the end).
    pub fn shard_len(&self, shard: usize) -> u64 {
        let b = self.bounds(shard);
        b.end - b.start
    }

    /// The shard holding global index `index` and its local index there; `None` when
    /// `index >= len()`. A binary search: O(log shards).
    #[inline]
    pub fn locate(&self, index: u64) -> Option<Located> {
        if index >= self.len() {
            return None;
        }
        // The last shard starting at or before `index`: of several starting there (empty
        // shards), the non-empty one.
        let shard = self.starts.partition_point(|&s| s <= index) - 1;
        Some(Located {
            shard,
            local: index - self.starts[shard],
        })
    }

    /// Splits a batch of global indices (any order, repeats allowed) by shard.
    ///
    /// Groups come in the order their shard first appears in `indices`; inside a group,
    /// indices keep their order in the batch. `Err` carries the first index (in batch
    /// order) that is `>= len()`. O(n log shards).
    ///
    /// ```
    /// use guideloom_format::{ShardGroup, ShardTable};
    /// let table = ShardTable::from_counts([3, 3]).unwrap();
    /// let groups = table.group(&[4, 0, 5, 1]).unwrap();
    /// assert_eq!(groups[0], ShardGroup { shard: 1, positions: vec![0, 2], locals: vec![1, 2] });
    /// assert_eq!(groups[1], ShardGroup { shard: 0, positions: vec![1, 3], locals: vec![0, 1] });
    /// assert_eq!(table.group(&[1, 9, 7]), Err(9));
    /// ```
    pub fn group(&self, indices: &[u64]) -> std::result::Result<Vec<ShardGroup>, u64> {
        // Pass 1: each index's group (shards numbered by first appearance) and local index,
        // and each group's size; pass 2 fills groups allocated at their exact size.
        let mut located: Vec<(usize, u64)> = Vec::with_capacity(indices.len());
        // (shard, size) per group; room for the groups a scan finds without growing.
        let mut shards: Vec<(usize, usize)> = Vec::with_capacity(indices.len().min(GROUP_SCAN + 1));
        let mut finder = GroupFinder::new(self.shard_count(), indices.len());
        for &index in indices {
            let Located { shard, local } = self.locate(index).ok_or(index)?;
            let g = finder.group(&mut shards, shard);
            shards[g].1 += 1;
            located.push((g, local));
        }
        let mut groups: Vec<ShardGroup> = shards
            .iter()
            .map(|&(shard, size)| ShardGroup {
                shard,
                positions: Vec::with_capacity(size),
                locals: Vec::with_capacity(size),
            })
            .collect();
        for (pos, (g, local)) in located.into_iter().enumerate() {
            groups[g].positions.push(pos);
            groups[g].locals.push(local);
        }
        Ok(groups)
    }

    /// Splits the global range `range` into one [`Run`] per shard it touches, in order
    /// (empty shards give none). The part of `range` past [`len`](Self::len) is ignored.
    ///
    /// ```
    /// use guideloom_format::{Run, ShardTable};
    /// let table = ShardTable::from_counts([4, 0, 4]).unwrap();
    /// let runs: Vec<Run> = table.runs(2..7).collect();
    /// assert_eq!(runs, [Run { shard: 0, first: 2, count: 2 }, Run { shard: 2, first: 0, count: 3 }]);
    /// ```
    pub fn runs(&self, range: Range<u64>) -> Runs<'_> {
        Runs {
            table: self,
            next: range.start,
            end: range.end.min(self.len()),
        }
    }

    /// The global indices of `run`'s records (`run` of this table).
    pub fn global(&self, run: &Run) -> Range<u64> {
        let start = self.bounds(run.shard).start + run.first;
        start..start + run.count
    }
}

/// The per-shard pieces of a global range, from [`ShardTable::runs`].
#[derive(Debug, Clone)]
pub struct Runs<'a> {
    table: &'a ShardTable,
    next: u64,
    end: u64,
}

impl Iterator for Runs<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        if self.next >= self.end {
            return None;
        }
        let Located { shard, local } = self.table.locate(self.next)?;
        let count = self.table.starts[shard + 1].min(self.end) - self.next;
        self.next += count;
        Some(Run {
            shard,
            first: local,
            count,
        })
    }
}

/// Bytes one in-order read asks for at most, by default: 1 MiB.
///
/// Large enough that a remote backend serves an in-order pass with few requests, small
/// enough that a local reader's fresh buffer stays cheap to allocate and fill (with
/// `PreadIo`, 1 KiB records iterate ~15% faster than with 4 MiB batches).
pub const RUN_BYTES: u64 = 1 << 20;

/// Records one in-order read holds at most, by default: 4096.
pub const RUN_RECORDS: u64 = 4096;

/// How much one in-order read may cover: the batching policy of every in-order reader.
///
/// A run holds as many consecutive records as end within `max_bytes` of the run's first
/// byte — always at least one, so a record larger than the budget is read alone — and at
/// most `max_records`. The default is [`RUN_BYTES`] and [`RUN_RECORDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunBudget {
    /// Bytes one read covers at most (unless a single record is larger).
    pub max_bytes: u64,
    /// Records one read holds at most (at least 1 is used).
    pub max_records: u64,
}

impl Default for RunBudget {
    fn default() -> Self {
        RunBudget {
            max_bytes: RUN_BYTES,
            max_records: RUN_RECORDS,
        }
    }
}

impl RunBudget {
    /// A budget of `max_bytes` and `max_records` per read.
    pub const fn new(max_bytes: u64, max_records: u64) -> Self {
        RunBudget {
            max_bytes,
            max_records,
        }
    }

    /// How many records from local index `first` the next read of a shard with `index`
    /// covers, never reaching `end` (exclusive local bound) or the shard's end. O(log
    /// records).
    ///
    /// 0 when `first >= end`. When `first` is at or past the shard's end (a table that
    /// promises more records than the shard holds), the whole rest `end - first` comes back
    /// as one run, so that reading it fails with
    /// [`Error::IndexOutOfRange`] instead of records going silently missing.
    pub fn run_len(&self, index: &Index, first: u64, end: u64) -> u64 {
        if first >= end {
            return 0;
        }
        if first >= index.len() {
            return end - first;
        }
        let start = index.range(first).start;
        // Records before `record_at(start + max_bytes)` all end within the budget.
        let fit = index
            .record_at(start.saturating_add(self.max_bytes))
            .saturating_sub(first);
        fit.clamp(1, self.max_records.max(1))
            .min(index.len() - first)
            .min(end - first)
    }
}

/// Splits `piece` — consecutive records of one shard, e.g. from [`ShardTable::runs`] —
/// into the reads an in-order reader makes: consecutive [`Run`]s of the same shard, each
/// within `budget` (see [`RunBudget`]), together covering `piece` exactly.
///
/// `index` is the open shard's index ([`SyncShard::index`](crate::SyncShard::index),
/// [`AsyncShard::index`](crate::AsyncShard::index)): planning needs the record sizes, so it
/// happens once the shard is open, and reads are planned lazily, one at a time.
pub fn plan_runs(index: &Index, piece: Run, budget: RunBudget) -> PlannedRuns<'_> {
    PlannedRuns {
        index,
        shard: piece.shard,
        next: piece.first,
        end: piece.first.saturating_add(piece.count),
        budget,
    }
}

/// The reads of one shard's piece, from [`plan_runs`].
#[derive(Debug, Clone)]
pub struct PlannedRuns<'a> {
    index: &'a Index,
    shard: usize,
    next: u64,
    end: u64,
    budget: RunBudget,
}

impl Iterator for PlannedRuns<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        let count = self.budget.run_len(self.index, self.next, self.end);
        if count == 0 {
            return None;
        }
        let run = Run {
            shard: self.shard,
            first: self.next,
            count,
        };
        self.next += count;
        Some(run)
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
