//! Arrow batches in, published shards out: [`ImportSink`] encodes each row as a CBOR record
//! of the import's schema and streams the records into shards of a dataset root; [`publish`]
//! makes the shards of one or many sinks a snapshot that declares the schema.
//!
//! The unit of fan-out is a sink: one per task (an input file, a range of row groups), each
//! under its own work id, so tasks never share a shard key. A separate [`publish`] gathers
//! their [`ShardRef`]s (in the order the records should be read) into one snapshot.
//!
//! ```no_run
//! use guideloom::{PublishMode, Publisher};
//! use guideloom_import::parquet::ParquetInput;
//! use guideloom_import::sink::{ImportOptions, ImportSink, publish};
//!
//! # fn main() -> guideloom_import::Result<()> {
//! let input = ParquetInput::open(&["train-0.parquet".into(), "train-1.parquet".into()])?;
//! let publisher = Publisher::open("./train").map_err(|e| guideloom_import::Error::Publish {
//!     root: "./train".into(),
//!     source: Box::new(e),
//! })?;
//! let mut shards = Vec::new();
//! for (n, (file, row_groups)) in input.units().into_iter().enumerate() {
//!     // One sink per unit (these could run on threads of their own).
//!     let options = ImportOptions::new(format!("import-{n}"));
//!     let mut sink = ImportSink::new(publisher.clone(), input.schema().clone(), options)?;
//!     sink.write(input.row_groups(file, row_groups)?)?;
//!     shards.extend(sink.finish().shards);
//! }
//! publish(&publisher, "train", "v1", shards, PublishMode::Full, input.schema().clone())?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use guideloom::io::bridge::Bridge;
use guideloom::{PublicationOptions, PublishMode, PublishRequest, Published, Publisher, ShardRef};
use guideloom_arrow::RowEncoder;
use guideloom_format::ShardMetadata;
use guideloom_format::schema::Schema;
use guideloom_format::spec::MAX_RECORDS;

use crate::error::{Error, Result};

/// The default payload of one shard: 64 MiB of records (as `guideloom write`'s).
pub const DEFAULT_SHARD_BYTES: u64 = 64 << 20;

/// The record format and kind of every imported shard: CBOR documents bound to a schema.
const FORMAT: &str = "cbor";
const KIND: &str = "documents";

/// Where an [`ImportSink`] writes and how it cuts shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// The work id: shards go to `shards/<work_id>/<n>.glm`, create-only. One per sink (per
    /// task of a fan-out).
    pub work_id: String,
    /// A shard ends before its payload (the records' bytes, without the index and footer)
    /// would pass this many bytes; a record larger than this is a shard of its own. Default
    /// [`DEFAULT_SHARD_BYTES`]. A shard also ends at the format's record limit (2^24).
    pub shard_bytes: u64,
    /// The number of the first shard (`n` of the first key). Default 0.
    pub first_shard: u64,
}

impl ImportOptions {
    /// Options for `work_id`: [`DEFAULT_SHARD_BYTES`], the first shard numbered 0.
    pub fn new(work_id: impl Into<String>) -> Self {
        ImportOptions {
            work_id: work_id.into(),
            shard_bytes: DEFAULT_SHARD_BYTES,
            first_shard: 0,
        }
    }

    /// Sets [`ImportOptions::shard_bytes`].
    #[must_use]
    pub fn shard_bytes(mut self, bytes: u64) -> Self {
        self.shard_bytes = bytes;
        self
    }

    /// Sets [`ImportOptions::first_shard`].
    #[must_use]
    pub fn first_shard(mut self, n: u64) -> Self {
        self.first_shard = n;
        self
    }
}

/// What one or more sinks wrote: the shards, in order, and the counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// The shards written, in record order: what [`publish`] takes.
    pub shards: Vec<ShardRef>,
    /// Records written.
    pub records: u64,
    /// Bytes of input the records came from, as the caller counted them
    /// ([`ImportSink::count_input`]; a sink cannot see its readers' files).
    pub input_bytes: u64,
    /// Bytes of the encoded records (CBOR), without shard overhead.
    pub payload_bytes: u64,
    /// Bytes of the shards written (their sizes in the root).
    pub shard_bytes: u64,
}

impl Imported {
    /// Appends `other`'s shards and adds its counts (gathering the sinks of a fan-out, in
    /// the order their records should be read).
    pub fn extend(&mut self, other: Imported) {
        self.shards.extend(other.shards);
        self.records += other.records;
        self.input_bytes += other.input_bytes;
        self.payload_bytes += other.payload_bytes;
        self.shard_bytes += other.shard_bytes;
    }
}

/// The guideloom schema of an input's Arrow schema (`guideloom_arrow::from_arrow`), or
/// [`Error::Unsupported`] naming the input and the field whose type guideloom does not store.
pub fn schema_of(input: &Path, arrow: &arrow_schema::Schema) -> Result<Schema> {
    guideloom_arrow::from_arrow(arrow).map_err(|e| arrow_error(input, e))
}

