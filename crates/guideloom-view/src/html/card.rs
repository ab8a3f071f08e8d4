//! Dataset cards: the README (escaped, never interpreted) and the structured fields of
//! `card.json`, as a fragment (the overview shows the latest card) or a page of its own.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use guideloom::publish::{Card, Split};

use super::escape::{escape, url_encode};
use super::layout::page;

/// A snapshot's dataset card, as the viewer shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CardView {
    /// The snapshot the card belongs to.
    pub snapshot_id: String,
    /// The licence.
    pub licence: Option<String>,
    /// A short description.
    pub description: Option<String>,
    /// Named splits: a snapshot, or a range of this snapshot's records.
    pub splits: BTreeMap<String, Split>,
    /// How to cite the dataset.
    pub citation: Option<String>,
    /// The records' schema, for people (as `card.json` has it).
    pub schema: Option<serde_json::Value>,
    /// Anything else (as `card.json` has it).
    pub extra: BTreeMap<String, serde_json::Value>,
    /// `README.md`: markdown text, shown escaped.
    pub readme: String,
}

impl CardView {
    /// The card `card` of snapshot `snapshot_id`.
    pub fn new(snapshot_id: impl Into<String>, card: &Card) -> Self {
        CardView {
            snapshot_id: snapshot_id.into(),
            licence: card.licence.clone(),
            description: card.description.clone(),
            splits: card.splits.clone(),
            citation: card.citation.clone(),
            schema: card.schema.clone(),
            extra: card.extra.clone(),
            readme: card.readme.clone(),
        }
    }
}

/// A dataset card (markdown text), shown as escaped preformatted text: no markup from the
/// root is ever interpreted.
///
/// ```
/// use guideloom_view::html::render_card;
/// assert!(render_card("# Title\n<script>").contains("# Title\n&lt;script&gt;"));
/// ```
pub fn render_card(markdown: &str) -> String {
    format!("<pre class=\"card\">{}</pre>", escape(markdown))
}

/// JSON as indented text, escaped.
fn json_text(value: &serde_json::Value) -> String {
    escape(&serde_json::to_string_pretty(value).unwrap_or_default())
}

/// A card's fields and README (a fragment, `<section id="card">`). With `readme_lines`, the
/// README is cut after that many lines, with a link to the card's page for the rest.
///
/// ```
/// use guideloom_view::html::{CardView, render_card_details};
/// let mut card = guideloom::publish::Card::new("# Caps\n<img src=x onerror=alert(1)>\n");
/// card.licence = Some("CC-BY-4.0".into());
/// let html = render_card_details(&CardView::new("v1", &card), None);
/// assert!(html.contains("CC-BY-4.0") && html.contains("&lt;img src=x"));
/// assert!(!html.contains("<img"));
/// ```
pub fn render_card_details(card: &CardView, readme_lines: Option<usize>) -> String {
    let id = url_encode(&card.snapshot_id);
    let mut html = format!(
        "<section class=\"card\" id=\"card\" data-snapshot=\"{}\"><h2>dataset card \
         <small>of snapshot <a href=\"/card?snapshot={id}\">{}</a></small></h2><dl>",
        escape(&card.snapshot_id),
        escape(&card.snapshot_id),
    );
    for (name, key, value) in [
        ("licence", "card-licence", &card.licence),
        ("description", "card-description", &card.description),
    ] {
        if let Some(value) = value {
            let _ = write!(
                html,
                "<dt>{name}</dt><dd id=\"{key}\">{}</dd>",
                escape(value)
            );
        }
    }
    html.push_str("</dl>");
    if !card.splits.is_empty() {
        html.push_str(
            "<table class=\"splits\" id=\"card-splits\"><thead><tr><th>split</th><th>records</th>\
             </tr></thead><tbody>",
        );
        for (name, split) in &card.splits {
            let (link, text) = match split {
                Split::Snapshot(s) => (
                    format!("/records?snapshot={}", url_encode(s)),
                    format!("snapshot {s}"),
                ),
                Split::Range { start, end } => (
                    format!("/records?snapshot={id}&index={start}"),
                    format!("records {start}..{end} of {}", card.snapshot_id),
                ),
            };
            let _ = write!(
                html,
                "<tr data-split=\"{}\"><td>{}</td><td><a href=\"{}\">{}</a></td></tr>",
                escape(name),
                escape(name),
                escape(&link),
                escape(&text)
            );
        }
        html.push_str("</tbody></table>");
    }
    if let Some(citation) = &card.citation {
        let _ = write!(
            html,
            "<h3>citation</h3><pre class=\"citation\" id=\"card-citation\">{}</pre>",
            escape(citation)
        );
    }
    html.push_str("<h3>README</h3><div id=\"card-readme\">");
    let lines = card.readme.lines().count();
    match readme_lines {
        Some(n) if lines > n => {
            let cut: Vec<&str> = card.readme.lines().take(n).collect();
            html.push_str(&render_card(&cut.join("\n")));
            let _ = write!(
                html,
                "<p class=\"note\">{} more line(s): <a href=\"/card?snapshot={id}\">the whole \
                 card</a></p>",
                lines - n
            );
        }
        _ => html.push_str(&render_card(&card.readme)),
    }
    html.push_str("</div>");
    if readme_lines.is_none() {
        if let Some(schema) = &card.schema {
            let _ = write!(
                html,
                "<h3>schema</h3><pre class=\"json\" id=\"card-schema\">{}</pre>",
                json_text(schema)
            );
        }
        if !card.extra.is_empty() {
            let extra = serde_json::to_value(&card.extra).unwrap_or_default();
            let _ = write!(
                html,
                "<h3>more</h3><pre class=\"json\" id=\"card-extra\">{}</pre>",
                json_text(&extra)
            );
        }
    }
    html.push_str("</section>");
    html
}

