//! Point reads; documented on [`ShardProbe`].

use std::ops::Range;

use bytes::Bytes;
use guideloom_io::AsyncReader;

use crate::element_width;
use crate::error::{Corruption, Error, Result};
use crate::footer::Footer;
use crate::metadata::ShardMetadata;
use crate::spec::{
    FOOTER_LEN, HEADER_LEN, INDEX_ENTRY_LEN, INDEX_ENTRY_USIZE, crc32c, le_u32, le_u64,
};

/// Metadata bytes a probe's first read allows for before the footer (a shard's metadata is
/// typically under 200 bytes; more costs one more read).
pub const PROBE_METADATA_ALLOWANCE: u64 = 4 << 10;

/// Largest gap between the index window and the tail that a probe reads through rather than
/// asking for two ranges.
const MERGE_GAP: u64 = 16 << 10;

/// Byte pieces of the shard a probe holds, by offset.
#[derive(Debug, Clone, Default)]
struct Held(Vec<(u64, Bytes)>);

impl Held {
    /// The bytes of `range` if one piece holds them all.
    fn slice(&self, range: Range<u64>) -> Option<Bytes> {
        self.0.iter().find_map(|(at, bytes)| {
            let start = usize::try_from(range.start.checked_sub(*at)?).ok()?;
            let len = usize::try_from(range.end.checked_sub(range.start)?).ok()?;
            let end = start.checked_add(len)?;
            (end <= bytes.len()).then(|| bytes.slice(start..end))
        })
    }

    /// The bytes of `range`: held, or one read of exactly that range.
    async fn get<R: AsyncReader + ?Sized>(
        &self,
        shard: &str,
        reader: &R,
        range: Range<u64>,
    ) -> Result<Bytes> {
        match self.slice(range.clone()) {
            Some(bytes) => Ok(bytes),
            None => read_exact(shard, reader, range).await,
        }
    }
}

/// One read of exactly `range`.
async fn read_exact<R: AsyncReader + ?Sized>(
    shard: &str,
    reader: &R,
    range: Range<u64>,
) -> Result<Bytes> {
    let len = range.end - range.start;
    let bytes = reader.read(range.start, len).await?;
    guideloom_io::check_len(shard, range.start, len, bytes.len())?;
    Ok(bytes)
}

/// A point read: one record of a shard without its whole index. A probe holds the shard's
/// footer and metadata, checked, with the index entries near one record.
///
/// Opening a shard reads its whole index (12 bytes per record: 120 KB for 10 000 records)
/// so that every later read is one request. A reader that wants one record of a remote
/// shard — a fresh `guideloom get` — pays for the whole index to use 24 bytes of it. A
/// probe instead reads, in one call to [`AsyncReader::read_ranges`] (one multi-range
/// request over HTTP), the footer with a metadata allowance and the window of the index
/// where record `i`'s entries lie whatever the metadata's length up to that allowance; then
/// the record.
///
/// What a probe checks: the footer (magic, version, CRC, layout), the metadata (its CRC and
/// its count), the two entries it uses (inside the data region and in order, the last one
/// ending at the index), and the record's CRC32C, **always** (the index CRC covers the whole
/// index, which a probe does not read, so the record's own CRC is what catches a damaged
/// entry). It does not check the rest of the index: damage there is found when the shard is
/// opened whole ([`AsyncShard::open`](crate::AsyncShard::open)).
///
/// (The example reads from memory through `MemReader`, built with the `testing` feature.)
///
/// ```
/// use guideloom_format::{MemReader, ShardEncoder, ShardMetadata, ShardProbe};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> guideloom_format::Result<()> {
/// let mut encoder = ShardEncoder::new(Vec::new(), ShardMetadata::new("raw", "documents"))?;
/// for r in 0..1000u32 {
///     encoder.append(&r.to_le_bytes())?;
/// }
/// let (bytes, _) = encoder.finish()?;
/// let size = bytes.len() as u64;
/// let reader = MemReader::new("s", bytes);
/// // The first read: footer, metadata and record 700's index entries.
/// let probe = ShardProbe::open(&reader, size, 1000, 700).await?;
/// assert_eq!(probe.len(), 1000);
/// // The second: the record.
/// assert_eq!(&probe.read(&reader, 700).await?[..], &700u32.to_le_bytes());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ShardProbe {
    shard: String,
    footer: Footer,
    metadata: ShardMetadata,
    held: Held,
}

