//! The bench harness shared by guideloom's criterion benches (`crates/*/benches/`).
//!
//! Internal and dev-only (`publish = false`): the benches use it as a dev-dependency, and it
//! depends on no guideloom crate, so any layer's benches may use it without bending the layer
//! order (`cargo xtask tidy` checks both).
//!
//! What lives here is what more than one bench needs, so that every bench measures the same
//! way:
//! - [`settings`]: criterion settings from the `GUIDELOOM_BENCH_*` knobs, and the [`Clock`]
//!   chosen by `GUIDELOOM_BENCH_CLOCK` (`wall` or `cpu`);
//! - [`touch`], [`touch_all`], [`pread`], [`warm_file`], [`warm_dir`], [`files`], [`BenchDir`],
//!   [`minor_faults`]: the shared
//!   consumer, the raw-`pread` ceiling read, page-cache warming and where bench files go;
//! - [`write_random_file`], [`random_bytes`], [`record_range`], [`random_records`],
//!   [`random_indices`]: seeded fixtures and the random sequences benches cycle through;
//! - [`write_counts`]: request-count tables for `cargo xtask bench`'s report;
//! - [`multi_thread_runtime`]: the 2-worker tokio runtime of the async benches.

mod clock;
mod counts;
mod files;
mod fixture;

pub use clock::Clock;
pub use counts::{COUNTS_DIR_ENV, write_counts, write_counts_to};
#[cfg(unix)]
pub use files::pread;
pub use files::{
    BenchDir, CHUNK, PAGE, files, minor_faults, touch, touch_all, warm_dir, warm_file,
};
pub use fixture::{random_bytes, random_indices, random_records, record_range, write_random_file};

use std::time::Duration;

use criterion::Criterion;
use criterion::measurement::Measurement;

/// `n` as an index; bench files are far below `usize::MAX` on every target we run.
///
/// ```
/// assert_eq!(guideloom_benchkit::us(4096), 4096);
/// ```
pub fn us(n: u64) -> usize {
    usize::try_from(n).expect("size fits in usize")
}

/// A positive integer from `value`, else `default` (unset, unparsable or zero).
fn positive_u64(value: Option<&str>, default: u64) -> u64 {
    value
        .and_then(|v| v.parse().ok())
        .filter(|v: &u64| *v > 0)
        .unwrap_or(default)
}

/// A finite positive number from `value`, else `default`.
fn positive_f64(value: Option<&str>, default: f64) -> f64 {
    value
        .and_then(|v| v.parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .unwrap_or(default)
}

/// The positive integer in environment variable `name`, or `default` when it is unset,
/// not a number or zero.
pub fn env_u64(name: &str, default: u64) -> u64 {
    positive_u64(std::env::var(name).ok().as_deref(), default)
}

/// The finite positive number in environment variable `name`, or `default`.
pub fn env_f64(name: &str, default: f64) -> f64 {
    positive_f64(std::env::var(name).ok().as_deref(), default)
}

/// Applies the shared knobs to `c`: `GUIDELOOM_BENCH_SAMPLES` (20, at least 10),
/// `GUIDELOOM_BENCH_MEASURE_SECS` (1.5) and `GUIDELOOM_BENCH_WARMUP_SECS` (0.3), sized for a
/// 2-core machine. Criterion's own flags (`configure_from_args`) still override them.
pub fn settings<M: Measurement>(c: Criterion<M>) -> Criterion<M> {
    c.sample_size(us(env_u64("GUIDELOOM_BENCH_SAMPLES", 20).max(10)))
        .measurement_time(Duration::from_secs_f64(env_f64(
            "GUIDELOOM_BENCH_MEASURE_SECS",
            1.5,
        )))
        .warm_up_time(Duration::from_secs_f64(env_f64(
            "GUIDELOOM_BENCH_WARMUP_SECS",
            0.3,
        )))
}

/// Criterion measuring with the [`Clock`] of `GUIDELOOM_BENCH_CLOCK`, with the shared
/// [`settings`]; for benches whose ratios should survive a busy machine.
///
/// # Panics
/// If `GUIDELOOM_BENCH_CLOCK` is set to anything but `wall` or `cpu`.
pub fn config() -> Criterion<Clock> {
    settings(Criterion::default().with_measurement(Clock::from_env()))
}

/// Wall-clock criterion with the shared [`settings`]; for benches that mostly wait (network,
/// fsync), where CPU time would hide the cost.
pub fn wall_config() -> Criterion {
    settings(Criterion::default())
}

/// The runtime of the benches that drive async readers over the network or a thread pool:
/// multi-threaded with 2 workers (the bench machines have 2 cores), every driver enabled.
///
/// # Panics
/// If the runtime cannot be built.
pub fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_numbers_fall_back_to_the_default() {
        assert_eq!(positive_u64(Some("64"), 7), 64);
        assert_eq!(positive_u64(Some("0"), 7), 7);
        assert_eq!(positive_u64(Some("-3"), 7), 7);
        assert_eq!(positive_u64(Some("lots"), 7), 7);
        assert_eq!(positive_u64(None, 7), 7);
        assert_eq!(positive_f64(Some("0.5"), 1.5), 0.5);
        assert_eq!(positive_f64(Some("0"), 1.5), 1.5);
        assert_eq!(positive_f64(Some("inf"), 1.5), 1.5);
        assert_eq!(positive_f64(Some("NaN"), 1.5), 1.5);
        assert_eq!(positive_f64(None, 1.5), 1.5);
    }

    #[test]
    fn runtime_runs_spawned_tasks_on_its_workers() {
        let rt = multi_thread_runtime();
        let caller = std::thread::current().id();
        let worker = rt.block_on(async {
            tokio::spawn(async { std::thread::current().id() })
                .await
                .unwrap()
        });
        assert_ne!(worker, caller, "a spawned task runs on a worker thread");
    }

    #[test]
    fn unset_knobs_give_the_defaults() {
        assert_eq!(env_u64("GUIDELOOM_BENCHKIT_TEST_UNSET_KNOB", 20), 20);
        assert_eq!(env_f64("GUIDELOOM_BENCHKIT_TEST_UNSET_KNOB", 0.3), 0.3);
    }
}
