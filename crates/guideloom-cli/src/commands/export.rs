//! `guideloom export`: a snapshot of schema-bound records (or a range of it) out as one
//! Parquet or JSON Lines file (guideloom-import's `export`).

use std::time::Instant;

use guideloom_import::export::{ExportBatches, ExportOptions, write_jsonl, write_parquet};
use serde_json::json;

use clap::ValueEnum;

use crate::cli::{ExportArgs, ExportFormat, Global};
use crate::commands::import::import_err;
use crate::error::{CliError, Result};
use crate::output;
use crate::root;

/// Runs `guideloom export`.
pub(crate) async fn run(args: ExportArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    if args.out.exists() {
        return Err(CliError::argument(
            args.out.display().to_string(),
            "already exists: export writes a new file and never replaces one",
        ));
    }
    let started = Instant::now();
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot);
    let range = args
        .range
        .map(|(a, b)| a.unwrap_or(0)..b.unwrap_or(u64::MAX));
    let options = ExportOptions {
        batch_records: usize::try_from(args.batch_records).unwrap_or(usize::MAX),
        range,
    };
    let batches = ExportBatches::new(&dataset, &options).map_err(|e| import_err(&root, None, e))?;
    let schema = batches.arrow_schema();
    let bar = output::progress(global.json, Some(batches.remaining()), "records");
    let batches = batches.inspect(|b| {
        if let Ok(b) = b {
            bar.inc(b.num_rows() as u64);
        }
    });
    let exported = match args.format {
        ExportFormat::Parquet => write_parquet(&args.out, schema, batches),
        ExportFormat::Jsonl => write_jsonl(&args.out, batches),
    };
    bar.finish_and_clear();
    let exported = exported.map_err(|e| import_err(&root, None, e))?;
    let snapshot = dataset.snapshot();
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "snapshot_id": snapshot.id(),
            "format": args.format.to_possible_value().map(|v| v.get_name().to_owned()),
            "out": args.out,
            "records": exported.records,
            "bytes": exported.bytes,
            "seconds": started.elapsed().as_secs_f64(),
        }));
    }
    output::line(&format!(
        "exported {} records of snapshot {} (#{}) to {} ({}) in {}",
        exported.records,
        snapshot.id(),
        snapshot.seq(),
        args.out.display(),
        output::bytes(exported.bytes),
        output::secs(started.elapsed())
    ))
}
