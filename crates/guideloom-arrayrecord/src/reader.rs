//! Reading an ArrayRecord file through any `guideloom-io` reader, sync or async.
//!
//! The decisions (what to read, how to decode it) live in [`Core`], shared by both readers;
//! they differ only in how they call their reader.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_io::{AsyncReader, SyncReader};

use crate::cache::{ChunkCache, Records};
use crate::error::{Error, Result};
use crate::layout::{ArrayRecordReadOptions, ChunkInfo, Layout, TailOutcome, complete, parse_tail};

/// The IO-free part of a reader: layout, options, cache.
#[derive(Debug)]
struct Core {
    location: String,
    layout: Layout,
    options: ArrayRecordReadOptions,
    /// `None` when the options turn the cache off: no lock, no shared record lists.
    cache: Option<ChunkCache>,
}

/// What reading one record needs.
enum One {
    /// Nothing: the record, from the cache.
    Cached(Bytes),
    /// Chunk `chunk` (`info`), which holds the record at position `within`.
    Read {
        chunk: usize,
        info: ChunkInfo,
        within: usize,
    },
}

/// The reads a batch needs, and the records it already has.
struct Plan {
    /// The records asked for, in the order asked: those in chunks still to read are empty.
    out: Vec<Bytes>,
    /// `(chunk, position in the chunk, position in out)` of every record asked, by chunk.
    places: Vec<(usize, usize, usize)>,
    /// The runs of `places` whose chunk is to be read, one per chunk, in file order, with
    /// the chunk (copied: the footer's table may be out of the CPU caches by decode time).
    runs: Vec<(Range<usize>, ChunkInfo)>,
    /// The byte range of each run's chunk.
    ranges: Vec<Range<u64>>,
}

impl Core {
    fn new(location: String, layout: Layout, options: &ArrayRecordReadOptions) -> Core {
        let cache = (options.cache_chunks() > 0 && options.cache_bytes() > 0)
            .then(|| ChunkCache::new(options.cache_chunks(), options.cache_bytes()));
        Core {
            location,
            layout,
            options: *options,
            cache,
        }
    }

    fn check_len(&self, range: &Range<u64>, buf: &Bytes) -> Result<()> {
        guideloom_io::check_len(
            &self.location,
            range.start,
            range.end - range.start,
            buf.len(),
        )?;
        Ok(())
    }

    /// Record `within` of a decoded chunk.
    fn record(&self, records: &Records, within: usize) -> Result<Bytes> {
        records
            .get(within)
            .cloned()
            .ok_or_else(|| Error::corrupt(&self.location, 0, "record missing from its chunk"))
    }

    /// `true` when chunk `info`, decoded whole, fits the cache: then a read of it decodes it
    /// whole and caches it; otherwise it takes only the records asked for.
    fn caches(&self, info: &ChunkInfo) -> bool {
        self.cache.is_some()
            && info.list_cost(info.num_records) <= self.options.cache_bytes()
            && info.list_cost(info.num_records) <= self.options.max_chunk_bytes()
    }

    /// Decodes chunk `c` (`info`) whole from the bytes of its range and caches it.
    fn decode(&self, c: usize, info: &ChunkInfo, buf: &Bytes) -> Result<Records> {
        self.check_len(&info.range(), buf)?;
        let records = Arc::new(info.decode(&self.location, buf, &self.options)?);
        if let Some(cache) = &self.cache {
            cache.insert(c, Arc::clone(&records), info.list_cost(info.num_records));
        }
        Ok(records)
    }

    /// Record `within` of chunk `c` from the bytes of its range: decoded into a cached list
    /// of records when the chunk [fits the cache](Self::caches), else alone.
    fn decode_one(&self, c: usize, info: &ChunkInfo, within: usize, buf: &Bytes) -> Result<Bytes> {
        if self.caches(info) {
            let records = self.decode(c, info, buf)?;
            return self.record(&records, within);
        }
        self.check_len(&info.range(), buf)?;
        info.decode_record(&self.location, within, buf, &self.options)
    }

