//! Request-count tables for `cargo xtask bench`'s report.

use std::path::Path;

/// Environment variable naming the directory request-count tables go to;
/// `cargo xtask bench` sets it to `<target>/criterion/counts` and appends every table written
/// there during its run after the timing summary.
pub const COUNTS_DIR_ENV: &str = "GUIDELOOM_BENCH_COUNTS_DIR";

/// Writes `table` (markdown) as `$GUIDELOOM_BENCH_COUNTS_DIR/<bench>.md` when that variable is
/// set ([`write_counts_to`]); does nothing otherwise.
pub fn write_counts(bench: &str, table: &str) {
    if let Some(dir) = std::env::var_os(COUNTS_DIR_ENV) {
        write_counts_to(Path::new(&dir), bench, table);
    }
}

/// Writes `table` as `<dir>/<bench>.md`, creating `dir`. A failure is printed as a note, not
/// raised: the timings are still worth having without the table.
pub fn write_counts_to(dir: &Path, bench: &str, table: &str) {
    let path = dir.join(format!("{bench}.md"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, table)) {
        println!("note: could not write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_table_under_the_bench_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("criterion").join("counts");
        write_counts_to(&dir, "publish", "| a | b |\n");
        assert_eq!(
            std::fs::read_to_string(dir.join("publish.md")).unwrap(),
            "| a | b |\n"
        );
        // A directory that cannot be created is a note, not a panic.
        let blocked = tmp.path().join("file");
        std::fs::write(&blocked, "x").unwrap();
        write_counts_to(&blocked.join("sub"), "publish", "t");
        assert!(!blocked.join("sub").exists());
    }
}
