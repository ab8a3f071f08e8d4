//! Tests of the summary table and the request-count tables, on fake criterion output.

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
fn publish_groups_and_request_count_tables() {
    let s = Scratch::new();
    let g = "publish/s3/16_shards";
    fake(&s.0, g, "ceiling_put", r#"{"Elements":16}"#, 100e6);
    fake(&s.0, g, "upload_publish", r#"{"Elements":16}"#, 200e6);
    let t = report_since(&s.0, None).unwrap();
    let r = row(&t, g, "upload_publish");
    assert_eq!(r[4], "80.0/s"); // 16 shards in 200 ms
    assert_eq!(r[7], "50%");
    assert_eq!(r[8], "", "publication groups have no target");
    assert_eq!(r[9], "records/s = shards/s");

    let dir = counts_dir(&s.0);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("publish.md"),
        "| store | requests |\n| s3 | 20 |\n",
    )
    .unwrap();
    fs::write(dir.join("notes.txt"), "not a table").unwrap();
    let old = dir.join("old.md");
    fs::write(&old, "stale table").unwrap();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    let c = counts(&dir, Some(SystemTime::now() - Duration::from_secs(60))).unwrap();
    assert!(c.contains("publish.md") && c.contains("| s3 | 20 |"), "{c}");
    assert!(!c.contains("stale") && !c.contains("not a table"), "{c}");
    assert!(counts(&dir, None).unwrap().contains("stale table"));
    assert_eq!(counts(&s.0.join("missing"), None).unwrap(), "");
}

#[test]
fn record_sizes_come_from_group_segments() {
    assert_eq!(record_size("io/1KiB/random_single"), Some(1024.0));
    assert_eq!(record_size("io/256KiB/sequential"), Some(262_144.0));
    assert_eq!(record_size("format/512B/read"), Some(512.0));
    assert_eq!(record_size("io/random_single"), None);
    assert_eq!(record_size("io/2048u32/slice"), None);
}
