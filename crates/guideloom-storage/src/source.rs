//! The storages' sync readers as [`RecordSource`]s: the loader reads a plain storage
//! directory as well as a published root. The trait itself is guideloom-format's.

use bytes::Bytes;
use guideloom_format::{Element, Error, Format, RecordSource, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::options::read_grouped;
use crate::{DocumentReader, StreamReader, StreamWithMetaReader};

/// A storage of documents: record `i` is document `i`'s encoded bytes (decode them with the
/// storage's [`Format`]). Shard bounds are the shards' record counts; a storage is not
/// considered remote (pick the shard-window shuffle explicitly for a storage read through a
/// remote backend).
impl<F: Format> RecordSource for DocumentReader<F> {
    type Error = Error;

    fn name(&self) -> String {
        format!("document storage {}", self.location())
    }
    fn len(&self) -> u64 {
        DocumentReader::len(self)
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        self.read_many_raw(indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        Some(self.table().starts())
    }
}

/// A stream: record `i` is chunk `i` of the stream — the shards' checksummed records of
/// [`WriterOptions::stream_chunk_bytes`](crate::WriterOptions::stream_chunk_bytes) (the last
/// chunk of a shard may be shorter) — as little-endian element bytes. Shard bounds count
/// chunks.
impl<E: Element> RecordSource for StreamReader<E> {
    type Error = Error;

    fn name(&self) -> String {
        format!("stream storage {}", self.location())
    }
    fn len(&self) -> u64 {
        self.records().len()
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        read_grouped(self.records(), self.shards(), indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        Some(self.records().starts())
    }
}

/// A stream of documents: record `i` is document `i`'s elements, as little-endian element
/// bytes (its metadata is read with
/// [`read_meta`](StreamWithMetaReader::read_meta)). Shard bounds count documents.
impl<E, M> RecordSource for StreamWithMetaReader<E, M>
where
    E: Element,
    M: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    type Error = Error;

    fn name(&self) -> String {
        format!("stream-with-meta storage {}", self.stream().location())
    }
    fn len(&self) -> u64 {
        self.num_docs()
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        read_grouped(self.docs(), self.stream().shards(), indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        Some(self.docs().starts())
    }
}
