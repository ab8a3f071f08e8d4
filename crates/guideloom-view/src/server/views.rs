//! What each route shows, gathered from the root as plain data: [`super::pages`] renders it
//! as HTML, [`super::api`] as JSON.

use std::collections::HashMap;

use futures::StreamExt;
use guideloom::publish::Snapshot;
use http::StatusCode;

use super::query::Query;
use super::read::{Read, annotations, read_records};
use super::reply::Fail;
use super::state::State;
use super::{DEFAULT_PER_PAGE, MAX_HEALTH_HEADS, MAX_PER_PAGE};
use crate::html;

/// The overview: identity, every snapshot, the catalog.
pub(super) async fn overview(state: &State) -> Result<html::Summary, Fail> {
    let root = &state.root;
    let identity = root.identity().await.map_err(|e| Fail::from_publish(&e))?;
    let snapshots = match root.snapshots().await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => return Err(Fail::from_publish(&e)),
    };
    let catalog = root.catalog().await.map_err(|e| Fail::from_publish(&e))?;
    let latest = snapshots.last().map(Snapshot::seq);
    Ok(html::Summary {
        root: state.name.clone(),
        dataset_id: identity.dataset_id,
        snapshots: snapshots
            .iter()
            .map(|s| snapshot_row(s, Some(s.seq()) == latest))
            .collect(),
        sets: catalog
            .entries
            .iter()
            .map(|e| html::SetRow {
                set: e.set.clone(),
                version: e.version.clone(),
                snapshot_id: e.snapshot_id.clone(),
                values: e.value_count,
                bytes: e.size,
            })
            .collect(),
        bench: state.options.bench.is_some(),
    })
}

pub(super) fn snapshot_row(s: &Snapshot, latest: bool) -> html::SnapshotRow {
    html::SnapshotRow {
        seq: s.seq(),
        id: s.id().to_owned(),
        mode: match s.manifest.mode {
            guideloom::PublishMode::Full => "full".into(),
            guideloom::PublishMode::Append => "append".into(),
        },
        records: s.total_records(),
        shards: s.shards().len() as u64,
        bytes: s.shards().iter().map(|r| r.size).sum(),
        latest,
    }
}

/// A snapshot's shards with their health: one listing per directory holding shards, or a
/// `HEAD` per shard (at most [`MAX_HEALTH_HEADS`]) where the store cannot list.
pub(super) async fn shards(
    state: &State,
    query: &Query,
) -> Result<(html::SnapshotRow, Vec<html::ShardRow>), Fail> {
    let d = state.dataset(query).await?;
    let snapshot = d.snapshot();
    let store = state.root.store();
    let refs = snapshot.shards();
    let mut sizes: HashMap<String, Option<u64>> = HashMap::new();
    let note;
    if store.capabilities().list {
        let mut dirs: Vec<&str> = refs
            .iter()
            .map(|r| r.key.rsplit_once('/').map_or("", |(d, _)| d))
            .collect();
        dirs.sort_unstable();
        dirs.dedup();
        for dir in dirs {
            let listed = store.list(dir).await.map_err(|e| Fail::from_publish(&e))?;
            for o in listed {
                sizes.insert(o.key, Some(o.size));
            }
        }
        note = None;
    } else {
        let heads: Vec<_> = refs
            .iter()
            .take(MAX_HEALTH_HEADS)
            .map(|r| {
                let (store, key) = (store.clone(), r.key.clone());
                async move {
                    let size = match store.head(&key).await {
                        Ok(info) => Ok(Some(info.size)),
                        Err(e) if e.is_not_found() => Ok(None),
                        Err(e) => Err(e.to_string()),
                    };
                    (key, size)
                }
            })
            .collect();
        let heads: Vec<(String, Result<Option<u64>, String>)> = futures::stream::iter(heads)
            .buffer_unordered(8)
            .collect()
            .await;
        let mut failed = None;
        for (key, size) in heads {
            match size {
                Ok(s) => {
                    sizes.insert(key, s);
                }
                Err(e) => failed = Some(e),
            }
        }
        note = failed;
    }
    let rows: Vec<html::ShardRow> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let health = match sizes.get(&r.key) {
                Some(Some(size)) if *size == r.size => html::Health::Ok,
                Some(Some(size)) => html::Health::SizeMismatch { actual: *size },
                Some(None) => html::Health::Missing,
                None if store.capabilities().list => html::Health::Missing,
                None if i >= MAX_HEALTH_HEADS => html::Health::Unknown {
                    why: format!("only the first {MAX_HEALTH_HEADS} shards are checked"),
                },
                None => html::Health::Unknown {
                    why: note.clone().unwrap_or_else(|| "HEAD failed".into()),
                },
            };
            html::ShardRow {
                key: r.key.clone(),
                size: r.size,
                records: r.record_count,
                format: r.format.name().to_owned(),
                health,
            }
        })
        .collect();
    let latest = state.snapshot_ids().await?.last().map(String::as_str) == Some(snapshot.id());
    Ok((snapshot_row(snapshot, latest), rows))
}

