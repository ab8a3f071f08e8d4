//! `cargo xtask fuzz`: every cargo-fuzz target in `fuzz/` for a fixed time, with a verdict.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::util;

/// cargo-fuzz needs nightly (sanitizer flags); everything else here uses the pinned toolchain.
const TOOLCHAIN: &str = "nightly";

/// What one fuzzing run left behind.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stats {
    /// Inputs executed, from libFuzzer's final stats (`None` if it printed none).
    executions: Option<u64>,
}

/// Runs `target` (or every target) for `seconds` each; fails on a crash artifact or exit.
pub(crate) fn run(root: &Path, seconds: u64, target: Option<&str>) -> Result<()> {
    let fuzz_dir = root.join("fuzz");
    if !fuzz_dir.join("Cargo.toml").is_file() {
        println!("[fuzz] fuzz/ does not exist yet: nothing to fuzz");
        return Ok(());
    }
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
    let mut problems = Vec::new();
    for target in targets {
        let artifacts = fuzz_dir.join("artifacts").join(target);
        let before = listing(&artifacts);
        let started = Instant::now();
        let mut cmd = util::cargo_toolchain(root, TOOLCHAIN);
        cmd.args(["fuzz", "run", target, "--"])
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
            "[fuzz] {target}: {executions} executions in {:.0}s, {} finding(s), {status}",
            started.elapsed().as_secs_f64(),
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

/// The files in `dir` (none if it does not exist).
fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// Picks the execution count out of libFuzzer's last lines:
/// `#123456\tDONE   cov: ...` and `stat::number_of_executed_units: 123456` (preferred).
fn parse_line(line: &str, stats: &mut Stats) {
    if let Some(rest) = line.strip_prefix("stat::number_of_executed_units:") {
        if let Ok(n) = rest.trim().parse() {
            stats.executions = Some(n);
        }
    } else if let Some(rest) = line.strip_prefix('#') {
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
    }

    #[test]
    fn ignores_unrelated_lines() {
        let mut stats = Stats::default();
        for line in [
            "#",
            "#abc DONE",
            "   Compiling guideloom-io",
            "#12 NEW cov: 3",
        ] {
            parse_line(line, &mut stats);
        }
        assert_eq!(stats, Stats::default());
    }
}
