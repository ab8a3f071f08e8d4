//! Sans-IO shard opening: from a tail read to a validated [`Layout`], shared by the sync and
//! async readers.

use std::ops::Range;

use bytes::Bytes;
use guideloom_io::Tail;
use guideloom_io::coalesce::{self, CoalescePolicy, MergedRange};

use crate::element::{Element, element_width};
use crate::error::{Corruption, Error, Result};
use crate::footer::Footer;
use crate::index::Index;
use crate::metadata::{KIND_DOCUMENTS, KIND_STREAM, ShardMetadata};
use crate::spec::{
    DEFAULT_SPECULATIVE_TAIL, FOOTER_LEN, FOOTER_USIZE, HEADER_LEN, HEADER_USIZE, MAGIC,
    MIN_SHARD_LEN, crc32c, le_u16,
};

/// How shards are opened and read (the read concern's one options type): start from
/// [`ReadOptions::default`] and chain the `with_*` builders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    speculative_tail: u64,
    verify_records: bool,
    /// `None`: merging is left to the backend's `read_ranges` (one plan, not two).
    coalesce: Option<CoalescePolicy>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            speculative_tail: DEFAULT_SPECULATIVE_TAIL,
            verify_records: true,
            coalesce: None,
        }
    }
}

impl ReadOptions {
    /// Bytes read from the end of a shard to open it (default 64 KiB, at least 80). When
    /// footer, index and metadata fit in it, opening costs one request; otherwise two.
    #[must_use]
    pub fn with_speculative_tail(mut self, bytes: u64) -> Self {
        self.speculative_tail = bytes.max(MIN_SHARD_LEN);
        self
    }

    /// Whether each record's CRC32C is checked when read (default `true`). Index and
    /// metadata checksums are always checked.
    #[must_use]
    pub fn with_verify_records(mut self, verify: bool) -> Self {
        self.verify_records = verify;
        self
    }

    /// How `read_many` merges neighbouring records into one read.
    ///
    /// By default `read_many` hands the record ranges to the backend's `read_ranges`, which
    /// merges neighbours by the backend's own policy (every `guideloom-io` backend does), so
    /// ranges are planned once. Setting a policy here merges them at the format level first,
    /// with this policy, and hands the merged ranges to the backend: use it for a reader
    /// whose `read_ranges` reads one range at a time, or to merge more than the backend does.
    #[must_use]
    pub fn with_coalesce(mut self, policy: CoalescePolicy) -> Self {
        self.coalesce = Some(policy);
        self
    }

    /// The speculative tail length.
    pub fn tail_len(&self) -> u64 {
        self.speculative_tail
    }

    /// Whether record checksums are verified.
    pub fn verifies_records(&self) -> bool {
        self.verify_records
    }

    /// The coalescing policy set with [`with_coalesce`](Self::with_coalesce), or the default policy
    /// (which the backends use) when merging is left to the backend.
    pub fn coalesce_policy(&self) -> CoalescePolicy {
        self.coalesce.unwrap_or_default()
    }

    /// The format-level policy, `None` when merging is left to the backend.
    pub(crate) fn format_coalesce(&self) -> Option<CoalescePolicy> {
        self.coalesce
    }
}

/// What a caller expects a shard to hold; a shard holding something else is refused with
/// [`Error::FormatMismatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Documents of the named record format.
    Documents(String),
    /// A stream of the named element type (with its width in bytes).
    Stream {
        /// Element name (`"u32"`).
        element: &'static str,
        /// Element width in bytes.
        width: u64,
    },
}

impl Expected {
    /// A stream of element type `E` (what a typed stream reader expects).
    pub fn stream<E: Element>() -> Self {
        Expected::Stream {
            element: E::NAME,
            width: E::WIDTH,
        }
    }

    fn describe(&self) -> String {
        match self {
            Expected::Documents(f) => f.clone(),
            Expected::Stream { element, .. } => format!("stream<{element}>"),
        }
    }
}

/// A validated shard's footer, index and metadata, as its open read them: what a
/// [`SyncShard`](crate::SyncShard) or [`AsyncShard`](crate::AsyncShard) holds besides its
/// reader. Opaque; it appears in the type of the synchronous view of an `AsyncShard`
/// ([`AsyncShard::as_sync`](crate::AsyncShard::as_sync)), which borrows it.
#[derive(Debug, Clone)]
pub struct Layout {
    pub(crate) shard: String,
    pub(crate) footer: Footer,
    pub(crate) index: Index,
    pub(crate) metadata: ShardMetadata,
}

