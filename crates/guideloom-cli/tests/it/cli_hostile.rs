//! Hostile roots through the real binary: a damaged log gives every reader the same latest
//! snapshot and `verify` reports it; FIFOs and links planted in a root fail a command at once,
//! by name, and nothing is ever read or written outside the root.

#![cfg(unix)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A hang detector for commands that must fail at once (not a performance bound).
const HANG: Duration = Duration::from_secs(60);

/// Runs the binary, killing it (and failing the test) if it has not exited within [`HANG`].
fn bounded(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run guideloom");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "guideloom {args:?} hung for {HANG:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `n` records as worker `w` and publishes them as `snapshot`.
fn publish(root: &str, tmp: &Path, w: &str, snapshot: &str, n: usize) {
    let input = tmp.join(format!("{w}.jsonl"));
    write_jsonl(&input, w, n);
    ok(guideloom(&[
        "write",
        "--root",
        root,
        "--work-id",
        w,
        input.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        "--root",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        snapshot,
        "--work-id",
        w,
    ]));
}

#[cfg(feature = "http")]
#[test]
fn a_log_with_a_gap_is_reported_and_every_reader_sees_the_same_latest() {
    let Some((url, served)) = nginx() else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let subdir = format!("cli-gap-{}-{nanos}", std::process::id());
    let dir = served.join(&subdir);
    let _served = Served(dir.clone());
    let tmp = tempfile::tempdir().unwrap();
    let local = dir.to_str().unwrap();
    for (n, w) in ["a", "b", "c", "d"].iter().enumerate() {
        publish(local, tmp.path(), w, &format!("s{}", n + 1), 5 + n);
    }
    let http = format!("{}/{subdir}", url.trim_end_matches('/'));
    ok(guideloom(&["verify", local]));
    ok(guideloom(&["verify", &http]));
    // Delete entry 2 by hand: the local root used to report s4, the HTTP root s1.
    std::fs::remove_file(dir.join("log/00000000000000000002.json")).unwrap();
    let local_info = json(&ok(guideloom(&["info", local, "--json"])));
    let http_info = json(&ok(guideloom(&["info", &http, "--json"])));
    assert_eq!(local_info["latest"], "s1", "{local_info}");
    assert_eq!(http_info["latest"], "s1", "{http_info}");
    let local_rec = json(&ok(guideloom(&["get", local, "0"])));
    let http_rec = json(&ok(guideloom(&["get", &http, "0"])));
    assert_eq!(local_rec, http_rec);
    assert_eq!(local_rec["id"], "a-0");
    // verify reports the gap, by either way of reaching the root, and fails.
    for root in [local, http.as_str()] {
        let out = guideloom(&["verify", root]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{root}: {} / {}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        assert!(
            text.contains("PROBLEM log/: entry 2 is missing"),
            "{root}: {text}"
        );
        assert!(text.contains("snapshot #1"), "{root}: {text}");
    }
    let report = json(&stdout(&guideloom(&["verify", local, "--json"])));
    assert_eq!(report["sound"], false);
    // Publishing on a damaged log is refused, naming the missing entry.
    let input = tmp.path().join("e.jsonl");
    write_jsonl(&input, "e", 3);
    ok(guideloom(&[
        "write",
        "--root",
        local,
        "--work-id",
        "e",
        input.to_str().unwrap(),
    ]));
    let err = fails(guideloom(&[
        "publish",
        "--root",
        local,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s5",
        "--work-id",
        "e",
    ]));
    assert!(
        err.contains("log entry 2 is missing") && err.contains("entry 4 exists"),
        "{err}"
    );
}

#[test]
fn fifos_and_links_planted_in_a_root_fail_every_command_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let root_s = root.to_str().unwrap().to_owned();
    publish(&root_s, tmp.path(), "a", "s1", 7);
    let mkfifo = |p: &Path| {
        nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    };
    // The identity, the pointer and a shard, each a FIFO in turn: no command hangs. (`get`
    // reads the identity too: every log entry is checked against the dataset id.)
    let shard = root.join("shards/a/00000000.glm");
    for (victim, commands) in [
        (root.join("dataset.json"), vec!["info", "verify", "get"]),
        (root.join("snapshots/s1.json"), vec!["get", "verify"]),
        (shard.clone(), vec!["get", "verify"]),
    ] {
        let saved = std::fs::read(&victim).unwrap();
        std::fs::remove_file(&victim).unwrap();
        mkfifo(&victim);
        for command in commands {
            let args: Vec<&str> = match command {
                "get" => vec!["get", &root_s, "0", "--snapshot", "s1"],
                other => vec![other, &root_s],
            };
            let out = bounded(&args);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{args:?}: {} / {}",
                stdout(&out),
                stderr(&out)
            );
            let text = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                text.contains("FIFO") && text.contains(&victim.display().to_string()),
                "{args:?}: {text}"
            );
        }
        std::fs::remove_file(&victim).unwrap();
        std::fs::write(&victim, saved).unwrap();
    }
    ok(guideloom(&["verify", &root_s, "--deep"]));

    // A work directory that is a link out of the root: `write` is refused, nothing lands.
    std::os::unix::fs::symlink(outside.path(), root.join("shards/w9")).unwrap();
    let input = tmp.path().join("w9.jsonl");
    write_jsonl(&input, "w9", 4);
    let err = fails(bounded(&[
        "write",
        "--root",
        &root_s,
        "--work-id",
        "w9",
        input.to_str().unwrap(),
    ]));
    assert!(
        err.contains("symbolic link") && err.contains("shards/w9"),
        "{err}"
    );
    // `annotations/` a link out of the root: values, catalog and lock file stay out of it.
    std::os::unix::fs::symlink(outside.path(), root.join("annotations")).unwrap();
    let labels = tmp.path().join("labels.jsonl");
    std::fs::write(&labels, "1\n2\n3\n4\n5\n6\n7\n").unwrap();
    let err = fails(bounded(&[
        "annotate",
        &root_s,
        "--name",
        "labels",
        labels.to_str().unwrap(),
    ]));
    assert!(
        err.contains("symbolic link") && err.contains("annotations"),
        "{err}"
    );
    // A shard that is a link to a file outside is not read.
    let copy = outside.path().join("copy.glm");
    std::fs::copy(&shard, &copy).unwrap();
    std::fs::remove_file(&shard).unwrap();
    std::os::unix::fs::symlink(&copy, &shard).unwrap();
    let err = fails(bounded(&["get", &root_s, "1"]));
    assert!(err.contains("symbolic link"), "{err}");
    let listed: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(listed, vec![std::ffi::OsString::from("copy.glm")]);
}

