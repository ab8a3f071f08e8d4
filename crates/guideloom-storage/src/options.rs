//! How storages write ([`WriterOptions`]) and what they cost. Storages: directories of
//! numbered shards with a user-facing API.
//!
//! All three take a directory (the backend's [`Location`](guideloom_io::Location) type), a
//! record format or element type, and a read backend (default
//! [`SeekIo`](guideloom_io::SeekIo)). Writers write local shards through the file system (so
//! they need a `PathBuf` directory); readers discover shards through the backend and see
//! only finished shards.
//!
//! # Costs
//! - Building a storage does no I/O.
//! - `sync_reader()` / `async_reader()` discover shards `0, 1, ...` until the first
//!   not-found and open each with one tail read (footer, index, metadata), so `len` is
//!   known; record bytes are only read on demand.
//! - `read(i)` is one ranged read; `read_many` one batched read per shard touched; in-order
//!   iteration reads up to 1 MiB per request (the default [`RunBudget`](guideloom_format::RunBudget)); a stream slice one read per shard it spans.
//!
//! See `docs/format.md` ("Storage semantics") for out-of-range indices, empty and missing
//! directories, concurrent writers and the drop-without-finish rule.

use std::collections::BTreeMap;

use bytes::Bytes;

use guideloom_format::spec::MAX_RECORDS;
use guideloom_format::{AsyncShard, Error, Located, Result, ShardTable, SyncShard, Value};

/// Default maximum shard size: 256 MiB of payload.
pub const DEFAULT_MAX_SHARD_BYTES: u64 = 256 << 20;

/// Default maximum records per shard: 2²⁰.
pub const DEFAULT_MAX_SHARD_RECORDS: u64 = 1 << 20;

/// Default stream chunk (record) size: 8 KiB. Each chunk has its own CRC32C, so a verified
/// slice read is widened to whole chunks: smaller chunks cost less read amplification, larger
/// ones a smaller index (12 bytes per chunk, held in memory while a reader is open: 0.15% of
/// the stream at 8 KiB, i.e. 1.5 MiB per GiB). See the performance note in `docs/format.md`.
pub const DEFAULT_STREAM_CHUNK_BYTES: u64 = 8 << 10;

/// How storage writers cut shards.
///
/// A shard is finished and a new one started before an append would take it past
/// `max_shard_bytes` of payload or `max_shard_records` records. A record larger than
/// `max_shard_bytes` goes alone into its own shard.
#[derive(Debug, Clone, PartialEq)]
pub struct WriterOptions {
    max_shard_bytes: u64,
    max_shard_records: u64,
    stream_chunk_bytes: u64,
    user: BTreeMap<String, Value>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            max_shard_bytes: DEFAULT_MAX_SHARD_BYTES,
            max_shard_records: DEFAULT_MAX_SHARD_RECORDS,
            stream_chunk_bytes: DEFAULT_STREAM_CHUNK_BYTES,
            user: BTreeMap::new(),
        }
    }
}

impl WriterOptions {
    /// Maximum payload bytes per shard (at least 1).
    pub fn max_shard_bytes(mut self, bytes: u64) -> Self {
        self.max_shard_bytes = bytes.max(1);
        self
    }

    /// Maximum records per shard (1 ..= [`MAX_RECORDS`]).
    pub fn max_shard_records(mut self, records: u64) -> Self {
        self.max_shard_records = records.clamp(1, MAX_RECORDS);
        self
    }

    /// Stream chunk size in bytes (rounded down to whole elements, at least one element).
    pub fn stream_chunk_bytes(mut self, bytes: u64) -> Self {
        self.stream_chunk_bytes = bytes.max(1);
        self
    }

    /// User metadata stored in every shard written.
    pub fn user_metadata(mut self, user: BTreeMap<String, Value>) -> Self {
        self.user = user;
        self
    }

    /// The maximum payload bytes per shard.
    pub fn shard_bytes_limit(&self) -> u64 {
        self.max_shard_bytes
    }

    /// The maximum records per shard.
    pub fn shard_records_limit(&self) -> u64 {
        self.max_shard_records
    }

    /// Whether a shard holding `records` records and `bytes` payload bytes must be finished
    /// before appending a record of `next` bytes.
    pub(crate) fn must_roll(&self, records: u64, bytes: u64, next: u64) -> bool {
        records > 0
            && (records >= self.max_shard_records
                || bytes.saturating_add(next) > self.max_shard_bytes)
    }

    pub(crate) fn chunk_elements(&self, width: u64) -> u64 {
        (self.stream_chunk_bytes / width).max(1)
    }

    pub(crate) fn user(&self) -> &BTreeMap<String, Value> {
        &self.user
    }
}

pub(crate) fn out_of_range(index: u64, len: u64) -> Error {
    Error::IndexOutOfRange { index, len }
}

/// Reads the raw records `indices` of a sharded collection: one batched read per shard
/// touched, results in the order asked.
pub(crate) fn read_grouped(
    table: &ShardTable,
    shards: &[SyncShard],
    indices: &[u64],
) -> Result<Vec<Bytes>> {
    let groups = table
        .group(indices)
        .map_err(|index| out_of_range(index, table.len()))?;
    if let [group] = &groups[..] {
        // One shard touched (a sequential batch): its reads are already in batch order.
        return shards[group.shard].read_many(&group.locals);
    }
    let mut out = vec![Bytes::new(); indices.len()];
    for group in groups {
        let bufs = shards[group.shard].read_many(&group.locals)?;
        for (pos, bytes) in group.positions.into_iter().zip(bufs) {
            out[pos] = bytes;
        }
    }
    Ok(out)
}

/// Async twin of [`read_grouped`]: one batched read per shard touched, shard after shard.
pub(crate) async fn read_grouped_async(
    table: &ShardTable,
    shards: &[AsyncShard],
    indices: &[u64],
) -> Result<Vec<Bytes>> {
    let groups = table
        .group(indices)
        .map_err(|index| out_of_range(index, table.len()))?;
    if let [group] = &groups[..] {
        return shards[group.shard].read_many(&group.locals).await;
    }
    let mut out = vec![Bytes::new(); indices.len()];
    for group in groups {
        let bufs = shards[group.shard].read_many(&group.locals).await?;
        for (pos, bytes) in group.positions.into_iter().zip(bufs) {
            out[pos] = bytes;
        }
    }
    Ok(out)
}

/// Where record `index` lives, or [`Error::IndexOutOfRange`].
pub(crate) fn locate(table: &ShardTable, index: u64) -> Result<Located> {
    table
        .locate(index)
        .ok_or_else(|| out_of_range(index, table.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollover_rule() {
        let o = WriterOptions::default()
            .max_shard_bytes(10)
            .max_shard_records(3);
        assert!(!o.must_roll(0, 0, 100));
        assert!(!o.must_roll(1, 5, 5));
        assert!(o.must_roll(1, 5, 6));
        assert!(o.must_roll(3, 0, 0));
    }
}
