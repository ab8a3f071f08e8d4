//! Data in and out of guideloom datasets.
//!
//! Each importer reads one kind of input as a stream of Arrow [`RecordBatch`]es in bounded
//! memory, with the Arrow schema that describes it (media fields carry their MIME type in the
//! field metadata under [`MEDIA_KEY`], tensors are Arrow's canonical
//! `arrow.fixed_shape_tensor` extension).
//!
//! Batches go into a dataset root through [`ImportSink`] (rows encoded as CBOR records of
//! the input's schema, streamed into shards) and become a snapshot declaring that schema
//! through [`sink::publish`]; [`export`] reads a snapshot back out as Parquet or JSON Lines.
//!
//! | input | reader |
//! |---|---|
//! | Parquet files | [`parquet::ParquetInput`] (by row group) |
//! | CSV, JSON Lines files | [`text::TextInput`] |
//! | WebDataset tars | [`webdataset::WebDatasetReader`] |
//! | MDS directories | [`mds::MdsReader`] |
//!
//! [`RecordBatch`]: arrow_array::RecordBatch

pub mod annotations;
pub mod error;
pub mod export;
pub mod mds;
pub mod parquet;
pub mod sink;
pub mod text;
pub mod webdataset;

pub use error::{Error, Result};
pub use sink::{ImportOptions, ImportSink, Imported};

/// Field-metadata key of a media field's MIME type (`image/jpeg`, `audio/wav`,
/// `application/json`, ...). The same key as `guideloom_format::schema::MEDIA_KEY`.
pub const MEDIA_KEY: &str = "guideloom.media";
