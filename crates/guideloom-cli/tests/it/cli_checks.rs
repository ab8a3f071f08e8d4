//! Runs the real `guideloom` binary against local roots in temporary directories: malformed
//! input and bad arguments, `verify` finding truncated and corrupted shards, raw records from a
//! directory, `quickstart` and `bench`.

use crate::common;

use std::path::Path;

use common::{fails, files, guideloom, json, ok, stdout, write_jsonl};

#[test]
fn malformed_json_names_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("bad.jsonl");
    std::fs::write(&input, "{\"a\": 1}\n\n{\"a\": 2}\n{\"a\": \n{\"a\": 4}\n").unwrap();
    let root = tmp.path().join("root");
    let err = fails(guideloom(&[
        "write",
        "--root",
        root.to_str().unwrap(),
        "--work-id",
        "w",
        input.to_str().unwrap(),
    ]));
    assert!(err.contains("bad.jsonl:4:"), "{err}");
    assert!(err.contains("malformed JSON"), "{err}");
    // Nothing was written for the failed worker: no shard, no marker, anywhere.
    let written = files(&root);
    assert!(
        written.iter().all(|f| !f.starts_with("shards/")),
        "{written:?}"
    );
}

#[test]
fn bad_arguments_name_the_path_or_argument() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let err = fails(guideloom(&["info", missing.to_str().unwrap()]));
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    let err = fails(guideloom(&[
        "write",
        "--root",
        tmp.path().join("r").to_str().unwrap(),
        "--work-id",
        "w",
        missing.to_str().unwrap(),
    ]));
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    // A directory with the cbor format, a file with the raw format.
    let err = fails(guideloom(&[
        "write",
        "--root",
        tmp.path().join("r").to_str().unwrap(),
        "--work-id",
        "w",
        tmp.path().to_str().unwrap(),
    ]));
    assert!(err.contains("--format raw"), "{err}");
    let empty_root = tmp.path().join("empty");
    std::fs::create_dir(&empty_root).unwrap();
    let err = fails(guideloom(&["get", empty_root.to_str().unwrap(), "0"]));
    assert!(err.contains("no published dataset"), "{err}");
    let input = tmp.path().join("in.jsonl");
    write_jsonl(&input, "x", 3);
    let err = fails(guideloom(&[
        "write",
        "--root",
        tmp.path().join("r").to_str().unwrap(),
        "--work-id",
        "../escape",
        input.to_str().unwrap(),
    ]));
    assert!(
        err.contains("--work-id") && err.contains("../escape"),
        "{err}"
    );
    // Usage errors are clap's, status 2.
    let o = guideloom(&["get"]);
    assert_eq!(o.status.code(), Some(2));
    let o = guideloom(&[
        "write",
        "--root",
        "x",
        "--work-id",
        "w",
        "--format",
        "xml",
        "in",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = guideloom(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}

fn small_dataset(tmp: &Path) -> String {
    let input = tmp.join("in.jsonl");
    write_jsonl(&input, "r", 400);
    let root = tmp.join("root");
    let r = root.to_str().unwrap().to_owned();
    ok(guideloom(&[
        "write",
        "--root",
        &r,
        "--work-id",
        "w",
        "--max-shard-bytes",
        "4096",
        input.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        "--root",
        &r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
    r
}

#[test]
fn verify_detects_a_truncated_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let root = small_dataset(tmp.path());
    ok(guideloom(&["verify", &root]));
    let shard = Path::new(&root).join("shards/w/00000001.glm");
    let len = std::fs::metadata(&shard).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap();
    f.set_len(len - 10).unwrap();
    let o = guideloom(&["verify", &root]);
    let out = stdout(&o);
    let err = fails(o);
    assert!(err.contains("1 problem"), "{err}");
    let problems: Vec<&str> = out.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    assert_eq!(problems.len(), 1, "{out}");
    assert!(problems[0].contains("shards/w/00000001.glm"), "{out}");
    assert!(problems[0].contains("truncated"), "{out}");
    let o = guideloom(&["verify", &root, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&stdout(&o));
    assert_eq!(v["sound"], false);
    assert_eq!(v["problems"][0]["object"], "shards/w/00000001.glm");
    // Reading a record of it fails with a one-line error naming the shard.
    let err = fails(guideloom(&["cat", &root]));
    assert!(err.contains("shards/w/00000001.glm"), "{err}");
}

#[test]
fn deep_verify_detects_a_corrupted_record() {
    let tmp = tempfile::tempdir().unwrap();
    let root = small_dataset(tmp.path());
    let shard = Path::new(&root).join("shards/w/00000002.glm");
    let mut bytes = std::fs::read(&shard).unwrap();
    // Flip a byte inside the first record's payload (just past the header).
    bytes[40] ^= 0x55;
    std::fs::write(&shard, &bytes).unwrap();
    // Sizes and footers are intact: the shallow check passes, the deep one does not.
    ok(guideloom(&["verify", &root]));
    let o = guideloom(&["verify", &root, "--deep"]);
    let out = stdout(&o);
    fails(o);
    let problems: Vec<&str> = out.lines().filter(|l| l.starts_with("PROBLEM")).collect();
    assert_eq!(problems.len(), 1, "{out}");
    assert!(problems[0].contains("shards/w/00000002.glm"), "{out}");
    assert!(problems[0].contains("checksum"), "{out}");
}

#[test]
fn raw_records_from_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("b.txt"), "second").unwrap();
    std::fs::write(dir.join("a.txt"), "first").unwrap();
    std::fs::write(dir.join("c.bin"), [0xffu8, 0x00]).unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let w = json(&ok(guideloom(&[
        "write",
        "--root",
        r,
        "--work-id",
        "files",
        "--format",
        "raw",
        "--json",
        dir.to_str().unwrap(),
    ])));
    assert_eq!(w["records"], 3);
    ok(guideloom(&[
        "publish",
        "--root",
        r,
        "--dataset-id",
        "raw",
        "--snapshot-id",
        "s",
    ]));
    assert_eq!(json(&ok(guideloom(&["get", r, "0"]))), "first");
    assert_eq!(json(&ok(guideloom(&["get", r, "1"]))), "second");
    assert_eq!(
        json(&ok(guideloom(&["get", r, "2"]))),
        serde_json::json!({"hex": "ff00"})
    );
}

#[test]
fn quickstart_builds_a_verified_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("qs");
    let out = json(&ok(guideloom(&[
        "quickstart",
        dir.to_str().unwrap(),
        "--records-per-worker",
        "300",
        "--workers",
        "3",
        "--json",
    ])));
    assert_eq!(out["records"], 900);
    let steps: Vec<&str> = out["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    for step in [
        "write",
        "publish",
        "annotate",
        "random reads",
        "loader epoch",
        "verify --deep",
    ] {
        assert!(steps.contains(&step), "{step} missing from {steps:?}");
    }
    let root = dir.join("dataset");
    let info = json(&ok(guideloom(&["info", root.to_str().unwrap(), "--json"])));
    assert_eq!(info["dataset_id"], "captions");
    assert_eq!(info["annotation_sets"][0]["values"], 900);
    let rec = json(&ok(guideloom(&["get", root.to_str().unwrap(), "301"])));
    assert_eq!(rec["id"], "cap-01-000001");
    // The human output says where the dataset is; a non-empty target is refused.
    let err = fails(guideloom(&["quickstart", dir.to_str().unwrap()]));
    assert!(err.contains("not empty"), "{err}");
    let text = ok(guideloom(&[
        "quickstart",
        tmp.path().join("qs2").to_str().unwrap(),
        "--records-per-worker",
        "50",
    ]));
    assert!(
        text.contains("qs2/dataset") && text.contains("verify --deep"),
        "{text}"
    );
}

#[test]
fn bench_prints_a_table_with_ceilings() {
    let tmp = tempfile::tempdir().unwrap();
    let root = small_dataset(tmp.path());
    let v = json(&ok(guideloom(&["bench", &root, "--reads", "50", "--json"])));
    let rows = v["rows"].as_array().unwrap();
    let backends: Vec<&str> = rows
        .iter()
        .map(|r| r["backend"].as_str().unwrap())
        .collect();
    for b in ["seek", "pread", "mmap"] {
        assert_eq!(
            backends.iter().filter(|x| **x == b).count(),
            2,
            "{backends:?}"
        );
    }
    for r in rows {
        assert!(r["bytes"].as_u64().unwrap() > 0);
        assert!(r["ceiling"].is_string());
    }
    let text = ok(guideloom(&["bench", &root, "--reads", "20"]));
    assert!(
        text.contains("raw pread") && text.contains("ratio"),
        "{text}"
    );
}
