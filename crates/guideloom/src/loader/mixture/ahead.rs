//! A mixture's read-ahead: each batch of ids split by source, every source that reads ahead
//! (a remote dataset) given the stream of its shares, and the batches put back together in
//! order as they are taken.
//!
//! The sources' read-aheads pull their shares at their own pace from one shared splitter,
//! which splits the next batch of the plan when one of them needs it and queues the other
//! sources' shares. A source that does not appear in a batch gets an empty share, so every
//! source's stream has one entry per batch. The queues hold indices only, and at most the
//! sources' read-ahead depth of batches beyond the one taken.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use guideloom_format::ReadAheadBatches;

use crate::error::{Error, Result};

/// What the read-ahead needs of a mixture's reads (implemented by `MixtureReads`).
pub(crate) trait Shared: Clone + Send + Sync + 'static {
    /// The number of sources.
    fn sources(&self) -> usize;
    /// The source of an id and its index there.
    fn locate(&self, id: u64) -> Result<(usize, u64)>;
    /// Source `s`'s records at its own `indices`.
    fn get_share(&self, s: usize, indices: &[u64]) -> Result<Vec<Bytes>>;
    /// Source `s`'s name, for errors.
    fn source_name(&self, s: usize) -> String;
    /// Whether source `s` reads over a network.
    fn source_is_remote(&self, s: usize) -> bool;
    /// Source `s`'s own read-ahead of `shares`, if it has one.
    fn source_read_ahead(
        &self,
        s: usize,
        shares: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<ReadAheadBatches<Error>>;
}

/// Where each id of one batch went: `(source, position in the batch)` in share order.
type Layout = Vec<Vec<usize>>;

struct Split {
    batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
    /// Per source, its shares not yet pulled by its reader.
    shares: Vec<VecDeque<Vec<u64>>>,
    /// The layouts of the batches split and not yet assembled.
    layouts: VecDeque<(usize, Layout)>,
    done: bool,
}

struct Splitter<R> {
    reads: R,
    split: Mutex<Split>,
}

impl<R: Shared> Splitter<R> {
    fn lock(&self) -> MutexGuard<'_, Split> {
        self.split.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Splits the next batch of the plan into the queues; `false` at the end.
    fn split_next(&self, split: &mut Split) -> Result<bool> {
        if split.done {
            return Ok(false);
        }
        let Some(batch) = split.batches.next() else {
            split.done = true;
            return Ok(false);
        };
        let sources = self.reads.sources();
        let mut shares = vec![Vec::new(); sources];
        let mut layout: Layout = vec![Vec::new(); sources];
        for (at, &id) in batch.iter().enumerate() {
            let (s, index) = self.reads.locate(id)?;
            shares[s].push(index);
            layout[s].push(at);
        }
        for (queue, share) in split.shares.iter_mut().zip(shares) {
            queue.push_back(share);
        }
        split.layouts.push_back((batch.len(), layout));
        Ok(true)
    }

    /// Source `s`'s next share, splitting batches until one is queued.
    fn next_share(&self, s: usize) -> Option<Vec<u64>> {
        let mut split = self.lock();
        loop {
            if let Some(share) = split.shares[s].pop_front() {
                return Some(share);
            }
            // An id outside the mixture stops the streams; the assembler reports it.
            if !self.split_next(&mut split).unwrap_or(false) {
                return None;
            }
        }
    }
}

/// One source's shares, as its read-ahead pulls them.
struct Shares<R> {
    splitter: Arc<Splitter<R>>,
    source: usize,
}

impl<R: Shared> Iterator for Shares<R> {
    type Item = Vec<u64>;
    fn next(&mut self) -> Option<Vec<u64>> {
        self.splitter.next_share(self.source)
    }
}

/// How one source's share of each batch is read.
enum Reader {
    /// The source reads its shares ahead.
    Ahead(ReadAheadBatches<Error>),
    /// The source reads its share when the batch is taken.
    Direct,
}

struct Assembler<R> {
    splitter: Arc<Splitter<R>>,
    readers: Vec<Reader>,
    failed: bool,
}

impl<R: Shared> Assembler<R> {
    fn next_batch(&mut self) -> Option<Result<Vec<Bytes>>> {
        // The ahead readers first: they split the batch if nobody has yet.
        let mut got: Vec<Option<Vec<Bytes>>> = Vec::with_capacity(self.readers.len());
        for reader in &mut self.readers {
            match reader {
                Reader::Ahead(batches) => match batches.next() {
                    Some(Ok(records)) => got.push(Some(records)),
                    Some(Err(e)) => return Some(Err(e)),
                    None => got.push(None),
                },
                Reader::Direct => got.push(None),
            }
        }
        let (len, layout) = {
            let mut split = self.splitter.lock();
            if split.layouts.is_empty() {
                match self.splitter.split_next(&mut split) {
                    Ok(true) => {}
                    Ok(false) => return None,
                    Err(e) => return Some(Err(e)),
                }
            }
            let (len, layout) = split.layouts.pop_front()?;
            // The direct sources' shares of this batch, taken from their queues.
            let mut direct = Vec::new();
            for (s, reader) in self.readers.iter().enumerate() {
                if matches!(reader, Reader::Direct) {
                    direct.push((s, split.shares[s].pop_front().unwrap_or_default()));
                }
            }
            drop(split);
            for (s, share) in direct {
                if share.is_empty() {
                    got[s] = Some(Vec::new());
                    continue;
                }
                match self.splitter.reads.get_share(s, &share) {
                    Ok(records) => got[s] = Some(records),
                    Err(e) => return Some(Err(e)),
                }
            }
            (len, layout)
        };
        let mut out = vec![Bytes::new(); len];
        for (s, (records, positions)) in got.into_iter().zip(layout).enumerate() {
            let records = records.unwrap_or_default();
            if records.len() != positions.len() {
                return Some(Err(Error::fetch(
                    self.splitter.reads.source_name(s),
                    format!(
                        "read ahead {} records for a share of {}",
                        records.len(),
                        positions.len()
                    ),
                )));
            }
            for (record, at) in records.into_iter().zip(positions) {
                out[at] = record;
            }
        }
        Some(Ok(out))
    }
}

impl<R: Shared> Iterator for Assembler<R> {
    type Item = Result<Vec<Bytes>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let next = self.next_batch();
        self.failed = matches!(next, Some(Err(_)));
        next
    }
}

/// The read-ahead of `reads` over `batches`. The byte budget is shared evenly by the remote
/// sources; the others read their share when the batch is taken.
pub(crate) fn read_ahead<R: Shared>(
    reads: &R,
    batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
    depth: usize,
    bytes: u64,
) -> ReadAheadBatches<Error> {
    let sources = reads.sources();
    let remote = (0..sources).filter(|&s| reads.source_is_remote(s)).count();
    let splitter = Arc::new(Splitter {
        reads: reads.clone(),
        split: Mutex::new(Split {
            batches,
            shares: vec![VecDeque::new(); sources],
            layouts: VecDeque::new(),
            done: false,
        }),
    });
    let share_bytes = (bytes / remote.max(1) as u64).max(1);
    let readers = (0..sources)
        .map(|s| {
            let shares = Box::new(Shares {
                splitter: Arc::clone(&splitter),
                source: s,
            });
            if reads.source_is_remote(s) {
                reads
                    .source_read_ahead(s, shares, depth, share_bytes)
                    .map_or(Reader::Direct, Reader::Ahead)
            } else {
                Reader::Direct
            }
        })
        .collect();
    Box::new(Assembler {
        splitter,
        readers,
        failed: false,
    })
}
