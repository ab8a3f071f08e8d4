//! The guideloom shard file format, record formats and storages.
//!
//! - [`spec`], [`Footer`], [`Index`], [`ShardMetadata`]: shard format v1, specified byte by
//!   byte in `docs/format.md`.
//! - [`ShardWriter`] writes one shard; [`SyncShard`] / [`AsyncShard`] read one through any
//!   `guideloom-io` reader: open = one tail read, record = one ranged read.
//! - [`Format`]: how records become bytes ([`CborFormat`], [`RawFormat`], or your own).
//! - Storages — directories of numbered shards: [`DocumentStorage`], [`StreamStorage`],
//!   [`StreamWithMetaStorage`]; the lower-level [`FileSystemDocument`] /
//!   [`FileSystemStream`] for users who manage shard files themselves.
//!
//! Every damaged or hostile input gives a typed [`Error`], never a panic.
//!
//! # Example: write documents, read them back
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use guideloom_format::{CborFormat, DocumentStorage, WriterOptions};
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

pub mod cbor;
pub mod discovery;
pub mod element;
pub mod error;
pub mod footer;
pub mod format;
pub mod index;
mod layout;
#[cfg(any(test, feature = "testing"))]
pub mod mem;
pub mod metadata;
pub mod point;
pub mod reader;
pub mod source;
pub mod spec;
pub mod storage;
pub mod table;
pub mod writer;

pub use discovery::{FileSystemDocument, FileSystemStream, LocalShard, shard_name};
pub use element::{ELEMENT_TYPES, Element, Elements, element_width};
pub use error::{Corruption, Error, Result};
pub use footer::Footer;
pub use format::{CborFormat, Format, RawFormat};
pub use index::Index;
pub use layout::{Expected, Layout, ReadOptions};
#[cfg(any(test, feature = "testing"))]
pub use mem::MemReader;
pub use metadata::{ShardMetadata, Value};
pub use point::ShardProbe;
pub use reader::{AsyncShard, SyncShard};
pub use source::RecordSource;
pub use storage::WriterOptions;
pub use storage::document::{
    AsyncDocumentReader, DocumentIter, DocumentReader, DocumentStorage, DocumentWriter,
};
pub use storage::stream::{AsyncStreamReader, StreamReader, StreamStorage, StreamWriter};
pub use storage::stream_meta::{
    AsyncStreamWithMetaReader, StreamWithMetaReader, StreamWithMetaStorage, StreamWithMetaWriter,
};
pub use table::{Located, PlannedRuns, Run, RunBudget, Runs, ShardGroup, ShardTable, plan_runs};
pub use writer::{Encoded, ShardEncoder, ShardInfo, ShardWriter};
