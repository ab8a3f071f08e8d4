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

/// Resource limits of a child process ([`guideloom_limited`]).
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// `RLIMIT_AS`: the most bytes of address space (every mapping, heap and stacks). The
    /// child then runs with `MALLOC_ARENA_MAX=1`: glibc reserves 64–128 MiB of address space
    /// (`PROT_NONE`, no memory) for the malloc arena of each thread that allocates, so how
    /// many of the runtime's threads happen to allocate would otherwise decide whether a
    /// 32 MiB mapping fits under the limit; with one arena the limit counts what is used.
    pub address_space: Option<u64>,
    /// `RLIMIT_FSIZE`: the largest file the child may write (a larger write gets SIGXFSZ).
    pub file_size: Option<u64>,
}

/// What feeds a child's stdin, from a thread of its own.
pub type Feed = Box<dyn FnOnce(&mut dyn Write) + Send>;

/// Runs the binary under `limits`, with `stdin` fed from a thread when given (a closed pipe
/// is ignored: the binary may stop reading early) and stdout handed to `consume` as it
/// arrives (so a large output is checked without being held). Returns the exit status and
/// stderr.
#[cfg(target_os = "linux")]
pub fn guideloom_limited(
    args: &[&str],
    limits: Limits,
    stdin: Option<Feed>,
    consume: &mut dyn FnMut(&[u8]),
) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;

    use nix::sys::resource::{Resource, setrlimit};

    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if limits.address_space.is_some() {
        cmd.env("MALLOC_ARENA_MAX", "1");
    }
    let set = move || -> std::io::Result<()> {
        if let Some(n) = limits.address_space {
            setrlimit(Resource::RLIMIT_AS, n, n)?;
        }
        if let Some(n) = limits.file_size {
            setrlimit(Resource::RLIMIT_FSIZE, n, n)?;
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec; it only calls setrlimit(2),
    // which is async-signal-safe, and allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(set);
    }
    let mut child = cmd.spawn().expect("run guideloom");
    let feeder = stdin.map(|feed| {
        let mut pipe = child.stdin.take().expect("stdin piped");
        std::thread::spawn(move || feed(&mut pipe))
    });
    let mut err_pipe = child.stderr.take().expect("stderr piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err_pipe.read_to_string(&mut text);
        text
    });
    let mut out = child.stdout.take().expect("stdout piped");
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => consume(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the child's stdout: {e}"),
        }
    }
    let status = child.wait().expect("wait");
    if let Some(f) = feeder {
        f.join().expect("stdin feeder");
    }
    (status, errors.join().expect("stderr reader"))
}
