//! Shards filled into the node cache ahead of the read-ahead ([`ShardLookahead`]): with the
//! cache on, a remote read-ahead also looks further down its list of batches — about
//! [`LOOKAHEAD_SHARDS`] shards' worth of records — and opens (so fills) the shards those
//! batches will touch that nothing has opened yet, up to [`LOOKAHEAD_FILLS`] at once, in
//! the order the batches reach them. Under the shard-window shuffle that is the next
//! window's shards, fetched while the current window is read.
//!
//! The batches looked at are only indices (8 bytes a record); the fills stay within the
//! cache's budget like any other (a shard that does not fit is opened for ranged reads,
//! which costs one tail read). Dropping the read-ahead aborts the fills it started; a fill
//! cut short leaves a temporary file the cache removes later.

use std::collections::{HashSet, VecDeque};

use tokio::task::JoinHandle;

use super::Dataset;

/// How far ahead the batches are looked at: this many shards' worth of records (at the
/// snapshot's mean shard length), enough to see past a shard window of the default 4.
pub(super) const LOOKAHEAD_SHARDS: u64 = 8;

/// Most shards opened ahead at once: one window of the default shard-window shuffle, so
/// that the next window's fills start together as the current window's end (with 2, the
/// link idled between pairs: 61 000 against 74 000 records/s in the far epoch of
/// docs/cache.md).
pub(super) const LOOKAHEAD_FILLS: usize = 4;

/// At most this many indices are held in looked-at batches (8 MiB).
const MAX_LOOKAHEAD_RECORDS: u64 = 1 << 20;

/// Batches taken from the list early, and the opens started for their shards.
#[derive(Debug)]
pub(super) struct ShardLookahead {
    dataset: Dataset,
    /// Batches taken from the iterator, not yet handed to the read-ahead.
    pub(super) upcoming: VecDeque<Vec<u64>>,
    records: u64,
    limit: u64,
    /// Shards in the order upcoming batches first touch them, not yet opened ahead.
    queue: VecDeque<usize>,
    seen: HashSet<usize>,
    opening: Vec<JoinHandle<()>>,
}

impl ShardLookahead {
    /// A look-ahead for `dataset`, or `None` when it reads no shard through a node cache.
    pub(super) fn new(dataset: &Dataset) -> Option<Self> {
        dataset.inner.root.read_cache()?;
        let shards = dataset.inner.snapshot.shards().len().max(1) as u64;
        let mean = dataset.len().div_ceil(shards).max(1);
        Some(ShardLookahead {
            dataset: dataset.clone(),
            upcoming: VecDeque::new(),
            records: 0,
            limit: (mean * LOOKAHEAD_SHARDS).min(MAX_LOOKAHEAD_RECORDS),
            queue: VecDeque::new(),
            seen: HashSet::new(),
            opening: Vec::new(),
        })
    }

    /// The next batch for the read-ahead: the oldest looked-at one, else the iterator's.
    pub(super) fn next(
        &mut self,
        batches: &mut impl Iterator<Item = Vec<u64>>,
    ) -> Option<Vec<u64>> {
        match self.upcoming.pop_front() {
            Some(batch) => {
                self.records -= batch.len() as u64;
                Some(batch)
            }
            None => batches.next(),
        }
    }

    /// Looks at more batches (up to the limit) and starts opens of the shards they reach
    /// first, within [`LOOKAHEAD_FILLS`]. Must run on a tokio runtime.
    pub(super) fn top_up(&mut self, batches: &mut impl Iterator<Item = Vec<u64>>) {
        while self.records < self.limit {
            let Some(batch) = batches.next() else { break };
            for &i in &batch {
                if let Some(at) = self.dataset.inner.table.locate(i)
                    && self.seen.insert(at.shard)
                {
                    self.queue.push_back(at.shard);
                }
            }
            self.records += batch.len() as u64;
            self.upcoming.push_back(batch);
        }
        self.opening.retain(|task| !task.is_finished());
        while self.opening.len() < LOOKAHEAD_FILLS {
            let Some(shard) = self.queue.pop_front() else {
                break;
            };
            if self.dataset.inner.shards[shard].get().is_some() {
                continue;
            }
            let dataset = self.dataset.clone();
            self.opening.push(tokio::spawn(async move {
                // A failure is the reader's to see, when it reads the shard.
                let _ = dataset.open_shard_async(shard).await;
            }));
        }
    }
}

impl Drop for ShardLookahead {
    fn drop(&mut self) {
        for task in &self.opening {
            task.abort();
        }
    }
}
