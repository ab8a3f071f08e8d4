//! A shard opened for reading, whatever its format ([`ShardFormat`]): guideloom's native
//! shards through guideloom-format's [`AsyncShard`], ArrayRecord files through
//! guideloom-arrayrecord's [`AsyncArrayRecordReader`]. The snapshot reader and whole-shard
//! staging read both through [`OpenedShard`], with the same costs (open = one tail read, sized from
//! the reference's record count to hold the whole index, record = one ranged read, batch = one
//! coalescing read) and errors typed per format
//! ([`Error::Shard`], [`Error::ArrayRecordShard`]), each carrying the shard's key.
//!
//! **Every open compares the object with its reference** ([`open_checked`]), on the bytes
//! the open reads anyway: size, record count, and a native shard's footer CRC32C
//! ([`Checksum::FooterCrc32c`]) or the tail CRC32C of an ArrayRecord file or an uploaded
//! shard ([`TailChecksum`]). A shard replaced by another object, of the same size or not,
//! is [`Error::Verification`] naming what differs, before any record of it is served.

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_arrayrecord::{AsyncArrayRecordReader, Layout};
use guideloom_format::spec::{FOOTER_LEN, INDEX_ENTRY_LEN};
use guideloom_format::{
    AsyncShard, Footer, Layout as FormatLayout, ReadOptions, Run, RunBudget, ShardMetadata,
    SyncShard, plan_runs,
};
use guideloom_io::{AsyncReader, AsyncReaderExt, SyncReader, Tail};

use crate::error::{Error, Result};
use crate::manifest::{
    Checksum, MAX_TAIL_CHECK_BYTES, ShardFormat, ShardRef, StreamRef, TailChecksum,
};

/// The record format of an ArrayRecord shard's records, in the vocabulary of
/// guideloom-format's metadata (`"raw"`: opaque bytes, e.g. serialized `tf.train.Example`s).
pub const ARRAY_RECORD_RECORD_FORMAT: &str = "raw";

/// A shard opened for reading, in the format its reference names.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenedShard {
    /// A native guideloom shard.
    Native(AsyncShard),
    /// An ArrayRecord file.
    ArrayRecord(AsyncArrayRecordReader),
}

impl OpenedShard {
    /// The shard's format.
    pub fn format(&self) -> ShardFormat {
        match self {
            OpenedShard::Native(_) => ShardFormat::Native,
            OpenedShard::ArrayRecord(_) => ShardFormat::ArrayRecord,
        }
    }

    /// Records in the shard.
    pub fn len(&self) -> u64 {
        match self {
            OpenedShard::Native(s) => s.len(),
            OpenedShard::ArrayRecord(f) => f.len(),
        }
    }

    /// `true` when the shard holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records' format name: the native shard's metadata (`"cbor"`, `"raw"`, ...), or
    /// [`ARRAY_RECORD_RECORD_FORMAT`] for an ArrayRecord file (its records are bytes).
    pub fn record_format(&self) -> &str {
        match self {
            OpenedShard::Native(s) => &s.metadata().format,
            OpenedShard::ArrayRecord(_) => ARRAY_RECORD_RECORD_FORMAT,
        }
    }

    /// The native shard, if it is one (metadata, index, per-record checksums).
    pub fn native(&self) -> Option<&AsyncShard> {
        match self {
            OpenedShard::Native(s) => Some(s),
            OpenedShard::ArrayRecord(_) => None,
        }
    }

    /// The ArrayRecord file, if it is one (its [`Layout`]: chunks, group size, writer options).
    pub fn array_record(&self) -> Option<&AsyncArrayRecordReader> {
        match self {
            OpenedShard::Native(_) => None,
            OpenedShard::ArrayRecord(f) => Some(f),
        }
    }

    /// Record `local` (one ranged read; an ArrayRecord chunk already cached costs none).
    pub(crate) async fn read(&self, key: &str, local: u64) -> Result<Bytes> {
        match self {
            OpenedShard::Native(s) => s.read(local).await.map_err(|e| Error::shard(key, e)),
            OpenedShard::ArrayRecord(f) => f
                .get(local)
                .await
                .map_err(|e| Error::array_record_shard(key, e)),
        }
    }

