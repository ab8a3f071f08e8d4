//! `cargo xtask wheel`: the Python package as one abi3 wheel (CPython >= 3.11) for manylinux
//! x86_64, the file a machine without a Rust toolchain installs with `pip install`.
//!
//! 1. maturin, ziglang and auditwheel ([`TOOLS`], ziglang pinned) are installed into the project
//!    venv `.xtask/venv` (a no-op once there).
//! 2. `maturin build --release --strip --zig --compatibility manylinux2014` builds the extension
//!    module for the host (x86_64 on this project's machines) and the wheel into
//!    `<target dir>/wheels/` (older `guideloom-*.whl` files there are removed first, so exactly
//!    one is left). `--strip` drops the symbols and line tables the release profile keeps: the
//!    module shrinks from 118 MB to 45 MB and the wheel from 31 MB to about 16 MB, and a Rust
//!    backtrace from the wheel names no functions (`maturin develop` builds keep them). Zig
//!    links against glibc 2.17's symbol versions whatever the build host has, so the wheel is
//!    `manylinux_2_17_x86_64` (manylinux2014) where a native build on Debian 12 is
//!    `manylinux_2_34` (its `.so` needs glibc 2.34 symbols): pip installs it on any x86_64
//!    Linux with glibc 2.17 or newer.
//! 3. The wheel's file name must carry [`ABI_TAG`] and [`PLATFORM_TAG`], and `auditwheel show`
//!    must agree: the platform it reports the wheel consistent with may be that one or an older
//!    one, never a newer one (a newer one would mean the `.so` needs symbols the tag promises
//!    are not needed, or links a library outside the manylinux set).
//!
//! aarch64 is not built: it needs the Rust target `aarch64-unknown-linux-gnu`, which only a
//! download installs (`rustup target add`), and no toolchain can be downloaded on this
//! project's machines.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;
use crate::venv::{ensure_venv, venv_command};

/// zig, pinned: maturin links through `python -m ziglang`, and a zig release changes the
/// linker under the wheel (this version built and passed the tests).
pub(crate) const ZIGLANG: &str = "ziglang==0.17.1";

/// What the project venv needs to build and check the wheel.
pub(crate) const TOOLS: &[&str] = &["maturin", ZIGLANG, "auditwheel"];

/// maturin's `--compatibility`: the manylinux policy the wheel is linked and tagged for.
const COMPATIBILITY: &str = "manylinux2014";

/// The platform tag of the wheel built with [`COMPATIBILITY`].
pub(crate) const PLATFORM_TAG: &str = "manylinux_2_17_x86_64";

/// The Python and ABI tags of an abi3 wheel for CPython >= 3.11.
pub(crate) const ABI_TAG: &str = "cp311-abi3";

/// A wheel just built.
#[derive(Debug)]
pub(crate) struct Wheel {
    pub(crate) path: PathBuf,
    pub(crate) bytes: u64,
    pub(crate) build_secs: f64,
}

/// `cargo xtask wheel`: builds and checks the wheel, printing where it is.
pub(crate) fn run(root: &Path) -> Result<()> {
    let venv = ensure_venv(root)?;
    install_tools(&venv, "wheel")?;
    let wheel = build(root, &venv, "wheel")?;
    println!(
        "[wheel] {} ({} bytes, built in {:.1}s)",
        wheel.path.display(),
        wheel.bytes,
        wheel.build_secs
    );
    println!(
        "[wheel] install it with: pip install {} (no Rust toolchain needed)",
        wheel.path.display()
    );
    Ok(())
}

