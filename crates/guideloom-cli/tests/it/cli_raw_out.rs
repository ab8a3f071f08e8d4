//! Raw records in and out as bytes (issue 15, "the newcomer's path"): `get --raw`, `cat
//! --raw-dir` (create-only), input file names kept in the shard's metadata and shown by
//! `get --json` / `cat --json`, `--format raw` reporting what it skipped on stderr, progress
//! bars with totals, ETA and bytes on a terminal, and `bench` touching every byte it times.

use crate::common;

use std::path::Path;

use common::{fails, guideloom, json, ok, stderr, stdout, write_and_publish};

/// A directory of raw records: binary, empty, UTF-8 with a newline; names sort as listed.
fn raw_inputs(dir: &Path) -> Vec<(&'static str, Vec<u8>)> {
    std::fs::create_dir_all(dir).unwrap();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("a.bin", (0..=255u8).rev().collect()),
        ("b.empty", Vec::new()),
        ("c.txt", b"line one\nline two\n".to_vec()),
        ("d.bin", vec![0xff, 0x00, 0x0a, 0x0d]),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    files
}

/// A published root of `raw_inputs` (one work id, one snapshot).
fn raw_root(tmp: &Path) -> (String, Vec<(&'static str, Vec<u8>)>) {
    let dir = tmp.join("files");
    let files = raw_inputs(&dir);
    let root = tmp.join("root").to_str().unwrap().to_owned();
    ok(guideloom(&[
        "write",
        "--root",
        &root,
        "--work-id",
        "w",
        "--format",
        "raw",
        dir.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        "--root",
        &root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
    (root, files)
}

#[test]
fn get_raw_writes_the_exact_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, files) = raw_root(tmp.path());
    for (i, (name, bytes)) in files.iter().enumerate() {
        let o = guideloom(&["get", &root, &i.to_string(), "--raw"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(&o.stdout, bytes, "{name}");
    }
    // A CBOR record's raw bytes are its stored CBOR.
    let input = tmp.path().join("a.jsonl");
    std::fs::write(&input, "{\"a\":1}\n").unwrap();
    let cbor_root = tmp.path().join("cbor");
    let c = cbor_root.to_str().unwrap();
    write_and_publish(c, input.to_str().unwrap());
    let o = guideloom(&["get", c, "0", "--raw"]);
    assert_eq!(o.stdout, [0xa1, 0x61, b'a', 0x01], "{}", stderr(&o));
    // --raw with --json is refused; an index past the end says the length.
    let err = fails(guideloom(&["get", &root, "0", "--raw", "--json"]));
    assert!(err.contains("--raw"), "{err}");
    let err = fails(guideloom(&["get", &root, "4", "--raw"]));
    assert!(err.contains("has 4 records"), "{err}");
}

#[test]
fn cat_raw_dir_writes_one_file_per_record_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, files) = raw_root(tmp.path());
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    let text = ok(guideloom(&["cat", &root, "--raw-dir", o]));
    assert!(text.contains("wrote 4 record(s)"), "{text}");
    for (i, (name, bytes)) in files.iter().enumerate() {
        let got = std::fs::read(out.join(format!("{i:08}"))).unwrap();
        assert_eq!(&got, bytes, "{name}");
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 4);
    // Again into the same directory: refused, naming the first file, which is unchanged.
    std::fs::write(out.join("00000000"), b"mine").unwrap();
    let err = fails(guideloom(&["cat", &root, "--raw-dir", o]));
    assert!(
        err.contains("00000000") && err.contains("never overwrites"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("00000000")).unwrap(), b"mine");
    // A range into a fresh directory, with --json, and --end clamped.
    let part = tmp.path().join("part");
    let v = json(&ok(guideloom(&[
        "cat",
        &root,
        "--start",
        "2",
        "--end",
        "99",
        "--raw-dir",
        part.to_str().unwrap(),
        "--json",
    ])));
    assert_eq!(v["records"], 2, "{v}");
    assert_eq!(v["bytes"], files[2].1.len() + files[3].1.len());
    assert_eq!(std::fs::read(part.join("00000003")).unwrap(), files[3].1);
    assert!(!part.join("00000001").exists());
}

#[test]
fn raw_input_file_names_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, files) = raw_root(tmp.path());
    let v = json(&ok(guideloom(&["get", &root, "2", "--json"])));
    assert_eq!(v["name"], "c.txt", "{v}");
    assert_eq!(v["record"], "line one\nline two\n");
    let lines = ok(guideloom(&["cat", &root, "--json"]));
    let names: Vec<String> = lines
        .lines()
        .map(|l| json(l)["name"].as_str().unwrap().to_owned())
        .collect();
    let want: Vec<String> = files.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(names, want);
    // Records written from JSON Lines have no name field.
    let input = tmp.path().join("a.jsonl");
    std::fs::write(&input, "1\n").unwrap();
    let other = tmp.path().join("cbor");
    let c = other.to_str().unwrap();
    write_and_publish(c, input.to_str().unwrap());
    let v = json(&ok(guideloom(&["get", c, "0", "--json"])));
    assert!(v.get("name").is_none(), "{v}");
}

