//! `cargo xtask model`: the publication protocol's model (`model/publication.pml`) checked
//! exhaustively by spin, in every configuration, with a verdict.
//!
//! Each configuration is a set of `-D` flags (docs/publication.md, "The protocol model"):
//! a scenario (three identical requests; two identical and one other; three appenders of two
//! ids; two publishers and two annotators), on a store with atomic writes (S3, a local
//! directory) and without (a declared mount). The protocol as built must hold every invariant
//! in every reachable state: `errors: 0` over a complete search. The resume step as 0632596
//! had it (`BUGGY_RESUME`) must be caught: spin must report a violation, or the model has
//! lost its power to find the bug it was written for.
//!
//! The garbage collector (issue 28; scenarios 5-7, atomic stores only) runs one collection
//! beside publishers and an annotator, every process crashing at every write: a full publisher
//! and an appender of two new ids; a publisher and an annotator of the snapshot the collector
//! would expire; two identical publishers. No object of a kept snapshot, of a committed
//! claim or of a catalog entry may ever be deleted. Seven `BUGGY_GC_*` variants each leave out
//! one step of the protocol (the collector's recheck, the publisher's check after claiming and
//! its listing before verifying, the claim in that check, the annotator's refusal, the claim
//! grace, the recheck's entries committed since the plan), and spin must catch every one: each
//! step is needed.
//!
//! Spin (Debian `spin`) and gcc are installed with apt when missing (as root). Two
//! configurations run at a time; each gets its own directory under the target directory,
//! at most 8 GB of state memory (`-DMEMLIM`) and lossless state compression (`-DCOLLAPSE`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::util;

/// The model, relative to the repository root.
const MODEL: &str = "model/publication.pml";

/// What a configuration must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Every invariant holds over the whole state space.
    Holds,
    /// spin finds a violation (a known-bad variant).
    Violation,
}

/// One run of the checker.
#[derive(Debug)]
struct Config {
    name: &'static str,
    flags: &'static [&'static str],
    expect: Expect,
}

/// Every configuration, longest first (they are shared between two workers in this order).
const CONFIGS: &[Config] = &[
    Config {
        name: "gc + full + append",
        flags: &["-DSCENARIO=5"],
        expect: Expect::Holds,
    },
    Config {
        name: "identical, mount",
        flags: &["-DSCENARIO=1", "-DNONATOMIC"],
        expect: Expect::Holds,
    },
    Config {
        name: "annotators, mount",
        flags: &["-DSCENARIO=4", "-DNONATOMIC"],
        expect: Expect::Holds,
    },
    Config {
        name: "appenders",
        flags: &["-DSCENARIO=3"],
        expect: Expect::Holds,
    },
    Config {
        name: "gc + identical",
        flags: &["-DSCENARIO=7"],
        expect: Expect::Holds,
    },
    Config {
        name: "annotators",
        flags: &["-DSCENARIO=4"],
        expect: Expect::Holds,
    },
    Config {
        name: "gc + publisher + annotator",
        flags: &["-DSCENARIO=6"],
        expect: Expect::Holds,
    },
    Config {
        name: "identical + other, mount",
        flags: &["-DSCENARIO=2", "-DNONATOMIC"],
        expect: Expect::Holds,
    },
    Config {
        name: "identical",
        flags: &["-DSCENARIO=1"],
        expect: Expect::Holds,
    },
    // One attempt each: with retries this is 1.4e8 states and 8 GB; its third publisher is
    // already the first's request running again.
    Config {
        name: "appenders, mount, no retry",
        flags: &["-DSCENARIO=3", "-DNONATOMIC", "-DMAX_ATTEMPTS=1"],
        expect: Expect::Holds,
    },
    Config {
        name: "identical + other",
        flags: &["-DSCENARIO=2"],
        expect: Expect::Holds,
    },
    Config {
        name: "gc, no claim grace",
        flags: &["-DSCENARIO=6", "-DBUGGY_GC_NO_GRACE"],
        expect: Expect::Violation,
    },
    Config {
        name: "gc, check of shards but not claim",
        flags: &["-DSCENARIO=6", "-DBUGGY_GC_CHECK_SHARDS"],
        expect: Expect::Violation,
    },
    Config {
        name: "gc, annotator ignores collection",
        flags: &["-DSCENARIO=6", "-DBUGGY_GC_ANNOT"],
        expect: Expect::Violation,
    },
    Config {
        name: "gc, recheck of claims only",
        flags: &["-DSCENARIO=5", "-DBUGGY_GC_RECHECK_CLAIMS_ONLY"],
        expect: Expect::Violation,
    },
    Config {
        name: "gc, no recheck",
        flags: &["-DSCENARIO=5", "-DBUGGY_GC_NO_RECHECK"],
        expect: Expect::Violation,
    },
    Config {
        name: "gc, no check after claim",
        flags: &["-DSCENARIO=5", "-DBUGGY_GC_NO_CHECK"],
        expect: Expect::Violation,
    },
    Config {
        name: "gc, no listing before verify",
        flags: &["-DSCENARIO=5", "-DBUGGY_GC_NO_SNAPSHOT"],
        expect: Expect::Violation,
    },
    Config {
        name: "identical, 0632596 resume",
        flags: &["-DSCENARIO=1", "-DBUGGY_RESUME"],
        expect: Expect::Violation,
    },
    Config {
        name: "identical + other, 0632596 resume",
        flags: &["-DSCENARIO=2", "-DBUGGY_RESUME"],
        expect: Expect::Violation,
    },
    Config {
        name: "appenders, 0632596 resume",
        flags: &["-DSCENARIO=3", "-DBUGGY_RESUME"],
        expect: Expect::Violation,
    },
];

