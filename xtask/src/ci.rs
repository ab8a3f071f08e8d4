//! `cargo xtask ci`: every check, in order, one summary line per step.
//!
//! A step is a name and a function; add one by adding a line to [`STEPS`]. The run stops at the
//! first failing step, except that steps marked `always` (stopping the servers) run regardless.
//! Servers are also stopped by `Drop` if anything panics.
//!
//! Each step prints the free disk space first. Builds in a CI run are not incremental
//! (`util::one_shot_builds`): a fresh clone is built once, and the incremental state took
//! 6.5 GB of a disk that a CI machine once filled while installing torch.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::servers::{self, Servers};
use crate::util;

/// One CI step.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) name: &'static str,
    run: fn(&mut Ctx) -> Result<()>,
    /// Runs even after an earlier step failed.
    always: bool,
}

/// The steps of `cargo xtask ci`, in order.
pub(crate) const STEPS: &[Step] = &[
    Step {
        name: "fmt",
        run: fmt,
        always: false,
    },
    Step {
        name: "tidy",
        run: tidy,
        always: false,
    },
    Step {
        name: "clippy",
        run: clippy,
        always: false,
    },
    Step {
        name: "features",
        run: features,
        always: false,
    },
    Step {
        name: "doc",
        run: doc,
        always: false,
    },
    Step {
        name: "fuzz-check",
        run: fuzz_check,
        always: false,
    },
    Step {
        name: "model",
        run: model,
        always: false,
    },
    Step {
        name: "servers-up",
        run: servers_up,
        always: false,
    },
    Step {
        name: "test",
        run: test,
        always: false,
    },
    Step {
        name: "examples",
        run: examples,
        always: false,
    },
    Step {
        name: "browser",
        run: browser,
        always: false,
    },
    Step {
        name: "python",
        run: python,
        always: false,
    },
    Step {
        name: "servers-down",
        run: servers_down,
        always: true,
    },
    Step {
        name: "deny",
        run: deny,
        always: false,
    },
];

/// The step names, for messages.
pub(crate) fn step_names() -> String {
    STEPS.iter().map(|s| s.name).collect::<Vec<_>>().join(" ")
}

/// State shared by the steps of one run.
#[derive(Debug)]
struct Ctx {
    root: PathBuf,
    servers: Option<Servers>,
}

