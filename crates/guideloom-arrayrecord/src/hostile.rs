//! Files whose every hash is right but whose contents lie: what a reader must refuse, or
//! read within its bounds, however a hostile writer fills the fields. For tests and fuzzing
//! (feature `hostile`); **not covered by semver**.
//!
//! [`HostileFile`] lays out chunks exactly as [`ArrayRecordWriter`]
//! does (signature, block headers at every 64 KiB boundary, Riegeli's padding of a chunk to
//! its record count, a footer, the postscript), with each chunk's header, data, record count
//! and decoded size as given, and a footer that lists them as their headers do, or as given.
//!
//! ```
//! use guideloom_arrayrecord::hostile::{HostileFile, varints};
//! use guideloom_arrayrecord::{ArrayRecordReader, Error, ArrayRecordReadOptions};
//! use guideloom_io::{Backend, SeekIo};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! // A chunk that claims 1000 records but holds sizes for 2.
//! let mut file = HostileFile::new();
//! file.simple_chunk(0, &varints([1, 1]), b"ab", 1000, 2);
//! let path = dir.path().join("hostile.array_record");
//! std::fs::write(&path, file.finish())?;
//! let reader = ArrayRecordReader::open(SeekIo::new().open(&path)?, &ArrayRecordReadOptions::default())?;
//! assert!(matches!(reader.get(0), Err(Error::Corrupt { .. })));
//! # Ok(()) }
//! ```

use std::io::Write;

use crate::chunk::{ChunkHeader, SIMPLE};
use crate::proto::{FooterEntry, FooterMetadata, MAGIC, Postscript, VERSION};
use crate::simple::Encoder;
use crate::writer::ArrayRecordWriter;
use crate::{Compression, varint};

/// A file under construction: chunks as given, then [`finish`](Self::finish).
#[derive(Debug)]
pub struct HostileFile {
    w: ArrayRecordWriter<Vec<u8>>,
    entries: Vec<FooterEntry>,
}

impl Default for HostileFile {
    fn default() -> Self {
        Self::new()
    }
}

impl HostileFile {
    /// A file with its signature written.
    pub fn new() -> Self {
        let mut w = ArrayRecordWriter::new(Vec::new(), Default::default());
        w.start().expect("writing to memory");
        HostileFile {
            w,
            entries: Vec::new(),
        }
    }

    /// Where the next chunk begins.
    pub fn position(&self) -> u64 {
        self.w.position()
    }

    /// Appends a simple chunk from its stored parts: the compression byte (`0`, `b'z'`,
    /// `b's'`, `b'b'`), the sizes buffer and the values buffer as stored (prefix included
    /// when compressed: see [`compressed`]), claiming `num_records` records of `decoded`
    /// bytes in its header and its footer entry. Riegeli pads the chunk to `num_records`
    /// bytes, so a large claim makes a large file (mostly zeros).
    pub fn simple_chunk(
        &mut self,
        compression: u8,
        sizes: &[u8],
        values: &[u8],
        num_records: u64,
        decoded: u64,
    ) -> u64 {
        self.raw_chunk(
            SIMPLE,
            &simple_data(compression, sizes, values),
            num_records,
            decoded,
        )
    }

    /// Appends a chunk of type `chunk_type` (`b'r'`, `b't'`, `b'p'`, ...) holding `data`,
    /// claiming `num_records` and `decoded`, listed in the footer; returns its offset.
    pub fn raw_chunk(
        &mut self,
        chunk_type: u8,
        data: &[u8],
        num_records: u64,
        decoded: u64,
    ) -> u64 {
        let offset = self.w.position();
        let header = ChunkHeader::new(data, chunk_type, num_records, decoded);
        self.w
            .write_chunk(&header, data)
            .expect("writing to memory");
        self.entries.push(FooterEntry {
            chunk_offset: offset,
            decoded_data_size: decoded,
            num_records,
        });
        offset
    }

    /// The footer entries so far (offset, records, decoded size), to change before
    /// [`finish_with_entries`](Self::finish_with_entries).
    pub fn entries(&self) -> Vec<(u64, u64, u64)> {
        self.entries
            .iter()
            .map(|e| (e.chunk_offset, e.num_records, e.decoded_data_size))
            .collect()
    }

    /// The file: an uncompressed footer listing every chunk as appended, then the
    /// postscript.
    pub fn finish(self) -> Vec<u8> {
        let entries = self.entries();
        self.finish_with_entries(&entries)
    }