    /// The shard as a [`SyncShard`] reading on the calling thread, for a caller that may
    /// block it (a synchronous API): `Some` for a native shard whose reader reads without its
    /// executor (local files and mappings, [`AsyncShard::as_sync`]), `None` otherwise (an
    /// ArrayRecord file, a remote reader: then await the async reads). Borrows the shard:
    /// no copy, no allocation. Its errors are guideloom-format's; [`Error::shard`] names the
    /// key.
    #[inline]
    pub(crate) fn as_sync(&self) -> Option<SyncShard<&dyn SyncReader, &FormatLayout>> {
        match self {
            OpenedShard::Native(s) => s.as_sync(),
            OpenedShard::ArrayRecord(_) => None,
        }
    }

    /// Records `locals`, in the order given: one batched (coalescing) read.
    pub(crate) async fn read_many(&self, key: &str, locals: &[u64]) -> Result<Vec<Bytes>> {
        match self {
            OpenedShard::Native(s) => s.read_many(locals).await.map_err(|e| Error::shard(key, e)),
            OpenedShard::ArrayRecord(f) => f
                .get_many(locals)
                .await
                .map_err(|e| Error::array_record_shard(key, e)),
        }
    }

    /// The next read of `piece` (consecutive local records) within `budget`: for a native
    /// shard [`plan_runs`] over its index; for an ArrayRecord file whole chunks from the
    /// one holding `piece.first`: as many as end within `budget.max_bytes` of that chunk's
    /// first byte and hold at most `budget.max_records` records, but always the rest of the
    /// first chunk (a chunk is decoded whole, so a run never splits one except at the
    /// piece's ends).
    pub(crate) fn next_run(&self, piece: Run, budget: RunBudget) -> Run {
        let count = match self {
            OpenedShard::Native(s) => {
                return plan_runs(s.index(), piece, budget).next().unwrap_or(piece);
            }
            OpenedShard::ArrayRecord(f) => {
                array_record_run_len(f.layout(), piece.first, piece.first + piece.count, budget)
            }
        };
        Run { count, ..piece }
    }

    /// Records `first..first + count` in order: one read (for ArrayRecord, one
    /// `read_ranges` of the chunks they span, which the backend merges).
    pub(crate) async fn read_run(&self, key: &str, first: u64, count: u64) -> Result<Vec<Bytes>> {
        match self {
            OpenedShard::Native(s) => s
                .read_run(first, count)
                .await
                .map_err(|e| Error::shard(key, e)),
            // In order, without a list of indices: a chunk's records are counted against the
            // reader's limit before any list of them is made.
            OpenedShard::ArrayRecord(f) => f
                .get_range(first, count)
                .await
                .map_err(|e| Error::array_record_shard(key, e)),
        }
    }
}

/// How many records from `first` (before `end`) the next in-order read of an ArrayRecord
/// file covers (see [`OpenedShard::next_run`]). Past the file's records the whole rest is one
/// run, so reading it fails with the reader's out-of-range error instead of records going
/// missing.
fn array_record_run_len(layout: &Layout, first: u64, end: u64, budget: RunBudget) -> u64 {
    if first >= end {
        return 0;
    }
    let group = layout.group_size().max(1);
    let chunks = layout.chunks();
    let Some(c0) = usize::try_from(first / group)
        .ok()
        .filter(|&c| first < layout.len() && c < chunks.len())
    else {
        return end - first;
    };
    let limit = chunks[c0].offset.saturating_add(budget.max_bytes);
    // Chunk ends increase (the reader validated the footer's order).
    let by_bytes = chunks[c0..].partition_point(|c| c.end <= limit) as u64;
    // Whole chunks whose records from `first` stay within `max_records`.
    let into_first = first - c0 as u64 * group;
    let by_records = budget.max_records.saturating_add(into_first) / group;
    let whole = by_bytes.min(by_records).max(1);
    let records_end = (c0 as u64)
        .saturating_add(whole)
        .saturating_mul(group)
        .min(layout.len());
    (records_end - first).min(end - first)
}

/// Read options of the ArrayRecord shards a snapshot reader opens: guideloom-arrayrecord's
/// defaults with a smaller decoded-chunk cache (4 chunks, 4 MiB per opened shard instead of
/// 16 and 64 MiB), since a reader keeps every shard it opened: in-order runs read whole
/// chunks and need no cache, and it still serves neighbours in one group of random reads.
/// Its speculative tail is [`MAX_TAIL_CHECK_BYTES`] (256 KiB, guideloom-arrayrecord's
/// default), the bytes a [`TailChecksum`] of an ArrayRecord shard covers.
fn array_record_options() -> guideloom_arrayrecord::ArrayRecordReadOptions {
    guideloom_arrayrecord::ArrayRecordReadOptions::default()
        .with_tail_len(MAX_TAIL_CHECK_BYTES)
        .with_cache_chunks(4)
        .with_cache_bytes(4 << 20)
}

