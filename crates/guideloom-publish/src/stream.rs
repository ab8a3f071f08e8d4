//! Token streams as snapshots: what a stream shard is, and the token layout of a snapshot
//! made of them.
//!
//! A **stream shard** is a native shard (`docs/format.md`) whose metadata says `kind:
//! "stream"` and names an element type (`u16`, `u32`, ...), with **one record per
//! document**: the record's bytes are the document's tokens, little-endian, so the shard's
//! data region is the concatenation of its documents and its index is their boundaries
//! (the same layout `StreamWithMetaStorage` writes per shard). Its [`ShardRef`](crate::ShardRef)
//! carries a [`StreamRef`](crate::StreamRef) (`manifest/stream_ref.rs`): the element type,
//! the shard's element count, and optionally a [`CompanionRef`](crate::CompanionRef) to a
//! second native shard holding one CBOR metadata record per document.
//!
//! From the manifest alone a reader knows the element type and where every token lives
//! ([`StreamLayout`]: cumulative element counts), so a token slice is one ranged read per
//! shard it touches, with no shard opened that the slice does not reach.
//!
//! Writing is `root/stream_write.rs` ([`Root::write_stream_shard`](crate::Root::write_stream_shard),
//! [`Root::write_stream_shard_with_meta`](crate::Root::write_stream_shard_with_meta)); the
//! token reads of [`Dataset`](crate::Dataset) are `root/stream_read.rs`.

use guideloom_format::{AsyncShard, ShardTable, element_width};
use tokio::sync::OnceCell;

use crate::snapshot_log::Snapshot;

/// Where the tokens of a stream snapshot live: its element type and the shards' cumulative
/// element counts, from the manifest (no request). Given by
/// [`Dataset::stream`](crate::Dataset::stream).
#[derive(Debug, Clone)]
pub struct StreamLayout {
    element: String,
    width: u64,
    table: ShardTable,
}

impl StreamLayout {
    /// The layout of `snapshot`, or why it is not one stream: every shard must be a stream
    /// shard of the same element type, and there must be at least one.
    pub fn of(snapshot: &Snapshot) -> std::result::Result<Self, String> {
        let shards = snapshot.shards();
        let Some(first) = shards.first() else {
            return Err("it has no shards".to_owned());
        };
        let element = match &first.stream {
            Some(s) => s.element.clone(),
            None => return Err(format!("shard {:?} is not a stream shard", first.key)),
        };
        let mut counts = Vec::with_capacity(shards.len());
        for s in shards {
            match &s.stream {
                Some(st) if st.element == element => counts.push(st.elements),
                Some(st) => {
                    return Err(format!(
                        "shard {:?} holds {} elements, shard {:?} {element}",
                        s.key, st.element, first.key
                    ));
                }
                None => return Err(format!("shard {:?} is not a stream shard", s.key)),
            }
        }
        // Validated manifests bound every count by the shard's size (< 2^48 each).
        let table = ShardTable::from_counts(counts).map_err(|e| e.to_string())?;
        let width = element_width(&element).unwrap_or(1);
        Ok(StreamLayout {
            element,
            width,
            table,
        })
    }

    /// The element type name (`"u16"`, ...).
    pub fn element(&self) -> &str {
        &self.element
    }

    /// The element width in bytes.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Elements (tokens) in the stream.
    pub fn len(&self) -> u64 {
        self.table.len()
    }

    /// `true` when the stream holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where each element lives: the shards' cumulative element counts
    /// ([`ShardTable::starts`] is `[0, e0, e0 + e1, ..., len()]`).
    pub fn table(&self) -> &ShardTable {
        &self.table
    }
}

/// A snapshot reader's stream state: the layout (or why there is none) and the metadata
/// companions, opened once each.
#[derive(Debug)]
pub(crate) struct StreamState {
    pub(crate) layout: std::result::Result<StreamLayout, String>,
    pub(crate) companions: Vec<OnceCell<AsyncShard>>,
}

impl StreamState {
    pub(crate) fn new(snapshot: &Snapshot) -> Self {
        StreamState {
            layout: StreamLayout::of(snapshot),
            companions: snapshot.shards().iter().map(|_| OnceCell::new()).collect(),
        }
    }
}
