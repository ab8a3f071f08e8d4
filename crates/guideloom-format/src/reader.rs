//! Reading one shard through any `guideloom-io` reader, sync or async.

use std::borrow::Borrow;
use std::ops::Range;

use bytes::Bytes;
use guideloom_io::{AsyncReader, SyncReader};

use crate::error::Result;
use crate::footer::Footer;
use crate::index::Index;
use crate::layout::{
    Expected, Layout, ReadOptions, TailOutcome, complete, join_sections, parse_tail,
};
use crate::metadata::ShardMetadata;

macro_rules! shard_accessors {
    () => {
        /// The shard as its backend names it (used in errors).
        pub fn name(&self) -> &str {
            &self.lay().shard
        }

        /// Number of records.
        pub fn len(&self) -> u64 {
            self.lay().len()
        }

        /// `true` when the shard has no records.
        pub fn is_empty(&self) -> bool {
            self.lay().len() == 0
        }

        /// The decoded metadata block.
        pub fn metadata(&self) -> &ShardMetadata {
            &self.lay().metadata
        }

        /// The decoded footer.
        pub fn footer(&self) -> &Footer {
            &self.lay().footer
        }

        /// The record index (record byte ranges and checksums), e.g. to plan in-order reads
        /// with [`plan_runs`](crate::plan_runs).
        pub fn index(&self) -> &Index {
            &self.lay().index
        }

        /// Bytes in the data region (all record payloads).
        pub fn data_len(&self) -> u64 {
            self.lay().footer.data_len()
        }

        /// Absolute byte range of record `i`, or [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
        pub fn record_range(&self, i: u64) -> Result<Range<u64>> {
            self.lay().record_range(i)
        }

        /// Refuses the shard with [`Error::FormatMismatch`](crate::Error::FormatMismatch) unless
        /// it holds what `expected` describes.
        pub fn expect(&self, expected: &Expected) -> Result<()> {
            self.lay().expect(expected)
        }

        /// The underlying reader.
        pub fn reader(&self) -> &R {
            &self.reader
        }
    };
}

/// One shard opened through a [`SyncReader`].
///
/// Opening costs one `read_tail` call (two when index + metadata exceed the speculative
/// tail); [`read`](SyncShard::read) costs one `read`; [`read_many`](SyncShard::read_many)
/// one `read_ranges` call with neighbours merged.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use guideloom_format::{ReadOptions, ShardMetadata, ShardWriter, SyncShard};
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("one.glm");
/// let mut w = ShardWriter::create(&path, ShardMetadata::new("raw", "documents"))?;
/// w.append(b"hello")?;
/// w.append(b"")?;
/// w.finish()?;
///
/// use guideloom_io::{Backend, SeekIo};
/// let reader = SeekIo::new().open(&path)?;
/// let shard = SyncShard::open(reader, &ReadOptions::default())?;
/// assert_eq!(shard.len(), 2);
/// assert_eq!(&shard.read(0)?[..], b"hello");
/// assert!(shard.read(1)?.is_empty());
/// # Ok(()) }
/// ```
///
/// The layout holder `L` is the [`Layout`] itself for a shard opened here, or a borrow of
/// another shard's for the synchronous view of an [`AsyncShard`]
/// ([`AsyncShard::as_sync`]): one copy of the read path for both.
#[derive(Debug)]
pub struct SyncShard<R = Box<dyn SyncReader>, L = Layout> {
    reader: R,
    layout: L,
    options: ReadOptions,
}

impl<R: SyncReader> SyncShard<R> {
    /// Opens a shard: one tail read, a second only for large index + metadata.
    pub fn open(reader: R, options: &ReadOptions) -> Result<Self> {
        let shard = reader.location().to_owned();
        let tail = reader.read_tail(options.tail_len())?;
        let layout = match parse_tail(&shard, &tail)? {
            TailOutcome::Done(layout) => layout,
            TailOutcome::NeedMore {
                footer,
                missing,
                held,
            } => {
                let bytes = reader.read(missing.start, missing.end - missing.start)?;
                complete(&shard, footer, join_sections(bytes, held), None)?
            }
        };
        Ok(SyncShard {
            reader,
            layout,
            options: *options,
        })
    }
}

impl<R: SyncReader, L: Borrow<Layout>> SyncShard<R, L> {
    #[inline]
    fn lay(&self) -> &Layout {
        self.layout.borrow()
    }

    shard_accessors!();

