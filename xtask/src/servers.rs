//! Real servers on loopback for the server-backed tests: nginx (HTTP range origin) and moto (S3).
//!
//! Everything lives under `.xtask/servers/<name>/` (gitignored): generated config, logs, the PID
//! of the process we started, and for nginx the directory it serves. `ci` and `bench` start the
//! servers in their own process group so a Ctrl-C reaches them too, and stop them through
//! [`Servers`]' `Drop` whatever happens; `servers up` starts them detached for a human, and
//! `servers down` stops them by the recorded PID.
//!
//! The contract with the tests is the environment in [`Servers::env`] (see the README).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::error::{Error, Result};
use crate::http;
use crate::util;

/// The bucket created on moto for the tests.
pub(crate) const BUCKET: &str = "guideloom-test";

/// Variables removed from the tests' environment: this machine sets `AWS_CA_BUNDLE`, and a
/// profile, session token or endpoint override from the host would redirect or break requests.
pub(crate) const ENV_REMOVE: &[&str] = &[
    "AWS_CA_BUNDLE",
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
];

/// How long a server may take to answer after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts at starting a server when its freshly picked port was taken in between.
const PORT_ATTEMPTS: u32 = 3;

/// `cargo xtask servers <action>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Up,
    Down,
    Status,
}

impl Action {
    pub(crate) fn parse(word: &str) -> Option<Action> {
        match word {
            "up" | "start" => Some(Action::Up),
            "down" | "stop" => Some(Action::Down),
            "status" => Some(Action::Status),
            _ => None,
        }
    }
}

/// The servers this module knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Nginx,
    Moto,
    /// A one-node Ceph RADOS Gateway (mon + memstore OSD + radosgw). Started by `ci` unless
    /// `GUIDELOOM_XTASK_CEPH=0`; opt-in elsewhere: `servers up ceph`, or
    /// `GUIDELOOM_XTASK_CEPH=1` for `bench` and a bare `servers up`.
    Ceph,
}

impl Kind {
    /// Every server, in start order.
    pub(crate) const ALL: [Kind; 3] = [Kind::Nginx, Kind::Moto, Kind::Ceph];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Nginx => "nginx",
            Kind::Moto => "moto",
            Kind::Ceph => "ceph",
        }
    }

    pub(crate) fn parse(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == word)
    }

    fn state_dir(self, session: &Path) -> PathBuf {
        session.join(self.name())
    }
}

/// The servers `bench` and a bare `servers up` start: nginx and moto, plus Ceph RGW when
/// `GUIDELOOM_XTASK_CEPH=1`.
pub(crate) fn default_kinds() -> Vec<Kind> {
    kinds_with_ceph(ceph_setting().as_deref(), false)
}

/// The servers `ci` starts: nginx, moto and Ceph RGW, unless `GUIDELOOM_XTASK_CEPH=0`.
/// (Measured here: about 18 s from start to a ready RGW user, about 140 MB resident; the
/// first run also installs 123 Debian packages, 54 s. See the testing section of the README.)
pub(crate) fn ci_kinds() -> Vec<Kind> {
    kinds_with_ceph(ceph_setting().as_deref(), true)
}

fn ceph_setting() -> Option<String> {
    std::env::var("GUIDELOOM_XTASK_CEPH").ok()
}

/// nginx and moto, plus Ceph when `setting` is `1`, or when it is not `0` and `by_default`.
fn kinds_with_ceph(setting: Option<&str>, by_default: bool) -> Vec<Kind> {
    let mut kinds = vec![Kind::Nginx, Kind::Moto];
    let ceph = match setting {
        Some("1") => true,
        Some("0") => false,
        _ => by_default,
    };
    if ceph {
        kinds.push(Kind::Ceph);
    }
    kinds
}

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

fn servers_dir(root: &Path) -> PathBuf {
    root.join(".xtask").join("servers")
}

/// Where one set of servers keeps its state: `up/` for the detached servers of `servers up`,
/// `run-<pid>/` for those of a `ci` or `bench` run, so that runs in one checkout (and a human's
/// `servers up`) never stop each other's servers.
fn session_dir(root: &Path, detach: bool) -> PathBuf {
    if detach {
        servers_dir(root).join("up")
    } else {
        servers_dir(root).join(format!("run-{}", std::process::id()))
    }
}

/// The PID of the xtask run owning `dir`, if `dir` is a `run-<pid>` session.
fn session_owner(dir: &Path) -> Option<u32> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("run-")?
        .parse()
        .ok()
}

/// Whether `pid` is a live xtask process (the owner of a session directory).
fn xtask_alive(pid: u32) -> bool {
    process_alive(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("xtask"))
}

