//! Real servers on loopback for the server-backed tests: nginx (HTTP range origin), moto (S3),
//! fake-gcs-server (GCS, behind an XML-API front), Azurite (Azure Blob Storage), Ceph RGW
//! (S3, atomic) and an rclone FUSE mount of an S3 bucket (a real mounted bucket).
//!
//! Everything lives under `.xtask/servers/<name>/` (gitignored): generated config, logs, the PID
//! of the process we started, and for nginx the directory it serves. `ci` and `bench` start the
//! servers in their own process group so a Ctrl-C reaches them too, and stop them through
//! [`Servers`]' `Drop` whatever happens; `servers up` starts them detached for a human, and
//! `servers down` stops them by the recorded PID.
//!
//! The contract with the tests is the environment in [`Servers::env`] (see the README).
//!
//! Layout: this file holds the server kinds, [`Servers`] and the `servers` command; `session`
//! the on-disk state (session directories, PID/port files, `env.sh`); `process` spawning,
//! readiness polling and signal escalation; `nginx`, `moto`, `gcs`, `azurite`, `ceph` and
//! `rclone` one server kind each. The servers record themselves in the session; what differs by kind (the test
//! environment, the mount) the session asks of [`Kind`] here, so the session module knows no
//! server module and the two never import each other.

mod azurite;
mod ceph;
mod gcs;
mod moto;
mod nginx;
mod process;
mod rclone;
mod session;

pub(crate) use moto::venv_dir;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

use azurite::start_azurite;
use ceph::start_ceph;
use gcs::start_gcs;
use moto::start_moto;
use nginx::start_nginx;
use process::Proc;
use rclone::start_rclone;
use session::{
    clean_stale_sessions, env_script, pid_file, servers_dir, session_dir, session_env,
    session_owner, status_line, stop_recorded, write_env_file, xtask_alive,
};

/// The bucket created on moto (and the GCS bucket and Azure container) for the tests.
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
    /// fake-gcs-server behind its XML-API front (`gcs.rs`).
    Gcs,
    /// Azurite's blob service (`azurite.rs`).
    Azure,
    /// A one-node Ceph RADOS Gateway (mon + memstore OSD + radosgw). Started by `ci` unless
    /// `GUIDELOOM_XTASK_CEPH=0`; opt-in elsewhere: `servers up ceph`, or
    /// `GUIDELOOM_XTASK_CEPH=1` for `bench` and a bare `servers up`.
    Ceph,
    /// An `rclone mount` (FUSE, `--vfs-cache-mode off`) of the Ceph RGW bucket, or of moto's
    /// when Ceph does not run: a real mounted bucket. Started by `ci` unless
    /// `GUIDELOOM_XTASK_MOUNT=0`; elsewhere `servers up rclone` or `GUIDELOOM_XTASK_MOUNT=1`.
    Rclone,
}

impl Kind {
    /// Every server, in start order.
    /// The mount comes after the S3 servers it mounts, and is stopped before them.
    pub(crate) const ALL: [Kind; 6] = [
        Kind::Nginx,
        Kind::Moto,
        Kind::Gcs,
        Kind::Azure,
        Kind::Ceph,
        Kind::Rclone,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Nginx => "nginx",
            Kind::Moto => "moto",
            Kind::Gcs => "gcs",
            Kind::Azure => "azure",
            Kind::Ceph => "ceph",
            Kind::Rclone => "rclone",
        }
    }

    pub(crate) fn parse(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == word)
    }

    fn state_dir(self, session: &Path) -> PathBuf {
        session.join(self.name())
    }

    /// The test environment of this kind's server answering on `port` in `session`; `None`
    /// for a mount that is gone (nothing to test against).
    fn env(self, session: &Path, port: u16) -> Option<Vec<(&'static str, String)>> {
        Some(match self {
            Kind::Nginx => nginx::nginx_env(port, &self.state_dir(session).join("root")),
            Kind::Moto => moto::moto_env(port),
            Kind::Gcs => gcs::gcs_env(port),
            Kind::Azure => azurite::azure_env(port),
            Kind::Ceph => ceph::ceph_env(port),
            // The recorded port is the mounted S3 server's.
            Kind::Rclone => {
                let mount = rclone::mount_dir(session);
                if !rclone::is_mounted(&mount) {
                    return None;
                }
                rclone::rclone_env(port, &mount)
            }
        })
    }

    /// What a status line says of this kind beyond its processes: the mount's state for
    /// rclone, nothing for the servers (their status is whether their port answers).
    fn mount_status(self, session: &Path) -> Option<String> {
        match self {
            Kind::Rclone => Some(rclone::mount_status(session)),
            _ => None,
        }
    }

    /// A mount of this kind left in `session` (by a killed rclone, when no process runs).
    fn mounted_dir(self, session: &Path) -> Option<PathBuf> {
        match self {
            Kind::Rclone => Some(rclone::mount_dir(session)).filter(|d| rclone::is_mounted(d)),
            _ => None,
        }
    }

    /// What must happen before this kind's processes are signalled: the mount is unmounted
    /// (the FUSE server must not die under a mounted file system).
    fn before_stop(self, session: &Path) -> Result<()> {
        match self {
            Kind::Rclone => rclone::unmount(&rclone::mount_dir(session)),
            _ => Ok(()),
        }
    }
}

/// Whether `session` may be removed: no mount point lies under it (removing the files of a
/// live mount would delete objects from its bucket).
fn removable(session: &Path) -> bool {
    if rclone::has_mount_under(session) {
        eprintln!(
            "[servers] {} still has a mount under it: not removing it",
            session.display()
        );
        false
    } else {
        true
    }
}

