//! `guideloom annotate`: one JSON value per record, published as an annotation set.

use std::path::Path;
use std::time::Instant;

use guideloom_publish::{AnnotationEntry, RetryPolicy, Snapshot};
use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::cli::{AnnotateArgs, Global};
use crate::error::{CliError, Result};
use crate::input::{Lines, MAX_ANNOTATION_LINE, open_input};
use crate::json::check_json;
use crate::output;
use crate::root::{self, OpenRoot};

/// The next version of `set`: `v1`, or `v<N+1>` after the latest `vN`.
pub(crate) async fn next_version(root: &OpenRoot, set: &str) -> Result<String> {
    let catalog = root.root.catalog().await.map_err(|e| root.err(e))?;
    let highest = catalog
        .entries
        .iter()
        .filter(|e| e.set == set)
        .filter_map(|e| e.version.strip_prefix('v')?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    Ok(format!("v{}", highest + 1))
}

/// Publishes `values` as `set`/`version` on `snapshot`; a count mismatch names both counts.
/// Each value is written as its serialization by serde_json: pass [`RawValue`]s to publish
/// exact input text.
pub(crate) async fn annotate<T: Serialize>(
    root: &OpenRoot,
    snapshot: &Snapshot,
    set: &str,
    version: &str,
    values: &[T],
    input: &str,
) -> Result<AnnotationEntry> {
    if values.len() as u64 != snapshot.total_records() {
        return Err(CliError::argument(
            input,
            format!(
                "{} values but snapshot {} has {} records (one value per record is required)",
                values.len(),
                snapshot.id(),
                snapshot.total_records()
            ),
        ));
    }
    root.root
        .publish_annotations(
            set,
            version,
            snapshot,
            values,
            &RetryPolicy::contended_update(),
        )
        .await
        .map_err(|e| root.err(e))
}

/// Reads one value per non-blank line, at most `limit` + 1 of them (one more than needed
/// tells the input is too long without reading it all). Each line is checked with the rules
/// of `write` (exact numbers, no duplicate keys, no lone surrogates; see [`check_json`])
/// and kept as its exact text, so the published values are the input's bytes.
fn read_values(path: &Path, limit: u64) -> Result<Vec<Box<RawValue>>> {
    let mut values = Vec::new();
    let mut lines = Lines::new(
        open_input(path)?,
        path,
        MAX_ANNOTATION_LINE,
        "the 64 MiB cap on one annotation value",
    );
    while let Some((n, line)) = lines.next_line()? {
        let text = line.trim_matches([' ', '\t', '\r']);
        if text.is_empty() {
            continue;
        }
        let refuse = |what: String| CliError::Input {
            path: path.to_path_buf(),
            line: n,
            what,
        };
        check_json(text.as_bytes()).map_err(|e| refuse(e.to_string()))?;
        let value = RawValue::from_string(text.to_owned())
            .map_err(|e| refuse(format!("malformed JSON: {e}")))?;
        values.push(value);
        // Stop early (bounded memory) once the input is certainly too long.
        if values.len() as u64 > limit {
            break;
        }
    }
    Ok(values)
}

/// Runs `guideloom annotate`.
pub(crate) async fn run(args: AnnotateArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    // A declared mounted bucket (or a read-only root) cannot update the catalog: refuse
    // before reading the input.
    root.store().check_cas().map_err(|e| root.err(e))?;
    let started = Instant::now();
    let snapshot = root.snapshot(args.snapshot.as_deref()).await?;
    let values = read_values(&args.input, snapshot.total_records())?;
    let input = args.input.display().to_string();
    if values.len() as u64 > snapshot.total_records() {
        return Err(CliError::argument(
            input,
            format!(
                "more than {} values but snapshot {} has {} records (one value per record is required)",
                snapshot.total_records(),
                snapshot.id(),
                snapshot.total_records()
            ),
        ));
    }
    let version = match args.set_version {
        Some(v) => v,
        None => next_version(&root, &args.name).await?,
    };
    let entry = annotate(&root, &snapshot, &args.name, &version, &values, &input).await?;
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "set": entry.set,
            "version": entry.version,
            "snapshot_id": entry.snapshot_id,
            "values": entry.value_count,
            "key": entry.key,
            "bytes": entry.size,
            "seconds": started.elapsed().as_secs_f64(),
        }));
    }
    output::line(&format!(
        "annotated snapshot {} with {}/{}: {} values in {} ({})",
        entry.snapshot_id,
        entry.set,
        entry.version,
        entry.value_count,
        entry.key,
        output::secs(started.elapsed())
    ))
}
