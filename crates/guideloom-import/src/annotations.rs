//! Annotation sets as columns: the values of an annotation set (JSON, one per record) for
//! the records of a batch, as one Arrow column to join beside the records' own.
//!
//! The column's type is inferred once per set from its values (the first
//! [`INFER_VALUES`]; arrow-json's inference: integers, floats, strings, lists, structs), so a
//! set gives one type whatever the batch; a value that does not fit it is refused by index.
//! The set is the one its reader opened (its version pinned for that reader: batches of one
//! reader never mix versions), or a version named explicitly.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use arrow_array::{ArrayRef, Int64Array, RecordBatch};
//! use guideloom::{PublishMode, Publisher};
//! use guideloom_import::annotations::{AnnotationColumn, with_columns};
//!
//! let publisher = Publisher::open("memory://annotation-columns-doc")?;
//! let shard = publisher.write_shard("w", 0, (0..4).map(|i| i * 10))?;
//! let snapshot = publisher.publish("d", "s1", vec![shard], PublishMode::Full)?;
//! publisher.publish_annotations("quality", "v1", &snapshot, &[0.5, 0.25, 1.0, 0.0])?;
//!
//! let set = publisher.dataset()?.annotations("quality")?;
//! let column = AnnotationColumn::new(&set)?;
//! let batch = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![20, 0])) as ArrayRef)])?;
//! let joined = with_columns(&batch, [column.take("quality", &[2, 0])?])?;
//! assert_eq!(joined.schema().field(1).name(), "quality");
//! # Ok(()) }
//! ```

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, FieldRef, Schema};
use guideloom::publish::AnnotationSet;

use crate::error::{Error, Result};

/// How many values of a set its column type is inferred from.
pub const INFER_VALUES: usize = 10_000;

/// Field metadata naming the annotation set a joined column came from (`set/version`).
pub const ANNOTATION_KEY: &str = "guideloom.annotation";

/// An annotation set, ready to give columns: its values and the column type inferred from
/// them.
#[derive(Debug)]
pub struct AnnotationColumn<'a> {
    set: &'a AnnotationSet,
    data_type: DataType,
}

/// The name each value is wrapped under for arrow-json (`{"v": value}`).
const WRAP: &str = "v";

impl<'a> AnnotationColumn<'a> {
    /// The set's column, its type inferred from its first [`INFER_VALUES`] values.
    pub fn new(set: &'a AnnotationSet) -> Result<Self> {
        let count = set.len().min(INFER_VALUES);
        let mut lines = Vec::new();
        for i in 0..count {
            wrap(set, i as u64, &mut lines)?;
        }
        let (schema, _) =
            arrow_json::reader::infer_json_schema(&lines[..], None).map_err(|source| {
                Error::Arrow {
                    path: key(set).into(),
                    source,
                }
            })?;
        let data_type = schema
            .field_with_name(WRAP)
            .map(|f| f.data_type().clone())
            .unwrap_or(DataType::Null);
        Ok(AnnotationColumn { set, data_type })
    }

    /// The set's column with a type already inferred (by [`new`](Self::new) for this set):
    /// what a caller caching the type per set uses, to infer once.
    pub fn with_type(set: &'a AnnotationSet, data_type: DataType) -> Self {
        AnnotationColumn { set, data_type }
    }

    /// The inferred type.
    pub fn data_type(&self) -> &DataType {
        &self.data_type
    }

    /// The values of records `indices`, in that order, as a column named `name` (its field
    /// metadata names the set and version under [`ANNOTATION_KEY`]).
    pub fn take(&self, name: &str, indices: &[u64]) -> Result<(FieldRef, ArrayRef)> {
        let inner = Arc::new(Schema::new(vec![Field::new(
            WRAP,
            self.data_type.clone(),
            true,
        )]));
        let mut decoder = arrow_json::ReaderBuilder::new(inner)
            .with_batch_size(indices.len().max(1))
            .build_decoder()
            .map_err(|source| Error::Arrow {
                path: key(self.set).into(),
                source,
            })?;
        let mut lines = Vec::new();
        for &i in indices {
            lines.clear();
            wrap(self.set, i, &mut lines)?;
            decoder.decode(&lines).map_err(|e| {
                Error::corrupt(
                    key(self.set),
                    format!(
                        "value {i} does not fit the set's type {}: {e}",
                        self.data_type
                    ),
                )
            })?;
        }
        let column = match decoder.flush().map_err(|source| Error::Arrow {
            path: key(self.set).into(),
            source,
        })? {
            Some(batch) => Arc::clone(batch.column(0)),
            None => arrow_array::new_empty_array(&self.data_type),
        };
        let entry = self.set.entry();
        let field = Field::new(name, self.data_type.clone(), true).with_metadata(
            [(
                ANNOTATION_KEY.to_owned(),
                format!("{}/{}", entry.set, entry.version),
            )]
            .into(),
        );
        Ok((Arc::new(field), column))
    }
}

/// `batch` with `columns` appended (each as long as the batch).
pub fn with_columns(
    batch: &RecordBatch,
    columns: impl IntoIterator<Item = (FieldRef, ArrayRef)>,
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    let mut arrays = batch.columns().to_vec();
    for (field, array) in columns {
        fields.push(field);
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    RecordBatch::try_new(schema, arrays).map_err(|source| Error::Arrow {
        path: "<batch>".into(),
        source,
    })
}

fn key(set: &AnnotationSet) -> String {
    set.entry().key.clone()
}

/// Appends `{"v": <value i>}\n`.
fn wrap(set: &AnnotationSet, i: u64, out: &mut Vec<u8>) -> Result<()> {
    let raw = set
        .raw(i)
        .map_err(|e| Error::corrupt(key(set), e.to_string()))?;
    out.extend_from_slice(b"{\"v\":");
    out.extend_from_slice(raw);
    out.extend_from_slice(b"}\n");
    Ok(())
}