/// The card page: `card` of `snapshot` (the one asked for, or the latest card's), or a note
/// that there is none.
pub fn render_card_page(snapshot: Option<&str>, card: Option<&CardView>) -> String {
    let body = match (card, snapshot) {
        (Some(card), _) => render_card_details(card, None),
        (None, Some(s)) => format!(
            "<h1>dataset card</h1><p class=\"note\" id=\"no-card\">Snapshot {} has no card \
             (<code>guideloom card</code> writes one).</p>",
            escape(s)
        ),
        (None, None) => "<h1>dataset card</h1><p class=\"note\" id=\"no-card\">No snapshot \
                         has a card (<code>guideloom card</code> writes one).</p>"
            .to_owned(),
    };
    let title = card.map_or_else(
        || "dataset card".to_owned(),
        |c| format!("card of {}", c.snapshot_id),
    );
    page(&title, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_card_is_escaped_everywhere() {
        let evil = "\"><script>alert(1)</script>";
        let mut card = Card::new(format!("# t\n{evil}\nline 3\nline 4\n"));
        card.licence = Some(evil.into());
        card.description = Some(evil.into());
        card.citation = Some(evil.into());
        card.splits
            .insert(evil.into(), Split::Snapshot("s\"1".into()));
        card.splits
            .insert("train".into(), Split::Range { start: 0, end: 9 });
        card.schema = Some(serde_json::json!({ "k": evil }));
        card.extra.insert(evil.into(), serde_json::json!(evil));
        let view = CardView::new(evil, &card);
        for html in [
            render_card_page(Some(evil), Some(&view)),
            render_card_details(&view, Some(2)),
        ] {
            assert_eq!(
                html.matches("<script").count(),
                html.matches("<script src=\"/static/app.js\"").count(),
                "{html}"
            );
            assert!(!html.contains("style="), "{html}");
            assert!(html.contains("&lt;script&gt;alert(1)"), "{html}");
        }
        let page = render_card_page(Some("v1"), Some(&view));
        assert!(page.contains("id=\"card-schema\"") && page.contains("id=\"card-extra\""));
        assert!(page.contains("records 0..9 of"));
        assert!(page.contains("/records?snapshot=s%221"), "{page}");
        let cut = render_card_details(&view, Some(2));
        assert!(cut.contains("2 more line(s)"), "{cut}");
        assert!(!cut.contains("line 3"), "{cut}");
        let none = render_card_page(Some("<b>"), None);
        assert!(none.contains("Snapshot &lt;b&gt; has no card"), "{none}");
    }
}
