//! Importers from Python: `Root.import_plan` / `Root.import_units` (Parquet, CSV, JSON Lines,
//! WebDataset, MDS, read in Rust by guideloom-import) and `Root.write_batches` (any Arrow
//! stream: a pyarrow Table or RecordBatchReader, a Hugging Face dataset's table, polars...).
//!
//! An import is split into *units* (a Parquet row-group range, a CSV/JSON Lines file, a tar, an
//! MDS shard); `import_units` writes some of them under one work id, with the GIL released,
//! and returns the shard references; `guideloom._imports` runs the units in this process or
//! on a Dask or Ray cluster and publishes once.

use std::path::PathBuf;

use arrow_array::RecordBatch;
use guideloom::Publisher;
use guideloom_import::mds::MdsReader;
use guideloom_import::parquet::{ParquetInput, ParquetOptions};
use guideloom_import::text::{TextFormat, TextInput, TextOptions};
use guideloom_import::webdataset::{WebDatasetOptions, WebDatasetReader};
use guideloom_import::{Error as ImportError, ImportOptions, ImportSink, Imported};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::{PyRecordBatchReader, PySchema};

use crate::errors::raise;
use crate::publish::ShardRef;
use crate::root::Root;

/// One opened input of any kind.
enum Input {
    Parquet(ParquetInput, Vec<(usize, std::ops::Range<usize>)>),
    Text(TextInput),
    WebDataset(WebDatasetReader),
    /// The reader, rows per batch, and each shard's share of the directory's bytes.
    Mds(MdsReader, usize, u64),
}

/// What an import reads: its kind, files and options.
struct Spec {
    kind: String,
    paths: Vec<PathBuf>,
    batch_rows: usize,
    text_fields: Vec<String>,
    /// Parquet: units of about this many rows (whole row groups) instead of one per file.
    unit_rows: Option<u64>,
    /// WebDataset: the fields (extensions), instead of the first sample's.
    fields: Option<Vec<String>>,
}

impl Spec {
    fn open(&self) -> Result<Input, ImportError> {
        let batch_rows = self.batch_rows.max(1);
        Ok(match self.kind.as_str() {
            "parquet" => {
                let input = ParquetInput::open_with(&self.paths, ParquetOptions { batch_rows })?;
                let units = match self.unit_rows {
                    Some(rows) => input.split_units(rows),
                    None => input.units(),
                };
                Input::Parquet(input, units)
            }
            "csv" | "jsonl" => {
                let format = if self.kind == "csv" {
                    TextFormat::Csv
                } else {
                    TextFormat::JsonLines
                };
                let options = TextOptions {
                    batch_rows,
                    ..TextOptions::default()
                };
                Input::Text(TextInput::open(format, &self.paths, options)?)
            }
            "webdataset" => {
                let options = WebDatasetOptions {
                    text_fields: self.text_fields.clone(),
                    batch_rows,
                    ..WebDatasetOptions::default()
                };
                Input::WebDataset(match &self.fields {
                    Some(fields) => WebDatasetReader::with_fields(&self.paths, fields, options)?,
                    None => WebDatasetReader::open(&self.paths, options)?,
                })
            }
            "mds" => {
                let [dir] = self.paths.as_slice() else {
                    return Err(ImportError::unsupported(
                        "",
                        "an MDS import reads one directory",
                    ));
                };
                let reader = MdsReader::open(dir)?;
                // Listed once: a unit's input bytes are its share of the directory.
                let total: u64 = std::fs::read_dir(dir)
                    .map(|d| {
                        d.flatten()
                            .filter_map(|e| e.metadata().ok())
                            .map(|m| m.len())
                            .sum()
                    })
                    .unwrap_or(0);
                let share = total / reader.shard_count().max(1) as u64;
                Input::Mds(reader, batch_rows, share)
            }
            other => {
                return Err(ImportError::unsupported(
                    other,
                    "not an input kind (parquet, csv, jsonl, webdataset, mds)",
                ));
            }
        })
    }
}

