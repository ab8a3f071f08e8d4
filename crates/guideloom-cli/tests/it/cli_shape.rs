//! The command line's shape (issue 15, "the newcomer's path"): every command takes ROOT as a
//! positional or as `--root` (today's spellings of each keep working), global options are
//! listed once, `info` on a root with written but unpublished shards, `annotations`, `cat
//! --end` past the end, and `quickstart`'s follow-up commands running as printed. On a local
//! root and, for `annotations` and the root spellings of reads, on moto when
//! `GUIDELOOM_S3_ENDPOINT` / `GUIDELOOM_S3_BUCKET` are set.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{fails, guideloom, json, ok, stderr, write_and_publish, write_jsonl};

/// Exit status 2 (a usage error) with `needle` in the message.
#[track_caller]
fn usage_error(o: std::process::Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(&o));
    assert!(stderr(&o).contains(needle), "{}", stderr(&o));
}

/// Writes two workers and publishes them, `write`/`publish` once with each spelling.
fn two_spellings_root(tmp: &Path, r: &str, run: &dyn Fn(&[&str]) -> std::process::Output) {
    let a = tmp.join("a.jsonl");
    write_jsonl(&a, "a", 30);
    let a = a.to_str().unwrap();
    // write: --root (today's spelling) and positional ROOT.
    ok(run(&["write", "--root", r, "--work-id", "w0", a]));
    ok(run(&["write", r, "--work-id", "w1", a]));
    // publish: --root (today's) first, then positional ROOT.
    let p = json(&ok(run(&[
        "publish",
        "--root",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s1",
        "--work-id",
        "w0",
        "--json",
    ])));
    assert_eq!(p["records"], 30, "{p}");
    let p = json(&ok(run(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s2",
        "--append",
        "--work-id",
        "w1",
        "--json",
    ])));
    assert_eq!(p["records"], 60, "{p}");
}

/// Every command that takes a root, once with each spelling; the outputs agree.
fn every_command_both_ways(tmp: &Path, r: &str, run: &dyn Fn(&[&str]) -> std::process::Output) {
    two_spellings_root(tmp, r, run);
    let both = |args: &[&str]| -> [String; 2] {
        // `args` holds "ROOT" where the root goes: positional, then `--root ROOT` at the end.
        let positional: Vec<&str> = args
            .iter()
            .map(|a| if *a == "ROOT" { r } else { a })
            .collect();
        let mut flagged: Vec<&str> = args.iter().copied().filter(|a| *a != "ROOT").collect();
        flagged.extend_from_slice(&["--root", r]);
        [ok(run(&positional)), ok(run(&flagged))]
    };
    let [a, b] = both(&["info", "ROOT", "--json"]);
    assert_eq!(json(&a)["latest"], "s2");
    assert_eq!(json(&a), json(&b));
    let [a, b] = both(&["get", "ROOT", "31"]);
    assert_eq!(json(&a)["id"], "a-1");
    assert_eq!(a, b);
    let [a, b] = both(&["cat", "ROOT", "--start", "58"]);
    assert_eq!(a.lines().count(), 2);
    assert_eq!(a, b);
    let [a, _] = both(&["verify", "ROOT", "--deep"]);
    assert!(a.starts_with("ok:"), "{a}");
    let values = tmp.join("v.jsonl");
    std::fs::write(
        &values,
        (0..60).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .unwrap();
    let v = values.to_str().unwrap();
    ok(run(&["annotate", r, "--name", "q", v]));
    ok(run(&["annotate", "--name", "q", v, "--root", r]));
    let [a, b] = both(&["annotations", "ROOT", "--json"]);
    let sets = json(&a)["annotation_sets"].as_array().unwrap().len();
    assert_eq!(sets, 2, "{a}");
    assert_eq!(json(&a), json(&b));
    let [a, b] = both(&[
        "annotations",
        "ROOT",
        "q",
        "--set-version",
        "v1",
        "--start",
        "40",
        "--end",
        "43",
    ]);
    assert_eq!(a, "40\n41\n42\n");
    assert_eq!(a, b);
}

#[test]
fn every_command_takes_root_either_way_locally() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    every_command_both_ways(tmp.path(), r, &|args| guideloom(args));
    // bench (local roots only).
    let a = json(&ok(guideloom(&["bench", r, "--reads", "5", "--json"])));
    let b = json(&ok(guideloom(&[
        "bench", "--root", r, "--reads", "5", "--json",
    ])));
    assert_eq!(a["snapshot_id"], b["snapshot_id"]);

    // The same root twice is fine; two different roots, or none, are usage errors.
    ok(guideloom(&["info", r, "--root", r]));
    let other = tmp.path().join("other");
    let o = other.to_str().unwrap();
    usage_error(
        guideloom(&["info", r, "--root", o]),
        "given twice with different values",
    );
    usage_error(guideloom(&["get", r, "1", "--root", o]), "given twice");
    usage_error(
        guideloom(&["write", r, "--root", o, "--work-id", "x", "in.jsonl"]),
        "given twice",
    );
    usage_error(guideloom(&["info"]), "ROOT is required");
    usage_error(guideloom(&["get", "3"]), "ROOT is required");
    assert!(!other.exists(), "nothing written for a refused command");
}

