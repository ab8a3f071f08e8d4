//! Reading what a page shows: its records (only those, size-capped first) and its
//! annotation values.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use guideloom::Dataset;
use guideloom::publish::Snapshot;

use super::state::State;
use crate::html::{RecordContent, RecordFormat};

/// What reading one record gave.
#[derive(Debug)]
pub(super) enum Read {
    Bytes(Bytes, RecordFormat),
    TooLarge(u64),
    Error(String),
}

impl Read {
    pub(super) fn content(&self) -> RecordContent<'_> {
        match self {
            Read::Bytes(b, f) => RecordContent::Bytes(b, *f),
            Read::TooLarge(n) => RecordContent::TooLarge(*n),
            Read::Error(e) => RecordContent::Error(e),
        }
    }

    /// Its size, when known.
    pub(super) fn len(&self) -> Option<u64> {
        match self {
            Read::Bytes(b, _) => Some(b.len() as u64),
            Read::TooLarge(n) => Some(*n),
            Read::Error(_) => None,
        }
    }

    /// The error, when reading failed.
    pub(super) fn error(&self) -> Option<&str> {
        match self {
            Read::Error(e) => Some(e),
            _ => None,
        }
    }
}

/// Records `indices` (ascending, in range) of `d`: only these are read, in one batched read
/// per shard; records over the size cap in native shards are left unread.
pub(super) async fn read_records(state: &State, d: &Dataset, indices: &[u64]) -> Vec<Read> {
    let snapshot = d.snapshot();
    let schema = snapshot.manifest.schema.is_some();
    let cap = state.options.max_record_bytes;
    let mut out: Vec<Option<Read>> = indices.iter().map(|_| None).collect();
    let mut wanted = Vec::new();
    let mut formats: HashMap<usize, RecordFormat> = HashMap::new();
    for (slot, &i) in indices.iter().enumerate() {
        let Some(located) = d.table().locate(i) else {
            out[slot] = Some(Read::Error(format!("record {i} is out of range")));
            continue;
        };
        let n = located.shard;
        let shard_ref = &snapshot.shards()[n];
        // A shard no larger than the cap cannot hold a record over it: no need to look.
        if shard_ref.size > cap {
            match d.open_shard_async(n).await {
                Ok(opened) => {
                    formats.insert(n, format_of(opened.record_format(), schema));
                    if let Some(native) = opened.native() {
                        let local = i - d.table().starts()[n];
                        let range = native.index().range(local);
                        let len = range.end - range.start;
                        if len > cap {
                            state.stats.records_skipped.fetch_add(1, Ordering::Relaxed);
                            out[slot] = Some(Read::TooLarge(len));
                            continue;
                        }
                    }
                }
                Err(e) => {
                    out[slot] = Some(Read::Error(format!("shard {}: {e}", shard_ref.key)));
                    continue;
                }
            }
        }
        wanted.push((slot, i, n));
    }
    let to_read: Vec<u64> = wanted.iter().map(|w| w.1).collect();
    if !to_read.is_empty() {
        state
            .stats
            .records_read
            .fetch_add(to_read.len() as u64, Ordering::Relaxed);
        match d.get_many_async(&to_read).await {
            Ok(records) => {
                for ((slot, _, n), bytes) in wanted.iter().zip(records) {
                    let format = match formats.get(n) {
                        Some(f) => *f,
                        None => {
                            let f = match d.open_shard_async(*n).await {
                                Ok(o) => format_of(o.record_format(), schema),
                                Err(_) => RecordFormat::Unknown,
                            };
                            formats.insert(*n, f);
                            f
                        }
                    };
                    out[*slot] = Some(Read::Bytes(bytes, format));
                }
            }
            Err(e) => {
                let e = e.to_string();
                for (slot, _, _) in &wanted {
                    out[*slot] = Some(Read::Error(e.clone()));
                }
            }
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Read::Error("not read".into())))
        .collect()
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