impl Input {
    fn schema(&self) -> Result<guideloom::format::schema::Schema, ImportError> {
        match self {
            Input::Parquet(p, _) => Ok(p.schema().clone()),
            Input::Text(t) => Ok(t.schema().clone()),
            Input::WebDataset(w) => guideloom_import::sink::schema_of(&w.tars()[0], &w.schema()),
            Input::Mds(m, _, _) => guideloom_import::sink::schema_of(m.dir(), &m.schema()),
        }
    }

    fn units(&self) -> usize {
        match self {
            Input::Parquet(_, units) => units.len(),
            Input::Text(t) => t.paths().len(),
            Input::WebDataset(w) => w.tars().len(),
            Input::Mds(m, _, _) => m.shard_count(),
        }
    }

    /// Bytes of input of unit `unit` (for the summary's MB/s).
    fn unit_bytes(&self, unit: usize) -> u64 {
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        match self {
            Input::Parquet(p, units) => p.bytes(units[unit].0, units[unit].1.clone()),
            Input::Text(t) => size(&t.paths()[unit]),
            Input::WebDataset(w) => size(&w.tars()[unit]),
            Input::Mds(_, _, share) => *share,
        }
    }

    fn write_unit(&self, sink: &mut ImportSink, unit: usize) -> Result<(), ImportError> {
        if unit >= self.units() {
            return Err(ImportError::unsupported(
                "",
                format!("no unit {unit} ({} in this import)", self.units()),
            ));
        }
        sink.count_input(self.unit_bytes(unit));
        match self {
            Input::Parquet(p, units) => {
                let (file, range) = units[unit].clone();
                sink.write(p.row_groups(file, range)?)
            }
            Input::Text(t) => sink.write(t.file_batches(unit)?),
            Input::WebDataset(w) => sink.write(w.tar_batches(unit)?),
            Input::Mds(m, rows, _) => sink.write(m.shard_batches(unit, *rows)?),
        }
    }
}

/// The Python exception of an import error: the publish errors by their kind (as every
/// root error), the others by what went wrong with the input (the message names it).
fn import_error(e: ImportError) -> PyErr {
    let class = match &e {
        ImportError::Publish { .. } => {
            let ImportError::Publish { root, source } = e else {
                unreachable!()
            };
            return crate::errors::Error::Guideloom(*source)
                .in_root(root)
                .into();
        }
        ImportError::Io { .. } => "StorageError",
        ImportError::Corrupt { .. } | ImportError::Parse { .. } => "CorruptShardError",
        ImportError::Unsupported { .. } => "UnsupportedError",
        ImportError::SchemaDiffers { .. } => "SchemaError",
        _ => "GuideloomError",
    };
    raise(class, e.to_string())
}

/// A dict of what a sink wrote (shards, counts).
fn summary<'py>(py: Python<'py>, imported: Imported) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let shards: Vec<ShardRef> = imported.shards.into_iter().map(ShardRef::from).collect();
    out.set_item("shards", shards)?;
    out.set_item("records", imported.records)?;
    out.set_item("input_bytes", imported.input_bytes)?;
    out.set_item("payload_bytes", imported.payload_bytes)?;
    out.set_item("shard_bytes", imported.shard_bytes)?;
    Ok(out)
}

fn sink_options(work_id: String, shard_bytes: Option<u64>, first_shard: u64) -> ImportOptions {
    let options = ImportOptions::new(work_id).first_shard(first_shard);
    match shard_bytes {
        Some(b) => options.shard_bytes(b),
        None => options,
    }
}

