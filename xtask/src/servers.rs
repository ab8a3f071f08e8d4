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
}

impl Kind {
    /// Every server, in start order.
    pub(crate) const ALL: [Kind; 2] = [Kind::Nginx, Kind::Moto];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Nginx => "nginx",
            Kind::Moto => "moto",
        }
    }

    fn state_dir(self, root: &Path) -> PathBuf {
        servers_dir(root).join(self.name())
    }

    /// A word found in `/proc/PID/cmdline` of our process, guarding against reused PIDs.
    fn cmdline_marker(self) -> &'static str {
        match self {
            Kind::Nginx => "nginx",
            Kind::Moto => "moto_server",
        }
    }

    /// Signals sent in turn to stop the process, each followed by a wait for it to exit.
    fn stop_schedule(self) -> &'static [(Signal, Duration)] {
        // QUIT is nginx's graceful stop (~1.2 s here), TERM its fast one.
        const NGINX: &[(Signal, Duration)] = &[
            (Signal::SIGQUIT, Duration::from_secs(5)),
            (Signal::SIGTERM, Duration::from_secs(3)),
            (Signal::SIGKILL, Duration::from_secs(2)),
        ];
        const MOTO: &[(Signal, Duration)] = &[
            (Signal::SIGTERM, Duration::from_secs(5)),
            (Signal::SIGKILL, Duration::from_secs(2)),
        ];
        match self {
            Kind::Nginx => NGINX,
            Kind::Moto => MOTO,
        }
    }
}

fn servers_dir(root: &Path) -> PathBuf {
    root.join(".xtask").join("servers")
}

fn venv_dir(root: &Path) -> PathBuf {
    root.join(".xtask").join("venv")
}

/// One server process that we started.
#[derive(Debug)]
struct Running {
    kind: Kind,
    pid: u32,
    /// Present when this process started it: lets us reap it.
    child: Option<Child>,
    env: Vec<(&'static str, String)>,
}

/// Servers started by this process. Dropping it stops them (unless [`Servers::detach`]ed).
#[derive(Debug)]
pub(crate) struct Servers {
    root: PathBuf,
    running: Vec<Running>,
}

impl Servers {
    /// Starts every server, first stopping any left over from an earlier run.
    ///
    /// `detach`: start them in a new process group so they outlive this process and a Ctrl-C in
    /// its terminal (`servers up`); otherwise they share our process group and die with us.
    pub(crate) fn start(root: &Path, detach: bool) -> Result<Servers> {
        let mut servers = Servers {
            root: root.to_path_buf(),
            running: Vec::new(),
        };
        for kind in Kind::ALL {
            stop_recorded(root, kind)?;
            let started = Instant::now();
            // On error `servers` is dropped here, stopping those already started.
            let running = match kind {
                Kind::Nginx => start_nginx(root, detach)?,
                Kind::Moto => start_moto(root, detach)?,
            };
            println!(
                "[servers] {} ready (pid {}) in {:.1}s: {}",
                kind.name(),
                running.pid,
                started.elapsed().as_secs_f64(),
                running
                    .env
                    .first()
                    .map(|(k, v)| format!("{k}={v}"))
                    .unwrap_or_default()
            );
            servers.running.push(running);
        }
        util::write(
            &servers_dir(root).join("env.sh"),
            env_script(&servers.env()),
        )?;
        Ok(servers)
    }

