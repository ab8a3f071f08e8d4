//! MosaicML Streaming (MDS) directories, as written by `streaming.MDSWriter`, read as Arrow
//! [`RecordBatch`]es, exactly.
//!
//! # Layout
//!
//! A dataset directory holds `index.json` (`{"version": 2, "shards": [...]}`), each shard entry
//! naming its columns (`column_names`, `column_encodings`, `column_sizes`), its sample count,
//! its file (`raw_data`) and, when compressed (`compression`: `br`, `bz2`, `gz`, `snappy` or
//! `zstd`, with an optional `:level`), its compressed file (`zip_data`). A shard file is
//! `[samples u32][samples + 1 offsets u32][the writer's config JSON][samples]`, where each
//! offset is from the start of the file, and a sample is a u32 size per variable-size column
//! followed by the columns' values in column order. All integers are little-endian.
//!
//! A directory without `index.json` whose sub-directories each have one (the partitions that
//! `streaming.base.util.merge_index` merges) is read as their concatenation, in name order; a
//! merged `index.json` (basenames `partition/shard.00000.mds`) is read as it is.
//!
//! # Columns
//!
//! Every MDS encoding of `streaming` 0.13 maps to one non-nullable Arrow field (MDS has no
//! nulls) whose metadata has the encoding under [`ENCODING_KEY`] and, for media, the MIME type
//! under [`MEDIA_KEY`](crate::MEDIA_KEY):
//!
//! | MDS encoding | Arrow type | media |
//! | --- | --- | --- |
//! | `bytes` | `Binary` | |
//! | `str` | `Utf8` (UTF-8 checked) | |
//! | `int`, `int64` | `Int64` | |
//! | `int8` ... `uint64`, `float16` ... `float64` | the primitive of that width | |
//! | `str_int` | `Int64` (parsed as Python's `int()`) | |
//! | `str_float` | `Float64` (parsed as Python's `float()`) | |
//! | `str_decimal` | `Utf8`: the stored text, checked against `Decimal()`'s grammar | [`DECIMAL_MEDIA`] |
//! | `json` | `Utf8`: the stored text (UTF-8 checked, not parsed) | `application/json` |
//! | `pkl` | `Binary`: the stored pickle | [`PICKLE_MEDIA`] |
//! | `jpeg`, `png` | `Binary`: the stored file | `image/jpeg`, `image/png` |
//! | `pil` | `Struct {width: UInt32, height: UInt32, mode: Utf8, data: Binary}` | [`PIL_MEDIA`] |
//! | `jpeg_array`, `jpegarray`, `list[jpeg]` | `List<Binary>` | items: `image/jpeg` |
//! | `list[png]` | `List<Binary>` | items: `image/png` |
//! | `list[pil]` | `List<Struct>`, the items as `pil` | items: [`PIL_MEDIA`] |
//! | `ndarray:DTYPE:D0,D1,...` | `FixedSizeList<DTYPE, D0*D1*...>`, `arrow.fixed_shape_tensor` | |
//! | `ndarray`, `ndarray:DTYPE` | `Struct {dtype: Utf8, shape: List<Int64>, data: Binary}` | [`NDARRAY_MEDIA`] |
//!
//! A `pil` value's `data` is PIL's `Image.tobytes()` (`Image.frombytes(mode, (width,
//! height), data)` rebuilds it); an `ndarray`'s `data` or a tensor's values are the C-order
//! little-endian elements, and `dtype` is NumPy's name (`uint8`, ..., `float64`).
//!
//! Values are checked as strictly as `streaming`'s writer writes them: a value that its reader
//! would refuse, a value or sample with bytes left over, a `pil` whose pixel bytes do not match
//! its mode and size (for the common modes), a list whose sizes do not add up, are
//! [`Error::Corrupt`], naming the shard file, the sample and the column. An `str_int` outside
//! Int64, an encoding not in the table, or a `list[...]` placeholder word other than 0 is
//! [`Error::Unsupported`]. Shard hashes are not verified.
//!
//! # Bounds
//!
//! `index.json` is read up to 64 MiB; every shard entry is checked (sizes, counts, paths
//! inside the directory, encodings against their sizes) before any shard is read. A shard is
//! held in memory whole (at most its declared raw size, under 4 GiB, however its compressed
//! form decompresses) while its batches are made; each batch holds at most `batch_rows` rows
//! and under 2 GiB of sample bytes.

