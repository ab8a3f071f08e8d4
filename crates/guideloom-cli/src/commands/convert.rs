//! `guideloom convert SRC DST`: one shard file between the native format and ArrayRecord;
//! `guideloom convert --stream-storage DIR ROOT`: a stream storage into a root's stream
//! snapshot (`guideloom::storage::convert::stream_to_root`, see its docs).
//!
//! Streaming: native → ArrayRecord reads runs of records (at most 4096 records or 4 MiB per
//! read) and writes one ArrayRecord group at a time; ArrayRecord → native reads one chunk per
//! read. Every record keeps its exact bytes. The output is written create-only: the native
//! writer publishes under the final name only when finished; the ArrayRecord output goes to
//! a temporary file renamed into place at the end.

use std::path::{Path, PathBuf};

use guideloom_arrayrecord::{ArrayRecordReader, ArrayRecordWriter, ArrayRecordWriterOptions};
use guideloom_format::{ReadOptions, ShardMetadata, ShardWriter, SyncShard};
use guideloom_io::{Backend, SeekIo};
use indicatif::ProgressBar;

use guideloom::PublishOutcome;
use guideloom::storage::convert::{ConvertError, ConvertRequest, SourceKind, stream_to_root};

use crate::cli::{ConvertArgs, ConvertTo, Global};
use crate::error::{CliError, Result};
use crate::{output, root};

/// A read of consecutive native records covers at most this many bytes...
const RUN_BYTES: u64 = 4 << 20;
/// ...and at most this many records.
const RUN_RECORDS: u64 = 4096;

/// What `convert` did.
struct Converted {
    records: u64,
    bytes: u64,
    format: String,
}

pub(crate) async fn run(a: ConvertArgs, global: &Global) -> Result<()> {
    if a.stream_storage {
        return stream_storage(a, global).await;
    }
    let to = direction(&a)?;
    if a.dst.exists() {
        return Err(CliError::argument(
            a.dst.display().to_string(),
            "already exists (convert never overwrites)",
        ));
    }
    let options: ArrayRecordWriterOptions =
        a.options.parse().map_err(|e| CliError::ArrayRecord {
            path: a.dst.clone(),
            source: Box::new(e),
        })?;
    let bar = output::progress(global.json, None, "records");
    let (src, dst) = (a.src.clone(), a.dst.clone());
    let task = tokio::task::spawn_blocking(move || match to {
        ConvertTo::Arrayrecord => to_arrayrecord(&src, &dst, options, &bar),
        ConvertTo::Native => to_native(&src, &dst, &bar),
    });
    let done = task
        .await
        .map_err(|e| CliError::argument("convert", format!("the conversion task failed: {e}")))??;
    let size = std::fs::metadata(&a.dst)
        .map_err(|e| CliError::file(&a.dst, e))?
        .len();
    if global.json {
        output::print_json(&serde_json::json!({
            "src": a.src, "dst": a.dst,
            "to": match to { ConvertTo::Arrayrecord => "arrayrecord", ConvertTo::Native => "native" },
            "records": done.records, "record_bytes": done.bytes, "size": size,
            "source_format": done.format,
        }))
    } else {
        output::line(&format!(
            "converted {} records ({}, source format {}) from {} to {} ({})",
            done.records,
            output::bytes(done.bytes),
            done.format,
            a.src.display(),
            a.dst.display(),
            output::bytes(size)
        ))
    }
}

/// `--stream-storage DIR ROOT`: migrates the stream storage into a stream snapshot of the
/// root (created if it is a new local directory) and publishes it.
async fn stream_storage(a: ConvertArgs, global: &Global) -> Result<()> {
    let dst = a.dst.to_string_lossy().into_owned();
    let root = root::open(&dst, global, false)?;
    let request = ConvertRequest::new(
        a.dataset_id.unwrap_or_default(),
        a.snapshot_id.unwrap_or_default(),
    )
    .work_id(a.work_id);
    // The storage is read with blocking local reads: off the runtime's worker threads.
    let src = a.src.clone();
    let handle = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        handle
            .block_on(stream_to_root(&src, &root.root, &request))
            .map_err(|e| match e {
                ConvertError::Refused { dir, reason } => {
                    CliError::argument(dir.display().to_string(), reason)
                }
                ConvertError::Source(e) => CliError::ShardFile {
                    path: src.clone(),
                    source: Box::new(e),
                },
                ConvertError::Publish(e) => root.err(e),
                other => CliError::argument("convert", other.to_string()),
            })
            .map(|done| (done, root.name))
    });
    let (done, name) = task
        .await
        .map_err(|e| CliError::argument("convert", format!("the conversion task failed: {e}")))??;
    let snapshot = &done.published.snapshot;
    let kind = match done.source.kind {
        SourceKind::Stream => "stream",
        SourceKind::StreamWithMeta => "stream_with_meta",
    };
    if global.json {
        output::print_json(&serde_json::json!({
            "src": a.src, "root": name, "source": kind, "element": done.source.element,
            "dataset_id": snapshot.manifest.dataset_id, "snapshot_id": snapshot.id(),
            "shards": done.shards, "documents": done.documents, "tokens": done.tokens,
            "outcome": match done.published.outcome {
                PublishOutcome::Committed => "committed",
                _ => "already_published",
            },
        }))
    } else {
        output::line(&format!(
            "converted {} {} tokens in {} documents ({} shards, {}) from {} into snapshot {} of {}",
            done.tokens,
            done.source.element,
            done.documents,
            done.shards,
            kind.replace('_', "-"),
            a.src.display(),
            snapshot.id(),
            name
        ))
    }
}

