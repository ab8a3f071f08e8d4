//! Arrow batches from guideloom records, and records from Arrow batches.
//!
//! A dataset with a [`Schema`] stores each record as a CBOR map of its columns
//! (`docs/format.md`, "Schema-bound records"). This crate is the bridge to Arrow:
//!
//! - [`to_arrow`] / [`from_arrow`]: the schema's Arrow form, and the guideloom schema of an
//!   Arrow one (dictionaries, large and view types normalised; what cannot be stored refused
//!   by field).
//! - [`BatchDecoder`]: records → one Arrow [`RecordBatch`], decoded straight into arrow-rs
//!   builders (one pass over the bytes per record, no value object per field).
//! - [`RowEncoder`]: the rows of a [`RecordBatch`] → records, exactly (what goes in comes
//!   back out: every number, every byte, nulls, key order).
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
//! use guideloom_arrow::{BatchDecoder, RowEncoder};
//!
//! let batch = RecordBatch::try_from_iter([
//!     ("label", Arc::new(Int64Array::from(vec![3, 7])) as ArrayRef),
//!     ("text", Arc::new(StringArray::from(vec![Some("three"), None])) as ArrayRef),
//! ])?;
//! let encoder = RowEncoder::new(&batch.schema())?;
//! let mut decoder = BatchDecoder::new(encoder.schema())?;
//! for row in 0..batch.num_rows() {
//!     let mut record = Vec::new(); // what a shard stores for this row
//!     encoder.encode(&batch, row, &mut record)?;
//!     decoder.push(&record)?;
//! }
//! assert_eq!(decoder.finish()?, batch);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`RecordBatch`]: arrow_array::RecordBatch
//! [`Schema`]: guideloom_format::schema::Schema

mod decode;
mod encode;
mod schema;

pub use decode::BatchDecoder;
pub use encode::RowEncoder;
pub use schema::{from_arrow, to_arrow};

/// What went wrong converting between records and Arrow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A type (or value) that guideloom does not store, named by field.
    #[error("field {path:?}: {detail}")]
    Unsupported {
        /// The field's dotted path.
        path: String,
        /// What is not supported.
        detail: String,
    },
    /// The schema itself is refused ([`Schema::check`](guideloom_format::schema::Schema::check)).
    #[error(transparent)]
    Schema(#[from] guideloom_format::schema::SchemaError),
    /// A record does not match the schema (a damaged or foreign record).
    #[error("record {index} of the batch: {source}")]
    Mismatch {
        /// The record's position in the batch being decoded.
        index: usize,
        /// The field and what is wrong.
        #[source]
        source: guideloom_format::schema::Mismatch,
    },
    /// A batch was refused by Arrow (a column that does not match the schema).
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The decoder refused a record earlier and holds part of it: drop it.
    #[error("the batch decoder refused a record earlier and cannot finish this batch")]
    Poisoned,
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