/// Opens a shard over `reader` with one tail read, in the format `reference` names, and
/// checks it against the reference: the object's size, the record count its footer gives,
/// and its footer or tail checksum ([`check_native`], [`check_tail`]). Shared by random
/// access (the snapshot reader) and whole-shard staging.
pub(crate) async fn open_checked(
    reader: Box<dyn AsyncReader>,
    reference: &ShardRef,
    options: &ReadOptions,
) -> Result<OpenedShard> {
    let key = &reference.key;
    let opened = match reference.format {
        ShardFormat::Native => {
            let shard = AsyncShard::open(reader, &tail_for(reference, options))
                .await
                .map_err(|e| Error::shard(key, e))?;
            let size = shard
                .reader()
                .size()
                .await
                .map_err(|e| Error::read(key, e))?;
            check_reference(reference, size, shard.len())?;
            check_native(reference, shard.footer())?;
            if let Some(stream) = &reference.stream {
                check_stream_shard(key, stream, shard.metadata(), shard.data_len())?;
            }
            OpenedShard::Native(shard)
        }
        ShardFormat::ArrayRecord => {
            let file = if reference.tail.is_some() {
                let (file, tail) = open_array_record_tail(reader, key).await?;
                check_reference(reference, file.layout().size(), file.len())?;
                check_tail(reference, &tail)?;
                file
            } else {
                let file = open_array_record(reader, key).await?;
                check_reference(reference, file.layout().size(), file.len())?;
                file
            };
            OpenedShard::ArrayRecord(file)
        }
    };
    Ok(opened)
}

/// Checks a native shard's `footer` against `reference`'s checksum: the footer's own
/// CRC32C against [`Checksum::FooterCrc32c`], or against the reference's [`TailChecksum`]
/// (a shard uploaded as bytes). A reference with neither (a SHA-256 only, written before
/// the tail checksum existed) is not checked here.
pub(crate) fn check_native(reference: &ShardRef, footer: &Footer) -> Result<()> {
    if let Some(Checksum::FooterCrc32c(want)) = reference.checksum {
        let got = footer.checksum();
        if got != want {
            return Err(Error::Verification {
                key: reference.key.clone(),
                what: "footer checksum",
                expected: format!("{want:08x}"),
                actual: format!("{got:08x}"),
            });
        }
    }
    if let Some(want) = &reference.tail {
        let got = TailChecksum::native(footer.checksum());
        if got != *want {
            return Err(tail_mismatch(reference, want, &got));
        }
    }
    Ok(())
}

/// Checks the last bytes of a shard read at its open (`tail`, the whole tail read: at
/// least what a [`TailChecksum`] of a valid reference covers) against `reference`'s tail
/// checksum, when it has one.
fn check_tail(reference: &ShardRef, tail: &Tail) -> Result<()> {
    let Some(want) = &reference.tail else {
        return Ok(());
    };
    let have = tail.bytes.len() as u64;
    let covered = if want.len <= have {
        tail.bytes
            .slice(usize::try_from(have - want.len).unwrap_or(0)..)
    } else {
        // Validated references cover at most what the open reads; an object smaller than
        // that failed its size check first.
        tail.bytes.clone()
    };
    compare_tail(reference, want, &covered)
}

fn compare_tail(reference: &ShardRef, want: &TailChecksum, covered: &[u8]) -> Result<()> {
    let got = TailChecksum::of(covered);
    if got != *want {
        return Err(tail_mismatch(reference, want, &got));
    }
    Ok(())
}

fn tail_mismatch(reference: &ShardRef, want: &TailChecksum, got: &TailChecksum) -> Error {
    Error::Verification {
        key: reference.key.clone(),
        what: "tail checksum",
        expected: want.to_string(),
        actual: got.to_string(),
    }
}

/// Checks what a shard's bytes say (its `size`, the `records` its footer counts) against
/// `reference`: a [`Error::Verification`] naming the first that differs.
pub(crate) fn check_reference(reference: &ShardRef, size: u64, records: u64) -> Result<()> {
    let key = &reference.key;
    if size != reference.size {
        return Err(Error::Verification {
            key: key.clone(),
            what: "size",
            expected: reference.size.to_string(),
            actual: size.to_string(),
        });
    }
    if records != reference.record_count {
        return Err(Error::Verification {
            key: key.clone(),
            what: "record count",
            expected: reference.record_count.to_string(),
            actual: records.to_string(),
        });
    }
    Ok(())
}