mod column;
mod encoding;
mod index;
mod shard;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};

use self::column::{Column, ValueError};
use self::index::Index;
use self::shard::{Shard, split_sample};
use crate::{Error, Result};

/// Field-metadata key of the MDS encoding a column was stored with (`int`, `jpeg`,
/// `ndarray:float32:3,4`, ...).
pub const ENCODING_KEY: &str = "guideloom.mds.encoding";

/// Media type of an `str_decimal` column: the decimal's exact text.
pub const DECIMAL_MEDIA: &str = "text/x-decimal";

/// Media type of a `pkl` column: the stored pickle bytes.
pub const PICKLE_MEDIA: &str = "application/x-python-pickle";

/// Media type of a `pil` value: Struct {width, height, mode, data}, `data` being PIL's raw
/// `Image.tobytes()` for that mode (`Image.frombytes(mode, (width, height), data)` rebuilds it).
pub const PIL_MEDIA: &str = "application/x-mds-pil";

/// Media type of an `ndarray` column of no fixed shape: Struct {dtype, shape, data}, `data`
/// being the C-order little-endian element bytes.
pub const NDARRAY_MEDIA: &str = "application/x-ndarray";

/// The largest `index.json` read (64 MiB).
pub const INDEX_LIMIT: u64 = index::INDEX_LIMIT;

/// The most sample bytes in one batch: Arrow's Binary offsets are i32.
const BATCH_BYTES: usize = i32::MAX as usize;

/// An MDS dataset directory, its index parsed and checked, read shard by shard.
#[derive(Debug, Clone)]
pub struct MdsReader {
    dir: PathBuf,
    index: Index,
    schema: SchemaRef,
}

impl MdsReader {
    /// Parses `dir/index.json` (or the partitions' under `dir`) and builds the Arrow schema.
    ///
    /// Refuses an `index.json` over [`INDEX_LIMIT`], an entry whose sizes exceed the limits or
    /// whose counts do not add up, or a path outside `dir` ([`Error::Corrupt`]); an unknown
    /// encoding, compression, format or version, or shards of different columns
    /// ([`Error::Unsupported`]).
    pub fn open(dir: &Path) -> Result<Self> {
        let index = index::load(dir)?;
        let fields: Vec<_> = index
            .columns
            .iter()
            .map(|c| c.encoding.field(&c.name, &c.text))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        Ok(MdsReader {
            dir: dir.to_path_buf(),
            index,
            schema,
        })
    }

    /// The directory read.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The Arrow schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The number of samples of all shards.
    pub fn len(&self) -> u64 {
        self.index.samples
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.index.samples == 0
    }

    /// The number of shards (each can be read on its own, by [`MdsReader::shard_batches`]).
    pub fn shard_count(&self) -> usize {
        self.index.shards.len()
    }

    /// The number of samples of shard `shard` (0 past the last shard).
    pub fn shard_len(&self, shard: usize) -> u64 {
        self.index.shards.get(shard).map_or(0, |s| s.samples)
    }

    /// The samples of shard `shard`, as batches of at most `batch_rows` rows (at least 1).
    ///
    /// Reads the shard whole (decompressing it if only its compressed file is present) and
    /// checks its header; each batch is decoded as it is asked for. A shard index past the
    /// last is an [`Error::Io`] of kind `InvalidInput`.
    pub fn shard_batches(&self, shard: usize, batch_rows: usize) -> Result<ShardBatches<'_>> {
        let Some(spec) = self.index.shards.get(shard) else {
            let detail = format!("shard {shard} of {}", self.index.shards.len());
            let e = std::io::Error::new(std::io::ErrorKind::InvalidInput, detail);
            return Err(Error::io(&self.dir, e));
        };
        let data = Shard::load(&self.dir, spec, &self.index.columns)?;
        Ok(ShardBatches {
            reader: self,
            data,
            next: 0,
            batch_rows: batch_rows.max(1),
            failed: false,
        })
    }

    /// The batches of all shards in order; the first error ends them.
    pub fn batches(&self, batch_rows: usize) -> Batches<'_> {
        Batches {
            reader: self,
            batch_rows,
            next_shard: 0,
            current: None,
            failed: false,
        }
    }
}

