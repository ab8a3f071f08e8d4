//! The one summary table of a `cargo xtask bench` run, read from criterion's output.
//!
//! Criterion writes, per benchmark, `<target>/criterion/<group dir>/<function dir>/new/`
//! with `benchmark.json` (group id, function id, throughput per iteration) and
//! `estimates.json` (the median's point estimate, in nanoseconds per iteration). This module
//! reads every such pair, keeps those written during this run, and prints one markdown table:
//!
//! `group | bench | median | records/s | MB/s | ceiling | ratio | target | note`
//!
//! # Conventions the benches follow
//! - **Ceilings** are benches whose id starts with `ceiling_`, in the same group as the
//!   figures they bound, measured in the same run on the same bytes.
//! - **Primary ceiling** of a group, the one every ratio divides by: the first id of
//!   [`PRIMARY_CEILINGS`] present in the group, else the alphabetically first `ceiling_*`.
//!   `ceiling_pread` comes first because it does the same work as a reader (one `pread` into
//!   a fresh buffer per range); the other ceilings are still listed, with their own ratio.
//! - **Ratio** = ceiling median time / bench median time, so `100%` means "as fast as the
//!   ceiling" and above `100%` means faster (an mmap reader hands out zero-copy slices).
//! - **Records**: a group path segment like `1KiB` or `256KiB` gives the record size, from
//!   which records/s is derived out of byte throughput (and MB/s out of element throughput).
//! - **Targets**: issue 2's apply to `io/*` groups (see [`TARGETS`]), issue 3's to `format/*`
//!   groups (see [`FORMAT_ITERATE_TARGET`]).
//! - **Async overhead**: for `<x>_async` beside `<x>_sync` in a group the note gives
//!   `async - sync` per iteration and per record.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Ceiling ids, in order of preference, that a group's ratios divide by.
pub(crate) const PRIMARY_CEILINGS: &[&str] = &["ceiling_pread", "ceiling_read", "ceiling_write"];

/// Minimum ratio to the primary ceiling per bench id, in `io/*` groups (issue 2).
pub(crate) const TARGETS: &[(&str, f64)] = &[
    ("pread_sync", 0.90),
    ("mmap_sync", 1.00),
    ("seek_sync", 0.70),
];

/// Minimum ratios in `format/*` groups (issue 3), by group pattern:
/// in-order iteration and writing ≥ 70% of their ceilings (sequential raw read, raw
/// buffered write); stream slices ≥ 80% of raw pread; random document reads (single, two
/// threads, `read_many`) ≥ 80% with CRC checks (`*_crc`) and ≥ 90% without (`*_nocrc`).
pub(crate) const FORMAT_ITERATE_TARGET: f64 = 0.70;
/// See [`FORMAT_ITERATE_TARGET`].
pub(crate) const FORMAT_WRITE_TARGET: f64 = 0.70;
/// See [`FORMAT_ITERATE_TARGET`].
pub(crate) const FORMAT_STREAM_TARGET: f64 = 0.80;
/// See [`FORMAT_ITERATE_TARGET`].
pub(crate) const FORMAT_CRC_TARGET: f64 = 0.80;
/// See [`FORMAT_ITERATE_TARGET`].
pub(crate) const FORMAT_NOCRC_TARGET: f64 = 0.90;

/// Env var with the run's start time in unix seconds (see [`report`]).
pub(crate) const START_ENV: &str = "GUIDELOOM_BENCH_START";

/// The table for the criterion results under `target_dir`.
///
/// Only estimates written at or after `$GUIDELOOM_BENCH_START` (unix seconds) are shown when
/// that variable is set; otherwise every estimate found is shown and the header says so.
pub(crate) fn report(target_dir: &Path) -> Result<String, String> {
    let since = match std::env::var(START_ENV) {
        Ok(v) => {
            let secs: u64 = v
                .trim()
                .parse()
                .map_err(|e| format!("{START_ENV}={v:?} is not unix seconds: {e}"))?;
            Some(UNIX_EPOCH + Duration::from_secs(secs))
        }
        Err(_) => None,
    };
    report_since(target_dir, since)
}