/// The servers `bench` and a bare `servers up` start: nginx, moto, fake-gcs-server and
/// Azurite, plus Ceph RGW when
/// `GUIDELOOM_XTASK_CEPH=1` and the rclone mount when `GUIDELOOM_XTASK_MOUNT=1`.
pub(crate) fn default_kinds() -> Vec<Kind> {
    let (ceph, mount) = (
        setting("GUIDELOOM_XTASK_CEPH"),
        setting("GUIDELOOM_XTASK_MOUNT"),
    );
    kinds_with(ceph.as_deref(), mount.as_deref(), false)
}

/// The servers `ci` starts: nginx, moto, fake-gcs-server, Azurite and Ceph RGW, unless `GUIDELOOM_XTASK_CEPH=0`, and
/// the rclone mount, unless `GUIDELOOM_XTASK_MOUNT=0`.
/// (Measured here: about 18 s from start to a ready RGW user, about 140 MB resident; the
/// first run also installs 123 Debian packages, 54 s. See the testing section of the README.)
pub(crate) fn ci_kinds() -> Vec<Kind> {
    let (ceph, mount) = (
        setting("GUIDELOOM_XTASK_CEPH"),
        setting("GUIDELOOM_XTASK_MOUNT"),
    );
    kinds_with(ceph.as_deref(), mount.as_deref(), true)
}

fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// nginx, moto and the GCS and Azure emulators, plus Ceph (`ceph`) and the mount (`mount`)
/// each when its setting is `1`, or when it is not `0` and `by_default`.
fn kinds_with(ceph: Option<&str>, mount: Option<&str>, by_default: bool) -> Vec<Kind> {
    let on = |setting: Option<&str>| match setting {
        Some("1") => true,
        Some("0") => false,
        _ => by_default,
    };
    let mut kinds = vec![Kind::Nginx, Kind::Moto, Kind::Gcs, Kind::Azure];
    if on(ceph) {
        kinds.push(Kind::Ceph);
    }
    if on(mount) {
        kinds.push(Kind::Rclone);
    }
    kinds
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
                Kind::Gcs => start_gcs(root, &session, detach)?,
                Kind::Azure => start_azurite(root, &session, detach)?,
                Kind::Ceph => start_ceph(root, &session, detach)?,
                Kind::Rclone => {
                    start_rclone(&session, detach, &session_env(&session, &servers.running))?
                }
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
            if let Err(err) = kind.before_stop(&self.session) {
                problems.push(err.to_string());
            }
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
            if session_owner(&self.session).is_some() && removable(&self.session) {
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
            // Last started first: the mount goes before the servers it mounts.
            for kind in chosen(Kind::ALL.to_vec()).into_iter().rev() {
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

#[cfg(test)]
mod tests {
    use super::moto::moto_env;
    use super::nginx::nginx_env;
    use super::*;

    #[test]
    fn ceph_is_on_by_default_only_in_ci_and_both_switches_work() {
        let ceph = |kinds: Vec<Kind>| kinds.contains(&Kind::Ceph);
        assert!(ceph(kinds_with(None, None, true)));
        assert!(!ceph(kinds_with(Some("0"), None, true)));
        assert!(ceph(kinds_with(Some(""), None, true)));
        assert!(!ceph(kinds_with(None, None, false)));
        assert!(ceph(kinds_with(Some("1"), None, false)));
        assert!(!ceph(kinds_with(Some("yes"), None, false)));
        assert_eq!(
            kinds_with(Some("0"), Some("0"), true),
            [Kind::Nginx, Kind::Moto, Kind::Gcs, Kind::Azure]
        );
    }

    #[test]
    fn the_mount_is_on_by_default_only_in_ci_and_comes_last() {
        let mount = |kinds: Vec<Kind>| kinds.contains(&Kind::Rclone);
        assert!(mount(kinds_with(None, None, true)));
        assert!(!mount(kinds_with(None, Some("0"), true)));
        assert!(!mount(kinds_with(None, None, false)));
        assert!(mount(kinds_with(None, Some("1"), false)));
        // Without Ceph the mount still starts (it falls back to moto's bucket).
        assert_eq!(
            kinds_with(Some("0"), None, true),
            [
                Kind::Nginx,
                Kind::Moto,
                Kind::Gcs,
                Kind::Azure,
                Kind::Rclone
            ]
        );
        assert_eq!(
            kinds_with(None, None, true),
            [
                Kind::Nginx,
                Kind::Moto,
                Kind::Gcs,
                Kind::Azure,
                Kind::Ceph,
                Kind::Rclone
            ]
        );
        assert_eq!(Kind::ALL.last(), Some(&Kind::Rclone));
        assert_eq!(Kind::parse("rclone"), Some(Kind::Rclone));
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
        let gcs: std::collections::HashMap<_, _> = gcs::gcs_env(4443).into_iter().collect();
        assert_eq!(gcs["GUIDELOOM_GCS_ENDPOINT"], "http://127.0.0.1:4443");
        assert_eq!(gcs["GUIDELOOM_GCS_BUCKET"], BUCKET);
        let az: std::collections::HashMap<_, _> = azurite::azure_env(10000).into_iter().collect();
        assert_eq!(az["GUIDELOOM_AZURE_ENDPOINT"], "http://127.0.0.1:10000");
        assert_eq!(az["GUIDELOOM_AZURE_CONTAINER"], BUCKET);
    }
}