/// The result of looking at the speculative tail.
pub(crate) enum TailOutcome {
    /// Everything was in the tail.
    Done(Layout),
    /// The index and metadata start before the tail: read the `missing` range (from the
    /// index's start up to where the tail begins), then [`complete`] with it joined to `held`,
    /// the part of the sections the tail already holds ([`join_sections`]), so no byte is
    /// read twice.
    NeedMore {
        /// The footer, validated.
        footer: Footer,
        /// The range still to read.
        missing: Range<u64>,
        /// The sections' bytes from the tail's start on.
        held: Bytes,
    },
}

/// The index and metadata sections from the `missing` bytes read and the `held` part of the
/// tail (one copy of the sections; a second request re-reading the tail cost up to 64 KiB
/// more on the wire).
pub(crate) fn join_sections(missing: Bytes, held: Bytes) -> Bytes {
    let mut joined = bytes::BytesMut::with_capacity(missing.len() + held.len());
    joined.extend_from_slice(&missing);
    joined.extend_from_slice(&held);
    joined.freeze()
}

/// Parses the tail of a shard. Never allocates more than the tail it was given.
pub(crate) fn parse_tail(shard: &str, tail: &Tail) -> Result<TailOutcome> {
    let size = tail.size;
    let bytes = &tail.bytes;
    if size < MIN_SHARD_LEN {
        return Err(Error::corrupt(shard, Corruption::TooSmall { size }));
    }
    let blen = bytes.len() as u64;
    if blen < FOOTER_LEN || blen > size {
        return Err(Error::layout(shard, "the tail read returned too few bytes"));
    }
    let foot_at = bytes.len() - FOOTER_USIZE;
    let footer = Footer::decode(shard, &bytes[foot_at..], size)?;
    let tail_start = size - blen;
    let wanted = footer.index_offset..footer.metadata_offset + footer.metadata_len;
    let rel = |x: u64| usize::try_from(x - tail_start).unwrap_or(usize::MAX);
    if wanted.start < tail_start {
        // The footer bounds the sections inside the file: they end within the tail.
        let held = bytes.slice(..rel(wanted.end));
        return Ok(TailOutcome::NeedMore {
            footer,
            missing: wanted.start..tail_start,
            held,
        });
    }
    let sections = bytes.slice(rel(wanted.start)..rel(wanted.end));
    let header = (tail_start == 0).then(|| &bytes[..HEADER_USIZE]);
    complete(shard, footer, sections, header).map(TailOutcome::Done)
}

/// Validates index + metadata bytes (`sections`, read from `footer.index_offset`) and, when
/// available, the header.
pub(crate) fn complete(
    shard: &str,
    footer: Footer,
    sections: Bytes,
    header: Option<&[u8]>,
) -> Result<Layout> {
    if sections.len() as u64 != footer.index_len + footer.metadata_len {
        return Err(Error::layout(
            shard,
            "index and metadata read has the wrong length",
        ));
    }
    let split = usize::try_from(footer.index_len).unwrap_or(usize::MAX);
    let raw_index = sections.slice(..split);
    let meta = &sections[split..];
    if crc32c(&raw_index) != footer.index_crc {
        return Err(Error::corrupt(shard, Corruption::IndexChecksum));
    }
    if let Some(h) = header
        && (h[..8] != MAGIC || le_u16(h, 8) != footer.major)
    {
        return Err(Error::corrupt(shard, Corruption::BadHeader));
    }
    let index = Index::parse(shard, raw_index, footer.index_offset)?;
    let metadata = ShardMetadata::decode_section(shard, meta, &footer)?;
    // A stream's records are whole runs of elements, whoever reads them (a typed stream
    // reader checks again against its own element type).
    if let Some(width) = metadata.element.as_deref().and_then(element_width)
        && (0..index.len()).any(|i| {
            let r = index.range(i);
            !(r.end - r.start).is_multiple_of(width)
        })
    {
        return Err(Error::layout(
            shard,
            "a stream record's length is not a multiple of the element width",
        ));
    }
    Ok(Layout {
        shard: shard.to_owned(),
        footer,
        index,
        metadata,
    })
}