/// The table for the criterion results under `target_dir` written at or after `since`.
pub(crate) fn report_since(target_dir: &Path, since: Option<SystemTime>) -> Result<String, String> {
    let root = target_dir.join("criterion");
    if !root.is_dir() {
        return Err(format!(
            "no criterion results: {} does not exist (did the benches run?)",
            root.display()
        ));
    }
    let mut found = Vec::new();
    collect(&root, &mut found)?;
    let total = found.len();
    // File times have a coarse resolution on some filesystems; a second of slack.
    let cutoff = since.map(|s| s.checked_sub(Duration::from_secs(1)).unwrap_or(s));
    let benches: Vec<Bench> = found
        .into_iter()
        .filter(|b| cutoff.is_none_or(|c| b.written >= c))
        .collect();
    if benches.is_empty() {
        return Err(format!(
            "no criterion results written during this run under {} ({total} older ones ignored)",
            root.display()
        ));
    }
    let stale = total - benches.len();
    Ok(render(&benches, since.is_some(), stale))
}

/// Throughput of one iteration, as criterion records it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Throughput {
    Bytes(f64),
    Elements(f64),
}

/// One benchmark's result.
#[derive(Debug, Clone)]
struct Bench {
    group: String,
    /// Function id, plus `/value` when the bench has a parameter.
    id: String,
    throughput: Option<Throughput>,
    /// Median time of one iteration, nanoseconds.
    median_ns: f64,
    written: SystemTime,
}

/// Finds every `new/` directory under `dir` and reads its result.
fn collect(dir: &Path, out: &mut Vec<Bench>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut subdirs: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            subdirs.push(entry.path());
        }
    }
    subdirs.sort();
    for sub in subdirs {
        match sub.file_name().and_then(|n| n.to_str()) {
            // Criterion's html report and the previous run's results.
            Some("report" | "base" | "change") => {}
            Some("new") => {
                if let Some(bench) = read_bench(&sub)? {
                    out.push(bench);
                }
            }
            _ => collect(&sub, out)?,
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", path.display()))
}

/// Reads one `new/` directory; `None` when it lacks either file (an interrupted run).
fn read_bench(new_dir: &Path) -> Result<Option<Bench>, String> {
    let bench_path = new_dir.join("benchmark.json");
    let est_path = new_dir.join("estimates.json");
    if !bench_path.is_file() || !est_path.is_file() {
        return Ok(None);
    }
    let meta = read_json(&bench_path)?;
    let est = read_json(&est_path)?;
    let field = |v: &Value, key: &str| -> Result<String, String> {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("{}: no string field {key:?}", bench_path.display()))
    };
    let group = field(&meta, "group_id")?;
    let mut id = meta
        .get("function_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(value) = meta.get("value_str").and_then(Value::as_str) {
        if !id.is_empty() {
            id.push('/');
        }
        id.push_str(value);
    }
    let throughput = match meta.get("throughput") {
        None | Some(Value::Null) => None,
        Some(t) => Some(
            parse_throughput(t)
                .ok_or_else(|| format!("{}: unknown throughput {t}", bench_path.display()))?,
        ),
    };
    let median_ns = est
        .pointer("/median/point_estimate")
        .and_then(Value::as_f64)
        .filter(|m| m.is_finite() && *m > 0.0)
        .ok_or_else(|| format!("{}: no positive median.point_estimate", est_path.display()))?;
    let written = std::fs::metadata(&est_path)
        .and_then(|m| m.modified())
        .map_err(|e| format!("{}: {e}", est_path.display()))?;
    Ok(Some(Bench {
        group,
        id,
        throughput,
        median_ns,
        written,
    }))
}