    /// Records `within` of chunk `c`, from the bytes of its range (cached whole when the
    /// chunk fits the cache).
    fn decode_range(
        &self,
        c: usize,
        info: &ChunkInfo,
        within: Range<usize>,
        buf: &Bytes,
    ) -> Result<Vec<Bytes>> {
        if self.caches(info) {
            let records = self.decode(c, info, buf)?;
            return records
                .get(within)
                .map(<[Bytes]>::to_vec)
                .ok_or_else(|| Error::corrupt(&self.location, 0, "record missing from its chunk"));
        }
        self.check_len(&info.range(), buf)?;
        info.decode_range(&self.location, within, buf, &self.options)
    }

    /// Chunk `c`, to be read for records `within` of it: refused unless its size and, when
    /// more than one record is taken out of a chunk that is not cached whole, the list of
    /// those records are within the limits.
    fn to_read(&self, c: usize, within: &Range<usize>) -> Result<ChunkInfo> {
        let info = self.layout.chunk(c);
        info.check_limits(&self.location, &self.options)?;
        if within.len() > 1 && !self.caches(&info) {
            info.check_list(&self.location, within.len() as u64, &self.options)?;
        }
        Ok(info)
    }

    fn cached(&self, c: usize) -> Option<Records> {
        self.cache.as_ref().and_then(|cache| cache.get(c))
    }

    fn one(&self, i: u64) -> Result<One> {
        let (chunk, within) = self.layout.locate(&self.location, i)?;
        if let Some(records) = self.cached(chunk) {
            return self.record(&records, within).map(One::Cached);
        }
        Ok(One::Read {
            chunk,
            info: self.to_read(chunk, &(within..within + 1))?,
            within,
        })
    }

    fn plan(&self, indices: &[u64]) -> Result<Plan> {
        let mut places = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            let (c, w) = self.layout.locate(&self.location, i)?;
            places.push((c, w, k));
        }
        places.sort_unstable();
        let mut out = vec![Bytes::new(); indices.len()];
        let mut runs = Vec::new();
        let mut ranges = Vec::new();
        let mut start = 0;
        while let Some(&(c, _, _)) = places.get(start) {
            let len = places[start..]
                .iter()
                .position(|p| p.0 != c)
                .unwrap_or(places.len() - start);
            let run = start..start + len;
            match self.cached(c) {
                Some(records) => {
                    for &(_, w, k) in &places[run] {
                        out[k] = self.record(&records, w)?;
                    }
                }
                None => {
                    // The positions asked of the chunk, ascending.
                    let within = places[run.start].1..places[run.end - 1].1 + 1;
                    let info = self.to_read(c, &within)?;
                    ranges.push(info.range());
                    runs.push((run, info));
                }
            }
            start += len;
        }
        Ok(Plan {
            out,
            places,
            runs,
            ranges,
        })
    }

    fn finish(&self, plan: Plan, bufs: Vec<Bytes>) -> Result<Vec<Bytes>> {
        check_count(&self.location, plan.runs.len(), bufs.len())?;
        let Plan {
            mut out,
            places,
            runs,
            ..
        } = plan;
        for ((run, info), buf) in runs.into_iter().zip(&bufs) {
            let run = &places[run];
            match run {
                [] => {}
                &[(c, w, k)] => out[k] = self.decode_one(c, &info, w, buf)?,
                [(c, first, _), .., (_, last, _)] => {
                    let records = self.decode_range(*c, &info, *first..*last + 1, buf)?;
                    for &(_, w, k) in run {
                        out[k] = records[w - first].clone();
                    }
                }
            }
        }
        Ok(out)
    }

    /// The chunks holding records `first..first + count`, each with the positions of those
    /// records in it and whether it is cached.
    fn plan_range(&self, first: u64, count: u64) -> Result<RangePlan> {
        let mut plan = RangePlan::default();
        if count == 0 {
            return Ok(plan);
        }
        let last = first
            .checked_add(count - 1)
            .ok_or_else(|| Error::IndexOutOfRange {
                location: self.location.clone(),
                index: u64::MAX,
                len: self.layout.len(),
            })?;
        let (c0, w0) = self.layout.locate(&self.location, first)?;
        let (c1, w1) = self.layout.locate(&self.location, last)?;
        // At most one piece per chunk of the file (its footer's table bounds them).
        for c in c0..=c1 {
            let from = if c == c0 { w0 } else { 0 };
            let to = if c == c1 {
                w1 + 1
            } else {
                usize::try_from(self.layout.chunk(c).num_records).unwrap_or(usize::MAX)
            };
            let within = from..to;
            match self.cached(c) {
                Some(records) => plan.pieces.push(Piece::Cached(records, within)),
                None => {
                    let info = self.to_read(c, &within)?;
                    plan.ranges.push(info.range());
                    plan.pieces.push(Piece::Read(c, info, within));
                }
            }
        }
        Ok(plan)
    }

    fn finish_range(&self, plan: RangePlan, bufs: Vec<Bytes>) -> Result<Vec<Bytes>> {
        check_count(&self.location, plan.ranges.len(), bufs.len())?;
        let mut bufs = bufs.iter();
        let mut out: Vec<Bytes> = Vec::new();
        for piece in plan.pieces {
            // The records of each piece are proved by its chunk before the output grows.
            let records = match piece {
                Piece::Cached(records, within) => {
                    records.get(within).map(<[Bytes]>::to_vec).ok_or_else(|| {
                        Error::corrupt(&self.location, 0, "record missing from its chunk")
                    })?
                }
                Piece::Read(c, info, within) => {
                    let buf = bufs.next().ok_or_else(|| {
                        Error::corrupt(&self.location, 0, "a range read returned too few buffers")
                    })?;
                    match within.len() {
                        1 => vec![self.decode_one(c, &info, within.start, buf)?],
                        _ => self.decode_range(c, &info, within, buf)?,
                    }
                }
            };
            if out.is_empty() {
                out = records;
            } else {
                out.extend(records);
            }
        }
        Ok(out)
    }
}

