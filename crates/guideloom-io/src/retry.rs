//! The one retry policy of the workspace; documented on [`RetryPolicy`].

use std::time::Duration;

/// Default [`RetryPolicy::remote_request`] attempts, the first included: 4.
pub const REMOTE_REQUEST_ATTEMPTS: u32 = 4;
/// Default [`RetryPolicy::remote_request`] bound of the first wait: 100 ms.
pub const REMOTE_REQUEST_INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// Default [`RetryPolicy::remote_request`] bound of any wait: 5 s.
pub const REMOTE_REQUEST_MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The one retry policy of the workspace: bounded attempts with exponential backoff and full
/// jitter.
///
/// Every remote client of guideloom retries with a [`RetryPolicy`]: the HTTP backend
/// (`HttpOptions::with_retry`), the object-store clients of `guideloom-publish` (converted
/// into object_store's own `RetryConfig` by [`RetryPolicy::object_store_config`]), and the
/// optimistic-concurrency loops of `guideloom-publish` (annotation compare-and-swap, the
/// snapshot log's commit, re-reads of broken-off GETs and listings). Each user picks its
/// bounds from a named constructor; there is deliberately no `Default`, because the right
/// bounds for a request to a server ([`RetryPolicy::remote_request`]) and for a write racing
/// other writers ([`RetryPolicy::contended_update`]) differ by an order of magnitude.
///
/// ```
/// use std::time::Duration;
/// use guideloom_io::RetryPolicy;
///
/// let policy = RetryPolicy::new(5, Duration::from_millis(10), Duration::from_millis(100));
/// // The wait after failed attempt 3 is at most 10 ms × 2² = 40 ms (full jitter: 0..=40 ms).
/// assert!(policy.backoff(3) <= Duration::from_millis(40));
/// // Without jitter the wait is the bound itself.
/// assert_eq!(policy.with_jitter(false).backoff(3), Duration::from_millis(40));
/// assert!(policy.backoff(10) <= Duration::from_millis(100)); // capped by max_backoff
/// ```
///
/// # The policy
///
/// Bounded retries with exponential backoff and (by default) full jitter.
///
/// Attempt `n` (1-based) that failed is followed by a wait drawn uniformly from
/// `[0, min(max_backoff, initial_backoff × 2^(n-1))]` ("full jitter"), or by exactly that
/// bound when jitter is off; no attempt follows attempt [`max_attempts`](Self::max_attempts).
/// What is retried, and any deadline across the attempts, is the user's business (see each
/// client's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in total, the first included (at least 1; 1 = no retries).
    pub max_attempts: u32,
    /// Upper bound of the wait before the second attempt; doubled per retry.
    pub initial_backoff: Duration,
    /// Upper bound of any wait.
    pub max_backoff: Duration,
    /// Whether a wait is drawn uniformly from `[0, bound]` (`true`, the default of every
    /// constructor) or is the bound itself (`false`: deterministic, for tests and for
    /// callers that add their own spreading).
    pub jitter: bool,
}

impl RetryPolicy {
    /// A policy with `max_attempts` attempts (0 is taken as 1) and the given backoff bounds,
    /// with full jitter.
    pub const fn new(max_attempts: u32, initial_backoff: Duration, max_backoff: Duration) -> Self {
        RetryPolicy {
            max_attempts: if max_attempts == 0 { 1 } else { max_attempts },
            initial_backoff,
            max_backoff,
            jitter: true,
        }
    }

    /// One request to a server (an HTTP origin, an object store): 4 attempts, waits bounded
    /// by 100 ms doubling up to 5 s. The default of `HttpOptions`.
    pub const fn remote_request() -> Self {
        Self::new(
            REMOTE_REQUEST_ATTEMPTS,
            REMOTE_REQUEST_INITIAL_BACKOFF,
            REMOTE_REQUEST_MAX_BACKOFF,
        )
    }

    /// A read–modify–write racing other writers (a compare-and-swap loop, a sequence-number
    /// race): 64 attempts, waits bounded by 2 ms doubling up to 500 ms. Losing a race is
    /// cheap and expected, so it retries often and briefly. The default of guideloom-publish's
    /// annotation and commit loops.
    pub const fn contended_update() -> Self {
        Self::new(64, Duration::from_millis(2), Duration::from_millis(500))
    }

    /// No retries: one attempt.
    pub const fn none() -> Self {
        Self::new(1, Duration::ZERO, Duration::ZERO)
    }

