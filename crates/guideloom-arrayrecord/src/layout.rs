//! Opening a file without doing IO: from the tail bytes to a validated [`Layout`] (the
//! postscript, then the footer), and decoding a data chunk from the bytes of its range.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use guideloom_io::Tail;

use crate::block::{BLOCK_SIZE, chunk_end, is_possible_chunk_boundary};
use crate::chunk::{self, SIMPLE, TRANSPOSED};
use crate::error::{Error, Result};
use crate::proto::{FooterEntry, FooterMetadata, MAGIC, Postscript, VERSION};
use crate::simple;

/// Limits and tuning of a reader.
///
/// ```
/// use guideloom_arrayrecord::ArrayRecordReadOptions;
///
/// let o = ArrayRecordReadOptions::default().with_tail_len(1 << 20).with_cache_chunks(64);
/// assert_eq!(o.tail_len(), 1 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayRecordReadOptions {
    tail_len: u64,
    max_chunk_bytes: u64,
    max_footer_bytes: u64,
    cache_chunks: usize,
    cache_bytes: u64,
}

impl Default for ArrayRecordReadOptions {
    fn default() -> Self {
        ArrayRecordReadOptions {
            tail_len: 256 * 1024,
            max_chunk_bytes: 1 << 30,
            max_footer_bytes: 256 << 20,
            cache_chunks: 16,
            cache_bytes: 64 << 20,
        }
    }
}

impl ArrayRecordReadOptions {
    /// Bytes of the speculative tail read at open (default 256 KiB, at least 64 KiB): the
    /// postscript's 64 KiB block plus, when it fits, the footer.
    pub fn tail_len(&self) -> u64 {
        self.tail_len
    }

    /// Sets [`tail_len`](Self::tail_len) (raised to 64 KiB).
    pub fn with_tail_len(mut self, len: u64) -> Self {
        self.tail_len = len.max(BLOCK_SIZE);
        self
    }

    /// Largest chunk accepted (default 1 GiB), checked before it is read: its stored range
    /// in the file, its decoded size, and, when its records are listed (a batch or in-order
    /// read of many of them, or the cache), its decoded size plus 32 bytes per record listed.
    pub fn max_chunk_bytes(&self) -> u64 {
        self.max_chunk_bytes
    }

    /// Sets [`max_chunk_bytes`](Self::max_chunk_bytes).
    pub fn with_max_chunk_bytes(mut self, n: u64) -> Self {
        self.max_chunk_bytes = n;
        self
    }

    /// Largest footer accepted, stored or decoded (default 256 MiB), checked before reading.
    pub fn max_footer_bytes(&self) -> u64 {
        self.max_footer_bytes
    }

    /// Sets [`max_footer_bytes`](Self::max_footer_bytes).
    pub fn with_max_footer_bytes(mut self, n: u64) -> Self {
        self.max_footer_bytes = n;
        self
    }

    /// Decoded chunks kept for later reads (default 16; 0 disables the cache).
    pub fn cache_chunks(&self) -> usize {
        self.cache_chunks
    }

    /// Sets [`cache_chunks`](Self::cache_chunks).
    pub fn with_cache_chunks(mut self, n: usize) -> Self {
        self.cache_chunks = n;
        self
    }

    /// Decoded bytes the cache may hold (default 64 MiB).
    pub fn cache_bytes(&self) -> u64 {
        self.cache_bytes
    }

    /// Sets [`cache_bytes`](Self::cache_bytes).
    pub fn with_cache_bytes(mut self, n: u64) -> Self {
        self.cache_bytes = n;
        self
    }
}

/// What one record costs in a decoded list of records (a `Bytes` handle), beside its bytes:
/// counted against [`ArrayRecordReadOptions::max_chunk_bytes`] when a chunk's records are listed, so a
/// chunk of many tiny records cannot make its list outgrow the limit.
pub(crate) const RECORD_HANDLE_BYTES: u64 = std::mem::size_of::<Bytes>() as u64;

/// One data chunk as the footer describes it.
// Aligned to its size, so a random read's look-up in the footer's table touches one cache
// line, not two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(32))]
pub struct ChunkInfo {
    /// Where the chunk begins in the file.
    pub offset: u64,
    /// Where the next chunk (or the footer) begins: the chunk's range is `offset..end`.
    pub end: u64,
    /// Records in the chunk.
    pub num_records: u64,
    /// Sum of its record sizes.
    pub decoded_data_size: u64,
}

/// What the footer says about a file: its chunks and records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    size: u64,
    footer_offset: u64,
    chunks: Vec<ChunkInfo>,
    group_size: u64,
    num_records: u64,
    writer_options: String,
}

impl Layout {
    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Records in the file.
    pub fn len(&self) -> u64 {
        self.num_records
    }

