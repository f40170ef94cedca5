//! The delay between a trial's attempts after an infrastructure failure.
//!
//! Attempt `n` (1-based) failed at `T`; attempt `n + 1` may start at `T + min(cap, base × 2^(n-1))`:
//! `base`, `2·base`, `4·base`, … up to `cap`. There is no jitter, so the retry time is a function
//! of the observed failure alone and a restarted controller computes the same one.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// Exponential backoff between attempts, from the time the previous attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first attempt fails.
    pub base: Duration,
    /// Longest delay, however many attempts failed.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 10 s doubling up to 6 min, as the Kubernetes Job controller backs off failed pods.
    fn default() -> Self {
        Backoff { base: Duration::from_secs(10), cap: Duration::from_secs(360) }
    }
}

impl Backoff {
    /// The delay after attempt `failed_attempt` (1-based) failed: `min(cap, base × 2^(n-1))`.
    /// Attempt 0 (never numbered so, but harmless) is treated as attempt 1.
    pub fn delay(&self, failed_attempt: u32) -> Duration {
        let mut delay = self.base;
        for _ in 1..failed_attempt {
            if delay >= self.cap || delay.is_zero() {
                break;
            }
            delay = delay.checked_mul(2).unwrap_or(Duration::MAX);
        }
        delay.min(self.cap)
    }

    /// When the attempt after `failed_attempt`, which failed at `failed_at`, may start.
    pub fn retry_at(&self, failed_at: DateTime<Utc>, failed_attempt: u32) -> DateTime<Utc> {
        let delay = chrono::Duration::from_std(self.delay(failed_attempt)).unwrap_or(chrono::Duration::MAX);
        failed_at.checked_add_signed(delay).unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_doubles_from_base_up_to_cap() {
        let backoff = Backoff { base: Duration::from_secs(10), cap: Duration::from_secs(60) };
        let cases = [(0, 10), (1, 10), (2, 20), (3, 40), (4, 60), (5, 60), (64, 60), (u32::MAX, 60)];
        for (attempt, secs) in cases {
            assert_eq!(backoff.delay(attempt), Duration::from_secs(secs), "attempt {attempt}");
        }
    }

    #[test]
    fn large_base_and_cap_do_not_overflow() {
        let backoff = Backoff { base: Duration::from_secs(u64::MAX / 2), cap: Duration::MAX };
        assert_eq!(backoff.delay(1), Duration::from_secs(u64::MAX / 2));
        assert_eq!(backoff.delay(2), Duration::from_secs(u64::MAX - 1));
        assert_eq!(backoff.delay(3), Duration::MAX);
        assert_eq!(backoff.delay(40), Duration::MAX);
        let at = DateTime::from_timestamp(1_750_000_000, 0).unwrap();
        assert_eq!(backoff.retry_at(at, 40), DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn retry_at_is_failure_time_plus_delay() {
        let backoff = Backoff { base: Duration::from_millis(1500), cap: Duration::from_secs(3600) };
        let at = DateTime::from_timestamp(1_750_000_000, 0).unwrap();
        assert_eq!(backoff.retry_at(at, 1), at + chrono::Duration::milliseconds(1500));
        assert_eq!(backoff.retry_at(at, 3), at + chrono::Duration::milliseconds(6000));
    }

    #[test]
    fn default_is_ten_seconds_capped_at_six_minutes() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(1), Duration::from_secs(10));
        assert_eq!(backoff.delay(6), Duration::from_secs(320));
        assert_eq!(backoff.delay(7), Duration::from_secs(360));
    }
}
