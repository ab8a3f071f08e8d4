//! `cargo xtask browser` and CI's `browser` step: `guideloom serve` in a real headless browser.
//!
//! 1. Chromium: the system's `/usr/bin/chromium` (Debian's package). Missing, it is installed
//!    with `apt-get install -y --no-install-recommends chromium` when running as root (CI
//!    does); otherwise the step says how and, under `GUIDELOOM_CI=1`, fails — never a skip.
//! 2. Node.js and npm (Debian's `nodejs npm` when missing, as root), then [`PLAYWRIGHT`]
//!    (`playwright-core`, pinned) into `.xtask/browser/node_modules` with `npm install
//!    --prefix`. playwright-core downloads no browser of its own; the test launches the
//!    system Chromium by `executablePath`.
//! 3. The `guideloom` binary, built with the test step's features (`cargo build --workspace
//!    --all-features --bin guideloom`: nothing rebuilds after `test`).
//! 4. `node xtask/browser/viewer.cjs`: builds a root through the CLI — PNG records, four
//!    snapshots, annotation sets, a dataset card, a tag, and one snapshot expired by
//!    `guideloom gc --grace 0s --keep-last 1` — starts `guideloom serve --port 0` and checks
//!    the views (docs/viewer.md, "The browser test"); screenshots go to `<target>/browser/`.
//!
//! Each phase is timed; the step prints its total.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;

/// The Playwright driver, pinned (its API is what `viewer.cjs` uses).
pub(crate) const PLAYWRIGHT: &str = "playwright-core@1.65.2";

/// Where Debian's package puts the browser.
const CHROMIUM: &str = "/usr/bin/chromium";

fn in_ci() -> bool {
    std::env::var("GUIDELOOM_CI").is_ok_and(|v| v.trim() == "1")
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Check {
        check: "browser".into(),
        problems: vec![msg.into()],
    }
}

/// The browser, installed if missing and possible. `Ok(None)`: missing outside CI (skip).
fn ensure_chromium() -> Result<Option<PathBuf>> {
    let path = PathBuf::from(CHROMIUM);
    if path.is_file() {
        return Ok(Some(path));
    }
    if !is_root() {
        let msg = "chromium is not installed, and installing it needs root: \
                   `sudo apt-get install -y --no-install-recommends chromium`";
        if in_ci() {
            return Err(fail(msg));
        }
        println!("[browser] skipped: {msg}");
        return Ok(None);
    }
    util::apt_install("browser", &["chromium"])?;
    if path.is_file() {
        Ok(Some(path))
    } else {
        Err(fail(format!(
            "apt-get installed chromium but {CHROMIUM} is missing"
        )))
    }
}

/// `node` and `npm`, installed from Debian when missing (as root).
fn ensure_node() -> Result<Option<(PathBuf, PathBuf)>> {
    if let (Some(node), Some(npm)) = (util::which("node"), util::which("npm")) {
        return Ok(Some((node, npm)));
    }
    if !is_root() {
        let msg = "node and npm are needed: `sudo apt-get install -y nodejs npm`";
        if in_ci() {
            return Err(fail(msg));
        }
        println!("[browser] skipped: {msg}");
        return Ok(None);
    }
    util::apt_install("browser", &["nodejs", "npm"])?;
    match (util::which("node"), util::which("npm")) {
        (Some(node), Some(npm)) => Ok(Some((node, npm))),
        _ => Err(fail(
            "apt-get installed nodejs and npm but they are not on PATH",
        )),
    }
}

/// The installed playwright-core's version, if any.
fn installed_playwright(prefix: &Path) -> Option<String> {
    let manifest = prefix.join("node_modules/playwright-core/package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")?.as_str().map(str::to_owned)
}

/// Runs the browser test (`cargo xtask browser`, CI's `browser` step); `env` adds the CI
/// environment to the test process.
pub(crate) fn run(root: &Path, env: impl Fn(&mut Command)) -> Result<()> {
    let started = Instant::now();
    let Some(chromium) = ensure_chromium()? else {
        return Ok(());
    };
    let Some((node, npm)) = ensure_node()? else {
        return Ok(());
    };
    let prefix = root.join(".xtask").join("browser");
    let pinned = PLAYWRIGHT.rsplit_once('@').map(|(_, v)| v);
    if installed_playwright(&prefix).as_deref() != pinned {
        std::fs::create_dir_all(&prefix).map_err(|e| Error::io("create", &prefix, e))?;
        let t = Instant::now();
        let mut cmd = Command::new(npm);
        cmd.args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(PLAYWRIGHT)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1");
        println!("[browser] $ {}", util::display(&cmd));
        util::run(&mut cmd)?;
        println!(
            "[browser] {PLAYWRIGHT} installed in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    let mut build = util::cargo(root);
    build.args([
        "build",
        "--workspace",
        "--all-features",
        "--bin",
        "guideloom",
    ]);
    println!("[browser] $ {}", util::display(&build));
    util::run(&mut build)?;
    println!(
        "[browser] guideloom built in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let target = util::target_dir(root)?;
    let out = target.join("browser");
    let mut cmd = Command::new(node);
    cmd.arg(root.join("xtask").join("browser").join("viewer.cjs"))
        .current_dir(root)
        .env("NODE_PATH", prefix.join("node_modules"))
        .env("GUIDELOOM_BIN", target.join("debug").join("guideloom"))
        .env("GUIDELOOM_CHROMIUM", &chromium)
        .env("GUIDELOOM_BROWSER_OUT", &out);
    env(&mut cmd);
    let t = Instant::now();
    println!("[browser] $ {}", util::display(&cmd));
    util::run(&mut cmd)?;
    println!(
        "[browser] views checked in {:.1}s (screenshots in {}); step total {:.1}s",
        t.elapsed().as_secs_f64(),
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
