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
#![deny(missing_docs)]

pub mod discovery;
pub mod element;
pub mod error;
pub mod footer;
pub mod format;
pub mod index;
mod layout;
pub mod mem;
pub mod metadata;
pub mod reader;
pub mod spec;
pub mod storage;
pub mod writer;

pub use discovery::{FileSystemDocument, FileSystemStream, LocalShard, shard_name};
pub use element::{Element, Elements};
pub use error::{Corruption, Error, Result};
pub use footer::Footer;
pub use format::{CborFormat, Format, RawFormat};
pub use index::Index;
pub use layout::{Expected, ReadOptions};
pub use mem::{FileReader, MemReader};
pub use metadata::{ShardMetadata, Value};
pub use reader::{AsyncShard, SyncShard};
pub use storage::WriterOptions;
pub use storage::document::{
    AsyncDocumentReader, DocumentIter, DocumentReader, DocumentStorage, DocumentWriter,
};
pub use storage::stream::{AsyncStreamReader, StreamReader, StreamStorage, StreamWriter};
pub use storage::stream_meta::{
    AsyncStreamWithMetaReader, StreamWithMetaReader, StreamWithMetaStorage, StreamWithMetaWriter,
};
pub use writer::{ShardInfo, ShardWriter};