    /// Reads record `i` (one ranged read), checking its CRC32C unless disabled.
    // Inlined into its callers (the dataset's `get` above all). As a call, the facade
    // bench's random `Dataset::get` took 90 ns against its 46 ns ceiling, and as much as
    // the ceiling with each read made to wait for the one before (83 ns): consecutive
    // reads no longer overlapped their cache misses. The hot spot was the caller's load of
    // the `Result` returned through memory, most likely a store forward that failed and
    // waited for the store to retire. Inlined: 48 ns.
    #[inline]
    pub fn read(&self, i: u64) -> Result<Bytes> {
        let r = self.lay().record_range(i)?;
        let bytes = if r.is_empty() {
            Bytes::new() // no request for an empty record
        } else {
            self.reader.read(r.start, r.end - r.start)?
        };
        self.lay()
            .check_read(i, r, &bytes, self.options.verifies_records())?;
        Ok(bytes)
    }

    /// Reads many records (any order, repeats allowed) with one `read_ranges` call that
    /// merges neighbours; results are in the order asked.
    pub fn read_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let plan = self
            .lay()
            .plan_many(indices, self.options.format_coalesce())?;
        let bufs = if plan.reads.is_empty() {
            Vec::new() // nothing asked, or only empty records: no request
        } else {
            self.reader.read_ranges(&plan.reads)?
        };
        self.lay()
            .finish_many(indices, plan, bufs, self.options.verifies_records())
    }

    /// Reads the consecutive records `first .. first + count` with one read; the records
    /// are zero-copy slices of it (they share, and keep alive, one buffer).
    pub fn read_run(&self, first: u64, count: u64) -> Result<Vec<Bytes>> {
        let range = self.lay().run_range(first, count)?;
        let buf = if range.is_empty() {
            Bytes::new() // only empty records: no request
        } else {
            self.reader.read(range.start, range.end - range.start)?
        };
        self.lay()
            .finish_run(first, count, range, buf, self.options.verifies_records())
    }

    /// Checks record `i`'s bytes: length, and checksum when verifying.
    pub fn check_record(&self, i: u64, bytes: &Bytes) -> Result<()> {
        self.lay()
            .check_record(i, bytes, self.options.verifies_records())
    }

    /// Reads the bytes of records `first .. first + count` with one read, unchecked: the
    /// caller slices and checks each record (see [`check_record`](Self::check_record)).
    /// Returns the byte range read (absolute in the shard) and its bytes. guideloom-storage's
    /// in-order document iterator hands records out of one span as zero-copy slices.
    pub fn read_span(&self, first: u64, count: u64) -> Result<(Range<u64>, Bytes)> {
        let range = self.lay().run_range(first, count)?;
        let buf = if range.is_empty() {
            Bytes::new() // only empty records: no request
        } else {
            self.reader.read(range.start, range.end - range.start)?
        };
        guideloom_io::check_len(self.name(), range.start, range.end - range.start, buf.len())?;
        Ok((range, buf))
    }

    /// Reads `len` bytes at `offset` of the data region (one read). When verifying, the
    /// read is widened to the records it touches and each is checked.
    pub fn read_data(&self, offset: u64, len: u64) -> Result<Bytes> {
        let plan = self
            .lay()
            .plan_data(offset, len, self.options.verifies_records())?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let buf = self
            .reader
            .read(plan.read.start, plan.read.end - plan.read.start)?;
        self.lay().finish_data(&plan, buf)
    }
}

/// One shard opened through an [`AsyncReader`]; the same costs as [`SyncShard`].
#[derive(Debug)]
pub struct AsyncShard<R = Box<dyn AsyncReader>> {
    reader: R,
    layout: Layout,
    options: ReadOptions,
}

impl<R: AsyncReader> AsyncShard<R> {
    /// Opens a shard: one tail read, a second only for large index + metadata.
    pub async fn open(reader: R, options: &ReadOptions) -> Result<Self> {
        let shard = reader.location().to_owned();
        let tail = reader.read_tail(options.tail_len()).await?;
        let layout = match parse_tail(&shard, &tail)? {
            TailOutcome::Done(layout) => layout,
            TailOutcome::NeedMore {
                footer,
                missing,
                held,
            } => {
                let bytes = reader
                    .read(missing.start, missing.end - missing.start)
                    .await?;
                complete(&shard, footer, join_sections(bytes, held), None)?
            }
        };
        Ok(AsyncShard {
            reader,
            layout,
            options: *options,
        })
    }

    #[inline]
    fn lay(&self) -> &Layout {
        &self.layout
    }

