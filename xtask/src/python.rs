//! The `python` step of `cargo xtask ci`: builds the Python package's wheel once and tests
//! that wheel, installed into a fresh venv with no Rust toolchain in reach — what a user gets,
//! not a development build.
//!
//! 1. The wheel: maturin, ziglang and auditwheel into the project venv `.xtask/venv` (the one
//!    moto lives in), then [`crate::wheel::build`], the code of `cargo xtask wheel`: an abi3
//!    `manylinux_2_17_x86_64` wheel in `<target dir>/wheels/`, its tags checked with
//!    `auditwheel show`. Its build time and size are printed.
//! 2. The facade's example `python_interop` (the Rust half of the interop tests) is built,
//!    as the `examples` step builds it: the last use of cargo in the step.
//! 3. A fresh venv `.xtask/wheel-venv`, removed and created again on every run, and a `PATH`
//!    for everything run in it from here on: the venv's `bin`, then the inherited `PATH`
//!    without any directory holding `cargo`, `rustc` or `rustup` (`~/.cargo/bin`); the step
//!    fails if `cargo` or `rustc` can still be found on it. `CARGO*`, `RUSTC*`, `RUSTUP*` and
//!    `PYTHONPATH` are removed from the environment, and `PYTHONSAFEPATH=1` keeps the working
//!    directory off `sys.path`.
//! 4. Into it, each timed: `pip install --only-binary :all: <wheel>` (with its dependencies:
//!    numpy), then the test requirements [`TEST_PACKAGES`] (`pytest mypy numpy aiohttp
//!    dask[distributed]` ..., a pinned ruff), then `pip install torch` (timed on its own:
//!    PyPI's Linux wheel is the CUDA build, about 5 GB installed with its dependencies).
//!    Every install passes `--no-cache-dir`, so the wheels are not also kept in pip's cache.
//!    `GUIDELOOM_XTASK_TORCH=0` leaves torch out locally and is passed on to pytest, whose
//!    torch tests then skip; CI never sets it, so there a missing torch fails them.
//! 5. `import guideloom` in that venv must come from its site-packages (checked here, and
//!    again by `python/tests/conftest.py`, told the venv by `GUIDELOOM_TEST_WHEEL_VENV`): the
//!    source tree's `python/guideloom`, which may hold a stale extension module from a
//!    `maturin develop`, must not be what runs.
//! 6. The examples `python/examples/*.py` run as scripts, then `python -m pytest python/tests`,
//!    both with the servers' environment (`GUIDELOOM_CI=1`, so a missing server fails): exit 5
//!    ("no tests collected") is a failure, not a pass.
//! 7. The static checks of the package, each timed, in the same venv: `ruff check` and `ruff
//!    format --check` over `python/` ([`RUFF`], pinned), `python -m mypy --strict` over the
//!    package itself (`python/guideloom`), the tests and the examples, and `python -m
//!    mypy.stubtest` of the package's stubs against the installed extension (its stubs, one per
//!    concern, must match the runtime; `python/stubtest-allowlist.txt` lists, with reasons,
//!    what a stub declares that the runtime cannot show).
//!
//! `cargo xtask bench` still builds the package with `maturin develop --release` into the
//! project venv ([`bench()`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;
use crate::venv::{ensure_venv, venv_command};
use crate::wheel;

/// The linter and formatter of `python/`, pinned: a new ruff release may add rules or change
/// formatting, which should be a change of this line, not a surprise in CI.
pub(crate) const RUFF: &str = "ruff==0.17.6";

