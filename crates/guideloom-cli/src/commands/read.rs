//! `guideloom get` and `guideloom cat`.

use std::io::Write;

use serde_json::json;

use crate::cli::{CatArgs, GetArgs, Global};
use crate::error::{CliError, Result};
use crate::json::record_to_json;
use crate::output;
use crate::root;

/// Records read per request while streaming a shard.
pub(crate) const RUN: u64 = 4096;

/// Runs `guideloom get`.
pub(crate) async fn get(args: GetArgs, global: &Global) -> Result<()> {
    let root = root::open(&args.root, global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot);
    let value = root.get_json(&dataset, args.index).await?;
    let snapshot = dataset.snapshot();
    if global.json {
        return output::print_json(&json!({
            "snapshot_id": snapshot.id(),
            "index": args.index,
            "record": value,
        }));
    }
    output::line(&value.to_string())
}

/// Runs `guideloom cat`.
pub(crate) async fn cat(args: CatArgs, global: &Global) -> Result<()> {
    let root = root::open(&args.root, global, true)?;
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let dataset = root.dataset(snapshot.clone());
    let records = dataset.reader();
    let bounds = records.shard_starts();
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
    for n in 0..snapshot.shards().len() {
        let range = bounds[n]..bounds[n + 1];
        let (lo, hi) = (range.start.max(args.start), range.end.min(end));
        if lo >= hi {
            continue;
        }
        let shard = records.open_shard(n).await.map_err(|e| root.err(e))?;
        let key = &snapshot.shards()[n].key;
        let format = shard.metadata().format.clone();
        let mut first = lo;
        while first < hi {
            let count = (hi - first).min(RUN);
            let run = shard
                .read_run(first - range.start, count)
                .await
                .map_err(|e| CliError::shard(&root.name, key, e))?;
            for (i, bytes) in (first..).zip(run) {
                let value = record_to_json(&format, &bytes).map_err(|what| CliError::Record {
                    root: root.name.clone(),
                    index: i,
                    key: key.clone(),
                    what,
                })?;
                let line = if global.json {
                    json!({"index": i, "record": value})
                } else {
                    value
                };
                serde_json::to_writer(&mut out, &line)
                    .map_err(|e| CliError::Output { source: e.into() })?;
                out.write_all(b"\n")
                    .map_err(|source| CliError::Output { source })?;
            }
            bar.inc(count);
            first += count;
        }
    }
    bar.finish_and_clear();
    out.flush().map_err(|source| CliError::Output { source })
}