/// A page of records and their annotation values.
#[derive(Debug)]
pub(super) struct RecordsPage {
    pub(super) snapshot: Snapshot,
    pub(super) total: u64,
    pub(super) page: u64,
    pub(super) per: u64,
    pub(super) highlight: Option<u64>,
    /// The shown sets (`set/version`).
    pub(super) sets: Vec<String>,
    pub(super) indices: Vec<u64>,
    pub(super) reads: Vec<Read>,
    /// One column per shown set, one value per index.
    pub(super) columns: Vec<Vec<Result<Vec<u8>, String>>>,
}

/// The page `page=` (or the one holding `index=`) of `per=` records.
pub(super) async fn records(state: &State, query: &Query) -> Result<RecordsPage, Fail> {
    let d = state.dataset(query).await?;
    let snapshot = d.snapshot().clone();
    let total = d.len();
    let per = query
        .number("per")?
        .unwrap_or(DEFAULT_PER_PAGE)
        .clamp(1, MAX_PER_PAGE);
    let highlight = query.number("index")?;
    if let Some(i) = highlight
        && i >= total
    {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "record {i} out of range: snapshot {} has {total} records",
                snapshot.id()
            ),
        ));
    }
    let pages = total.div_ceil(per).max(1);
    let page = match highlight {
        Some(i) => i / per,
        None => query.number("page")?.unwrap_or(0),
    };
    if page >= pages {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "page {page} out of range: snapshot {} has {pages} pages of {per}",
                snapshot.id()
            ),
        ));
    }
    let indices: Vec<u64> = (page * per..((page + 1) * per).min(total)).collect();
    let sets = query.all("set");
    let reads = read_records(state, &d, &indices).await;
    let columns = annotations(state, &sets, &snapshot, &indices).await;
    Ok(RecordsPage {
        snapshot,
        total,
        page,
        per,
        highlight,
        sets,
        indices,
        reads,
        columns,
    })
}

/// One record, its shard and its annotation values.
#[derive(Debug)]
pub(super) struct RecordPage {
    pub(super) snapshot: Snapshot,
    pub(super) total: u64,
    pub(super) index: u64,
    pub(super) shard: usize,
    pub(super) sets: Vec<String>,
    pub(super) read: Read,
    pub(super) values: Vec<Result<Vec<u8>, String>>,
}

/// Record `index` of the snapshot asked for.
pub(super) async fn record(state: &State, query: &Query, index: u64) -> Result<RecordPage, Fail> {
    let d = state.dataset(query).await?;
    let snapshot = d.snapshot().clone();
    let Some(located) = d.table().locate(index) else {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "record {index} out of range: snapshot {} has {} records",
                snapshot.id(),
                d.len()
            ),
        ));
    };
    let sets = query.all("set");
    let read = read_records(state, &d, &[index])
        .await
        .pop()
        .unwrap_or_else(|| Read::Error("not read".into()));
    let values = annotations(state, &sets, &snapshot, &[index])
        .await
        .into_iter()
        .map(|mut c| c.pop().unwrap_or_else(|| Err("not read".into())))
        .collect();
    Ok(RecordPage {
        total: d.len(),
        snapshot,
        index,
        shard: located.shard,
        sets,
        read,
        values,
    })
}