/// Metadata bytes [`tail_for`] allows beside a shard's index and footer (a shard's metadata is
/// typically under 200 bytes; more takes a second read).
const METADATA_ALLOWANCE: u64 = 4 << 10;

/// The largest first read [`tail_for`] makes: what a manifest that lies about a record count
/// can cost before its check fails (an index of about 5.6 million records).
const MAX_SIZED_TAIL: u64 = 64 << 20;

/// `options` with a speculative tail that holds `reference`'s whole index (12 bytes per
/// record the manifest names), its footer and [`METADATA_ALLOWANCE`], when that is more than
/// `options` reads: a shard whose index outgrows the default 64 KiB tail then opens with one
/// read instead of two (on a remote root, one request fewer per shard). Never more than
/// [`MAX_SIZED_TAIL`]; the reader caps the read at the object's size.
fn tail_for(reference: &ShardRef, options: &ReadOptions) -> ReadOptions {
    let wanted = reference
        .record_count
        .saturating_mul(INDEX_ENTRY_LEN)
        .saturating_add(FOOTER_LEN + METADATA_ALLOWANCE)
        .min(MAX_SIZED_TAIL);
    if wanted > options.tail_len() {
        options.with_speculative_tail(wanted)
    } else {
        *options
    }
}

/// Checks a stream shard against its reference's [`StreamRef`]: a stream of the element type
/// the manifest names, holding the element count it names.
pub(crate) fn check_stream_shard(
    key: &str,
    stream: &StreamRef,
    meta: &ShardMetadata,
    data_len: u64,
) -> Result<()> {
    let found = meta.describe();
    let wanted = format!("stream<{}>", stream.element);
    if found != wanted {
        return Err(Error::Verification {
            key: key.to_owned(),
            what: "stream element type",
            expected: wanted,
            actual: found,
        });
    }
    // The element name is one of the format's (the manifest and the metadata were validated).
    let width = guideloom_format::element_width(&stream.element).unwrap_or(1);
    let elements = data_len / width;
    if elements != stream.elements || !data_len.is_multiple_of(width) {
        return Err(Error::Verification {
            key: key.to_owned(),
            what: "stream elements",
            expected: stream.elements.to_string(),
            actual: format!("{} bytes of data", data_len),
        });
    }
    Ok(())
}

/// Opens the ArrayRecord file at `key` over `reader` (one tail read of 256 KiB, a second
/// only when the footer does not fit): postscript and footer hashes checked, the chunk table
/// validated.
pub(crate) async fn open_array_record(
    reader: Box<dyn AsyncReader>,
    key: &str,
) -> Result<AsyncArrayRecordReader> {
    AsyncArrayRecordReader::open(reader, &array_record_options())
        .await
        .map_err(|e| Error::array_record_shard(key, e))
}

/// [`open_array_record`], also returning its tail read (the file's last
/// `min(size, 256 KiB)` bytes), on which a [`TailChecksum`] is computed or compared: no
/// read of its own.
pub(crate) async fn open_array_record_tail(
    reader: Box<dyn AsyncReader>,
    key: &str,
) -> Result<(AsyncArrayRecordReader, Tail)> {
    let slot = Arc::new(Mutex::new(Capture::Waiting));
    let reader: Box<dyn AsyncReader> = Box::new(TailCapture {
        inner: reader,
        slot: Arc::clone(&slot),
    });
    let file = open_array_record(reader, key).await?;
    let captured = std::mem::replace(
        &mut *slot.lock().unwrap_or_else(PoisonError::into_inner),
        Capture::Done,
    );
    let tail = match captured {
        Capture::Got(tail) => tail,
        // guideloom-arrayrecord's open starts with a tail read; were that to change, the
        // check would compare an empty tail and fail loudly rather than pass.
        Capture::Waiting | Capture::Done => Tail {
            size: file.layout().size(),
            bytes: Bytes::new(),
        },
    };
    Ok((file, tail))
}

/// Where [`TailCapture`] keeps the first tail read.
#[derive(Debug)]
enum Capture {
    /// No tail read yet.
    Waiting,
    /// The first tail read, until the opener takes it.
    Got(Tail),
    /// Taken: later tail reads are not kept (an opened file holds no copy).
    Done,
}

/// A reader that keeps the result of its first `read_tail` (the ArrayRecord open's) for
/// the tail checksum, so the check costs no read of its own; every call is forwarded.
#[derive(Debug)]
struct TailCapture {
    inner: Box<dyn AsyncReader>,
    slot: Arc<Mutex<Capture>>,
}