/// The output format: `--to`, else the side whose name contains `.array_record`.
fn direction(a: &ConvertArgs) -> Result<ConvertTo> {
    if let Some(to) = a.to {
        return Ok(to);
    }
    let is_ar = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().contains(".array_record"))
    };
    match (is_ar(&a.src), is_ar(&a.dst)) {
        (false, true) => Ok(ConvertTo::Arrayrecord),
        (true, false) => Ok(ConvertTo::Native),
        _ => Err(CliError::argument(
            "--to",
            "cannot tell the direction from the file names (exactly one should contain \
             `.array_record`): pass --to arrayrecord or --to native",
        )),
    }
}

fn ar_error(path: &Path) -> impl Fn(guideloom_arrayrecord::Error) -> CliError + '_ {
    move |e| CliError::ArrayRecord {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

fn shard_error(path: &Path) -> impl Fn(guideloom_format::Error) -> CliError + '_ {
    move |e| CliError::ShardFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

fn to_arrayrecord(
    src: &Path,
    dst: &Path,
    options: ArrayRecordWriterOptions,
    bar: &ProgressBar,
) -> Result<Converted> {
    let reader = SeekIo::new()
        .open(&src.to_path_buf())
        .map_err(|e| CliError::io(src.display().to_string(), e))?;
    let shard = SyncShard::open(reader, &ReadOptions::default()).map_err(shard_error(src))?;
    let dir = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".convert.")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| CliError::file(&dir, e))?;
    let file = tmp.reopen().map_err(|e| CliError::file(tmp.path(), e))?;
    let mut writer =
        ArrayRecordWriter::new(std::io::BufWriter::with_capacity(1 << 20, file), options)
            .named(dst.display().to_string());
    let (len, mut first, mut bytes) = (shard.len(), 0u64, 0u64);
    while first < len {
        // A run: consecutive records up to RUN_BYTES (at least one), at most RUN_RECORDS.
        let start = shard.record_range(first).map_err(shard_error(src))?.start;
        let mut count = 1;
        while first + count < len && count < RUN_RECORDS {
            let end = shard
                .record_range(first + count)
                .map_err(shard_error(src))?
                .end;
            if end - start > RUN_BYTES {
                break;
            }
            count += 1;
        }
        for record in shard.read_run(first, count).map_err(shard_error(src))? {
            writer.write(&record).map_err(ar_error(dst))?;
            bytes += record.len() as u64;
        }
        first += count;
        bar.set_position(first);
    }
    let file = writer.finish().map_err(ar_error(dst))?;
    file.into_inner()
        .map_err(|e| CliError::file(dst, e.into_error()))?
        .sync_all()
        .map_err(|e| CliError::file(dst, e))?;
    tmp.persist_noclobber(dst)
        .map_err(|e| CliError::file(dst, e.error))?;
    bar.finish_and_clear();
    Ok(Converted {
        records: len,
        bytes,
        format: shard.metadata().format.clone(),
    })
}

fn to_native(src: &Path, dst: &Path, bar: &ProgressBar) -> Result<Converted> {
    let reader = SeekIo::new()
        .open(&src.to_path_buf())
        .map_err(|e| CliError::io(src.display().to_string(), e))?;
    // Read a chunk at a time (below): no cache needed.
    let options = guideloom_arrayrecord::ArrayRecordReadOptions::default().with_cache_chunks(0);
    let ar = ArrayRecordReader::open(reader, &options).map_err(ar_error(src))?;
    let mut writer = ShardWriter::create(dst, ShardMetadata::new("raw", "documents"))
        .map_err(shard_error(dst))?;
    let mut bytes = 0u64;
    let mut first = 0u64;
    // A chunk at a time: one read and one decode each, its records counted against the
    // reader's limit before a list of them is made.
    for chunk in ar.layout().chunks() {
        let records = ar
            .get_range(first, chunk.num_records)
            .map_err(ar_error(src))?;
        for record in &records {
            writer.append(record).map_err(shard_error(dst))?;
            bytes += record.len() as u64;
        }
        first += chunk.num_records;
        bar.set_position(first);
    }
    writer.finish().map_err(shard_error(dst))?;
    bar.finish_and_clear();
    Ok(Converted {
        records: ar.len(),
        bytes,
        format: "arrayrecord".into(),
    })
}
