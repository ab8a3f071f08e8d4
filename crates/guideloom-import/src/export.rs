//! A snapshot's records out, as Parquet or JSON Lines.
//!
//! [`ExportBatches`] reads the records of a snapshot that declares a schema (or a range of
//! them) in batches of [`ExportOptions::batch_records`] (`Dataset::get_range`: one coalescing
//! read per shard touched) and decodes each batch into an Arrow [`RecordBatch`] with
//! `guideloom_arrow::BatchDecoder`, whose Arrow schema is `guideloom_arrow::to_arrow` of the
//! snapshot's (field metadata included: media types, tensor extensions). [`write_parquet`]
//! and [`write_jsonl`] write such batches to a file that appears under its name only when
//! complete (a temporary file beside it, renamed); an existing file is never replaced.
//!
//! Parquet: `parquet::arrow::ArrowWriter`, zstd-compressed, a row group cut every
//! [`ROW_GROUP_BYTES`] of buffered data (so memory stays bounded for large records), the
//! Arrow schema stored in the file (readers get back the exact types and field metadata).
//! JSON Lines: `arrow-json`'s `LineDelimitedWriter`, one object per record with every field
//! (`null` included); `binary` and `fixed_size_binary` values are **lowercase hex** strings
//! (`arrow-json`'s encoding: `"00ff"`), timestamps ISO 8601 text, NaN and infinities `null`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use guideloom::Dataset;
use guideloom_arrow::BatchDecoder;
use guideloom_format::schema::Schema;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};

/// The default records per batch.
pub const DEFAULT_BATCH_RECORDS: usize = 1024;
/// Buffered bytes after which a Parquet row group is written out.
pub const ROW_GROUP_BYTES: usize = 128 << 20;

/// What to export and how it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportOptions {
    /// Records per batch (at least 1). Default [`DEFAULT_BATCH_RECORDS`].
    pub batch_records: usize,
    /// The records to export (default: all); an end past the last record is clamped.
    pub range: Option<Range<u64>>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            batch_records: DEFAULT_BATCH_RECORDS,
            range: None,
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    /// Records written.
    pub records: u64,
    /// Bytes of the file written.
    pub bytes: u64,
}

/// The records of a snapshot as Arrow batches: an iterator of `Result<RecordBatch>`.
pub struct ExportBatches<'d> {
    dataset: &'d Dataset,
    decoder: BatchDecoder,
    schema: Schema,
    next: u64,
    end: u64,
    batch: u64,
}

impl std::fmt::Debug for ExportBatches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportBatches")
            .field("snapshot", &self.dataset.snapshot().id())
            .field("next", &self.next)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

/// The snapshot's name in messages.
fn snapshot_name(dataset: &Dataset) -> String {
    dataset.snapshot().id().to_string()
}

impl<'d> ExportBatches<'d> {
    /// The batches of `dataset`'s snapshot (or `options.range` of it). Refused when the
    /// snapshot declares no schema (its records are not rows of columns) or the range
    /// starts past its end.
    pub fn new(dataset: &'d Dataset, options: &ExportOptions) -> Result<Self> {
        let snapshot = snapshot_name(dataset);
        let unsupported =
            |detail: String| Error::unsupported(format!("snapshot {snapshot}"), detail);
        let schema = dataset.snapshot().manifest.schema.clone().ok_or_else(|| {
            unsupported(
                "declares no schema: only snapshots of schema-bound records (written by an \
                 import or with a schema) export as columns"
                    .to_owned(),
            )
        })?;
        let len = dataset.len();
        let range = options.range.clone().unwrap_or(0..len);
        if range.start > range.end || range.start > len {
            return Err(unsupported(format!(
                "records {}..{} are out of range: the snapshot has {len}",
                range.start, range.end
            )));
        }
        let decoder = BatchDecoder::new(&schema).map_err(|source| Error::Record {
            what: format!("snapshot {snapshot}"),
            record: range.start,
            source,
        })?;
        Ok(ExportBatches {
            dataset,
            decoder,
            schema,
            next: range.start,
            end: range.end.min(len),
            batch: options.batch_records.max(1) as u64,
        })
    }

    /// The Arrow schema of the batches (`to_arrow` of the snapshot's schema).
    pub fn arrow_schema(&self) -> SchemaRef {
        self.decoder.arrow_schema()
    }

    /// The snapshot's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Records not yet read.
    pub fn remaining(&self) -> u64 {
        self.end - self.next
    }

