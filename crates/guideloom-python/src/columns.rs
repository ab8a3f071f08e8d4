//! Typed batches out of a dataset with a schema: `Dataset.schema`, `Dataset.get_batch`.
//!
//! The records are read and decoded into Arrow arrays in Rust with the GIL released
//! (guideloom-arrow's `BatchDecoder`: one pass over each record's bytes, no Python object per
//! value), then handed to pyarrow through the Arrow C data interface (pyo3-arrow): the
//! arrays' buffers are not copied on the way.

use std::sync::Arc;

use guideloom::format::schema::Schema;
use guideloom_arrow::{BatchDecoder, to_arrow};
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
    /// `pyarrow.RecordBatch` with the dataset's schema, in the order given.
    fn get_batch<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let schema = self.schema_or_raise()?.clone();
        let indices = self.indices(indices)?;
        let records = self.fetch_many(py, indices)?;
        let batch = py
            .detach(move || decode(&schema, &records))
            .map_err(|e| raise("CorruptShardError", format!("{}: {e}", self.describe())))?;
        PyRecordBatch::new(batch).into_pyarrow(py)
    }
}

impl Dataset {
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

fn decode(
    schema: &Schema,
    records: &[bytes::Bytes],
) -> guideloom_arrow::Result<arrow_array::RecordBatch> {
    let mut decoder = BatchDecoder::new(schema)?;
    for record in records {
        decoder.push(record)?;
    }
    decoder.finish()
}