    shard_accessors!();

    /// The shard as a [`SyncShard`] reading on the calling thread, for a caller that may
    /// block it (a synchronous API, never an executor's worker): `Some` when the reader has
    /// a synchronous view ([`AsyncReader::as_sync`]: a mapping, a local file), `None`
    /// otherwise (then await the async reads). The view borrows this shard's reader and
    /// layout (no copy, no allocation) and reads with its options: the same bytes, errors
    /// and requests as the async reads.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use guideloom_format::{AsyncShard, ReadOptions, ShardMetadata, ShardWriter};
    /// use guideloom_io::{Backend, PreadIo};
    /// # let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("one.glm");
    /// let mut w = ShardWriter::create(&path, ShardMetadata::new("raw", "documents"))?;
    /// w.append(b"hello")?;
    /// w.finish()?;
    ///
    /// let shard = AsyncShard::open(PreadIo::new().open_async(&path).await?, &ReadOptions::default()).await?;
    /// let here = shard.as_sync().expect("a local file reads on the calling thread");
    /// assert_eq!(&here.read(0)?[..], b"hello");
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn as_sync(&self) -> Option<SyncShard<&dyn SyncReader, &Layout>> {
        Some(SyncShard {
            reader: self.reader.as_sync()?,
            layout: &self.layout,
            options: self.options,
        })
    }

    /// Reads record `i` (one ranged read), checking its CRC32C unless disabled.
    pub async fn read(&self, i: u64) -> Result<Bytes> {
        let r = self.layout.record_range(i)?;
        let bytes = if r.is_empty() {
            Bytes::new() // no request for an empty record
        } else {
            self.reader.read(r.start, r.end - r.start).await?
        };
        self.layout
            .check_read(i, r, &bytes, self.options.verifies_records())?;
        Ok(bytes)
    }