fn parse_throughput(t: &Value) -> Option<Throughput> {
    let obj = t.as_object()?;
    let (kind, n) = obj.iter().next()?;
    let n = n.as_f64()?;
    match kind.as_str() {
        "Bytes" | "BytesDecimal" => Some(Throughput::Bytes(n)),
        "Bits" => Some(Throughput::Bytes(n / 8.0)),
        "Elements" => Some(Throughput::Elements(n)),
        _ => None,
    }
}

/// The record size named by a group path segment such as `1KiB`, `256KiB`, `4MiB` or `512B`.
fn record_size(group: &str) -> Option<f64> {
    group.split('/').find_map(|seg| {
        let (digits, unit) = seg.split_at(seg.find(|c: char| !c.is_ascii_digit())?);
        let n: f64 = digits.parse().ok()?;
        let scale = match unit {
            "B" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        Some(n * scale)
    })
}

/// Records and bytes processed by one iteration, where known.
fn per_iter(b: &Bench) -> (Option<f64>, Option<f64>) {
    let size = record_size(&b.group);
    match b.throughput {
        Some(Throughput::Bytes(n)) => (size.map(|s| n / s), Some(n)),
        Some(Throughput::Elements(n)) => (Some(n), size.map(|s| n * s)),
        None => (None, None),
    }
}

fn primary_ceiling<'a>(benches: &[&'a Bench]) -> Option<&'a Bench> {
    PRIMARY_CEILINGS
        .iter()
        .find_map(|want| benches.iter().find(|b| b.id == *want))
        .or_else(|| {
            benches
                .iter()
                .filter(|b| b.id.starts_with("ceiling_"))
                .min_by(|a, b| a.id.cmp(&b.id))
        })
        .copied()
}

fn target_for(b: &Bench) -> Option<f64> {
    if b.id.starts_with("ceiling_") {
        return None;
    }
    if b.group.starts_with("io/") {
        return TARGETS
            .iter()
            .find(|(id, _)| *id == b.id)
            .map(|(_, min)| *min);
    }
    if !b.group.starts_with("format/") {
        return None;
    }
    if b.group.ends_with("/iterate") {
        Some(FORMAT_ITERATE_TARGET)
    } else if b.group.ends_with("/write") {
        Some(FORMAT_WRITE_TARGET)
    } else if b.group.starts_with("format/stream/") {
        Some(FORMAT_STREAM_TARGET)
    } else if b.id.ends_with("_nocrc") {
        Some(FORMAT_NOCRC_TARGET)
    } else if b.id.ends_with("_crc") {
        Some(FORMAT_CRC_TARGET)
    } else {
        None
    }
}

fn fmt_time(ns: f64) -> String {
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", sig3(v))
}

fn fmt_signed_time(ns: f64) -> String {
    if ns < 0.0 {
        format!("-{}", fmt_time(-ns))
    } else {
        format!("+{}", fmt_time(ns))
    }
}

fn fmt_rate(per_s: f64) -> String {
    let (v, unit) = if per_s >= 1e9 {
        (per_s / 1e9, " G")
    } else if per_s >= 1e6 {
        (per_s / 1e6, " M")
    } else if per_s >= 1e3 {
        (per_s / 1e3, " k")
    } else {
        (per_s, "")
    };
    format!("{}{unit}/s", sig3(v))
}

/// Three significant digits (whole numbers above 100).
fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Orders ceilings first (the primary one first), then the rest by id.
fn row_order(primary: Option<&str>, b: &Bench) -> (u8, String) {
    let rank = if Some(b.id.as_str()) == primary {
        0
    } else if b.id.starts_with("ceiling_") {
        1
    } else {
        2
    };
    (rank, b.id.clone())
}

