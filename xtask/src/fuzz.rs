//! `cargo xtask fuzz`: every cargo-fuzz target in `fuzz/` for a fixed time, with a verdict.
//! Also [`check`], the `fuzz-check` step of `cargo xtask ci`: every target still compiles
//! against the workspace's API.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;

/// cargo-fuzz needs nightly (sanitizer flags); everything else here uses the pinned toolchain.
const TOOLCHAIN: &str = "nightly";

/// How the targets are built (and run: the same flags, or `cargo fuzz run` rebuilds):
/// optimised, with debug assertions and overflow checks (an oracle the targets keep: an
/// arithmetic overflow on hostile sizes is a finding), without AddressSanitizer. The code
/// fuzzed is safe Rust (the C of zstd is not instrumented by cargo-fuzz's flags anyway),
/// so ASan found nothing it could, at about half the executions; allocation bounds are
/// checked by the targets themselves (`arrayrecord_reader` counts its allocations).
const BUILD_FLAGS: &[&str] = &["--release", "--debug-assertions", "--sanitizer", "none"];

/// How `cargo xtask ci` checks the targets: `cargo fuzz check` type-checks every target and
/// what it links (no code generated, nothing linked) with the `--cfg fuzzing` and debug
/// assertions of [`BUILD_FLAGS`], unoptimised: enough to catch a target an API change left
/// behind, at a fraction of a build.
const CHECK_FLAGS: &[&str] = &["--dev", "--sanitizer", "none"];

/// Committed seeds outside `fuzz/seeds/<target>/`: the format crate's fixtures, real (and
/// deliberately broken) shards, seed the targets that read shards.
const FIXTURE_SEEDS: &[(&str, &str)] = &[
    ("shard_reader", "crates/guideloom-format/tests/fixtures"),
    ("point_read", "crates/guideloom-format/tests/fixtures"),
    ("metadata_decode", "crates/guideloom-format/tests/fixtures"),
    // Not the ArrayRecord fixtures (128 KiB and more each: libFuzzer mutates inputs up to the
    // largest seed, and ran 11 172 executions in 600 s from them): `arrayrecord_reader`
    // builds its files from inputs of a few hundred bytes (`fuzz/seeds/arrayrecord_reader/`).
];

/// What one fuzzing run left behind.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stats {
    /// Inputs executed, from libFuzzer's final stats (`None` if it printed none).
    executions: Option<u64>,
    /// `cov: N ft: M corp: K/SIZE` from libFuzzer's last status line: edges covered,
    /// features, corpus entries and size (`None` if it printed none).
    coverage: Option<String>,
}

