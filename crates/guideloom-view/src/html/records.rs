//! The record browser's page and a record's own page.

use std::fmt::Write as _;

use guideloom::format::schema::Schema;

use super::escape::{escape, url_encode};
use super::layout::page;
use super::pages::SnapshotRow;
use super::value::{RecordFormat, RenderLimits, render_value};

/// A record as the browser shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordContent<'a> {
    /// Its bytes and what they are.
    Bytes(&'a [u8], RecordFormat),
    /// Not read (too large: its size).
    TooLarge(u64),
    /// Reading it failed.
    Error(&'a str),
}

/// One row of the record browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry<'a> {
    /// Index in the snapshot.
    pub index: u64,
    /// The record.
    pub content: RecordContent<'a>,
    /// One value per shown annotation set: its JSON text, or an error.
    pub annotations: Vec<Result<&'a [u8], String>>,
}

/// A page of the record browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsView<'a> {
    /// The snapshot shown.
    pub snapshot: &'a str,
    /// What `snapshot=` named: the snapshot's id, or a tag naming it.
    pub requested: &'a str,
    /// Every snapshot, oldest first, with its tags and whether it expired (for the
    /// switcher: expired ones are shown but cannot be chosen; tags are choices too).
    pub snapshots: &'a [SnapshotRow],
    /// Whether the snapshot expired: its records are gone, the page says so and shows none.
    pub expired: bool,
    /// Records in the snapshot.
    pub total: u64,
    /// Page number (from 0).
    pub page: u64,
    /// Records per page.
    pub per: u64,
    /// Every annotation set as `set/version` (for the chooser).
    pub all_sets: &'a [String],
    /// The sets shown, as `set/version`, one column each.
    pub sets: &'a [String],
    /// The index jumped to, highlighted.
    pub highlight: Option<u64>,
    /// The records of the page.
    pub records: Vec<RecordEntry<'a>>,
    /// The snapshot's schema.
    pub schema: Option<&'a Schema>,
}

/// A record's own page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordDetail<'a> {
    /// The snapshot.
    pub snapshot: &'a str,
    /// Records in it.
    pub total: u64,
    /// The record.
    pub entry: RecordEntry<'a>,
    /// The shown sets' names (`set/version`), one per annotation of `entry`.
    pub sets: &'a [String],
    /// The snapshot's schema.
    pub schema: Option<&'a Schema>,
    /// The shard holding it.
    pub shard: &'a str,
}

fn records_link(snapshot: &str, page: u64, per: u64, sets: &[String]) -> String {
    let mut link = format!(
        "/records?snapshot={}&page={page}&per={per}",
        url_encode(snapshot)
    );
    for set in sets {
        let _ = write!(link, "&set={}", url_encode(set));
    }
    escape(&link)
}

/// An annotation value (its JSON text as published), escaped and cut at 2000 characters.
///
/// ```
/// use guideloom_view::html::render_annotation_value;
/// assert_eq!(render_annotation_value(b"\"<b>\""), "<code class=\"ann\">&quot;&lt;b&gt;&quot;</code>");
/// ```
pub fn render_annotation_value(json: &[u8]) -> String {
    const MAX: usize = 2000;
    let text = String::from_utf8_lossy(json);
    let cut: String = text.chars().take(MAX).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("<code class=\"ann\">{}{more}</code>", escape(&cut))
}

fn content(c: &RecordContent<'_>, schema: Option<&Schema>, limits: &RenderLimits) -> String {
    match c {
        RecordContent::Bytes(b, format) => render_value(b, *format, schema, limits),
        RecordContent::TooLarge(n) => format!(
            "<span class=\"note\">{n} bytes: not read (larger than the viewer reads)</span>"
        ),
        RecordContent::Error(e) => format!("<span class=\"error\">{}</span>", escape(e)),
    }
}

fn annotation_cell(a: &Result<&[u8], String>) -> String {
    match a {
        Ok(v) => render_annotation_value(v),
        Err(e) => format!("<span class=\"error\">{}</span>", escape(e)),
    }
}

