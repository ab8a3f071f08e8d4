//! The state of a set of servers on disk: session directories (`up/`, `run-<pid>/`), the PID
//! and port files of each server, and the `env.sh` the tests source.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::process::{Proc, process_alive};
use super::{ENV_REMOVE, Kind, Running, removable};
use crate::error::Result;
use crate::http;
use crate::util;

pub(super) fn servers_dir(root: &Path) -> PathBuf {
    root.join(".xtask").join("servers")
}

/// Where one set of servers keeps its state: `up/` for the detached servers of `servers up`,
/// `run-<pid>/` for those of a `ci` or `bench` run, so that runs in one checkout (and a human's
/// `servers up`) never stop each other's servers.
pub(super) fn session_dir(root: &Path, detach: bool) -> PathBuf {
    if detach {
        servers_dir(root).join("up")
    } else {
        servers_dir(root).join(format!("run-{}", std::process::id()))
    }
}

/// The PID of the xtask run owning `dir`, if `dir` is a `run-<pid>` session.
pub(super) fn session_owner(dir: &Path) -> Option<u32> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("run-")?
        .parse()
        .ok()
}

/// Whether `pid` is a live xtask process (the owner of a session directory).
pub(super) fn xtask_alive(pid: u32) -> bool {
    process_alive(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("xtask"))
}

/// Stops the servers of sessions whose xtask run is gone (killed, or stopped by Ctrl-C before
/// it could clean up), and removes their directories.
pub(super) fn clean_stale_sessions(root: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(servers_dir(root)) else {
        return Ok(());
    };
    for dir in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let Some(owner) = session_owner(&dir) else {
            continue;
        };
        if owner == std::process::id() || xtask_alive(owner) {
            continue;
        }
        for kind in Kind::ALL.into_iter().rev() {
            stop_recorded(&dir, kind)?;
        }
        if removable(&dir) {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}
pub(super) fn pid_file(session: &Path, kind: Kind) -> PathBuf {
    kind.state_dir(session).join("pid")
}

fn port_file(session: &Path, kind: Kind) -> PathBuf {
    kind.state_dir(session).join("port")
}

fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The processes recorded for `kind` (`label pid` lines) that are alive and still ours.
fn recorded_procs(session: &Path, kind: Kind) -> Vec<Proc> {
    let Ok(text) = std::fs::read_to_string(pid_file(session, kind)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (label, pid) = line.split_once(' ')?;
            let pid: u32 = pid.trim().parse().ok()?;
            let label = LABELS.iter().copied().find(|l| *l == label)?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let ours = process_alive(pid) && String::from_utf8_lossy(&cmdline).contains(label);
            ours.then_some(Proc {
                label,
                pid,
                child: None,
            })
        })
        .collect()
}

/// Every process label, as written in PID files (one word, found in the process's command
/// line: that is how a recorded PID is known to be still ours).
pub(super) const LABELS: &[&str] = &[
    "nginx",
    "moto_server",
    "fake-gcs-server",
    "gcs_front",
    "azurite",
    "ceph-mon",
    "ceph-osd",
    "radosgw",
    "rclone",
];

/// Stops the processes recorded in `kind`'s PID file, if they run. Returns whether any did.
///
/// The mount is unmounted first, also when its process is gone (a killed rclone leaves a
/// dead mount behind).
pub(super) fn stop_recorded(session: &Path, kind: Kind) -> Result<bool> {
    kind.before_stop(session)?;
    let mut procs = recorded_procs(session, kind);
    let stopped = !procs.is_empty();
    while let Some(mut proc) = procs.pop() {
        println!("[servers] stopping {} (pid {})", proc.label, proc.pid);
        proc.stop()?;
        println!("[servers] {} stopped (pid {})", proc.label, proc.pid);
    }
    let _ = std::fs::remove_file(pid_file(session, kind));
    Ok(stopped)
}