/// What pip installs beside the wheel into the test venv (mypy brings `mypy.stubtest`).
pub(crate) const TEST_PACKAGES: &[&str] = &[
    "pytest",
    "mypy",
    "numpy",
    "aiohttp",
    "dask[distributed]",
    // python/tests/test_packing.py trains a byte-level BPE on the standard library's sources
    // (offline: no vocabulary is downloaded).
    "tokenizers",
    // The typed-data tests (python/tests/realdata.py builds their tables from data shipped
    // inside packages: scikit-learn's digits, scikit-image's sample images, the standard
    // library's sources) and the Arrow interop: pyarrow, Hugging Face datasets, Ray,
    // WebDataset (Lance, a bench peer only, is in BENCH_PACKAGES). `datasets<5`: 5.x needs
    // huggingface-hub >= 1.31, which the bench peers' transformers (< 1.0, through
    // mosaicml-streaming) excludes; unpinned, pip backtracked for 10 min and gave up on the
    // bench install. Measured in a fresh venv (one at a time after the packages above, pip
    // 23.2): pyarrow 6 s +170 MiB, datasets 24 s +102 MiB, scikit-learn 15 s +202 MiB,
    // scikit-image 8 s +77 MiB, ray 18 s +245 MiB (ray[default] would add 21 s and 77 MiB for
    // nothing the tests use), webdataset 5 s +1 MiB.
    "pyarrow",
    "datasets<5",
    "scikit-learn",
    "scikit-image",
    "ray",
    "webdataset",
    // The ArrayRecord tests write and read files with the array_record package (the version
    // the servers' venv pins for the Rust interop tests), and the cluster test lists the
    // bucket with boto3 (both came with the project venv before the tests had a venv of
    // their own).
    "array-record==0.8.6",
    "boto3",
    RUFF,
];

/// PyTorch, installed on its own (timed) unless [`TORCH_SWITCH`] is `0`.
pub(crate) const TORCH_PACKAGE: &str = "torch";

/// The environment switch that leaves torch out (`0`), for local runs only.
pub(crate) const TORCH_SWITCH: &str = "GUIDELOOM_XTASK_TORCH";

/// The variable that tells `python/tests/conftest.py` which venv `guideloom` must be
/// imported from (step 5).
pub(crate) const WHEEL_VENV_VAR: &str = "GUIDELOOM_TEST_WHEEL_VENV";

/// The programs whose directories leave the test venv's `PATH` (step 3).
const RUST_TOOLS: &[&str] = &["cargo", "rustc", "rustup"];

/// `false` when `GUIDELOOM_XTASK_TORCH=0`.
fn torch_wanted() -> bool {
    !std::env::var(TORCH_SWITCH).is_ok_and(|v| v.trim() == "0")
}

/// pytest's exit status when it collected no tests.
pub(crate) const PYTEST_NO_TESTS: i32 = 5;

/// The meaning of a pytest exit status: `Ok` only for 0.
pub(crate) fn pytest_verdict(code: Option<i32>) -> std::result::Result<(), String> {
    match code {
        Some(0) => Ok(()),
        Some(PYTEST_NO_TESTS) => Err("pytest collected no tests (exit 5)".into()),
        Some(code) => Err(format!("pytest failed (exit {code})")),
        None => Err("pytest was killed by a signal".into()),
    }
}

/// The venv the wheel is tested in (step 3).
pub(crate) fn wheel_venv_dir(root: &Path) -> PathBuf {
    root.join(".xtask").join("wheel-venv")
}

/// `path` (a `PATH` value) without the directories that hold a Rust tool ([`RUST_TOOLS`]),
/// after `first`; and the directories left out.
fn path_without_rust(first: &Path, path: &OsStr) -> (OsString, Vec<PathBuf>) {
    let (kept, dropped): (Vec<PathBuf>, Vec<PathBuf>) = std::env::split_paths(path)
        .partition(|dir| !RUST_TOOLS.iter().any(|t| util::is_executable(&dir.join(t))));
    let dirs = std::iter::once(first.to_path_buf()).chain(kept);
    (std::env::join_paths(dirs).unwrap_or_default(), dropped)
}