    /// `true` when the file holds no records.
    pub fn is_empty(&self) -> bool {
        self.num_records == 0
    }

    /// Records per chunk: every chunk but the last holds exactly this many. Read, as
    /// array_record does, from the first chunk, so a file with fewer records than the
    /// writer's `group_size` reports its record count; 0 without chunks.
    pub fn group_size(&self) -> u64 {
        self.group_size
    }

    /// The data chunks, in file order.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// Where the footer chunk begins (the data chunks end there).
    pub fn footer_offset(&self) -> u64 {
        self.footer_offset
    }

    /// The option string of the writer, as stored in the footer.
    pub fn writer_options(&self) -> &str {
        &self.writer_options
    }

    /// The chunk holding record `index` and the record's position in it.
    pub(crate) fn locate(&self, location: &str, index: u64) -> Result<(usize, usize)> {
        if index >= self.num_records {
            return Err(Error::IndexOutOfRange {
                location: location.to_owned(),
                index,
                len: self.num_records,
            });
        }
        let chunk = usize::try_from(index / self.group_size).unwrap_or(usize::MAX);
        let within = usize::try_from(index % self.group_size).unwrap_or(usize::MAX);
        Ok((chunk, within))
    }

    /// Chunk `c` as the footer describes it.
    pub(crate) fn chunk(&self, c: usize) -> ChunkInfo {
        self.chunks[c]
    }
}

impl ChunkInfo {
    /// The chunk's byte range in the file.
    pub(crate) fn range(&self) -> Range<u64> {
        self.offset..self.end
    }

    /// Refuses, before anything is read, a chunk whose stored range or decoded size exceeds
    /// [`ArrayRecordReadOptions::max_chunk_bytes`].
    pub(crate) fn check_limits(
        &self,
        location: &str,
        options: &ArrayRecordReadOptions,
    ) -> Result<()> {
        for (what, size) in [
            ("stored chunk", self.end - self.offset),
            ("chunk", self.decoded_data_size),
        ] {
            if size > options.max_chunk_bytes {
                return Err(Error::TooLarge {
                    location: location.to_owned(),
                    offset: self.offset,
                    what,
                    size,
                    limit: options.max_chunk_bytes,
                });
            }
        }
        Ok(())
    }

    /// What `records` of the chunk cost once decoded into a list: the values and a
    /// [`RECORD_HANDLE_BYTES`] handle per record.
    pub(crate) fn list_cost(&self, records: u64) -> u64 {
        self.decoded_data_size
            .saturating_add(records.saturating_mul(RECORD_HANDLE_BYTES))
    }

    /// Refuses a list of `records` of the chunk costing more than
    /// [`ArrayRecordReadOptions::max_chunk_bytes`] ([`list_cost`](Self::list_cost)).
    pub(crate) fn check_list(
        &self,
        location: &str,
        records: u64,
        options: &ArrayRecordReadOptions,
    ) -> Result<()> {
        let size = self.list_cost(records);
        if size > options.max_chunk_bytes {
            return Err(Error::TooLarge {
                location: location.to_owned(),
                offset: self.offset,
                what: "chunk's records listed (values and 32 bytes per record)",
                size,
                limit: options.max_chunk_bytes,
            });
        }
        Ok(())
    }

    /// Decodes every record of the chunk from `buf`, the bytes of its range.
    pub(crate) fn decode(
        &self,
        location: &str,
        buf: &Bytes,
        options: &ArrayRecordReadOptions,
    ) -> Result<Vec<Bytes>> {
        self.check_list(location, self.num_records, options)?;
        let chunk = self.records_chunk(location, buf, options)?;
        simple::decode(location, &chunk, options.max_chunk_bytes)
    }

    /// Records `within` of the chunk from `buf`, the bytes of its range.
    pub(crate) fn decode_range(
        &self,
        location: &str,
        within: Range<usize>,
        buf: &Bytes,
        options: &ArrayRecordReadOptions,
    ) -> Result<Vec<Bytes>> {
        self.check_list(location, within.len() as u64, options)?;
        let chunk = self.records_chunk(location, buf, options)?;
        simple::decode_range(location, &chunk, options.max_chunk_bytes, within)
    }

    /// Record `within` of the chunk from `buf`, the bytes of its range, without collecting
    /// its other records (nor decoding the values past it).
    pub(crate) fn decode_record(
        &self,
        location: &str,
        within: usize,
        buf: &Bytes,
        options: &ArrayRecordReadOptions,
    ) -> Result<Bytes> {
        let chunk = self.records_chunk(location, buf, options)?;
        simple::decode_one(location, &chunk, options.max_chunk_bytes, within)
    }

