//! Writing an ArrayRecord file into any [`std::io::Write`].

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::block::{
    BLOCK_SIZE, BlockHeader, CHUNK_HEADER_SIZE, chunk_end, distance_without_overhead,
    is_block_boundary, pos_after_padding, remaining_in_block,
};
use crate::chunk::{ChunkHeader, PADDING, SIGNATURE, SIMPLE};
use crate::error::{Error, Result};
use crate::options::{ArrayRecordWriterOptions, Compression};
use crate::proto::{FooterEntry, FooterMetadata, MAGIC, Postscript, VERSION};
use crate::simple::Encoder;

/// Writes records into an ArrayRecord file, streaming: one chunk of `group_size` records is
/// held in memory at a time, plus 24 bytes of footer entry per chunk.
///
/// The layout is the one array_record's writer produces with the same options: the file
/// signature, one simple chunk per group, the footer chunk (the metadata record, then one
/// entry per chunk) padded to a 64 KiB boundary, and the postscript (three identical records)
/// in a block of its own. Files are at least 128 KiB. A writer dropped without
/// [`finish`](Self::finish) leaves a file with no footer, which readers refuse
/// ([`create`](ArrayRecordWriter::create) writes in place; write to a temporary name and
/// rename it to publish atomically).
///
/// ```
/// use guideloom_arrayrecord::{ArrayRecordWriter, ArrayRecordWriterOptions};
///
/// let mut w = ArrayRecordWriter::new(Vec::new(), ArrayRecordWriterOptions::default());
/// w.write(b"first")?;
/// w.write(b"second")?;
/// let bytes = w.finish()?;
/// assert_eq!(bytes.len(), 128 * 1024);
/// # Ok::<(), guideloom_arrayrecord::Error>(())
/// ```
#[derive(Debug)]
pub struct ArrayRecordWriter<W: Write> {
    dest: W,
    name: String,
    options: ArrayRecordWriterOptions,
    pos: u64,
    started: bool,
    group: Encoder,
    entries: Vec<FooterEntry>,
    records: u64,
    /// Chunks are padded to a block boundary: the option, or always once the footer starts.
    padding: bool,
}

impl ArrayRecordWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes into it.
    pub fn create(path: impl AsRef<Path>, options: ArrayRecordWriterOptions) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::create(path).map_err(|source| Error::Write {
            location: name.clone(),
            offset: 0,
            source,
        })?;
        Ok(ArrayRecordWriter::new(BufWriter::with_capacity(1 << 20, file), options).named(name))
    }
}

impl<W: Write> ArrayRecordWriter<W> {
    /// A writer into `dest`. Nothing is written until the first record or
    /// [`finish`](Self::finish).
    pub fn new(dest: W, options: ArrayRecordWriterOptions) -> Self {
        ArrayRecordWriter {
            dest,
            name: "ArrayRecord writer".to_owned(),
            padding: options.pad_to_block_boundary(),
            options,
            pos: 0,
            started: false,
            group: Encoder::default(),
            entries: Vec::new(),
            records: 0,
        }
    }

    /// Names the destination in errors (e.g. its path).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The options in force.
    pub fn options(&self) -> &ArrayRecordWriterOptions {
        &self.options
    }

    /// Records written so far.
    pub fn len(&self) -> u64 {
        self.records
    }

    /// `true` before the first record.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Appends one record; a full group is encoded and written as one chunk.
    pub fn write(&mut self, record: &[u8]) -> Result<()> {
        self.start()?;
        self.group.add(record);
        self.records += 1;
        if self.group.num_records() >= u64::from(self.options.group_size()) {
            self.flush_group()?;
        }
        Ok(())
    }

    /// Writes the last group, the footer and the postscript, flushes, and returns the
    /// destination.
    pub fn finish(mut self) -> Result<W> {
        self.start()?;
        self.flush_group()?;
        self.padding = true;
        let footer_offset = self.pos;
        let compression = self.options.compression();
        let mut footer = Encoder::default();
        footer.add(
            &FooterMetadata {
                version: VERSION,
                num_chunks: self.entries.len() as u64,
                num_records: self.records,
                writer_options: self.options.to_string(),
            }
            .encode(),
        );
        for e in &self.entries {
            footer.add(&e.encode());
        }
        self.write_records_chunk(&mut footer, &compression)?;
        let mut postscript = Encoder::default();
        let record = Postscript {
            footer_offset,
            magic: MAGIC,
        }
        .encode();
        for _ in 0..3 {
            postscript.add(&record);
        }
        self.write_records_chunk(&mut postscript, &Compression::Uncompressed)?;
        let at = self.pos;
        self.dest
            .flush()
            .map_err(|source| self.write_error(at, source))?;
        Ok(self.dest)
    }

