//! HTML for notebooks (Jupyter's `_repr_html_`): a dataset's summary with a preview of its
//! first records, and one record — built from the viewer's own components
//! ([`render_record_with`], [`escape`]) and styled by a `<style>` block scoped to the
//! output's `.guideloom` wrapper (a notebook page has no viewer stylesheet, and its
//! sanitizer, where it has one, keeps scoped styles). Every value from the root is escaped,
//! as in the viewer; notebooks that strip `data:` images still show the text.

use std::fmt::Write as _;

use guideloom::format::schema::Schema;

use super::escape::escape;
use super::value::{RecordFormat, RenderLimits, render_record_with};

/// The notebook's styles, every rule under `.guideloom`.
const STYLE: &str = "<style>\
.guideloom table{border-collapse:collapse;margin:.4rem 0}\
.guideloom th,.guideloom td{border:1px solid #ddd;padding:.2rem .45rem;text-align:left;vertical-align:top}\
.guideloom pre{margin:0;white-space:pre-wrap;word-break:break-word}\
.guideloom .k{color:#23395d}.guideloom .s{color:#0b6e4f}.guideloom .n{color:#a0522d}\
.guideloom .z{color:#7a7a7a}.guideloom .note{color:#7a7a7a;font-style:italic}\
.guideloom code.hex{color:#6b4c9a;white-space:pre-wrap}\
.guideloom img.media{max-width:240px;max-height:180px;image-rendering:pixelated;border:1px solid #ddd}\
</style>";

/// What a notebook shows of a dataset.
#[derive(Debug, Clone)]
pub struct NotebookDataset<'a> {
    /// The root as given (never with credentials).
    pub root: &'a str,
    /// The snapshot read.
    pub snapshot_id: &'a str,
    /// Records in it.
    pub records: u64,
    /// How its records decode.
    pub format: RecordFormat,
    /// Its schema, if it declares one.
    pub schema: Option<&'a Schema>,
    /// The first records, to preview: `(index, bytes)`.
    pub preview: Vec<(u64, &'a [u8])>,
}

/// A dataset as one HTML block: root, snapshot, record count, schema, and a table of the
/// preview's records (rendered as the viewer's browser rows are).
///
/// ```
/// use guideloom_view::html::{NotebookDataset, RecordFormat, render_notebook_dataset};
/// let html = render_notebook_dataset(&NotebookDataset {
///     root: "./captions", snapshot_id: "v<1>", records: 2, format: RecordFormat::Raw,
///     schema: None, preview: vec![(0, b"<b>hi</b>".as_slice())],
/// });
/// assert!(html.contains("v&lt;1&gt;") && html.contains("&lt;b&gt;hi") && !html.contains("<b>hi"));
/// ```
pub fn render_notebook_dataset(d: &NotebookDataset<'_>) -> String {
    let mut html = format!(
        "<div class=\"guideloom\">{STYLE}<p><b>guideloom dataset</b> <code>{}</code> · snapshot \
         <code>{}</code> · {} record(s)</p>",
        escape(d.root),
        escape(d.snapshot_id),
        d.records
    );
    if let Some(schema) = d.schema {
        let _ = write!(
            html,
            "<details><summary>schema</summary><pre>{}</pre></details>",
            escape(&schema.to_string())
        );
    }
    if !d.preview.is_empty() {
        html.push_str("<table><thead><tr><th>#</th><th>record</th></tr></thead><tbody>");
        for (index, bytes) in &d.preview {
            let _ = write!(
                html,
                "<tr><td>{index}</td><td>{}</td></tr>",
                render_record_with(*index, bytes, d.format, d.schema, &RenderLimits::PREVIEW)
            );
        }
        html.push_str("</tbody></table>");
        if d.records > d.preview.len() as u64 {
            let _ = write!(
                html,
                "<p class=\"note\">{} more record(s); <code>guideloom serve</code> browses them all</p>",
                d.records - d.preview.len() as u64
            );
        }
    }
    html.push_str("</div>");
    html
}

/// One record as one HTML block (the viewer's record page component, its limits).
///
/// ```
/// use guideloom_view::html::{RecordFormat, render_notebook_record};
/// let html = render_notebook_record(7, b"plain text", RecordFormat::Raw, None);
/// assert!(html.contains("plain text") && html.starts_with("<div class=\"guideloom\">"));
/// ```
pub fn render_notebook_record(
    index: u64,
    bytes: &[u8],
    format: RecordFormat,
    schema: Option<&Schema>,
) -> String {
    format!(
        "<div class=\"guideloom\">{STYLE}<p><b>record {index}</b> · {} bytes</p>{}</div>",
        bytes.len(),
        render_record_with(index, bytes, format, schema, &RenderLimits::DETAIL)
    )
}
