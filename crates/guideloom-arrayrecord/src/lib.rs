//! ArrayRecord files for guideloom.
//!
//! [ArrayRecord](https://github.com/google/array_record) is a Riegeli/records file with an
//! index: the records are grouped into chunks (`group_size` records each), and a footer at the
//! end lists every chunk's offset, so record *i* is found without scanning. TFDS and Grain
//! datasets are stored this way.
//!
//! This crate reads such files through guideloom-io's [`SyncReader`](guideloom_io::SyncReader)
//! and [`AsyncReader`](guideloom_io::AsyncReader), so they open from every backend (local
//! files, HTTP, S3/GCS/Azure, a root store) by byte ranges:
//! - opening costs one tail read (the postscript block and, when it fits in
//!   [`ArrayRecordReadOptions::tail_len`], the footer; one more read otherwise);
//! - record *i* costs one ranged read of its chunk, nothing when the chunk is cached;
//! - a batch costs one `read_ranges` of the chunks it needs.
//!
//! [`ArrayRecordWriter`] writes files the `array_record` Python package and Grain read, taking
//! array_record's option string ([`ArrayRecordWriterOptions`]) with the same defaults.
//!
//! Supported: simple chunks (`'r'`) uncompressed or compressed with zstd, Snappy (raw
//! block format) or Brotli (large windows included); padding chunks; metadata chunks are
//! skipped (the footer addresses the data chunks directly). Not supported: transposed chunks
//! (`'t'`, the `transpose` option), which give [`Error::Unsupported`]. Every hash (block
//! headers, chunk headers, chunk data) is checked, and every size read from the file is
//! bounded before it is allocated.
//!
//! ```
//! use guideloom_arrayrecord::{ArrayRecordReader, ArrayRecordWriter, ArrayRecordReadOptions};
//! use guideloom_io::{Backend, PreadIo, SeekIo};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("part-00000.array_record");
//! let mut writer = ArrayRecordWriter::create(&path, "group_size:1,snappy".parse()?)?;
//! for i in 0..100u32 {
//!     writer.write(format!("record {i}").as_bytes())?;
//! }
//! writer.finish()?;
//!
//! let file = ArrayRecordReader::open(SeekIo::new().open(&path)?, &ArrayRecordReadOptions::default())?;
//! assert_eq!(file.len(), 100);
//! assert_eq!(&file.get(42)?[..], b"record 42");
//! assert_eq!(file.layout().writer_options(),
//!     "group_size:1,transpose:false,pad_to_block_boundary:false,snappy,max_parallelism:1");
//! # Ok(()) }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod block;
mod cache;
mod chunk;
mod codec;
mod error;
mod hash;
#[cfg(any(test, feature = "hostile"))]
#[cfg_attr(docsrs, doc(cfg(feature = "hostile")))]
pub mod hostile;
mod layout;
mod options;
mod proto;
mod reader;
mod simple;
mod varint;
mod writer;

pub use block::{BLOCK_HEADER_SIZE, BLOCK_SIZE, CHUNK_HEADER_SIZE};
pub use error::{Error, Result};
pub use layout::{ArrayRecordReadOptions, ChunkInfo, Layout};
pub use options::{
    ArrayRecordWriterOptions, Compression, DEFAULT_BROTLI_WINDOW_LOG, DEFAULT_ZSTD_WINDOW_LOG,
};
pub use reader::{ArrayRecordReader, AsyncArrayRecordReader};
pub use writer::ArrayRecordWriter;
