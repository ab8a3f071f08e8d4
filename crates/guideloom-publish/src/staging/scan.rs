//! [`Scan`]: an in-order scan of a range of records through whole-shard staging, fetching
//! the next shards while the current one is read.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{Run, RunBudget, Runs, ShardTable};

use super::{Prefetcher, StagedShard, Stager};
use crate::error::Result;
use crate::manifest::ShardRef;

/// An in-order scan of a range of records through whole-shard staging, from
/// [`Dataset::scan`](crate::Dataset::scan).
///
/// It holds the staged shard it is reading (so it is not evicted) and releases it before
/// staging the next one, so a scan needs a budget of at least its largest shard. While it
/// reads one shard, the next ones (up to
/// [`StagingOptions::prefetch_shards`](crate::StagingOptions::prefetch_shards)) download,
/// as far as the budget leaves room beside it; dropping the scan cancels those downloads.
#[derive(Debug)]
pub struct Scan<'a> {
    stager: &'a Arc<Stager>,
    shards: &'a [ShardRef],
    /// The per-shard pieces of the range still to stage.
    pieces: Runs<'a>,
    /// The piece being read: its remaining local records.
    piece: Option<Run>,
    remaining: u64,
    current: Option<(usize, Arc<StagedShard>)>,
    buffered: VecDeque<Bytes>,
    prefetcher: Prefetcher,
}

impl<'a> Scan<'a> {
    /// A scan of records `range` of a snapshot with `shards` located by `table`.
    pub(crate) fn new(
        stager: &'a Arc<Stager>,
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
            prefetcher: Prefetcher::default(),
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
            Some((c, s)) if *c == i => {
                let upcoming = self.pieces.clone().map(|p| p.shard);
                self.prefetcher.top_up(self.stager, self.shards, upcoming);
                Arc::clone(s)
            }
            _ => {
                // Release the previous shard first: it may have to make room.
                self.current = None;
                let upcoming = self.pieces.clone().map(|p| p.shard);
                let s = self
                    .prefetcher
                    .stage(self.stager, self.shards, i, upcoming)
                    .await?;
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