/// moto, when configured: the same commands both ways on an `s3://` root.
#[cfg(feature = "s3")]
#[test]
fn every_command_takes_root_either_way_on_s3() {
    let (Ok(endpoint), Ok(bucket)) = (
        std::env::var("GUIDELOOM_S3_ENDPOINT"),
        std::env::var("GUIDELOOM_S3_BUCKET"),
    ) else {
        assert!(
            std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
            "GUIDELOOM_CI=1 but GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET are not set"
        );
        println!("skipped: GUIDELOOM_S3_ENDPOINT / GUIDELOOM_S3_BUCKET not set (no S3 server)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let root = format!("s3://{bucket}/cli-shape-{}-{nanos}", std::process::id());
    let env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ];
    every_command_both_ways(tmp.path(), &root, &|args| {
        let mut all = args.to_vec();
        all.push("--s3-allow-http");
        common::guideloom_env(&all, &env)
    });
}

#[test]
fn global_options_are_listed_once_and_work_after_the_command() {
    let top = ok(guideloom(&["--help"]));
    assert!(
        top.contains("Global options (before or after the command's name):"),
        "{top}"
    );
    for flag in [
        "--connect-timeout",
        "--deadline",
        "--s3-profile",
        "--retries",
    ] {
        assert_eq!(top.matches(flag).count(), 1, "{flag} once in:\n{top}");
    }
    for command in [
        "info",
        "get",
        "cat",
        "write",
        "publish",
        "annotations",
        "bench",
    ] {
        let help = ok(guideloom(&[command, "--help"]));
        for flag in [
            "--connect-timeout",
            "--deadline",
            "--retries",
            "--s3-path-style",
        ] {
            assert!(
                !help.contains(flag),
                "{command} --help lists {flag}:\n{help}"
            );
        }
        assert!(help.contains("guideloom --help"), "{command}: {help}");
        assert!(help.contains("--root <ROOT>"), "{command}: {help}");
    }
    // Still accepted before and after the command's name.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("a.jsonl");
    write_jsonl(&input, "a", 3);
    write_and_publish(r, input.to_str().unwrap());
    let after = ok(guideloom(&[
        "get",
        r,
        "1",
        "--timeout",
        "5",
        "--retries",
        "1",
        "--json",
    ]));
    assert_eq!(json(&after)["record"]["id"], "a-1");
    let before = ok(guideloom(&["--timeout", "5", "--json", "get", r, "1"]));
    assert_eq!(after, before);
    // A bad value is still a usage error after the command's name.
    usage_error(guideloom(&["get", r, "1", "--timeout", "0"]), "--timeout");
}

#[test]
fn info_shows_written_but_unpublished_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("a.jsonl");
    write_jsonl(&input, "a", 200);
    let i = input.to_str().unwrap();
    ok(guideloom(&[
        "write",
        "--root",
        r,
        "--work-id",
        "w0",
        "--max-shard-bytes",
        "4096",
        i,
    ]));
    let v = json(&ok(guideloom(&["info", r, "--json"])));
    assert_eq!(v["published"], false, "{v}");
    assert_eq!(v["dataset_id"], serde_json::Value::Null);
    assert_eq!(v["latest"], serde_json::Value::Null);
    assert_eq!(v["snapshots"], serde_json::json!([]));
    let shards = v["unpublished"].as_array().unwrap();
    assert!(shards.len() > 1, "{v}");
    assert_eq!(v["unpublished_shards"], shards.len());
    for s in shards {
        let key = s["key"].as_str().unwrap();
        let size = std::fs::metadata(root.join(key)).unwrap().len();
        assert_eq!(s["bytes"], size, "{key}");
    }
    let text = ok(guideloom(&["info", r]));
    assert!(text.contains("no snapshot is published"), "{text}");
    assert!(text.contains("shards/w0/00000000.glm"), "{text}");
    // Published, the same listing of what is left over.
    ok(guideloom(&[
        "publish",
        "--root",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
    ok(guideloom(&["write", "--root", r, "--work-id", "w1", i]));
    let v = json(&ok(guideloom(&["info", r, "--json"])));
    assert_eq!(v["published"], true);
    assert_eq!(v["unpublished"][0]["key"], "shards/w1/00000000.glm", "{v}");
    // An empty directory is still "no published dataset here".
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = fails(guideloom(&["info", empty.to_str().unwrap()]));
    assert!(err.contains("no published dataset"), "{err}");
}

#[test]
fn annotations_lists_sets_and_prints_values() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("a.jsonl");
    write_jsonl(&input, "a", 4);
    write_and_publish(r, input.to_str().unwrap());
    assert_eq!(ok(guideloom(&["annotations", r])), "annotation sets: 0\n");
    let values = tmp.path().join("v.jsonl");
    // Exact text comes back: key order and number spelling kept.
    std::fs::write(&values, "{\"b\":1,\"a\":2}\n1E2\n\"x\"\nnull\n").unwrap();
    let v = values.to_str().unwrap();
    ok(guideloom(&["annotate", r, "--name", "lab", v]));
    std::fs::write(&values, "1\n2\n3\n4\n").unwrap();
    ok(guideloom(&["annotate", r, "--name", "lab", v]));
    let list = ok(guideloom(&["annotations", r]));
    assert!(list.contains("lab/v1 on snapshot s: 4 values"), "{list}");
    assert!(list.contains("lab/v2 on snapshot s: 4 values"), "{list}");
    // The latest version by default; --set-version picks one.
    assert_eq!(ok(guideloom(&["annotations", r, "lab"])), "1\n2\n3\n4\n");
    assert_eq!(
        ok(guideloom(&["annotations", r, "lab", "--set-version", "v1"])),
        "{\"b\":1,\"a\":2}\n1E2\n\"x\"\nnull\n"
    );
    assert_eq!(
        ok(guideloom(&[
            "annotations",
            r,
            "lab",
            "--set-version",
            "v1",
            "--index",
            "1"
        ])),
        "1E2\n"
    );
    // --end past the end clamps, like cat.
    assert_eq!(
        ok(guideloom(&[
            "annotations",
            r,
            "lab",
            "--start",
            "2",
            "--end",
            "99"
        ])),
        "3\n4\n"
    );
    let lines = ok(guideloom(&[
        "annotations",
        r,
        "lab",
        "--json",
        "--start",
        "3",
    ]));
    let v = json(lines.trim());
    assert_eq!(v, serde_json::json!({"index": 3, "set": "lab", "value": 4}));
    let err = fails(guideloom(&["annotations", r, "lab", "--index", "4"]));
    assert!(err.contains("has 4 values"), "{err}");
    let err = fails(guideloom(&["annotations", r, "nope"]));
    assert!(
        err.contains("no annotation set nope") && err.contains("lab/v1"),
        "{err}"
    );
}

#[test]
fn cat_end_past_the_end_clamps() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("a.jsonl");
    write_jsonl(&input, "a", 5);
    write_and_publish(r, input.to_str().unwrap());
    let all = ok(guideloom(&["cat", r]));
    assert_eq!(ok(guideloom(&["cat", r, "--end", "1000"])), all);
    let tail = ok(guideloom(&["cat", r, "--start", "3", "--end", "1000"]));
    assert_eq!(tail.lines().count(), 2);
    assert_eq!(ok(guideloom(&["cat", r, "--start", "5", "--end", "9"])), "");
    let err = fails(guideloom(&["cat", r, "--start", "6"]));
    assert!(err.contains("of 5 records"), "{err}");
}

#[test]
fn quickstart_prints_commands_that_run_as_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("qs dir");
    // PATH without the binary's directory, as after `cargo run`.
    let out = Command::new(common::BIN)
        .args([
            "quickstart",
            dir.to_str().unwrap(),
            "--records-per-worker",
            "60",
            "--workers",
            "2",
        ])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = ok(out);
    assert!(
        text.contains("cargo install --path crates/guideloom-cli"),
        "{text}"
    );
    let tried: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Try"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert!(tried.len() >= 5, "{text}");
    for line in &tried {
        assert!(
            !line.starts_with("guideloom "),
            "not on PATH, so not runnable: {line}"
        );
        if line.contains(" bench ") {
            continue; // runs, but slowly in a debug build
        }
        let o = Command::new("sh")
            .args(["-c", line])
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert!(o.status.success(), "{line}: {}", stderr(&o));
    }
}