    /// This policy with `max_attempts` attempts (0 is taken as 1), its backoff bounds kept:
    /// e.g. `RetryPolicy::remote_request().with_max_attempts(2)`.
    #[must_use]
    pub const fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = if max_attempts == 0 { 1 } else { max_attempts };
        self
    }

    /// This policy with jitter on or off.
    #[must_use]
    pub const fn with_jitter(mut self, jitter: bool) -> Self {
        self.jitter = jitter;
        self
    }

    /// Retries after the first attempt: `max_attempts - 1`.
    pub const fn max_retries(&self) -> u32 {
        self.max_attempts.saturating_sub(1)
    }

    /// The upper bound of the wait after failed attempt `attempt` (1-based):
    /// `min(max_backoff, initial_backoff × 2^(attempt-1))`.
    pub fn backoff_bound(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        self.initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff)
    }

    /// The wait after failed attempt `attempt` (1-based): uniformly random in
    /// `[0, backoff_bound(attempt)]` with jitter, the bound itself without.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let bound = self.backoff_bound(attempt);
        if !self.jitter {
            return bound;
        }
        let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(rand::random_range(0..=nanos))
    }

    /// Sleeps for [`backoff(attempt)`](Self::backoff) on the tokio timer (a zero wait yields
    /// to the scheduler instead, so a retry loop never starves other tasks). Needs a tokio
    /// runtime with the timer enabled.
    pub async fn sleep_backoff(&self, attempt: u32) {
        let wait = self.backoff(attempt);
        if wait.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(wait).await;
        }
    }

    /// object_store's `RetryConfig` for this policy: `max_attempts - 1` retries with the same
    /// backoff bounds (object_store draws its own jittered waits within them, doubling per
    /// retry), and no retry started `retry_timeout` after the first attempt. The one
    /// conversion used for every object_store client. (object_store's retry client comes with
    /// its cloud stores: features `s3`, `gcs`, `azure`.)
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
    #[cfg_attr(
        docsrs,
        doc(cfg(any(feature = "s3", feature = "gcs", feature = "azure")))
    )]
    pub fn object_store_config(&self, retry_timeout: Duration) -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: self.initial_backoff,
                max_backoff: self.max_backoff,
                base: 2.0,
            },
            max_retries: usize::try_from(self.max_retries()).unwrap_or(usize::MAX),
            retry_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_grows() {
        let p = RetryPolicy::new(5, Duration::from_millis(10), Duration::from_millis(35));
        for attempt in 1..=8 {
            let cap =
                Duration::from_millis(10 * (1 << (attempt - 1))).min(Duration::from_millis(35));
            assert_eq!(p.backoff_bound(attempt), cap);
            assert_eq!(p.with_jitter(false).backoff(attempt), cap);
            for _ in 0..50 {
                assert!(p.backoff(attempt) <= cap);
            }
        }
        assert_eq!(RetryPolicy::none().backoff(3), Duration::ZERO);
        assert_eq!(
            RetryPolicy::new(0, Duration::ZERO, Duration::ZERO).max_attempts,
            1
        );
        assert_eq!(p.with_max_attempts(0).max_attempts, 1);
        assert_eq!(p.with_max_attempts(9).backoff_bound(2), p.backoff_bound(2));
        // Huge attempt numbers saturate at the cap instead of overflowing.
        assert_eq!(p.backoff_bound(u32::MAX), Duration::from_millis(35));
    }

    #[test]
    fn jitter_spreads_the_waits() {
        let p = RetryPolicy::new(2, Duration::from_secs(1), Duration::from_secs(1));
        let waits: std::collections::HashSet<Duration> = (0..32).map(|_| p.backoff(1)).collect();
        assert!(waits.len() > 16, "{} distinct waits of 32", waits.len());
    }

    #[test]
    fn named_policies_keep_their_users_bounds() {
        let r = RetryPolicy::remote_request();
        assert_eq!(
            (r.max_attempts, r.initial_backoff, r.max_backoff, r.jitter),
            (4, Duration::from_millis(100), Duration::from_secs(5), true)
        );
        let c = RetryPolicy::contended_update();
        assert_eq!(
            (
                c.max_attempts,
                c.initial_backoff,
                c.max_backoff,
                c.max_retries()
            ),
            (64, Duration::from_millis(2), Duration::from_millis(500), 63)
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn sleep_backoff_waits_the_backoff() {
        let p = RetryPolicy::new(3, Duration::from_millis(40), Duration::from_secs(1))
            .with_jitter(false);
        let start = std::time::Instant::now();
        p.sleep_backoff(2).await;
        let slept = start.elapsed();
        assert!(slept >= Duration::from_millis(80), "{slept:?}");
        let start = std::time::Instant::now();
        RetryPolicy::none().sleep_backoff(1).await;
        let yielded = start.elapsed();
        assert!(
            yielded < Duration::from_millis(80),
            "a zero wait only yields: {yielded:?}"
        );
    }

    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
    #[test]
    fn object_store_config_carries_the_bounds() {
        let p = RetryPolicy::new(5, Duration::from_millis(100), Duration::from_secs(5));
        let c = p.object_store_config(Duration::from_secs(60));
        assert_eq!(c.max_retries, 4);
        assert_eq!(c.backoff.init_backoff, Duration::from_millis(100));
        assert_eq!(c.backoff.max_backoff, Duration::from_secs(5));
        assert_eq!(c.retry_timeout, Duration::from_secs(60));
    }
}
