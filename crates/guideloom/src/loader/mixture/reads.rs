//! A mixture's records as one [`RecordSource`] over its id space: a batch of ids is split
//! by source, each source reads its share with one `get_many` (remote sources at the same
//! time), and the records go back in the batch's order.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{ReadAheadBatches, RecordSource};

use super::ahead::{Shared, read_ahead};

use super::{Mixture, part_range};
use crate::error::{Error, Result};
use crate::loader::DynSource;

/// The reads of a [`Mixture`]: record id `offset(s) + i − range.start` is source `s`'s
/// record `i`.
#[derive(Clone)]
pub(crate) struct MixtureReads {
    sources: Vec<(Arc<DynSource>, Range<u64>)>,
    /// `offsets[s]`: the first id of source `s`; one more entry, the id count.
    offsets: Vec<u64>,
    remote: bool,
}

impl MixtureReads {
    pub(crate) fn new(mixture: &Mixture) -> Self {
        let mut offsets = vec![0u64];
        let sources: Vec<(Arc<DynSource>, Range<u64>)> = mixture
            .parts
            .iter()
            .map(|p| {
                let range = part_range(p);
                offsets.push(offsets[offsets.len() - 1] + (range.end - range.start));
                (Arc::clone(&p.source), range)
            })
            .collect();
        let remote = sources.iter().any(|(s, _)| s.is_remote());
        MixtureReads {
            sources,
            offsets,
            remote,
        }
    }

    fn source_of(&self, id: u64) -> Result<usize> {
        let s = self.offsets.partition_point(|&o| o <= id);
        if s == 0 || s >= self.offsets.len() {
            return Err(Error::out_of_range(id, self.len(), "mixture"));
        }
        Ok(s - 1)
    }
}

impl Shared for MixtureReads {
    /// The number of sources.
    fn sources(&self) -> usize {
        self.sources.len()
    }

    /// The source of `id` and its index in that source.
    fn locate(&self, id: u64) -> Result<(usize, u64)> {
        let s = self.source_of(id)?;
        Ok((s, self.sources[s].1.start + (id - self.offsets[s])))
    }

    /// Source `s`'s records `indices` (its own indices).
    fn get_share(&self, s: usize, indices: &[u64]) -> Result<Vec<Bytes>> {
        self.sources[s].0.get_many(indices)
    }

    fn source_name(&self, s: usize) -> String {
        self.sources[s].0.name()
    }

    fn source_is_remote(&self, s: usize) -> bool {
        self.sources[s].0.is_remote()
    }

    /// Source `s`'s own read-ahead over `shares` (its own indices).
    fn source_read_ahead(
        &self,
        s: usize,
        shares: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<ReadAheadBatches<Error>> {
        self.sources[s].0.read_ahead(shares, depth, bytes)
    }
}

impl RecordSource for MixtureReads {
    type Error = Error;

    fn name(&self) -> String {
        let names: Vec<String> = self.sources.iter().map(|(s, _)| s.name()).collect();
        format!("mixture of [{}]", names.join(", "))
    }

    fn len(&self) -> u64 {
        self.offsets[self.offsets.len() - 1]
    }

    fn get_many(&self, ids: &[u64]) -> Result<Vec<Bytes>> {
        // Per source: its record indices and where each goes in the batch.
        let mut wanted: Vec<(Vec<u64>, Vec<usize>)> =
            vec![(Vec::new(), Vec::new()); self.sources.len()];
        for (at, &id) in ids.iter().enumerate() {
            let (s, index) = self.locate(id)?;
            wanted[s].0.push(index);
            wanted[s].1.push(at);
        }
        let touched: Vec<usize> = (0..wanted.len())
            .filter(|&s| !wanted[s].0.is_empty())
            .collect();
        let fetch = |s: usize| self.sources[s].0.get_many(&wanted[s].0);
        let fetched: Vec<Result<Vec<Bytes>>> = if self.remote && touched.len() > 1 {
            // Remote sources at the same time: a batch costs one round trip, not one per source.
            std::thread::scope(|scope| {
                let handles: Vec<_> = touched
                    .iter()
                    .map(|&s| scope.spawn(move || fetch(s)))
                    .collect();
                handles
                    .into_iter()
                    // A panic goes on to the loader's worker, which reports it.
                    .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            })
        } else {
            touched.iter().map(|&s| fetch(s)).collect()
        };
        let mut out = vec![Bytes::new(); ids.len()];
        for (&s, got) in touched.iter().zip(fetched) {
            let got = got?;
            if got.len() != wanted[s].1.len() {
                return Err(Error::fetch(
                    self.sources[s].0.name(),
                    format!("asked for {} records, got {}", wanted[s].1.len(), got.len()),
                ));
            }
            for (record, &at) in got.into_iter().zip(&wanted[s].1) {
                out[at] = record;
            }
        }
        Ok(out)
    }

    fn is_remote(&self) -> bool {
        self.remote
    }

    fn read_ahead(
        &self,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<ReadAheadBatches<Error>> {
        // Local sources gain nothing: the loader reads each batch when it builds it.
        self.remote.then(|| read_ahead(self, batches, depth, bytes))
    }
}
