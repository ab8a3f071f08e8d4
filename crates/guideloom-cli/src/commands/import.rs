//! `guideloom import`: Parquet, CSV, JSON Lines, MDS or WebDataset files in, one published
//! snapshot of schema-bound records out (guideloom-import's readers and `ImportSink`).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow_array::RecordBatch;
use guideloom::{PublishMode, PublishOutcome, Publisher};
use guideloom_format::schema::Schema;
use guideloom_import::mds::MdsReader;
use guideloom_import::parquet::{ParquetInput, ParquetOptions};
use guideloom_import::sink::{ImportOptions, ImportSink, Imported, publish, schema_of};
use guideloom_import::text::{TextFormat, TextInput, TextOptions};
use guideloom_import::webdataset::{WebDatasetOptions, WebDatasetReader};
use indicatif::ProgressBar;
use serde_json::json;

use clap::ValueEnum;

use crate::cli::{Global, ImportArgs, ImportFormat, ImportMode};
use crate::commands::write::{Start, check_work_id};
use crate::error::{CliError, Result};
use crate::output;
use crate::root::{self, OpenRoot};
use crate::work;

/// A `Publisher` over the root `root` opened (the same store and options).
pub(crate) fn publisher(root: &OpenRoot) -> Publisher {
    Publisher::from_root(root.root.clone())
}

/// A facade error about `root`.
fn dataset_err(root: &OpenRoot, e: guideloom::Error) -> CliError {
    match e {
        guideloom::Error::Publish(p) => root.err(p),
        other => CliError::Dataset {
            root: root.name.clone(),
            source: Box::new(other),
        },
    }
}

/// Where the records of an import came from: the first record of each input.
#[derive(Debug, Default)]
pub(crate) struct Origins(Vec<(u64, PathBuf)>);

impl Origins {
    /// The input and row of record `record`.
    fn find(&self, record: u64) -> Option<(&Path, u64)> {
        self.0
            .iter()
            .rev()
            .find(|(start, _)| *start <= record)
            .map(|(start, path)| (path.as_path(), record - start))
    }
}

/// A guideloom-import error as the CLI's: input lines as `Input`, files as `File`, the root's
/// errors as the root's; a row that does not encode names its input and row (`origins`).
pub(crate) fn import_err(
    root: &OpenRoot,
    origins: Option<&Origins>,
    e: guideloom_import::Error,
) -> CliError {
    use guideloom_import::Error as E;
    let unsupported = |path: &Path, detail: String| {
        CliError::file(
            path,
            std::io::Error::new(std::io::ErrorKind::Unsupported, detail),
        )
    };
    match e {
        E::Io { path, source } => CliError::file(path, source),
        E::Parse { path, line, detail } => CliError::Input {
            path,
            line,
            what: detail,
        },
        E::Unsupported { path, detail } => unsupported(&path, detail),
        E::Corrupt { path, detail } => {
            CliError::argument(path.display().to_string(), format!("corrupt: {detail}"))
        }
        E::Arrow { path, source } => {
            CliError::argument(path.display().to_string(), source.to_string())
        }
        E::SchemaDiffers {
            path,
            first,
            detail,
        } => CliError::argument(
            path.display().to_string(),
            format!("its schema differs from {first}'s: {detail}"),
        ),
        E::Record {
            what,
            record,
            source,
        } => match origins.and_then(|o| o.find(record)) {
            Some((path, row)) => {
                CliError::argument(format!("{}: row {row}", path.display()), source.to_string())
            }
            None => CliError::argument(format!("{what} record {record}"), source.to_string()),
        },
        E::Publish { source, .. } | E::Read { source, .. } => dataset_err(root, *source),
        other => CliError::argument(&root.name, other.to_string()),
    }
}

/// The opened inputs of one import.
enum Inputs {
    Parquet(ParquetInput),
    Text(TextInput),
    Mds(Vec<MdsReader>),
    WebDataset(WebDatasetReader),
}

/// The batches of one input.
type Batches<'a> = Box<dyn Iterator<Item = guideloom_import::Result<RecordBatch>> + 'a>;

