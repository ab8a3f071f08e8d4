//! Reading what a page shows: its records (only those, size-capped first) and its
//! annotation values.

use std::ops::Range;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use guideloom::Dataset;
use guideloom::publish::{Capped, Snapshot};

use super::state::State;
use crate::html::{RecordContent, RecordFormat};

/// What reading one record gave.
#[derive(Debug)]
pub(super) enum Read {
    Bytes(Bytes, RecordFormat),
    TooLarge(u64),
    Error(String),
    /// Its snapshot expired: its shard is gone.
    Expired,
}

impl Read {
    pub(super) fn content(&self) -> RecordContent<'_> {
        match self {
            Read::Bytes(b, f) => RecordContent::Bytes(b, *f),
            Read::TooLarge(n) => RecordContent::TooLarge(*n),
            Read::Error(e) => RecordContent::Error(e),
            Read::Expired => RecordContent::Error("its snapshot expired: its shard is gone"),
        }
    }

    /// Its size, when known.
    pub(super) fn len(&self) -> Option<u64> {
        match self {
            Read::Bytes(b, _) => Some(b.len() as u64),
            Read::TooLarge(n) => Some(*n),
            Read::Error(_) | Read::Expired => None,
        }
    }

    /// The error, when reading failed.
    pub(super) fn error(&self) -> Option<&str> {
        match self {
            Read::Error(e) => Some(e),
            Read::Expired => Some("its snapshot expired: its shard is gone"),
            _ => None,
        }
    }
}

/// Records `range` (within the snapshot) of `d`, and only these: one capped read per shard
/// touched ([`Dataset::get_capped_async`]: an unopened large shard is probed for the range's
/// index entries, not opened whole), so a damaged shard fails its own rows only and a
/// record over [`ViewerOptions::max_record_bytes`](super::ViewerOptions) is never read
/// (but in ArrayRecord shards, which have no index of lengths).
pub(super) async fn read_records(state: &State, d: &Dataset, range: Range<u64>) -> Vec<Read> {
    let schema = d.snapshot().manifest.schema.is_some();
    let cap = state.options.max_record_bytes;
    let starts = d.table().starts();
    let mut pieces = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let Some(located) = d.table().locate(at) else {
            break;
        };
        let end = range.end.min(starts[located.shard + 1]);
        pieces.push(at..end);
        at = end;
    }
    let reads = pieces
        .iter()
        .map(|piece| d.get_capped_async(piece.clone(), cap));
    let reads = futures::future::join_all(reads).await;
    let (mut read, mut skipped) = (0, 0);
    let mut out = Vec::with_capacity(usize::try_from(range.end - range.start).unwrap_or(0));
    for (piece, result) in pieces.iter().zip(reads) {
        match result {
            Ok(runs) => {
                for run in runs {
                    let format = format_of(&run.record_format, schema);
                    for record in run.records {
                        out.push(match record {
                            Capped::Bytes(b) => {
                                read += 1;
                                Read::Bytes(b, format)
                            }
                            Capped::TooLarge(n) => {
                                skipped += 1;
                                Read::TooLarge(n)
                            }
                        });
                    }
                }
            }
            Err(e) => {
                let expired = matches!(e, guideloom::publish::Error::SnapshotExpired { .. });
                let e = e.to_string();
                out.extend(piece.clone().map(|_| match expired {
                    true => Read::Expired,
                    false => Read::Error(e.clone()),
                }));
            }
        }
    }
    state.stats.records_read.fetch_add(read, Ordering::Relaxed);
    state
        .stats
        .records_skipped
        .fetch_add(skipped, Ordering::Relaxed);
    out.resize_with(
        usize::try_from(range.end - range.start).unwrap_or(0),
        || Read::Error("out of range".into()),
    );
    out
}

fn format_of(name: &str, schema: bool) -> RecordFormat {
    if schema {
        RecordFormat::Cbor
    } else {
        RecordFormat::from_name(name)
    }
}

/// Each shown set's value for each of `indices`: one column per set.
pub(super) async fn annotations(
    state: &State,
    sets: &[String],
    snapshot: &Snapshot,
    indices: &[u64],
) -> Vec<Vec<Result<Vec<u8>, String>>> {
    let mut columns = Vec::new();
    for name in sets {
        let column = match state.annotation_set(name, snapshot).await {
            Ok(set) => indices
                .iter()
                .map(|&i| set.raw(i).map(<[u8]>::to_vec).map_err(|e| e.to_string()))
                .collect(),
            Err(e) => indices.iter().map(|_| Err(e.clone())).collect(),
        };
        columns.push(column);
    }
    columns
}
