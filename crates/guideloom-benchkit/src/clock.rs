//! The measurement clock: wall time, or the whole process's CPU time.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::measurement::{Measurement, ValueFormatter, WallTime};

/// Environment variable choosing the [`Clock`]: `wall` (the default) or `cpu`.
const CLOCK_ENV: &str = "GUIDELOOM_BENCH_CLOCK";

/// What a bench's time means: wall time (the default), or the CPU time of the whole process
/// (all threads, user + system) with `GUIDELOOM_BENCH_CLOCK=cpu`.
///
/// The CPU clock keeps ratios meaningful on a machine busy with other work (time spent
/// descheduled is not counted); it also leaves out time a thread waits for another, so for
/// async readers it gives the CPU cost of the hand-off, not its latency. Values are formatted
/// as criterion's wall time (seconds), so reports read the same under either clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Elapsed real time.
    Wall,
    /// `CLOCK_PROCESS_CPUTIME_ID` (unix only).
    ProcessCpu,
}

static WALL: WallTime = WallTime;
static EPOCH: OnceLock<Instant> = OnceLock::new();

impl Clock {
    /// The clock named by `value` (the content of `GUIDELOOM_BENCH_CLOCK`; `None` when unset).
    ///
    /// ```
    /// use guideloom_benchkit::Clock;
    /// assert_eq!(Clock::parse(None), Ok(Clock::Wall));
    /// assert_eq!(Clock::parse(Some("cpu")), Ok(Clock::ProcessCpu));
    /// assert!(Clock::parse(Some("gpu")).is_err());
    /// ```
    pub fn parse(value: Option<&str>) -> Result<Clock, String> {
        match value {
            Some("cpu") => Ok(Clock::ProcessCpu),
            Some("wall") | None => Ok(Clock::Wall),
            Some(other) => Err(format!("{CLOCK_ENV}={other:?}: expected `wall` or `cpu`")),
        }
    }

    /// The clock of `GUIDELOOM_BENCH_CLOCK`.
    ///
    /// # Panics
    /// If the variable holds anything but `wall` or `cpu`: a bench must not silently measure
    /// with a clock nobody asked for.
    pub fn from_env() -> Clock {
        let value = std::env::var(CLOCK_ENV).ok();
        Clock::parse(value.as_deref()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn now(self) -> Duration {
        match self {
            Clock::Wall => EPOCH.get_or_init(Instant::now).elapsed(),
            Clock::ProcessCpu => process_cpu(),
        }
    }
}

#[cfg(unix)]
fn process_cpu() -> Duration {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .expect("process CPU clock")
        .into()
}

#[cfg(not(unix))]
fn process_cpu() -> Duration {
    panic!("{CLOCK_ENV}=cpu needs a unix process CPU clock")
}

impl Measurement for Clock {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        self.now()
    }

    fn end(&self, start: Duration) -> Duration {
        self.now().saturating_sub(start)
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        WALL.to_f64(value)
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_clocks_and_rejects_others() {
        assert_eq!(Clock::parse(Some("wall")), Ok(Clock::Wall));
        assert_eq!(Clock::parse(None), Ok(Clock::Wall));
        assert_eq!(Clock::parse(Some("cpu")), Ok(Clock::ProcessCpu));
        let err = Clock::parse(Some("CPU")).unwrap_err();
        assert!(
            err.contains("GUIDELOOM_BENCH_CLOCK") && err.contains("\"CPU\""),
            "{err}"
        );
        assert!(Clock::parse(Some("")).is_err());
    }

    #[test]
    fn measurement_arithmetic() {
        let c = Clock::Wall;
        let a = Duration::from_millis(3);
        let b = Duration::from_millis(4);
        assert_eq!(c.add(&a, &b), Duration::from_millis(7));
        assert_eq!(c.zero(), Duration::ZERO);
        assert_eq!(
            c.to_f64(&Duration::from_nanos(1500)),
            WALL.to_f64(&Duration::from_nanos(1500))
        );
        // An end before its start (never expected) saturates instead of panicking.
        assert_eq!(c.end(c.start() + Duration::from_secs(3600)), Duration::ZERO);
    }

    #[cfg(unix)]
    #[test]
    fn cpu_clock_does_not_go_backwards() {
        let c = Clock::ProcessCpu;
        let start = c.start();
        let mut x = 0u64;
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::hint::black_box(x);
        assert!(c.now() >= start);
    }
}
