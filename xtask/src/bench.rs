//! `cargo xtask bench`: the workspace's benchmarks with the test servers up, then one table,
//! then the Python benchmark beside the peers ([`crate::python::bench`]).

use std::path::Path;
use std::time::SystemTime;

use crate::bench_report;
use crate::error::{Error, Result};
use crate::servers::{self, Servers};
use crate::util;

/// Starts the servers, runs `cargo bench --workspace --features guideloom-io/uring
/// PASSTHROUGH...`, stops the servers and prints [`bench_report::report`]'s table of the
/// results written during this run, then the request-count tables benches wrote (into
/// [`bench_report::counts_dir`]).
///
/// `passthrough` goes to cargo as is: `--bench io`, `--bench publish`, or `-- pread` for a
/// criterion filter.
pub(crate) fn run(root: &Path, passthrough: &[String]) -> Result<()> {
    let target = util::target_dir(root)?;
    let started = SystemTime::now();
    // Remote benchmarks read from nginx and moto; they find them through the same variables
    // as the tests.
    let mut servers = Servers::start(root, &servers::default_kinds(), false)?;
    let mut cmd = util::cargo(root);
    // `uring`: guideloom-io's cold-read bench (benches/cold.rs) compares UringIo and its
    // O_DIRECT mode with pread; without the feature it prints "skipped".
    cmd.args(["bench", "--workspace", "--features", "guideloom-io/uring"])
        .args(passthrough);
    cmd.env(
        bench_report::COUNTS_DIR_ENV,
        bench_report::counts_dir(&target),
    );
    servers.apply(&mut cmd);
    println!("[bench] $ {}", util::display(&cmd));
    let benched = util::run(&mut cmd);
    let stopped = servers.stop();
    benched?;
    stopped?;
    let table = bench_report::report(&target, Some(started)).map_err(|msg| Error::Check {
        check: "bench report".into(),
        problems: vec![msg],
    })?;
    println!("[bench] summary ({})", target.join("criterion").display());
    print!("{table}");
    // The Python part: guideloom beside array_record, MDS and Lance, from Python.
    crate::python::bench(root)
}