/// `pip install` [`TOOLS`] into `venv`, timed.
pub(crate) fn install_tools(venv: &Path, tag: &str) -> Result<()> {
    let started = Instant::now();
    let mut pip = venv_command(venv, "pip");
    pip.args(["install", "--quiet", "--no-cache-dir"])
        .args(TOOLS);
    println!("[{tag}] $ {}", util::display(&pip));
    util::run(&mut pip)?;
    println!(
        "[{tag}] pip install {} in {:.1}s",
        TOOLS.join(" "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds the wheel with the tools of `venv` into `<target dir>/wheels/` and checks its tags
/// (module documentation, steps 2 and 3); prints `[tag] ...` lines with its size and times.
pub(crate) fn build(root: &Path, venv: &Path, tag: &str) -> Result<Wheel> {
    let out = util::target_dir(root)?.join("wheels");
    util::mkdir(&out)?;
    for old in guideloom_wheels(&out)? {
        std::fs::remove_file(&old).map_err(|e| Error::io("cannot remove", &old, e))?;
    }
    let started = Instant::now();
    let mut maturin = venv_command(venv, "maturin");
    maturin
        .current_dir(root)
        .args(["build", "--release", "--strip", "--zig"])
        .args(["--compatibility", COMPATIBILITY, "--out"])
        .arg(&out);
    util::lean_build(&mut maturin);
    println!("[{tag}] $ {}", util::display(&maturin));
    util::run(&mut maturin)?;
    let build_secs = started.elapsed().as_secs_f64();
    let wheel = match guideloom_wheels(&out)?.as_slice() {
        [one] => one.clone(),
        other => {
            return Err(check(format!(
                "expected one guideloom wheel in {} after maturin, found {other:?}",
                out.display()
            )));
        }
    };
    let bytes = std::fs::metadata(&wheel)
        .map_err(|e| Error::io("cannot stat", &wheel, e))?
        .len();
    println!("[{tag}] wheel built in {build_secs:.1}s");
    println!(
        "[{tag}] wheel {} is {bytes} bytes ({:.1} MB)",
        file_name(&wheel),
        bytes as f64 / 1e6
    );
    check_tags(&file_name(&wheel))?;
    let started = Instant::now();
    let mut show = venv_command(venv, "auditwheel");
    show.arg("show").arg(&wheel);
    let report = util::capture(&mut show)?;
    let consistent = auditwheel_platform(&report).ok_or_else(|| {
        check(format!(
            "`auditwheel show` named no platform tag:\n{}",
            report.trim_end()
        ))
    })?;
    if !fits(&consistent, PLATFORM_TAG) {
        return Err(check(format!(
            "the wheel is tagged {PLATFORM_TAG} but auditwheel finds it consistent only with \
             {consistent}:\n{}",
            report.trim_end()
        )));
    }
    println!(
        "[{tag}] auditwheel show: consistent with {consistent} (tagged {PLATFORM_TAG}) in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(Wheel {
        path: wheel,
        bytes,
        build_secs,
    })
}

fn check(problem: String) -> Error {
    Error::Check {
        check: "wheel".into(),
        problems: vec![problem],
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `guideloom-*.whl` files in `dir`, sorted.
fn guideloom_wheels(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("cannot list", dir, e))?;
    let mut wheels: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let name = file_name(path);
            name.starts_with("guideloom-") && name.ends_with(".whl")
        })
        .collect();
    wheels.sort();
    Ok(wheels)
}

/// The wheel's file name `guideloom-VERSION-cp311-abi3-PLATFORMS.whl` must carry
/// [`ABI_TAG`] and, among its (dot-separated) platforms, [`PLATFORM_TAG`].
fn check_tags(name: &str) -> Result<()> {
    let stem = name.strip_suffix(".whl").unwrap_or(name);
    let parts: Vec<&str> = stem.split('-').collect();
    let [_, _, python, abi, platforms] = parts.as_slice() else {
        return Err(check(format!(
            "`{name}` is not NAME-VERSION-PYTHON-ABI-PLATFORM.whl"
        )));
    };
    if format!("{python}-{abi}") != ABI_TAG {
        return Err(check(format!("`{name}` is not an {ABI_TAG} wheel")));
    }
    if !platforms.split('.').any(|p| p == PLATFORM_TAG) {
        return Err(check(format!("`{name}` is not tagged {PLATFORM_TAG}")));
    }
    Ok(())
}

/// The tag in auditwheel's `... is consistent with the following platform tag:
/// "manylinux_2_17_x86_64".` (the line wraps at a terminal's width, so the report is read
/// as one string).
fn auditwheel_platform(report: &str) -> Option<String> {
    let joined = report.split_whitespace().collect::<Vec<_>>().join(" ");
    let rest = joined
        .split("consistent with the following platform tag:")
        .nth(1)?;
    let tag = rest.trim_start().strip_prefix('"')?;
    let end = tag.find('"')?;
    Some(tag[..end].to_owned())
}

/// glibc `(major, minor)` and architecture of a `manylinux_X_Y_ARCH` tag, the legacy
/// aliases (`manylinux2014_x86_64`, ...) included.
fn manylinux_glibc(tag: &str) -> Option<((u32, u32), &str)> {
    let rest = tag.strip_prefix("manylinux")?;
    for (alias, glibc) in [("1_", (2, 5)), ("2010_", (2, 12)), ("2014_", (2, 17))] {
        if let Some(arch) = rest.strip_prefix(alias) {
            return Some((glibc, arch));
        }
    }
    let mut parts = rest.strip_prefix('_')?.splitn(3, '_');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(((major, minor), parts.next()?))
}

/// Whether a wheel auditwheel finds consistent with `consistent` may carry `tagged`: the same
/// architecture and a glibc no older than the one auditwheel requires.
fn fits(consistent: &str, tagged: &str) -> bool {
    match (manylinux_glibc(consistent), manylinux_glibc(tagged)) {
        (Some((needs, arch)), Some((promised, tagged_arch))) => {
            arch == tagged_arch && needs <= promised
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_name_must_carry_the_abi_and_platform_tags() {
        check_tags("guideloom-0.1.0-cp311-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
            .unwrap();
        check_tags("guideloom-0.1.0-cp311-abi3-manylinux_2_17_x86_64.whl").unwrap();
        for bad in [
            "guideloom-0.1.0-cp311-abi3-manylinux_2_34_x86_64.whl",
            "guideloom-0.1.0-cp311-cp311-manylinux_2_17_x86_64.whl",
            "guideloom-0.1.0-cp312-abi3-manylinux_2_17_x86_64.whl",
            "guideloom-0.1.0-cp311-abi3-linux_x86_64.whl",
            "guideloom-0.1.0.tar.gz",
        ] {
            assert!(check_tags(bad).is_err(), "{bad} passed");
        }
    }

    #[test]
    fn auditwheel_report_is_read_across_line_breaks() {
        let report = "\nguideloom-0.1.0-cp311-abi3-manylinux_2_17_x86_64.whl is consistent\n\
                      with the following platform tag: \"manylinux_2_17_x86_64\".\n\n\
                      The wheel references external versioned symbols in these\n";
        assert_eq!(
            auditwheel_platform(report).as_deref(),
            Some("manylinux_2_17_x86_64")
        );
        assert_eq!(auditwheel_platform("nothing here"), None);
    }

    #[test]
    fn a_tag_fits_when_auditwheel_needs_no_newer_glibc() {
        assert!(fits("manylinux_2_17_x86_64", "manylinux_2_17_x86_64"));
        assert!(fits("manylinux_2_5_x86_64", "manylinux_2_17_x86_64"));
        assert!(fits("manylinux2014_x86_64", "manylinux_2_17_x86_64"));
        assert!(!fits("manylinux_2_34_x86_64", "manylinux_2_17_x86_64"));
        assert!(!fits("manylinux_2_17_aarch64", "manylinux_2_17_x86_64"));
        assert!(!fits("linux_x86_64", "manylinux_2_17_x86_64"));
        assert_eq!(
            manylinux_glibc("manylinux_2_28_x86_64"),
            Some(((2, 28), "x86_64"))
        );
        assert_eq!(manylinux_glibc("manylinux1_i686"), Some(((2, 5), "i686")));
    }
}
