//! `guideloom write`: records in, shards out (create-only, under `shards/<work_id>/`).

use std::time::Instant;

use std::collections::BTreeMap;

use guideloom_format::ShardMetadata;
use guideloom_format::metadata::{KIND_DOCUMENTS, Value};
use guideloom_publish::ShardRef;
use indicatif::ProgressBar;
use serde_json::json;

use crate::cli::{Global, RecordFormat, WriteArgs};
use crate::error::{CliError, Result};
use crate::input::{
    INPUT_NAMES_KEY, InputRecord, RawDir, jsonl_records, skipped_by_kind, skipped_note,
};
use crate::output;
use crate::root::{self, OpenRoot};
use crate::work;

/// Per-record bytes of index and checksum in a shard, plus a fixed allowance for header,
/// metadata and footer: used to start a new shard before one would pass the limit.
const PER_RECORD_OVERHEAD: u64 = 16;
const PER_SHARD_OVERHEAD: u64 = 512;
/// Per-record bytes of a kept input name beyond its text (its CBOR head).
const PER_NAME_OVERHEAD: u64 = 9;
/// The most bytes of input names one shard keeps in its metadata (whose cap is 16 MiB):
/// a new shard starts before they would pass it.
const MAX_NAME_BYTES_PER_SHARD: u64 = 8 << 20;

/// What one worker wrote.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) shards: Vec<ShardRef>,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    /// Whether this write resumed an unfinished one.
    pub(crate) resumed: Start,
}

impl Written {
    pub(crate) fn to_json(&self, root: &str, work_id: &str) -> serde_json::Value {
        json!({
            "root": root,
            "work_id": work_id,
            "records": self.records,
            "bytes": self.bytes,
            "shards": self.shards.iter().map(|s| json!({
                "key": s.key, "size": s.size, "records": s.record_count
            })).collect::<Vec<_>>(),
        })
    }
}

/// Whether a `write` of a work id starts fresh or resumes an unfinished one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// No shard of the work id exists.
    Fresh,
    /// An earlier write of it stopped part way (this many shards, no completion marker):
    /// shards with the same bytes are accepted as already written.
    Resume(usize),
}

/// Checks `work_id` before writing: a finished work id is refused (shards are create-only);
/// an unfinished one is resumed.
pub(crate) async fn check_work_id(root: &OpenRoot, work_id: &str) -> Result<Start> {
    guideloom_publish::check_name("work id", work_id)
        .map_err(|e| CliError::argument("--work-id", e.to_string()))?;
    root.store().check_writable().map_err(|e| root.err(e))?;
    if let Some(done) = work::completion(root, work_id).await? {
        return Err(CliError::argument(
            format!("--work-id {work_id}"),
            format!(
                "publication collision: work id {work_id} already wrote {} shard(s) in {} and is \
                 complete ({}); shards are create-only, use a new work id",
                done.shards.len(),
                root.name,
                work::marker_key(work_id)
            ),
        ));
    }
    let prefix = format!("shards/{work_id}");
    let existing = root.store().list(&prefix).await.map_err(|e| root.err(e))?;
    let shards = existing.iter().filter(|o| o.key.ends_with(".glm")).count();
    Ok(if shards == 0 {
        Start::Fresh
    } else {
        Start::Resume(shards)
    })
}

/// Writes already-encoded records as shards of `work_id`, cutting a new shard before one
/// would exceed `max_shard_bytes`, then marks the work id complete. On a failure part way the
/// error says so ([`CliError::Incomplete`]) and the marker is not written.
pub(crate) async fn write_records<I>(
    root: &OpenRoot,
    work_id: &str,
    format: &str,
    max_shard_bytes: u64,
    records: I,
    bar: &ProgressBar,
) -> Result<Written>
where
    I: IntoIterator<Item = Result<InputRecord>>,
{
    let start = check_work_id(root, work_id).await?;
    let mut written = Written {
        shards: Vec::new(),
        records: 0,
        bytes: 0,
        resumed: start,
    };
    match write_shards(
        root,
        work_id,
        format,
        max_shard_bytes,
        records,
        bar,
        &mut written,
    )
    .await
    {
        Ok(()) => {}
        Err(e) => {
            let shards = match start {
                Start::Fresh => written.shards.len(),
                Start::Resume(n) => n.max(written.shards.len()),
            };
            if shards == 0 {
                return Err(e);
            }
            return Err(CliError::Incomplete {
                work_id: work_id.to_owned(),
                shards,
                source: Box::new(e),
            });
        }
    }
    work::mark_complete(root, work_id, &written.shards).await?;
    Ok(written)
}

/// The records of the shard being filled, with their input names when they have them.
#[derive(Default)]
struct Batch {
    records: Vec<Vec<u8>>,
    names: Vec<Value>,
    bytes: u64,
    name_bytes: u64,
}