    fn read(&mut self) -> Result<RecordBatch> {
        let stop = (self.next + self.batch).min(self.end);
        let records = self
            .dataset
            .get_range(self.next..stop)
            .map_err(|e| Error::Read {
                snapshot: snapshot_name(self.dataset),
                source: Box::new(e.into()),
            })?;
        for (i, record) in records.iter().enumerate() {
            self.decoder.push(record).map_err(|source| Error::Record {
                what: format!("snapshot {}", snapshot_name(self.dataset)),
                record: self.next + i as u64,
                source,
            })?;
        }
        let first = self.next;
        self.next = stop;
        self.decoder.finish().map_err(|source| Error::Record {
            what: format!("snapshot {}", snapshot_name(self.dataset)),
            record: first,
            source,
        })
    }
}

impl Iterator for ExportBatches<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let batch = self.read();
        if batch.is_err() {
            self.next = self.end;
        }
        Some(batch)
    }
}

/// A file being written under a temporary name beside `out`.
struct Output {
    out: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl Output {
    /// Refuses an existing `out`; creates the temporary file in its directory.
    fn create(out: &Path) -> Result<Self> {
        if out.exists() {
            return Err(Error::io(
                out,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "already exists (an export never replaces a file)",
                ),
            ));
        }
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = out
            .file_name()
            .map_or_else(|| "export".into(), |n| n.to_string_lossy().into_owned());
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".partial");
        // A file like any other the user writes (0666 less the umask), not a private one.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder.tempfile_in(dir).map_err(|e| Error::io(out, e))?;
        Ok(Output {
            out: out.to_owned(),
            tmp,
        })
    }

    /// Syncs the file and gives it its name (refused if the name was taken meanwhile).
    fn persist(self) -> Result<u64> {
        let Output { out, tmp } = self;
        tmp.as_file().sync_all().map_err(|e| Error::io(&out, e))?;
        let bytes = tmp
            .as_file()
            .metadata()
            .map_err(|e| Error::io(&out, e))?
            .len();
        tmp.persist_noclobber(&out)
            .map_err(|e| Error::io(&out, e.error))?;
        Ok(bytes)
    }
}

/// Writes `batches` (of Arrow schema `schema`) as the Parquet file `out`. See the module
/// docs.
pub fn write_parquet<I>(out: &Path, schema: SchemaRef, batches: I) -> Result<Exported>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    let mut output = Output::create(out)?;
    let parquet = |e: parquet::errors::ParquetError| Error::corrupt(out, e.to_string());
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut writer =
        ArrowWriter::try_new(output.tmp.as_file_mut(), Arc::clone(&schema), Some(props))
            .map_err(parquet)?;
    let mut records = 0u64;
    for batch in batches {
        let batch = batch?;
        records += batch.num_rows() as u64;
        writer.write(&batch).map_err(parquet)?;
        if writer.in_progress_size() >= ROW_GROUP_BYTES {
            writer.flush().map_err(parquet)?;
        }
    }
    writer.close().map_err(parquet)?;
    let bytes = output.persist()?;
    Ok(Exported { records, bytes })
}

/// Writes `batches` as the JSON Lines file `out`: one object per record, every field
/// present. See the module docs for the encoding of bytes and timestamps.
pub fn write_jsonl<I>(out: &Path, batches: I) -> Result<Exported>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    let mut output = Output::create(out)?;
    let arrow = |source| Error::Arrow {
        path: out.to_owned(),
        source,
    };
    let mut records = 0u64;
    {
        let file: &mut File = output.tmp.as_file_mut();
        let mut writer = arrow_json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow_json::writer::LineDelimited>(BufWriter::new(file));
        for batch in batches {
            let batch = batch?;
            records += batch.num_rows() as u64;
            writer.write(&batch).map_err(arrow)?;
        }
        writer.finish().map_err(arrow)?;
        writer.into_inner().flush().map_err(|e| Error::io(out, e))?;
    }
    let bytes = output.persist()?;
    Ok(Exported { records, bytes })
}

/// Exports `dataset`'s snapshot (or `options.range` of it) as the Parquet file `out`.
pub fn export_parquet(dataset: &Dataset, out: &Path, options: &ExportOptions) -> Result<Exported> {
    let batches = ExportBatches::new(dataset, options)?;
    write_parquet(out, batches.arrow_schema(), batches)
}

/// Exports `dataset`'s snapshot (or `options.range` of it) as the JSON Lines file `out`.
pub fn export_jsonl(dataset: &Dataset, out: &Path, options: &ExportOptions) -> Result<Exported> {
    write_jsonl(out, ExportBatches::new(dataset, options)?)
}
