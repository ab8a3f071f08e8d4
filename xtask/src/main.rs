//! `cargo xtask`: the project's automation, in Rust so that it runs wherever cargo does.
//!
//! One subcommand per CI stage (the rust-analyzer pattern). `cargo xtask ci` is the one test
//! command; the others are for humans:
//!
//! ```text
//! cargo xtask ci [--skip STEP]...       fmt, tidy, clippy, features, doc, fuzz-check, model,
//!                                       servers-up, test, examples, browser, python,
//!                                       servers-down, deny
//!                                       (servers-up includes Ceph RGW unless GUIDELOOM_XTASK_CEPH=0
//!                                       and the rclone mount unless GUIDELOOM_XTASK_MOUNT=0)
//! cargo xtask tidy                      layering, manifest and module-cycle checks (also a #[test])
//! cargo xtask features                  each feature set compiles, lint-clean; feature-off tests
//! cargo xtask metrics [--root DIR] [--paths]  lines, public items, two-path items, cycles
//! cargo xtask servers up|down|status    nginx + moto (+ opt-in Ceph RGW, rclone mount) for tests
//! cargo xtask bench [ARGS]...           cargo bench --workspace ARGS, then one summary table
//! cargo xtask fuzz [--seconds N] [T]    cargo +nightly fuzz run for each target in fuzz/
//! cargo xtask model                     spin checks model/publication.pml in every configuration
//! cargo xtask browser                   `guideloom serve` in headless Chromium (Playwright)
//! cargo xtask wheel                     the Python package as an abi3 manylinux wheel
//! ```

mod bench;
mod bench_report;
mod browser;
mod ci;
mod error;
mod features;
mod fuzz;
mod http;
mod metrics;
mod model;
mod modgraph;
mod python;
mod servers;
mod tidy;
mod util;
mod venv;
mod wheel;

use std::process::ExitCode;

use crate::error::{Error, Result};

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  ci [--skip STEP]...            run every CI step in order, stop at the first failure
                                 steps: fmt tidy clippy features doc fuzz-check model
                                 servers-up test examples browser python servers-down
                                 deny
                                 (servers-up starts Ceph RGW and the rclone mount too;
                                 GUIDELOOM_XTASK_CEPH=0 / GUIDELOOM_XTASK_MOUNT=0: not)
  tidy                           check crate layering, manifests and module import cycles
  features                       for each library crate with features: check the library
                                 with no default features, the defaults and each feature
                                 alone; clippy -D warnings (all targets) with no default
                                 features and the defaults; tests with --no-default-features
  metrics [--root DIR] [--paths] per crate: lines of Rust, public items, items at two or more
                                 public paths, module import cycles (markdown; nightly rustdoc);
                                 --paths also lists every item at two or more paths
  servers up|down|status [S]...  start / stop / show the test servers: nginx, moto
                                 (and ceph, opt-in here: named, or GUIDELOOM_XTASK_CEPH=1;
                                 rclone, a FUSE mount of ceph's or moto's bucket: named,
                                 or GUIDELOOM_XTASK_MOUNT=1)
  bench [ARGS]...                servers up, `cargo bench --workspace ARGS`, servers down, table
  fuzz [--seconds N] [TARGET]    run each fuzz target (or TARGET) for N seconds (default 30)
  model                          check the publication protocol's model with spin, in every
                                 configuration (docs/publication.md, section The protocol model)
  browser                        `guideloom serve` in headless Chromium through Playwright
                                 (installs chromium, node and playwright-core when missing;
                                 screenshots in <target>/browser/)
  wheel                          build the Python package as one abi3 wheel (CPython >= 3.11,
                                 manylinux_2_17_x86_64, maturin --zig) into <target>/wheels/
                                 and check its tags with auditwheel; prints its path
  help                           print this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<()> {
    let root = util::repo_root();
    match Command::parse(args)? {
        Command::Help => {
            print!("{USAGE}");
            Ok(())
        }
        Command::Ci { skip } => ci::run(&root, &skip),
        Command::Tidy => {
            let report = tidy::run(&root)?;
            for line in report {
                println!("[tidy] {line}");
            }
            Ok(())
        }
        Command::Features => features::run(&root),
        Command::Metrics { dir, paths } => metrics::run(dir.as_deref().unwrap_or(&root), paths),
        Command::Servers { action, kinds } => servers::cli(&root, action, &kinds),
        Command::Bench { passthrough } => bench::run(&root, &passthrough),
        Command::Fuzz { seconds, target } => fuzz::run(&root, seconds, target.as_deref()),
        Command::Model => model::run(&root),
        Command::Browser => browser::run(&root, |_| {}),
        Command::Wheel => wheel::run(&root),
    }
}

