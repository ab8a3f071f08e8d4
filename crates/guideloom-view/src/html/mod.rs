//! Pure HTML renderers: plain data in, HTML strings out, no IO.
//!
//! The server ([`crate::server`]) calls these for its pages; a notebook's `_repr_html_` can
//! call the fragment renderers ([`render_dataset_summary`], [`render_record`],
//! [`render_annotation_value`], [`render_card`], [`render_bench_charts`]) the same way.
//!
//! **Every value that comes from a root is escaped** ([`escape`]; in links
//! [`url_encode`] first): snapshot ids, shard keys, record text, annotation values, card
//! text. Records render within [`RenderLimits`], so a huge record yields a bounded page.
//! Pages carry no inline script or style: they link `/static/app.css` and `/static/app.js`,
//! so a strict Content-Security-Policy holds; charts are SVG with presentation attributes.

mod card;
mod chart;
mod escape;
mod layout;
mod media;
mod notebook;
mod pages;
mod records;
mod value;

pub use card::{CardView, render_card, render_card_details, render_card_page};
pub use chart::{BenchResult, render_bench_charts};
pub use escape::{escape, escape_into, url_encode};
pub use layout::{page, render_error_page};
pub use media::{MediaKind, inline_kind, sniff};
pub use notebook::{NotebookDataset, render_notebook_dataset, render_notebook_record};
pub use pages::{
    Health, OVERVIEW_README_LINES, SetRow, ShardRow, SnapshotRow, Summary, render_bench_page,
    render_dataset_summary, render_overview_page, render_shard_list, render_snapshot_list,
};
pub use records::{
    RecordContent, RecordDetail, RecordEntry, RecordsView, render_annotation_value,
    render_expired_note, render_expired_record_page, render_record_page, render_records_page,
};
pub use value::{RecordFormat, RenderLimits, render_record, render_record_with, render_value};