    /// Reads many records with one `read_ranges` call; results in the order asked.
    pub async fn read_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let plan = self
            .layout
            .plan_many(indices, self.options.format_coalesce())?;
        let bufs = if plan.reads.is_empty() {
            Vec::new() // nothing asked, or only empty records: no request
        } else {
            self.reader.read_ranges(&plan.reads).await?
        };
        self.layout
            .finish_many(indices, plan, bufs, self.options.verifies_records())
    }

    /// Reads the consecutive records `first .. first + count` with one read (see
    /// [`SyncShard::read_run`]).
    pub async fn read_run(&self, first: u64, count: u64) -> Result<Vec<Bytes>> {
        let range = self.layout.run_range(first, count)?;
        let buf = if range.is_empty() {
            Bytes::new() // only empty records: no request
        } else {
            self.reader
                .read(range.start, range.end - range.start)
                .await?
        };
        self.layout
            .finish_run(first, count, range, buf, self.options.verifies_records())
    }

    /// Reads `len` bytes at `offset` of the data region (see [`SyncShard::read_data`]).
    pub async fn read_data(&self, offset: u64, len: u64) -> Result<Bytes> {
        let plan = self
            .layout
            .plan_data(offset, len, self.options.verifies_records())?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let buf = self
            .reader
            .read(plan.read.start, plan.read.end - plan.read.start)
            .await?;
        self.layout.finish_data(&plan, buf)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use guideloom_io::coalesce::CoalescePolicy;

    use super::*;
    use crate::{MemReader, ShardMetadata, ShardWriter};

    /// Records the ranges every `read_ranges` call asks for.
    #[derive(Debug)]
    struct Recording {
        inner: MemReader,
        asked: Mutex<Vec<Vec<Range<u64>>>>,
    }

    impl SyncReader for Recording {
        fn location(&self) -> &str {
            SyncReader::location(&self.inner)
        }
        fn size(&self) -> guideloom_io::Result<u64> {
            SyncReader::size(&self.inner)
        }
        fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
            SyncReader::read(&self.inner, offset, len)
        }
        fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
            self.asked.lock().unwrap().push(ranges.to_vec());
            SyncReader::read_ranges(&self.inner, ranges)
        }
        fn close(&self) -> guideloom_io::Result<()> {
            SyncReader::close(&self.inner)
        }
    }

    fn shard(options: &ReadOptions) -> (Vec<Vec<u8>>, SyncShard<Recording>) {
        let recs: Vec<Vec<u8>> = (0..20u8)
            .map(|i| vec![i; usize::from(i % 4) * 10])
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.glm");
        let mut w = ShardWriter::create(&path, ShardMetadata::new("raw", "documents")).unwrap();
        for r in &recs {
            w.append(r).unwrap();
        }
        w.finish().unwrap();
        let reader = Recording {
            inner: MemReader::new("s", std::fs::read(&path).unwrap()),
            asked: Mutex::new(Vec::new()),
        };
        (recs, SyncShard::open(reader, options).unwrap())
    }

    #[test]
    fn read_many_hands_record_ranges_to_the_backend_by_default() {
        let (recs, shard) = shard(&ReadOptions::default());
        let asked = [5, 4, 1, 5, 8, 9];
        let got = shard.read_many(&asked).unwrap();
        for (g, &i) in got.iter().zip(&asked) {
            assert_eq!(&g[..], &recs[usize::try_from(i).unwrap()][..]);
        }
        // Records 4 and 8 are empty: not asked for; the rest exactly as requested.
        let want: Vec<Range<u64>> = [5, 1, 5, 9]
            .iter()
            .map(|&i| shard.record_range(i).unwrap())
            .collect();
        assert_eq!(*shard.reader().asked.lock().unwrap(), vec![want]);
    }

    #[test]
    fn read_many_merges_at_the_format_level_when_a_policy_is_set() {
        let options = ReadOptions::default().with_coalesce(CoalescePolicy::default());
        let (recs, shard) = shard(&options);
        let asked = [5, 4, 1, 5, 8, 9];
        let got = shard.read_many(&asked).unwrap();
        for (g, &i) in got.iter().zip(&asked) {
            assert_eq!(&g[..], &recs[usize::try_from(i).unwrap()][..]);
        }
        // One merged range from record 1 to record 9.
        let want = shard.record_range(1).unwrap().start..shard.record_range(9).unwrap().end;
        assert_eq!(*shard.reader().asked.lock().unwrap(), vec![vec![want]]);
    }

    /// An async reader without a synchronous view (as a network reader), over bytes.
    #[derive(Debug)]
    struct Remote(MemReader);

    #[async_trait::async_trait]
    impl AsyncReader for Remote {
        fn location(&self) -> &str {
            AsyncReader::location(&self.0)
        }
        async fn size(&self) -> guideloom_io::Result<u64> {
            AsyncReader::size(&self.0).await
        }
        async fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
            AsyncReader::read(&self.0, offset, len).await
        }
        async fn close(&self) -> guideloom_io::Result<()> {
            AsyncReader::close(&self.0).await
        }
        fn close_sync(&self) {
            self.0.close_sync();
        }
    }

    /// The synchronous view of an async shard reads with the same bytes, errors and
    /// requests as its async reads; a reader without a view gives none.
    #[tokio::test(flavor = "current_thread")]
    async fn the_sync_view_of_an_async_shard_reads_as_it_does() {
        let (recs, sync) = shard(&ReadOptions::default());
        let bytes = guideloom_io::SyncReaderExt::read_all(&sync.reader().inner).unwrap();
        let counting = guideloom_io::CountingReader::new(MemReader::new("s", bytes.to_vec()));
        let shard = AsyncShard::open(counting, &ReadOptions::default())
            .await
            .unwrap();
        let here = shard.as_sync().expect("bytes in memory have a view");
        assert_eq!(here.len(), shard.len());
        assert_eq!(here.name(), shard.name());
        let stats = shard.reader().stats();
        stats.reset();
        let asked = [5, 4, 1, 5, 8, 9];
        for &i in &asked {
            assert_eq!(
                &here.read(i).unwrap()[..],
                &recs[usize::try_from(i).unwrap()][..]
            );
        }
        let many = here.read_many(&asked).unwrap();
        let sync_reads = stats.reset();
        for &i in &asked {
            shard.read(i).await.unwrap();
        }
        assert_eq!(shard.read_many(&asked).await.unwrap(), many);
        assert_eq!(
            sync_reads,
            stats.snapshot(),
            "the same requests on both paths"
        );
        // Errors: the same typed error, past the end.
        let (a, b) = (
            here.read(20).unwrap_err(),
            shard.read(20).await.unwrap_err(),
        );
        assert_eq!(a.to_string(), b.to_string());
        assert!(matches!(a, crate::Error::IndexOutOfRange { .. }), "{a:?}");

        let remote = AsyncShard::open(
            Remote(MemReader::new("s", bytes.to_vec())),
            &ReadOptions::default(),
        )
        .await
        .unwrap();
        assert!(remote.as_sync().is_none());
    }
}
