//! The project venv `.xtask/venv` (the one moto lives in) and commands run in it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::servers;
use crate::util;

/// `venv`'s `program`, with the venv's `bin` first on the inherited `PATH`.
pub(crate) fn venv_command(venv: &Path, program: &str) -> Command {
    let bin = venv.join("bin");
    let mut cmd = Command::new(bin.join(program));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.clone()];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap_or(path));
    cmd.env("VIRTUAL_ENV", venv);
    cmd.env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    cmd
}

/// The project venv `.xtask/venv`, created when missing.
pub(crate) fn ensure_venv(root: &Path) -> Result<PathBuf> {
    let venv = servers::venv_dir(root);
    if !venv.join("bin").join("python").is_file() {
        let python = util::which("python3").ok_or_else(|| Error::Check {
            check: "python".into(),
            problems: vec!["python3 (3.11 or newer) is not on PATH".into()],
        })?;
        util::run(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
    }
    Ok(venv)
}