/// A failed `write` poisons nothing: its shards are not marked complete, a default `publish`
/// skips them and says so, naming the work id is refused, and re-running the fixed write
/// resumes it.
#[test]
fn a_failed_write_leaves_nothing_a_later_publish_takes_unasked() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let root_s = root.to_str().unwrap().to_owned();
    // 2 000 records with a bad line at 1 501: about 100 small shards are written first.
    let good = tmp.path().join("good.jsonl");
    write_jsonl(&good, "r", 2000);
    let text = std::fs::read_to_string(&good).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1500] = "{\"id\": oops}";
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let write = |input: &Path| {
        guideloom(&[
            "write",
            "--root",
            &root_s,
            "--work-id",
            "w",
            "--max-shard-bytes",
            "2048",
            input.to_str().unwrap(),
        ])
    };
    let err = fails(write(&bad));
    assert!(err.contains("bad.jsonl:1501"), "{err}");
    assert!(
        err.contains("work id w is incomplete") && err.contains("re-run the same write"),
        "{err}"
    );
    let written = std::fs::read_dir(root.join("shards/w")).unwrap().count();
    assert!(written > 10, "{written} shards before the bad line");
    // Shards only: no completion marker (or anything else) for the incomplete work id.
    let names = files(&root.join("shards/w"));
    assert_eq!(names.len(), written, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".glm")), "{names:?}");
    // Another worker completes; a default publish takes only its shards and names w.
    publish(&root_s, tmp.path(), "other", "s1", 7);
    let input = tmp.path().join("third.jsonl");
    write_jsonl(&input, "t", 5);
    ok(guideloom(&[
        "write",
        "--root",
        &root_s,
        "--work-id",
        "third",
        input.to_str().unwrap(),
    ]));
    let out = ok(guideloom(&[
        "publish",
        "--root",
        &root_s,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s2",
        "--append",
    ]));
    assert!(
        out.contains("skipped incomplete work id(s) w ("),
        "the skip is said: {out}"
    );
    let info = json(&ok(guideloom(&["info", &root_s, "--json"])));
    assert_eq!(info["snapshots"][1]["records"], 12, "{info}");
    assert_eq!(info["incomplete_work_ids"][0]["work_id"], "w", "{info}");
    // Naming the incomplete work id is refused.
    let err = fails(guideloom(&[
        "publish",
        "--root",
        &root_s,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s3",
        "--work-id",
        "w",
    ]));
    assert!(err.contains("work id w is incomplete"), "{err}");
    // The fixed input resumes the same work id; then it publishes whole, replacing s2.
    let out = ok(write(&good));
    assert!(
        out.contains("resumed the unfinished write of work id w"),
        "{out}"
    );
    assert!(root.join("shards/w/complete.json").is_file());
    let out = ok(guideloom(&[
        "publish",
        "--root",
        &root_s,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s3",
        "--work-id",
        "w",
    ]));
    assert!(
        out.contains("it replaces snapshot s2 (#2, 12 records) as the latest"),
        "a full publication says what it replaces: {out}"
    );
    let info = json(&ok(guideloom(&["info", &root_s, "--json"])));
    assert_eq!(info["snapshots"][2]["records"], 2000, "{info}");
    assert_eq!(info["incomplete_work_ids"], serde_json::json!([]), "{info}");
    let rec = json(&ok(guideloom(&["get", &root_s, "1500"])));
    assert_eq!(rec["id"], "r-1500");
    // A finished work id cannot be written again.
    let err = fails(write(&good));
    assert!(err.contains("is complete"), "{err}");
}