async fn write_shards<I>(
    root: &OpenRoot,
    work_id: &str,
    format: &str,
    max_shard_bytes: u64,
    records: I,
    bar: &ProgressBar,
    written: &mut Written,
) -> Result<()>
where
    I: IntoIterator<Item = Result<InputRecord>>,
{
    let mut batch = Batch {
        bytes: PER_SHARD_OVERHEAD,
        ..Batch::default()
    };
    for item in records {
        let InputRecord {
            origin,
            payload,
            name,
            input_bytes,
        } = item?;
        let name_cost = match &name {
            Some(Value::Text(t)) => t.len() as u64 + PER_NAME_OVERHEAD,
            Some(Value::Bytes(b)) => b.len() as u64 + PER_NAME_OVERHEAD,
            _ => 0,
        };
        let cost = payload.len() as u64 + PER_RECORD_OVERHEAD + name_cost;
        if PER_SHARD_OVERHEAD + cost > max_shard_bytes {
            return Err(CliError::argument(
                origin,
                format!(
                    "record of {} bytes does not fit in a shard of --max-shard-bytes {max_shard_bytes}",
                    payload.len()
                ),
            ));
        }
        if !batch.records.is_empty()
            && (batch.bytes + cost > max_shard_bytes
                || batch.name_bytes + name_cost > MAX_NAME_BYTES_PER_SHARD)
        {
            flush(root, work_id, format, &mut batch, written).await?;
        }
        batch.bytes += cost;
        batch.name_bytes += name_cost;
        batch.records.push(payload);
        if let Some(name) = name {
            batch.names.push(name);
        }
        bar.inc(input_bytes);
        // The record count, refreshed every 1024 records (not a string per record).
        let done = written.records + batch.records.len() as u64;
        if done % 1024 == 1 {
            bar.set_message(format!("{done} records"));
        }
    }
    if !batch.records.is_empty() {
        flush(root, work_id, format, &mut batch, written).await?;
    }
    Ok(())
}

async fn flush(
    root: &OpenRoot,
    work_id: &str,
    format: &str,
    batch: &mut Batch,
    written: &mut Written,
) -> Result<()> {
    let index = written.shards.len() as u64;
    let mut metadata = ShardMetadata::new(format, KIND_DOCUMENTS);
    // Input names are kept only when every record of the shard has one (raw input).
    if !batch.names.is_empty() && batch.names.len() == batch.records.len() {
        let names = std::mem::take(&mut batch.names);
        metadata = metadata.with_user(BTreeMap::from([(
            INPUT_NAMES_KEY.to_owned(),
            Value::Array(names),
        )]));
    }
    let shard = root
        .root
        .write_shard(work_id, index, metadata, batch.records.iter())
        .await
        .map_err(|e| match (&e, written.resumed) {
            (guideloom_publish::Error::PublicationCollision { key }, Start::Resume(_)) => {
                CliError::argument(
                    format!("--work-id {work_id}"),
                    format!(
                        "publication collision: {key} from the unfinished earlier write of work id \
                         {work_id} holds other bytes than this write produces (the input \
                         changed?); write under a new work id"
                    ),
                )
            }
            _ => root.err(e),
        })?;
    written.records += shard.record_count;
    written.bytes += shard.size;
    written.shards.push(shard);
    *batch = Batch {
        bytes: PER_SHARD_OVERHEAD,
        ..Batch::default()
    };
    Ok(())
}

/// Runs `guideloom write`.
pub(crate) async fn run(args: WriteArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, false)?;
    let started = Instant::now();
    let mut skipped = Vec::new();
    let written = match args.format {
        RecordFormat::Cbor => {
            if args.input.is_dir() {
                return Err(CliError::argument(
                    args.input.display().to_string(),
                    "is a directory; --format cbor takes a JSON Lines file (use --format raw for a directory)",
                ));
            }
            let limit = usize::try_from(args.max_shard_bytes).unwrap_or(usize::MAX);
            // A file's size is known (stdin's is not: a spinner with bytes and rate).
            let size = std::fs::metadata(&args.input)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            let bar = output::progress_bytes(global.json, size, "input");
            let records = jsonl_records(&args.input, limit)?;
            write_records(
                &root,
                &args.work_id,
                "cbor",
                args.max_shard_bytes,
                records,
                &bar,
            )
            .await
            .inspect(|_| bar.finish_and_clear())?
        }
        RecordFormat::Raw => {
            let dir = RawDir::list(&args.input, args.max_shard_bytes)?;
            skipped.clone_from(&dir.skipped);
            let bar = output::progress_bytes(global.json, Some(dir.total_bytes()), "input");
            write_records(
                &root,
                &args.work_id,
                "raw",
                args.max_shard_bytes,
                dir.records(),
                &bar,
            )
            .await
            .inspect(|_| bar.finish_and_clear())?
        }
    };
    // What a raw directory held besides regular files goes to stderr, counted by kind.
    if let Some(note) = skipped_note(&args.input, &skipped) {
        eprintln!("{note}");
    }
    if global.json {
        let mut v = written.to_json(&root.name, &args.work_id);
        if let Start::Resume(n) = written.resumed {
            v["resumed_shards"] = json!(n);
        }
        v["seconds"] = json!(started.elapsed().as_secs_f64());
        if args.format == RecordFormat::Raw {
            let names: Vec<&str> = skipped.iter().map(|(n, _)| n.as_str()).collect();
            v["skipped"] = json!(names);
            let by_kind = skipped_by_kind(&skipped);
            let kinds: BTreeMap<&str, &Vec<&str>> =
                by_kind.iter().map(|(k, names)| (k.name(), names)).collect();
            v["skipped_by_kind"] = json!(kinds);
        }
        return output::print_json(&v);
    }
    if let Start::Resume(n) = written.resumed {
        output::line(&format!(
            "resumed the unfinished write of work id {} ({n} shard(s) were already there; the \
             identical ones were kept)",
            args.work_id
        ))?;
    }
    output::line(&format!(
        "wrote {} records in {} shard(s), {}, to {}/shards/{} in {}",
        written.records,
        written.shards.len(),
        output::bytes(written.bytes),
        root.name.trim_end_matches('/'),
        args.work_id,
        output::secs(started.elapsed())
    ))
}