/// The form's start and the snapshot switcher: one option per snapshot (its tags in
/// brackets; an expired one marked and disabled), then one per tag, under "tags".
fn snapshot_select(view: &RecordsView<'_>) -> String {
    let mut html = String::from(
        "<form class=\"controls\" id=\"controls\" method=\"get\" action=\"/records\">\
         <label>snapshot <select name=\"snapshot\" id=\"snapshot-select\">",
    );
    for s in view.snapshots.iter().rev() {
        let mut label = s.id.clone();
        for t in &s.tags {
            let _ = write!(label, " [{t}]");
        }
        if s.expired {
            label.push_str(" (expired)");
        }
        let _ = write!(
            html,
            "<option value=\"{}\"{}{}>{}</option>",
            escape(&s.id),
            if s.id == view.requested {
                " selected"
            } else {
                ""
            },
            if s.expired { " disabled" } else { "" },
            escape(&label)
        );
    }
    let mut tags: Vec<(&str, &str)> = view
        .snapshots
        .iter()
        .flat_map(|s| s.tags.iter().map(|t| (t.as_str(), s.id.as_str())))
        .collect();
    tags.sort_unstable();
    if !tags.is_empty() {
        html.push_str("<optgroup label=\"tags\">");
        for (tag, id) in tags {
            let _ = write!(
                html,
                "<option value=\"{}\"{}>{} \u{2192} {}</option>",
                escape(tag),
                if tag == view.requested && tag != view.snapshot {
                    " selected"
                } else {
                    ""
                },
                escape(tag),
                escape(id)
            );
        }
        html.push_str("</optgroup>");
    }
    html
}

/// What an expired snapshot's records page and record pages say instead of records.
pub fn render_expired_note(snapshot: &str) -> String {
    let id = url_encode(snapshot);
    format!(
        "<p class=\"expired-note\" id=\"expired\">Snapshot <b>{}</b> expired: garbage \
         collection deleted its shards, so its records cannot be read. Its history stays on \
         the <a href=\"/\">overview</a>; its <a href=\"/card?snapshot={id}\">card</a> and its \
         <a href=\"/shards?snapshot={id}\">shard list</a> remain. Choose another snapshot \
         above.</p>",
        escape(snapshot)
    )
}

/// A record page of an expired snapshot: the note, no record.
pub fn render_expired_record_page(snapshot: &str, index: u64) -> String {
    page(
        &format!("record {index} of {snapshot}"),
        &format!(
            "<h1>record {index} of snapshot {}</h1>{}",
            escape(snapshot),
            render_expired_note(snapshot).replace(" Choose another snapshot above.", "")
        ),
    )
}

