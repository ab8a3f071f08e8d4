//! Reading an ArrayRecord file through any `guideloom-io` reader, sync or async.
//!
//! The decisions (what to read, how to decode it) live in [`Core`], shared by both readers;
//! they differ only in how they call their reader.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_io::{AsyncReader, SyncReader};

use crate::cache::{ChunkCache, Records};
use crate::error::{Error, Result};
use crate::layout::{Layout, ReadOptions, TailOutcome, complete, parse_tail};

/// The IO-free part of a reader: layout, options, cache.
#[derive(Debug)]
struct Core {
    location: String,
    layout: Layout,
    options: ReadOptions,
    cache: ChunkCache,
}

/// The reads a batch needs: the chunks not cached, and each asked record's place.
struct Plan {
    places: Vec<(usize, usize)>,
    have: BTreeMap<usize, Records>,
    need: Vec<usize>,
    ranges: Vec<Range<u64>>,
}

impl Core {
    fn new(location: String, layout: Layout, options: &ReadOptions) -> Core {
        Core {
            location,
            layout,
            options: *options,
            cache: ChunkCache::new(options.cache_chunks(), options.cache_bytes()),
        }
    }

    fn check_len(&self, range: &Range<u64>, buf: &Bytes) -> Result<()> {
        guideloom_io::error::check_len(
            &self.location,
            range.start,
            range.end - range.start,
            buf.len(),
        )?;
        Ok(())
    }

    /// Decodes chunk `c` from the bytes of its range and caches it.
    fn decode(&self, c: usize, buf: &Bytes) -> Result<Records> {
        self.check_len(&self.layout.chunk_range(c), buf)?;
        let records = Arc::new(
            self.layout
                .decode_chunk(&self.location, c, buf, &self.options)?,
        );
        self.cache.insert(
            c,
            Arc::clone(&records),
            self.layout.chunks()[c].decoded_data_size,
        );
        Ok(records)
    }

    fn plan(&self, indices: &[u64]) -> Result<Plan> {
        let mut places = Vec::with_capacity(indices.len());
        let mut have = BTreeMap::new();
        let mut need = BTreeSet::new();
        for &i in indices {
            let (c, w) = self.layout.locate(&self.location, i)?;
            places.push((c, w));
            if !have.contains_key(&c) && !need.contains(&c) {
                match self.cache.get(c) {
                    Some(records) => {
                        have.insert(c, records);
                    }
                    None => {
                        need.insert(c);
                    }
                }
            }
        }
        let need: Vec<usize> = need.into_iter().collect();
        let ranges = need.iter().map(|&c| self.layout.chunk_range(c)).collect();
        Ok(Plan {
            places,
            have,
            need,
            ranges,
        })
    }

    fn finish(&self, mut plan: Plan, bufs: Vec<Bytes>) -> Result<Vec<Bytes>> {
        if bufs.len() != plan.need.len() {
            return Err(Error::corrupt(
                &self.location,
                0,
                format!(
                    "asked for {} ranges, the reader returned {}",
                    plan.need.len(),
                    bufs.len()
                ),
            ));
        }
        for (&c, buf) in plan.need.iter().zip(&bufs) {
            let records = self.decode(c, buf)?;
            plan.have.insert(c, records);
        }
        plan.places
            .iter()
            .map(|(c, w)| {
                plan.have
                    .get(c)
                    .and_then(|records| records.get(*w))
                    .cloned()
                    .ok_or_else(|| {
                        Error::corrupt(&self.location, 0, "record missing from its chunk")
                    })
            })
            .collect()
    }
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
/// the footer does not fit in [`ReadOptions::tail_len`]); [`get`](Self::get) one `read` of the
/// record's chunk, none when the chunk is cached; [`get_many`](Self::get_many) one
/// `read_ranges` for the chunks not cached (the backend merges neighbours).
///
/// ```
/// use guideloom_arrayrecord::{ArrayRecordReader, ArrayRecordWriter, ReadOptions};
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
/// let file = ArrayRecordReader::open(SeekIo::new().open(&path)?, &ReadOptions::default())?;
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
    pub fn open(reader: R, options: &ReadOptions) -> Result<Self> {
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
        let plan = self.core.plan(&[i])?;
        let bufs = match &plan.ranges[..] {
            [] => Vec::new(),
            [r] => vec![self.reader.read(r.start, r.end - r.start)?],
            _ => self.reader.read_ranges(&plan.ranges)?,
        };
        Ok(self.core.finish(plan, bufs)?.swap_remove(0))
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
    pub async fn open(reader: R, options: &ReadOptions) -> Result<Self> {
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
        let plan = self.core.plan(&[i])?;
        let bufs = match &plan.ranges[..] {
            [] => Vec::new(),
            [r] => vec![self.reader.read(r.start, r.end - r.start).await?],
            _ => self.reader.read_ranges(&plan.ranges).await?,
        };
        Ok(self.core.finish(plan, bufs)?.swap_remove(0))
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
}