impl ShardProbe {
    /// The ranges of a probe's first read of a shard of `size` bytes that holds `records`
    /// records (a reference's count; a wrong one costs a read more, never a wrong answer),
    /// for record `i`: the last [`FOOTER_LEN`] + [`PROBE_METADATA_ALLOWANCE`] bytes, and the
    /// index window holding entries `i - 1` and `i` for any metadata length up to the
    /// allowance — one range when the two are within 16 KiB of each other. Sorted, disjoint.
    pub fn first_reads(size: u64, records: u64, i: u64) -> Vec<Range<u64>> {
        Self::first_reads_of(size, records, i..i.saturating_add(1))
    }

    /// [`first_reads`](Self::first_reads) for the records of `range`: the window holds
    /// entries `range.start - 1` to `range.end - 1` (12 bytes a record), so that
    /// [`spans`](Self::spans) of `range` needs no read. An empty range reads the tail alone.
    pub fn first_reads_of(size: u64, records: u64, range: Range<u64>) -> Vec<Range<u64>> {
        let tail = size.saturating_sub(FOOTER_LEN + PROBE_METADATA_ALLOWANCE)..size;
        // Entries [start - 1, end) end `12·(records - end)` bytes before the metadata.
        let window = (|| {
            let count = range.end.checked_sub(range.start).filter(|&n| n > 0)?;
            let after = records
                .checked_sub(range.end)?
                .checked_mul(INDEX_ENTRY_LEN)?;
            let end = size.checked_sub(FOOTER_LEN)?.checked_sub(after)?;
            let entries = (count + u64::from(range.start > 0)).checked_mul(INDEX_ENTRY_LEN)?;
            let start = end.checked_sub(entries.checked_add(PROBE_METADATA_ALLOWANCE)?)?;
            Some(start..end)
        })();
        match window {
            Some(w) if w.end.saturating_add(MERGE_GAP) < tail.start => vec![w, tail],
            Some(w) => std::iter::once(w.start.min(tail.start)..size).collect(),
            None => std::iter::once(tail).collect(),
        }
    }

    /// Reads the footer and metadata of `reader`'s shard of `size` bytes and the index
    /// entries of record `i`, in one [`read_ranges`](AsyncReader::read_ranges) call of
    /// [`first_reads`](Self::first_reads) (plus one read if the metadata is larger than the
    /// allowance). `size` and `records` are what the caller expects (a reference's): the
    /// size places the reads (a reader that learns sizes from responses, such as HTTP's,
    /// needs no request for it; an object of another size fails the reads or the footer's
    /// layout check); [`len`](Self::len) is the footer's count.
    pub async fn open<R: AsyncReader + ?Sized>(
        reader: &R,
        size: u64,
        records: u64,
        i: u64,
    ) -> Result<ShardProbe> {
        Self::open_ranges(reader, size, Self::first_reads(size, records, i)).await
    }

    /// [`open`](Self::open) for the records of `range`: the same one call, whose index window
    /// holds the entries of every record of `range` ([`first_reads_of`](Self::first_reads_of)).
    pub async fn open_for<R: AsyncReader + ?Sized>(
        reader: &R,
        size: u64,
        records: u64,
        range: Range<u64>,
    ) -> Result<ShardProbe> {
        Self::open_ranges(reader, size, Self::first_reads_of(size, records, range)).await
    }