/// Writes `n` records as worker `w` without publishing them.
fn write_only(root: &str, tmp: &Path, w: &str, n: usize) {
    let input = tmp.join(format!("{w}.jsonl"));
    write_jsonl(&input, w, n);
    ok(guideloom(&[
        "write",
        "--root",
        root,
        "--work-id",
        w,
        input.to_str().unwrap(),
    ]));
}

/// A published root (`dir`, snapshot `s1` of worker `a`) whose shard was then replaced by
/// worker `b`'s shard of the same size (renamed over it, dated an hour later as a later
/// write would be): returns the replaced shard's key.
fn swap_a_shard(dir: &Path, tmp: &Path) -> &'static str {
    let root = dir.to_str().unwrap();
    publish(root, tmp, "a", "s1", 40);
    write_only(root, tmp, "b", 40);
    let key = "shards/a/00000000.glm";
    let (ours, theirs) = (dir.join(key), dir.join("shards/b/00000000.glm"));
    assert_eq!(
        std::fs::metadata(&ours).unwrap().len(),
        std::fs::metadata(&theirs).unwrap().len(),
        "same-size shards"
    );
    let next = dir.join("shards/a/next");
    std::fs::copy(&theirs, &next).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(later)
        .unwrap();
    std::fs::rename(&next, &ours).unwrap();
    key
}

/// `get` and `cat` of `root` fail at once, naming the replaced shard and its footer
/// checksum, and print none of the other shard's records.
fn assert_get_and_cat_refuse_the_swap(root: &str, key: &str) {
    for args in [vec!["get", root, "3"], vec!["cat", root]] {
        let out = bounded(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(key) && err.contains("footer checksum"),
            "{args:?}: {err}"
        );
        assert!(!stdout(&out).contains("b-"), "{args:?}: {}", stdout(&out));
    }
}

#[test]
fn a_shard_swapped_for_another_of_the_same_size_fails_get_and_cat() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("root");
    let key = swap_a_shard(&dir, tmp.path());
    assert_get_and_cat_refuse_the_swap(dir.to_str().unwrap(), key);
}

#[cfg(feature = "http")]
#[test]
fn a_shard_swapped_behind_an_http_root_fails_get_and_cat() {
    let Some((url, served)) = nginx() else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let subdir = format!("cli-swap-{}-{nanos}", std::process::id());
    let dir = served.join(&subdir);
    let _served = Served(dir.clone());
    let tmp = tempfile::tempdir().unwrap();
    let key = swap_a_shard(&dir, tmp.path());
    let http = format!("{}/{subdir}", url.trim_end_matches('/'));
    assert_get_and_cat_refuse_the_swap(&http, key);
}

/// A latest log entry that names another dataset (written beside a real one): `get` and
/// `cat` refuse it as corrupt, naming the entry and both datasets, instead of serving the
/// records it lists.
#[test]
fn a_latest_entry_of_another_dataset_is_refused_by_get_and_cat() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("root");
    let root = dir.to_str().unwrap();
    publish(root, tmp.path(), "a", "s1", 10);
    let first: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("log/00000000000000000001.json")).unwrap())
            .unwrap();
    let mut foreign = first.clone();
    foreign["seq"] = 2.into();
    foreign["parent_seq"] = 1.into();
    foreign["snapshot_id"] = "foreign".into();
    foreign["dataset_id"] = "other".into();
    let key = "log/00000000000000000002.json";
    std::fs::write(dir.join(key), serde_json::to_vec(&foreign).unwrap()).unwrap();
    for args in [vec!["get", root, "0"], vec!["cat", root]] {
        let err = fails(bounded(&args));
        assert!(
            err.contains(key) && err.contains("\"other\"") && err.contains("\"d\""),
            "{args:?}: {err}"
        );
    }
}