/// Refuses a reader that returned `got` buffers for `asked` ranges.
fn check_count(location: &str, asked: usize, got: usize) -> Result<()> {
    if asked != got {
        return Err(Error::corrupt(
            location,
            0,
            format!("asked for {asked} ranges, the reader returned {got}"),
        ));
    }
    Ok(())
}

/// The reads of [`ArrayRecordReader::get_range`].
#[derive(Default)]
struct RangePlan {
    /// In file order.
    pieces: Vec<Piece>,
    /// The byte range of each [`Piece::Read`], in order.
    ranges: Vec<Range<u64>>,
}

/// Records of one chunk in a range read: positions `within` of the chunk.
enum Piece {
    Cached(Records, Range<usize>),
    Read(usize, ChunkInfo, Range<usize>),
}

macro_rules! accessors {
    () => {
        /// The file as its reader names it (used in errors).
        pub fn location(&self) -> &str {
            &self.core.location
        }

        /// Number of records.
        pub fn len(&self) -> u64 {
            self.core.layout.len()
        }

        /// `true` when the file holds no records.
        pub fn is_empty(&self) -> bool {
            self.core.layout.is_empty()
        }

        /// What the footer says: chunks, group size, writer options.
        pub fn layout(&self) -> &Layout {
            &self.core.layout
        }

        /// The underlying reader.
        pub fn reader(&self) -> &R {
            &self.reader
        }
    };
}

/// An ArrayRecord file opened through a [`SyncReader`] (any guideloom backend).
///
/// Costs, in calls on the reader: [`open`](Self::open) one `read_tail` (plus one `read` when
/// the footer does not fit in [`ArrayRecordReadOptions::tail_len`]); [`get`](Self::get) one `read` of the
/// record's chunk, none when the chunk is cached; [`get_many`](Self::get_many) one
/// `read_ranges` for the chunks not cached (the backend merges neighbours).
///
/// ```
/// use guideloom_arrayrecord::{ArrayRecordReader, ArrayRecordWriter, ArrayRecordReadOptions};
/// use guideloom_io::{Backend, SeekIo};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("data.array_record");
/// let mut w = ArrayRecordWriter::create(&path, "group_size:2".parse()?)?;
/// for r in [&b"a"[..], b"bb", b"", b"dddd"] {
///     w.write(r)?;
/// }
/// w.finish()?;
///
/// let file = ArrayRecordReader::open(SeekIo::new().open(&path)?, &ArrayRecordReadOptions::default())?;
/// assert_eq!(file.len(), 4);
/// assert_eq!(&file.get(1)?[..], b"bb");
/// assert_eq!(file.get_many(&[3, 0])?, [&b"dddd"[..], b"a"]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ArrayRecordReader<R = Box<dyn SyncReader>> {
    reader: R,
    core: Core,
}

