//! The overview (dataset summary, snapshots, annotation sets), the shard list and the
//! benchmark page.

use std::fmt::Write as _;

use super::card::{CardView, render_card_details};
use super::chart::{BenchResult, render_bench_charts};
use super::escape::{escape, url_encode};
use super::layout::{bytes, page};

/// Lines of the latest card's README the overview shows (the card page shows it all).
pub const OVERVIEW_README_LINES: usize = 40;

/// One snapshot of a root, as listed on the overview.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SnapshotRow {
    /// Sequence number (1 for the first).
    pub seq: u64,
    /// Snapshot id.
    pub id: String,
    /// `full` or `append`.
    pub mode: String,
    /// Records.
    pub records: u64,
    /// Shards.
    pub shards: u64,
    /// Bytes of its shards.
    pub bytes: u64,
    /// Whether it is the latest.
    pub latest: bool,
    /// The tags naming it.
    pub tags: Vec<String>,
    /// Whether garbage collection expired it (its history stays, its records are gone).
    pub expired: bool,
}

impl SnapshotRow {
    /// Its marks after its id, as HTML: `latest`, each tag as `[name]`, `expired`.
    pub(super) fn marks(&self) -> String {
        let mut html = String::new();
        if self.latest {
            html.push_str(" <span class=\"tag\">latest</span>");
        }
        for t in &self.tags {
            let _ = write!(
                html,
                " <span class=\"tagname\" data-tag=\"{}\">[{}]</span>",
                escape(t),
                escape(t)
            );
        }
        if self.expired {
            html.push_str(" <span class=\"expired\">expired</span>");
        }
        html
    }
}

/// One annotation set version of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SetRow {
    /// Set name.
    pub set: String,
    /// Version.
    pub version: String,
    /// The snapshot it annotates.
    pub snapshot_id: String,
    /// Values.
    pub values: u64,
    /// Bytes of its values object.
    pub bytes: u64,
}

/// What the overview shows.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    /// The root as given (a path or URI; credentials are never part of it).
    pub root: String,
    /// The dataset id.
    pub dataset_id: String,
    /// Every snapshot, oldest first.
    pub snapshots: Vec<SnapshotRow>,
    /// Every annotation set version, in catalog order.
    pub sets: Vec<SetRow>,
    /// The card of the newest snapshot that has one.
    pub card: Option<CardView>,
    /// Whether a benchmark page is served.
    pub bench: bool,
}

/// Whether a shard's object matches its reference.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Health {
    /// The object's size equals the manifest's.
    Ok,
    /// The object has another size.
    SizeMismatch {
        /// Its size.
        actual: u64,
    },
    /// There is no object.
    Missing,
    /// Not checked (the reason).
    Unknown {
        /// Why.
        why: String,
    },
}

/// One shard of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShardRow {
    /// Key below the root.
    pub key: String,
    /// Size in the manifest.
    pub size: u64,
    /// Records.
    pub records: u64,
    /// `native` or `array_record`.
    pub format: String,
    /// Its health.
    pub health: Health,
}

