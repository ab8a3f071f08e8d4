//! Parquet files in, as Arrow batches streamed by row group.
//!
//! [`ParquetInput::open`] reads each file's footer (its metadata, no data) and refuses an
//! input whose schema is not the first file's once normalised (dictionary-encoded, large
//! and view columns count as their plain types: `guideloom_arrow::from_arrow`), or holds a
//! type guideloom does not store, naming the file and the field. The rows are then read with
//! the `parquet` crate's Arrow reader one row group at a time, in batches of
//! [`ParquetOptions::batch_rows`] rows: memory is one batch plus the column pages being
//! decoded, never a whole file.
//!
//! The units of fan-out are `(file, row-group range)` pairs ([`ParquetInput::units`],
//! [`ParquetInput::split_units`]); [`ParquetInput::row_groups`] reads one.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use guideloom_format::schema::Schema;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::errors::ParquetError;

use crate::error::{Error, Result};
use crate::sink::{first_difference, schema_of};

/// The default rows per batch: 1024, the `parquet` crate's own default (a batch of 1024
/// rows of 100 KiB images is 100 MiB; lower it for larger rows).
pub const DEFAULT_BATCH_ROWS: usize = 1024;

/// How Parquet files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetOptions {
    /// Rows per batch (at least 1). Default [`DEFAULT_BATCH_ROWS`].
    pub batch_rows: usize,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            batch_rows: DEFAULT_BATCH_ROWS,
        }
    }
}

/// One Parquet file: its path, size and metadata (footer).
#[derive(Debug, Clone)]
struct ParquetFile {
    path: PathBuf,
    size: u64,
    metadata: ArrowReaderMetadata,
}

/// One or many Parquet files of one schema, read as Arrow batches.
#[derive(Debug, Clone)]
pub struct ParquetInput {
    files: Vec<ParquetFile>,
    schema: Schema,
    options: ParquetOptions,
}

/// A `parquet` crate error about `path`: what the crate does not implement is
/// [`Error::Unsupported`], anything else (a bad footer, a truncated page) [`Error::Corrupt`].
fn parquet_error(path: &Path, e: ParquetError) -> Error {
    match e {
        ParquetError::NYI(what) => Error::unsupported(path, what),
        ParquetError::External(source) => match source.downcast::<std::io::Error>() {
            Ok(io) => Error::io(path, *io),
            Err(other) => Error::corrupt(path, other.to_string()),
        },
        other => Error::corrupt(path, other.to_string()),
    }
}

impl ParquetInput {
    /// Opens `paths` with the default options (see [`open_with`](Self::open_with)).
    pub fn open(paths: &[PathBuf]) -> Result<Self> {
        Self::open_with(paths, ParquetOptions::default())
    }

    /// Opens `paths` (at least one), reading each footer: refused, naming the file, when a
    /// file cannot be read, is not Parquet, holds a type guideloom does not store, or has
    /// another schema than the first file ([`Error::SchemaDiffers`]).
    pub fn open_with(paths: &[PathBuf], options: ParquetOptions) -> Result<Self> {
        let Some(first) = paths.first() else {
            return Err(Error::unsupported("", "no Parquet input given"));
        };
        let mut files = Vec::with_capacity(paths.len());
        let mut schema: Option<Schema> = None;
        for path in paths {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
            let metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
                .map_err(|e| parquet_error(path, e))?;
            let this = schema_of(path, metadata.schema())?;
            match &schema {
                None => schema = Some(this),
                // Fields decide; schema-level metadata (pandas' index ranges, a writer's
                // version) may differ between files: the first file's is kept.
                Some(want) if want.fields != this.fields => {
                    return Err(Error::SchemaDiffers {
                        path: path.clone(),
                        first: first.display().to_string(),
                        detail: first_difference(want, &this),
                    });
                }
                Some(_) => {}
            }
            files.push(ParquetFile {
                path: path.clone(),
                size,
                metadata,
            });
        }
        Ok(ParquetInput {
            files,
            schema: schema.unwrap_or_else(|| Schema::new(Vec::new())),
            options: ParquetOptions {
                batch_rows: options.batch_rows.max(1),
            },
        })
    }

    /// The schema of every row (the records' schema).
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The first file's Arrow schema, as the reader gives its batches (before
    /// normalisation).
    pub fn arrow_schema(&self) -> SchemaRef {
        self.files
            .first()
            .map(|f| f.metadata.schema().clone())
            .unwrap_or_else(|| std::sync::Arc::new(arrow_schema::Schema::empty()))
    }