    /// The file with a footer listing `entries` (offset, records, decoded size), its
    /// metadata counting them.
    pub fn finish_with_entries(self, entries: &[(u64, u64, u64)]) -> Vec<u8> {
        let records = footer_records(entries);
        let mut footer = Encoder::default();
        for r in &records {
            footer.add(r);
        }
        let (data, n, decoded) = footer
            .finish(&Compression::Uncompressed)
            .expect("writing to memory");
        self.finish_with_footer(&data, n, decoded)
    }

    /// The file with a footer chunk of `data` (a simple chunk's data, see [`simple_data`])
    /// claiming `num_records` records of `decoded` bytes.
    pub fn finish_with_footer(mut self, data: &[u8], num_records: u64, decoded: u64) -> Vec<u8> {
        let footer_offset = self.w.position();
        let header = ChunkHeader::new(data, SIMPLE, num_records, decoded);
        self.w
            .write_chunk(&header, data)
            .expect("writing to memory");
        self.w.pad_to_block_boundary().expect("writing to memory");
        let mut postscript = Encoder::default();
        let record = Postscript {
            footer_offset,
            magic: MAGIC,
        }
        .encode();
        for _ in 0..3 {
            postscript.add(&record);
        }
        let (data, n, decoded) = postscript
            .finish(&Compression::Uncompressed)
            .expect("writing to memory");
        let header = ChunkHeader::new(&data, SIMPLE, n, decoded);
        self.w
            .write_chunk(&header, &data)
            .expect("writing to memory");
        self.w.pad_to_block_boundary().expect("writing to memory");
        self.w.into_dest()
    }
}

/// A simple chunk's data: the compression byte, the sizes buffer's length and the buffers.
pub fn simple_data(compression: u8, sizes: &[u8], values: &[u8]) -> Vec<u8> {
    let mut data = vec![compression];
    varint::put(&mut data, sizes.len() as u64);
    data.extend_from_slice(sizes);
    data.extend_from_slice(values);
    data
}

/// The footer's records for `entries` (offset, records, decoded size): the metadata record
/// (version 1, their count and total), then one per entry.
pub fn footer_records(entries: &[(u64, u64, u64)]) -> Vec<Vec<u8>> {
    let total = entries.iter().map(|e| e.1).fold(0u64, u64::saturating_add);
    let mut out = vec![
        FooterMetadata {
            version: VERSION,
            num_chunks: entries.len() as u64,
            num_records: total,
            writer_options: "group_size:1".into(),
        }
        .encode(),
    ];
    out.extend(
        entries
            .iter()
            .map(|&(chunk_offset, num_records, decoded_data_size)| {
                FooterEntry {
                    chunk_offset,
                    decoded_data_size,
                    num_records,
                }
                .encode()
            }),
    );
    out
}

/// `values` as consecutive varints (a sizes buffer).
pub fn varints(values: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        varint::put(&mut out, v);
    }
    out
}

/// A stored buffer: `parts` (concatenated) compressed with `compression` (`b'z'` zstd at
/// level 1, `b'b'` Brotli at quality 1, `b's'` Snappy) behind `claimed` as the size
/// prefix. zstd and Brotli compress as the parts come, so a bomb of gigabytes of zeros
/// costs no more memory than one part; Snappy (which has no streaming raw format) gathers
/// them first.
pub fn compressed<'a>(
    compression: u8,
    claimed: u64,
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    varint::put(&mut out, claimed);
    // One small part (what a fuzzer builds, thousands of times a second): this thread's
    // reused zstd context, no streaming encoder set up.
    let mut parts = parts.into_iter().peekable();
    let first = parts.next().unwrap_or(&[]);
    if compression == b'z' && first.len() <= 1 << 20 && parts.peek().is_none() {
        out.extend(crate::codec::zstd_compress(1, 20, first).expect("zstd compression"));
        return out;
    }
    let parts = std::iter::once(first).chain(parts);
    match compression {
        b'z' => {
            let mut enc = zstd::stream::write::Encoder::new(out, 1).expect("zstd encoder");
            enc.include_checksum(false).expect("zstd parameter");
            for p in parts {
                enc.write_all(p).expect("writing to memory");
            }
            enc.finish().expect("writing to memory")
        }
        b'b' => {
            let mut enc = brotli::CompressorWriter::new(out, 4096, 1, 16);
            for p in parts {
                enc.write_all(p).expect("writing to memory");
            }
            enc.into_inner()
        }
        b's' => {
            let all: Vec<u8> = parts.into_iter().flatten().copied().collect();
            let body = snap::raw::Encoder::new()
                .compress_vec(&all)
                .expect("snappy compression");
            out.extend_from_slice(&body);
            out
        }
        other => panic!("no codec {other:#04x}"),
    }
}
