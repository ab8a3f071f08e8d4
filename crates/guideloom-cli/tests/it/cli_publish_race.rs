//! Identical publications racing each other (issue 24, item 1): every rank of a training job
//! runs the same `guideloom publish`, or an orchestrator retries a job that still runs.
//!
//! Each trial writes snapshot `s1` and the shards of worker `w1`, then starts 8 processes of
//! `guideloom publish --dataset-id d --snapshot-id s2 --work-id w1` at once. Every process must
//! succeed; exactly one says it committed the snapshot and the others that an identical
//! request had already published it, all at the same sequence number; the log holds `s2` once
//! (`info` lists `s1`, `s2`), and `verify` passes (every pointer opens its entry, no gap).
//! On 0632596 this failed in about 7 of 30 trials on a local root (`s2` committed two or three
//! times, `verify` failing, one publisher told "different content").
//!
//! Root kinds: a local directory, a local directory declared as a mounted bucket (`--mount`),
//! moto and Ceph RGW (`s3://`, from `GUIDELOOM_S3_*` / `GUIDELOOM_RGW_*`), and the rclone
//! mount of the RGW bucket (`GUIDELOOM_MOUNT_DIR`, declared with `--mount`). A missing server
//! is a printed skip, a failure under `GUIDELOOM_CI=1` (unless CI left Ceph or the mount out).

use crate::common;

use std::process::{Command, Stdio};

use common::{BIN, json, ok, stderr, stdout};
use serde_json::Value;

/// Processes per trial.
const PUBLISHERS: usize = 8;

/// One root kind: where trial roots go, the global flags and the environment.
struct Kind {
    name: &'static str,
    /// Trial `t`'s root is `{base}/t{t}`.
    base: String,
    flags: Vec<&'static str>,
    env: Vec<(&'static str, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl Kind {
    fn run(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(&self.flags).args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

fn skip(what: &str, opted_out: bool) {
    assert!(
        opted_out || std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
        "GUIDELOOM_CI=1 but {what}"
    );
    println!("skipped: {what}");
}

fn unique() -> String {
    format!(
        "race-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn local(mount: bool) -> Kind {
    let dir = tempfile::tempdir().unwrap();
    Kind {
        name: if mount { "declared mount" } else { "local" },
        base: dir.path().to_str().unwrap().to_owned(),
        flags: if mount { vec!["--mount"] } else { vec![] },
        env: vec![],
        _dir: Some(dir),
    }
}

#[cfg(feature = "s3")]
fn s3(name: &'static str, endpoint_var: &str, bucket_var: &str) -> Option<Kind> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (Some(endpoint), Some(bucket)) = (var(endpoint_var), var(bucket_var)) else {
        let opted_out = name == "rgw" && var("GUIDELOOM_XTASK_CEPH").as_deref() == Some("0");
        skip(
            &format!("{endpoint_var}/{bucket_var} are not set"),
            opted_out,
        );
        return None;
    };
    Some(Kind {
        name,
        base: format!("s3://{bucket}/{}", unique()),
        flags: vec!["--s3-allow-http", "--s3-path-style"],
        env: vec![
            ("AWS_ENDPOINT_URL", endpoint),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ],
        _dir: None,
    })
}

/// The rclone mount of the RGW bucket, declared with `--mount`.
fn rclone_mount() -> Option<Kind> {
    let opted_out = std::env::var("GUIDELOOM_XTASK_MOUNT").as_deref() == Ok("0");
    let Some(dir) = std::env::var("GUIDELOOM_MOUNT_DIR")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        skip("GUIDELOOM_MOUNT_DIR is not set", opted_out);
        return None;
    };
    let base = std::path::Path::new(&dir).join(unique());
    std::fs::create_dir(&base).unwrap();
    Some(Kind {
        name: "rclone mount",
        base: base.to_str().unwrap().to_owned(),
        flags: vec!["--mount"],
        env: vec![],
        _dir: None,
    })
}

/// Runs `trials` trials on `kind`, checking each as the module docs say.
fn race(kind: &Kind, trials: usize, input: &str) {
    for t in 0..trials {
        let root = format!("{}/t{t}", kind.base);
        let step = |args: &[&str]| {
            let out = kind.run(args).output().unwrap();
            ok(out)
        };
        step(&["write", "--root", &root, "--work-id", "w0", input]);
        step(&[
            "publish",
            "--root",
            &root,
            "--dataset-id",
            "d",
            "--snapshot-id",
            "s1",
            "--work-id",
            "w0",
        ]);
        step(&["write", "--root", &root, "--work-id", "w1", input]);
        let children: Vec<_> = (0..PUBLISHERS)
            .map(|_| {
                kind.run(&[
                    "publish",
                    "--root",
                    &root,
                    "--dataset-id",
                    "d",
                    "--snapshot-id",
                    "s2",
                    "--work-id",
                    "w1",
                    "--json",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        let results: Vec<Value> = children
            .into_iter()
            .map(|child| {
                let out = child.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "{} trial {t}: a publisher of the identical request failed: {}{}",
                    kind.name,
                    stdout(&out),
                    stderr(&out)
                );
                json(&stdout(&out))
            })
            .collect();
        let committed = results
            .iter()
            .filter(|r| r["outcome"] == "committed")
            .count();
        let already = results
            .iter()
            .filter(|r| r["outcome"] == "already_published")
            .count();
        assert_eq!(
            (committed, already),
            (1, PUBLISHERS - 1),
            "{} trial {t}: {results:#?}",
            kind.name
        );
        assert!(
            results
                .iter()
                .all(|r| r["seq"] == 2 && r["snapshot_id"] == "s2"),
            "{} trial {t}: {results:#?}",
            kind.name
        );
        // Only the committer says it replaced s1.
        assert_eq!(
            results.iter().filter(|r| !r["replaced"].is_null()).count(),
            1,
            "{} trial {t}",
            kind.name
        );
        let info = json(&step(&["info", &root, "--json"]));
        let ids: Vec<&str> = info["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["snapshot_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["s1", "s2"], "{} trial {t}: {info}", kind.name);
        step(&["verify", &root]);
    }
    println!(
        "{}: {trials} trials of {PUBLISHERS} identical publishers",
        kind.name
    );
}

fn input() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.jsonl");
    let lines: String = (0..20).map(|i| format!("{{\"x\": {i}}}\n")).collect();
    std::fs::write(&path, lines).unwrap();
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

#[test]
fn eight_identical_publishers_commit_once_on_a_local_root() {
    let (_dir, input) = input();
    race(&local(false), 32, &input);
}

#[test]
fn eight_identical_publishers_commit_once_on_a_declared_mount() {
    let (_dir, input) = input();
    race(&local(true), 32, &input);
}

#[cfg(feature = "s3")]
#[test]
fn eight_identical_publishers_commit_once_on_moto() {
    let (_dir, input) = input();
    if let Some(kind) = s3("moto", "GUIDELOOM_S3_ENDPOINT", "GUIDELOOM_S3_BUCKET") {
        race(&kind, 32, &input);
    }
}

#[cfg(feature = "s3")]
#[test]
fn eight_identical_publishers_commit_once_on_rgw() {
    let (_dir, input) = input();
    if let Some(kind) = s3("rgw", "GUIDELOOM_RGW_ENDPOINT", "GUIDELOOM_RGW_BUCKET") {
        race(&kind, 32, &input);
    }
}

#[test]
fn eight_identical_publishers_commit_once_on_an_rclone_mount() {
    let (_dir, input) = input();
    if let Some(kind) = rclone_mount() {
        race(&kind, 8, &input);
    }
}
