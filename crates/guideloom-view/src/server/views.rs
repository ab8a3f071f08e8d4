//! What each route shows, gathered from the root as plain data: [`super::pages`] renders it
//! as HTML, [`super::api`] as JSON.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::StreamExt;
use guideloom::publish::{Catalog, Snapshot};
use http::StatusCode;

use super::query::Query;
use super::read::{Read, annotations, read_records};
use super::reply::Fail;
use super::state::State;
use super::{DEFAULT_PER_PAGE, MAX_HEALTH_HEADS, MAX_PER_PAGE};
use crate::html;

/// Tags and expired snapshots, by snapshot id: what the snapshot lists mark.
#[derive(Debug, Default)]
pub(super) struct Marks {
    /// Tag names by the snapshot they name.
    tags: BTreeMap<String, Vec<String>>,
    /// Expired snapshot ids.
    expired: BTreeSet<String>,
}

impl Marks {
    /// The catalog's tags and expired snapshots (one GET, which a page needs anyway for the
    /// annotation sets). A collection through a declared mount records its expired
    /// snapshots in its collection record only: [`Marks::with_records`] adds those.
    pub(super) fn of(catalog: &Catalog) -> Self {
        let mut tags: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, tag) in &catalog.tags {
            tags.entry(tag.snapshot_id.clone())
                .or_default()
                .push(name.clone());
        }
        Marks {
            tags,
            expired: catalog
                .expired
                .iter()
                .map(|e| e.snapshot_id.clone())
                .collect(),
        }
    }

    /// These marks and every snapshot `Root::expired` lists (the catalog's and the
    /// collection records': a LIST of `gc/` and a GET per record).
    pub(super) async fn with_records(mut self, state: &State) -> Result<Self, Fail> {
        let expired = state
            .root
            .expired()
            .await
            .map_err(|e| Fail::from_publish(&e))?;
        self.expired
            .extend(expired.into_iter().map(|e| e.snapshot_id));
        Ok(self)
    }

    pub(super) fn is_expired(&self, id: &str) -> bool {
        self.expired.contains(id)
    }

    fn tags_of(&self, id: &str) -> Vec<String> {
        self.tags.get(id).cloned().unwrap_or_default()
    }
}

/// Every snapshot (none on a root with nothing published), oldest first.
async fn snapshots(state: &State) -> Result<Vec<Snapshot>, Fail> {
    match state.root.snapshots().await {
        Ok(s) => Ok(s),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(Fail::from_publish(&e)),
    }
}

/// Every snapshot as a row of the lists, marked.
pub(super) async fn snapshot_rows(
    state: &State,
    marks: &Marks,
) -> Result<Vec<html::SnapshotRow>, Fail> {
    let snapshots = snapshots(state).await?;
    let latest = snapshots.last().map(Snapshot::seq);
    Ok(snapshots
        .iter()
        .map(|s| snapshot_row(s, Some(s.seq()) == latest, marks))
        .collect())
}

/// `s` as a row of the lists, marked.
pub(super) fn snapshot_row(s: &Snapshot, latest: bool, marks: &Marks) -> html::SnapshotRow {
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
        tags: marks.tags_of(s.id()),
        expired: marks.is_expired(s.id()),
    }
}

async fn catalog(state: &State) -> Result<Catalog, Fail> {
    state
        .root
        .catalog()
        .await
        .map_err(|e| Fail::from_publish(&e))
}

/// The overview: identity, every snapshot (marked), the catalog, the latest card.
pub(super) async fn overview(state: &State) -> Result<html::Summary, Fail> {
    let root = &state.root;
    let identity = root.identity().await.map_err(|e| Fail::from_publish(&e))?;
    let catalog = catalog(state).await?;
    let marks = Marks::of(&catalog).with_records(state).await?;
    let snapshots = snapshot_rows(state, &marks).await?;
    let card = latest_card(state, &snapshots).await?;
    Ok(html::Summary {
        root: state.name.clone(),
        dataset_id: identity.dataset_id,
        snapshots,
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
        card,
        bench: state.options.bench.is_some(),
    })
}

