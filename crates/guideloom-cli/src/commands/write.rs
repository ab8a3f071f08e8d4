//! `guideloom write`: records in, shards out (create-only, under `shards/<work_id>/`).

use std::time::Instant;

use std::collections::BTreeMap;

use guideloom_format::ShardMetadata;
use guideloom_format::{KIND_DOCUMENTS, Value};
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
use guideloom_format::spec::MAX_RECORDS;

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

/// What `write` reads: records one after another (JSON Lines), or a listed directory of
/// raw files (whose shards are planned from the listing, so each shard's metadata can carry
/// its records' file names before the records are read).
pub(crate) enum Input<I> {
    /// Records with no input names, cut into shards as they come.
    Records(I),
    /// One raw record per file, in name order, with their names.
    Dir(RawDir),
}

/// Writes already-encoded records as shards of `work_id`, cutting a new shard before one
/// would exceed `max_shard_bytes`, then marks the work id complete. Each record is encoded
/// into its shard as it is read (`Root::try_write_shard` streams into the store), so memory
/// is one record, the shard's index and a write buffer, whatever the shard size. On a
/// failure part way the error says so ([`CliError::Incomplete`]) and the marker is not
/// written.
pub(crate) async fn write_records<I>(
    root: &OpenRoot,
    work_id: &str,
    format: &str,
    max_shard_bytes: u64,
    input: Input<I>,
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
    let mut writer = ShardWriter {
        root,
        work_id,
        format,
        max_shard_bytes,
        bar,
        written: &mut written,
    };
    let outcome = match input {
        Input::Records(records) => writer.records(records).await,
        Input::Dir(dir) => writer.dir(&dir).await,
    };
    if let Err(e) = outcome {
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
    work::mark_complete(root, work_id, &written.shards).await?;
    Ok(written)
}

/// The size model of the shard being filled: where `write` cuts. The index, checksums and
/// a fixed allowance for header, metadata and footer are counted, so a shard stays within
/// `--max-shard-bytes`; a shard also ends at the format's record limit and before its
/// input names would pass [`MAX_NAME_BYTES_PER_SHARD`].
#[derive(Debug)]
struct Fill {
    bytes: u64,
    name_bytes: u64,
    records: u64,
}

impl Fill {
    fn new() -> Self {
        Fill {
            bytes: PER_SHARD_OVERHEAD,
            name_bytes: 0,
            records: 0,
        }
    }

    /// The shard bytes a record of `payload` bytes with a name of `name_cost` takes.
    fn cost(payload: u64, name_cost: u64) -> u64 {
        payload + PER_RECORD_OVERHEAD + name_cost
    }

    /// Whether the record goes in this shard (the first always does: it was checked to fit
    /// a shard alone).
    fn takes(&self, cost: u64, name_cost: u64, max_shard_bytes: u64) -> bool {
        self.records == 0
            || (self.bytes + cost <= max_shard_bytes
                && self.name_bytes + name_cost <= MAX_NAME_BYTES_PER_SHARD
                && self.records < MAX_RECORDS)
    }

    fn add(&mut self, cost: u64, name_cost: u64) {
        self.bytes += cost;
        self.name_bytes += name_cost;
        self.records += 1;
    }
}

/// A record too large for any shard, refused naming where it came from.
fn check_alone(origin: &str, payload: u64, cost: u64, max_shard_bytes: u64) -> Result<()> {
    if PER_SHARD_OVERHEAD + cost > max_shard_bytes {
        return Err(CliError::argument(
            origin,
            format!(
                "record of {payload} bytes does not fit in a shard of --max-shard-bytes \
                 {max_shard_bytes}"
            ),
        ));
    }
    Ok(())
}

/// The bytes of a kept input name in a shard's metadata.
fn name_cost(name: Option<&Value>) -> u64 {
    match name {
        Some(Value::Text(t)) => t.len() as u64 + PER_NAME_OVERHEAD,
        Some(Value::Bytes(b)) => b.len() as u64 + PER_NAME_OVERHEAD,
        _ => 0,
    }
}

/// Writes the shards of one `write`, one after another.
struct ShardWriter<'a> {
    root: &'a OpenRoot,
    work_id: &'a str,
    format: &'a str,
    max_shard_bytes: u64,
    bar: &'a ProgressBar,
    written: &'a mut Written,
}