/// A program of the test venv with the `PATH` and environment of step 3.
fn rustless_command(venv: &Path, path: &OsStr, program: &str) -> Command {
    let mut cmd = Command::new(venv.join("bin").join(program));
    for (key, _) in std::env::vars_os() {
        let key_str = key.to_string_lossy();
        if ["CARGO", "RUSTC", "RUSTUP"]
            .iter()
            .any(|p| key_str.starts_with(p))
            || key_str == "RUSTFLAGS"
            || key_str == "PYTHONPATH"
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env("PATH", path)
        .env("VIRTUAL_ENV", venv)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PYTHONSAFEPATH", "1")
        .env(WHEEL_VENV_VAR, venv);
    cmd
}

/// Step 3: the test venv, new, and its `PATH` (checked to reach no `cargo` or `rustc`).
fn fresh_venv(root: &Path) -> Result<(PathBuf, OsString)> {
    let venv = wheel_venv_dir(root);
    let started = Instant::now();
    if venv.exists() {
        std::fs::remove_dir_all(&venv).map_err(|e| Error::io("cannot remove", &venv, e))?;
    }
    let python = util::which("python3").ok_or_else(|| Error::Check {
        check: "python".into(),
        problems: vec!["python3 (3.11 or newer) is not on PATH".into()],
    })?;
    util::run(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
    println!(
        "[python] fresh venv {} in {:.1}s",
        venv.display(),
        started.elapsed().as_secs_f64()
    );
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let (path, mut dropped) = path_without_rust(&venv.join("bin"), &inherited);
    dropped.sort();
    dropped.dedup();
    for dir in &dropped {
        println!(
            "[python] left off PATH (holds a Rust tool): {}",
            dir.display()
        );
    }
    let reachable: Vec<String> = ["cargo", "rustc"]
        .iter()
        .filter_map(|tool| util::which_in(&path, tool))
        .map(|found| found.display().to_string())
        .collect();
    if !reachable.is_empty() {
        return Err(Error::Check {
            check: "python".into(),
            problems: vec![format!(
                "the test venv's PATH still reaches {}",
                reachable.join(", ")
            )],
        });
    }
    Ok((venv, path))
}

/// Runs `cmd` (printed under `[python]`) and prints how long `what` took.
fn timed(what: &str, cmd: &mut Command) -> Result<()> {
    let started = Instant::now();
    println!("[python] $ {}", util::display(cmd));
    util::run(cmd)?;
    println!("[python] {what} in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The directory `guideloom` and its extension module are imported from in the test venv,
/// run from `root` as pytest is; an error unless both are in the venv (step 5).
fn check_installed(venv: &Path, path: &OsStr, root: &Path) -> Result<()> {
    let mut probe = rustless_command(venv, path, "python");
    probe.current_dir(root).args([
        "-c",
        "import guideloom, guideloom._guideloom as ext; print(guideloom.__file__); print(ext.__file__)",
    ]);
    let out = util::capture(&mut probe)?;
    let venv = venv
        .canonicalize()
        .map_err(|e| Error::io("cannot resolve", venv, e))?;
    let mut problems = Vec::new();
    for file in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let resolved = Path::new(file)
            .canonicalize()
            .unwrap_or_else(|_| PathBuf::from(file));
        if resolved.starts_with(&venv)
            && resolved
                .components()
                .any(|c| c.as_os_str() == "site-packages")
        {
            println!("[python] imported from the test venv: {file}");
        } else {
            problems.push(format!(
                "`import guideloom` in the test venv loads {file}, not the installed wheel"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Check {
            check: "python".into(),
            problems,
        })
    }
}

/// The example scripts of the package, sorted.
fn examples(root: &Path) -> Result<Vec<PathBuf>> {
    let dir = root.join("python").join("examples");
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io("cannot list", &dir, e))?;
    let mut scripts: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    scripts.sort();
    Ok(scripts)
}

/// Runs the step; `env` gives the examples and pytest the servers' environment.
pub(crate) fn run(root: &Path, env: impl Fn(&mut Command)) -> Result<()> {
    // 1. The wheel, built by the code of `cargo xtask wheel`.
    let project = ensure_venv(root)?;
    wheel::install_tools(&project, "python")?;
    let wheel = wheel::build(root, &project, "python")?;

    // 2. The Rust half of the interop tests, built as the `examples` step builds it.
    util::run(util::cargo(root).args([
        "build",
        "-p",
        "guideloom",
        "--all-features",
        "--example",
        "python_interop",
    ]))?;
    let interop = util::target_dir(root)?
        .join("debug")
        .join("examples")
        .join("python_interop");

    // 3. and 4. A fresh venv without cargo, the wheel and the test requirements.
    let (venv, path) = fresh_venv(root)?;
    let pip = || {
        let mut pip = rustless_command(&venv, &path, "pip");
        pip.args(["install", "--quiet", "--no-cache-dir"]);
        pip
    };
    let started = Instant::now();
    let mut install = pip();
    install.args(["--only-binary", ":all:"]).arg(&wheel.path);
    println!("[python] $ {}", util::display(&install));
    util::run(&mut install)?;
    println!(
        "[python] pip install {} (its dependencies included) into the fresh venv in {:.1}s",
        wheel
            .path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        started.elapsed().as_secs_f64()
    );
    timed(
        &format!("pip install {}", TEST_PACKAGES.join(" ")),
        pip().args(TEST_PACKAGES),
    )?;
    let torch = torch_wanted();
    if torch {
        timed(
            &format!("pip install {TORCH_PACKAGE}"),
            pip().arg(TORCH_PACKAGE),
        )?;
    } else {
        println!("[python] {TORCH_SWITCH}=0: torch is not installed and its tests skip");
    }

    // 5. The package imported is the installed one.
    check_installed(&venv, &path, root)?;

    // 6. The examples, then pytest.
    for script in examples(root)? {
        let name = script
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut example = rustless_command(&venv, &path, "python");
        example.current_dir(root).arg(&script);
        env(&mut example);
        if !torch {
            example.env(TORCH_SWITCH, "0");
        }
        timed(&format!("example {name}"), &mut example)?;
    }
    let started = Instant::now();
    let mut pytest = rustless_command(&venv, &path, "python");
    pytest.env("GUIDELOOM_INTEROP_EXAMPLE", &interop);
    pytest
        .current_dir(root)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "python/tests"]);
    env(&mut pytest);
    if !torch {
        pytest.env(TORCH_SWITCH, "0");
    }
    println!("[python] $ {}", util::display(&pytest));
    let status = pytest.status().map_err(|source| Error::Spawn {
        program: util::display(&pytest),
        source,
    })?;
    pytest_verdict(status.code()).map_err(|problem| Error::Check {
        check: "python".into(),
        problems: vec![problem],
    })?;
    println!("[python] pytest in {:.1}s", started.elapsed().as_secs_f64());

    // 7.
    static_checks(root, &venv, &path)?;
    println!(
        "[python] wheel: built in {:.1}s, {} bytes ({:.1} MB)",
        wheel.build_secs,
        wheel.bytes,
        wheel.bytes as f64 / 1e6
    );
    Ok(())
}

/// The static checks of step 7, in order, each timed: ruff, mypy, stubtest.
const STATIC_CHECKS: &[(&str, &[&str])] = &[
    ("ruff check", &["-m", "ruff", "check", "python"]),
    (
        "ruff format",
        &["-m", "ruff", "format", "--check", "python"],
    ),
    (
        "mypy --strict",
        &[
            "-m",
            "mypy",
            "--strict",
            "python/guideloom",
            "python/tests",
            "python/examples",
        ],
    ),
    (
        "stubtest",
        &[
            "-m",
            "mypy.stubtest",
            "--mypy-config-file",
            "pyproject.toml",
            "--allowlist",
            "python/stubtest-allowlist.txt",
            "guideloom",
        ],
    ),
];

fn static_checks(root: &Path, venv: &Path, path: &OsStr) -> Result<()> {
    for (name, args) in STATIC_CHECKS {
        let mut check = rustless_command(venv, path, "python");
        check.current_dir(root).args(*args);
        timed(name, &mut check)?;
    }
    Ok(())
}

/// The switch that leaves the Python benchmark out of `cargo xtask bench` (`0`).
pub(crate) const PYBENCH_SWITCH: &str = "GUIDELOOM_XTASK_PYBENCH";

/// The peers `python/bench/peers.py` reads beside guideloom, installed into the project venv
/// by [`bench()`] (array_record is already there: the servers' packages). Measured: pylance
/// 12 s (+232 MiB, the tests do not use it), mosaicml-streaming 86 s (it brings torchvision, transformers,
/// cloud SDKs and numpy 2.1). Not in a venv of their own: a second torch filled the shared
/// disk when tried.
pub(crate) const BENCH_PACKAGES: &[&str] = &[
    "pylance",
    "mosaicml-streaming",
    "litdata",
    "boto3",
    "moto[server]",
    TORCH_PACKAGE,
];

/// The far-store profiles of `python/bench/far_peers.py` that `cargo xtask bench` runs (the
/// issue's: 100 000 × 1 KiB and 5 000 × 256 KiB), each with these arguments.
const FAR_PROFILES: &[&[&str]] = &[&[], &["--records", "5000", "--record-bytes", "262144"]];

/// `cargo xtask bench`'s Python part: the package built in release into the project venv
/// with the peers ([`BENCH_PACKAGES`]), then `python/bench/peers.py` (local reads beside
/// array_record, MDS and Lance), `columnar_peers.py` and `import_peers.py` (typed batches and
/// imports beside HF datasets, Lance, MDS and LitData) and `python/bench/far_peers.py` (two epochs over moto behind
/// the fault proxy's far link, beside MDS and LitData; [`FAR_PROFILES`]), each printing its
/// own tables. Skipped with `GUIDELOOM_XTASK_PYBENCH=0`.
pub(crate) fn bench(root: &Path) -> Result<()> {
    if std::env::var(PYBENCH_SWITCH).is_ok_and(|v| v.trim() == "0") {
        println!("[python-bench] {PYBENCH_SWITCH}=0: skipped");
        return Ok(());
    }
    let venv = ensure_venv(root)?;
    let mut pip = venv_command(&venv, "pip");
    pip.args(["install", "--quiet", "--no-cache-dir", "maturin"])
        .args(TEST_PACKAGES)
        .args(BENCH_PACKAGES);
    println!("[python-bench] $ {}", util::display(&pip));
    util::run(&mut pip)?;
    let mut maturin = venv_command(&venv, "maturin");
    maturin.current_dir(root).args(["develop", "--release"]);
    util::lean_build(&mut maturin);
    println!("[python-bench] $ {}", util::display(&maturin));
    util::run(&mut maturin)?;
    // Local reads beside the peers, then typed batches (random batches of 64 as Arrow beside
    // HF datasets, Lance and MDS) and imports (1 GB of Parquet beside LitData's optimize and
    // MDS's writer), each against the ceiling of the same run.
    for script in ["peers.py", "columnar_peers.py", "import_peers.py"] {
        let mut bench = venv_command(&venv, "python");
        bench
            .current_dir(root)
            .arg(format!("python/bench/{script}"));
        println!("[python-bench] $ {}", util::display(&bench));
        util::run(&mut bench)?;
    }
    // far_peers runs the fault proxy's far_link example between the readers and moto.
    let mut link = util::cargo(root);
    link.current_dir(root).args([
        "build",
        "--release",
        "-p",
        "guideloom-faultproxy",
        "--example",
        "far_link",
    ]);
    util::lean_build(&mut link);
    println!("[python-bench] $ {}", util::display(&link));
    util::run(&mut link)?;
    for profile in FAR_PROFILES {
        let mut far = venv_command(&venv, "python");
        far.current_dir(root)
            .arg("python/bench/far_peers.py")
            .args(*profile)
            .env("CARGO_TARGET_DIR", util::target_dir(root)?);
        println!("[python-bench] $ {}", util::display(&far));
        util::run(&mut far)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quoted strings of the multi-line array `name = [` in `text` (a TOML file's).
    fn toml_array(text: &str, name: &str) -> Vec<String> {
        let start = text
            .find(&format!("\n{name} = ["))
            .unwrap_or_else(|| panic!("no `{name} = [` in pyproject.toml"));
        let body = &text[start..];
        let body = &body[..body.find("\n]").expect("the array ends")];
        body.lines()
            .skip(1)
            .filter_map(|line| {
                let line = line.trim();
                line.strip_prefix('"')?.split('"').next().map(str::to_owned)
            })
            .collect()
    }

    #[test]
    fn the_test_extra_of_pyproject_is_what_ci_installs() {
        let pyproject = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .join("pyproject.toml");
        let text = std::fs::read_to_string(&pyproject).unwrap();
        let mut declared = toml_array(&text, "test");
        let mut installed: Vec<String> = TEST_PACKAGES
            .iter()
            .chain([&TORCH_PACKAGE])
            .map(|p| (*p).to_owned())
            .collect();
        declared.sort();
        installed.sort();
        assert_eq!(declared, installed, "pyproject.toml's `test` extra");
    }

    #[test]
    fn ruff_is_pinned_and_installed_and_every_static_check_runs_over_the_package() {
        assert!(RUFF.starts_with("ruff==") && TEST_PACKAGES.contains(&RUFF));
        let names: Vec<_> = STATIC_CHECKS.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["ruff check", "ruff format", "mypy --strict", "stubtest"]
        );
        for (name, args) in STATIC_CHECKS {
            assert!(
                args.iter()
                    .any(|a| *a == "python" || *a == "python/guideloom" || *a == "guideloom"),
                "{name} does not cover the package"
            );
        }
    }

    #[test]
    fn the_test_path_leaves_out_every_directory_with_a_rust_tool() {
        let dir = std::env::temp_dir().join(format!("xtask-rustless-{}", std::process::id()));
        let (cargo_home, rust_only, plain) =
            (dir.join("cargo"), dir.join("rustc"), dir.join("bin"));
        for d in [&cargo_home, &rust_only, &plain] {
            util::mkdir(d).unwrap();
        }
        let executable = |file: PathBuf| {
            use std::os::unix::fs::PermissionsExt;
            util::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        executable(cargo_home.join("cargo"));
        executable(rust_only.join("rustc"));
        executable(plain.join("python3"));
        // A file named cargo without an execute bit is not a program.
        util::write(&plain.join("cargo"), "").unwrap();
        let inherited = std::env::join_paths([&cargo_home, &plain, &rust_only]).unwrap();
        let venv_bin = dir.join("venv").join("bin");
        let (path, dropped) = path_without_rust(&venv_bin, &inherited);
        assert_eq!(
            std::env::split_paths(&path).collect::<Vec<_>>(),
            [venv_bin, plain.clone()]
        );
        assert_eq!(dropped, [cargo_home, rust_only]);
        assert!(util::which_in(&path, "cargo").is_none());
        assert!(util::which_in(&path, "rustc").is_none());
        assert_eq!(
            util::which_in(&path, "python3"),
            Some(plain.join("python3"))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_exit_zero_passes_and_no_tests_is_a_failure() {
        assert_eq!(pytest_verdict(Some(0)), Ok(()));
        assert!(
            pytest_verdict(Some(PYTEST_NO_TESTS))
                .unwrap_err()
                .contains("no tests")
        );
        assert!(pytest_verdict(Some(1)).is_err());
        assert!(pytest_verdict(None).is_err());
    }
}
