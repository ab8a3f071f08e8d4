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
//! - **Publication** (`publish/*`, issue 5): no targets. Groups whose last segment ends in
//!   `_shards` count one shard per element, so their records/s column reads as shards/s (the
//!   note says so).
//! - **Request counts**: benches that count requests write markdown tables to
//!   `<target>/criterion/counts/<bench>.md` (the directory is passed to them as
//!   [`COUNTS_DIR_ENV`]); [`counts`] appends those written during the run after the table.

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

/// Env var naming the directory where benches write their request-count tables.
pub(crate) const COUNTS_DIR_ENV: &str = "GUIDELOOM_BENCH_COUNTS_DIR";

/// Where request-count tables go under a target directory.
pub(crate) fn counts_dir(target_dir: &Path) -> PathBuf {
    target_dir.join("criterion").join("counts")
}

/// The table for the criterion results under `target_dir`, followed by the request-count
/// tables ([`counts`]).
///
/// Only results written at or after `$GUIDELOOM_BENCH_START` (unix seconds) are shown when
/// that variable is set, else those written at or after `started` (the run's start) when
/// given; otherwise every estimate found is shown and the header says so.
pub(crate) fn report(target_dir: &Path, started: Option<SystemTime>) -> Result<String, String> {
    let since = match std::env::var(START_ENV) {
        Ok(v) => {
            let secs: u64 = v
                .trim()
                .parse()
                .map_err(|e| format!("{START_ENV}={v:?} is not unix seconds: {e}"))?;
            Some(UNIX_EPOCH + Duration::from_secs(secs))
        }
        Err(_) => started,
    };
    let mut out = report_since(target_dir, since)?;
    out.push_str(&counts(&counts_dir(target_dir), since)?);
    Ok(out)
}

/// The request-count tables (`*.md`) in `dir` written at or after `since` (all of them when
/// `None`), in file-name order, each under a line naming its file. Empty when there are none.
pub(crate) fn counts(dir: &Path, since: Option<SystemTime>) -> Result<String, String> {
    if !dir.is_dir() {
        return Ok(String::new());
    }
    let cutoff = since.map(|s| s.checked_sub(Duration::from_secs(1)).unwrap_or(s));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let written = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if cutoff.is_none_or(|c| written >= c) {
            files.push(path);
        }
    }
    files.sort();
    let mut out = String::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = writeln!(out, "\nRequest counts ({}):\n", path.display());
        out.push_str(text.trim_end());
        out.push('\n');
    }
    Ok(out)
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
            let mut note = async_note(b, &rows, records);
            if note.is_empty() && counts_shards(group) {
                note = "records/s = shards/s".to_owned();
            }
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

/// Whether a group counts shards as its elements (`publish/local/16_shards`).
fn counts_shards(group: &str) -> bool {
    group
        .rsplit('/')
        .next()
        .is_some_and(|last| last.ends_with("_shards"))
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
mod tests;
