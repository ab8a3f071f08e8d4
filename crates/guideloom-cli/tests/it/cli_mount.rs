//! The real `guideloom` binary on a real mounted bucket (`cargo xtask servers up rclone`:
//! `rclone mount --vfs-cache-mode off` of the Ceph RGW bucket, or moto's), declared with
//! `--mount`: `write` and `publish` run under strace and must make no rename, hard link,
//! symlink or lock call (nor delete or truncate) on the mount; records read through the mount
//! and through the `s3://` root of the same bucket agree with the input and with each other;
//! `annotate --mount` is refused naming the s3:// root, which then publishes them visibly to
//! the mount's readers; a second `write` of a work id collides.
//!
//! Environment: `GUIDELOOM_MOUNT_DIR`, `GUIDELOOM_MOUNT_S3_ENDPOINT`,
//! `GUIDELOOM_MOUNT_S3_BUCKET`; each test uses a unique subdirectory of the mount (= key
//! prefix). Without them (or without strace) a test prints `skipped: …` and passes; under
//! `GUIDELOOM_CI=1` that is a failure, unless CI was told not to mount
//! (`GUIDELOOM_XTASK_MOUNT=0`).
#![cfg(feature = "s3")]

use crate::common;
use crate::strace_audit;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use common::{BIN, fails, json, ok, stderr, stdout};
use serde_json::Value;
use strace_audit::{Audit, run_traced};

/// The mount and the bucket behind it.
struct Mount {
    dir: PathBuf,
    endpoint: String,
    bucket: String,
}

/// Skips (printing why) or, under `GUIDELOOM_CI=1`, fails.
fn skip<T>(test: &str, why: &str, opted_out: bool) -> Option<T> {
    assert!(
        opted_out || std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
        "{test}: GUIDELOOM_CI=1 but {why}"
    );
    println!("skipped: {test}: {why}");
    None
}

fn is_mount_point(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| {
        info.lines()
            .filter_map(|line| line.split(' ').nth(4))
            .any(|point| Path::new(&point.replace("\\040", " ")) == dir)
    })
}

fn mount(test: &str) -> Option<Mount> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let opted_out = std::env::var("GUIDELOOM_XTASK_MOUNT").as_deref() == Ok("0");
    let (Some(dir), Some(endpoint), Some(bucket)) = (
        var("GUIDELOOM_MOUNT_DIR"),
        var("GUIDELOOM_MOUNT_S3_ENDPOINT"),
        var("GUIDELOOM_MOUNT_S3_BUCKET"),
    ) else {
        return skip(
            test,
            "GUIDELOOM_MOUNT_DIR/GUIDELOOM_MOUNT_S3_ENDPOINT/GUIDELOOM_MOUNT_S3_BUCKET are not set",
            opted_out,
        );
    };
    let dir = PathBuf::from(dir);
    if !is_mount_point(&dir) {
        let why = format!(
            "{} is not mounted (`cargo xtask servers up rclone`)",
            dir.display()
        );
        return skip(test, &why, false);
    }
    if !Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return skip(test, "strace is not installed (the audit needs it)", false);
    }
    Some(Mount {
        dir,
        endpoint,
        bucket,
    })
}

fn unique(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// Removes a test's subdirectory of the mount (its objects in the bucket) whatever the
/// outcome. This deletes through the mount, after the audited commands.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Mount {
    /// The unique root `<mount>/<sub>`, the `s3://bucket/<sub>` root of the same objects, and
    /// the guard that removes them.
    fn roots(&self, tag: &str) -> (String, String, Cleanup) {
        let sub = unique(tag);
        let dir = self.dir.join(&sub);
        let local = dir.to_str().unwrap().to_owned();
        (local, format!("s3://{}/{sub}", self.bucket), Cleanup(dir))
    }

    /// `guideloom ARGS`; for an `s3://` root with the bucket's endpoint, the dummy keys and
    /// `--s3-allow-http`. (Not for the mount's commands: the CLI refuses a plain-HTTP
    /// `AWS_ENDPOINT_URL` without `--s3-allow-http` whatever the root.)
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(std::env::temp_dir());
        for name in [
            "AWS_CA_BUNDLE",
            "AWS_PROFILE",
            "AWS_SESSION_TOKEN",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
        ] {
            cmd.env_remove(name);
        }
        if args.iter().any(|a| a.starts_with("s3://")) {
            cmd.arg("--s3-allow-http")
                .env("AWS_ENDPOINT_URL", &self.endpoint)
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("AWS_REGION", "us-east-1");
        }
        cmd.args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run guideloom")
    }

    /// Runs `guideloom ARGS` under strace; it must succeed and do nothing on the mount that
    /// Mountpoint refuses. Returns stdout and the audit.
    #[track_caller]
    fn traced_ok(&self, trace: &Path, args: &[&str]) -> (String, Audit) {
        let (output, audit) = run_traced(&self.cmd(args), trace, &self.dir);
        assert!(
            output.status.success(),
            "{args:?} under strace: {:?}\nstdout: {}\nstderr: {}",
            output.status.code(),
            stdout(&output),
            stderr(&output)
        );
        assert!(audit.saw_exit, "incomplete trace {}", trace.display());
        assert!(
            audit.forbidden().is_empty(),
            "{args:?}: rename, link, symlink or lock on the mount:\n{}",
            audit.forbidden().join("\n")
        );
        assert!(
            audit.deletes_and_truncates().is_empty(),
            "{args:?}: delete or truncate on the mount (Mountpoint: only with \
             --allow-delete):\n{}",
            audit.deletes_and_truncates().join("\n")
        );
        println!(
            "audit {}: {} traced calls, on the mount: {:?}",
            args[..2].join(" "),
            audit.traced_anywhere,
            audit.counts
        );
        (stdout(&output), audit)
    }
}