/// The batches of one shard ([`MdsReader::shard_batches`]); the first error ends them.
pub struct ShardBatches<'a> {
    reader: &'a MdsReader,
    data: Shard,
    next: usize,
    batch_rows: usize,
    failed: bool,
}

impl fmt::Debug for ShardBatches<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardBatches")
            .field("shard", &self.data)
            .field("next", &self.next)
            .field("batch_rows", &self.batch_rows)
            .finish()
    }
}

impl ShardBatches<'_> {
    fn batch(&mut self) -> Result<RecordBatch> {
        let specs = &self.reader.index.columns;
        let path = &self.data.path;
        let mut columns: Vec<Column> = specs.iter().map(|c| Column::new(&c.encoding)).collect();
        let (mut sizes, mut values) = (Vec::new(), Vec::new());
        let (mut rows, mut bytes) = (0usize, 0usize);
        while rows < self.batch_rows && self.next < self.data.len() {
            let i = self.next;
            let sample = self.data.sample(i);
            if sample.len() > BATCH_BYTES {
                let d = format!(
                    "sample {i} of {} bytes, past an Arrow batch's 2 GiB",
                    sample.len()
                );
                return Err(Error::unsupported(path, d));
            }
            if rows > 0 && bytes + sample.len() > BATCH_BYTES {
                break;
            }
            split_sample(sample, specs, &mut sizes, &mut values)
                .map_err(|d| Error::corrupt(path, format!("sample {i}: {d}")))?;
            for ((column, spec), value) in columns.iter_mut().zip(specs).zip(&values) {
                column.push(value).map_err(|e| {
                    let at = format!("sample {i}, column {:?} ({})", spec.name, spec.text);
                    match e {
                        ValueError::Corrupt(d) => Error::corrupt(path, format!("{at}: {d}")),
                        ValueError::Unsupported(d) => {
                            Error::unsupported(path, format!("{at}: {d}"))
                        }
                    }
                })?;
            }
            rows += 1;
            bytes += sample.len();
            self.next += 1;
        }
        let arrow = |source| Error::Arrow {
            path: path.clone(),
            source,
        };
        let arrays = columns
            .iter_mut()
            .map(Column::finish)
            .collect::<Result<Vec<_>, _>>()
            .map_err(arrow)?;
        RecordBatch::try_new(self.reader.schema.clone(), arrays).map_err(arrow)
    }
}

impl Iterator for ShardBatches<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next >= self.data.len() {
            return None;
        }
        let batch = self.batch();
        self.failed = batch.is_err();
        Some(batch)
    }
}

/// The batches of all shards in order ([`MdsReader::batches`]); the first error ends them.
pub struct Batches<'a> {
    reader: &'a MdsReader,
    batch_rows: usize,
    next_shard: usize,
    current: Option<ShardBatches<'a>>,
    failed: bool,
}

impl fmt::Debug for Batches<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batches")
            .field("next_shard", &self.next_shard)
            .field("current", &self.current)
            .finish()
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed {
            if let Some(current) = &mut self.current {
                match current.next() {
                    Some(item) => {
                        self.failed = item.is_err();
                        return Some(item);
                    }
                    None => self.current = None,
                }
            }
            if self.next_shard >= self.reader.shard_count() {
                return None;
            }
            let shard = self.next_shard;
            self.next_shard += 1;
            match self.reader.shard_batches(shard, self.batch_rows) {
                Ok(batches) => self.current = Some(batches),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}