/// Runs `target` (or every target) for `seconds` each; fails on a crash artifact or exit.
pub(crate) fn run(root: &Path, seconds: u64, target: Option<&str>) -> Result<()> {
    let fuzz_dir = root.join("fuzz");
    if !fuzz_dir.join("Cargo.toml").is_file() {
        println!("[fuzz] fuzz/ does not exist yet: nothing to fuzz");
        return Ok(());
    }
    ensure_cargo_fuzz(root)?;
    let listed = util::capture(util::cargo_toolchain(root, TOOLCHAIN).args(["fuzz", "list"]))?;
    let all: Vec<&str> = listed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let targets: Vec<&str> = match target {
        Some(t) if all.contains(&t) => vec![t],
        Some(t) => {
            return Err(Error::Usage {
                msg: format!("no fuzz target `{t}`; targets: {}", all.join(" ")),
            });
        }
        None => all,
    };
    let mut build = util::cargo_toolchain(root, TOOLCHAIN);
    build.args(["fuzz", "build"]).args(BUILD_FLAGS).args(target);
    println!("[fuzz] $ {}", util::display(&build));
    let started = Instant::now();
    util::run(&mut build)?;
    println!(
        "[fuzz] built {} in {:.0}s",
        target.unwrap_or("every target"),
        started.elapsed().as_secs_f64()
    );
    let mut problems = Vec::new();
    for target in targets {
        let artifacts = fuzz_dir.join("artifacts").join(target);
        let before = listing(&artifacts);
        // The first directory is the working corpus libFuzzer adds to (gitignored); the
        // committed seeds follow, read only.
        let corpus = fuzz_dir.join("corpus").join(target);
        std::fs::create_dir_all(&corpus)
            .map_err(|source| Error::io("create the fuzz corpus directory", &corpus, source))?;
        let seeds = seed_dirs(root, target);
        let started = Instant::now();
        let mut cmd = util::cargo_toolchain(root, TOOLCHAIN);
        cmd.args(["fuzz", "run"])
            .args(BUILD_FLAGS)
            .arg(target)
            .arg(&corpus)
            .args(&seeds)
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg("-print_final_stats=1")
            .stderr(Stdio::piped());
        println!("[fuzz] $ {}", util::display(&cmd));
        let mut child = cmd.spawn().map_err(|source| Error::Spawn {
            program: util::display(&cmd),
            source,
        })?;
        let mut stats = Stats::default();
        if let Some(stderr) = child.stderr.take() {
            for line in BufReader::new(stderr)
                .lines()
                .map_while(std::result::Result::ok)
            {
                eprintln!("{line}");
                parse_line(&line, &mut stats);
            }
        }
        let status = child.wait().map_err(|source| Error::Spawn {
            program: util::display(&cmd),
            source,
        })?;
        let findings: Vec<PathBuf> = listing(&artifacts).difference(&before).cloned().collect();
        let executions = stats
            .executions
            .map_or_else(|| "unknown".to_owned(), |n| n.to_string());
        println!(
            "[fuzz] {target}: {executions} executions in {:.0}s ({}; seeds from {} dir(s)), \
             {} finding(s), {status}",
            started.elapsed().as_secs_f64(),
            stats.coverage.as_deref().unwrap_or("no coverage line"),
            seeds.len(),
            findings.len()
        );
        for finding in &findings {
            println!("[fuzz]   finding: {}", finding.display());
            problems.push(format!("{target}: {}", finding.display()));
        }
        if !status.success() && findings.is_empty() {
            problems.push(format!("{target}: cargo fuzz exited with {status}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Check {
            check: "fuzz".into(),
            problems,
        })
    }
}

/// Type-checks every target in `fuzz/` (`cargo +nightly fuzz check`, [`CHECK_FLAGS`]).
pub(crate) fn check(root: &Path) -> Result<()> {
    if !root.join("fuzz").join("Cargo.toml").is_file() {
        println!("[fuzz] fuzz/ does not exist: nothing to check");
        return Ok(());
    }
    ensure_cargo_fuzz(root)?;
    let mut cmd = util::cargo_toolchain(root, TOOLCHAIN);
    cmd.args(["fuzz", "check"]).args(CHECK_FLAGS);
    util::lean_build(&mut cmd);
    println!("[fuzz] $ {}", util::display(&cmd));
    let started = Instant::now();
    util::run(&mut cmd)?;
    println!(
        "[fuzz] every target checked in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Fails if the nightly toolchain is missing; installs cargo-fuzz (from crates.io, like
/// cargo-deny and cargo-hack) if it is.
fn ensure_cargo_fuzz(root: &Path) -> Result<()> {
    if !util::succeeds(util::cargo_toolchain(root, TOOLCHAIN).arg("--version")) {
        return Err(Error::Check {
            check: "fuzz".into(),
            problems: vec![format!("the `{TOOLCHAIN}` toolchain is not installed")],
        });
    }
    if !util::succeeds(util::cargo_toolchain(root, TOOLCHAIN).args(["fuzz", "--version"])) {
        let mut install = util::cargo(root);
        install.args(["install", "--locked", "cargo-fuzz"]);
        println!(
            "[fuzz] cargo-fuzz is missing: $ {}",
            util::display(&install)
        );
        util::run(&mut install)?;
    }
    Ok(())
}

/// The committed seed directories of `target` that exist: `fuzz/seeds/<target>/` and any
/// in [`FIXTURE_SEEDS`].
fn seed_dirs(root: &Path, target: &str) -> Vec<PathBuf> {
    let own = root.join("fuzz").join("seeds").join(target);
    std::iter::once(own)
        .chain(
            FIXTURE_SEEDS
                .iter()
                .filter(|(t, _)| *t == target)
                .map(|(_, dir)| root.join(dir)),
        )
        .filter(|d| d.is_dir())
        .collect()
}

/// The files in `dir` (none if it does not exist).
fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// Picks the execution count out of libFuzzer's last lines:
/// `#123456\tDONE   cov: ...` and `stat::number_of_executed_units: 123456` (preferred),
/// and the coverage from the last status line (`#N\tpulse|NEW|REDUCE|DONE  cov: ...`).
fn parse_line(line: &str, stats: &mut Stats) {
    if let Some(rest) = line.strip_prefix("stat::number_of_executed_units:") {
        if let Ok(n) = rest.trim().parse() {
            stats.executions = Some(n);
        }
    } else if let Some(rest) = line.strip_prefix('#') {
        if let Some(at) = rest.find("cov: ") {
            let status = &rest[at..];
            let end = status.find(" exec/s").unwrap_or(status.len());
            stats.coverage = Some(status[..end].trim().to_owned());
        }
        let mut words = rest.split_whitespace();
        if let (Some(n), Some("DONE")) = (words.next(), words.next())
            && let Ok(n) = n.parse()
        {
            stats.executions.get_or_insert(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libfuzzer_final_lines() {
        let mut stats = Stats::default();
        parse_line(
            "#4096\tpulse  cov: 12 ft: 13 corp: 4/20b exec/s: 2048",
            &mut stats,
        );
        assert_eq!(stats.executions, None);
        parse_line(
            "#812345\tDONE   cov: 120 ft: 300 corp: 40/2Kb exec/s: 27078",
            &mut stats,
        );
        assert_eq!(stats.executions, Some(812_345));
        parse_line("stat::number_of_executed_units: 812346", &mut stats);
        assert_eq!(stats.executions, Some(812_346));
        parse_line("stat::peak_rss_mb: 61", &mut stats);
        assert_eq!(stats.executions, Some(812_346));
        assert_eq!(
            stats.coverage.as_deref(),
            Some("cov: 120 ft: 300 corp: 40/2Kb")
        );
    }

    #[test]
    fn coverage_is_the_last_status_line() {
        let mut stats = Stats::default();
        parse_line(
            "#2\tINITED cov: 40 ft: 41 corp: 1/1b exec/s: 0 rss: 30Mb",
            &mut stats,
        );
        parse_line(
            "#12\tNEW    cov: 52 ft: 60 corp: 3/9b lim: 4 exec/s: 0",
            &mut stats,
        );
        assert_eq!(
            stats.coverage.as_deref(),
            Some("cov: 52 ft: 60 corp: 3/9b lim: 4")
        );
        assert_eq!(stats.executions, None);
    }

    #[test]
    fn ignores_unrelated_lines() {
        let mut stats = Stats::default();
        for line in ["#", "#abc DONE", "   Compiling guideloom-io", "cov: 3"] {
            parse_line(line, &mut stats);
        }
        assert_eq!(stats, Stats::default());
    }
}
