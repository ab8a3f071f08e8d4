//! The JSON routes (`/api/...`): the pages' data as JSON documents.

use std::sync::atomic::Ordering;

use http::StatusCode;
use serde_json::json;

use super::query::Query;
use super::reply::{Fail, Reply, json_reply};
use super::state::State;
use super::views;

/// `/api/overview`.
pub(super) async fn overview(state: &State) -> Reply {
    json_reply(&json!(views::overview(state).await?))
}

/// `/api/shards`.
pub(super) async fn shards(state: &State, query: &Query) -> Reply {
    let (row, rows) = views::shards(state, query).await?;
    json_reply(&json!({"snapshot": row, "shards": rows}))
}

/// `/api/records`: each record's index, size (or error) and annotation values.
pub(super) async fn records(state: &State, query: &Query) -> Reply {
    let p = views::records(state, query).await?;
    if p.expired {
        return Err(Fail::new(
            StatusCode::GONE,
            format!(
                "snapshot {} expired: garbage collection deleted its shards",
                p.snapshot.id()
            ),
        ));
    }
    let rows: Vec<_> = p
        .indices
        .iter()
        .zip(&p.reads)
        .enumerate()
        .map(|(row, (i, r))| {
            let values: serde_json::Map<String, serde_json::Value> = p
                .sets
                .iter()
                .zip(&p.columns)
                .map(|(s, c)| {
                    let v = match &c[row] {
                        Ok(raw) => serde_json::from_slice(raw).unwrap_or(serde_json::Value::Null),
                        Err(e) => json!({"error": e}),
                    };
                    (s.clone(), v)
                })
                .collect();
            json!({
                "index": i,
                "bytes": r.len(),
                "error": r.error(),
                "annotations": values,
            })
        })
        .collect();
    json_reply(&json!({
        "snapshot": p.snapshot.id(), "total": p.total, "page": p.page, "per": p.per,
        "records": rows,
    }))
}

/// `/api/card`: `{"snapshot": ID, "card": {...}}` (`card` null when there is none).
pub(super) async fn card(state: &State, query: &Query) -> Reply {
    let (id, card) = views::card(state, query).await?;
    json_reply(&json!({"snapshot": id, "card": card}))
}

/// `/api/bench`.
pub(super) fn bench(state: &State) -> Reply {
    json_reply(&json!(
        state.options.bench.as_ref().map_or(&[][..], |b| &b.1)
    ))
}

/// `/api/stats`: what the server did: requests it answered, records it read and skipped
/// (over the size cap), and the requests it made of the store (`store`: all of them, and by
/// kind; `reader_reads` are shard reads, one per range asked for) with the bytes received.
pub(super) fn stats(state: &State) -> Reply {
    let s = &state.stats;
    let c = state.counting.counts();
    let kind = |k: guideloom::io::StatsSnapshot| json!({"requests": k.requests, "bytes_received": k.bytes_received});
    json_reply(&json!({
        "requests": s.requests.load(Ordering::Relaxed),
        "records_read": s.records_read.load(Ordering::Relaxed),
        "records_skipped": s.records_skipped.load(Ordering::Relaxed),
        "store": {
            "requests": c.requests(),
            "bytes_received": c.total().bytes_received,
            "get": kind(c.get),
            "get_range": kind(c.get_range),
            "head": kind(c.head),
            "list": kind(c.list),
            "reader_reads": kind(c.reader_reads),
        },
    }))
}
