//! The `python` step of `cargo xtask ci`: builds the Python package (`pyproject.toml`, the
//! cdylib `crates/guideloom-python`) into the project venv and tests it.
//!
//! 1. The venv `.xtask/venv` (the one moto lives in) is created when missing, then
//!    `pip install maturin pytest mypy numpy aiohttp dask[distributed]` (timed; a no-op once
//!    installed; aiohttp is the HTTP client of the custom-backend example, dask the cluster
//!    of the distributed-writers test), then `pip install torch` (timed on its own: PyPI's
//!    Linux wheel is the CUDA build, about 5 GB installed with its dependencies). Both
//!    installs pass `--no-cache-dir`, so the wheels are not also kept in pip's cache.
//!    `GUIDELOOM_XTASK_TORCH=0` leaves torch out locally and is passed on to pytest, whose torch tests then skip; CI
//!    never sets it, so there a missing torch fails them.
//! 2. `maturin develop --release` builds the extension module and installs the package
//!    editable into that venv.
//! 3. The facade's example `python_interop` (the Rust half of the interop tests) is built, then
//!    `python -m pytest python/tests` with the servers' environment (`GUIDELOOM_CI=1`, so a
//!    missing server fails): exit 5 ("no tests collected") is a failure, not a pass.
//! 4. The static checks of the package, each timed: `ruff check` and `ruff format --check`
//!    over `python/` ([`RUFF`], pinned), `python -m mypy --strict` over the package itself
//!    (`python/guideloom`), the tests and the examples, and `python -m mypy.stubtest` of the
//!    package against the compiled extension just installed (its stubs, one per concern, must
//!    match the runtime; `python/stubtest-allowlist.txt` lists, with reasons, what a stub
//!    declares that the runtime cannot show).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;
use crate::venv::{ensure_venv, venv_command};

/// The linter and formatter of `python/`, pinned: a new ruff release may add rules or change
/// formatting, which should be a change of this line, not a surprise in CI.
pub(crate) const RUFF: &str = "ruff==0.17.6";

/// What pip installs into the venv for this step (mypy brings `mypy.stubtest`).
pub(crate) const PIP_PACKAGES: &[&str] = &[
    "maturin",
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
    RUFF,
];

/// PyTorch, installed on its own (timed) unless [`TORCH_SWITCH`] is `0`.
pub(crate) const TORCH_PACKAGE: &str = "torch";

/// The environment switch that leaves torch out (`0`), for local runs only.
pub(crate) const TORCH_SWITCH: &str = "GUIDELOOM_XTASK_TORCH";

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

/// Runs the step; `env` gives pytest the servers' environment.
pub(crate) fn run(root: &Path, env: impl Fn(&mut Command)) -> Result<()> {
    let venv = ensure_venv(root)?;
    let started = Instant::now();
    let mut pip = venv_command(&venv, "pip");
    pip.args(["install", "--quiet", "--no-cache-dir"])
        .args(PIP_PACKAGES);
    println!("[python] $ {}", util::display(&pip));
    util::run(&mut pip)?;
    println!(
        "[python] pip install {} in {:.1}s",
        PIP_PACKAGES.join(" "),
        started.elapsed().as_secs_f64()
    );
    let torch = torch_wanted();
    if torch {
        let started = Instant::now();
        let mut pip = venv_command(&venv, "pip");
        pip.args(["install", "--quiet", "--no-cache-dir", TORCH_PACKAGE]);
        println!("[python] $ {}", util::display(&pip));
        util::run(&mut pip)?;
        println!(
            "[python] pip install {TORCH_PACKAGE} in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    } else {
        println!("[python] {TORCH_SWITCH}=0: torch is not installed and its tests skip");
    }

    let started = Instant::now();
    let mut maturin = venv_command(&venv, "maturin");
    maturin.current_dir(root).args(["develop", "--release"]);
    util::lean_build(&mut maturin);
    println!("[python] $ {}", util::display(&maturin));
    util::run(&mut maturin)?;
    println!(
        "[python] maturin develop --release in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The Rust half of the interop tests, built as the `examples` step builds it.
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

    let started = Instant::now();
    let mut pytest = venv_command(&venv, "python");
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

    static_checks(root, &venv)
}

/// The static checks of step 4, in order, each timed: ruff, mypy, stubtest.
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

fn static_checks(root: &Path, venv: &Path) -> Result<()> {
    for (name, args) in STATIC_CHECKS {
        let started = Instant::now();
        let mut check = venv_command(venv, "python");
        check.current_dir(root).args(*args);
        println!("[python] $ {}", util::display(&check));
        util::run(&mut check)?;
        println!("[python] {name} in {:.1}s", started.elapsed().as_secs_f64());
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
    pip.args(["install", "--quiet", "--no-cache-dir"])
        .args(PIP_PACKAGES)
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

    #[test]
    fn ruff_is_pinned_and_installed_and_every_static_check_runs_over_the_package() {
        assert!(RUFF.starts_with("ruff==") && PIP_PACKAGES.contains(&RUFF));
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