/// A parsed command line.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Help,
    Ci {
        skip: Vec<String>,
    },
    Tidy,
    Model,
    Browser,
    Wheel,
    Features,
    Metrics {
        dir: Option<std::path::PathBuf>,
        /// List every item reachable by two or more paths.
        paths: bool,
    },
    Servers {
        action: servers::Action,
        kinds: Vec<servers::Kind>,
    },
    Bench {
        passthrough: Vec<String>,
    },
    Fuzz {
        seconds: u64,
        target: Option<String>,
    },
}

impl Command {
    fn parse(args: &[String]) -> Result<Command> {
        let usage = |msg: String| Error::Usage { msg };
        let Some((cmd, rest)) = args.split_first() else {
            return Ok(Command::Help);
        };
        match cmd.as_str() {
            "help" | "-h" | "--help" => Ok(Command::Help),
            "ci" => {
                let mut skip = Vec::new();
                let mut it = rest.iter();
                while let Some(arg) = it.next() {
                    match arg.as_str() {
                        "--skip" => {
                            let step = it
                                .next()
                                .ok_or_else(|| usage("--skip needs a step name".into()))?;
                            if !ci::STEPS.iter().any(|s| s.name == step) {
                                return Err(usage(format!(
                                    "unknown step `{step}`; steps: {}",
                                    ci::step_names()
                                )));
                            }
                            skip.push(step.clone());
                        }
                        other => return Err(usage(format!("ci: unexpected argument `{other}`"))),
                    }
                }
                Ok(Command::Ci { skip })
            }
            "model" => match rest {
                [] => Ok(Command::Model),
                _ => Err(usage("model takes no arguments".into())),
            },
            "browser" => match rest {
                [] => Ok(Command::Browser),
                _ => Err(usage("browser takes no arguments".into())),
            },
            "wheel" => match rest {
                [] => Ok(Command::Wheel),
                _ => Err(usage("wheel takes no arguments".into())),
            },
            "tidy" => match rest {
                [] => Ok(Command::Tidy),
                _ => Err(usage("tidy takes no arguments".into())),
            },
            "features" => match rest {
                [] => Ok(Command::Features),
                _ => Err(usage("features takes no arguments".into())),
            },
            "metrics" => {
                let bad = || usage("usage: cargo xtask metrics [--root DIR] [--paths]".into());
                let (mut dir, mut paths) = (None, false);
                let mut args = rest.iter();
                while let Some(arg) = args.next() {
                    match arg.as_str() {
                        "--root" if dir.is_none() => {
                            dir = Some(args.next().ok_or_else(bad)?.into());
                        }
                        "--paths" if !paths => paths = true,
                        _ => return Err(bad()),
                    }
                }
                Ok(Command::Metrics { dir, paths })
            }
            "servers" => {
                let Some((action, names)) = rest.split_first() else {
                    return Err(usage(
                        "usage: cargo xtask servers up|down|status [nginx|moto|ceph|rclone]..."
                            .into(),
                    ));
                };
                let action = servers::Action::parse(action)
                    .ok_or_else(|| usage(format!("servers: unknown action `{action}`")))?;
                let kinds = names
                    .iter()
                    .map(|name| {
                        servers::Kind::parse(name)
                            .ok_or_else(|| usage(format!("servers: unknown server `{name}`")))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Command::Servers { action, kinds })
            }
            "bench" => Ok(Command::Bench {
                passthrough: rest.to_vec(),
            }),
            "fuzz" => {
                let mut seconds = 30;
                let mut target = None;
                let mut it = rest.iter();
                while let Some(arg) = it.next() {
                    match arg.as_str() {
                        "--seconds" => {
                            let value = it
                                .next()
                                .ok_or_else(|| usage("--seconds needs a number".into()))?;
                            seconds = value.parse().map_err(|_| {
                                usage(format!("--seconds: `{value}` is not a whole number"))
                            })?;
                        }
                        flag if flag.starts_with('-') => {
                            return Err(usage(format!("fuzz: unknown option `{flag}`")));
                        }
                        name if target.is_none() => target = Some(name.to_owned()),
                        extra => {
                            return Err(usage(format!("fuzz: unexpected argument `{extra}`")));
                        }
                    }
                }
                Ok(Command::Fuzz { seconds, target })
            }
            other => Err(usage(format!("unknown command `{other}`\n\n{USAGE}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Command::parse(&args)
    }

    #[test]
    fn parses_every_command() {
        assert_eq!(parse(&[]).unwrap(), Command::Help);
        assert_eq!(parse(&["ci"]).unwrap(), Command::Ci { skip: vec![] });
        assert_eq!(
            parse(&["ci", "--skip", "deny", "--skip", "doc"]).unwrap(),
            Command::Ci {
                skip: vec!["deny".into(), "doc".into()]
            }
        );
        assert_eq!(parse(&["tidy"]).unwrap(), Command::Tidy);
        assert_eq!(parse(&["browser"]).unwrap(), Command::Browser);
        assert_eq!(parse(&["wheel"]).unwrap(), Command::Wheel);
        assert_eq!(parse(&["features"]).unwrap(), Command::Features);
        assert_eq!(
            parse(&["metrics"]).unwrap(),
            Command::Metrics {
                dir: None,
                paths: false
            }
        );
        assert_eq!(
            parse(&["metrics", "--root", "/tmp/before"]).unwrap(),
            Command::Metrics {
                dir: Some("/tmp/before".into()),
                paths: false
            }
        );
        assert_eq!(
            parse(&["metrics", "--paths", "--root", "/tmp/b"]).unwrap(),
            Command::Metrics {
                dir: Some("/tmp/b".into()),
                paths: true
            }
        );
        assert_eq!(
            parse(&["servers", "status"]).unwrap(),
            Command::Servers {
                action: servers::Action::Status,
                kinds: vec![]
            }
        );
        assert_eq!(
            parse(&["servers", "up", "ceph", "moto"]).unwrap(),
            Command::Servers {
                action: servers::Action::Up,
                kinds: vec![servers::Kind::Ceph, servers::Kind::Moto]
            }
        );
        assert_eq!(
            parse(&["bench", "--bench", "io", "--", "pread"]).unwrap(),
            Command::Bench {
                passthrough: vec!["--bench".into(), "io".into(), "--".into(), "pread".into()]
            }
        );
        assert_eq!(
            parse(&["fuzz", "--seconds", "5", "shard"]).unwrap(),
            Command::Fuzz {
                seconds: 5,
                target: Some("shard".into())
            }
        );
        assert_eq!(
            parse(&["fuzz"]).unwrap(),
            Command::Fuzz {
                seconds: 30,
                target: None
            }
        );
    }

    #[test]
    fn rejects_bad_arguments() {
        for bad in [
            &["ci", "--skip"][..],
            &["ci", "--skip", "nosuchstep"],
            &["ci", "extra"],
            &["tidy", "x"],
            &["browser", "x"],
            &["wheel", "--zig"],
            &["features", "--all"],
            &["metrics", "--root"],
            &["metrics", "/tmp"],
            &["metrics", "--paths", "--paths"],
            &["servers"],
            &["servers", "restart"],
            &["servers", "up", "minio"],
            &["fuzz", "--seconds", "ten"],
            &["fuzz", "a", "b"],
            &["fuzz", "--minutes", "1"],
            &["frobnicate"],
        ] {
            assert!(
                matches!(parse(bad), Err(Error::Usage { .. })),
                "{bad:?} should be a usage error"
            );
        }
    }
}