impl Layout {
    /// Refuses a shard that does not hold what the caller expects.
    pub(crate) fn expect(&self, expected: &Expected) -> Result<()> {
        let m = &self.metadata;
        let ok = match expected {
            Expected::Documents(f) => m.kind == KIND_DOCUMENTS && &m.format == f,
            Expected::Stream { element, .. } => {
                m.kind == KIND_STREAM && m.element.as_deref() == Some(*element)
            }
        };
        if !ok {
            return Err(Error::FormatMismatch {
                shard: self.shard.clone(),
                expected: expected.describe(),
                found: m.describe(),
            });
        }
        if let Expected::Stream { width, .. } = expected
            && !self.footer.data_len().is_multiple_of(*width)
        {
            return Err(Error::layout(
                &self.shard,
                "stream data length is not a multiple of the element width",
            ));
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.index.len()
    }

    #[inline]
    pub(crate) fn record_range(&self, i: u64) -> Result<Range<u64>> {
        if i >= self.len() {
            return Err(self.index_out_of_range(i));
        }
        Ok(self.index.range(i))
    }

    #[cold]
    #[inline(never)]
    fn index_out_of_range(&self, i: u64) -> Error {
        Error::IndexOutOfRange {
            index: i,
            len: self.len(),
        }
    }

    /// Checks record `i`'s bytes (length always; checksum when `verify`).
    pub(crate) fn check_record(&self, i: u64, bytes: &[u8], verify: bool) -> Result<()> {
        self.check_read(i, self.index.range(i), bytes, verify)
    }

    /// [`check_record`](Self::check_record) for bytes read at `r`, record `i`'s range (as
    /// [`record_range`](Self::record_range) gave it).
    #[inline]
    pub(crate) fn check_read(
        &self,
        i: u64,
        r: Range<u64>,
        bytes: &[u8],
        verify: bool,
    ) -> Result<()> {
        guideloom_io::check_len(&self.shard, r.start, r.end - r.start, bytes.len())?;
        if verify && crc32c(bytes) != self.index.crc(i) {
            return Err(self.record_checksum(i));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn record_checksum(&self, i: u64) -> Error {
        Error::corrupt(&self.shard, Corruption::RecordChecksum { index: i })
    }

    /// Plans `read_many`: the record ranges, the reads to ask the backend for, and, when a
    /// format-level policy is set, how the merged reads serve the records.
    pub(crate) fn plan_many(
        &self,
        indices: &[u64],
        policy: Option<CoalescePolicy>,
    ) -> Result<ManyPlan> {
        // Vectors at their final size: collecting through `Result` or a filter would grow
        // them by doubling (a third of a 64-record batch's instructions were the allocator).
        let mut ranges = Vec::with_capacity(indices.len());
        for &i in indices {
            ranges.push(self.record_range(i)?);
        }
        // Empty records need no I/O (and a zero-length range is not expressible in every
        // protocol, e.g. HTTP): only non-empty records are read; the others come back as
        // empty buffers.
        let Some(policy) = policy else {
            let mut reads = Vec::with_capacity(ranges.len());
            reads.extend(ranges.iter().filter(|r| r.start < r.end).cloned());
            return Ok(ManyPlan {
                ranges,
                reads,
                merged: None,
            });
        };
        let nonempty: Vec<usize> = (0..ranges.len())
            .filter(|&k| ranges[k].start < ranges[k].end)
            .collect();
        let to_plan: Vec<Range<u64>> = nonempty.iter().map(|&k| ranges[k].clone()).collect();
        let mut plan = coalesce::plan(&to_plan, policy);
        for m in &mut plan {
            for member in &mut m.members {
                *member = nonempty[*member];
            }
        }
        let reads = plan.iter().map(|m| m.range.clone()).collect();
        Ok(ManyPlan {
            ranges,
            reads,
            merged: Some(plan),
        })
    }

    /// Hands the buffers read for `plan` out as records (in the order asked) and checks them.
    pub(crate) fn finish_many(
        &self,
        indices: &[u64],
        plan: ManyPlan,
        bufs: Vec<Bytes>,
        verify: bool,
    ) -> Result<Vec<Bytes>> {
        if bufs.len() != plan.reads.len() {
            return Err(Error::layout(
                &self.shard,
                "batched read returned the wrong count",
            ));
        }
        let mut records = Vec::with_capacity(indices.len());
        match plan.merged {
            None => {
                // One buffer per non-empty record, in request order.
                let mut bufs = bufs.into_iter();
                for (&i, r) in indices.iter().zip(plan.ranges) {
                    let b = if r.start < r.end {
                        bufs.next().unwrap_or_default()
                    } else {
                        Bytes::new()
                    };
                    self.check_read(i, r, &b, verify)?;
                    records.push(b);
                }
            }
            Some(merged) => {
                let mut out = vec![None; plan.ranges.len()];
                for (m, buf) in merged.iter().zip(bufs) {
                    let want = m.range.end - m.range.start;
                    guideloom_io::check_len(&self.shard, m.range.start, want, buf.len())?;
                    coalesce::split_owned(m, buf, &plan.ranges, &mut out);
                }
                for (&i, b) in indices.iter().zip(out) {
                    let b = b.unwrap_or_default();
                    self.check_record(i, &b, verify)?;
                    records.push(b);
                }
            }
        }
        Ok(records)
    }

    /// The byte range covering records `first .. first + count` (all must exist).
    pub(crate) fn run_range(&self, first: u64, count: u64) -> Result<Range<u64>> {
        let last = first
            .checked_add(count)
            .filter(|&end| end <= self.len())
            .ok_or(Error::IndexOutOfRange {
                index: first.saturating_add(count),
                len: self.len(),
            })?;
        if count == 0 {
            return Ok(0..0);
        }
        Ok(self.index.range(first).start..self.index.range(last - 1).end)
    }

    /// Splits the buffer read for a run into zero-copy records and checks them.
    pub(crate) fn finish_run(
        &self,
        first: u64,
        count: u64,
        read: Range<u64>,
        buf: Bytes,
        verify: bool,
    ) -> Result<Vec<Bytes>> {
        guideloom_io::check_len(&self.shard, read.start, read.end - read.start, buf.len())?;
        let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        for i in first..first + count {
            let r = self.index.range(i);
            let rel = |x: u64| usize::try_from(x - read.start).unwrap_or(usize::MAX);
            let rec = buf.slice(rel(r.start)..rel(r.end));
            self.check_record(i, &rec, verify)?;
            out.push(rec);
        }
        Ok(out)
    }

    /// Plans a read of data bytes `[offset, offset+len)` (relative to the data region):
    /// the absolute range to read (widened to whole records when verifying) and the
    /// records it covers.
    pub(crate) fn plan_data(&self, offset: u64, len: u64, verify: bool) -> Result<DataPlan> {
        let data_len = self.footer.data_len();
        if offset.checked_add(len).is_none_or(|e| e > data_len) {
            return Err(Error::SliceOutOfRange {
                offset,
                len,
                total: data_len,
            });
        }
        let want = HEADER_LEN + offset..HEADER_LEN + offset + len;
        if !verify || len == 0 {
            return Ok(DataPlan {
                read: want.clone(),
                want,
                records: 0..0,
            });
        }
        let first = self.index.record_at(want.start);
        let last = self.index.record_at(want.end - 1);
        let read = self.index.range(first).start..self.index.range(last).end;
        Ok(DataPlan {
            read,
            want,
            records: first..last + 1,
        })
    }

    /// Checks and trims the buffer read for `plan`.
    pub(crate) fn finish_data(&self, plan: &DataPlan, buf: Bytes) -> Result<Bytes> {
        let DataPlan {
            read,
            want,
            records,
        } = plan;
        guideloom_io::check_len(&self.shard, read.start, read.end - read.start, buf.len())?;
        for i in records.clone() {
            let r = self.index.range(i);
            let rel = |x: u64| usize::try_from(x - read.start).unwrap_or(usize::MAX);
            let rec = buf.get(rel(r.start)..rel(r.end)).unwrap_or_default();
            self.check_record(i, rec, true)?;
        }
        if want == read {
            return Ok(buf); // moving a `Vec`-backed buffer is free; slicing it allocates
        }
        let rel = |x: u64| usize::try_from(x - read.start).unwrap_or(usize::MAX);
        Ok(buf.slice(rel(want.start)..rel(want.end)))
    }
}

/// A planned `read_many`.
#[derive(Debug)]
pub(crate) struct ManyPlan {
    /// The record range of every index asked.
    ranges: Vec<Range<u64>>,
    /// The ranges to hand the backend's `read_ranges`.
    pub(crate) reads: Vec<Range<u64>>,
    /// How merged reads serve the records, when merged at the format level.
    merged: Option<Vec<MergedRange>>,
}

/// A planned read of a byte span of the data region.
#[derive(Debug, Clone)]
pub(crate) struct DataPlan {
    pub(crate) read: Range<u64>,
    pub(crate) want: Range<u64>,
    pub(crate) records: Range<u64>,
}