#[pymethods]
impl Root {
    /// The plan of an import of `kind` (`"parquet"`, `"csv"`, `"jsonl"`, `"webdataset"`,
    /// `"mds"`) of `paths`: `(schema, units, input_bytes)` — the `pyarrow.Schema` the records
    /// will have, how many units the input splits into (row-group ranges, files, tars, MDS
    /// shards), and its size. Reads only the inputs' metadata.
    #[pyo3(signature = (kind, paths, *, batch_rows = 1024, text_fields = None, unit_rows = None, fields = None))]
    #[allow(clippy::too_many_arguments)]
    fn import_plan<'py>(
        &self,
        py: Python<'py>,
        kind: String,
        paths: Vec<PathBuf>,
        batch_rows: usize,
        text_fields: Option<Vec<String>>,
        unit_rows: Option<u64>,
        fields: Option<Vec<String>>,
    ) -> PyResult<(Bound<'py, PyAny>, usize, u64)> {
        let spec = Spec {
            kind,
            paths,
            batch_rows,
            text_fields: text_fields.unwrap_or_default(),
            unit_rows,
            fields,
        };
        let (schema, units, bytes) = py
            .detach(|| {
                let input = spec.open()?;
                let schema = guideloom_arrow::to_arrow(&input.schema()?);
                let bytes = (0..input.units()).map(|u| input.unit_bytes(u)).sum();
                Ok::<_, ImportError>((schema, input.units(), bytes))
            })
            .map_err(import_error)?;
        Ok((
            PySchema::new(std::sync::Arc::new(schema)).into_pyarrow(py)?,
            units,
            bytes,
        ))
    }

    /// Writes units `units` (default: all) of the import of `kind` of `paths` as shards of
    /// work id `work_id` (numbered from `first_shard`, cut at `shard_bytes` of records), with
    /// the GIL released. Returns `{"shards", "records", "input_bytes", "payload_bytes",
    /// "shard_bytes"}`; publish the shards with `publish(..., schema=plan's schema)`.
    #[pyo3(signature = (kind, paths, *, work_id, units = None, batch_rows = 1024, shard_bytes = None, first_shard = 0, text_fields = None, unit_rows = None, fields = None))]
    #[allow(clippy::too_many_arguments)]
    fn import_units<'py>(
        &self,
        py: Python<'py>,
        kind: String,
        paths: Vec<PathBuf>,
        work_id: String,
        units: Option<Vec<usize>>,
        batch_rows: usize,
        shard_bytes: Option<u64>,
        first_shard: u64,
        text_fields: Option<Vec<String>>,
        unit_rows: Option<u64>,
        fields: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let spec = Spec {
            kind,
            paths,
            batch_rows,
            text_fields: text_fields.unwrap_or_default(),
            unit_rows,
            fields,
        };
        let publisher = Publisher::from_root(self.current()?);
        let imported = py
            .detach(move || {
                let input = spec.open()?;
                let mut sink = ImportSink::new(
                    publisher,
                    input.schema()?,
                    sink_options(work_id, shard_bytes, first_shard),
                )?;
                let units = units.unwrap_or_else(|| (0..input.units()).collect());
                for unit in units {
                    input.write_unit(&mut sink, unit)?;
                }
                Ok::<_, ImportError>(sink.finish())
            })
            .map_err(import_error)?;
        summary(py, imported)
    }

    /// Writes the rows of `data` (anything with `__arrow_c_stream__`: a pyarrow Table or
    /// RecordBatchReader, ...) as shards of `work_id`; returns the summary of `import_units`
    /// and the stored schema under `"schema"`.
    #[pyo3(signature = (data, *, work_id, shard_bytes = None, first_shard = 0))]
    fn write_batches<'py>(
        &self,
        py: Python<'py>,
        data: PyRecordBatchReader,
        work_id: String,
        shard_bytes: Option<u64>,
        first_shard: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let reader = data.into_reader()?;
        let arrow = reader.schema();
        let schema =
            guideloom_arrow::from_arrow(&arrow).map_err(|e| raise("SchemaError", e.to_string()))?;
        let stored = guideloom_arrow::to_arrow(&schema);
        let publisher = Publisher::from_root(self.current()?);
        let imported = py
            .detach(move || {
                let mut sink = ImportSink::new(
                    publisher,
                    schema,
                    sink_options(work_id, shard_bytes, first_shard),
                )?;
                let batches = reader.map(|b: Result<RecordBatch, arrow_schema::ArrowError>| {
                    b.map_err(|source| ImportError::Arrow {
                        path: PathBuf::from("<arrow stream>"),
                        source,
                    })
                });
                sink.write(batches)?;
                Ok::<_, ImportError>(sink.finish())
            })
            .map_err(import_error)?;
        let out = summary(py, imported)?;
        out.set_item(
            "schema",
            PySchema::new(std::sync::Arc::new(stored)).into_pyarrow(py)?,
        )?;
        Ok(out)
    }
}