    /// The position the next chunk begins at.
    #[cfg(any(test, feature = "hostile"))]
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// The destination, as written so far.
    #[cfg(any(test, feature = "hostile"))]
    pub(crate) fn into_dest(self) -> W {
        self.dest
    }

    fn write_error(&self, offset: u64, source: std::io::Error) -> Error {
        Error::Write {
            location: self.name.clone(),
            offset,
            source,
        }
    }

    /// Writes the file signature once.
    pub(crate) fn start(&mut self) -> Result<()> {
        if !self.started {
            self.started = true;
            let header = ChunkHeader::new(&[], SIGNATURE, 0, 0);
            self.write_chunk(&header, &[])?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> Result<()> {
        if self.group.num_records() == 0 {
            return Ok(());
        }
        let offset = self.pos;
        let mut group = std::mem::take(&mut self.group);
        let compression = self.options.compression();
        let (num_records, decoded) = self.write_records_chunk(&mut group, &compression)?;
        self.group = group;
        self.entries.push(FooterEntry {
            chunk_offset: offset,
            decoded_data_size: decoded,
            num_records,
        });
        Ok(())
    }

    /// Encodes and writes a simple chunk (then padding, when padding); returns its record
    /// count and decoded size.
    fn write_records_chunk(
        &mut self,
        encoder: &mut Encoder,
        compression: &Compression,
    ) -> Result<(u64, u64)> {
        let (data, num_records, decoded) =
            encoder.finish(compression).map_err(|source| Error::Codec {
                location: self.name.clone(),
                offset: self.pos,
                codec: compression.codec_name(),
                op: "compression",
                source,
            })?;
        let header = ChunkHeader::new(&data, SIMPLE, num_records, decoded);
        self.write_chunk(&header, &data)?;
        if self.padding {
            self.pad_to_block_boundary()?;
        }
        Ok((num_records, decoded))
    }

    /// Writes a padding chunk up to the next 64 KiB boundary (with room for its header).
    pub(crate) fn pad_to_block_boundary(&mut self) -> Result<()> {
        let end = pos_after_padding(self.pos, BLOCK_SIZE);
        if end == self.pos {
            return Ok(());
        }
        let len = distance_without_overhead(self.pos, end) - CHUNK_HEADER_SIZE;
        let zeros = vec![0u8; usize::try_from(len).unwrap_or(0)];
        let header = ChunkHeader::new(&zeros, PADDING, 0, 0);
        self.write_chunk(&header, &zeros)
    }

    /// Writes a chunk at the current position: header, data and padding to its end, with a
    /// block header at every 64 KiB boundary it crosses.
    pub(crate) fn write_chunk(&mut self, header: &ChunkHeader, data: &[u8]) -> Result<()> {
        let begin = self.pos;
        let end = chunk_end(begin, header.data_size, header.num_records).ok_or_else(|| {
            Error::corrupt(&self.name, begin, "chunk end overflows a 64-bit position")
        })?;
        self.emit(&header.encode(), begin, end)?;
        self.emit(data, begin, end)?;
        let padding = distance_without_overhead(self.pos, end);
        if padding > 0 {
            let zeros = vec![0u8; usize::try_from(padding.min(BLOCK_SIZE)).unwrap_or(0)];
            let mut left = padding;
            while left > 0 {
                let n = usize::try_from(left.min(zeros.len() as u64)).unwrap_or(0);
                self.emit(&zeros[..n], begin, end)?;
                left -= n as u64;
            }
        }
        if self.pos != end {
            // The position is always a possible chunk boundary here, so `emit` reaches `end`.
            return Err(Error::corrupt(
                &self.name,
                begin,
                "chunk ended off its computed end",
            ));
        }
        Ok(())
    }

    /// Writes `bytes` of the chunk `[begin, end)`, inserting block headers.
    fn emit(&mut self, mut bytes: &[u8], begin: u64, end: u64) -> Result<()> {
        while !bytes.is_empty() {
            if is_block_boundary(self.pos) {
                let bh = BlockHeader {
                    previous_chunk: self.pos - begin,
                    next_chunk: end - self.pos,
                }
                .encode();
                self.put(&bh)?;
            }
            let room = match remaining_in_block(self.pos) {
                0 => BLOCK_SIZE,
                n => n,
            };
            let n = usize::try_from(room.min(bytes.len() as u64)).unwrap_or(bytes.len());
            let (now, rest) = bytes.split_at(n);
            self.put(now)?;
            bytes = rest;
        }
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let at = self.pos;
        self.dest
            .write_all(bytes)
            .map_err(|source| self.write_error(at, source))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }
}