    /// The footer and metadata alone: one read of the last [`FOOTER_LEN`] +
    /// [`PROBE_METADATA_ALLOWANCE`] bytes of `reader`'s shard of `size` bytes (plus one if
    /// the metadata is longer). Records are then read as after [`open`](Self::open), each
    /// with a read of its index entries.
    pub async fn open_tail<R: AsyncReader + ?Sized>(reader: &R, size: u64) -> Result<ShardProbe> {
        let tail = size.saturating_sub(FOOTER_LEN + PROBE_METADATA_ALLOWANCE)..size;
        Self::open_ranges(reader, size, std::iter::once(tail).collect()).await
    }

    async fn open_ranges<R: AsyncReader + ?Sized>(
        reader: &R,
        size: u64,
        ranges: Vec<Range<u64>>,
    ) -> Result<ShardProbe> {
        let shard = reader.location().to_owned();
        let pieces = reader.read_ranges(&ranges).await?;
        let held = Held(ranges.iter().map(|r| r.start).zip(pieces).collect());
        let footer_at = size.saturating_sub(FOOTER_LEN)..size;
        let footer_bytes = held
            .slice(footer_at)
            .ok_or_else(|| Error::layout(&shard, "the tail read returned too few bytes"))?;
        let footer = Footer::decode(&shard, &footer_bytes, size)?;
        let meta_range = footer.metadata_offset..footer.metadata_offset + footer.metadata_len;
        let meta_bytes = held.get(&shard, reader, meta_range).await?;
        let metadata = ShardMetadata::decode_section(&shard, &meta_bytes, &footer)?;
        Ok(ShardProbe {
            shard,
            footer,
            metadata,
            held,
        })
    }

    /// Records in the shard (the footer's count).
    pub fn len(&self) -> u64 {
        self.footer.record_count
    }

    /// `true` when the shard holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shard's footer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The shard's metadata.
    pub fn metadata(&self) -> &ShardMetadata {
        &self.metadata
    }

    /// Record `i`: its index entries from what the probe holds (or one 24-byte read), then
    /// one read of the record, whose CRC32C is always checked.
    pub async fn read<R: AsyncReader + ?Sized>(&self, reader: &R, i: u64) -> Result<Bytes> {
        let (range, crc) = self.record_range(reader, i).await?;
        let bytes = read_exact(&self.shard, reader, range).await?;
        if crc32c(&bytes) != crc {
            return Err(Error::corrupt(
                &self.shard,
                Corruption::RecordChecksum { index: i },
            ));
        }
        Ok(bytes)
    }

    /// The byte range and CRC32C of record `i`, from entries `i - 1` and `i` (held, or
    /// read), checked.
    async fn record_range<R: AsyncReader + ?Sized>(
        &self,
        reader: &R,
        i: u64,
    ) -> Result<(Range<u64>, u32)> {
        let len = self.len();
        if i >= len {
            return Err(Error::IndexOutOfRange { index: i, len });
        }
        let span = self
            .spans(reader, i..i.saturating_add(1))
            .await?
            .pop()
            .ok_or(Error::IndexOutOfRange { index: i, len })?;
        Ok((span.range, span.crc32c))
    }