/// Runs the steps not in `skip`.
pub(crate) fn run(root: &Path, skip: &[String]) -> Result<()> {
    let mut ctx = Ctx {
        root: root.to_path_buf(),
        servers: None,
    };
    util::one_shot_builds();
    // Resolved once (`cargo metadata`); it may not exist before the first build.
    let build_dir = util::target_dir(root).unwrap_or_else(|_| root.to_path_buf());
    let started = Instant::now();
    let mut summary = Vec::new();
    let mut failure: Option<(&'static str, Error)> = None;
    for step in STEPS {
        if skip.iter().any(|s| s == step.name) {
            println!("[ci] {} skipped (--skip)", step.name);
            summary.push(format!("[ci] {} skipped", step.name));
            continue;
        }
        if failure.is_some() && !step.always {
            continue;
        }
        println!("[ci] ---- {} ----", step.name);
        print_free_space(&build_dir, &ctx.root);
        let step_started = Instant::now();
        let result = (step.run)(&mut ctx);
        let line = format!(
            "[ci] {} {} in {:.1}s",
            step.name,
            if result.is_ok() { "ok" } else { "FAILED" },
            step_started.elapsed().as_secs_f64()
        );
        println!("{line}");
        summary.push(line);
        if let Err(err) = result {
            eprintln!("[ci] {}: {err}", step.name);
            failure.get_or_insert((step.name, err));
        }
    }
    // Whatever happened, no server outlives the run.
    drop(ctx);
    println!("[ci] ---- summary ----");
    for line in &summary {
        println!("{line}");
    }
    let total = started.elapsed().as_secs_f64();
    match failure {
        None => {
            println!("[ci] total ok in {total:.1}s");
            Ok(())
        }
        Some((name, err)) => {
            println!("[ci] total FAILED at {name} in {total:.1}s");
            Err(err)
        }
    }
}

/// One line with the free space where the build goes, so a run that fills the disk shows
/// which step did it.
fn print_free_space(build_dir: &Path, root: &Path) {
    let probe = if build_dir.exists() { build_dir } else { root };
    match util::free_bytes(probe) {
        Some(bytes) => println!(
            "[ci] disk: {:.1} GiB free under {}",
            bytes as f64 / f64::from(1u32 << 30),
            probe.display()
        ),
        None => println!("[ci] disk: free space unknown (df failed)"),
    }
}

/// Prints and runs a cargo command in the repository root.
fn cargo(ctx: &Ctx, args: &[&str], configure: impl FnOnce(&mut Command)) -> Result<()> {
    let mut cmd = util::cargo(&ctx.root);
    cmd.args(args);
    configure(&mut cmd);
    println!("[ci] $ {}", util::display(&cmd));
    util::run(&mut cmd)
}

fn fmt(ctx: &mut Ctx) -> Result<()> {
    cargo(ctx, &["fmt", "--all", "--check"], |_| {})
}

fn tidy(ctx: &mut Ctx) -> Result<()> {
    for line in crate::tidy::run(&ctx.root)? {
        println!("[tidy] {line}");
    }
    Ok(())
}

fn clippy(ctx: &mut Ctx) -> Result<()> {
    cargo(
        ctx,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        |_| {},
    )
}

/// Each feature set of each library crate, and the tests that exist only with a feature off
/// (see `features.rs`): before the servers start, as these tests need none.
fn features(ctx: &mut Ctx) -> Result<()> {
    crate::features::run(&ctx.root)
}

fn doc(ctx: &mut Ctx) -> Result<()> {
    cargo(
        ctx,
        &["doc", "--workspace", "--no-deps", "--all-features"],
        |cmd| {
            cmd.env("RUSTDOCFLAGS", "-D warnings");
        },
    )
}

/// Every cargo-fuzz target in `fuzz/` (a workspace of its own, on nightly) type-checks
/// against the crates as they are (`fuzz.rs`).
fn fuzz_check(ctx: &mut Ctx) -> Result<()> {
    crate::fuzz::check(&ctx.root)
}

/// The publication protocol's model, checked by spin (`cargo xtask model`).
fn model(ctx: &mut Ctx) -> Result<()> {
    crate::model::run(&ctx.root)
}

fn servers_up(ctx: &mut Ctx) -> Result<()> {
    ctx.servers = Some(Servers::start(&ctx.root, &servers::ci_kinds(), false)?);
    Ok(())
}

fn servers_down(ctx: &mut Ctx) -> Result<()> {
    match ctx.servers.take() {
        Some(mut servers) => servers.stop(),
        None => {
            println!("[ci] no servers were started");
            Ok(())
        }
    }
}

/// The environment of the test processes: the servers' addresses and `GUIDELOOM_CI=1`, which
/// turns a missing server from a skip into a failure — except Ceph RGW and the mount when
/// they were left out (`GUIDELOOM_XTASK_CEPH=0`, `GUIDELOOM_XTASK_MOUNT=0`, passed on so
/// their tests skip).
fn test_env(ctx: &Ctx, cmd: &mut Command) {
    match &ctx.servers {
        Some(servers) => {
            servers.apply(cmd);
            cmd.env("GUIDELOOM_CI", "1");
            if !servers.has(servers::Kind::Ceph) {
                cmd.env("GUIDELOOM_XTASK_CEPH", "0");
            }
            if !servers.has(servers::Kind::Rclone) {
                cmd.env("GUIDELOOM_XTASK_MOUNT", "0");
            }
        }
        None => {
            println!(
                "[ci] servers are not running (servers-up skipped): GUIDELOOM_CI is not set, \
                 so server-backed tests skip"
            );
            cmd.env_remove("GUIDELOOM_CI");
        }
    }
}

fn nextest_installed(root: &Path) -> bool {
    util::succeeds(util::cargo(root).args(["nextest", "--version"]))
}

fn test(ctx: &mut Ctx) -> Result<()> {
    if nextest_installed(&ctx.root) {
        cargo(
            ctx,
            &[
                "nextest",
                "run",
                "--workspace",
                "--all-features",
                "--no-fail-fast",
            ],
            |cmd| test_env(ctx, cmd),
        )?;
    } else {
        println!("[ci] cargo-nextest is not installed: using cargo test");
        cargo(
            ctx,
            &["test", "--workspace", "--all-features", "--no-fail-fast"],
            |cmd| test_env(ctx, cmd),
        )?;
    }
    // The CLI tests that exist only in its default build (`aws-profile` off: the profile
    // refusals, s3_round_trip's refusal branch); `--all-features` compiles the other half.
    if nextest_installed(&ctx.root) {
        let expression = CLI_DEFAULT_BUILD_TESTS.map(|name| format!("test({name})"));
        let expression = expression.join(" | ");
        cargo(
            ctx,
            &[
                "nextest",
                "run",
                "-p",
                "guideloom-cli",
                "--no-fail-fast",
                "-E",
                &expression,
            ],
            |cmd| test_env(ctx, cmd),
        )?;
    } else {
        let mut args = vec!["test", "-p", "guideloom-cli", "--no-fail-fast", "--"];
        args.extend(CLI_DEFAULT_BUILD_TESTS);
        cargo(ctx, &args, |cmd| test_env(ctx, cmd))?;
    }
    // nextest does not run doctests; with plain `cargo test` this repeats them (cheap).
    cargo(
        ctx,
        &["test", "--workspace", "--all-features", "--doc"],
        |cmd| test_env(ctx, cmd),
    )
}

/// The names (substrings) of the guideloom-cli tests run again in its default build. nextest
/// fails a filter that matches no test, so a renamed test cannot silently drop out.
const CLI_DEFAULT_BUILD_TESTS: [&str; 2] = ["aws_profile", "s3_round_trip"];

/// The examples of every crate (`crates/*/examples/NAME.rs` or `NAME/main.rs`), sorted.
fn example_names(root: &Path) -> Result<Vec<String>> {
    let read = |dir: &Path| {
        std::fs::read_dir(dir).map_err(|source| Error::Io {
            what: "list".into(),
            path: dir.to_path_buf(),
            source,
        })
    };
    let mut names = Vec::new();
    for krate in read(&root.join("crates"))? {
        let examples = krate.map_err(|source| Error::Io {
            what: "list".into(),
            path: root.join("crates"),
            source,
        })?;
        let examples = examples.path().join("examples");
        if !examples.is_dir() {
            continue;
        }
        for entry in read(&examples)?.flatten() {
            let path = entry.path();
            let stem = path.file_stem().and_then(|n| n.to_str()).map(str::to_owned);
            let is_example =
                path.extension().is_some_and(|e| e == "rs") || path.join("main.rs").is_file();
            if let (Some(stem), true) = (stem, is_example) {
                names.push(stem);
            }
        }
    }
    names.sort();
    Ok(names)
}

/// Builds every example with the test build's features (so nothing rebuilds) and runs each
/// one with the servers' environment: an example that needs a server and finds none fails
/// under `GUIDELOOM_CI=1`, as the tests do.
fn examples(ctx: &mut Ctx) -> Result<()> {
    let names = example_names(&ctx.root)?;
    if names.is_empty() {
        println!("[ci] no examples");
        return Ok(());
    }
    cargo(
        ctx,
        &["build", "--workspace", "--all-features", "--examples"],
        |_| {},
    )?;
    let dir = util::target_dir(&ctx.root)?.join("debug").join("examples");
    for name in &names {
        let mut cmd = Command::new(dir.join(name));
        cmd.current_dir(&ctx.root);
        test_env(ctx, &mut cmd);
        println!("[ci] $ example {name}");
        let started = Instant::now();
        util::run(&mut cmd)?;
        println!(
            "[ci] example {name} ok in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// `guideloom serve` in headless Chromium (`browser.rs`): a missing browser fails here.
fn browser(ctx: &mut Ctx) -> Result<()> {
    crate::browser::run(&ctx.root, |cmd| test_env(ctx, cmd))
}

/// The Python package as a user gets it: the wheel of `cargo xtask wheel` installed into a
/// fresh venv, then, with no cargo on `PATH`, the examples, pytest against the servers, ruff,
/// mypy and stubtest (see `python.rs`).
fn python(ctx: &mut Ctx) -> Result<()> {
    crate::python::run(&ctx.root, |cmd| test_env(ctx, cmd))
}

fn deny(ctx: &mut Ctx) -> Result<()> {
    if !util::succeeds(util::cargo(&ctx.root).args(["deny", "--version"])) {
        println!("[ci] cargo-deny is missing: `cargo install --locked cargo-deny`");
        cargo(ctx, &["install", "--locked", "cargo-deny"], |_| {})?;
    }
    // `--offline` keeps cargo-deny from fetching anything; `cargo fetch` first makes sure every
    // platform's crates are in the local registry for the metadata it reads.
    cargo(ctx, &["fetch", "--quiet"], |_| {})?;
    println!("[ci] advisories: skipped (advisory database cannot be fetched offline)");
    cargo(
        ctx,
        &[
            "deny",
            "--workspace",
            "--offline",
            "check",
            "--hide-inclusion-graph",
            "licenses",
            "bans",
            "sources",
        ],
        |_| {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_found_in_every_crate() {
        let names = example_names(&util::repo_root()).unwrap();
        for expected in [
            "custom_backend",
            "http_ranges",
            "quickstart",
            "s3_custom_endpoint",
        ] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} not in {names:?}"
            );
        }
    }

    #[test]
    fn steps_are_unique_and_servers_down_follows_test() {
        let names: Vec<&str> = STEPS.iter().map(|s| s.name).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let pos = |n: &str| names.iter().position(|s| *s == n).unwrap();
        assert!(pos("servers-up") < pos("test"));
        assert!(pos("clippy") < pos("features") && pos("features") < pos("servers-up"));
        assert!(pos("fuzz-check") < pos("servers-up"));
        assert!(pos("test") < pos("servers-down"));
        assert!(pos("servers-up") < pos("examples") && pos("examples") < pos("servers-down"));
        assert!(pos("servers-up") < pos("python") && pos("python") < pos("servers-down"));
        assert!(pos("examples") < pos("browser") && pos("browser") < pos("python"));
        let always: Vec<&str> = STEPS.iter().filter(|s| s.always).map(|s| s.name).collect();
        assert_eq!(always, ["servers-down"]);
    }
}
