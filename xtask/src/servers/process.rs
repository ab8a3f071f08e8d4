//! The processes of the servers: spawning them with a log, waiting until they answer, and
//! stopping them by escalating signals.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::READY_TIMEOUT;
use crate::error::{Error, Result};
use crate::util;

/// Signals sent in turn to stop a process labelled `label`, each followed by a wait.
fn stop_schedule(label: &str) -> &'static [(Signal, Duration)] {
    // QUIT is nginx's graceful stop (~1.2 s here), TERM its fast one.
    const NGINX: &[(Signal, Duration)] = &[
        (Signal::SIGQUIT, Duration::from_secs(5)),
        (Signal::SIGTERM, Duration::from_secs(3)),
        (Signal::SIGKILL, Duration::from_secs(2)),
    ];
    const OTHERS: &[(Signal, Duration)] = &[
        (Signal::SIGTERM, Duration::from_secs(10)),
        (Signal::SIGKILL, Duration::from_secs(2)),
    ];
    if label == "nginx" { NGINX } else { OTHERS }
}
/// One process that we started. Its label is also a word of its `/proc/PID/cmdline`, which
/// guards against acting on a reused PID.
#[derive(Debug)]
pub(super) struct Proc {
    pub(super) label: &'static str,
    pub(super) pid: u32,
    /// Present when this process started it: lets us reap it.
    pub(super) child: Option<Child>,
}

impl Proc {
    pub(super) fn new(label: &'static str, child: Child) -> Proc {
        Proc {
            label,
            pid: child.id(),
            child: Some(child),
        }
    }

    pub(super) fn stop(&mut self) -> Result<()> {
        stop_with(
            self.label,
            self.pid,
            self.child.as_mut(),
            stop_schedule(self.label),
        )
    }
}

/// Stops its processes, last started first, when dropped: the state of a server half-way
/// through its start-up.
#[derive(Debug, Default)]
pub(super) struct ProcGuard(pub(super) Vec<Proc>);

impl Drop for ProcGuard {
    fn drop(&mut self) {
        while let Some(mut proc) = self.0.pop() {
            if let Err(err) = proc.stop() {
                eprintln!("[servers] {err}");
            }
        }
    }
}
/// Whether `pid` is a live process (a zombie is not).
pub(super) fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Format: `pid (comm) state ...`; comm may contain spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// Whether the process has exited, reaping it when it is our child.
fn exited(pid: u32, child: Option<&mut Child>) -> bool {
    match child {
        Some(child) => !matches!(child.try_wait(), Ok(None)),
        None => !process_alive(pid),
    }
}

fn stop_with(
    name: &'static str,
    pid: u32,
    mut child: Option<&mut Child>,
    schedule: &[(Signal, Duration)],
) -> Result<()> {
    let raw = i32::try_from(pid).map_err(|_| Error::server(name, format!("bad pid {pid}")))?;
    for &(signal, wait) in schedule {
        if exited(pid, child.as_deref_mut()) {
            return Ok(());
        }
        if let Err(errno) = kill(Pid::from_raw(raw), signal) {
            if errno == nix::errno::Errno::ESRCH {
                return Ok(());
            }
            return Err(Error::server(
                name,
                format!("cannot send {signal} to pid {pid}: {errno}"),
            ));
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if exited(pid, child.as_deref_mut()) {
                return Ok(());
            }
            sleep(Duration::from_millis(20));
        }
        eprintln!(
            "[servers] {name} (pid {pid}) still running {:.0}s after {signal}",
            wait.as_secs_f64()
        );
    }
    if exited(pid, child) {
        Ok(())
    } else {
        Err(Error::server(
            name,
            format!("pid {pid} is still running after every stop signal"),
        ))
    }
}

pub(super) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Spawns `cmd` with stdin closed and stdout+stderr appended to `log`.
pub(super) fn spawn_logged(
    name: &'static str,
    cmd: &mut Command,
    log: &Path,
    detach: bool,
) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let file = File::create(log).map_err(|e| Error::io("cannot create log", log, e))?;
    let file2 = file
        .try_clone()
        .map_err(|e| Error::io("cannot reopen log", log, e))?;
    cmd.stdin(Stdio::null()).stdout(file).stderr(file2);
    if detach {
        cmd.process_group(0);
    }
    cmd.spawn().map_err(|source| Error::Spawn {
        program: format!("{name}: {}", util::display(cmd)),
        source,
    })
}

/// Polls `check` until it says ready, the child exits, or the timeout passes.
///
/// `check` returns `Ok(true)` when ready, `Ok(false)` to keep waiting (nothing listening yet),
/// and `Err` when the server answered wrongly (no point waiting).
pub(super) fn wait_ready(
    name: &'static str,
    child: &mut Child,
    mut check: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::server(
                name,
                format!("exited during start-up: {status}"),
            ));
        }
        if check()? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::server(
                name,
                format!("did not answer within {}s", READY_TIMEOUT.as_secs()),
            ));
        }
        sleep(Duration::from_millis(50));
    }
}

/// Adds the log tail to a start-up error and stops the half-started process.
pub(super) fn failed_start(
    label: &'static str,
    child: Child,
    err: Error,
    logs: &[PathBuf],
) -> Error {
    let _ = Proc::new(label, child).stop();
    log_tail_error(err, logs)
}

/// Adds the tails of `logs` to a [`Error::Server`].
pub(super) fn log_tail_error(err: Error, logs: &[PathBuf]) -> Error {
    let log_tail = logs
        .iter()
        .map(|log| format!("[{}]\n{}", log.display(), util::tail(log, 20)))
        .collect::<Vec<_>>()
        .join("\n");
    match err {
        Error::Server { server, msg, .. } => Error::Server {
            server,
            msg,
            log_tail,
        },
        other => other,
    }
}

pub(super) fn logs_mention_port_in_use(logs: &[PathBuf]) -> bool {
    logs.iter()
        .any(|log| util::tail(log, 50).contains("Address already in use"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_alive_sees_live_and_reaped_processes() {
        assert!(process_alive(std::process::id()));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }

    #[test]
    fn stop_escalates_when_a_signal_is_ignored() {
        // `trap '' TERM` is inherited across exec: this sleep ignores SIGTERM.
        let mut child = Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 30"])
            .spawn()
            .unwrap();
        sleep(Duration::from_millis(200));
        let pid = child.id();
        let schedule = [
            (Signal::SIGTERM, Duration::from_millis(300)),
            (Signal::SIGKILL, Duration::from_secs(5)),
        ];
        stop_with("sleep", pid, Some(&mut child), &schedule).unwrap();
        assert!(child.try_wait().unwrap().is_some(), "child must be reaped");
    }

    #[test]
    fn stop_fails_when_every_signal_is_ignored() {
        let mut child = Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 30"])
            .spawn()
            .unwrap();
        sleep(Duration::from_millis(200));
        let pid = child.id();
        let schedule = [(Signal::SIGTERM, Duration::from_millis(300))];
        let err = stop_with("sleep", pid, Some(&mut child), &schedule).unwrap_err();
        assert!(err.to_string().contains("still running"), "{err}");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