impl<R: SyncReader> ArrayRecordReader<R> {
    /// Opens a file: reads the postscript and the footer.
    pub fn open(reader: R, options: &ArrayRecordReadOptions) -> Result<Self> {
        let location = reader.location().to_owned();
        let tail = reader.read_tail(options.tail_len())?;
        let layout = match parse_tail(&location, &tail, options)? {
            TailOutcome::Done(layout) => layout,
            TailOutcome::NeedMore(pending, range) => {
                let bytes = reader.read(range.start, range.end - range.start)?;
                complete(&location, pending, range, bytes, options)?
            }
        };
        Ok(ArrayRecordReader {
            reader,
            core: Core::new(location, layout, options),
        })
    }

    accessors!();

    /// Reads record `i`.
    pub fn get(&self, i: u64) -> Result<Bytes> {
        match self.core.one(i)? {
            One::Cached(record) => Ok(record),
            One::Read {
                chunk,
                info,
                within,
            } => {
                let buf = self.reader.read(info.offset, info.end - info.offset)?;
                self.core.decode_one(chunk, &info, within, &buf)
            }
        }
    }

    /// Reads many records (any order, repeats allowed); results in the order asked.
    pub fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let plan = self.core.plan(indices)?;
        let bufs = if plan.ranges.is_empty() {
            Vec::new()
        } else {
            self.reader.read_ranges(&plan.ranges)?
        };
        self.core.finish(plan, bufs)
    }

    /// Reads records `first..first + count` in order: one `read_ranges` of the chunks not
    /// cached. Each chunk is decoded once, taking only the records in the range; the result
    /// grows as the chunks prove their records.
    pub fn get_range(&self, first: u64, count: u64) -> Result<Vec<Bytes>> {
        let plan = self.core.plan_range(first, count)?;
        let bufs = if plan.ranges.is_empty() {
            Vec::new()
        } else {
            self.reader.read_ranges(&plan.ranges)?
        };
        self.core.finish_range(plan, bufs)
    }
}

/// An ArrayRecord file opened through an [`AsyncReader`]; the same costs as
/// [`ArrayRecordReader`].
#[derive(Debug)]
pub struct AsyncArrayRecordReader<R = Box<dyn AsyncReader>> {
    reader: R,
    core: Core,
}

impl<R: AsyncReader> AsyncArrayRecordReader<R> {
    /// Opens a file: reads the postscript and the footer.
    pub async fn open(reader: R, options: &ArrayRecordReadOptions) -> Result<Self> {
        let location = reader.location().to_owned();
        let tail = reader.read_tail(options.tail_len()).await?;
        let layout = match parse_tail(&location, &tail, options)? {
            TailOutcome::Done(layout) => layout,
            TailOutcome::NeedMore(pending, range) => {
                let bytes = reader.read(range.start, range.end - range.start).await?;
                complete(&location, pending, range, bytes, options)?
            }
        };
        Ok(AsyncArrayRecordReader {
            reader,
            core: Core::new(location, layout, options),
        })
    }

    accessors!();

    /// Reads record `i`.
    pub async fn get(&self, i: u64) -> Result<Bytes> {
        match self.core.one(i)? {
            One::Cached(record) => Ok(record),
            One::Read {
                chunk,
                info,
                within,
            } => {
                let buf = self
                    .reader
                    .read(info.offset, info.end - info.offset)
                    .await?;
                self.core.decode_one(chunk, &info, within, &buf)
            }
        }
    }

    /// Reads many records (any order, repeats allowed); results in the order asked.
    pub async fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let plan = self.core.plan(indices)?;
        let bufs = if plan.ranges.is_empty() {
            Vec::new()
        } else {
            self.reader.read_ranges(&plan.ranges).await?
        };
        self.core.finish(plan, bufs)
    }

    /// Reads records `first..first + count` in order, as
    /// [`ArrayRecordReader::get_range`].
    pub async fn get_range(&self, first: u64, count: u64) -> Result<Vec<Bytes>> {
        let plan = self.core.plan_range(first, count)?;
        let bufs = if plan.ranges.is_empty() {
            Vec::new()
        } else {
            self.reader.read_ranges(&plan.ranges).await?
        };
        self.core.finish_range(plan, bufs)
    }
}
