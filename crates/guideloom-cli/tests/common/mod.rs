//! Helpers shared by the CLI integration tests (`cli.rs`, `cli_checks.rs`, `cli_roots.rs`):
//! running the real `guideloom` binary and checking its output.

#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_guideloom");

pub fn guideloom(args: &[&str]) -> Output {
    guideloom_env(args, &[])
}

pub fn guideloom_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run guideloom")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
#[track_caller]
pub fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "expected success, got {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Asserts exit status 1 with exactly one line on stderr; returns that line.
#[track_caller]
pub fn fails(o: Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err:?}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    err
}

#[track_caller]
pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `n` caption-like records with ids `prefix-i`.
pub fn write_jsonl(path: &Path, prefix: &str, n: usize) {
    let mut f = std::fs::File::create(path).unwrap();
    for i in 0..n {
        let rec = serde_json::json!({
            "id": format!("{prefix}-{i}"),
            "text": format!("caption number {i} of {prefix}"),
            "tokens": (0..u32::try_from(i % 13).unwrap()).collect::<Vec<_>>(),
        });
        writeln!(f, "{rec}").unwrap();
    }
}

/// `guideloom write --root ROOT --work-id w INPUT`, then `publish --root ROOT --dataset-id d
/// --snapshot-id s`, each required to succeed: a published root to read in one line.
pub fn write_and_publish(root: &str, input: &str) {
    ok(guideloom(&[
        "write",
        "--root",
        root,
        "--work-id",
        "w",
        input,
    ]));
    ok(guideloom(&[
        "publish",
        "--root",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
}

/// The paths of every file under `dir`, relative and `/`-separated, sorted (empty when `dir`
/// does not exist). "Nothing was written" checks list the tree rather than probing one path,
/// so they keep failing when the layout moves a file.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("readable directory entry").path();
            if std::fs::symlink_metadata(&path).expect("stat").is_dir() {
                walk(base, &path, out);
            } else {
                let name = path.strip_prefix(base).expect("under the base");
                out.push(name.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The nginx test server (`GUIDELOOM_NGINX_URL`, `GUIDELOOM_NGINX_ROOT`): its URL and the
/// directory it serves; `None` (a test prints `skipped: ...`) when unset, a failure under
/// `GUIDELOOM_CI=1`.
pub fn nginx() -> Option<(String, PathBuf)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT")) {
        (Some(url), Some(root)) => Some((url, PathBuf::from(root))),
        _ => {
            assert!(
                std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
                "GUIDELOOM_CI=1 but GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT are not set"
            );
            println!("skipped: nginx not configured (GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT)");
            None
        }
    }
}

/// Removes the published subdirectory of the nginx root whatever the outcome.
pub struct Served(pub PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
