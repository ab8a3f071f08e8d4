//! Azurite (Azure Blob Storage), from npm, run by the machine's Node.js.
//!
//! Installed with `npm install --prefix .xtask/azurite` ([`AZURITE`], pinned), started as
//! `azurite-blob` with in-memory persistence on a free port of 127.0.0.1, and given the
//! container [`BUCKET`] by `xtask/servers/azurite_container.py` (a Shared Key request signed
//! with Azurite's published development key).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::moto::ensure_moto;
use super::process::{Proc, failed_start, logs_mention_port_in_use, spawn_logged, wait_ready};
use super::session::record;
use super::{BUCKET, Kind, PORT_ATTEMPTS, Running};
use crate::error::{Error, Result};
use crate::http;
use crate::util;

/// The emulator, pinned.
const AZURITE: &str = "azurite@3.35.0";

fn installed_version(prefix: &Path) -> Option<String> {
    let manifest = prefix.join("node_modules/azurite/package.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).ok()?).ok()?;
    json.get("version")?.as_str().map(str::to_owned)
}

/// `node` and the installed `azurite-blob` entry point, installing what is missing.
fn ensure_azurite(root: &Path) -> Result<(PathBuf, PathBuf)> {
    let (node, npm) = match (util::which("node"), util::which("npm")) {
        (Some(node), Some(npm)) => (node, npm),
        _ if super::process::is_root() => {
            util::apt_install("servers", &["nodejs", "npm"])?;
            match (util::which("node"), util::which("npm")) {
                (Some(node), Some(npm)) => (node, npm),
                _ => return Err(Error::server("azure", "apt-get installed no node/npm")),
            }
        }
        _ => {
            return Err(Error::server(
                "azure",
                "Azurite needs Node.js: `sudo apt-get install -y nodejs npm`",
            ));
        }
    };
    let prefix = root.join(".xtask").join("azurite");
    let pinned = AZURITE.rsplit_once('@').map(|(_, v)| v);
    if installed_version(&prefix).as_deref() != pinned {
        util::mkdir(&prefix)?;
        let started = Instant::now();
        let mut cmd = Command::new(npm);
        cmd.args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(AZURITE);
        println!("[servers] $ {}", util::display(&cmd));
        util::run(&mut cmd)?;
        println!(
            "[servers] {AZURITE} installed in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    let main = prefix.join("node_modules/azurite/dist/src/blob/main.js");
    if !main.is_file() {
        return Err(Error::server(
            "azure",
            format!("npm installed {AZURITE} but {} is missing", main.display()),
        ));
    }
    Ok((node, main))
}

pub(super) fn start_azurite(root: &Path, session: &Path, detach: bool) -> Result<Running> {
    let (node, main) = ensure_azurite(root)?;
    let python = ensure_moto(root)?.with_file_name("python3");
    let create = root
        .join("xtask")
        .join("servers")
        .join("azurite_container.py");
    let state = Kind::Azure.state_dir(session);
    util::mkdir(&state)?;
    let log = state.join("azurite.log");
    let logs = [log.clone()];
    for attempt in 1..=PORT_ATTEMPTS {
        let port = http::free_port().map_err(|e| Error::io("cannot pick a port", &state, e))?;
        let mut cmd = Command::new(&node);
        cmd.arg(&main)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .args(["--inMemoryPersistence", "--skipApiVersionCheck"])
            // Its debug log and config files go to the working directory.
            .current_dir(&state);
        let mut child = spawn_logged("azurite", &mut cmd, &log, detach)?;
        let ready = wait_ready("azure", &mut child, || {
            // Any HTTP answer (400 for a bare GET /) means it listens.
            Ok(http::request(port, "GET", "/", &[], Duration::from_secs(2)).is_ok())
        })
        .and_then(|()| {
            util::run(
                Command::new(&python)
                    .arg(&create)
                    .args([&port.to_string(), BUCKET]),
            )
        });
        match ready {
            Ok(()) => {
                let procs = vec![Proc::new("azurite", child)];
                return record(session, Kind::Azure, procs, port, azure_env(port));
            }
            Err(err) => {
                let taken =
                    logs_mention_port_in_use(&logs) || util::tail(&log, 50).contains("EADDRINUSE");
                let err = failed_start("azurite", child, err, &logs);
                if !(taken && attempt < PORT_ATTEMPTS) {
                    return Err(err);
                }
                eprintln!("[servers] azure: port {port} was taken; trying another");
            }
        }
    }
    Err(Error::server("azure", "could not find a free port"))
}

pub(super) fn azure_env(port: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "GUIDELOOM_AZURE_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        ),
        ("GUIDELOOM_AZURE_CONTAINER", BUCKET.to_owned()),
    ]
}