/// What one search reported.
#[derive(Debug, Default, Clone, PartialEq)]
struct Outcome {
    errors: Option<u64>,
    states: Option<f64>,
    depth: Option<u64>,
    /// The search stopped early (depth or memory limit): not exhaustive.
    incomplete: bool,
    /// The first `pan:` line (what was violated, if anything).
    first_line: String,
}

/// Reads pan's report.
fn parse(out: &str) -> Outcome {
    let mut o = Outcome::default();
    for line in out.lines() {
        let line = line.trim();
        if let Some(rest) = line.split("errors: ").nth(1) {
            o.errors = rest.trim().parse().ok();
        }
        if let Some(rest) = line.split("depth reached ").nth(1) {
            o.depth = rest.split(',').next().and_then(|d| d.trim().parse().ok());
        }
        if line.ends_with("states, stored") {
            o.states = line.split_whitespace().next().and_then(|n| n.parse().ok());
        }
        if line.contains("max search depth too small") || line.contains("out of memory") {
            o.incomplete = true;
        }
        if o.first_line.is_empty() && line.starts_with("pan:") {
            o.first_line = line.to_owned();
        }
    }
    o
}

/// Installs spin with apt when it is missing.
fn ensure_spin() -> Result<()> {
    if util::which("spin").is_some() && util::which("gcc").is_some() {
        return Ok(());
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(Error::Check {
            check: "model".into(),
            problems: vec![
                "spin (or gcc) is not installed, and installing it needs root: \
                 `sudo apt-get install -y --no-install-recommends spin gcc`"
                    .into(),
            ],
        });
    }
    println!("[model] spin not found");
    let started = Instant::now();
    util::apt_install("model", &["spin", "gcc"])?;
    println!(
        "[model] spin installed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A configuration's report and how long its search took.
type Checked = Result<(Outcome, Duration)>;

/// Generates, compiles and runs the verifier of one configuration in `dir`.
fn check(root: &Path, dir: &Path, config: &Config) -> Checked {
    util::mkdir(dir)?;
    let model = dir.join("publication.pml");
    std::fs::copy(root.join(MODEL), &model).map_err(|e| Error::io("copy", &model, e))?;
    util::capture(
        Command::new("spin")
            .current_dir(dir)
            .arg("-a")
            .args(config.flags)
            .arg("publication.pml"),
    )?;
    util::capture(Command::new("gcc").current_dir(dir).args([
        "-O2",
        "-w",
        "-DSAFETY",
        "-DCOLLAPSE",
        "-DMEMLIM=8000",
        "-o",
        "pan",
        "pan.c",
    ]))?;
    let started = Instant::now();
    // -m: the depth bound (a search that reaches it says so and is refused below);
    // -w24: the hash table's first size (it grows as needed).
    let out = Command::new(dir.join("pan"))
        .current_dir(dir)
        .args(["-m1000000", "-w24"])
        .output()
        .map_err(|source| Error::Spawn {
            program: "pan".into(),
            source,
        })?;
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    util::write(&dir.join("pan.out"), &text)?;
    Ok((parse(&text), took))
}

/// Whether `outcome` is what `config` must show; the problem otherwise.
fn verdict(config: &Config, outcome: &Outcome) -> std::result::Result<(), String> {
    match (config.expect, outcome.errors) {
        (_, None) => Err(format!("{}: pan printed no error count", config.name)),
        (Expect::Holds, Some(0)) if outcome.incomplete => Err(format!(
            "{}: the search did not complete (depth or memory limit)",
            config.name
        )),
        (Expect::Holds, Some(0)) => Ok(()),
        (Expect::Holds, Some(_)) => Err(format!(
            "{}: an invariant is violated ({}); replay with `spin -t -p -g {} publication.pml` \
             in its directory",
            config.name,
            outcome.first_line,
            config.flags.join(" ")
        )),
        (Expect::Violation, Some(0)) => Err(format!(
            "{}: spin no longer finds this known-bad variant's violation (`{}`): the model lost \
             its power",
            config.name,
            config.flags.join(" ")
        )),
        (Expect::Violation, Some(_)) => Ok(()),
    }
}

/// Checks every configuration (two at a time) and prints a table.
pub(crate) fn run(root: &Path) -> Result<()> {
    ensure_spin()?;
    let base = util::target_dir(root)
        .unwrap_or_else(|_| root.join("target"))
        .join("xtask-model");
    let started = Instant::now();
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<(usize, Checked)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(config) = CONFIGS.get(i) else { break };
                    let dir: PathBuf = base.join(format!("config-{i}"));
                    let result = check(root, &dir, config);
                    if let Ok((o, took)) = &result {
                        println!(
                            "[model] {:<36} errors {} · {} states · {:.1}s",
                            config.name,
                            o.errors.map_or("?".into(), |e| e.to_string()),
                            o.states.map_or("?".into(), |s| format!("{s:.0}")),
                            took.as_secs_f64()
                        );
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let mut problems = Vec::new();
    let mut total_states = 0.0;
    println!("[model] | configuration | flags | must | errors | states | depth | seconds |");
    println!("[model] |---|---|---|---:|---:|---:|---:|");
    for (i, result) in results {
        let config = &CONFIGS[i];
        match result {
            Ok((outcome, took)) => {
                total_states += outcome.states.unwrap_or(0.0);
                println!(
                    "[model] | {} | `{}` | {} | {} | {} | {} | {:.1} |",
                    config.name,
                    config.flags.join(" "),
                    match config.expect {
                        Expect::Holds => "hold",
                        Expect::Violation => "fail",
                    },
                    outcome.errors.map_or("?".into(), |e| e.to_string()),
                    outcome.states.map_or("?".into(), |s| format!("{s:.0}")),
                    outcome.depth.map_or("?".into(), |d| d.to_string()),
                    took.as_secs_f64()
                );
                if let Err(p) = verdict(config, &outcome) {
                    problems.push(p);
                }
            }
            Err(e) => problems.push(format!("{}: {e}", config.name)),
        }
    }
    println!(
        "[model] {} configurations, {total_states:.0} states in all, {:.1}s wall",
        CONFIGS.len(),
        started.elapsed().as_secs_f64()
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Check {
            check: "model".into(),
            problems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLDS: &str = "\
(Spin Version 6.5.2 -- 6 December 2019)
State-vector 160 byte, depth reached 141, errors: 0
  5468371 states, stored
pan: elapsed time 3.74 seconds
";
    const VIOLATED: &str = "\
pan:1: assertion violated 0 (at depth 99)
pan: wrote publication.pml.trail
State-vector 160 byte, depth reached 99, errors: 1
   268474 states, stored
";

    #[test]
    fn reads_pan_reports_and_judges_them() {
        let holds = parse(HOLDS);
        assert_eq!(
            (holds.errors, holds.depth, holds.states),
            (Some(0), Some(141), Some(5_468_371.0))
        );
        let violated = parse(VIOLATED);
        assert_eq!(violated.errors, Some(1));
        assert!(violated.first_line.contains("assertion violated"));
        let [good, .., bad] = CONFIGS else {
            unreachable!()
        };
        assert!(verdict(good, &holds).is_ok());
        assert!(verdict(good, &violated).is_err());
        assert!(verdict(bad, &violated).is_ok());
        assert!(verdict(bad, &holds).is_err(), "a bug no longer found fails");
        let cut = parse(&format!("{HOLDS}error: max search depth too small\n"));
        assert!(verdict(good, &cut).is_err(), "an incomplete search fails");
        assert!(verdict(good, &Outcome::default()).is_err());
    }
}