/// Stops the servers of sessions whose xtask run is gone (killed, or stopped by Ctrl-C before
/// it could clean up), and removes their directories.
fn clean_stale_sessions(root: &Path) -> Result<()> {
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
        for kind in Kind::ALL {
            stop_recorded(&dir, kind)?;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn venv_dir(root: &Path) -> PathBuf {
    root.join(".xtask").join("venv")
}

/// One process that we started. Its label is also a word of its `/proc/PID/cmdline`, which
/// guards against acting on a reused PID.
#[derive(Debug)]
struct Proc {
    label: &'static str,
    pid: u32,
    /// Present when this process started it: lets us reap it.
    child: Option<Child>,
}

impl Proc {
    fn new(label: &'static str, child: Child) -> Proc {
        Proc {
            label,
            pid: child.id(),
            child: Some(child),
        }
    }

    fn stop(&mut self) -> Result<()> {
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
struct ProcGuard(Vec<Proc>);

impl Drop for ProcGuard {
    fn drop(&mut self) {
        while let Some(mut proc) = self.0.pop() {
            if let Err(err) = proc.stop() {
                eprintln!("[servers] {err}");
            }
        }
    }
}

/// One server that answered: its processes (in start order) and its variables.
#[derive(Debug)]
struct Running {
    kind: Kind,
    procs: Vec<Proc>,
    env: Vec<(&'static str, String)>,
}

impl Running {
    fn pids(&self) -> String {
        self.procs
            .iter()
            .map(|p| p.pid.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Servers started by this process. Dropping it stops them (unless [`Servers::detach`]ed).
#[derive(Debug)]
pub(crate) struct Servers {
    session: PathBuf,
    running: Vec<Running>,
}

impl Servers {
    /// Starts the `kinds` servers, first stopping any left over from an earlier run.
    ///
    /// `detach`: start them in a new process group so they outlive this process and a Ctrl-C in
    /// its terminal (`servers up`); otherwise they share our process group and die with us.
    pub(crate) fn start(root: &Path, kinds: &[Kind], detach: bool) -> Result<Servers> {
        clean_stale_sessions(root)?;
        let session = session_dir(root, detach);
        let mut servers = Servers {
            session: session.clone(),
            running: Vec::new(),
        };
        for &kind in kinds {
            stop_recorded(&session, kind)?;
            let started = Instant::now();
            // On error `servers` is dropped here, stopping those already started.
            let running = match kind {
                Kind::Nginx => start_nginx(&session, detach)?,
                Kind::Moto => start_moto(root, &session, detach)?,
                Kind::Ceph => start_ceph(root, &session, detach)?,
            };
            println!(
                "[servers] {} ready (pid {}) in {:.1}s: {}",
                kind.name(),
                running.pids(),
                started.elapsed().as_secs_f64(),
                running
                    .env
                    .first()
                    .map(|(k, v)| format!("{k}={v}"))
                    .unwrap_or_default()
            );
            servers.running.push(running);
        }
        write_env_file(&session, &servers.running)?;
        Ok(servers)
    }

    /// The variables the tests read (see the module docs), including dummy AWS credentials.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        self.running.iter().flat_map(|r| r.env.clone()).collect()
    }

    /// Whether a `kind` server was started by this value.
    pub(crate) fn has(&self, kind: Kind) -> bool {
        self.running.iter().any(|r| r.kind == kind)
    }

    /// Sets [`Servers::env`] on `cmd` and removes [`ENV_REMOVE`].
    pub(crate) fn apply(&self, cmd: &mut Command) {
        for name in ENV_REMOVE {
            cmd.env_remove(name);
        }
        cmd.envs(self.env());
    }

    /// Stops every server (all are tried even if one fails) and forgets them.
    pub(crate) fn stop(&mut self) -> Result<()> {
        if self.running.is_empty() {
            return Ok(());
        }
        let mut problems = Vec::new();
        while let Some(mut running) = self.running.pop() {
            let kind = running.kind;
            let pids = running.pids();
            let before = problems.len();
            while let Some(mut proc) = running.procs.pop() {
                if let Err(err) = proc.stop() {
                    problems.push(err.to_string());
                }
            }
            if problems.len() == before {
                let _ = std::fs::remove_file(pid_file(&self.session, kind));
                println!("[servers] {} stopped (pid {pids})", kind.name());
            }
        }
        let _ = std::fs::remove_file(self.session.join("env.sh"));
        if problems.is_empty() {
            // A run's state (logs, the files tests wrote for nginx) goes with its servers.
            if session_owner(&self.session).is_some() {
                let _ = std::fs::remove_dir_all(&self.session);
            }
            Ok(())
        } else {
            Err(Error::Check {
                check: "stopping servers".into(),
                problems,
            })
        }
    }

    /// Leaves the servers running after this value is gone (`servers up`).
    fn detach(mut self) {
        self.running.clear();
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Err(err) = self.stop() {
            eprintln!("[servers] {err}");
        }
    }
}

/// `cargo xtask servers up|down|status [SERVER]...`: `kinds` empty means the default set for
/// `up` and every server for `down` and `status`.
pub(crate) fn cli(root: &Path, action: Action, kinds: &[Kind]) -> Result<()> {
    let chosen = |default: Vec<Kind>| {
        if kinds.is_empty() {
            default
        } else {
            kinds.to_vec()
        }
    };
    let up = session_dir(root, true);
    match action {
        Action::Up => {
            let servers = Servers::start(root, &chosen(default_kinds()), true)?;
            let env_sh = up.join("env.sh");
            let shown = env_sh.strip_prefix(root).unwrap_or(&env_sh).display();
            println!("[servers] environment for the tests (also in {shown}):");
            print!("{}", env_script(&session_env(&up, &servers.running)));
            println!(
                "[servers] `source {shown}`, then `cargo test`; stop them with `cargo xtask servers down`"
            );
            servers.detach();
            Ok(())
        }
        Action::Down => {
            clean_stale_sessions(root)?;
            for kind in chosen(Kind::ALL.to_vec()) {
                if !stop_recorded(&up, kind)? {
                    println!("[servers] {}: not running", kind.name());
                }
            }
            // `servers down ceph` keeps nginx and moto (and their variables) running.
            if session_env(&up, &[]).is_empty() {
                let _ = std::fs::remove_file(up.join("env.sh"));
            } else {
                write_env_file(&up, &[])?;
            }
            Ok(())
        }
        Action::Status => {
            for kind in chosen(Kind::ALL.to_vec()) {
                println!("[servers] {}", status_line(&up, kind));
            }
            let runs = std::fs::read_dir(servers_dir(root))
                .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_else(|_| Vec::new());
            for dir in runs {
                if let Some(owner) = session_owner(&dir).filter(|&pid| xtask_alive(pid)) {
                    for kind in Kind::ALL {
                        let line = status_line(&dir, kind);
                        if !line.ends_with("not running") {
                            println!("[servers] {line} (for the xtask run, pid {owner})");
                        }
                    }
                }
            }
            Ok(())
        }
    }
}

fn pid_file(session: &Path, kind: Kind) -> PathBuf {
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

/// Every process label, as written in PID files.
const LABELS: &[&str] = &["nginx", "moto_server", "ceph-mon", "ceph-osd", "radosgw"];

/// Stops the processes recorded in `kind`'s PID file, if they run. Returns whether any did.
fn stop_recorded(session: &Path, kind: Kind) -> Result<bool> {
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

fn status_line(session: &Path, kind: Kind) -> String {
    let procs = recorded_procs(session, kind);
    if procs.is_empty() {
        return format!("{}: not running", kind.name());
    }
    let pids = procs
        .iter()
        .map(|p| format!("{} {}", p.label, p.pid))
        .collect::<Vec<_>>()
        .join(", ");
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

/// Whether `pid` is a live process (a zombie is not).
fn process_alive(pid: u32) -> bool {
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

/// The test environment of the `kind` servers recorded in `session` that still run.
fn recorded_env(session: &Path, kind: Kind) -> Option<Vec<(&'static str, String)>> {
    if recorded_procs(session, kind).is_empty() {
        return None;
    }
    let port: u16 = read_number(&port_file(session, kind))?;
    Some(match kind {
        Kind::Nginx => nginx_env(port, &kind.state_dir(session).join("root")),
        Kind::Moto => moto_env(port),
        Kind::Ceph => ceph_env(port),
    })
}

/// The environment of every server of `session`: those just `started`, and those recorded
/// earlier that still run, so that `servers up ceph` keeps nginx and moto in `env.sh`.
fn session_env(session: &Path, started: &[Running]) -> Vec<(&'static str, String)> {
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
fn write_env_file(session: &Path, started: &[Running]) -> Result<()> {
    util::write(
        &session.join("env.sh"),
        env_script(&session_env(session, started)),
    )
}

/// `export`/`unset` lines for a POSIX shell.
fn env_script(env: &[(&str, String)]) -> String {
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

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Spawns `cmd` with stdin closed and stdout+stderr appended to `log`.
fn spawn_logged(name: &'static str, cmd: &mut Command, log: &Path, detach: bool) -> Result<Child> {
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
fn wait_ready(
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
fn failed_start(label: &'static str, child: Child, err: Error, logs: &[PathBuf]) -> Error {
    let _ = Proc::new(label, child).stop();
    log_tail_error(err, logs)
}

/// Adds the tails of `logs` to a [`Error::Server`].
fn log_tail_error(err: Error, logs: &[PathBuf]) -> Error {
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

fn logs_mention_port_in_use(logs: &[PathBuf]) -> bool {
    logs.iter()
        .any(|log| util::tail(log, 50).contains("Address already in use"))
}

// ---------------------------------------------------------------- nginx

/// nginx's path, installing the Debian package when it is missing.
fn ensure_nginx() -> Result<PathBuf> {
    let found = || {
        util::which("nginx").or_else(|| {
            let sbin = PathBuf::from("/usr/sbin/nginx");
            sbin.is_file().then_some(sbin)
        })
    };
    if let Some(path) = found() {
        return Ok(path);
    }
    if !is_root() {
        return Err(Error::server(
            "nginx",
            "not installed, and installing it needs root: \
             `sudo apt-get install -y --no-install-recommends nginx`",
        ));
    }
    println!(
        "[servers] nginx not found: running `apt-get update && apt-get install -y --no-install-recommends nginx`"
    );
    let started = Instant::now();
    util::run(
        Command::new("apt-get")
            .args(["update", "-q"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    util::run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", "nginx"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    println!(
        "[servers] nginx installed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    found().ok_or_else(|| Error::server("nginx", "apt-get installed nginx but it is not on PATH"))
}

/// The nginx config: a static origin for `serve` on 127.0.0.1:`port` (TEST-SERVERS.md §5).
fn nginx_config(state: &Path, serve: &Path, port: u16, as_root: bool) -> String {
    let d = state.display();
    // As root with no `user` line, workers run as `nobody` and get 403 on our files.
    let user = if as_root { "user root root;\n" } else { "" };
    format!(
        "# Generated by `cargo xtask servers`; rewritten at every start.
{user}worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path       {d}/tmp/proxy;
    fastcgi_temp_path     {d}/tmp/fastcgi;
    uwsgi_temp_path       {d}/tmp/uwsgi;
    scgi_temp_path        {d}/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        root {serve};
        max_ranges 64;
        autoindex off;
    }}
}}
",
        serve = serve.display()
    )
}

fn start_nginx(session: &Path, detach: bool) -> Result<Running> {
    let nginx = ensure_nginx()?;
    let state = Kind::Nginx.state_dir(session);
    util::mkdir(&state.join("tmp"))?;
    // A fresh, world-readable directory to serve.
    let serve = state.join("root");
    if serve.exists() {
        std::fs::remove_dir_all(&serve)
            .map_err(|e| Error::io("cannot clear nginx root", &serve, e))?;
    }
    util::mkdir(&serve)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&serve, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io("cannot chmod", &serve, e))?;
    }
    let probe_name = ".xtask-probe";
    let probe_body = b"guideloom xtask probe: range check\n";
    util::write(&serve.join(probe_name), probe_body)?;

    let conf = state.join("nginx.conf");
    let error_log = state.join("error.log");
    let stdout_log = state.join("stdout.log");
    let logs = [error_log.clone(), stdout_log.clone()];
    for attempt in 1..=PORT_ATTEMPTS {
        let port = http::free_port().map_err(|e| Error::io("cannot pick a port", &state, e))?;
        util::write(&conf, nginx_config(&state, &serve, port, is_root()))?;
        let _ = std::fs::remove_file(&error_log);
        let mut cmd = Command::new(&nginx);
        cmd.arg("-p")
            .arg(&state)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(&error_log)
            .args(["-g", "daemon off;"]);
        let mut child = spawn_logged("nginx", &mut cmd, &stdout_log, detach)?;
        let ready = wait_ready("nginx", &mut child, || {
            let range = [("Range", "bytes=10-14")];
            match http::request(
                port,
                "GET",
                &format!("/{probe_name}"),
                &range,
                Duration::from_secs(2),
            ) {
                Err(_) => Ok(false),
                Ok(r) if r.status == 206 && r.body == probe_body[10..15] => Ok(true),
                Ok(r) => Err(Error::server(
                    "nginx",
                    format!(
                        "answered {} (body {:?}) to a range request for a file in {}; \
                         expected 206 with 5 exact bytes (a 403 means the worker cannot read the root)",
                        r.status,
                        String::from_utf8_lossy(&r.body),
                        serve.display()
                    ),
                )),
            }
        });
        match ready {
            Ok(()) => {
                let _ = std::fs::remove_file(serve.join(probe_name));
                let procs = vec![Proc::new("nginx", child)];
                return record(session, Kind::Nginx, procs, port, nginx_env(port, &serve));
            }
            Err(err) => {
                let taken = logs_mention_port_in_use(&logs);
                let err = failed_start("nginx", child, err, &logs);
                if !(taken && attempt < PORT_ATTEMPTS) {
                    return Err(err);
                }
                eprintln!("[servers] nginx: port {port} was taken; trying another");
            }
        }
    }
    Err(Error::server("nginx", "could not find a free port"))
}

fn nginx_env(port: u16, serve: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("GUIDELOOM_NGINX_URL", format!("http://127.0.0.1:{port}/")),
        ("GUIDELOOM_NGINX_ROOT", serve.display().to_string()),
    ]
}

// ---------------------------------------------------------------- moto

/// `moto_server` from the project venv, creating it and installing moto when missing.
fn ensure_moto(root: &Path) -> Result<PathBuf> {
    let venv = venv_dir(root);
    let moto_server = venv.join("bin").join("moto_server");
    if moto_server.is_file() {
        return Ok(moto_server);
    }
    let python = util::which("python3")
        .ok_or_else(|| Error::server("moto", "python3 is not on PATH; it is needed for moto"))?;
    println!(
        "[servers] moto_server not found: creating the venv {} and running `pip install 'moto[server]'`",
        venv.display()
    );
    let started = Instant::now();
    util::run(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
    util::run(
        Command::new(venv.join("bin").join("pip"))
            .args(["install", "--quiet", "moto[server]"])
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    )?;
    println!(
        "[servers] moto installed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    if moto_server.is_file() {
        Ok(moto_server)
    } else {
        Err(Error::server(
            "moto",
            format!("pip succeeded but {} is missing", moto_server.display()),
        ))
    }
}

/// `moto_server`, but serving one request at a time.
///
/// Stock `moto_server` runs werkzeug with a thread per request and checks `If-Match` /
/// `If-None-Match` outside any lock, so concurrent conditional PUTs can both win (seen here: a
/// raced CAS counter ended at 99 of 100; 7 of 8 concurrent annotators landed).
/// Real S3 evaluates each conditional write atomically. With `threaded=False` every request
/// runs to completion before the next starts, which restores that per-request atomicity
/// without hiding client bugs: read-modify-write cycles of different clients still interleave.
/// The cost is HTTP/1.0 without keep-alive (one connection per request).
const MOTO_SERIAL_LAUNCHER: &str = "\
# Generated by `cargo xtask servers`: moto_server, one request at a time (see servers.rs).
import sys
from moto import server
from werkzeug import serving

if not hasattr(server, 'run_simple'):
    sys.exit('moto.server.run_simple not found: this moto version cannot be serialized here')


def run_serialized(*args, **kwargs):
    kwargs['threaded'] = False
    return serving.run_simple(*args, **kwargs)


server.run_simple = run_serialized
server.main(sys.argv[1:])
";

fn start_moto(root: &Path, session: &Path, detach: bool) -> Result<Running> {
    let moto_server = ensure_moto(root)?;
    let python = moto_server.with_file_name("python3");
    let state = Kind::Moto.state_dir(session);
    util::mkdir(&state)?;
    let launcher = state.join("moto_server_serial.py");
    util::write(&launcher, MOTO_SERIAL_LAUNCHER)?;
    let log = state.join("moto.log");
    let logs = [log.clone()];
    for attempt in 1..=PORT_ATTEMPTS {
        let port = http::free_port().map_err(|e| Error::io("cannot pick a port", &state, e))?;
        let mut cmd = Command::new(&python);
        cmd.arg(&launcher)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            // Python must not buffer the log we show on failure.
            .env("PYTHONUNBUFFERED", "1");
        for name in ENV_REMOVE {
            cmd.env_remove(name);
        }
        let mut child = spawn_logged("moto", &mut cmd, &log, detach)?;
        let ready = wait_ready("moto", &mut child, || {
            match http::request(port, "GET", "/moto-api/", &[], Duration::from_secs(2)) {
                Err(_) => Ok(false),
                Ok(r) if r.status == 200 => Ok(true),
                Ok(r) => Err(Error::server(
                    "moto",
                    format!("GET /moto-api/ answered {}", r.status),
                )),
            }
        })
        .and_then(|()| create_bucket(port));
        match ready {
            Ok(()) => {
                let procs = vec![Proc::new("moto_server", child)];
                return record(session, Kind::Moto, procs, port, moto_env(port));
            }
            Err(err) => {
                let taken = logs_mention_port_in_use(&logs);
                let err = failed_start("moto_server", child, err, &logs);
                if !(taken && attempt < PORT_ATTEMPTS) {
                    return Err(err);
                }
                eprintln!("[servers] moto: port {port} was taken; trying another");
            }
        }
    }
    Err(Error::server("moto", "could not find a free port"))
}

/// Creates [`BUCKET`] with an unsigned `PUT /bucket` (moto accepts it).
fn create_bucket(port: u16) -> Result<()> {
    let response = http::request(
        port,
        "PUT",
        &format!("/{BUCKET}"),
        &[],
        Duration::from_secs(10),
    )
    .map_err(|e| Error::server("moto", format!("PUT /{BUCKET} failed: {e}")))?;
    if response.status == 200 {
        Ok(())
    } else {
        Err(Error::server(
            "moto",
            format!(
                "PUT /{BUCKET} answered {}: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            ),
        ))
    }
}

fn moto_env(port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("GUIDELOOM_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("GUIDELOOM_S3_BUCKET", BUCKET.to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
    ]
}

// ---------------------------------------------------------------- Ceph RGW

/// Debian packages of the one-node cluster, and the programs it needs from them.
const CEPH_PACKAGES: &[&str] = &["radosgw", "ceph-mon", "ceph-osd"];
const CEPH_PROGRAMS: &[&str] = &[
    "ceph",
    "ceph-mon",
    "ceph-osd",
    "radosgw",
    "radosgw-admin",
    "monmaptool",
    "ceph-authtool",
];

/// Installs the Ceph packages when a program is missing.
fn ensure_ceph() -> Result<()> {
    let missing = || {
        CEPH_PROGRAMS
            .iter()
            .copied()
            .filter(|p| util::which(p).is_none())
            .collect::<Vec<_>>()
    };
    let absent = missing();
    if absent.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(Error::server(
            "ceph",
            format!(
                "{} not installed, and installing needs root: \
                 `sudo apt-get install -y --no-install-recommends {}`",
                absent.join(", "),
                CEPH_PACKAGES.join(" ")
            ),
        ));
    }
    println!(
        "[servers] ceph: {} not found: running `apt-get update && apt-get install -y --no-install-recommends {}`",
        absent.join(", "),
        CEPH_PACKAGES.join(" ")
    );
    let started = Instant::now();
    util::run(
        Command::new("apt-get")
            .args(["update", "-q"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    util::run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(CEPH_PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    println!(
        "[servers] ceph installed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let absent = missing();
    if absent.is_empty() {
        Ok(())
    } else {
        Err(Error::server(
            "ceph",
            format!("still missing after apt-get: {}", absent.join(", ")),
        ))
    }
}

/// A random UUID from the kernel.
fn kernel_uuid() -> Result<String> {
    let path = Path::new("/proc/sys/kernel/random/uuid");
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| Error::io("cannot read", path, e))
}

/// `ceph.conf` of the throwaway cluster (TEST-SERVERS.md §6): one mon on `mon_port`, a memstore
/// OSD, no authentication, everything on 127.0.0.1. `$name` is Ceph's own metavariable.
fn ceph_config(state: &Path, fsid: &str, mon_port: u16) -> String {
    let d = state.display();
    format!(
        "# Generated by `cargo xtask servers`; rewritten at every start.
[global]
fsid = {fsid}
mon_host = [v2:127.0.0.1:{mon_port}]
public_addr = 127.0.0.1
public_network = 127.0.0.0/8
cluster_network = 127.0.0.0/8
ms_bind_msgr1 = false
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
# With auth none, radosgw fails with get_initial_auth_request -13 unless every mode is crc.
ms_mon_client_mode = crc
ms_client_mode = crc
ms_mon_cluster_mode = crc
ms_cluster_mode = crc
ms_service_mode = crc
ms_mon_service_mode = crc
log_file = {d}/$name.log
run_dir = {d}/run
admin_socket = {d}/run/$name.asok
mon_data = {d}/$name
osd_data = {d}/$name
osd_objectstore = memstore
memstore_device_bytes = 1073741824
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
mon_max_pg_per_osd = 1000
osd_pool_default_pg_autoscale_mode = off
"
    )
}

/// Runs a Ceph setup command, its output going to `log`.
fn ceph_step(cmd: &mut Command, log: &Path) -> Result<String> {
    let out = util::capture(cmd).map_err(|err| {
        log_tail_error(Error::server("ceph", err.to_string()), &[log.to_path_buf()])
    })?;
    Ok(out)
}

/// Polls `ready` every 250 ms for up to `timeout`, failing early if `proc` exits.
fn ceph_wait(
    what: &str,
    proc: &mut Proc,
    timeout: Duration,
    logs: &[PathBuf],
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(child) = proc.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(log_tail_error(
                Error::server(
                    "ceph",
                    format!("{} exited while {what}: {status}", proc.label),
                ),
                logs,
            ));
        }
        if ready() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(log_tail_error(
                Error::server(
                    "ceph",
                    format!("{what}: not done after {}s", timeout.as_secs()),
                ),
                logs,
            ));
        }
        sleep(Duration::from_millis(250));
    }
}

/// Creates [`BUCKET`] on RGW with boto3 from the moto venv (RGW wants signed requests).
fn create_rgw_bucket(python: &Path, port: u16, log: &Path) -> Result<()> {
    let script = format!(
        "import boto3\n\
         s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:{port}', region_name='us-east-1',\n\
         \x20   aws_access_key_id='test', aws_secret_access_key='test')\n\
         s3.create_bucket(Bucket='{BUCKET}')\n"
    );
    let mut cmd = Command::new(python);
    cmd.args(["-c", &script]);
    for name in ENV_REMOVE {
        cmd.env_remove(name);
    }
    ceph_step(&mut cmd, log).map(drop)
}

fn start_ceph(root: &Path, session: &Path, detach: bool) -> Result<Running> {
    ensure_ceph()?;
    // boto3 comes with moto; it creates the bucket.
    let python = ensure_moto(root)?.with_file_name("python3");
    let state = Kind::Ceph.state_dir(session);
    // The cluster is throwaway (memstore): start from nothing each time.
    if state.exists() {
        std::fs::remove_dir_all(&state)
            .map_err(|e| Error::io("cannot clear Ceph state", &state, e))?;
    }
    util::mkdir(&state.join("run"))?;
    let conf = state.join("ceph.conf");
    let fsid = kernel_uuid()?;
    let mon_port = http::free_port().map_err(|e| Error::io("cannot pick a port", &state, e))?;
    let rgw_port = http::free_port().map_err(|e| Error::io("cannot pick a port", &state, e))?;
    util::write(&conf, ceph_config(&state, &fsid, mon_port))?;
    let setup_log = state.join("setup.log");
    let mon_log = state.join("mon.a.log");
    let osd_log = state.join("osd.0.log");
    let rgw_log = state.join("client.rgw.log");
    let logs = [setup_log.clone(), mon_log, osd_log, rgw_log.clone()];
    let ceph = |args: &[&str]| {
        let mut cmd = Command::new("ceph");
        cmd.arg("-c")
            .arg(&conf)
            .args(["--connect-timeout", "5"])
            .args(args);
        cmd
    };

    // Monitor.
    let monmap = state.join("monmap");
    let keyring = state.join("mon.keyring");
    ceph_step(
        Command::new("monmaptool")
            .arg("--create")
            .args(["--addv", "a", &format!("[v2:127.0.0.1:{mon_port}]")])
            .args(["--fsid", &fsid])
            .arg(&monmap),
        &setup_log,
    )?;
    ceph_step(
        Command::new("ceph-authtool")
            .arg("--create-keyring")
            .arg(&keyring)
            .args(["--gen-key", "-n", "mon.", "--cap", "mon", "allow *"]),
        &setup_log,
    )?;
    ceph_step(
        Command::new("ceph-mon")
            .arg("-c")
            .arg(&conf)
            .args(["--mkfs", "-i", "a", "--monmap"])
            .arg(&monmap)
            .arg("--keyring")
            .arg(&keyring),
        &setup_log,
    )?;
    let mut guard = ProcGuard::default();
    let mut mon = Command::new("ceph-mon");
    mon.arg("-c").arg(&conf).args(["-i", "a", "-f"]);
    let child = spawn_logged("ceph", &mut mon, &state.join("mon.stdout.log"), detach)?;
    guard.0.push(Proc::new("ceph-mon", child));
    let last = guard.0.len() - 1;
    ceph_wait(
        "waiting for the monitor",
        &mut guard.0[last],
        READY_TIMEOUT,
        &logs,
        || util::succeeds(&mut ceph(&["status"])),
    )?;

    // OSD, on memstore.
    let osd_uuid = kernel_uuid()?;
    let osd_id = ceph_step(&mut ceph(&["osd", "new", &osd_uuid]), &setup_log)?
        .trim()
        .to_owned();
    util::mkdir(&state.join(format!("osd.{osd_id}")))?;
    ceph_step(
        Command::new("ceph-osd").arg("-c").arg(&conf).args([
            "-i",
            &osd_id,
            "--mkfs",
            "--osd-uuid",
            &osd_uuid,
        ]),
        &setup_log,
    )?;
    let mut osd = Command::new("ceph-osd");
    osd.arg("-c").arg(&conf).args(["-i", &osd_id, "-f"]);
    let child = spawn_logged("ceph", &mut osd, &state.join("osd.stdout.log"), detach)?;
    guard.0.push(Proc::new("ceph-osd", child));
    let last = guard.0.len() - 1;
    ceph_wait(
        "waiting for the OSD to be up",
        &mut guard.0[last],
        READY_TIMEOUT,
        &logs,
        || util::capture(&mut ceph(&["osd", "stat"])).is_ok_and(|out| out.contains("1 up")),
    )?;

    // Gateway.
    let mut rgw = Command::new("radosgw");
    rgw.arg("-c")
        .arg(&conf)
        .args(["-n", "client.rgw", "-f", "--rgw-frontends"])
        .arg(format!("beast endpoint=127.0.0.1:{rgw_port}"));
    let child = spawn_logged("ceph", &mut rgw, &state.join("rgw.stdout.log"), detach)?;
    guard.0.push(Proc::new("radosgw", child));
    let last = guard.0.len() - 1;
    ceph_wait(
        "waiting for radosgw to answer",
        &mut guard.0[last],
        Duration::from_secs(120),
        &logs,
        || http::request(rgw_port, "GET", "/", &[], Duration::from_secs(2)).is_ok(),
    )?;
    ceph_step(
        Command::new("radosgw-admin")
            .arg("-c")
            .arg(&conf)
            .args(["-n", "client.rgw", "user", "create", "--uid", "test"])
            .args([
                "--display-name",
                "test",
                "--access-key",
                "test",
                "--secret-key",
                "test",
            ]),
        &setup_log,
    )?;
    create_rgw_bucket(&python, rgw_port, &setup_log)?;

    let procs = std::mem::take(&mut guard.0);
    record(session, Kind::Ceph, procs, rgw_port, ceph_env(rgw_port))
}

fn ceph_env(port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("GUIDELOOM_RGW_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("GUIDELOOM_RGW_BUCKET", BUCKET.to_owned()),
    ]
}

/// Writes the PID and port files of a server that answered.
fn record(
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
    use super::*;

    #[test]
    fn nginx_config_follows_the_recipe() {
        let conf = nginx_config(Path::new("/s"), Path::new("/s/root"), 4242, false);
        assert!(conf.contains("listen 127.0.0.1:4242;"), "{conf}");
        assert!(conf.contains("root /s/root;"), "{conf}");
        assert!(conf.contains("max_ranges 64;"), "{conf}");
        assert!(conf.contains("pid /s/nginx.pid;"), "{conf}");
        assert!(!conf.contains("user "), "no user line unless root: {conf}");
        let as_root = nginx_config(Path::new("/s"), Path::new("/s/root"), 4242, true);
        assert!(as_root.starts_with("# Generated"), "{as_root}");
        assert!(as_root.contains("\nuser root root;\n"), "{as_root}");
    }

    #[test]
    fn ceph_config_keeps_everything_on_loopback() {
        let conf = ceph_config(Path::new("/s"), "f-s-i-d", 3300);
        assert!(conf.contains("mon_host = [v2:127.0.0.1:3300]\n"), "{conf}");
        assert!(conf.contains("public_addr = 127.0.0.1\n"), "{conf}");
        assert!(conf.contains("osd_objectstore = memstore\n"), "{conf}");
        assert!(conf.contains("log_file = /s/$name.log\n"), "{conf}");
        assert_eq!(conf.matches("_mode = crc").count(), 6, "{conf}");
        assert_eq!(
            ceph_env(8000),
            [
                ("GUIDELOOM_RGW_ENDPOINT", "http://127.0.0.1:8000".to_owned()),
                ("GUIDELOOM_RGW_BUCKET", BUCKET.to_owned()),
            ]
        );
    }

    #[test]
    fn ceph_is_on_by_default_only_in_ci_and_both_switches_work() {
        let ceph = |kinds: Vec<Kind>| kinds.contains(&Kind::Ceph);
        assert!(ceph(kinds_with_ceph(None, true)));
        assert!(!ceph(kinds_with_ceph(Some("0"), true)));
        assert!(ceph(kinds_with_ceph(Some(""), true)));
        assert!(!ceph(kinds_with_ceph(None, false)));
        assert!(ceph(kinds_with_ceph(Some("1"), false)));
        assert!(!ceph(kinds_with_ceph(Some("yes"), false)));
        assert_eq!(kinds_with_ceph(Some("0"), true), [Kind::Nginx, Kind::Moto]);
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

    #[test]
    fn server_env_is_the_test_contract() {
        let nginx = nginx_env(8080, Path::new("/srv/root"));
        assert_eq!(
            nginx,
            [
                ("GUIDELOOM_NGINX_URL", "http://127.0.0.1:8080/".to_owned()),
                ("GUIDELOOM_NGINX_ROOT", "/srv/root".to_owned()),
            ]
        );
        let moto: std::collections::HashMap<_, _> = moto_env(9000).into_iter().collect();
        assert_eq!(moto["GUIDELOOM_S3_ENDPOINT"], "http://127.0.0.1:9000");
        assert_eq!(moto["GUIDELOOM_S3_BUCKET"], BUCKET);
        assert_eq!(moto["AWS_ACCESS_KEY_ID"], "test");
        assert_eq!(moto["AWS_SECRET_ACCESS_KEY"], "test");
        assert_eq!(moto["AWS_REGION"], "us-east-1");
    }

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
