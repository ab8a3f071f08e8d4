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
//!
//! # Where a record lives
//!
//! Every reader of a sharded collection (guideloom-storage's storages, a published snapshot, the
//! CLI, the loader's sources) asks the same three questions: which shard holds record `i`
//! ([`ShardTable::locate`]), how a batch of indices splits by shard ([`ShardTable::group`]),
//! and how a range read in order splits into reads ([`ShardTable::runs`], then
//! [`plan_runs`] inside one open shard). They are answered here, once.
//!
//! ## Example: read a range in order
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use guideloom_format::{
//!     ReadOptions, RunBudget, ShardMetadata, ShardTable, ShardWriter, SyncShard, plan_runs,
//! };
//! use guideloom_io::{Backend, SeekIo};
//! # let tmp = tempfile::tempdir()?;
//! // Three shards of 10, 10 and 5 records (guideloom-storage's `DocumentStorage` writes
//! // and discovers such numbered shards for you).
//! let mut shards = Vec::new();
//! for s in 0..3u64 {
//!     let path = tmp.path().join(format!("shard-{s}.glm"));
//!     let mut w = ShardWriter::create(&path, ShardMetadata::new("raw", "documents"))?;
//!     for i in s * 10..(s * 10 + 10).min(25) {
//!         w.append(format!("record {i}").as_bytes())?;
//!     }
//!     w.finish()?;
//!     shards.push(SyncShard::open(SeekIo::new().open(&path)?, &ReadOptions::default())?);
//! }
//!
//! let table = ShardTable::from_counts(shards.iter().map(|s| s.len()))?;
//! let budget = RunBudget::new(64, 1000); // at most 64 bytes per read
//! let mut got = Vec::new();
//! for piece in table.runs(5..22) {
//!     let shard = &shards[piece.shard];
//!     for run in plan_runs(shard.index(), piece, budget) {
//!         got.extend(shard.read_run(run.first, run.count)?); // one read each
//!     }
//! }
//! assert_eq!(got.len(), 17);
//! assert_eq!(&got[0][..], b"record 5");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod cbor;
mod element;
mod error;
mod footer;
mod format;
mod index;
mod layout;
#[cfg(any(test, feature = "testing"))]
mod mem;
mod metadata;
mod point;
mod reader;
pub mod schema;
mod source;
pub mod spec;
mod table;
mod writer;

pub use element::{ELEMENT_TYPES, Element, Elements, element_width};
pub use error::{Corruption, Error, Result};
pub use footer::Footer;
pub use format::{CborFormat, Format, RawFormat};
pub use index::Index;
pub use layout::{Expected, Layout, ReadOptions};
#[cfg(any(test, feature = "testing"))]
pub use mem::MemReader;
pub use metadata::{KIND_DOCUMENTS, KIND_STREAM, ShardMetadata, Value, WRITER};
pub use point::{PROBE_METADATA_ALLOWANCE, RecordSpan, ShardProbe};
pub use reader::{AsyncShard, SyncShard};
pub use source::{ReadAheadBatches, RecordSource};
pub use table::{
    Located, PlannedRuns, RUN_BYTES, RUN_RECORDS, Run, RunBudget, Runs, ShardGroup, ShardTable,
    plan_runs,
};
pub use writer::{Encoded, ShardEncoder, ShardInfo, ShardWriter};
