//! The summary table printed by `cargo xtask bench`, read from criterion's saved estimates.
//!
//! Interface used by `bench.rs`: [`report`]. The body here lists every benchmark found with its
//! median; it is meant to grow into the ratio-to-ceiling table of the benchmark issues.

use std::path::{Path, PathBuf};

/// Reads `target_dir/criterion/**/new/estimates.json` and renders one table.
pub(crate) fn report(target_dir: &Path) -> Result<String, String> {
    let criterion = target_dir.join("criterion");
    if !criterion.is_dir() {
        return Err(format!(
            "no criterion results in {} (did any benchmark run?)",
            criterion.display()
        ));
    }
    let mut found = Vec::new();
    collect_estimates(&criterion, &mut found)?;
    if found.is_empty() {
        return Err(format!(
            "no */new/estimates.json under {}",
            criterion.display()
        ));
    }
    found.sort();
    let mut rows = Vec::new();
    for path in &found {
        let id = path
            .parent()
            .and_then(Path::parent)
            .and_then(|bench| bench.strip_prefix(&criterion).ok())
            .map(|id| id.display().to_string())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let median = value["median"]["point_estimate"]
            .as_f64()
            .ok_or_else(|| format!("{} has no median.point_estimate", path.display()))?;
        rows.push((id, median));
    }
    let width = rows
        .iter()
        .map(|(id, _)| id.len())
        .max()
        .unwrap_or(0)
        .max(9);
    let mut out = format!("{:<width$}  {:>14}\n", "benchmark", "median (ns)");
    for (id, median) in rows {
        out.push_str(&format!("{id:<width$}  {median:>14.1}\n"));
    }
    Ok(out)
}

/// Pushes every `new/estimates.json` below `dir` (criterion's `report/` folders hold none).
fn collect_estimates(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "new") {
                let estimates = path.join("estimates.json");
                if estimates.is_file() {
                    found.push(estimates);
                }
            } else {
                collect_estimates(&path, found)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_benchmarks_with_their_median() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-report-{}", std::process::id()));
        let bench = dir.join("criterion").join("io_read").join("pread_1k");
        std::fs::create_dir_all(bench.join("new")).unwrap();
        std::fs::create_dir_all(bench.join("base")).unwrap();
        std::fs::write(
            bench.join("new").join("estimates.json"),
            r#"{"median":{"point_estimate":1234.56,"standard_error":1.0}}"#,
        )
        .unwrap();
        std::fs::write(
            bench.join("base").join("estimates.json"),
            r#"{"median":{"point_estimate":99.0}}"#,
        )
        .unwrap();
        let table = report(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(table.contains("io_read/pread_1k"), "{table}");
        assert!(table.contains("1234.6"), "{table}");
        assert!(!table.contains("99.0"), "base/ is an old run: {table}");
    }

    #[test]
    fn missing_results_are_an_error() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-none-{}", std::process::id()));
        assert!(report(&dir).is_err());
    }
}
