//! `cargo xtask features`: every library crate compiles, lint-clean, with each feature set.
//!
//! For each crate under `crates/` with a `[features]` table (other than `default` alone):
//!
//! 1. `cargo hack clippy --each-feature --exclude-all-features --lib -- -D warnings`: the
//!    library with `--no-default-features`, the defaults (`--features default`) and each
//!    feature alone, compiled and lint-clean (`--keep-going`: one run names every failing set;
//!    clippy costs what `check` costs, since it replaces only the workspace crates' compiler). `--lib` keeps dev-dependencies out,
//!    so their features cannot unify into the library's (resolver 2): a library that needs a
//!    tokio feature it does not ask for fails here. A crate with binaries adds `--bins`:
//!    guideloom-cli's features decide what its binary opens (its library half has no feature
//!    code), so its local-only build and each remote feature alone are linted there.
//! 2. `cargo clippy --all-targets -- -D warnings` with `--no-default-features` and with the
//!    defaults: the tests, benches and examples too, lint-clean. With `--all-features` (the
//!    `clippy` step of `cargo xtask ci`) that makes three clippy sets per crate.
//! 3. `cargo test --no-default-features --lib --tests`: the tests that exist only with a
//!    feature off (e.g. that an unsupported URI scheme names its feature) run nowhere else.
//!
//! Why not clippy `--all-targets` for each feature alone: each set rebuilds tokio, hyper and
//! object_store with the dev-dependencies' features as well, about a minute a set on two
//! cores, 29 sets in all; the library lint of every set plus `--all-targets` for two sets costs
//! a fraction and misses only code compiled for a test or bench under one feature alone.
//!
//! cargo-hack is installed from crates.io when missing (like cargo-deny). All runs share the
//! workspace's target directory, so only what a feature set changes is rebuilt. Also a step of
//! `cargo xtask ci`, before the servers start.

use std::path::Path;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;

/// A library crate and its features (without `default`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Featured {
    pub(crate) name: String,
    pub(crate) features: Vec<String>,
    /// The features its `default` enables (its `default` feature's list, as written).
    pub(crate) default: Vec<String>,
    /// It also has binaries, linted with each feature set too (step 1's `--bins`).
    pub(crate) bins: bool,
}

/// Whether package `p` of `cargo metadata` has a target of kind `kind`.
fn has_target(p: &serde_json::Value, kind: &str) -> bool {
    p["targets"].as_array().is_some_and(|ts| {
        ts.iter().any(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == kind))
        })
    })
}

