//! Benchmark results for the viewer's bench page, from a file or a criterion directory.
//!
//! `cargo xtask bench` prints a markdown table and leaves criterion's own output under
//! `target/criterion/`: per benchmark `<group>/<function>/new/benchmark.json` (group and
//! function ids) and `new/estimates.json` (the median's point estimate in nanoseconds).
//! [`load`] reads that tree (the same two files xtask's report reads), or a JSON file of
//! results: an array of `{"group", "bench", "median_ns"}`, or an object with such an array
//! under `"results"`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::html::BenchResult;

/// The largest JSON file read (a results file, or one of criterion's).
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The deepest directory walked below the given one.
const MAX_DEPTH: usize = 8;
/// The most results kept.
pub const MAX_RESULTS: usize = 10_000;

fn read_json(path: &Path) -> Result<Value> {
    let io = |source| Error::BenchIo {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > MAX_FILE_BYTES {
        return Err(Error::BenchFormat {
            path: path.to_path_buf(),
            what: format!("{size} bytes, more than the {MAX_FILE_BYTES} read"),
        });
    }
    let text = std::fs::read(path).map_err(io)?;
    serde_json::from_slice(&text).map_err(|e| Error::BenchFormat {
        path: path.to_path_buf(),
        what: format!("not JSON: {e}"),
    })
}

/// The results at `path`: a JSON file or a directory holding criterion's output.
pub fn load(path: &Path) -> Result<Vec<BenchResult>> {
    let meta = std::fs::metadata(path).map_err(|source| Error::BenchIo {
        path: path.to_path_buf(),
        source,
    })?;
    let mut results = if meta.is_dir() {
        let mut dirs = Vec::new();
        walk(path, 0, &mut dirs)?;
        dirs.sort();
        let mut out = Vec::new();
        for dir in dirs {
            if let Some(r) = criterion_result(&dir)? {
                out.push(r);
            }
            if out.len() >= MAX_RESULTS {
                break;
            }
        }
        out
    } else {
        from_json(path, &read_json(path)?)?
    };
    results.truncate(MAX_RESULTS);
    Ok(results)
}

/// Every `new/` directory below `dir` (symbolic links are not followed).
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    if depth > MAX_DEPTH || out.len() >= MAX_RESULTS {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| Error::BenchIo {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let path = entry.path();
        if entry.file_name() == "new" {
            out.push(path);
        } else if entry.file_name() != "report" {
            walk(&path, depth + 1, out)?;
        }
    }
    Ok(())
}

/// One criterion result from its `new/` directory; `None` when a file is missing.
fn criterion_result(new_dir: &Path) -> Result<Option<BenchResult>> {
    let (bench, estimates) = (
        new_dir.join("benchmark.json"),
        new_dir.join("estimates.json"),
    );
    if !bench.is_file() || !estimates.is_file() {
        return Ok(None);
    }
    let meta = read_json(&bench)?;
    let est = read_json(&estimates)?;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let Some(group) = text(&meta, "group_id") else {
        return Err(Error::BenchFormat {
            path: bench,
            what: "no group_id".into(),
        });
    };
    let mut name = text(&meta, "function_id").unwrap_or_default();
    if let Some(v) = text(&meta, "value_str") {
        if !name.is_empty() {
            name.push('/');
        }
        name.push_str(&v);
    }
    let Some(median_ns) = est
        .get("median")
        .and_then(|m| m.get("point_estimate"))
        .and_then(Value::as_f64)
    else {
        return Err(Error::BenchFormat {
            path: estimates,
            what: "no median.point_estimate".into(),
        });
    };
    Ok(Some(BenchResult {
        group,
        bench: name,
        median_ns,
    }))
}

fn from_json(path: &Path, value: &Value) -> Result<Vec<BenchResult>> {
    let list = value.get("results").unwrap_or(value);
    serde_json::from_value(list.clone()).map_err(|e| Error::BenchFormat {
        path: path.to_path_buf(),
        what: format!(
            "expected an array of {{\"group\", \"bench\", \"median_ns\"}} (or {{\"results\": [...]}}): {e}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_criterion_trees_and_result_files() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("io_random").join("pread_sync").join("new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(
            new.join("benchmark.json"),
            r#"{"group_id":"io/random","function_id":"pread_sync","value_str":"4KiB"}"#,
        )
        .unwrap();
        std::fs::write(
            new.join("estimates.json"),
            r#"{"median":{"point_estimate":1234.5}}"#,
        )
        .unwrap();
        let r = load(dir.path()).unwrap();
        assert_eq!(
            r,
            [BenchResult {
                group: "io/random".into(),
                bench: "pread_sync/4KiB".into(),
                median_ns: 1234.5
            }]
        );
        let file = dir.path().join("r.json");
        std::fs::write(
            &file,
            r#"{"results":[{"group":"g","bench":"b","median_ns":5}]}"#,
        )
        .unwrap();
        assert_eq!(load(&file).unwrap()[0].median_ns, 5.0);
        std::fs::write(&file, r#"{"x":1}"#).unwrap();
        assert!(matches!(load(&file), Err(Error::BenchFormat { .. })));
    }
}