impl TailCapture {
    /// Keeps `tail` if it is the first tail read.
    fn keep(&self, tail: &Tail) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*slot, Capture::Waiting) {
            *slot = Capture::Got(tail.clone());
        }
    }
}

#[async_trait]
impl AsyncReader for TailCapture {
    fn location(&self) -> &str {
        self.inner.location()
    }
    async fn size(&self) -> guideloom_io::Result<u64> {
        self.inner.size().await
    }
    async fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        self.inner.read(offset, len).await
    }
    async fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
        self.inner.read_ranges(ranges).await
    }
    async fn read_tail(&self, len: u64) -> guideloom_io::Result<Tail> {
        let tail = self.inner.read_tail(len).await?;
        self.keep(&tail);
        Ok(tail)
    }
    async fn close(&self) -> guideloom_io::Result<()> {
        self.inner.close().await
    }
    fn close_sync(&self) {
        self.inner.close_sync();
    }
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        self.inner.as_sync()?;
        Some(self)
    }
}

/// The synchronous view of a [`TailCapture`] (when its inner reader has one): the inner's
/// calls, the first tail read kept as the async one is.
impl SyncReader for TailCapture {
    fn location(&self) -> &str {
        self.inner.location()
    }
    fn size(&self) -> guideloom_io::Result<u64> {
        self.inner.sync_view()?.size()
    }
    fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        self.inner.sync_view()?.read(offset, len)
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
        self.inner.sync_view()?.read_ranges(ranges)
    }
    fn read_tail(&self, len: u64) -> guideloom_io::Result<Tail> {
        let tail = self.inner.sync_view()?.read_tail(len)?;
        self.keep(&tail);
        Ok(tail)
    }
    fn close(&self) -> guideloom_io::Result<()> {
        self.inner.sync_view()?.close()
    }
}

#[cfg(test)]
mod tests {
    use guideloom_arrayrecord::{ArrayRecordWriter, AsyncArrayRecordReader};
    use guideloom_format::RunBudget;
    use guideloom_io::{AsyncReader, Backend, PreadIo};

    use super::array_record_run_len;

    /// Runs over an ArrayRecord file take whole chunks within the byte budget, at least one
    /// record, at most `max_records`, never past the piece's end, and cover it exactly.
    #[tokio::test]
    async fn array_record_runs_cover_pieces_in_whole_chunks_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.array_record");
        let mut w =
            ArrayRecordWriter::create(&path, "group_size:4,uncompressed".parse().unwrap()).unwrap();
        for i in 0..50u32 {
            w.write(&[u8::try_from(i).unwrap(); 1000]).unwrap();
        }
        w.finish().unwrap();
        let reader: Box<dyn AsyncReader> = PreadIo::new().open_async(&path).await.unwrap();
        let file = AsyncArrayRecordReader::open(reader, &Default::default())
            .await
            .unwrap();
        let layout = file.layout();
        let chunk = layout.chunks()[0].end - layout.chunks()[0].offset;
        for budget in [
            RunBudget::new(0, 4096),
            RunBudget::new(chunk, 4096),
            RunBudget::new(3 * chunk + 1, 4096),
            RunBudget::new(1 << 20, 5),
            RunBudget::new(1 << 20, 2),
            RunBudget::new(1 << 20, 4096),
        ] {
            for (start, end) in [(0, 50), (3, 50), (5, 6), (10, 49)] {
                let mut first = start;
                while first < end {
                    let n = array_record_run_len(layout, first, end, budget);
                    let rest_of_chunk = 4 - first % 4;
                    assert!(n >= 1 && first + n <= end);
                    // Within the record budget, unless the first chunk's rest is larger.
                    assert!(n <= budget.max_records.max(rest_of_chunk));
                    // Never a split chunk but at the piece's end.
                    assert!((first + n).is_multiple_of(4) || first + n == end || first + n == 50);
                    let last_chunk = usize::try_from((first + n - 1) / 4).unwrap();
                    let first_chunk = usize::try_from(first / 4).unwrap();
                    let span =
                        layout.chunks()[last_chunk].end - layout.chunks()[first_chunk].offset;
                    assert!(span <= budget.max_bytes || last_chunk == first_chunk);
                    first += n;
                }
                assert_eq!(first, end);
            }
        }
        // Past the file's records: the rest as one run (reading it fails by index).
        assert_eq!(
            array_record_run_len(layout, 50, 60, RunBudget::default()),
            10
        );
        assert_eq!(array_record_run_len(layout, 7, 7, RunBudget::default()), 0);
    }
}