    /// The variables the tests read (see the module docs), including dummy AWS credentials.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        self.running.iter().flat_map(|r| r.env.clone()).collect()
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
            match stop_pid(kind, running.pid, running.child.as_mut()) {
                Ok(()) => {
                    let _ = std::fs::remove_file(pid_file(&self.root, kind));
                    println!("[servers] {} stopped (pid {})", kind.name(), running.pid);
                }
                Err(err) => problems.push(err.to_string()),
            }
        }
        let _ = std::fs::remove_file(servers_dir(&self.root).join("env.sh"));
        if problems.is_empty() {
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

/// `cargo xtask servers up|down|status`.
pub(crate) fn cli(root: &Path, action: Action) -> Result<()> {
    match action {
        Action::Up => {
            let servers = Servers::start(root, true)?;
            println!("[servers] environment for the tests (also in .xtask/servers/env.sh):");
            print!("{}", env_script(&servers.env()));
            println!(
                "[servers] `source .xtask/servers/env.sh`, then `cargo test`; stop them with `cargo xtask servers down`"
            );
            servers.detach();
            Ok(())
        }
        Action::Down => {
            for kind in Kind::ALL {
                if !stop_recorded(root, kind)? {
                    println!("[servers] {}: not running", kind.name());
                }
            }
            let _ = std::fs::remove_file(servers_dir(root).join("env.sh"));
            Ok(())
        }
        Action::Status => {
            for kind in Kind::ALL {
                println!("[servers] {}", status_line(root, kind));
            }
            Ok(())
        }
    }
}

fn pid_file(root: &Path, kind: Kind) -> PathBuf {
    kind.state_dir(root).join("pid")
}

fn port_file(root: &Path, kind: Kind) -> PathBuf {
    kind.state_dir(root).join("port")
}

fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The PID recorded for `kind`, if that process is alive and still is our server.
fn recorded_pid(root: &Path, kind: Kind) -> Option<u32> {
    let pid = read_number::<u32>(&pid_file(root, kind))?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline);
    (process_alive(pid) && cmdline.contains(kind.cmdline_marker())).then_some(pid)
}

/// Stops the server recorded in `kind`'s PID file, if it runs. Returns whether it did.
fn stop_recorded(root: &Path, kind: Kind) -> Result<bool> {
    let stopped = match recorded_pid(root, kind) {
        Some(pid) => {
            println!("[servers] stopping {} (pid {pid})", kind.name());
            stop_pid(kind, pid, None)?;
            println!("[servers] {} stopped (pid {pid})", kind.name());
            true
        }
        None => false,
    };
    let _ = std::fs::remove_file(pid_file(root, kind));
    Ok(stopped)
}

fn status_line(root: &Path, kind: Kind) -> String {
    let Some(pid) = recorded_pid(root, kind) else {
        return format!("{}: not running", kind.name());
    };
    let port: Option<u16> = read_number(&port_file(root, kind));
    let answer = port.map_or_else(
        || "no port recorded".to_owned(),
        |port| match http::request(port, "GET", "/", &[], Duration::from_secs(2)) {
            Ok(response) => format!("http://127.0.0.1:{port}/ answers {}", response.status),
            Err(err) => format!("http://127.0.0.1:{port}/ does not answer: {err}"),
        },
    );
    format!("{}: running, pid {pid}, {answer}", kind.name())
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

/// Sends `kind`'s stop signals to `pid` in turn until it exits.
fn stop_pid(kind: Kind, pid: u32, child: Option<&mut Child>) -> Result<()> {
    stop_with(kind.name(), pid, child, kind.stop_schedule())
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
fn failed_start(kind: Kind, mut child: Child, err: Error, logs: &[PathBuf]) -> Error {
    let _ = stop_pid(kind, child.id(), Some(&mut child));
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

fn start_nginx(root: &Path, detach: bool) -> Result<Running> {
    let nginx = ensure_nginx()?;
    let state = Kind::Nginx.state_dir(root);
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
                return record(root, Kind::Nginx, child, port, nginx_env(port, &serve));
            }
            Err(err) => {
                let taken = logs_mention_port_in_use(&logs);
                let err = failed_start(Kind::Nginx, child, err, &logs);
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

fn start_moto(root: &Path, detach: bool) -> Result<Running> {
    let moto_server = ensure_moto(root)?;
    let python = moto_server.with_file_name("python3");
    let state = Kind::Moto.state_dir(root);
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
                return record(root, Kind::Moto, child, port, moto_env(port));
            }
            Err(err) => {
                let taken = logs_mention_port_in_use(&logs);
                let err = failed_start(Kind::Moto, child, err, &logs);
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

/// Writes the PID and port files of a server that answered.
fn record(
    root: &Path,
    kind: Kind,
    child: Child,
    port: u16,
    env: Vec<(&'static str, String)>,
) -> Result<Running> {
    let pid = child.id();
    util::write(&pid_file(root, kind), format!("{pid}\n"))?;
    util::write(&port_file(root, kind), format!("{port}\n"))?;
    Ok(Running {
        kind,
        pid,
        child: Some(child),
        env,
    })
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
