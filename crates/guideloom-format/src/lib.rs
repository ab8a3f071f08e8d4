//! The guideloom shard file format and record formats: the codec.
//!
//! - [`spec`], [`Footer`], [`Index`], [`ShardMetadata`]: shard format v1, specified byte by
//!   byte in `docs/format.md`.
//! - [`ShardWriter`] writes one shard; [`SyncShard`] / [`AsyncShard`] read one through any
//!   `guideloom-io` reader: open = one tail read, record = one ranged read.
//! - [`Format`]: how records become bytes ([`CborFormat`], [`RawFormat`], or your own);
//!   [`Element`]: the fixed-width elements of token streams.
//! - [`ShardTable`] and [`plan_runs`]: where record `i` lives in an ordered list of shards
//!   and how an in-order range splits into reads; [`RecordSource`]: what the loader reads.
//!
//! Directories of numbered shards — `DocumentStorage`, `StreamStorage`,
//! `StreamWithMetaStorage`, `FileSystemDocument` / `FileSystemStream` — are the crate
//! `guideloom-storage`, built on this one; datasets are published into roots by
//! `guideloom-publish`.
//!
//! Every damaged or hostile input gives a typed [`Error`], never a panic.
//!
//! # Example: write a shard, read it back
//! ```
//! # fn main() -> Result<(), guideloom_io::BoxError> {
//! use guideloom_format::{CborFormat, Format, ReadOptions, ShardMetadata, ShardWriter, SyncShard};
//! use guideloom_io::{Backend, SeekIo};
//! # let tmp = tempfile::tempdir()?;
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct Sample {
//!     text: String,
//!     label: u8,
//! }
//!
//! let format = CborFormat::<Sample>::new();
//! let path = tmp.path().join("shard-000000.glm");
//! let mut writer = ShardWriter::create(&path, ShardMetadata::new(format.name(), "documents"))?;
//! let mut buf = Vec::new();
//! for i in 0..100u64 {
//!     let sample = Sample { text: format!("sample {i}"), label: (i % 2) as u8 };
//!     buf.clear();
//!     format.encode(&sample, &mut buf)?;
//!     writer.append(&buf)?;
//! }
//! writer.finish()?;
//!
//! // Reads go through any guideloom_io backend: SeekIo, PreadIo, MmapIo, HttpIo, ...
//! let shard = SyncShard::open(SeekIo::new().open(&path)?, &ReadOptions::default())?; // one tail read
//! assert_eq!(shard.len(), 100);
//! let record = shard.read(42)?; // one ranged read
//! assert_eq!(format.decode(record)?.text, "sample 42");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod cbor;
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
pub mod table;
pub mod writer;

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
pub use table::{Located, PlannedRuns, Run, RunBudget, Runs, ShardGroup, ShardTable, plan_runs};
pub use writer::{Encoded, ShardEncoder, ShardInfo, ShardWriter};
