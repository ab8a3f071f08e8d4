//! `guideloom annotations`: the catalog's annotation sets, or one set's values.
//!
//! Values print as their exact published text (each line of the set's `values.jsonl`, checked
//! by size and SHA-256 against the catalog when the set is downloaded), one per line.

use std::io::Write;

use serde_json::json;
use serde_json::value::RawValue;

use crate::cli::{AnnotationsArgs, Global};
use crate::commands::info::{print_sets, set_json};
use crate::error::{CliError, Result};
use crate::json::json_string;
use crate::output;
use crate::root;

/// The records `start..end` of a set of `len` values to print: `--index I` alone, or
/// `--start`/`--end` with the end clamped to `len` (like `cat`). A start or index past the
/// end is an error saying the length.
pub(crate) fn selection(
    index: Option<u64>,
    start: Option<u64>,
    end: Option<u64>,
    len: u64,
    what: &str,
) -> Result<std::ops::Range<u64>> {
    if let Some(i) = index {
        if i >= len {
            return Err(CliError::argument(
                "--index",
                format!("record {i} out of range: {what} has {len} values"),
            ));
        }
        return Ok(i..i + 1);
    }
    let start = start.unwrap_or(0);
    let end = end.unwrap_or(len).min(len);
    if start > end {
        return Err(CliError::argument(
            "--start",
            format!("range {start}..{end} is empty or reversed: {what} has {len} values"),
        ));
    }
    Ok(start..end)
}

/// Runs `guideloom annotations`.
pub(crate) async fn run(args: AnnotationsArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let catalog = root.root.catalog().await.map_err(|e| root.err(e))?;
    let Some(name) = args.name else {
        if global.json {
            let sets: Vec<_> = catalog
                .entries
                .iter()
                .map(|e| {
                    let mut set = set_json(e);
                    set["key"] = json!(e.key);
                    set
                })
                .collect();
            return output::print_json(&json!({"root": root.name, "annotation_sets": sets}));
        }
        return print_sets(&catalog);
    };
    let version = args.set_version.as_deref();
    let entry = catalog.find(&name, version).ok_or_else(|| {
        let known: Vec<String> = catalog
            .entries
            .iter()
            .map(|e| format!("{}/{}", e.set, e.version))
            .collect();
        CliError::argument(
            &name,
            format!(
                "no annotation set {name}{} in {} (sets: {})",
                version.map(|v| format!("/{v}")).unwrap_or_default(),
                root.name,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        )
    })?;
    let snapshot = root.snapshot(Some(&entry.snapshot_id)).await?;
    let set = root
        .root
        .annotations(&name, Some(&entry.version), &snapshot, false)
        .await
        .map_err(|e| root.err(e))?;
    let what = format!("annotation set {}/{}", entry.set, entry.version);
    let range = selection(args.index, args.start, args.end, set.len() as u64, &what)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = Vec::new();
    for i in range {
        let value: Box<RawValue> = set.get(i).map_err(|e| root.err(e))?;
        line.clear();
        if global.json {
            line.extend_from_slice(format!("{{\"index\":{i},\"set\":").as_bytes());
            json_string(&entry.set, &mut line);
            line.extend_from_slice(b",\"value\":");
        }
        line.extend_from_slice(value.get().as_bytes());
        if global.json {
            line.push(b'}');
        }
        line.push(b'\n');
        out.write_all(&line)
            .map_err(|source| CliError::Output { source })?;
    }
    out.flush().map_err(|source| CliError::Output { source })
}

#[cfg(test)]
mod tests {
    use super::selection;

    #[test]
    fn selections_clamp_the_end_and_name_the_length() {
        assert_eq!(selection(None, None, None, 5, "s").unwrap(), 0..5);
        assert_eq!(selection(None, Some(2), Some(99), 5, "s").unwrap(), 2..5);
        assert_eq!(selection(Some(4), None, None, 5, "s").unwrap(), 4..5);
        let e = selection(Some(5), None, None, 5, "set q/v1").unwrap_err();
        assert!(e.to_string().contains("set q/v1 has 5 values"), "{e}");
        let e = selection(None, Some(6), None, 5, "s").unwrap_err();
        assert!(e.to_string().contains("has 5 values"), "{e}");
    }
}
