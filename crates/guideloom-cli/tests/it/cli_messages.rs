//! Error messages through the real binary: words, not Rust `Debug` text; the root named once;
//! `--json` errors as JSON on stdout; read-only roots refused before any request; a full disk
//! named by its directory; the object_store environment conventions honoured.

#![cfg(unix)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Fragments of Rust `Debug` output that must never appear in a message.
const DEBUG_TEXT: [&str; 7] = [
    "Some(", "None", "Error {", "kind:", "Os {", "code:", "Custom {",
];

#[track_caller]
fn assert_words(message: &str) {
    for fragment in DEBUG_TEXT {
        assert!(
            !message.contains(fragment),
            "Debug text {fragment:?} in: {message}"
        );
    }
}

fn publish_small(root: &str, tmp: &Path) {
    let input = tmp.join("in.jsonl");
    write_jsonl(&input, "r", 20);
    ok(guideloom(&[
        "write",
        "--root",
        root,
        "--work-id",
        "w",
        input.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        "--root",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s1",
    ]));
}

#[test]
fn damaged_roots_fail_in_words_naming_the_root_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let root_s = root.to_str().unwrap().to_owned();
    publish_small(&root_s, tmp.path());
    let shard = root.join("shards/w/00000000.glm");
    let original = std::fs::read(&shard).unwrap();
    type Damage<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, Damage<'_>)> = vec![
        (
            "a truncated shard",
            Box::new(|| std::fs::write(&shard, &original[..original.len() - 9]).unwrap()),
        ),
        (
            "a shard with a damaged footer",
            Box::new(|| {
                let mut b = original.clone();
                let n = b.len();
                b[n - 20] ^= 0xff;
                std::fs::write(&shard, b).unwrap();
            }),
        ),
        (
            "a FIFO dataset.json",
            Box::new(|| {
                let id = root.join("dataset.json");
                std::fs::remove_file(&id).unwrap();
                nix::unistd::mkfifo(&id, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
            }),
        ),
        (
            "a pointer of 2 MiB",
            Box::new(|| {
                let p = root.join("snapshots/s1.json");
                std::fs::write(&p, vec![b' '; 2 << 20]).unwrap();
            }),
        ),
    ];
    for (what, damage) in cases {
        damage();
        for args in [
            vec!["get", root_s.as_str(), "3", "--snapshot", "s1"],
            vec!["verify", root_s.as_str(), "--deep"],
        ] {
            if what.contains("dataset.json") && args[0] == "get" {
                // Readers of a snapshot do not read the identity; `verify` does.
                continue;
            }
            let out = guideloom(&args);
            assert_eq!(out.status.code(), Some(1), "{what} {args:?}");
            let err = stderr(&out);
            assert_words(&err);
            if args[0] == "get" {
                assert_eq!(
                    err.matches(root_s.as_str()).count(),
                    1,
                    "{what}: the root named once: {err}"
                );
            }
            for line in stdout(&out).lines() {
                assert_words(line);
            }
        }
    }
}

#[test]
fn json_errors_are_json_on_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nothing-here");
    let out = guideloom(&["info", missing.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&stdout(&out));
    assert_eq!(doc["error"]["kind"], "invalid_argument", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing-here")
    );
    assert_eq!(stderr(&out).lines().count(), 1);
    // A typed error keeps its kind.
    let root = tmp.path().join("root");
    publish_small(root.to_str().unwrap(), tmp.path());
    let id = root.join("dataset.json");
    std::fs::remove_file(&id).unwrap();
    nix::unistd::mkfifo(&id, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let out = guideloom(&["info", root.to_str().unwrap(), "--json"]);
    let doc = json(&stdout(&out));
    assert_eq!(doc["error"]["kind"], "refused_file", "{doc}");
}

#[cfg(feature = "http")]
#[test]
fn writes_to_an_http_root_are_refused_before_any_request() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_jsonl(&input, "r", 3);
    // Nothing listens on port 9: a request would fail with a connection error instead.
    let url = "http://127.0.0.1:9/data";
    let write = fails(guideloom(&[
        "write",
        "--root",
        url,
        "--work-id",
        "w",
        input.to_str().unwrap(),
    ]));
    let publish = fails(guideloom(&[
        "publish",
        "--root",
        url,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
    for err in [write, publish] {
        assert!(err.contains("read-only root"), "{err}");
        assert!(!err.contains("onnect"), "a request was made: {err}");
        assert_words(&err);
    }
}

#[cfg(feature = "s3")]
#[test]
fn aws_allow_http_is_honoured_and_local_roots_ignore_the_s3_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let env = [("AWS_ENDPOINT_URL", "http://127.0.0.1:9")];
    // A plain-HTTP endpoint in the environment does not concern a local root.
    let input = tmp.path().join("in.jsonl");
    write_jsonl(&input, "r", 3);
    let out = guideloom_env(
        &[
            "write",
            "--root",
            root.to_str().unwrap(),
            "--work-id",
            "w",
            input.to_str().unwrap(),
        ],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // For an s3:// root it needs the opt-in: the flag, or object_store's AWS_ALLOW_HTTP=true.
    let refused = guideloom_env(&["info", "s3://bucket/x"], &env);
    assert!(
        stderr(&refused).contains("AWS_ALLOW_HTTP=true"),
        "{}",
        stderr(&refused)
    );
    let allowed = guideloom_env(
        &["--retries", "0", "--timeout", "2", "info", "s3://bucket/x"],
        &[env[0], ("AWS_ALLOW_HTTP", "true")],
    );
    assert_eq!(allowed.status.code(), Some(1));
    assert!(
        !stderr(&allowed).contains("plain HTTP"),
        "AWS_ALLOW_HTTP=true was not honoured: {}",
        stderr(&allowed)
    );
}

/// Mounts a tiny tmpfs for the full-disk test (needs root, as CI runs); `None` (skipped)
/// elsewhere unless `GUIDELOOM_CI=1`.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(Tmpfs(dir.to_path_buf()));
        }
        assert!(
            std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
            "GUIDELOOM_CI=1 but a tmpfs could not be mounted (the full-disk test needs root)"
        );
        println!("skipped: cannot mount a tmpfs here (not root?)");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_is_named_by_its_directory_and_the_retry_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let Some(_fs) = Tmpfs::mount(&mnt, "192k") else {
        return;
    };
    let root = mnt.join("root");
    let root_s = root.to_str().unwrap();
    let input = tmp.path().join("big.jsonl");
    write_jsonl(&input, "caption", 4000);
    let err = fails(guideloom(&[
        "write",
        "--root",
        root_s,
        "--work-id",
        "w",
        "--max-shard-bytes",
        "65536",
        input.to_str().unwrap(),
    ]));
    assert!(
        err.contains("no space left on the file system holding"),
        "{err}"
    );
    assert!(
        err.contains(&root.join("shards/w").display().to_string()),
        "{err}"
    );
    assert!(err.contains("work id w is incomplete"), "{err}");
    assert_words(&err);
    // Nothing partial under a final name: every shard there opens.
    for entry in std::fs::read_dir(root.join("shards/w")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.ends_with(".glm") || name.starts_with('.'), "{name}");
    }
}
