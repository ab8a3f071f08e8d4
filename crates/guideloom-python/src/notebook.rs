//! Jupyter's rich display: `Dataset._repr_html_` (a summary and the first records) and
//! `Dataset.show(i)` (one record), built from the viewer's components
//! (`guideloom_view::html::render_notebook_*`), every value escaped. Pickle records are
//! shown as bytes, never unpickled: a root's bytes do not run code to be displayed.

use guideloom_view::html::{
    NotebookDataset, RecordFormat as ViewFormat, render_notebook_dataset, render_notebook_record,
};
use pyo3::prelude::*;

use crate::dataset::Dataset;
use crate::format::RecordFormat;
use crate::slices::PyIndex;

/// Records previewed by `Dataset._repr_html_`.
const PREVIEW: u64 = 5;

/// How the viewer reads this format's bytes: CBOR as CBOR; raw bytes and pickles sniffed
/// (media, then UTF-8 text, else a hex preview), so a raw caption reads as text.
fn view_format(format: RecordFormat) -> ViewFormat {
    match format {
        RecordFormat::Cbor => ViewFormat::Cbor,
        RecordFormat::Raw | RecordFormat::Pickle => ViewFormat::Unknown,
    }
}

/// One record as HTML (`Dataset.show(i)`): Jupyter displays it through `_repr_html_`.
#[pyclass(module = "guideloom", frozen)]
pub(crate) struct RecordHtml {
    index: u64,
    html: String,
}

#[pymethods]
impl RecordHtml {
    /// The HTML (what Jupyter displays).
    fn _repr_html_(&self) -> &str {
        &self.html
    }

    /// The HTML, as a string.
    #[getter]
    fn html(&self) -> &str {
        &self.html
    }

    fn __repr__(&self) -> String {
        format!(
            "<guideloom record {} ({} bytes of HTML)>",
            self.index,
            self.html.len()
        )
    }
}

#[pymethods]
impl Dataset {
    /// The dataset as HTML for Jupyter: root, snapshot, record count, schema and the first
    /// five records, as the viewer (`guideloom serve`) shows them.
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let n = self.len.min(PREVIEW);
        let records = self.fetch_many(py, (0..n).collect())?;
        let preview = records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64, r.as_ref()))
            .collect();
        Ok(render_notebook_dataset(&NotebookDataset {
            root: &self.uri,
            snapshot_id: &self.snapshot_id,
            records: self.len,
            format: view_format(self.record_format()),
            schema: self.schema.as_ref(),
            preview,
        }))
    }

    /// Record `index` as HTML (JSON pretty-printed, images and audio inline, text, bytes in
    /// hex): `ds.show(42)` in a notebook cell displays it.
    fn show(&self, py: Python<'_>, index: PyIndex) -> PyResult<RecordHtml> {
        let index = self.resolve_index(&index)?;
        let bytes = self.fetch_many(py, vec![index])?;
        let bytes = bytes.first().map(|b| b.as_ref()).unwrap_or_default();
        Ok(RecordHtml {
            index,
            html: render_notebook_record(
                index,
                bytes,
                view_format(self.record_format()),
                self.schema.as_ref(),
            ),
        })
    }
}
