//! `guideloom get` and `guideloom cat`.
//!
//! Records print as their exact JSON text (see [`crate::json`]); the `--json` wrappers embed
//! that text as it is, so nothing is re-parsed or reordered on the way out. A record is
//! checked before any of it is printed ([`RecordJson::check`]) and then streamed to stdout,
//! so printing takes the record's own bytes plus a bounded buffer whatever its size.

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use guideloom::format::RunBudget;

use crate::cli::{CatArgs, GetArgs, Global};
use crate::error::{CliError, Result};
use crate::input::input_name;
use crate::json::{RecordJson, STREAM_CHUNK, json_string};
use crate::output;
use crate::root;

/// `get --json`: the snapshot id, the index, the input file name of a raw record written
/// from a directory (when the shard kept it) and the record's exact text (written between
/// this head and [`GET_DOCUMENT_TAIL`]), pretty-printed like the other commands' documents.
fn get_document_head(snapshot_id: &str, index: u64, name: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\n  \"snapshot_id\": ");
    json_string(snapshot_id, &mut out);
    out.extend_from_slice(format!(",\n  \"index\": {index},").as_bytes());
    if let Some(name) = name {
        out.extend_from_slice(b"\n  \"name\": ");
        json_string(name, &mut out);
        out.push(b',');
    }
    out.extend_from_slice(b"\n  \"record\": ");
    out
}

/// What follows the record in `get --json`'s document.
const GET_DOCUMENT_TAIL: &[u8] = b"\n}\n";

/// Runs `guideloom get`.
pub(crate) async fn get(args: GetArgs, global: &Global) -> Result<()> {
    if args.raw && global.json {
        return Err(CliError::argument(
            "--raw",
            "writes the record's bytes, not JSON: leave out --json",
        ));
    }
    let root = root::open(args.root.name(), global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot);
    let mut out = std::io::BufWriter::with_capacity(STREAM_CHUNK, std::io::stdout().lock());
    let output = |source| CliError::Output { source };
    if args.raw {
        let (bytes, _) = root.get_record(&dataset, args.index).await?;
        return out
            .write_all(&bytes)
            .and_then(|()| out.flush())
            .map_err(output);
    }
    let record = root.get_record_named(&dataset, args.index).await?;
    let mut scratch = Vec::new();
    let text = RecordJson::check(&record.format, &record.bytes, &mut scratch)
        .map_err(|e| root.record_error(args.index, &record.key, &e))?;
    if global.json {
        let head = get_document_head(dataset.snapshot().id(), args.index, record.name.as_deref());
        out.write_all(&head)
            .and_then(|()| text.write_to(&mut out))
            .and_then(|()| out.write_all(GET_DOCUMENT_TAIL))
    } else {
        text.write_to(&mut out).and_then(|()| out.write_all(b"\n"))
    }
    .and_then(|()| out.flush())
    .map_err(output)
}

/// The range `cat` prints: `--start` to `--end`, the end clamped to the snapshot's length
/// `len` (so `--end 1000000` means "to the end"); a start past the (clamped) end is an error
/// saying the length.
fn cat_range(start: u64, end: Option<u64>, len: u64, snapshot_id: &str) -> Result<Range<u64>> {
    let end = end.unwrap_or(len).min(len);
    if start > end {
        return Err(CliError::argument(
            "--start",
            format!("range {start}..{end} is not inside snapshot {snapshot_id} of {len} records"),
        ));
    }
    Ok(start..end)
}

/// Where `cat` puts records: JSON Lines on stdout, or one file per record in a directory.
enum Sink {
    Lines(std::io::BufWriter<std::io::StdoutLock<'static>>),
    Dir(RawDirOut),
}

/// `cat --raw-dir DIR`: each record's bytes in `DIR/<index>`, created exclusively.
struct RawDirOut {
    dir: PathBuf,
    records: u64,
    bytes: u64,
}

impl RawDirOut {
    fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| CliError::file(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            records: 0,
            bytes: 0,
        })
    }

    /// Writes record `index` to `DIR/<index:08>`; an existing entry of that name (a file,
    /// a symlink, anything) is refused, never overwritten or followed.
    fn put(&mut self, index: u64, bytes: &[u8]) -> Result<()> {
        let path = self.dir.join(raw_file_name(index));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    CliError::argument(
                        path.display().to_string(),
                        "already exists: --raw-dir never overwrites (use an empty or new directory)",
                    )
                } else {
                    CliError::file(&path, e)
                }
            })?;
        file.write_all(bytes)
            .map_err(|e| CliError::file(&path, e))?;
        self.records += 1;
        self.bytes += bytes.len() as u64;
        Ok(())
    }
}

/// The file name of record `index` under `--raw-dir`: at least 8 digits, so names sort in
/// record order up to 10^8 records.
pub(crate) fn raw_file_name(index: u64) -> String {
    format!("{index:08}")
}

