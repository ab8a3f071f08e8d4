//! [`MemorySource`], the in-memory [`RecordSource`] for tests and examples (the trait itself
//! is `guideloom-format`'s, re-exported at the crate root).

use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::RecordSource;

use crate::error::{Error, Result};

/// Records held in memory, optionally split into shards: a [`RecordSource`] for tests,
/// examples and small pipelines.
#[derive(Debug, Clone)]
pub struct MemorySource {
    records: Arc<[Bytes]>,
    bounds: Option<Vec<u64>>,
    remote: bool,
}

impl MemorySource {
    /// A source over `records` (one shard).
    pub fn new(records: Vec<Bytes>) -> Self {
        MemorySource {
            records: records.into(),
            bounds: None,
            remote: false,
        }
    }

    /// Declares shard sizes (they must sum to the record count) and whether the source
    /// should be treated as remote by [`ShuffleMode::Auto`](crate::ShuffleMode::Auto).
    pub fn with_shards(mut self, shard_sizes: &[u64], remote: bool) -> Result<Self> {
        let mut bounds = vec![0u64];
        for s in shard_sizes {
            bounds.push(bounds[bounds.len() - 1] + s);
        }
        if bounds[bounds.len() - 1] != self.records.len() as u64 {
            return Err(Error::InvalidOptions {
                reason: format!(
                    "shard sizes sum to {}, not the {} records",
                    bounds[bounds.len() - 1],
                    self.records.len()
                ),
            });
        }
        self.bounds = Some(bounds);
        self.remote = remote;
        Ok(self)
    }
}

impl RecordSource for MemorySource {
    type Error = Error;

    fn name(&self) -> String {
        "memory source".to_owned()
    }
    fn len(&self) -> u64 {
        self.records.len() as u64
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        indices
            .iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.records.get(i).cloned())
                    .ok_or_else(|| {
                        Error::out_of_range(i, self.records.len() as u64, "memory source")
                    })
            })
            .collect()
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        self.bounds.as_deref()
    }
    fn is_remote(&self) -> bool {
        self.remote
    }
}