/// The card of the newest snapshot that has one. Where the store lists, one LIST of
/// `cards/` finds the snapshots with a `card.json` (a card exists once its `card.json`
/// does) and only the newest is read; elsewhere `Root::latest_card` walks the log (at most
/// 64 snapshots, two GETs each).
async fn latest_card(
    state: &State,
    snapshots: &[html::SnapshotRow],
) -> Result<Option<html::CardView>, Fail> {
    let root = &state.root;
    if !root.store().capabilities().list {
        return match root.latest_card().await {
            Ok(found) => Ok(found.map(|(id, card)| html::CardView::new(id, &card))),
            Err(e) => Err(Fail::from_publish(&e)),
        };
    }
    let listed = match root.store().list("cards").await {
        Ok(listed) => listed,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(Fail::from_publish(&e)),
    };
    let with_card: BTreeSet<&str> = listed.iter().map(|o| o.key.as_str()).collect();
    let Some(newest) = snapshots
        .iter()
        .rev()
        .find(|s| with_card.contains(guideloom::publish::card_json_key(&s.id).as_str()))
    else {
        return Ok(None);
    };
    card_of(state, &newest.id).await
}

/// Snapshot `id`'s card, if it has one.
async fn card_of(state: &State, id: &str) -> Result<Option<html::CardView>, Fail> {
    match state.root.card(id).await {
        Ok(card) => Ok(card.map(|c| html::CardView::new(id, &c))),
        Err(e) => Err(Fail::from_publish(&e)),
    }
}

/// `/card`: the card of the snapshot asked for (an id or a tag), or the latest card; the
/// snapshot id and its card (`None`: it has none; no id: no snapshot has one).
pub(super) async fn card(
    state: &State,
    query: &Query,
) -> Result<(Option<String>, Option<html::CardView>), Fail> {
    match query.get("snapshot") {
        Some(name) => {
            let snapshot = state
                .root
                .snapshot(name)
                .await
                .map_err(|e| Fail::from_publish(&e))?;
            let id = snapshot.id().to_owned();
            let card = card_of(state, &id).await?;
            Ok((Some(id), card))
        }
        None => {
            let marks = Marks::default();
            let rows = snapshot_rows(state, &marks).await?;
            let card = latest_card(state, &rows).await?;
            Ok((card.as_ref().map(|c| c.snapshot_id.clone()), card))
        }
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
    let marks = Marks::of(&catalog(state).await?);
    Ok((snapshot_row(snapshot, latest, &marks), rows))
}

/// A page of records and their annotation values.
#[derive(Debug)]
pub(super) struct RecordsPage {
    pub(super) snapshot: Snapshot,
    /// What `snapshot=` named (an id or a tag; the default's name, or the id, without).
    pub(super) requested: String,
    /// The snapshot expired: nothing was (or could be) read.
    pub(super) expired: bool,
    /// The catalog read for the page (its tags, expired snapshots and sets).
    pub(super) catalog: Catalog,
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
    let range = page * per..((page + 1) * per).min(total);
    let sets = query.all("set");
    let catalog = catalog(state).await?;
    let requested = requested(state, query, &snapshot);
    if Marks::of(&catalog).is_expired(snapshot.id()) {
        return Ok(RecordsPage {
            snapshot,
            requested,
            expired: true,
            catalog,
            total,
            page,
            per,
            highlight,
            sets,
            indices: Vec::new(),
            reads: Vec::new(),
            columns: Vec::new(),
        });
    }
    let indices: Vec<u64> = range.clone().collect();
    let reads = read_records(state, &d, range).await;
    let expired = reads.iter().any(|r| matches!(r, Read::Expired));
    let columns = annotations(state, &sets, &snapshot, &indices).await;
    Ok(RecordsPage {
        snapshot,
        requested,
        expired,
        catalog,
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

/// What `snapshot=` named, or the viewer's default, or (the latest) the snapshot's id.
fn requested(state: &State, query: &Query, snapshot: &Snapshot) -> String {
    query
        .get("snapshot")
        .or(state.options.snapshot.as_deref())
        .unwrap_or(snapshot.id())
        .to_owned()
}

/// One record, its shard and its annotation values.
#[derive(Debug)]
pub(super) struct RecordPage {
    pub(super) snapshot: Snapshot,
    /// The snapshot expired: nothing was (or could be) read.
    pub(super) expired: bool,
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
    let mut expired = Marks::of(&catalog(state).await?).is_expired(snapshot.id());
    let (read, values) = if expired {
        (Read::Expired, Vec::new())
    } else {
        let read = read_records(state, &d, index..index + 1)
            .await
            .pop()
            .unwrap_or_else(|| Read::Error("not read".into()));
        expired = matches!(read, Read::Expired);
        let values = annotations(state, &sets, &snapshot, &[index])
            .await
            .into_iter()
            .map(|mut c| c.pop().unwrap_or_else(|| Err("not read".into())))
            .collect();
        (read, values)
    };
    Ok(RecordPage {
        total: d.len(),
        expired,
        snapshot,
        index,
        shard: located.shard,
        sets,
        read,
        values,
    })
}