/// Runs `guideloom cat`.
pub(crate) async fn cat(args: CatArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot.clone());
    let records = dataset;
    let range = cat_range(args.start, args.end, records.len(), snapshot.id())?;
    let mut sink = match &args.raw_dir {
        Some(dir) => Sink::Dir(RawDirOut::create(dir)?),
        None => Sink::Lines(std::io::BufWriter::with_capacity(
            STREAM_CHUNK,
            std::io::stdout().lock(),
        )),
    };
    let bar = output::progress(global.json, Some(range.end - range.start), "records");
    let mut bytes_read = 0u64;
    // The `--json` line's head, and the text of a record rendered whole.
    let mut line = Vec::new();
    let mut scratch = Vec::new();
    let mut runs = records
        .read_in_order(range.clone(), RunBudget::default())
        .map_err(|e| root.err(e))?;
    // The record format of the shard being printed (from its footer, read when opened).
    let mut format: Option<(usize, String)> = None;
    while let Some(run) = runs.next_run().await {
        let run = run.map_err(|e| root.err(e))?;
        let key = &snapshot.shards()[run.shard].key;
        let opened = records
            .open_shard_async(run.shard)
            .await
            .map_err(|e| root.err(e))?;
        if format.as_ref().is_none_or(|(shard, _)| *shard != run.shard) {
            format = Some((run.shard, opened.record_format().to_owned()));
        }
        let record_format = format.as_ref().map_or("", |(_, f)| f.as_str());
        let shard_start = records.table().starts()[run.shard];
        let count = run.records.len() as u64;
        for (i, bytes) in (run.first..).zip(run.records) {
            bytes_read += bytes.len() as u64;
            let out = match &mut sink {
                Sink::Dir(dir) => {
                    dir.put(i, &bytes)?;
                    continue;
                }
                Sink::Lines(out) => out,
            };
            let text = RecordJson::check(record_format, &bytes, &mut scratch)
                .map_err(|e| root.record_error(i, key, &e))?;
            if global.json {
                line.clear();
                line.extend_from_slice(format!("{{\"index\":{i},").as_bytes());
                if let Some(name) = input_name(opened, i - shard_start) {
                    line.extend_from_slice(b"\"name\":");
                    json_string(&name, &mut line);
                    line.push(b',');
                }
                line.extend_from_slice(b"\"record\":");
                out.write_all(&line)
            } else {
                Ok(())
            }
            .and_then(|()| text.write_to(out))
            .and_then(|()| out.write_all(if global.json { b"}\n" } else { b"\n" }))
            .map_err(|source| CliError::Output { source })?;
        }
        bar.inc(count);
        bar.set_message(format!("{} read", output::bytes(bytes_read)));
    }
    bar.finish_and_clear();
    match sink {
        Sink::Lines(mut out) => out.flush().map_err(|source| CliError::Output { source }),
        Sink::Dir(dir) => {
            if global.json {
                return output::print_json(&serde_json::json!({
                    "root": root.name,
                    "snapshot_id": snapshot.id(),
                    "dir": dir.dir,
                    "start": range.start,
                    "end": range.end,
                    "records": dir.records,
                    "bytes": dir.bytes,
                }));
            }
            output::line(&format!(
                "wrote {} record(s), {}, to {} ({}..{}, one file per record named by index)",
                dir.records,
                output::bytes(dir.bytes),
                dir.dir.display(),
                raw_file_name(range.start),
                raw_file_name(range.end.saturating_sub(1).max(range.start)),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    fn get_document(snapshot_id: &str, index: u64, name: Option<&str>, record: &[u8]) -> Vec<u8> {
        let mut doc = super::get_document_head(snapshot_id, index, name);
        doc.extend_from_slice(record);
        doc.extend_from_slice(super::GET_DOCUMENT_TAIL);
        doc
    }

    #[test]
    fn get_document_embeds_the_exact_record() {
        let doc = get_document("s\"1", 7, None, br#"{"b":1,"a":1e300}"#);
        let text = String::from_utf8(doc).unwrap();
        assert_eq!(
            text,
            "{\n  \"snapshot_id\": \"s\\\"1\",\n  \"index\": 7,\n  \"record\": {\"b\":1,\"a\":1e300}\n}\n"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["index"], 7);
        let named = get_document("s", 1, Some("a.bin"), b"\"x\"");
        let v: serde_json::Value = serde_json::from_slice(&named).unwrap();
        assert_eq!(v["name"], "a.bin");
        assert_eq!(v["record"], "x");
    }

    #[test]
    fn cat_clamps_the_end_and_names_the_length() {
        assert_eq!(super::cat_range(0, Some(100), 5, "s").unwrap(), 0..5);
        assert_eq!(super::cat_range(2, None, 5, "s").unwrap(), 2..5);
        assert_eq!(super::cat_range(5, Some(9), 5, "s").unwrap(), 5..5);
        let e = super::cat_range(6, None, 5, "v1").unwrap_err().to_string();
        assert!(e.contains("snapshot v1 of 5 records"), "{e}");
    }
}
