//! Small helpers: where the repository is, running programs, reading logs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// The workspace root: the parent of this crate's directory.
pub(crate) fn repo_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir
        .parent()
        .map_or_else(|| xtask_dir.to_path_buf(), Path::to_path_buf)
}

/// Set by `cargo xtask ci`: builds from then on are not incremental.
static ONE_SHOT_BUILDS: AtomicBool = AtomicBool::new(false);

/// Makes every later cargo build of this process non-incremental ([`lean_build`]).
///
/// A CI run builds a fresh clone once, so incremental state (about 6.5 GB for the whole
/// workspace with its tests, examples and feature sets) is disk spent for nothing.
pub(crate) fn one_shot_builds() {
    ONE_SHOT_BUILDS.store(true, Ordering::Relaxed);
}

/// `CARGO_INCREMENTAL=0` on `cmd` (a cargo, or a program that runs cargo such as maturin)
/// after [`one_shot_builds`]; nothing otherwise.
pub(crate) fn lean_build(cmd: &mut Command) {
    if ONE_SHOT_BUILDS.load(Ordering::Relaxed) {
        cmd.env("CARGO_INCREMENTAL", "0");
    }
}

/// A `cargo` command for the toolchain that runs this xtask (rust-toolchain.toml's).
///
/// `cargo xtask` is `cargo run`, which sets `CARGO` to the cargo binary it was started as.
pub(crate) fn cargo(root: &Path) -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    cmd.current_dir(root);
    lean_build(&mut cmd);
    cmd
}

/// Free space on the file system that holds `path`, in bytes (`df -Pk`); `None` when `df`
/// cannot tell.
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_df_available(&String::from_utf8_lossy(&out.stdout))
}

/// The "Available" column (KiB) of `df -Pk`'s one data line, in bytes.
fn parse_df_available(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A `cargo +TOOLCHAIN` command: goes through the rustup proxy, not `$CARGO`.
pub(crate) fn cargo_toolchain(root: &Path, toolchain: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg(format!("+{toolchain}")).current_dir(root);
    // Set by rustup for the process it proxies; it must not pin the nested toolchain.
    cmd.env_remove("RUSTUP_TOOLCHAIN");
    cmd
}

/// `cmd` as a shell-like string for messages.
pub(crate) fn display(cmd: &Command) -> String {
    let mut out = cmd.get_program().to_string_lossy().into_owned();
    if let Some(name) = Path::new(&out).file_name() {
        out = name.to_string_lossy().into_owned();
    }
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        out.push(' ');
        if arg.is_empty() || arg.contains(char::is_whitespace) || arg.contains('\'') {
            out.push_str(&format!("'{}'", arg.replace('\'', r"'\''")));
        } else {
            out.push_str(&arg);
        }
    }
    out
}

/// Runs `cmd` with inherited stdio; an unsuccessful exit is an error.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().map_err(|source| Error::Spawn {
        program: display(cmd),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: display(cmd),
            status: status.to_string(),
        })
    }
}

/// Runs `cmd` and captures its output; an unsuccessful exit is an error carrying stderr.
pub(crate) fn capture(cmd: &mut Command) -> Result<String> {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().map_err(|source| Error::Spawn {
        program: display(cmd),
        source,
    })?;
    if status.success() {
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    } else {
        Err(Error::Command {
            command: display(cmd),
            status: format!("{status}\n{}", String::from_utf8_lossy(&stderr).trim_end()),
        })
    }
}

/// `cargo metadata --no-deps` as JSON (offline first: the lock file is enough for it).
pub(crate) fn cargo_metadata(root: &Path) -> Result<serde_json::Value> {
    let args = ["metadata", "--format-version", "1", "--no-deps"];
    let json = capture(cargo(root).args(args).arg("--offline"))
        .or_else(|_| capture(cargo(root).args(args)))?;
    serde_json::from_str(&json).map_err(|e| Error::Check {
        check: "cargo metadata".into(),
        problems: vec![format!("output is not JSON: {e}")],
    })
}

/// The target directory cargo uses for this workspace (honours `CARGO_TARGET_DIR`).
pub(crate) fn target_dir(root: &Path) -> Result<PathBuf> {
    let metadata = cargo_metadata(root)?;
    metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| Error::Check {
            check: "cargo metadata".into(),
            problems: vec!["no `target_directory` in its output".into()],
        })
}

/// Whether `cmd` can be started and exits successfully (output discarded).
pub(crate) fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The full path of `program` if it is on `PATH`.
pub(crate) fn which(program: &str) -> Option<PathBuf> {
    which_in(&std::env::var_os("PATH")?, program)
}

/// The full path of `program` if it is in one of the directories of `path` (a `PATH` value).
pub(crate) fn which_in(path: &std::ffi::OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file with an execute bit.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `lines` lines of the file at `path` (empty if it cannot be read).
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..].join("\n")
}

/// Creates `path` and its parents.
pub(crate) fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| Error::io("cannot create directory", path, e))
}

/// Writes `contents` to `path`.
pub(crate) fn write(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, contents).map_err(|e| Error::io("cannot write", path, e))
}

/// `apt-get update`, then `apt-get install -y -q --no-install-recommends PACKAGES`
/// (non-interactive), announced and timed under `[tag]`. The caller checks it runs as root
/// and that what it needed is there afterwards.
pub(crate) fn apt_install<S: AsRef<std::ffi::OsStr> + std::fmt::Display>(
    tag: &str,
    packages: &[S],
) -> Result<()> {
    let names: Vec<String> = packages.iter().map(ToString::to_string).collect();
    println!(
        "[{tag}] running `apt-get update && apt-get install -y --no-install-recommends {}`",
        names.join(" ")
    );
    let started = std::time::Instant::now();
    run(Command::new("apt-get")
        .args(["update", "-q"])
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(packages.iter().map(AsRef::as_ref))
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    println!(
        "[{tag}] {} installed in {:.1}s",
        names.join(" "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        let mut cmd = Command::new("/usr/bin/nginx");
        cmd.args(["-g", "daemon off;", "-p", "it's"]);
        assert_eq!(display(&cmd), r"nginx -g 'daemon off;' -p 'it'\''s'");
    }

    #[test]
    fn df_available_is_the_fourth_column_in_kib() {
        let text = "Filesystem 1024-blocks Used Available Capacity Mounted on\n\
                    /dev/vda 263174212 68021144 28397432 71% /\n";
        assert_eq!(parse_df_available(text), Some(28_397_432 * 1024));
        assert_eq!(parse_df_available("Filesystem\n"), None);
        assert_eq!(parse_df_available(""), None);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = std::env::temp_dir().join(format!("xtask-tail-{}", std::process::id()));
        mkdir(&dir).unwrap();
        let file = dir.join("log");
        write(&file, "a\nb\nc\nd\n").unwrap();
        assert_eq!(tail(&file, 2), "c\nd");
        assert_eq!(tail(&file, 10), "a\nb\nc\nd");
        assert_eq!(tail(&dir.join("missing"), 3), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn which_finds_sh() {
        assert!(which("sh").is_some());
        assert!(which("surely-no-such-program-xtask").is_none());
    }
}