fn render(benches: &[Bench], filtered: bool, stale: usize) -> String {
    let mut groups: BTreeMap<&str, Vec<&Bench>> = BTreeMap::new();
    for b in benches {
        groups.entry(b.group.as_str()).or_default().push(b);
    }
    let mut out = String::new();
    let scope = if filtered {
        format!("results of this run ({stale} older results ignored)")
    } else {
        format!("all results found (no {START_ENV}: may include earlier runs)")
    };
    let _ = writeln!(out, "Benchmark summary: {scope}.");
    let _ = writeln!(
        out,
        "ratio = ceiling median / bench median (100% = as fast as the ceiling); \
         throughput from the median."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| group | bench | median | records/s | MB/s | ceiling | ratio | target | note |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---|---:|---|---|");
    let (mut met, mut missed) = (0usize, Vec::new());
    for (group, mut rows) in groups {
        let primary = primary_ceiling(&rows);
        rows.sort_by_key(|b| row_order(primary.map(|p| p.id.as_str()), b));
        for b in &rows {
            let secs = b.median_ns / 1e9;
            let (records, bytes) = per_iter(b);
            let rec_s = records.map_or(String::new(), |r| fmt_rate(r / secs));
            let mb_s = bytes.map_or(String::new(), |n| sig3(n / secs / 1e6));
            let (ceiling, ratio) = match primary {
                Some(p) => (p.id.clone(), Some(p.median_ns / b.median_ns)),
                None => ("—".to_owned(), None),
            };
            let ratio_s = ratio.map_or("—".to_owned(), |r| format!("{:.0}%", r * 100.0));
            let target = match (target_for(b), ratio) {
                (Some(min), Some(r)) => {
                    let ok = r >= min;
                    if ok {
                        met += 1;
                    } else {
                        missed.push(format!("{group}/{}", b.id));
                    }
                    format!("≥{:.0}% {}", min * 100.0, if ok { "✓" } else { "✗" })
                }
                _ => String::new(),
            };
            let note = async_note(b, &rows, records);
            let _ = writeln!(
                out,
                "| {group} | {} | {} | {rec_s} | {mb_s} | {ceiling} | {ratio_s} | {target} | {note} |",
                b.id,
                fmt_time(b.median_ns)
            );
        }
    }
    let _ = writeln!(out);
    if missed.is_empty() {
        let _ = writeln!(out, "targets: {met} met, none missed.");
    } else {
        let _ = writeln!(
            out,
            "targets: {met} met, {} missed: {}.",
            missed.len(),
            missed.join(", ")
        );
    }
    out
}

/// `async - sync` per iteration (and per record) for `<x>_async` beside `<x>_sync`.
fn async_note(b: &Bench, rows: &[&Bench], records: Option<f64>) -> String {
    let Some(stem) = b.id.strip_suffix("_async") else {
        return String::new();
    };
    let sync_id = format!("{stem}_sync");
    let Some(sync) = rows.iter().find(|r| r.id == sync_id) else {
        return String::new();
    };
    let delta = b.median_ns - sync.median_ns;
    match records {
        Some(r) if r > 1.0 => format!(
            "async {}/iter ({}/record) vs {sync_id}",
            fmt_signed_time(delta),
            fmt_signed_time(delta / r)
        ),
        _ => format!("async {}/read vs {sync_id}", fmt_signed_time(delta)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A scratch directory removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "xtask-bench-report-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Writes a fake criterion result, as criterion 0.7 lays it out.
    fn fake(target: &Path, group: &str, id: &str, throughput: &str, median_ns: f64) -> PathBuf {
        let dir = target
            .join("criterion")
            .join(group.replace('/', "_"))
            .join(id)
            .join("new");
        fs::create_dir_all(&dir).unwrap();
        let meta = format!(
            r#"{{"group_id":"{group}","function_id":"{id}","value_str":null,"throughput":{throughput},"full_id":"{group}/{id}","directory_name":"{}/{id}","title":"{group}/{id}"}}"#,
            group.replace('/', "_")
        );
        fs::write(dir.join("benchmark.json"), meta).unwrap();
        let est = format!(
            r#"{{"mean":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":{m},"standard_error":0.1}},"median":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":{median_ns},"standard_error":0.1}},"median_abs_dev":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":1.0,"standard_error":0.1}},"slope":null,"std_dev":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":1.0,"standard_error":0.1}}}}"#,
            m = median_ns * 1.5
        );
        fs::write(dir.join("estimates.json"), est).unwrap();
        // The previous run's copy must be ignored.
        let base = dir.parent().unwrap().join("base");
        fs::create_dir_all(&base).unwrap();
        fs::write(base.join("estimates.json"), "not json").unwrap();
        dir.join("estimates.json")
    }

    fn row<'a>(table: &'a str, group: &str, id: &str) -> Vec<&'a str> {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {group} | {id} |")))
            .unwrap_or_else(|| panic!("no row {group}/{id} in\n{table}"))
            .split('|')
            .map(str::trim)
            .collect()
    }

    #[test]
    fn ratios_targets_and_throughput_from_a_fake_run() {
        let s = Scratch::new();
        let g = "io/1KiB/random_single";
        fake(&s.0, g, "ceiling_pread", r#"{"Bytes":1024}"#, 1000.0);
        fake(&s.0, g, "ceiling_mmap_memcpy", r#"{"Bytes":1024}"#, 500.0);
        fake(&s.0, g, "pread_sync", r#"{"Bytes":1024}"#, 1050.0);
        fake(&s.0, g, "seek_sync", r#"{"Bytes":1024}"#, 2000.0);
        fake(&s.0, g, "pread_async", r#"{"Bytes":1024}"#, 4050.0);
        let t = report_since(&s.0, None).unwrap();

        // cells: "", group, bench, median, records/s, MB/s, ceiling, ratio, target, note, ""
        let c = row(&t, g, "ceiling_pread");
        assert_eq!(c[3], "1.00 µs");
        assert_eq!(c[4], "1.00 M/s");
        assert_eq!(c[5], "1024"); // 1024 B per µs
        assert_eq!(c[7], "100%");
        let p = row(&t, g, "pread_sync");
        assert_eq!(p[6], "ceiling_pread");
        assert_eq!(p[7], "95%");
        assert_eq!(p[8], "≥90% ✓");
        let sk = row(&t, g, "seek_sync");
        assert_eq!(sk[7], "50%");
        assert_eq!(sk[8], "≥70% ✗");
        let m = row(&t, g, "ceiling_mmap_memcpy");
        assert_eq!(m[7], "200%");
        assert_eq!(m[8], "");
        let a = row(&t, g, "pread_async");
        assert_eq!(a[8], "", "async benches have no target");
        assert_eq!(a[9], "async +3.00 µs/read vs pread_sync");
        assert!(t.contains("targets: 1 met, 1 missed: io/1KiB/random_single/seek_sync."));
        assert!(t.contains("may include earlier runs"));
        // The primary ceiling is listed first in its group.
        let first = t
            .lines()
            .position(|l| l.contains("| ceiling_pread |"))
            .unwrap();
        let other = t
            .lines()
            .position(|l| l.contains("| ceiling_mmap_memcpy |"))
            .unwrap();
        assert!(first < other);
    }

    #[test]
    fn batched_groups_give_per_record_async_overhead() {
        let s = Scratch::new();
        let g = "io/256KiB/random_batched";
        let bytes = 64 * 256 * 1024;
        let tp = format!(r#"{{"Bytes":{bytes}}}"#);
        fake(&s.0, g, "ceiling_pread", &tp, 64e6);
        fake(&s.0, g, "mmap_sync", &tp, 32e6);
        fake(&s.0, g, "mmap_async", &tp, 32e6 + 6400.0);
        let t = report_since(&s.0, None).unwrap();
        let m = row(&t, g, "mmap_sync");
        assert_eq!(m[3], "32.0 ms");
        assert_eq!(m[4], "2.00 k/s"); // 64 records in 32 ms
        assert_eq!(m[7], "200%");
        assert_eq!(m[8], "≥100% ✓");
        let a = row(&t, g, "mmap_async");
        assert_eq!(a[9], "async +6.40 µs/iter (+100 ns/record) vs mmap_sync");
    }

    #[test]
    fn fallback_ceiling_and_groups_without_throughput() {
        let s = Scratch::new();
        fake(&s.0, "format/documents", "ceiling_zeta", "null", 10.0);
        fake(&s.0, "format/documents", "ceiling_alpha", "null", 20.0);
        fake(&s.0, "format/documents", "read", r#"{"Elements":2}"#, 40.0);
        let t = report_since(&s.0, None).unwrap();
        let r = row(&t, "format/documents", "read");
        assert_eq!(r[6], "ceiling_alpha");
        assert_eq!(r[7], "50%");
        assert_eq!(r[4], "50.0 M/s");
        assert_eq!(r[5], "", "no record size in the group name, so no MB/s");
        assert_eq!(r[8], "", "targets only apply to io groups");
        let z = row(&t, "format/documents", "ceiling_zeta");
        assert_eq!(z[4], "");
    }

    #[test]
    fn results_older_than_the_run_start_are_left_out() {
        let s = Scratch::new();
        let g = "io/1KiB/sequential";
        let old = fake(&s.0, g, "ceiling_read", r#"{"Bytes":1}"#, 10.0);
        fake(&s.0, g, "pread_sync", r#"{"Bytes":1}"#, 10.0);
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let since = SystemTime::now() - Duration::from_secs(60);
        let t = report_since(&s.0, Some(since)).unwrap();
        assert!(!t.contains("| ceiling_read |"), "{t}");
        assert!(t.contains("| pread_sync |"));
        assert!(t.contains("(1 older results ignored)"));
        // Everything stale is an error, not an empty table.
        let err = report_since(&s.0, Some(SystemTime::now() + Duration::from_secs(60)));
        assert!(err.unwrap_err().contains("2 older ones ignored"));
    }

    #[test]
    fn malformed_results_are_errors_naming_the_file() {
        let s = Scratch::new();
        let est = fake(&s.0, "io/1KiB/x", "pread_sync", "null", 1.0);
        fs::write(&est, r#"{"median":{"point_estimate":"fast"}}"#).unwrap();
        let err = report_since(&s.0, None).unwrap_err();
        assert!(err.contains("estimates.json"), "{err}");
        assert!(report_since(&s.0.join("missing"), None).is_err());
    }

    #[test]
    fn format_groups_get_the_issue_3_targets() {
        let s = Scratch::new();
        let tp = r#"{"Bytes":1024}"#;
        let g = "format/documents/1KiB/random_read";
        fake(&s.0, g, "ceiling_pread", tp, 100.0);
        fake(&s.0, g, "pread_crc", tp, 120.0);
        fake(&s.0, g, "mmap_nocrc", tp, 120.0);
        let it = "format/documents/1KiB/iterate";
        fake(&s.0, it, "ceiling_read", tp, 100.0);
        fake(&s.0, it, "pread_crc", tp, 140.0);
        let st = "format/stream/8KiB/slice_2048_u32";
        fake(&s.0, st, "ceiling_pread", tp, 100.0);
        fake(&s.0, st, "pread_nocrc", tp, 130.0);
        let t = report_since(&s.0, None).unwrap();
        assert_eq!(row(&t, g, "pread_crc")[8], "≥80% ✓"); // 83%
        assert_eq!(row(&t, g, "mmap_nocrc")[8], "≥90% ✗"); // 83%
        assert_eq!(row(&t, it, "pread_crc")[8], "≥70% ✓"); // 71%
        assert_eq!(row(&t, st, "pread_nocrc")[8], "≥80% ✗"); // 77%
        assert_eq!(row(&t, g, "ceiling_pread")[8], "");
    }

    #[test]
    fn record_sizes_come_from_group_segments() {
        assert_eq!(record_size("io/1KiB/random_single"), Some(1024.0));
        assert_eq!(record_size("io/256KiB/sequential"), Some(262_144.0));
        assert_eq!(record_size("format/512B/read"), Some(512.0));
        assert_eq!(record_size("io/random_single"), None);
        assert_eq!(record_size("io/2048u32/slice"), None);
    }
}