impl Inputs {
    fn open(args: &ImportArgs) -> guideloom_import::Result<(Self, Schema)> {
        let batch_rows = usize::try_from(args.batch_rows).unwrap_or(usize::MAX);
        let paths = &args.inputs;
        Ok(match args.format {
            ImportFormat::Parquet => {
                let input = ParquetInput::open_with(paths, ParquetOptions { batch_rows })?;
                let schema = input.schema().clone();
                (Inputs::Parquet(input), schema)
            }
            ImportFormat::Csv | ImportFormat::Jsonl => {
                let format = match args.format {
                    ImportFormat::Csv => TextFormat::Csv,
                    _ => TextFormat::JsonLines,
                };
                let options = TextOptions {
                    batch_rows,
                    infer_rows: usize::try_from(args.infer_rows).unwrap_or(usize::MAX),
                    schema: None,
                };
                let input = TextInput::open(format, paths, options)?;
                let schema = input.schema().clone();
                (Inputs::Text(input), schema)
            }
            ImportFormat::Mds => {
                let mut readers = Vec::with_capacity(paths.len());
                let mut schema: Option<Schema> = None;
                for dir in paths {
                    let reader = MdsReader::open(dir)?;
                    let this = schema_of(dir, &reader.schema())?;
                    if let Some(first) = &schema
                        && *first != this
                    {
                        return Err(guideloom_import::Error::SchemaDiffers {
                            path: dir.clone(),
                            first: paths[0].display().to_string(),
                            detail: format!("`{this}` instead of `{first}`"),
                        });
                    }
                    schema = Some(this);
                    readers.push(reader);
                }
                let schema = schema.unwrap_or_else(|| Schema::new(Vec::new()));
                (Inputs::Mds(readers), schema)
            }
            ImportFormat::Webdataset => {
                let options = WebDatasetOptions {
                    text_fields: args.text_fields.clone(),
                    batch_rows,
                    ..WebDatasetOptions::default()
                };
                let reader = WebDatasetReader::open(paths, options)?;
                let schema = schema_of(&paths[0], &reader.schema())?;
                (Inputs::WebDataset(reader), schema)
            }
        })
    }

    /// The batches of input `i`.
    fn batches(&self, i: usize, batch_rows: usize) -> guideloom_import::Result<Batches<'_>> {
        Ok(match self {
            Inputs::Parquet(p) => Box::new(p.row_groups(i, 0..p.row_group_count(i))?),
            Inputs::Text(t) => Box::new(t.file_batches(i)?),
            Inputs::Mds(readers) => Box::new(readers[i].batches(batch_rows)),
            Inputs::WebDataset(w) => Box::new(w.tar_batches(i)?),
        })
    }

    /// Rows of all inputs, when known before reading them.
    fn rows(&self) -> Option<u64> {
        match self {
            Inputs::Parquet(p) => Some(p.num_rows()),
            Inputs::Mds(readers) => Some(readers.iter().map(MdsReader::len).sum()),
            Inputs::Text(_) | Inputs::WebDataset(_) => None,
        }
    }
}

/// Bytes of the files (and directories' files) at `paths`.
fn input_bytes(paths: &[PathBuf]) -> u64 {
    fn size(path: &Path) -> u64 {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_file() => m.len(),
            Ok(m) if m.is_dir() => std::fs::read_dir(path)
                .map(|entries| entries.flatten().map(|e| size(&e.path())).sum())
                .unwrap_or(0),
            _ => 0,
        }
    }
    paths.iter().map(|p| size(p)).sum()
}

/// Refuses, before anything is written, a schema the publication would refuse: one that does
/// not evolve from the latest snapshot's (the same rule and error as the publication's, see
/// `PublishRequest::schema`).
async fn check_schema_change(
    root: &OpenRoot,
    snapshot_id: &str,
    schema: &Schema,
    mode: PublishMode,
) -> Result<()> {
    let latest = match root.root.latest().await {
        Ok(latest) => latest,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(root.err(e)),
    };
    let detail = match &latest.manifest.schema {
        Some(earlier) => schema.evolves_from(earlier).err().map(|e| e.to_string()),
        None if mode == PublishMode::Append => Some(
            "an append cannot declare a schema over a schemaless snapshot's records (publish \
             all the shards, in full mode)"
                .to_owned(),
        ),
        None => None,
    };
    match detail {
        Some(detail) => Err(root.err(guideloom_publish::Error::SchemaChange {
            snapshot_id: snapshot_id.to_owned(),
            detail,
        })),
        None => Ok(()),
    }
}

