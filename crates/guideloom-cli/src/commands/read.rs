//! `guideloom get` and `guideloom cat`.
//!
//! Records print as their exact JSON text (see [`crate::json`]); the `--json` wrappers embed
//! that text as it is, so nothing is re-parsed or reordered on the way out.

use std::io::Write;

use guideloom::format::RunBudget;

use crate::cli::{CatArgs, GetArgs, Global};
use crate::error::{CliError, Result};
use crate::json::{json_string, record_json};
use crate::output;
use crate::root;

/// `get --json`: the snapshot id, the index and the record's exact text, pretty-printed like
/// the other commands' documents.
fn get_document(snapshot_id: &str, index: u64, record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len() + 64);
    out.extend_from_slice(b"{\n  \"snapshot_id\": ");
    json_string(snapshot_id, &mut out);
    out.extend_from_slice(format!(",\n  \"index\": {index},\n  \"record\": ").as_bytes());
    out.extend_from_slice(record);
    out.extend_from_slice(b"\n}\n");
    out
}

/// Runs `guideloom get`.
pub(crate) async fn get(args: GetArgs, global: &Global) -> Result<()> {
    let root = root::open(&args.root, global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot);
    let mut text = root.get_json_text(&dataset, args.index).await?;
    let text = if global.json {
        get_document(dataset.snapshot().id(), args.index, &text)
    } else {
        text.push(b'\n');
        text
    };
    let mut out = std::io::stdout().lock();
    out.write_all(&text)
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Output { source })
}

/// Runs `guideloom cat`.
pub(crate) async fn cat(args: CatArgs, global: &Global) -> Result<()> {
    let root = root::open(&args.root, global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot.clone());
    let records = dataset.reader();
    let end = args.end.unwrap_or(records.len());
    if args.start > end || end > records.len() {
        return Err(CliError::argument(
            if end > records.len() {
                "--end"
            } else {
                "--start"
            },
            format!(
                "range {}..{end} is not inside snapshot {} of {} records",
                args.start,
                snapshot.id(),
                records.len()
            ),
        ));
    }
    let bar = output::progress(global.json, Some(end - args.start), "records");
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = Vec::new();
    let mut runs = records
        .read_in_order(args.start..end, RunBudget::default())
        .map_err(|e| root.err(e))?;
    // The record format of the shard being printed (from its footer, read when opened).
    let mut format: Option<(usize, String)> = None;
    while let Some(run) = runs.next_run().await {
        let run = run.map_err(|e| root.err(e))?;
        let key = &snapshot.shards()[run.shard].key;
        if format.as_ref().is_none_or(|(shard, _)| *shard != run.shard) {
            let opened = records
                .open_shard(run.shard)
                .await
                .map_err(|e| root.err(e))?;
            format = Some((run.shard, opened.record_format().to_owned()));
        }
        let record_format = format.as_ref().map_or("", |(_, f)| f.as_str());
        let count = run.records.len() as u64;
        for (i, bytes) in (run.first..).zip(run.records) {
            line.clear();
            if global.json {
                line.extend_from_slice(format!("{{\"index\":{i},\"record\":").as_bytes());
            }
            record_json(record_format, &bytes, &mut line).map_err(|e| CliError::Record {
                root: root.name.clone(),
                index: i,
                key: key.clone(),
                what: e.to_string(),
            })?;
            if global.json {
                line.push(b'}');
            }
            line.push(b'\n');
            out.write_all(&line)
                .map_err(|source| CliError::Output { source })?;
        }
        bar.inc(count);
    }
    bar.finish_and_clear();
    out.flush().map_err(|source| CliError::Output { source })
}

#[cfg(test)]
mod tests {
    #[test]
    fn get_document_embeds_the_exact_record() {
        let doc = super::get_document("s\"1", 7, br#"{"b":1,"a":1e300}"#);
        let text = String::from_utf8(doc).unwrap();
        assert_eq!(
            text,
            "{\n  \"snapshot_id\": \"s\\\"1\",\n  \"index\": 7,\n  \"record\": {\"b\":1,\"a\":1e300}\n}\n"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["index"], 7);
    }
}