/// A page of the record browser: switchers (snapshot, annotation set, page size), a jump to
/// an index, a filter of the page's rows (client-side), the pager and the records with one
/// column per shown annotation set.
pub fn render_records_page(view: &RecordsView<'_>) -> String {
    let pages = view.total.div_ceil(view.per.max(1)).max(1);
    let first = view.page * view.per;
    let last = (first + view.per).min(view.total);
    let mut body = format!(
        "<h1>records of snapshot <span id=\"snapshot-id\">{}</span>",
        escape(view.snapshot)
    );
    if view.requested != view.snapshot {
        let _ = write!(
            body,
            " (tag <span id=\"snapshot-tag\">{}</span>)",
            escape(view.requested)
        );
    }
    body.push_str("</h1>");
    body.push_str(&snapshot_select(view));
    body.push_str("</select></label> <label>annotations <select name=\"set\" id=\"set-select\"><option value=\"\">none</option>");
    for s in view.all_sets {
        let _ = write!(
            body,
            "<option value=\"{}\"{}>{}</option>",
            escape(s),
            if view.sets.contains(s) {
                " selected"
            } else {
                ""
            },
            escape(s)
        );
    }
    let _ = write!(
        body,
        "</select></label> <label>per page <input name=\"per\" type=\"number\" min=\"1\" \
         max=\"500\" value=\"{}\"></label> <button type=\"submit\" id=\"apply\">show</button></form>",
        view.per
    );
    if view.expired {
        body.push_str(&render_expired_note(view.snapshot));
        return page(&format!("records of {}", view.snapshot), &body);
    }
    let _ = write!(
        body,
        "<form class=\"jump\" id=\"jump\" method=\"get\" action=\"/records\">\
         <input type=\"hidden\" name=\"snapshot\" value=\"{}\"><input type=\"hidden\" \
         name=\"per\" value=\"{}\">",
        escape(view.snapshot),
        view.per
    );
    for s in view.sets {
        let _ = write!(
            body,
            "<input type=\"hidden\" name=\"set\" value=\"{}\">",
            escape(s)
        );
    }
    let _ = write!(
        body,
        "<label>record <input name=\"index\" id=\"jump-index\" type=\"number\" min=\"0\" \
         max=\"{}\"></label> <button type=\"submit\">go</button></form>\
         <p><label>filter this page <input type=\"search\" id=\"filter\" \
         placeholder=\"text in a record or value\"></label> <span id=\"filter-count\"></span></p>",
        view.total.saturating_sub(1)
    );
    let mut pager = format!(
        "<p class=\"pager\">records {first}–{} of {} · page <span id=\"page\">{}</span> of {pages}",
        last.saturating_sub(1).max(first),
        view.total,
        view.page + 1
    );
    if view.page > 0 {
        let _ = write!(
            pager,
            " · <a id=\"prev\" rel=\"prev\" href=\"{}\">previous</a>",
            records_link(view.snapshot, view.page - 1, view.per, view.sets)
        );
    }
    if view.page + 1 < pages {
        let _ = write!(
            pager,
            " · <a id=\"next\" rel=\"next\" href=\"{}\">next</a>",
            records_link(view.snapshot, view.page + 1, view.per, view.sets)
        );
    }
    pager.push_str("</p>");
    body.push_str(&pager);
    body.push_str("<table class=\"records\" id=\"records\"><thead><tr><th>#</th><th>record</th>");
    for s in view.sets {
        let _ = write!(body, "<th class=\"ann-head\">{}</th>", escape(s));
    }
    body.push_str("</tr></thead><tbody>");
    let snapshot = url_encode(view.snapshot);
    for r in &view.records {
        let _ = write!(
            body,
            "<tr class=\"row{}\" data-index=\"{}\"><td><a class=\"open\" href=\"/record/{}?snapshot={snapshot}",
            if view.highlight == Some(r.index) {
                " hit"
            } else {
                ""
            },
            r.index,
            r.index
        );
        for s in view.sets {
            let _ = write!(body, "&amp;set={}", url_encode(s));
        }
        let _ = write!(
            body,
            "\">{}</a></td><td class=\"value\">{}</td>",
            r.index,
            content(&r.content, view.schema, &RenderLimits::PREVIEW)
        );
        for a in &r.annotations {
            let _ = write!(body, "<td class=\"ann-cell\">{}</td>", annotation_cell(a));
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table>");
    body.push_str(&pager);
    page(&format!("records of {}", view.snapshot), &body)
}

/// A record's own page: the whole record (within [`RenderLimits::DETAIL`]), its shard, its
/// annotation values, links to its neighbours.
pub fn render_record_page(d: &RecordDetail<'_>) -> String {
    let i = d.entry.index;
    let snapshot = url_encode(d.snapshot);
    let mut sets = String::new();
    for s in d.sets {
        let _ = write!(sets, "&set={}", url_encode(s));
    }
    let mut body = format!(
        "<h1>record <span id=\"record-index\">{i}</span> of snapshot {}</h1><p>in shard \
         <code>{}</code> · <a href=\"{}\">back to its page</a>",
        escape(d.snapshot),
        escape(d.shard),
        escape(&format!("/records?snapshot={snapshot}&index={i}{sets}"))
    );
    if i > 0 {
        let _ = write!(
            body,
            " · <a id=\"prev\" href=\"{}\">previous</a>",
            escape(&format!("/record/{}?snapshot={snapshot}{sets}", i - 1))
        );
    }
    if i + 1 < d.total {
        let _ = write!(
            body,
            " · <a id=\"next\" href=\"{}\">next</a>",
            escape(&format!("/record/{}?snapshot={snapshot}{sets}", i + 1))
        );
    }
    body.push_str("</p>");
    if !d.sets.is_empty() {
        body.push_str("<table class=\"annotations\" id=\"annotations\"><tbody>");
        for (s, a) in d.sets.iter().zip(&d.entry.annotations) {
            let _ = write!(
                body,
                "<tr><th>{}</th><td class=\"ann-cell\">{}</td></tr>",
                escape(s),
                annotation_cell(a)
            );
        }
        body.push_str("</tbody></table>");
    }
    let _ = write!(
        body,
        "<div class=\"record\" id=\"record\" data-index=\"{i}\">{}</div>",
        content(&d.entry.content, d.schema, &RenderLimits::DETAIL)
    );
    page(&format!("record {i} of {}", d.snapshot), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_escape_hostile_ids_and_link_static_files_only() {
        let id = "v\"><script>alert(1)</script>";
        let snapshots = vec![row(id, &[id], false)];
        let sets = vec!["q/v1".to_owned()];
        let record = b"<img src=x onerror=alert(1)>";
        let html = render_records_page(&RecordsView {
            snapshot: id,
            requested: id,
            snapshots: &snapshots,
            expired: false,
            total: 120,
            page: 1,
            per: 50,
            all_sets: &sets,
            sets: &sets,
            highlight: Some(51),
            records: vec![RecordEntry {
                index: 51,
                content: RecordContent::Bytes(record, RecordFormat::Raw),
                annotations: vec![Ok(b"\"</td><script>\"")],
            }],
            schema: None,
        });
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("style="), "{html}");
        assert!(html.contains("v%22%3E%3Cscript%3E"));
        assert!(html.contains("id=\"prev\"") && html.contains("id=\"next\""));
        assert!(html.contains("page=2&amp;per=50&amp;set=q%2Fv1"));
        assert!(html.contains("class=\"row hit\""));
        assert_eq!(html.matches("<script").count(), 1, "only the app.js tag");
    }

    fn row(id: &str, tags: &[&str], expired: bool) -> SnapshotRow {
        SnapshotRow {
            seq: 1,
            id: id.into(),
            mode: "full".into(),
            records: 10,
            shards: 1,
            bytes: 100,
            latest: false,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            expired,
        }
    }

    #[test]
    fn tags_are_choices_and_expired_snapshots_are_marked_not_chosen() {
        let snapshots = vec![
            row("draft", &[], true),
            row("preview", &["prod", "eval"], false),
            row("latest", &[], false),
        ];
        let view = |requested, snapshot, expired| {
            render_records_page(&RecordsView {
                snapshot,
                requested,
                snapshots: &snapshots,
                expired,
                total: 10,
                page: 0,
                per: 5,
                all_sets: &[],
                sets: &[],
                highlight: None,
                records: Vec::new(),
                schema: None,
            })
        };
        let html = view("prod", "preview", false);
        assert!(
            html.contains("(tag <span id=\"snapshot-tag\">prod</span>)"),
            "{html}"
        );
        assert!(html.contains("<option value=\"preview\">preview [prod] [eval]</option>"));
        assert!(html.contains("<option value=\"prod\" selected>prod \u{2192} preview</option>"));
        assert!(html.contains("<option value=\"draft\" disabled>draft (expired)</option>"));
        let html = view("draft", "draft", true);
        assert!(
            html.contains("<option value=\"draft\" selected disabled>"),
            "{html}"
        );
        assert!(html.contains("id=\"expired\""), "{html}");
        assert!(!html.contains("id=\"records\""), "no record table: {html}");
        let html = render_expired_record_page("d<r>aft", 3);
        assert!(html.contains("d&lt;r&gt;aft") && html.contains("id=\"expired\""));
    }
}
