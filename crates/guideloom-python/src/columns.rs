//! Typed batches out of a dataset with a schema: `Dataset.schema`, `Dataset.get_batch`.
//!
//! The records are read and decoded into Arrow arrays in Rust with the GIL released
//! (guideloom-arrow's `BatchDecoder`: one pass over each record's bytes, no Python object per
//! value), then handed to pyarrow through the Arrow C data interface (pyo3-arrow): the
//! arrays' buffers are not copied on the way.

use std::sync::Arc;

use guideloom::format::schema::Schema;
use guideloom_arrow::{BatchDecoder, to_arrow};
use guideloom_import::annotations::{AnnotationColumn, with_columns};
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::dataset::Dataset;
use crate::errors::raise;

#[pymethods]
impl Dataset {
    /// The snapshot's schema as a `pyarrow.Schema`, or `None` for a schemaless dataset.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.schema {
            Some(schema) => PySchema::new(Arc::new(to_arrow(schema)))
                .into_pyarrow(py)
                .map(Some),
            None => Ok(None),
        }
    }

    /// Records `indices` (any iterable of ints, a slice, a range or a numpy array) as one
    /// `pyarrow.RecordBatch` with the dataset's schema, in the order given; `annotations`
    /// joins annotation sets as extra columns after the records' own: each a set's name (its
    /// latest version when this dataset first reads it, then pinned) or `(name, version)`.
    #[pyo3(signature = (indices, *, annotations = None))]
    fn get_batch<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
        annotations: Option<Vec<AnnotationArg>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let schema = self.schema_or_raise()?;
        let indices = self.indices(indices)?;
        let records = self.fetch_many(py, indices.clone())?;
        let batch = py
            .detach(|| self.decode(schema, &records))
            .map_err(|e| raise("CorruptShardError", format!("{}: {e}", self.describe())))?;
        let batch = match annotations {
            Some(sets) if !sets.is_empty() => self.join_annotations(py, batch, &sets, &indices)?,
            _ => batch,
        };
        PyRecordBatch::new(batch).into_pyarrow(py)
    }

    /// Writes the snapshot (or records `start..stop`) to `path` as Parquet (`kind="parquet"`:
    /// zstd, the Arrow schema with its field metadata) or JSON Lines (`kind="jsonl"`: bytes as
    /// lowercase hex), reading `batch_records` records at a time; an existing file is never
    /// replaced. Returns `(records, bytes written)`.
    #[pyo3(signature = (kind, path, *, start = None, stop = None, batch_records = 1024))]
    fn export(
        &self,
        py: Python<'_>,
        kind: &str,
        path: std::path::PathBuf,
        start: Option<u64>,
        stop: Option<u64>,
        batch_records: usize,
    ) -> PyResult<(u64, u64)> {
        self.schema_or_raise()?;
        let parquet = match kind {
            "parquet" => true,
            "jsonl" => false,
            other => {
                return Err(raise(
                    "InvalidArgumentError",
                    format!("export kind {other:?} is neither \"parquet\" nor \"jsonl\""),
                ));
            }
        };
        let range = match (start, stop) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0)..b.unwrap_or(self.len).min(self.len)),
        };
        let options = guideloom_import::export::ExportOptions {
            batch_records: batch_records.max(1),
            range,
        };
        let dataset = self.current(py)?;
        let done = py
            .detach(|| {
                if parquet {
                    guideloom_import::export::export_parquet(&dataset, &path, &options)
                } else {
                    guideloom_import::export::export_jsonl(&dataset, &path, &options)
                }
            })
            .map_err(|e| raise("StorageError", format!("{}: {e}", self.describe())))?;
        Ok((done.records, done.bytes))
    }

    /// Records `indices` as `{column: numpy array}` (`guideloom._columns.batch_to_numpy` of
    /// `get_batch`: numbers and tensors without a copy, text and bytes as object arrays).
    fn get_numpy<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let batch = self.get_batch(py, indices, None)?;
        py.import("guideloom._columns")?
            .getattr("batch_to_numpy")?
            .call1((batch,))
    }

    /// The records of `records` (raw bytes of this dataset's records, e.g. from
    /// `get_many_raw` or a raw read-ahead) as one `pyarrow.RecordBatch`; with `annotations`
    /// (as `get_batch`'s), `indices` says which records they are.
    #[pyo3(signature = (records, *, indices = None, annotations = None))]
    fn batch_of<'py>(
        &self,
        py: Python<'py>,
        records: Vec<pyo3_bytes::PyBytes>,
        indices: Option<Vec<u64>>,
        annotations: Option<Vec<AnnotationArg>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let schema = self.schema_or_raise()?;
        let records: Vec<bytes::Bytes> = records.into_iter().map(|r| r.into_inner()).collect();
        let count = records.len();
        let batch = py
            .detach(|| self.decode(schema, &records))
            .map_err(|e| raise("CorruptShardError", format!("{}: {e}", self.describe())))?;
        let batch = match (annotations, indices) {
            (Some(sets), Some(indices)) if !sets.is_empty() => {
                if indices.len() != count {
                    return Err(raise(
                        "InvalidArgumentError",
                        format!("{} indices for {count} records", indices.len()),
                    ));
                }
                self.join_annotations(py, batch, &sets, &indices)?
            }
            (Some(sets), None) if !sets.is_empty() => {
                return Err(raise("InvalidArgumentError", "annotations= needs indices="));
            }
            _ => batch,
        };
        PyRecordBatch::new(batch).into_pyarrow(py)
    }
}