/// An error of `guideloom_arrow` about `input`'s schema or batches, as this crate's.
pub(crate) fn arrow_error(input: &Path, e: guideloom_arrow::Error) -> Error {
    match e {
        guideloom_arrow::Error::Unsupported { path, detail } => {
            Error::unsupported(input, format!("field {path:?}: {detail}"))
        }
        guideloom_arrow::Error::Arrow(source) => Error::Arrow {
            path: input.to_owned(),
            source,
        },
        other => Error::unsupported(input, other.to_string()),
    }
}

/// Writes Arrow batches as shards of one work id: every row encoded as a CBOR record of the
/// schema (`guideloom_arrow::RowEncoder`), streamed into the root (`Root::try_write_shard`),
/// and checked there against the schema the shard declares
/// (`ShardMetadata::new("cbor", "documents").with_schema(..)`).
///
/// Memory is the batch being encoded, one record and the open shard's index (12 bytes per
/// record) and write buffers, whatever the shard size: rows are encoded as the shard writer
/// pulls them, and batches are pulled from the caller's iterator one at a time.
#[derive(Debug)]
pub struct ImportSink {
    publisher: Publisher,
    schema: Schema,
    options: ImportOptions,
    /// The encoder of the last batch's Arrow schema (built again when it changes).
    encoder: Option<(SchemaRef, RowEncoder)>,
    next_shard: u64,
    imported: Imported,
}

impl ImportSink {
    /// A sink writing records of `schema` through `publisher`'s root (e.g. an input's
    /// [`schema_of`]). Nothing is written until [`write`](Self::write).
    pub fn new(publisher: Publisher, schema: Schema, options: ImportOptions) -> Result<Self> {
        schema.check().map_err(|e| {
            Error::unsupported(PathBuf::from(&options.work_id), format!("schema: {e}"))
        })?;
        Ok(ImportSink {
            publisher,
            schema,
            next_shard: options.first_shard,
            options,
            encoder: None,
            imported: Imported::default(),
        })
    }

    /// The schema every record matches.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// What was written so far.
    pub fn imported(&self) -> &Imported {
        &self.imported
    }

    /// Adds `bytes` to [`Imported::input_bytes`] (the bytes of input the batches came from).
    pub fn count_input(&mut self, bytes: u64) {
        self.imported.input_bytes += bytes;
    }

    /// Writes every row of `batches`, in order, into new shards of the work id (numbered on
    /// from the last one written). A shard ends before its payload would pass
    /// [`ImportOptions::shard_bytes`], and when `batches` ends: to pack several inputs into
    /// full shards, chain their batches into one call.
    ///
    /// A batch whose schema is not the sink's (after normalisation) is refused with
    /// [`Error::SchemaDiffers`], a row that does not encode with [`Error::Record`] (numbered
    /// among the sink's records), the reader's own errors are returned as they are; then the
    /// shard being written is left out (nothing appears under its key), the shards before it
    /// stay written and counted in [`imported`](Self::imported). Writing the same rows again
    /// under the same work id and numbers is accepted (create-only writes of identical bytes
    /// are idempotent); other bytes under a written key are a publication collision.
    pub fn write<I>(&mut self, batches: I) -> Result<()>
    where
        I: IntoIterator<Item = Result<RecordBatch>>,
    {
        let bridge = Bridge::shared().map_err(|e| Error::io("the async runtime", e))?;
        let meta = ShardMetadata::new(FORMAT, KIND).with_schema(self.schema.clone());
        let mut rows = Rows {
            batches: batches.into_iter(),
            batch: None,
            row: 0,
            carry: None,
            schema: &self.schema,
            encoder: &mut self.encoder,
            work_id: &self.options.work_id,
            record: self.imported.records,
        };
        let budget = self.options.shard_bytes.max(1);
        loop {
            let Some(first) = rows.next_record()? else {
                return Ok(());
            };
            let mut pending = Some(first);
            let (mut bytes, mut records) = (0u64, 0u64);
            let shard = std::iter::from_fn(|| {
                let record = match pending.take() {
                    Some(r) => r,
                    None => match rows.next_record() {
                        Ok(Some(r)) => r,
                        Ok(None) => return None,
                        Err(e) => return Some(Err(e)),
                    },
                };
                let len = record.len() as u64;
                if records > 0 && (bytes + len > budget || records >= MAX_RECORDS) {
                    rows.carry = Some(record);
                    return None;
                }
                bytes += len;
                records += 1;
                Some(Ok(record))
            });
            let root = self.publisher.root();
            let written = bridge
                .block_on(root.try_write_shard(
                    &self.options.work_id,
                    self.next_shard,
                    meta.clone(),
                    shard,
                ))
                .map_err(|e| Error::Publish {
                    root: root.store().describe(),
                    source: Box::new(e.into()),
                })??;
            self.next_shard += 1;
            self.imported.records += written.record_count;
            self.imported.payload_bytes += bytes;
            self.imported.shard_bytes += written.size;
            self.imported.shards.push(written);
        }
    }