    /// The chunk read from `buf` (every hash checked), refused unless it is a simple chunk
    /// of the size and record count the footer gives.
    fn records_chunk<'a>(
        &self,
        location: &str,
        buf: &'a Bytes,
        options: &ArrayRecordReadOptions,
    ) -> Result<chunk::Chunk<'a>> {
        self.check_limits(location, options)?;
        let chunk = chunk::read_chunk(location, buf, self.offset)?;
        match chunk.header.chunk_type {
            SIMPLE => {}
            TRANSPOSED => {
                return Err(Error::unsupported(
                    location,
                    self.offset,
                    "transposed chunk ('t', written with the `transpose` option)",
                ));
            }
            t => {
                return Err(Error::corrupt(
                    location,
                    self.offset,
                    format!("expected a records chunk, found chunk type {t:#04x}"),
                ));
            }
        }
        if chunk.header.num_records != self.num_records
            || chunk.header.decoded_data_size != self.decoded_data_size
        {
            return Err(Error::corrupt(
                location,
                self.offset,
                format!(
                    "chunk holds {} records of {} bytes, the footer says {} of {}",
                    chunk.header.num_records,
                    chunk.header.decoded_data_size,
                    self.num_records,
                    self.decoded_data_size
                ),
            ));
        }
        Ok(chunk)
    }
}

/// The outcome of parsing the tail read.
#[derive(Debug)]
pub(crate) enum TailOutcome {
    /// The footer was in the tail.
    Done(Layout),
    /// The footer begins before the tail: read `range` and pass it to [`complete`] with
    /// the pending state.
    NeedMore(Pending, Range<u64>),
}

/// What is known after the postscript, while the start of the footer is being read.
#[derive(Debug)]
pub(crate) struct Pending {
    size: u64,
    footer_offset: u64,
    /// The footer bytes already in the tail: `[tail offset, size - 64 KiB)`.
    known: Bytes,
}

/// Decodes the postscript from the tail and, when the footer is in it too, the footer.
pub(crate) fn parse_tail(
    location: &str,
    tail: &Tail,
    options: &ArrayRecordReadOptions,
) -> Result<TailOutcome> {
    let size = tail.size;
    if tail.bytes.len() as u64 > size {
        return Err(Error::corrupt(
            location,
            0,
            format!(
                "the tail read returned {} bytes of a {size}-byte object",
                tail.bytes.len()
            ),
        ));
    }
    if size < 2 * BLOCK_SIZE {
        return Err(Error::corrupt(
            location,
            0,
            format!("{size} bytes is smaller than the smallest ArrayRecord file (128 KiB)"),
        ));
    }
    let ps_begin = size - BLOCK_SIZE;
    let tail_offset = tail.offset();
    if tail_offset > ps_begin {
        return Err(Error::corrupt(
            location,
            tail_offset,
            "the tail read missed the postscript block",
        ));
    }
    let rel = |pos: u64| usize::try_from(pos - tail_offset).unwrap_or(usize::MAX);
    let ps_bytes = tail.bytes.slice(rel(ps_begin)..);
    let chunk = chunk::read_chunk(location, &ps_bytes, ps_begin)?;
    let bad_ps = |what: &str| Error::corrupt(location, ps_begin, format!("postscript: {what}"));
    if chunk.header.chunk_type != SIMPLE || chunk.header.num_records == 0 {
        return Err(bad_ps("not a simple chunk with records"));
    }
    let record = simple::decode_one(location, &chunk, BLOCK_SIZE, 0)?;
    let ps = Postscript::decode(&record).ok_or_else(|| bad_ps("malformed message"))?;
    if ps.magic != MAGIC {
        return Err(bad_ps(&format!("bad magic {:#x}", ps.magic)));
    }
    let footer_offset = ps.footer_offset;
    if footer_offset < 64 || footer_offset >= ps_begin || !is_possible_chunk_boundary(footer_offset)
    {
        return Err(bad_ps(&format!(
            "footer offset {footer_offset} is not a chunk boundary before it"
        )));
    }
    let footer_len = ps_begin - footer_offset;
    if footer_len > options.max_footer_bytes {
        return Err(Error::TooLarge {
            location: location.to_owned(),
            offset: footer_offset,
            what: "footer",
            size: footer_len,
            limit: options.max_footer_bytes,
        });
    }
    if footer_offset >= tail_offset {
        let footer = tail.bytes.slice(rel(footer_offset)..rel(ps_begin));
        return complete_footer(location, size, footer_offset, &footer, options)
            .map(TailOutcome::Done);
    }
    let pending = Pending {
        size,
        footer_offset,
        known: tail.bytes.slice(..rel(ps_begin)),
    };
    Ok(TailOutcome::NeedMore(pending, footer_offset..tail_offset))
}