pub(super) fn status_line(session: &Path, kind: Kind) -> String {
    let procs = recorded_procs(session, kind);
    if procs.is_empty()
        && let Some(mount) = kind.mounted_dir(session)
    {
        return format!(
            "{}: not running, but its dead mount remains at {} (`servers up {}` or \
             `servers down {}` unmounts it)",
            kind.name(),
            mount.display(),
            kind.name(),
            kind.name()
        );
    }
    if procs.is_empty() {
        return format!("{}: not running", kind.name());
    }
    let pids = procs
        .iter()
        .map(|p| format!("{} {}", p.label, p.pid))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(status) = kind.mount_status(session) {
        return format!("{}: running ({pids}), {status}", kind.name());
    }
    let port: Option<u16> = read_number(&port_file(session, kind));
    let answer = port.map_or_else(
        || "no port recorded".to_owned(),
        |port| match http::request(port, "GET", "/", &[], Duration::from_secs(2)) {
            Ok(response) => format!("http://127.0.0.1:{port}/ answers {}", response.status),
            Err(err) => format!("http://127.0.0.1:{port}/ does not answer: {err}"),
        },
    );
    format!("{}: running ({pids}), {answer}", kind.name())
}

/// The test environment of the `kind` servers recorded in `session` that still run.
fn recorded_env(session: &Path, kind: Kind) -> Option<Vec<(&'static str, String)>> {
    if recorded_procs(session, kind).is_empty() {
        return None;
    }
    let port: u16 = read_number(&port_file(session, kind))?;
    kind.env(session, port)
}

/// The environment of every server of `session`: those just `started`, and those recorded
/// earlier that still run, so that `servers up ceph` keeps nginx and moto in `env.sh`.
pub(super) fn session_env(session: &Path, started: &[Running]) -> Vec<(&'static str, String)> {
    let mut env = Vec::new();
    for kind in Kind::ALL {
        match started.iter().find(|r| r.kind == kind) {
            Some(running) => env.extend(running.env.iter().cloned()),
            None => env.extend(recorded_env(session, kind).unwrap_or_default()),
        }
    }
    // Ceph and moto share the AWS variables; keep the first of each name.
    let mut seen = std::collections::HashSet::new();
    env.retain(|(name, _)| seen.insert(*name));
    env
}

/// Writes `session`'s `env.sh` from [`session_env`].
pub(super) fn write_env_file(session: &Path, started: &[Running]) -> Result<()> {
    util::write(
        &session.join("env.sh"),
        env_script(&session_env(session, started)),
    )
}

/// `export`/`unset` lines for a POSIX shell.
pub(super) fn env_script(env: &[(&str, String)]) -> String {
    let mut out = String::new();
    for name in ENV_REMOVE {
        out.push_str(&format!("unset {name}\n"));
    }
    for (name, value) in env {
        out.push_str(&format!(
            "export {name}='{}'\n",
            value.replace('\'', r"'\''")
        ));
    }
    out
}
/// Writes the PID and port files of a server that answered.
pub(super) fn record(
    session: &Path,
    kind: Kind,
    procs: Vec<Proc>,
    port: u16,
    env: Vec<(&'static str, String)>,
) -> Result<Running> {
    let lines: String = procs
        .iter()
        .map(|p| format!("{} {}\n", p.label, p.pid))
        .collect();
    util::write(&pid_file(session, kind), lines)?;
    util::write(&port_file(session, kind), format!("{port}\n"))?;
    Ok(Running { kind, procs, env })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn labels_are_one_word_as_pid_files_are_split() {
        for label in LABELS {
            assert!(!label.contains(char::is_whitespace), "{label:?}");
        }
    }

    #[test]
    fn sessions_are_per_run_except_for_servers_up() {
        let root = Path::new("/r");
        assert_eq!(session_dir(root, true), Path::new("/r/.xtask/servers/up"));
        let run = session_dir(root, false);
        assert_eq!(session_owner(&run), Some(std::process::id()));
        assert_eq!(session_owner(&session_dir(root, true)), None);
        assert_eq!(session_owner(Path::new("/r/.xtask/servers/run-x")), None);
        // The test binary is `xtask-<hash>`: it counts as a live xtask run.
        assert!(xtask_alive(std::process::id()));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!xtask_alive(pid));
    }

    #[test]
    fn env_script_unsets_and_quotes() {
        let script = env_script(&[("A", "it's".to_owned()), ("B", "x y".to_owned())]);
        assert!(script.contains("unset AWS_CA_BUNDLE\n"), "{script}");
        assert!(script.contains(r"export A='it'\''s'"), "{script}");
        assert!(script.contains("export B='x y'\n"), "{script}");
    }
}