    /// The shards written and the counts.
    pub fn finish(self) -> Imported {
        self.imported
    }
}

/// The records of a stream of batches, encoded one at a time.
struct Rows<'s, I> {
    batches: I,
    /// The prepared batch being encoded.
    batch: Option<RecordBatch>,
    /// Its next row.
    row: usize,
    /// The record that ended the last shard: the first of the next.
    carry: Option<Vec<u8>>,
    schema: &'s Schema,
    encoder: &'s mut Option<(SchemaRef, RowEncoder)>,
    work_id: &'s str,
    /// The number of the next record among the sink's.
    record: u64,
}

impl<I> Rows<'_, I>
where
    I: Iterator<Item = Result<RecordBatch>>,
{
    /// The next record, or `None` at the end of the batches.
    fn next_record(&mut self) -> Result<Option<Vec<u8>>> {
        if let Some(record) = self.carry.take() {
            return Ok(Some(record));
        }
        loop {
            if let Some(batch) = &self.batch
                && self.row < batch.num_rows()
            {
                let (_, encoder) = self.encoder.as_ref().ok_or_else(|| {
                    Error::unsupported(self.work_id, "no encoder for a prepared batch")
                })?;
                let mut out = Vec::new();
                encoder
                    .encode(batch, self.row, &mut out)
                    .map_err(|source| Error::Record {
                        what: format!("import {}", self.work_id),
                        record: self.record,
                        source,
                    })?;
                self.row += 1;
                self.record += 1;
                return Ok(Some(out));
            }
            let Some(next) = self.batches.next() else {
                self.batch = None;
                return Ok(None);
            };
            let next = next?;
            self.batch = Some(self.prepare(&next)?);
            self.row = 0;
        }
    }

    /// `batch` normalised by the encoder of its schema (built when the schema is new, and
    /// refused when it is not the sink's).
    fn prepare(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let arrow = batch.schema();
        let same = self
            .encoder
            .as_ref()
            .is_some_and(|(known, _)| Arc::ptr_eq(known, &arrow) || **known == *arrow);
        let name = Path::new(self.work_id);
        if !same {
            let encoder = RowEncoder::new(&arrow).map_err(|e| arrow_error(name, e))?;
            // Fields decide (types, nullability, field metadata); schema-level metadata is
            // the input's to carry (a Parquet reader's batches drop or add keys such as
            // `ARROW:schema` that the file's schema has), and the sink's is what is stored.
            if encoder.schema().fields != self.schema.fields {
                return Err(Error::SchemaDiffers {
                    path: name.to_owned(),
                    first: "the sink's schema".to_owned(),
                    detail: first_difference(self.schema, encoder.schema()),
                });
            }
            *self.encoder = Some((Arc::clone(&arrow), encoder));
        }
        let (_, encoder) = self
            .encoder
            .as_ref()
            .ok_or_else(|| Error::unsupported(name, "no encoder"))?;
        encoder.prepare(batch).map_err(|e| arrow_error(name, e))
    }
}

/// The first top-level field in which `got` differs from `want`, for messages.
pub(crate) fn first_difference(want: &Schema, got: &Schema) -> String {
    for (i, w) in want.fields.iter().enumerate() {
        match got.fields.get(i) {
            Some(g) if g == w => {}
            Some(g) => return format!("field {i} is `{g}`, expected `{w}`"),
            None => return format!("field {:?} (`{w}`) is missing", w.name),
        }
    }
    if let Some(extra) = got.fields.get(want.fields.len()) {
        return format!("extra field `{extra}`");
    }
    if got.metadata != want.metadata {
        return "the schema metadata differs".to_owned();
    }
    "the schemas differ".to_owned()
}

/// Publishes `shards` (of one or many sinks, in record order) as snapshot `snapshot_id` of
/// dataset `dataset_id` declaring `schema`: [`PublishMode::Full`] makes them the whole
/// snapshot, [`PublishMode::Append`] extends the latest snapshot with them. The schema must
/// evolve from the latest snapshot's (`Schema::evolves_from`): a changed column type is
/// refused with `guideloom::Error::Publish(publish::Error::SchemaChange { .. })` inside
/// [`Error::Publish`]. Idempotent, as every publication is: an identical request returns
/// the same snapshot.
pub fn publish(
    publisher: &Publisher,
    dataset_id: &str,
    snapshot_id: &str,
    shards: Vec<ShardRef>,
    mode: PublishMode,
    schema: Schema,
) -> Result<Published> {
    let request = PublishRequest {
        dataset_id: dataset_id.to_owned(),
        snapshot_id: snapshot_id.to_owned(),
        shards,
        mode,
        schema: Some(schema),
    };
    publisher
        .publish_request(&request, &PublicationOptions::default())
        .map_err(|e| Error::Publish {
            root: publisher.root().store().describe(),
            source: Box::new(e),
        })
}