/// The snapshot table (a fragment).
pub fn render_snapshot_list(snapshots: &[SnapshotRow]) -> String {
    let mut html = String::from(
        "<table class=\"snapshots\" id=\"snapshots\"><thead><tr><th>seq</th><th>id</th>\
         <th>mode</th><th>records</th><th>shards</th><th>bytes</th><th></th></tr></thead><tbody>",
    );
    for s in snapshots.iter().rev() {
        let id = url_encode(&s.id);
        // An expired snapshot's records are gone: no link to them.
        let records = if s.expired {
            String::new()
        } else {
            format!("<a href=\"/records?snapshot={id}\">records</a> ")
        };
        let _ = write!(
            html,
            "<tr data-snapshot=\"{}\"{}><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{records}<a href=\"/shards?snapshot={id}\">shards</a> \
             <a href=\"/card?snapshot={id}\">card</a></td></tr>",
            escape(&s.id),
            if s.expired {
                " class=\"expired\" data-expired=\"1\""
            } else {
                ""
            },
            s.seq,
            escape(&s.id),
            s.marks(),
            escape(&s.mode),
            s.records,
            s.shards,
            bytes(s.bytes),
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// A dataset summary (a fragment): id, root, the latest card (its README cut at
/// [`OVERVIEW_README_LINES`] lines), snapshots with their history and marks (latest, tags,
/// expired), annotation sets.
///
/// ```
/// use guideloom_view::html::{Summary, SnapshotRow, render_dataset_summary};
/// let html = render_dataset_summary(&Summary {
///     root: "./captions".into(), dataset_id: "cap\"tions".into(), bench: false,
///     snapshots: vec![SnapshotRow { seq: 1, id: "v1".into(), mode: "full".into(),
///         records: 3, shards: 1, bytes: 297, latest: true, tags: vec!["prod".into()],
///         expired: false }],
///     sets: vec![], card: None,
/// });
/// assert!(html.contains("cap&quot;tions") && html.contains("297 B"));
/// assert!(html.contains("[prod]"));
/// ```
pub fn render_dataset_summary(summary: &Summary) -> String {
    let records = summary.snapshots.last().map_or(0, |s| s.records);
    let mut html = format!(
        "<section class=\"summary\"><h1>dataset <span id=\"dataset-id\">{}</span></h1>\
         <p>root <code>{}</code> · {} snapshot(s) · latest: {} records</p>\
         <h2>snapshots</h2>{}",
        escape(&summary.dataset_id),
        escape(&summary.root),
        summary.snapshots.len(),
        records,
        render_snapshot_list(&summary.snapshots)
    );
    if let Some(card) = &summary.card {
        html.push_str(&render_card_details(card, Some(OVERVIEW_README_LINES)));
    }
    html.push_str("<h2>annotation sets</h2>");
    if summary.sets.is_empty() {
        html.push_str("<p>none</p>");
    } else {
        html.push_str(
            "<table class=\"sets\" id=\"sets\"><thead><tr><th>set</th><th>version</th>\
             <th>snapshot</th><th>values</th><th>bytes</th></tr></thead><tbody>",
        );
        for s in &summary.sets {
            let _ = write!(
                html,
                "<tr><td><a href=\"/records?snapshot={}&amp;set={}\">{}</a></td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                url_encode(&s.snapshot_id),
                url_encode(&format!("{}/{}", s.set, s.version)),
                escape(&s.set),
                escape(&s.version),
                escape(&s.snapshot_id),
                s.values,
                bytes(s.bytes)
            );
        }
        html.push_str("</tbody></table>");
    }
    html.push_str("</section>");
    html
}

/// The overview page.
pub fn render_overview_page(summary: &Summary) -> String {
    let mut body = render_dataset_summary(summary);
    if summary.bench {
        body.push_str("<p><a href=\"/bench\">benchmark results</a></p>");
    }
    page(&summary.dataset_id, &body)
}

/// The shards of a snapshot, with sizes and health.
pub fn render_shard_list(snapshot: &SnapshotRow, shards: &[ShardRow]) -> String {
    let healthy = shards.iter().filter(|s| s.health == Health::Ok).count();
    let mut body = format!(
        "<h1>shards of snapshot {}{}</h1><p>{} shard(s), {} records, {} · \
         <span id=\"healthy\">{healthy}</span> of {} with the size the snapshot says</p>\
         <table class=\"shards\" id=\"shards\"><thead><tr><th>key</th><th>format</th>\
         <th>records</th><th>size</th><th>health</th></tr></thead><tbody>",
        escape(&snapshot.id),
        snapshot.marks(),
        shards.len(),
        snapshot.records,
        bytes(snapshot.bytes),
        shards.len()
    );
    if snapshot.expired {
        body.push_str(
            "<p class=\"note\" id=\"expired\">This snapshot expired: garbage collection \
             deleted the shards no kept snapshot shares with it.</p>",
        );
    }
    for s in shards {
        let (class, health) = match &s.health {
            Health::Ok => ("ok", "ok".to_owned()),
            Health::SizeMismatch { actual } => (
                "bad",
                format!("size {actual} bytes, the snapshot says {}", s.size),
            ),
            Health::Missing => ("bad", "missing".to_owned()),
            Health::Unknown { why } => ("unknown", format!("not checked: {why}")),
        };
        let _ = write!(
            body,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"health {class}\">{}</td></tr>",
            escape(&s.key),
            escape(&s.format),
            s.records,
            bytes(s.size),
            escape(&health)
        );
    }
    body.push_str("</tbody></table>");
    page(&format!("shards of {}", snapshot.id), &body)
}

/// The benchmark page: one bar chart per group, from `source` (a file or directory name).
pub fn render_bench_page(results: &[BenchResult], source: Option<&str>) -> String {
    let body = match source {
        None => "<h1>benchmarks</h1><p>No results: start the viewer with <code>--bench \
                 PATH</code> (a JSON file of results, or a criterion directory such as \
                 <code>target/criterion</code>).</p>"
            .to_owned(),
        Some(source) => format!(
            "<h1>benchmarks</h1><p>{} result(s) from <code>{}</code>; median time per \
             iteration, shorter is faster; grey bars are ceilings.</p>{}",
            results.len(),
            escape(source),
            render_bench_charts(results)
        ),
    };
    page("benchmarks", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_health_is_shown() {
        let row = SnapshotRow {
            seq: 1,
            id: "v1".into(),
            mode: "full".into(),
            records: 3,
            shards: 2,
            bytes: 2048,
            latest: true,
            tags: vec!["prod".into()],
            expired: false,
        };
        let shard = |health| ShardRow {
            key: "shards/w/00000000.glm".into(),
            size: 1024,
            records: 2,
            format: "native".into(),
            health,
        };
        let html = render_shard_list(
            &row,
            &[
                shard(Health::Ok),
                shard(Health::SizeMismatch { actual: 10 }),
            ],
        );
        assert!(
            html.contains("<span id=\"healthy\">1</span> of 2"),
            "{html}"
        );
        assert!(html.contains("size 10 bytes, the snapshot says 1024"));
    }
}
