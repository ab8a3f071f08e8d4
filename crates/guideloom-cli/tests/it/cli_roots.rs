//! Root kinds beyond a plain directory, through the real `guideloom` binary: a local path
//! declared as a mounted bucket (`--mount`), and a read-only `http://` root served by the
//! nginx test server (`GUIDELOOM_NGINX_URL` / `GUIDELOOM_NGINX_ROOT`; skipped when unset,
//! a failure under `GUIDELOOM_CI=1`).

use crate::common;

use std::path::Path;

use common::{fails, guideloom, json, ok};

/// Writes 50 CBOR records (`{"i": N, "text": "row N"}`) into `root` as several shards and
/// publishes them as snapshot `s1` of dataset `d`; `extra` goes before the subcommand.
fn publish_small(root: &str, tmp: &Path, extra: &[&str]) {
    let input = tmp.join("in.jsonl");
    let lines: String = (0..50)
        .map(|i| format!("{{\"i\": {i}, \"text\": \"row {i}\"}}\n"))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let run = |args: &[&str]| {
        let all: Vec<&str> = extra.iter().chain(args).copied().collect();
        ok(guideloom(&all))
    };
    run(&[
        "write",
        "--root",
        root,
        "--work-id",
        "w",
        "--max-shard-bytes",
        "1024",
        input.to_str().unwrap(),
    ]);
    run(&[
        "publish",
        "--root",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s1",
    ]);
}

#[test]
fn mount_publishes_and_refuses_annotations_naming_the_s3_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mounted");
    let r = root.to_str().unwrap();
    publish_small(r, tmp.path(), &["--mount"]);
    let info = json(&ok(guideloom(&["--mount", "info", r, "--json"])));
    assert_eq!(info["latest"], "s1");
    assert_eq!(info["snapshots"][0]["records"], 50);
    let rec = json(&ok(guideloom(&["--mount", "get", r, "42"])));
    assert_eq!(rec["text"], "row 42");

    let values = tmp.path().join("values.jsonl");
    std::fs::write(&values, "1\n".repeat(50)).unwrap();
    let err = fails(guideloom(&[
        "--mount",
        "annotate",
        r,
        "--name",
        "q",
        values.to_str().unwrap(),
    ]));
    assert!(err.contains(r), "names the root: {err}");
    assert!(err.contains("mounted bucket"), "{err}");
    assert!(err.contains("s3://"), "says to use the s3:// root: {err}");
    // Nothing was written: the catalog has no set.
    let info = json(&ok(guideloom(&["info", r, "--json"])));
    assert_eq!(info["annotation_sets"].as_array().unwrap().len(), 0);

    // --mount declares a local path only.
    let err = fails(guideloom(&["--mount", "info", "s3://bucket/prefix"]));
    assert!(err.contains("--mount"), "{err}");
}

#[cfg(feature = "http")]
#[test]
fn http_root_info_get_cat_verify() {
    let Some((url, served)) = common::nginx() else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let subdir = format!("cli-http-{}-{nanos}", std::process::id());
    let dir = served.join(&subdir);
    let _served = common::Served(dir.clone());
    let tmp = tempfile::tempdir().unwrap();
    publish_small(dir.to_str().unwrap(), tmp.path(), &[]);
    let base = format!("{}/{subdir}", url.trim_end_matches('/'));

    let info = json(&ok(guideloom(&["info", &base, "--json"])));
    assert_eq!(info["dataset_id"], "d");
    assert_eq!(info["latest"], "s1");
    assert_eq!(info["snapshots"][0]["records"], 50);
    assert!(info["unpublished_shards"].is_null(), "{info}");
    let rec = json(&ok(guideloom(&["get", &base, "49"])));
    assert_eq!(rec["text"], "row 49");
    let lines = ok(guideloom(&["cat", &base, "--start", "10", "--end", "30"]));
    let got: Vec<i64> = lines
        .lines()
        .map(|l| json(l)["i"].as_i64().unwrap())
        .collect();
    assert_eq!(got, (10..30).collect::<Vec<_>>());
    ok(guideloom(&["verify", &base, "--deep"]));
    let err = fails(guideloom(&["get", &base, "50"]));
    assert!(err.contains("out of range"), "{err}");
    // Writing through the URL is refused, naming the root.
    let err = fails(guideloom(&["annotate", &base, "--name", "q", "-"]));
    assert!(err.contains(&subdir), "{err}");
}