    /// Where each record of `range` lies, from index entries `range.start - 1` to
    /// `range.end - 1`: those the probe holds, or **one** read of exactly those (12 bytes a
    /// record, plus one entry). Each span is checked as [`read`](Self::read) checks its
    /// record's (inside the data region, in order, the last record ending at the index, a
    /// stream record a whole number of elements), so its length can bound what a caller
    /// reads before reading it. A range past the end is [`Error::IndexOutOfRange`]; an empty
    /// range gives no span and reads nothing.
    pub async fn spans<R: AsyncReader + ?Sized>(
        &self,
        reader: &R,
        range: Range<u64>,
    ) -> Result<Vec<RecordSpan>> {
        let len = self.len();
        if range.end > len {
            return Err(Error::IndexOutOfRange {
                index: range.end - 1,
                len,
            });
        }
        if range.start >= range.end {
            return Ok(Vec::new());
        }
        // range.end <= record_count <= 2^24, and the footer placed the index inside the file.
        let first = range.start.saturating_sub(1);
        let index_offset = self.footer.index_offset;
        let entries =
            index_offset + first * INDEX_ENTRY_LEN..index_offset + range.end * INDEX_ENTRY_LEN;
        let bytes = self.held.get(&self.shard, reader, entries).await?;
        let width = self.metadata.element.as_deref().and_then(element_width);
        let bad = |index, end| Error::corrupt(&self.shard, Corruption::IndexOffset { index, end });
        let mut start = if range.start == 0 {
            HEADER_LEN
        } else {
            le_u64(&bytes, 0)
        };
        if start < HEADER_LEN || start > index_offset {
            return Err(bad(range.start - 1, start));
        }
        let mut at = if range.start == 0 {
            0
        } else {
            INDEX_ENTRY_USIZE
        };
        let mut out = Vec::with_capacity(bytes.len() / INDEX_ENTRY_USIZE);
        for i in range {
            let (end, crc) = (le_u64(&bytes, at), le_u32(&bytes, at + 8));
            if end < start || end > index_offset || (i + 1 == len && end != index_offset) {
                return Err(bad(i, end));
            }
            if let Some(width) = width
                && !(end - start).is_multiple_of(width)
            {
                return Err(Error::layout(
                    &self.shard,
                    "a stream record's length is not a multiple of the element width",
                ));
            }
            out.push(RecordSpan {
                index: i,
                range: start..end,
                crc32c: crc,
            });
            start = end;
            at += INDEX_ENTRY_USIZE;
        }
        Ok(out)
    }

    /// The records at `spans` (from [`spans`](Self::spans) of this probe), in order: one
    /// [`read_ranges`](AsyncReader::read_ranges) call of the runs of adjacent spans (a page
    /// of consecutive records is one range), each record's CRC32C checked. What it reads is
    /// the sum of the spans' lengths: bound it by looking at them first.
    pub async fn read_spans<R: AsyncReader + ?Sized>(
        &self,
        reader: &R,
        spans: &[RecordSpan],
    ) -> Result<Vec<Bytes>> {
        // Runs of adjacent spans, and the run of each span.
        let mut runs: Vec<Range<u64>> = Vec::new();
        let mut run_of = Vec::with_capacity(spans.len());
        for span in spans {
            match runs.last_mut() {
                Some(run) if run.end == span.range.start => run.end = span.range.end,
                _ => runs.push(span.range.clone()),
            }
            run_of.push(runs.len() - 1);
        }
        let pieces = reader.read_ranges(&runs).await?;
        if pieces.len() != runs.len() {
            return Err(Error::layout(
                &self.shard,
                "a ranged read returned another number of pieces than asked for",
            ));
        }
        for (run, piece) in runs.iter().zip(&pieces) {
            guideloom_io::check_len(&self.shard, run.start, run.end - run.start, piece.len())?;
        }
        let mut out = Vec::with_capacity(spans.len());
        for (span, &r) in spans.iter().zip(&run_of) {
            // Each span lies in its run, whose piece has the run's length (checked above).
            let at = |offset: u64| usize::try_from(offset - runs[r].start);
            let (Ok(from), Ok(to)) = (at(span.range.start), at(span.range.end)) else {
                return Err(Error::layout(&self.shard, "a record larger than memory"));
            };
            let bytes = pieces[r].slice(from..to);
            if crc32c(&bytes) != span.crc32c {
                return Err(Error::corrupt(
                    &self.shard,
                    Corruption::RecordChecksum { index: span.index },
                ));
            }
            out.push(bytes);
        }
        Ok(out)
    }
}

/// Where a record lies in its shard, from its index entries ([`ShardProbe::spans`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpan {
    /// The record's index in the shard.
    pub index: u64,
    /// Its bytes in the shard.
    pub range: Range<u64>,
    /// Its CRC32C, as the index gives it.
    pub crc32c: u32,
}

impl RecordSpan {
    /// The record's length in bytes.
    pub fn len(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// `true` for an empty record.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

#[cfg(test)]
mod tests;
