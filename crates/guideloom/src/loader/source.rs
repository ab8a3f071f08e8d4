//! What the loader reads from: [`RecordSource`], and [`MemorySource`] for tests and examples.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
#[cfg(doc)]
use crate::order::ShuffleMode;

/// Anything the loader can read records from, by index.
///
/// [`Dataset`](crate::Dataset) implements it; tests and custom pipelines implement it in
/// memory ([`MemorySource`]). Called from the loader's worker threads.
pub trait RecordSource: Send + Sync + 'static {
    /// A short name for error messages.
    fn name(&self) -> String {
        "record source".to_owned()
    }

    /// The number of records.
    fn len(&self) -> u64;

    /// `true` when there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw bytes of records `indices` (each `< len()`), in the same order. One call per
    /// batch: implementations should batch their reads (one request per shard touched).
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>>;

    /// Cumulative record starts of the shards, `[0, len(shard 0), ..., len()]`, when the
    /// source is sharded. Used by [`ShuffleMode::ShardWindow`].
    fn shard_bounds(&self) -> Option<&[u64]> {
        None
    }

    /// `true` for sources where each read is a network request (object stores, HTTP): then
    /// [`ShuffleMode::Auto`] picks the shard-window shuffle.
    fn is_remote(&self) -> bool {
        false
    }
}

impl<S: RecordSource + ?Sized> RecordSource for Arc<S> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        (**self).get_many(indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        (**self).shard_bounds()
    }
    fn is_remote(&self) -> bool {
        (**self).is_remote()
    }
}

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
    /// should be treated as remote by [`ShuffleMode::Auto`].
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
                    .ok_or(Error::OutOfRange {
                        index: i,
                        len: self.records.len() as u64,
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