/// `n` JSON records of varied size, as input lines and as values.
fn input(path: &Path, n: usize) -> Vec<Value> {
    let values: Vec<Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "i": i,
                "text": format!("record {i} ").repeat(1 + i % 37),
                "tags": (0..i % 5).map(|t| format!("t{t}")).collect::<Vec<_>>(),
            })
        })
        .collect();
    let lines: String = values.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(path, lines).unwrap();
    values
}

/// Indices spread over `0..len`, both ends included, from a fixed seed.
fn sample(len: usize, count: usize) -> Vec<usize> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut out = vec![0, len - 1];
    out.extend((0..count).map(|_| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(state >> 33).unwrap() % len
    }));
    out
}

#[test]
fn cli_mount_write_and_publish_make_no_forbidden_call_and_s3_reads_the_same() {
    let Some(m) = mount("cli_mount_write_and_publish_make_no_forbidden_call_and_s3_reads_the_same")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (root, s3, _cleanup) = m.roots("cli-mount");
    let data = tmp.path().join("in.jsonl");
    let values = input(&data, 400);
    let (written, write_audit) = m.traced_ok(
        &tmp.path().join("write.strace"),
        &[
            "--mount",
            "write",
            "--root",
            &root,
            "--work-id",
            "w",
            "--max-shard-bytes",
            "16384",
            "--json",
            data.to_str().unwrap(),
        ],
    );
    let written = json(&written);
    let shards = written["shards"].as_array().unwrap().len();
    assert!(shards >= 4, "several shards: {written}");
    let (_, publish_audit) = m.traced_ok(
        &tmp.path().join("publish.strace"),
        &[
            "--mount",
            "publish",
            "--root",
            &root,
            "--dataset-id",
            "d",
            "--snapshot-id",
            "s1",
        ],
    );
    // The trace saw the programs' own calls: the CLI reads no lock, but its shard staging
    // outside the mount unlinks temporaries, and Rust's runtime calls fcntl.
    assert!(
        write_audit.traced_anywhere + publish_audit.traced_anywhere > 0,
        "strace traced nothing"
    );

    // Through the mount.
    let info = json(&ok(m.run(&["--mount", "info", &root, "--json"])));
    assert_eq!(info["latest"], "s1", "{info}");
    assert_eq!(info["snapshots"][0]["shards"], shards, "{info}");
    assert_eq!(info["snapshots"][0]["records"], 400, "{info}");
    let all = ok(m.run(&["--mount", "cat", &root]));
    let got: Vec<Value> = all.lines().map(json).collect();
    assert!(
        got == values,
        "cat through the mount differs from the input"
    );
    let indices = sample(values.len(), 12);
    for &i in &indices {
        let rec = json(&ok(m.run(&["--mount", "get", &root, &i.to_string()])));
        assert_eq!(rec, values[i], "record {i} through the mount");
    }

    // Through s3:// at the same endpoint: the same snapshot, the same records.
    let s3_info = json(&ok(m.run(&["info", &s3, "--json"])));
    assert_eq!(s3_info["latest"], info["latest"]);
    assert_eq!(s3_info["snapshots"], info["snapshots"]);
    assert_eq!(s3_info["dataset_id"], "d");
    for &i in &indices {
        let rec = json(&ok(m.run(&["get", &s3, &i.to_string()])));
        assert_eq!(rec, values[i], "record {i} through s3://");
    }
    let verify = json(&ok(m.run(&["verify", &s3, "--deep", "--json"])));
    assert_eq!(verify["records_checked"], 400, "{verify}");
}

