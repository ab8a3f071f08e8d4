//! The HTML routes: each gathers its [`super::views`] data and renders it with [`crate::html`].

use super::query::Query;
use super::reply::{Reply, html_page};
use super::state::State;
use super::views::{self, Marks};
use crate::html::{self, RecordEntry};

/// `/`: the overview.
pub(super) async fn overview(state: &State) -> Reply {
    let summary = views::overview(state).await?;
    html_page(html::render_overview_page(&summary))
}

/// `/shards`: a snapshot's shards and their health.
pub(super) async fn shards(state: &State, query: &Query) -> Reply {
    let (row, rows) = views::shards(state, query).await?;
    html_page(html::render_shard_list(&row, &rows))
}

/// `/records`: the record browser (of an expired snapshot: the switcher and a note).
pub(super) async fn records(state: &State, query: &Query) -> Reply {
    let p = views::records(state, query).await?;
    let all_sets: Vec<String> = p
        .catalog
        .entries
        .iter()
        .map(|e| format!("{}/{}", e.set, e.version))
        .collect();
    let rows = views::snapshot_rows(state, &Marks::of(&p.catalog)).await?;
    let entries = p
        .indices
        .iter()
        .zip(&p.reads)
        .enumerate()
        .map(|(row, (&index, r))| RecordEntry {
            index,
            content: r.content(),
            annotations: p
                .columns
                .iter()
                .map(|c| c[row].as_ref().map(Vec::as_slice).map_err(Clone::clone))
                .collect(),
        })
        .collect();
    html_page(html::render_records_page(&html::RecordsView {
        snapshot: p.snapshot.id(),
        requested: &p.requested,
        snapshots: &rows,
        expired: p.expired,
        total: p.total,
        page: p.page,
        per: p.per,
        all_sets: &all_sets,
        sets: &p.sets,
        highlight: p.highlight,
        records: entries,
        schema: p.snapshot.manifest.schema.as_ref(),
    }))
}

/// `/record/I`: one record.
pub(super) async fn record(state: &State, query: &Query, index: u64) -> Reply {
    let p = views::record(state, query, index).await?;
    if p.expired {
        return html_page(html::render_expired_record_page(p.snapshot.id(), index));
    }
    let entry = RecordEntry {
        index: p.index,
        content: p.read.content(),
        annotations: p
            .values
            .iter()
            .map(|v| v.as_ref().map(Vec::as_slice).map_err(Clone::clone))
            .collect(),
    };
    html_page(html::render_record_page(&html::RecordDetail {
        snapshot: p.snapshot.id(),
        total: p.total,
        entry,
        sets: &p.sets,
        schema: p.snapshot.manifest.schema.as_ref(),
        shard: &p.snapshot.shards()[p.shard].key,
    }))
}

/// `/card`: a snapshot's card (`snapshot=`, an id or a tag), or the latest card.
pub(super) async fn card(state: &State, query: &Query) -> Reply {
    let (id, card) = views::card(state, query).await?;
    html_page(html::render_card_page(id.as_deref(), card.as_ref()))
}

/// `/bench`: the benchmark charts.
pub(super) fn bench(state: &State) -> Reply {
    html_page(html::render_bench_page(
        state.options.bench.as_ref().map_or(&[][..], |b| &b.1),
        state.options.bench.as_ref().map(|b| b.0.as_str()),
    ))
}