/// An annotation set to join: its name, and a version (else the reader's pinned one).
#[derive(FromPyObject)]
pub(crate) enum AnnotationArg {
    Versioned(String, String),
    Latest(String),
}

impl Dataset {
    /// `records` as one batch, through this dataset's decoder (kept between calls: the
    /// schema is compiled once; a decoder that refused a record is dropped).
    fn decode(
        &self,
        schema: &Schema,
        records: &[bytes::Bytes],
    ) -> guideloom_arrow::Result<arrow_array::RecordBatch> {
        let kept = self
            .decoder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut decoder = match kept {
            Some(d) => d,
            None => BatchDecoder::new(schema)?,
        };
        for record in records {
            decoder.push(record)?;
        }
        let batch = decoder.finish()?;
        *self.decoder.lock().unwrap_or_else(|p| p.into_inner()) = Some(decoder);
        Ok(batch)
    }

    /// `batch` with the values of `sets` for `indices` as extra columns.
    fn join_annotations(
        &self,
        py: Python<'_>,
        batch: arrow_array::RecordBatch,
        sets: &[AnnotationArg],
        indices: &[u64],
    ) -> PyResult<arrow_array::RecordBatch> {
        let dataset = self.current(py)?;
        let wanted: Vec<(String, Option<String>)> = sets
            .iter()
            .map(|a| match a {
                AnnotationArg::Versioned(n, v) => (n.clone(), Some(v.clone())),
                AnnotationArg::Latest(n) => (n.clone(), None),
            })
            .collect();
        let types = &self.annotation_types;
        let joined = crate::runtime::block_on(py, async move {
            let mut columns = Vec::new();
            for (name, version) in &wanted {
                let set = match version {
                    None => dataset.annotations_async(name).await?,
                    Some(v) => std::sync::Arc::new(
                        dataset
                            .root()
                            .annotations(name, Some(v), dataset.snapshot(), false)
                            .await?,
                    ),
                };
                columns.push((name.clone(), set));
            }
            Ok::<_, crate::errors::Error>(columns)
        })?;
        py.detach(|| {
            let mut out = Vec::new();
            for (name, set) in &joined {
                let key = set.entry().key.clone();
                let known = types
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&key)
                    .cloned();
                let column = match known {
                    Some(t) => AnnotationColumn::with_type(set, t),
                    None => {
                        let c = AnnotationColumn::new(set)?;
                        types
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(key, c.data_type().clone());
                        c
                    }
                };
                out.push(column.take(name, indices)?);
            }
            with_columns(&batch, out)
        })
        .map_err(|e: guideloom_import::Error| {
            raise("CorruptObjectError", format!("{}: {e}", self.describe()))
        })
    }

    fn schema_or_raise(&self) -> PyResult<&Schema> {
        self.schema.as_ref().ok_or_else(|| {
            raise(
                "UnsupportedError",
                format!(
                    "{}: snapshot has no schema, so its records have no columns (get_many \
                     returns them as objects; import or write the data with a schema)",
                    self.describe()
                ),
            )
        })
    }
}

/// The stored schema of an Arrow schema given from Python (refused by field when it holds a
/// type guideloom does not store).
pub(crate) fn stored_schema(schema: &PySchema) -> PyResult<Schema> {
    guideloom_arrow::from_arrow(schema.as_ref()).map_err(|e| raise("SchemaError", e.to_string()))
}
