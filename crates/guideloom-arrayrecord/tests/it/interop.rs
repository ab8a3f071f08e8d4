//! Interop with the real `array_record` package (0.8.6, in the project venv `.xtask/venv`),
//! both directions, for every codec × group size {1, 7, 256, 65536} × record sizes {0 B, 1 B,
//! 1 KiB, 300 KiB, records straddling 64 KiB block boundaries}, plus Brotli's large window,
//! a 2^27 zstd window, block-boundary padding and the defaults:
//! - the package writes → guideloom reads the same records;
//! - guideloom writes → the package's `ArrayRecordReader` (and grain's `ArrayRecordDataSource`)
//!   read the same records.
//!
//! Runs when the venv has the package, and always under `GUIDELOOM_CI=1`, where a missing
//! venv or package is a failure (`cargo xtask servers up` / `cargo xtask ci` install it).

use std::path::{Path, PathBuf};
use std::process::Command;

use guideloom_arrayrecord::{
    ArrayRecordReadOptions, ArrayRecordReader, ArrayRecordWriter, ArrayRecordWriterOptions,
};
use guideloom_io::{Backend, PreadIo};
use serde_json::{Value, json};

fn ci() -> bool {
    std::env::var("GUIDELOOM_CI").is_ok_and(|v| v == "1")
}

/// The venv's python when it can import array_record (and grain, under CI); `None` to skip.
fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".xtask/venv/bin/python");
    let probe = if ci() {
        "import array_record.python.array_record_module, grain.python"
    } else {
        "import array_record.python.array_record_module"
    };
    let ok = python.is_file()
        && Command::new(&python)
            .args(["-c", probe])
            .output()
            .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let why = format!(
        "{} cannot `{probe}` (run `cargo xtask servers up` to create the venv)",
        python.display()
    );
    assert!(!ci(), "GUIDELOOM_CI=1 but {why}");
    eprintln!("skipped: {why}");
    None
}

/// Deterministic records: pseudo-random bytes for even indices (incompressible), a repeated
/// pattern for odd ones (compressible).
fn records(set: &str) -> Vec<Vec<u8>> {
    let sizes: Vec<usize> = match set {
        "empty" => vec![0; 600],
        "one" => vec![1; 600],
        "kib" => vec![1024; 40],
        "large" => vec![300 * 1024; 4],
        "straddle" => vec![65000, 65536, 65537, 131072, 7, 65511, 65512, 24, 0, 200_000],
        _ => unreachable!("{set}"),
    };
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ sizes.len() as u64;
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            (0..n)
                .map(|j| {
                    if i % 2 == 0 {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state.to_le_bytes()[0]
                    } else {
                        u8::try_from((i + j / 3) % 251).unwrap()
                    }
                })
                .collect()
        })
        .collect()
}

fn save(path: &Path, records: &[Vec<u8>]) {
    let mut out = (records.len() as u64).to_le_bytes().to_vec();
    for r in records {
        out.extend_from_slice(&(r.len() as u64).to_le_bytes());
        out.extend_from_slice(r);
    }
    std::fs::write(path, out).unwrap();
}

fn check_file(path: &PathBuf, want: &[Vec<u8>], failures: &mut Vec<String>) {
    let name = path.display();
    let reader = match PreadIo::new().open(path) {
        Ok(r) => r,
        Err(e) => return failures.push(format!("{name}: {e}")),
    };
    let ar = match ArrayRecordReader::open(reader, &ArrayRecordReadOptions::default()) {
        Ok(ar) => ar,
        Err(e) => return failures.push(format!("{name}: {e}")),
    };
    if ar.len() != want.len() as u64 {
        return failures.push(format!(
            "{name}: {} records, expected {}",
            ar.len(),
            want.len()
        ));
    }
    for (i, w) in want.iter().enumerate() {
        match ar.get(i as u64) {
            Ok(got) if got == w[..] => {}
            Ok(got) => {
                return failures.push(format!("{name}: record {i}: {} bytes differ", got.len()));
            }
            Err(e) => return failures.push(format!("{name}: record {i}: {e}")),
        }
    }
    let all: Vec<u64> = (0..want.len() as u64).rev().collect();
    match ar.get_many(&all) {
        Ok(got) if got.iter().rev().zip(want).all(|(g, w)| g[..] == w[..]) => {}
        Ok(_) => failures.push(format!("{name}: get_many differs")),
        Err(e) => failures.push(format!("{name}: get_many: {e}")),
    }
}

#[test]
fn both_directions_with_the_array_record_package() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    for set in ["empty", "one", "kib", "large", "straddle"] {
        let recs = records(set);
        let recs_path = dir.path().join(format!("{set}.records"));
        save(&recs_path, &recs);
        let mut matrix: Vec<String> = Vec::new();
        for codec in ["uncompressed", "zstd:3", "snappy", "brotli:6"] {
            for group in [1u32, 7, 256, 65536] {
                matrix.push(format!("group_size:{group},{codec}"));
            }
        }
        if set == "kib" || set == "straddle" {
            // Beyond the matrix: Brotli's large window, a wide zstd window, padding, defaults.
            matrix.extend(
                [
                    "group_size:3,brotli:5,window_log:26",
                    "group_size:2,zstd:1,window_log:27,pad_to_block_boundary:true",
                    "pad_to_block_boundary:true,snappy",
                    "",
                ]
                .map(String::from),
            );
        }
        for (k, options) in matrix.into_iter().enumerate() {
            let case = format!("{set}-{k}");
            let rust_file = dir.path().join(format!("{case}.rust.array_record"));
            let py_out = dir.path().join(format!("{case}.py.array_record"));
            let opts: ArrayRecordWriterOptions = options.parse().unwrap();
            let mut w = ArrayRecordWriter::create(&rust_file, opts).unwrap();
            for r in &recs {
                w.write(r).unwrap();
            }
            w.finish().unwrap();
            jobs.push(json!({
                "records": recs_path, "options": options,
                "rust_file": rust_file, "py_out": py_out,
            }));
            expected.push((py_out, set, options));
        }
    }
    let jobs_path = dir.path().join("jobs.json");
    std::fs::write(&jobs_path, serde_json::to_vec(&jobs).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&jobs_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "interop.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();
    let mut failures: Vec<String> = report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("python reading guideloom's file: {}", f.as_str().unwrap()))
        .collect();
    assert_eq!(report["jobs"].as_u64(), Some(jobs.len() as u64));
    if ci() {
        assert_eq!(
            report["grain_checked"].as_u64(),
            Some(jobs.len() as u64),
            "{report}"
        );
    }
    // Not required (codec implementations may encode differently), but worth seeing.
    let mut differ = Vec::new();
    for (py_out, set, options) in &expected {
        check_file(py_out, &records(set), &mut failures);
        let rust_file = py_out.to_string_lossy().replace(".py.", ".rust.");
        if std::fs::read(py_out).ok() != std::fs::read(rust_file).ok() {
            differ.push(format!("{set} `{options}`"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} files each way, {} byte-identical (not: {}); grain checked {} of guideloom's",
        jobs.len(),
        jobs.len() - differ.len(),
        differ.join(", "),
        report["grain_checked"]
    );
}