/// Finishes opening with `missing`, the bytes read of `range`, the range
/// [`TailOutcome::NeedMore`] asked for (a short read is refused here, for both readers).
pub(crate) fn complete(
    location: &str,
    pending: Pending,
    range: std::ops::Range<u64>,
    missing: Bytes,
    options: &ArrayRecordReadOptions,
) -> Result<Layout> {
    guideloom_io::check_len(
        location,
        range.start,
        range.end - range.start,
        missing.len(),
    )?;
    let mut footer = BytesMut::with_capacity(missing.len() + pending.known.len());
    footer.extend_from_slice(&missing);
    footer.extend_from_slice(&pending.known);
    complete_footer(
        location,
        pending.size,
        pending.footer_offset,
        &footer.freeze(),
        options,
    )
}

/// Decodes and validates the footer, `footer` being the bytes `[footer_offset, size - 64 KiB)`.
fn complete_footer(
    location: &str,
    size: u64,
    footer_offset: u64,
    footer: &Bytes,
    options: &ArrayRecordReadOptions,
) -> Result<Layout> {
    let corrupt = |what: String| Error::corrupt(location, footer_offset, format!("footer: {what}"));
    let chunk = chunk::read_chunk(location, footer, footer_offset)?;
    if chunk.header.chunk_type != SIMPLE || chunk.header.num_records == 0 {
        return Err(corrupt("not a simple chunk with records".into()));
    }
    // The records stream into the table: an entry is checked as it is decoded, and the
    // table grows by what the footer really holds (each entry a chunk of its own at least a
    // chunk header and its record count after the previous one, so the table is bounded by
    // the file's size), never by a count it states.
    let mut meta: Option<FooterMetadata> = None;
    let mut chunks: Vec<ChunkInfo> = Vec::new();
    let mut total: u64 = 0;
    let mut group_size = 0;
    let n = usize::try_from(chunk.header.num_records).unwrap_or(usize::MAX);
    simple::walk(location, &chunk, options.max_footer_bytes, 0..n, |record| {
        let Some(meta) = &meta else {
            let m = FooterMetadata::decode(&record)
                .ok_or_else(|| corrupt("malformed metadata record".into()))?;
            if m.version != VERSION {
                return Err(Error::unsupported(
                    location,
                    footer_offset,
                    format!("ArrayRecord footer version {}", m.version),
                ));
            }
            meta = Some(m);
            return Ok(());
        };
        let i = chunks.len();
        if i as u64 >= meta.num_chunks {
            return Err(corrupt(format!(
                "metadata says {} chunks, the footer lists more",
                meta.num_chunks
            )));
        }
        let e =
            FooterEntry::decode(&record).ok_or_else(|| corrupt(format!("malformed entry {i}")))?;
        if i == 0 {
            group_size = e.num_records;
        }
        // A chunk takes at least its header and a byte per record (Riegeli's padding).
        let min_offset = match chunks.last() {
            None => Some(64),
            Some(c) => chunk_end(c.offset, 0, c.num_records),
        };
        if min_offset.is_none_or(|min| e.chunk_offset < min)
            || e.chunk_offset >= footer_offset
            || !is_possible_chunk_boundary(e.chunk_offset)
        {
            return Err(corrupt(format!(
                "entry {i}: chunk offset {} out of order",
                e.chunk_offset
            )));
        }
        if e.num_records == 0 || e.num_records > group_size {
            return Err(corrupt(format!(
                "entry {i}: {} records in a group of {group_size}",
                e.num_records
            )));
        }
        if let Some(prev) = chunks.last_mut() {
            if prev.num_records != group_size {
                return Err(corrupt(format!(
                    "entry {}: {} records in a group of {group_size}",
                    i - 1,
                    prev.num_records
                )));
            }
            prev.end = e.chunk_offset;
        }
        chunks.push(ChunkInfo {
            offset: e.chunk_offset,
            end: footer_offset,
            num_records: e.num_records,
            decoded_data_size: e.decoded_data_size,
        });
        total = total
            .checked_add(e.num_records)
            .ok_or_else(|| corrupt("record count overflows".into()))?;
        Ok(())
    })?;
    let meta = meta.ok_or_else(|| corrupt("malformed metadata record".into()))?;
    if let Some(last) = chunks.last()
        && chunk_end(last.offset, 0, last.num_records).is_none_or(|end| end > footer_offset)
    {
        return Err(corrupt(format!(
            "entry {}: chunk offset {} out of order",
            chunks.len() - 1,
            last.offset
        )));
    }
    if meta.num_chunks != chunks.len() as u64 {
        return Err(corrupt(format!(
            "metadata says {} chunks, the footer lists {}",
            meta.num_chunks,
            chunks.len()
        )));
    }
    if total != meta.num_records {
        return Err(corrupt(format!(
            "metadata says {} records, the entries add up to {total}",
            meta.num_records
        )));
    }
    Ok(Layout {
        size,
        footer_offset,
        chunks,
        group_size,
        num_records: total,
        writer_options: meta.writer_options,
    })
}
