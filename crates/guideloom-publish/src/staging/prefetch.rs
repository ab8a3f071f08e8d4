//! The shards an in-order reader fetches ahead of the one it reads ([`Prefetcher`]), shared
//! by [`Scan`](super::Scan) and the staging path of
//! [`Dataset::read_in_order`](crate::Dataset::read_in_order).

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Poll;

use tokio::task::JoinHandle;

use super::{Cell, Prefetch, StagedShard, Stager};
use crate::error::{Error, Result};
use crate::manifest::ShardRef;

/// A download started ahead of the reader. Dropped unreached (the reader stopped), it is
/// cancelled and its reservation given back, unless it finished or another reader claimed it.
#[derive(Debug)]
struct Prefetched {
    shard: usize,
    key: String,
    cell: Cell,
    task: Option<JoinHandle<Result<()>>>,
    stager: Arc<Stager>,
}

impl Drop for Prefetched {
    fn drop(&mut self) {
        self.stager.cancel_prefetch(&self.key, &self.cell);
    }
}

/// Prefetches of the shards an in-order reader reaches next, in shard order, at most
/// [`StagingOptions::prefetch_shards`](super::StagingOptions::prefetch_shards) of them.
#[derive(Debug, Default)]
pub(crate) struct Prefetcher {
    ahead: VecDeque<Prefetched>,
}

impl Prefetcher {
    /// The staged copy of shard `shard` (of `shards`) for a reader that will then read the
    /// shards `upcoming`, in order: its prefetch claimed if there is one, the prefetches of
    /// the next shards topped up, then the download awaited. A failed prefetch is this
    /// shard's error.
    pub(crate) async fn stage(
        &mut self,
        stager: &Arc<Stager>,
        shards: &[ShardRef],
        shard: usize,
        upcoming: impl Iterator<Item = usize>,
    ) -> Result<Arc<StagedShard>> {
        // Prefetches of shards the reader went past are not wanted any more.
        while self.ahead.front().is_some_and(|p| p.shard < shard) {
            self.ahead.pop_front();
        }
        let mine = match self.ahead.front() {
            Some(p) if p.shard == shard => self.ahead.pop_front(),
            _ => None,
        };
        let reference = &shards[shard];
        let cell = stager.reserve(reference)?;
        let Some(task) = mine.and_then(|mut p| p.task.take()) else {
            // Not prefetched: its download goes first (its first poll queues its requests
            // for permits), then the prefetches of the next shards.
            let download = stager.complete(&cell, reference);
            futures::pin_mut!(download);
            let first = futures::poll!(download.as_mut());
            self.top_up(stager, shards, upcoming);
            return match first {
                Poll::Ready(result) => result,
                Poll::Pending => download.await,
            };
        };
        self.top_up(stager, shards, upcoming);
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                stager.abandon(&reference.key, &cell);
                return Err(e);
            }
            // Cancelled to make room for another reader: fetch it now.
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                stager.abandon(&reference.key, &cell);
                return Err(Error::io(
                    stager.options().directory(),
                    std::io::Error::other(format!("prefetch of {} failed: {e}", reference.key)),
                ));
            }
        }
        stager.complete(&cell, reference).await
    }

    /// Starts prefetches of the first `prefetch_shards` of `upcoming` not started yet, in
    /// order, stopping at the first that does not fit the budget (a reader calls it again
    /// at each batch, so a skipped prefetch starts once there is room).
    pub(crate) fn top_up(
        &mut self,
        stager: &Arc<Stager>,
        shards: &[ShardRef],
        upcoming: impl Iterator<Item = usize>,
    ) {
        let depth = stager.options().prefetch_shards();
        for shard in upcoming.take(depth) {
            if self.ahead.iter().any(|p| p.shard == shard) {
                continue;
            }
            let reference = &shards[shard];
            match stager.prefetch(reference) {
                Prefetch::Started(cell, task) => {
                    let at = self.ahead.partition_point(|p| p.shard < shard);
                    self.ahead.insert(
                        at,
                        Prefetched {
                            shard,
                            key: reference.key.clone(),
                            cell,
                            task: Some(task),
                            stager: Arc::clone(stager),
                        },
                    );
                }
                Prefetch::Present => {}
                Prefetch::NoRoom => break,
            }
        }
    }
}
