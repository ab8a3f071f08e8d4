//! The JSON routes (`/api/...`): the pages' data as JSON documents.

use std::sync::atomic::Ordering;

use serde_json::json;

use super::query::Query;
use super::reply::{Reply, json_reply};
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

/// `/api/bench`.
pub(super) fn bench(state: &State) -> Reply {
    json_reply(&json!(
        state.options.bench.as_ref().map_or(&[][..], |b| &b.1)
    ))
}

/// `/api/stats`: what the server did.
pub(super) fn stats(state: &State) -> Reply {
    let s = &state.stats;
    json_reply(&json!({
        "requests": s.requests.load(Ordering::Relaxed),
        "records_read": s.records_read.load(Ordering::Relaxed),
        "records_skipped": s.records_skipped.load(Ordering::Relaxed),
    }))
}