/// Reads every input through `sink`, in order, updating `bar`; records where each input's
/// records start in `origins`.
fn write_all(
    inputs: &Inputs,
    args: &ImportArgs,
    sink: &mut ImportSink,
    bar: &ProgressBar,
    origins: &RefCell<Origins>,
) -> guideloom_import::Result<()> {
    let batch_rows = usize::try_from(args.batch_rows).unwrap_or(usize::MAX);
    let rows = std::cell::Cell::new(0u64);
    let text = match inputs {
        Inputs::Text(t) => Some(t),
        _ => None,
    };
    let batches = (0..args.inputs.len()).flat_map(|i| {
        origins
            .borrow_mut()
            .0
            .push((rows.get(), args.inputs[i].clone()));
        match inputs.batches(i, batch_rows) {
            Ok(batches) => batches,
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    });
    let batches = batches.inspect(|batch| {
        if let Ok(batch) = batch {
            let done = rows.get() + batch.num_rows() as u64;
            rows.set(done);
            match text {
                Some(t) => bar.set_position(t.bytes_read()),
                None => bar.set_position(done),
            }
            bar.set_message(format!("{done} records"));
        }
    });
    sink.write(batches)
}

/// Runs `guideloom import`.
pub(crate) async fn run(args: ImportArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, false)?;
    guideloom_publish::check_name("snapshot id", &args.snapshot)
        .map_err(|e| CliError::argument("--snapshot", e.to_string()))?;
    let work_id = args
        .work_id
        .clone()
        .unwrap_or_else(|| format!("import-{}", args.snapshot));
    let start = check_work_id(&root, &work_id).await?;
    let publisher = publisher(&root);
    let started = Instant::now();
    let (inputs, schema) = Inputs::open(&args).map_err(|e| import_err(&root, None, e))?;
    let mode = match args.mode {
        ImportMode::Full => PublishMode::Full,
        ImportMode::Append => PublishMode::Append,
    };
    check_schema_change(&root, &args.snapshot, &schema, mode).await?;
    let total_in = input_bytes(&args.inputs);
    let bar = match (&inputs, inputs.rows()) {
        (Inputs::Text(_), _) => output::progress_bytes(global.json, Some(total_in), "input"),
        (_, rows) => output::progress(global.json, rows, "records"),
    };
    let options = ImportOptions::new(&work_id).shard_bytes(args.shard_bytes);
    let mut sink = ImportSink::new(publisher.clone(), schema.clone(), options)
        .map_err(|e| import_err(&root, None, e))?;
    let origins = RefCell::new(Origins::default());
    let written = write_all(&inputs, &args, &mut sink, &bar, &origins);
    bar.finish_and_clear();
    if let Err(e) = written {
        let e = import_err(&root, Some(&origins.borrow()), e);
        let shards = match start {
            Start::Fresh => sink.imported().shards.len(),
            Start::Resume(n) => n.max(sink.imported().shards.len()),
        };
        if shards == 0 {
            return Err(e);
        }
        return Err(CliError::Incomplete {
            work_id,
            shards,
            source: Box::new(e),
        });
    }
    sink.count_input(total_in);
    let imported = sink.finish();
    let published = publish(
        &publisher,
        &args.dataset,
        &args.snapshot,
        imported.shards.clone(),
        mode,
        schema.clone(),
    )
    .map_err(|e| import_err(&root, None, e))?;
    // Marked complete once published: until then `publish` takes none of these shards
    // unasked (they would lose their schema), and a re-run resumes.
    work::mark_complete(&root, &work_id, &imported.shards).await?;
    let summary = Summary {
        root: &root,
        args: &args,
        work_id: &work_id,
        imported: &imported,
        published: &published,
        schema: &schema,
    };
    summary.print(global.json, started)
}

/// What `import` did, for its report.
struct Summary<'a> {
    root: &'a OpenRoot,
    args: &'a ImportArgs,
    work_id: &'a str,
    imported: &'a Imported,
    published: &'a guideloom::Published,
    schema: &'a Schema,
}

impl Summary<'_> {
    /// Prints a line like `write`'s, or `--json`'s document.
    fn print(&self, json: bool, started: Instant) -> Result<()> {
        let (args, imported) = (self.args, self.imported);
        let snapshot = &self.published.snapshot;
        let seconds = started.elapsed().as_secs_f64();
        if json {
            return output::print_json(&json!({
                "root": self.root.name,
                "format": args.format.to_possible_value().map(|v| v.get_name().to_owned()),
                "inputs": args.inputs,
                "dataset_id": snapshot.manifest.dataset_id,
                "snapshot_id": snapshot.id(),
                "seq": snapshot.seq(),
                "mode": match args.mode { ImportMode::Full => "full", ImportMode::Append => "append" },
                "work_id": self.work_id,
                "records": imported.records,
                "input_bytes": imported.input_bytes,
                "payload_bytes": imported.payload_bytes,
                "shard_bytes": imported.shard_bytes,
                "shards": imported.shards.iter().map(|s| json!({
                    "key": s.key, "size": s.size, "records": s.record_count
                })).collect::<Vec<_>>(),
                "schema": self.schema,
                "outcome": match self.published.outcome {
                    PublishOutcome::Committed => "committed",
                    _ => "already_published",
                },
                "seconds": seconds,
            }));
        }
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        let rate = if seconds > 0.0 {
            (imported.input_bytes as f64 / seconds) as u64
        } else {
            0
        };
        output::line(&format!(
            "imported {} records ({} in, {}/s) from {} input(s) into {} shard(s), {}, as \
             snapshot {} (#{}) of dataset {} in {}",
            imported.records,
            output::bytes(imported.input_bytes),
            output::bytes(rate),
            args.inputs.len(),
            imported.shards.len(),
            output::bytes(imported.shard_bytes),
            snapshot.id(),
            snapshot.seq(),
            snapshot.manifest.dataset_id,
            output::secs(started.elapsed())
        ))
    }
}