#[cfg(unix)]
#[test]
fn raw_input_reports_what_it_skipped_on_stderr_by_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    raw_inputs(&dir);
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::create_dir(dir.join("sub2")).unwrap();
    nix::unistd::mkfifo(&dir.join("p.fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink(dir.join("a.bin"), dir.join("link")).unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let d = dir.to_str().unwrap();
    let o = guideloom(&["write", "--root", r, "--work-id", "w", "--format", "raw", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("skipped 4 entries"), "{err}");
    assert!(err.contains("1 FIFO (p.fifo)"), "{err}");
    assert!(err.contains("1 symlink (link)"), "{err}");
    assert!(err.contains("2 subdirectories (sub/, sub2/)"), "{err}");
    assert!(stdout(&o).contains("wrote 4 records"), "{}", stdout(&o));
    let o = guideloom(&[
        "write",
        "--root",
        r,
        "--work-id",
        "w2",
        "--format",
        "raw",
        d,
        "--json",
    ]);
    let v = json(&stdout(&o));
    assert_eq!(v["skipped_by_kind"]["fifos"], serde_json::json!(["p.fifo"]));
    assert_eq!(
        v["skipped_by_kind"]["symlinks"],
        serde_json::json!(["link"])
    );
    assert_eq!(
        v["skipped_by_kind"]["subdirectories"],
        serde_json::json!(["sub/", "sub2/"])
    );
    assert!(stderr(&o).contains("1 FIFO (p.fifo)"), "{}", stderr(&o));
}

/// Progress bars are drawn on a terminal only: run under `script` (a pseudo-terminal) they
/// show the total, the ETA and bytes; piped, stderr stays empty.
#[cfg(unix)]
#[test]
fn progress_bars_show_total_eta_and_bytes_on_a_terminal() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: no `script` to give the binary a terminal");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..200 {
        std::fs::write(dir.join(format!("{i:04}")), vec![b'x'; 1000]).unwrap();
    }
    let root = tmp.path().join("root");
    let cmd = format!(
        "{} write {} --work-id w --format raw {}",
        common::BIN,
        root.display(),
        dir.display()
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    let tty = stdout(&o);
    assert!(o.status.success(), "{tty}");
    assert!(tty.contains("ETA"), "{tty:?}");
    assert!(
        tty.contains("/195.31 KiB"),
        "total bytes of the input: {tty:?}"
    );
    // Piped: no bar.
    let o = guideloom(&[
        "write",
        "--root",
        root.to_str().unwrap(),
        "--work-id",
        "w2",
        "--format",
        "raw",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(stderr(&o), "");
}

/// `bench` sums every byte it reads, backends and ceilings alike: the sums match (the same
/// bytes were read) and the sequential ones equal the records' bytes summed here.
#[test]
fn bench_touches_every_byte_it_times() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    let mut total = 0u64;
    for i in 0..300u32 {
        let bytes: Vec<u8> = (0..500 + i).map(|j| (j * 7 + i).to_le_bytes()[0]).collect();
        total += bytes.iter().map(|&b| u64::from(b)).sum::<u64>();
        std::fs::write(dir.join(format!("{i:04}")), bytes).unwrap();
    }
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    ok(guideloom(&[
        "write",
        "--root",
        r,
        "--work-id",
        "w",
        "--format",
        "raw",
        "--max-shard-bytes",
        "65536",
        dir.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        "--root",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
    let v = json(&ok(guideloom(&["bench", r, "--reads", "100", "--json"])));
    let rows = v["rows"].as_array().unwrap();
    let mut backends = Vec::new();
    for row in rows {
        let sum = row["checksum"].as_u64().unwrap();
        assert_ne!(sum, 0, "{row}");
        assert_eq!(row["checksum"], row["ceiling_checksum"], "{row}");
        if row["pattern"] == "sequential" {
            assert_eq!(sum, total, "{row}");
        }
        backends.push(row["backend"].as_str().unwrap().to_owned());
    }
    assert!(backends.iter().any(|b| b == "mmap"), "{backends:?}");
}