/// The crates under `crates/` with a library and at least one feature besides `default`.
pub(crate) fn featured_crates(metadata: &serde_json::Value, root: &Path) -> Vec<Featured> {
    let crates = root.join("crates");
    let mut out: Vec<Featured> = metadata["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|p| {
            Path::new(p["manifest_path"].as_str().unwrap_or_default())
                .parent()
                .and_then(Path::parent)
                == Some(crates.as_path())
        })
        .filter(|p| has_target(p, "lib"))
        .filter_map(|p| {
            let table = p["features"].as_object()?;
            let features: Vec<String> = table.keys().filter(|f| *f != "default").cloned().collect();
            let default = table
                .get("default")
                .and_then(serde_json::Value::as_array)
                .map(|fs| {
                    fs.iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (!features.is_empty()).then(|| Featured {
                name: p["name"].as_str().unwrap_or_default().to_owned(),
                features,
                default,
                bins: has_target(p, "bin"),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The cargo-hack arguments that lint `krate`'s library (and its binaries, with `bins`) with
/// every feature set (step 1).
pub(crate) fn hack_args(krate: &str, bins: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "hack",
        "clippy",
        "-p",
        krate,
        "--each-feature",
        "--exclude-all-features",
        "--keep-going",
        "--lib",
    ]
    .map(str::to_owned)
    .to_vec();
    if bins {
        args.push("--bins".into());
    }
    args.extend(["--", "-D", "warnings"].map(str::to_owned));
    args
}

/// The two clippy runs of step 2 for `krate`: no default features, then the defaults.
pub(crate) fn clippy_args(krate: &str) -> [Vec<String>; 2] {
    let run = |no_default: bool| {
        let mut args: Vec<String> = ["clippy", "-p", krate, "--all-targets"]
            .map(str::to_owned)
            .to_vec();
        if no_default {
            args.push("--no-default-features".into());
        }
        args.extend(["--", "-D", "warnings"].map(str::to_owned));
        args
    };
    [run(true), run(false)]
}

/// The arguments of step 2 for `krate`.
pub(crate) fn test_args(krate: &str) -> Vec<String> {
    [
        "test",
        "-p",
        krate,
        "--no-default-features",
        "--lib",
        "--tests",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn ensure_cargo_hack(root: &Path) -> Result<()> {
    if util::succeeds(util::cargo(root).args(["hack", "--version"])) {
        return Ok(());
    }
    println!("[features] cargo-hack is missing: `cargo install --locked cargo-hack`");
    util::run(util::cargo(root).args(["install", "--locked", "cargo-hack"]))
}

/// Runs both steps for every featured crate; prints one timing line per crate and the total.
pub(crate) fn run(root: &Path) -> Result<()> {
    let started = Instant::now();
    let crates = featured_crates(&util::cargo_metadata(root)?, root);
    if crates.is_empty() {
        return Err(Error::Check {
            check: "features".into(),
            problems: vec![
                "no crate under crates/ has features: is this the workspace root?".into(),
            ],
        });
    }
    ensure_cargo_hack(root)?;
    let mut timings = Vec::new();
    for krate in &crates {
        let sets = krate.features.len() + 2;
        println!(
            "[features] {}: {sets} feature sets (no-default, default = [{}], each of [{}]){}",
            krate.name,
            krate.default.join(", "),
            krate.features.join(", "),
            if krate.bins {
                ", library and binaries"
            } else {
                ""
            }
        );
        let t = Instant::now();
        let mut cmd = util::cargo(root);
        cmd.args(hack_args(&krate.name, krate.bins));
        println!("[features] $ {}", util::display(&cmd));
        util::run(&mut cmd)?;
        timings.push(format!(
            "[features] {}: clippy --lib x{sets} in {:.1}s",
            krate.name,
            t.elapsed().as_secs_f64()
        ));
        let t = Instant::now();
        for args in clippy_args(&krate.name) {
            let mut cmd = util::cargo(root);
            cmd.args(args);
            println!("[features] $ {}", util::display(&cmd));
            util::run(&mut cmd)?;
        }
        timings.push(format!(
            "[features] {}: clippy --all-targets x2 in {:.1}s",
            krate.name,
            t.elapsed().as_secs_f64()
        ));
    }
    for krate in &crates {
        let t = Instant::now();
        let mut cmd = util::cargo(root);
        cmd.args(test_args(&krate.name));
        // Server-backed tests skip here rather than fail: the servers are not up yet in CI.
        cmd.env_remove("GUIDELOOM_CI");
        println!("[features] $ {}", util::display(&cmd));
        util::run(&mut cmd)?;
        timings.push(format!(
            "[features] {}: tests --no-default-features in {:.1}s",
            krate.name,
            t.elapsed().as_secs_f64()
        ));
    }
    for line in &timings {
        println!("{line}");
    }
    println!(
        "[features] total {:.1}s for {} crate(s)",
        started.elapsed().as_secs_f64(),
        crates.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_featured_library_crates_of_this_workspace() {
        let root = util::repo_root();
        let crates = featured_crates(&util::cargo_metadata(&root).unwrap(), &root);
        let names: Vec<&str> = crates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "guideloom",
                "guideloom-arrayrecord",
                "guideloom-cli",
                "guideloom-format",
                "guideloom-io",
                "guideloom-publish",
                "guideloom-view"
            ]
        );
        let io = crates.iter().find(|c| c.name == "guideloom-io").unwrap();
        assert!(io.features.iter().any(|f| f == "http"));
        assert!(!io.features.iter().any(|f| f == "default"));
        assert!(!io.bins);
        // The CLI's features decide what its binary opens: the binary is linted with each
        // set, local-only (`--no-default-features`) and each remote feature alone among them.
        let cli = crates.iter().find(|c| c.name == "guideloom-cli").unwrap();
        assert!(cli.bins);
        for remote in ["s3", "gcs", "azure", "http"] {
            assert!(cli.features.iter().any(|f| f == remote), "{remote}");
            assert!(cli.default.iter().any(|f| f == remote), "{remote}");
        }
        assert!(hack_args(&cli.name, cli.bins).iter().any(|a| a == "--bins"));
    }

    #[test]
    fn skips_binaries_featureless_crates_and_crates_elsewhere() {
        let root = Path::new("/w");
        let pkg = |name: &str, dir: &str, kind: &str, features: serde_json::Value| {
            serde_json::json!({
                "name": name,
                "manifest_path": format!("/w/{dir}/Cargo.toml"),
                "targets": [{"kind": [kind]}],
                "features": features,
            })
        };
        let mut both = pkg("c", "crates/c", "lib", serde_json::json!({"r": []}));
        both["targets"] = serde_json::json!([{"kind": ["lib"]}, {"kind": ["bin"]}]);
        let metadata = serde_json::json!({"packages": [
            pkg("b", "crates/b", "lib", serde_json::json!({"default": ["x"], "x": [], "y": []})),
            pkg("a", "crates/a", "lib", serde_json::json!({"default": []})),
            pkg("tool", "crates/tool", "bin", serde_json::json!({"z": []})),
            pkg("tests", "tests", "lib", serde_json::json!({"z": []})),
            both,
        ]});
        assert_eq!(
            featured_crates(&metadata, root),
            [
                Featured {
                    name: "b".into(),
                    features: vec!["x".into(), "y".into()],
                    default: vec!["x".into()],
                    bins: false,
                },
                Featured {
                    name: "c".into(),
                    features: vec!["r".into()],
                    default: vec![],
                    bins: true,
                }
            ]
        );
    }

    #[test]
    fn each_feature_set_is_linted_two_with_all_targets_and_feature_off_tests_run() {
        let hack = hack_args("guideloom-io", false).join(" ");
        assert!(hack.starts_with("hack clippy -p guideloom-io --each-feature"));
        assert!(hack.ends_with("--lib -- -D warnings"));
        let hack = hack_args("guideloom-cli", true).join(" ");
        assert!(hack.ends_with("--lib --bins -- -D warnings"), "{hack}");
        let [off, on] = clippy_args("guideloom-io").map(|a| a.join(" "));
        assert_eq!(
            off,
            "clippy -p guideloom-io --all-targets --no-default-features -- -D warnings"
        );
        assert_eq!(on, "clippy -p guideloom-io --all-targets -- -D warnings");
        let test = test_args("guideloom-io").join(" ");
        assert_eq!(
            test,
            "test -p guideloom-io --no-default-features --lib --tests"
        );
    }
}