impl ShardWriter<'_> {
    /// Shards of `records`, cut as they come: a record that does not fit the shard being
    /// filled ends it and starts the next.
    async fn records<I>(&mut self, records: I) -> Result<()>
    where
        I: IntoIterator<Item = Result<InputRecord>>,
    {
        let max = self.max_shard_bytes;
        let mut input = records.into_iter();
        // The record that ended the last shard: the first of the next.
        let mut carry: Option<InputRecord> = None;
        loop {
            let first = match carry.take() {
                Some(r) => r,
                None => match input.next() {
                    Some(r) => r?,
                    None => return Ok(()),
                },
            };
            let mut fill = Fill::new();
            let bar = self.bar;
            let done = self.written.records;
            let mut next = Some(first);
            let shard = std::iter::from_fn(|| {
                let record = match next.take() {
                    Some(r) => r,
                    None => match input.next()? {
                        Ok(r) => r,
                        Err(e) => return Some(Err(e)),
                    },
                };
                let payload = record.payload.len() as u64;
                let cost = Fill::cost(payload, 0);
                if let Err(e) = check_alone(&record.origin, payload, cost, max) {
                    return Some(Err(e));
                }
                if !fill.takes(cost, 0, max) {
                    carry = Some(record);
                    return None;
                }
                fill.add(cost, 0);
                bar.inc(record.input_bytes);
                // The record count, refreshed every 1024 records (not a string per record).
                let n = done + fill.records;
                if n % 1024 == 1 {
                    bar.set_message(format!("{n} records"));
                }
                Some(Ok(record.payload))
            });
            let metadata = ShardMetadata::new(self.format, KIND_DOCUMENTS);
            self.shard(metadata, shard).await?;
        }
    }

    /// Shards of the files of `dir`, planned from the listing (sizes and names), each file
    /// read as its shard is written.
    async fn dir(&mut self, dir: &RawDir) -> Result<()> {
        let max = self.max_shard_bytes;
        let files = dir.files();
        // Every refusal a plan can see comes before anything is written.
        let mut plan: Vec<std::ops::Range<usize>> = Vec::new();
        let mut fill = Fill::new();
        let mut start = 0;
        for (i, (path, size)) in files.iter().enumerate() {
            if let Some(e) = dir.too_large(i) {
                return Err(e);
            }
            let names = name_cost(RawDir::name_of(path).as_ref());
            let cost = Fill::cost(*size, names);
            check_alone(&path.display().to_string(), *size, cost, max)?;
            if !fill.takes(cost, names, max) {
                plan.push(start..i);
                start = i;
                fill = Fill::new();
            }
            fill.add(cost, names);
        }
        if start < files.len() {
            plan.push(start..files.len());
        }
        for range in plan {
            let names: Vec<Value> = files[range.clone()]
                .iter()
                .filter_map(|(path, _)| RawDir::name_of(path))
                .collect();
            let mut metadata = ShardMetadata::new(self.format, KIND_DOCUMENTS);
            // Input names are kept only when every record of the shard has one.
            if names.len() == range.len() {
                metadata = metadata.with_user(BTreeMap::from([(
                    INPUT_NAMES_KEY.to_owned(),
                    Value::Array(names),
                )]));
            }
            let bar = self.bar;
            let records = range.map(|i| {
                let record = dir.read(i)?;
                bar.inc(record.input_bytes);
                Ok(record.payload)
            });
            self.shard(metadata, records).await?;
        }
        Ok(())
    }

    /// Writes the next shard from `records`, streamed into the store.
    async fn shard<R>(&mut self, metadata: ShardMetadata, records: R) -> Result<()>
    where
        R: Iterator<Item = Result<Vec<u8>>>,
    {
        let (root, work_id) = (self.root, self.work_id);
        let index = self.written.shards.len() as u64;
        let shard = root
            .root
            .try_write_shard(work_id, index, metadata, records)
            .await
            .map_err(|e| match (&e, self.written.resumed) {
                (guideloom_publish::Error::PublicationCollision { key }, Start::Resume(_)) => {
                    CliError::argument(
                        format!("--work-id {work_id}"),
                        format!(
                            "publication collision: {key} from the unfinished earlier write of \
                             work id {work_id} holds other bytes than this write produces (the \
                             input changed?); write under a new work id"
                        ),
                    )
                }
                _ => root.err(e),
            })??;
        self.written.records += shard.record_count;
        self.written.bytes += shard.size;
        self.written.shards.push(shard);
        Ok(())
    }
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
                Input::Records(records),
                &bar,
            )
            .await
            .inspect(|_| bar.finish_and_clear())?
        }
        RecordFormat::Raw => {
            let dir = RawDir::list(&args.input, args.max_shard_bytes)?;
            skipped.clone_from(&dir.skipped);
            let bar = output::progress_bytes(global.json, Some(dir.total_bytes()), "input");
            write_records::<std::iter::Empty<_>>(
                &root,
                &args.work_id,
                "raw",
                args.max_shard_bytes,
                Input::Dir(dir),
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
