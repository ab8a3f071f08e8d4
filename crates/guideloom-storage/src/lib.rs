//! The guideloom storages: directories of numbered shards with a user-facing API, built on
//! the shard codec of `guideloom-format`.
//!
//! - [`DocumentStorage`]: random access to documents by index (any record
//!   [`Format`](guideloom_format::Format)).
//! - [`StreamStorage`]: an append-only stream of fixed-width elements sliced across shards.
//! - [`StreamWithMetaStorage`]: a stream cut into documents, each with metadata.
//! - [`FileSystemDocument`] / [`FileSystemStream`]: naming, discovery and shard writers for
//!   users who manage shard files themselves; [`discovery`] opens numbered shards through
//!   any backend.
//! - [`convert`]: migrates a stream storage into a dataset root as a stream snapshot, the one
//!   token-stream encoding (`Dataset::tokens`, `document`, `document_meta`).
//!
//! Sync and async readers read through any `guideloom-io` backend; writers write local
//! shards. The on-disk layout is the one of `docs/format.md` ("Storage semantics"). The
//! storages' sync readers are [`RecordSource`](guideloom_format::RecordSource)s, so the
//! loader reads a storage directory as well as a published root. Errors are
//! guideloom-format's [`Error`](guideloom_format::Error) (the facade's `Error::Format`).
//!
//! # Example: write documents, read them back
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use guideloom_format::CborFormat;
//! use guideloom_storage::{DocumentStorage, WriterOptions};
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path().join("dataset");
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct Sample {
//!     text: String,
//!     label: u8,
//! }
//!
//! // Reads go through guideloom_io::SeekIo; use `DocumentStorage::new(dir, format, backend)`
//! // for PreadIo, MmapIo, HttpIo, ObjectStoreIo or your own backend.
//! let storage = DocumentStorage::local(dir, CborFormat::<Sample>::new())
//!     .with_writer_options(WriterOptions::default().max_shard_records(1000));
//! let mut writer = storage.sync_writer()?;
//! for i in 0..2500u64 {
//!     let label = (i % 2) as u8;
//!     writer.append(i, &Sample { text: format!("sample {i}"), label })?;
//! }
//! let shards = writer.finish()?; // shard-000000.glm .. shard-000002.glm
//! assert_eq!(shards.len(), 3);
//!
//! let reader = storage.sync_reader()?; // one tail read per shard
//! assert_eq!(reader.len(), 2500);
//! assert_eq!(reader.read(1234)?.text, "sample 1234"); // one ranged read
//! let batch = reader.read_many(&[7, 8, 9, 2000])?; // one batched read per shard touched
//! assert_eq!(batch[3].label, 0);
//! assert_eq!(reader.iter().count(), 2500);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod convert;
pub mod discovery;
mod document;
mod options;
mod source;
mod stream;
mod stream_meta;

pub use discovery::{FileSystemDocument, FileSystemStream, LocalShard, shard_name};
pub use document::{
    AsyncDocumentReader, DocumentIter, DocumentReader, DocumentStorage, DocumentWriter,
    ITER_BATCH_BYTES, ITER_BATCH_RECORDS,
};
pub use options::{
    DEFAULT_MAX_SHARD_BYTES, DEFAULT_MAX_SHARD_RECORDS, DEFAULT_STREAM_CHUNK_BYTES, WriterOptions,
};
pub use stream::{AsyncStreamReader, StreamReader, StreamStorage, StreamWriter};
pub use stream_meta::{
    AsyncStreamWithMetaReader, StreamWithMetaReader, StreamWithMetaStorage, StreamWithMetaWriter,
};