#[test]
fn cli_mount_audit_catches_the_local_root_path_on_the_mount() {
    // The positive control of the audit: without `--mount` the same directory is treated as
    // a local root, whose create-only write hard-links a temporary file into place; on the
    // mount that call must be caught (rclone answers it with an error, Mountpoint with EPERM).
    let Some(m) = mount("cli_mount_audit_catches_the_local_root_path_on_the_mount") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (root, _, _cleanup) = m.roots("cli-mount-control");
    let data = tmp.path().join("in.jsonl");
    input(&data, 20);
    let trace = tmp.path().join("control.strace");
    let cmd = m.cmd(&[
        "write",
        "--root",
        &root,
        "--work-id",
        "w",
        data.to_str().unwrap(),
    ]);
    let (output, audit) = run_traced(&cmd, &trace, &m.dir);
    println!(
        "control: exit {:?}, on the mount: {:?}",
        output.status.code(),
        audit.counts
    );
    let links: Vec<_> = audit
        .on_mount
        .iter()
        .filter(|c| c.name.starts_with("link"))
        .collect();
    assert!(
        !links.is_empty(),
        "the audit must see the local-root path's hard link on the mount; saw {:?}\nstderr: {}",
        audit.counts,
        stderr(&output)
    );
    assert!(!audit.forbidden().is_empty());
    assert!(
        links
            .iter()
            .all(|c| c.paths.iter().all(|p| p.starts_with(&root))),
        "{links:?}"
    );
}

#[test]
fn cli_mount_annotate_is_refused_and_s3_annotations_show_through_the_mount() {
    let Some(m) = mount("cli_mount_annotate_is_refused_and_s3_annotations_show_through_the_mount")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (root, s3, _cleanup) = m.roots("cli-mount-annotate");
    let data = tmp.path().join("in.jsonl");
    input(&data, 30);
    let run_ok = |args: &[&str]| ok(m.run(args));
    run_ok(&[
        "--mount",
        "write",
        "--root",
        &root,
        "--work-id",
        "w",
        data.to_str().unwrap(),
    ]);
    run_ok(&[
        "--mount",
        "publish",
        "--root",
        &root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s1",
    ]);
    let values = tmp.path().join("values.jsonl");
    let lines: String = (0..30).map(|i| format!("{{\"score\": {i}}}\n")).collect();
    std::fs::write(&values, lines).unwrap();
    let values = values.to_str().unwrap();

    let err = fails(m.run(&["--mount", "annotate", &root, "--name", "q", values]));
    assert!(err.contains(&root), "names the root: {err}");
    assert!(err.contains("mounted bucket"), "{err}");
    assert!(err.contains("s3://"), "says to use the s3:// root: {err}");
    let info = json(&ok(m.run(&["--mount", "info", &root, "--json"])));
    assert_eq!(info["annotation_sets"], serde_json::json!([]), "{info}");

    let done = json(&ok(
        m.run(&["annotate", &s3, "--name", "q", values, "--json"])
    ));
    assert_eq!(done["set"], "q", "{done}");
    // The mount's readers see the set: info lists it, verify reads its values.
    let info = json(&ok(m.run(&["--mount", "info", &root, "--json"])));
    let sets = info["annotation_sets"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{info}");
    assert_eq!(sets[0]["set"], "q");
    assert_eq!(sets[0]["values"], 30);
    let verify = json(&ok(m.run(&["--mount", "verify", &root, "--deep", "--json"])));
    assert_eq!(verify["annotation_sets"], 1, "{verify}");
}

#[test]
fn cli_mount_second_write_of_a_work_id_collides() {
    let Some(m) = mount("cli_mount_second_write_of_a_work_id_collides") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (root, _, _cleanup) = m.roots("cli-mount-collide");
    let data = tmp.path().join("in.jsonl");
    input(&data, 10);
    let args = [
        "--mount",
        "write",
        "--root",
        &root,
        "--work-id",
        "w",
        data.to_str().unwrap(),
    ];
    ok(m.run(&args));
    let err = fails(m.run(&args));
    assert!(err.contains("publication collision"), "{err}");
    assert!(err.contains("shards/w/"), "names the shard: {err}");
}