    /// The files, in order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.path.as_path())
    }

    /// Rows in all files (from their footers).
    pub fn num_rows(&self) -> u64 {
        (0..self.files.len())
            .map(|f| self.rows(f, 0..self.row_group_count(f)))
            .sum()
    }

    /// Bytes of all files.
    pub fn input_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The number of row groups of file `file`.
    pub fn row_group_count(&self, file: usize) -> usize {
        self.files
            .get(file)
            .map_or(0, |f| f.metadata.metadata().num_row_groups())
    }

    /// Rows in row groups `range` of file `file` (from its footer).
    pub fn rows(&self, file: usize, range: Range<usize>) -> u64 {
        let Some(f) = self.files.get(file) else {
            return 0;
        };
        f.metadata.metadata().row_groups()[clamp(range, self.row_group_count(file))]
            .iter()
            .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
            .sum()
    }

    /// Compressed bytes of row groups `range` of file `file` (their column chunks): what
    /// reading them reads, besides the footer.
    pub fn bytes(&self, file: usize, range: Range<usize>) -> u64 {
        let Some(f) = self.files.get(file) else {
            return 0;
        };
        f.metadata.metadata().row_groups()[clamp(range, self.row_group_count(file))]
            .iter()
            .map(|g| u64::try_from(g.compressed_size()).unwrap_or(0))
            .sum()
    }

    /// The units of fan-out: one per file, all its row groups, in input order.
    pub fn units(&self) -> Vec<(usize, Range<usize>)> {
        (0..self.files.len())
            .map(|f| (f, 0..self.row_group_count(f)))
            .collect()
    }

    /// The units of fan-out cut finer: each file's row groups in consecutive ranges of about
    /// `rows` rows (a range ends once it holds at least `rows`; a row group is never split),
    /// in input order.
    pub fn split_units(&self, rows: u64) -> Vec<(usize, Range<usize>)> {
        let mut units = Vec::new();
        for f in 0..self.files.len() {
            let mut start = 0;
            let mut held = 0u64;
            for g in 0..self.row_group_count(f) {
                held += self.rows(f, g..g + 1);
                if held >= rows.max(1) {
                    units.push((f, start..g + 1));
                    start = g + 1;
                    held = 0;
                }
            }
            if start < self.row_group_count(f) || self.row_group_count(f) == 0 {
                units.push((f, start..self.row_group_count(f)));
            }
        }
        units
    }

    /// The rows of row groups `range` of file `file` (a unit), in batches of
    /// [`ParquetOptions::batch_rows`] rows, read one row group at a time. Batches carry
    /// the file's Arrow schema (dictionaries as stored; the sink normalises them).
    pub fn row_groups(&self, file: usize, range: Range<usize>) -> Result<RowGroupBatches> {
        let f = self.files.get(file).ok_or_else(|| {
            Error::unsupported(
                "",
                format!("no input file {file} ({} given)", self.files.len()),
            )
        })?;
        let count = self.row_group_count(file);
        if range.start > range.end || range.end > count {
            return Err(Error::unsupported(
                &f.path,
                format!("row groups {range:?} out of range: the file has {count}"),
            ));
        }
        let reader = File::open(&f.path).map_err(|e| Error::io(&f.path, e))?;
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, f.metadata.clone())
            .with_row_groups(range.collect())
            .with_batch_size(self.options.batch_rows)
            .build()
            .map_err(|e| parquet_error(&f.path, e))?;
        Ok(RowGroupBatches {
            path: f.path.clone(),
            reader,
        })
    }

    /// Every row of every file, in order: the units one after another.
    pub fn batches(&self) -> impl Iterator<Item = Result<RecordBatch>> + '_ {
        self.units()
            .into_iter()
            .flat_map(move |(file, range)| match self.row_groups(file, range) {
                Ok(batches) => Box::new(batches) as Box<dyn Iterator<Item = Result<RecordBatch>>>,
                Err(e) => Box::new(std::iter::once(Err(e))),
            })
    }
}

/// `range` within `0..len`.
fn clamp(range: Range<usize>, len: usize) -> Range<usize> {
    range.start.min(len)..range.end.min(len).max(range.start.min(len))
}

/// The batches of one unit of a [`ParquetInput`]: an iterator of `Result<RecordBatch>`.
#[derive(Debug)]
pub struct RowGroupBatches {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
}

impl RowGroupBatches {
    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Iterator for RowGroupBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next().map(|batch| {
            batch.map_err(|source| Error::Arrow {
                path: self.path.clone(),
                source,
            })
        })
    }
}
