//! `guideloom annotate`: one JSON value per record, published as an annotation set.

use std::path::Path;
use std::time::Instant;

use guideloom_publish::{AnnotationEntry, RetryPolicy, Snapshot};
use serde_json::json;

use crate::cli::{AnnotateArgs, Global};
use crate::commands::write::{numbered_lines, open_input, parse_json_line};
use crate::error::{CliError, Result};
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
pub(crate) async fn annotate(
    root: &OpenRoot,
    snapshot: &Snapshot,
    set: &str,
    version: &str,
    values: &[serde_json::Value],
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
        .publish_annotations(set, version, snapshot, values, &RetryPolicy::default())
        .await
        .map_err(|e| root.err(e))
}

fn read_values(path: &Path, limit: u64) -> Result<Vec<serde_json::Value>> {
    let mut values = Vec::new();
    for item in numbered_lines(open_input(path)?, path.to_path_buf()) {
        let (n, line) = item?;
        if line.trim().is_empty() {
            continue;
        }
        values.push(parse_json_line(path, n, &line)?);
        // Stop early (bounded memory) once the input is certainly too long.
        if values.len() as u64 > limit {
            break;
        }
    }
    Ok(values)
}

/// Runs `guideloom annotate`.
pub(crate) async fn run(args: AnnotateArgs, global: &Global) -> Result<()> {
    let root = root::open(&args.root, global, true)?;
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
