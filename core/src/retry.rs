//! [`RetryPolicy`]: how the inbox worker and the outbox relay space their retries.

use std::time::Duration;

/// How failed rows are retried.
///
/// Exponential backoff with full jitter: the delay before attempt `n + 1` is a random
/// duration between zero and `min(cap, base * 2^(n-1))`. Without jitter, every row
/// that failed in one outage would retry in the same second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failures after which a row becomes a dead letter (default 5).
    pub max_attempts: u32,
    /// The first backoff ceiling (default 1 s).
    pub base: Duration,
    /// The largest backoff ceiling (default 1 h).
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// Returns the delay before the next attempt after `attempts` failures, drawing
    /// the jitter from `unit`, a number in `[0, 1)`.
    pub fn backoff(&self, attempts: u32, unit: f64) -> Duration {
        let exponent = attempts.saturating_sub(1).min(32);
        let ceiling = self
            .base
            .checked_mul(1u32 << exponent.min(31))
            .map_or(self.cap, |d| d.min(self.cap));
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }

    /// Returns the delay before the next attempt after `attempts` failures, with
    /// fresh jitter.
    pub fn next_delay(&self, attempts: u32) -> Duration {
        self.backoff(attempts, fastrand::f64())
    }

    /// Returns `true` when `attempts` failures make a row a dead letter.
    pub fn is_dead(&self, attempts: u32) -> bool {
        attempts >= self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_to_the_cap_with_full_jitter() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(1, 1.0), Duration::from_secs(1));
        assert_eq!(policy.backoff(2, 1.0), Duration::from_secs(2));
        assert_eq!(policy.backoff(5, 1.0), Duration::from_secs(16));
        assert_eq!(policy.backoff(40, 1.0), Duration::from_secs(3600));
        assert_eq!(policy.backoff(5, 0.0), Duration::ZERO);
        assert_eq!(policy.backoff(5, 0.5), Duration::from_secs(8));
    }

    #[test]
    fn the_fifth_failure_is_dead_by_default() {
        let policy = RetryPolicy::default();
        assert!(!policy.is_dead(4));
        assert!(policy.is_dead(5));
    }
}
