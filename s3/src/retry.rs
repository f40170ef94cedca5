//! Exponential backoff with a cap, for the store's calls and the uploader's patience.

use std::future::Future;
use std::time::Duration;

use rand::Rng;

/// How often, and how patiently, a store call is tried again after a transient failure
/// (a connect error, a timeout, a 5xx, throttling).
///
/// The wait before retry `n` (1 for the first retry) is drawn from
/// `[cap / 2, cap]` with `cap = min(max_delay, base_delay * 2^(n-1))`: exponential, capped, and
/// jittered so that many workers hitting the same outage do not retry in lockstep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included; 0 is taken as 1.
    pub attempts: u32,
    /// The cap of the first wait.
    pub base_delay: Duration,
    /// The cap of every wait.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Six tries over about six seconds at most: enough for a dropped connection or a brief
    /// throttle. Longer outages are the [`Uploader`](crate::Uploader)'s to wait out.
    fn default() -> Self {
        RetryPolicy { attempts: 6, base_delay: Duration::from_millis(200), max_delay: Duration::from_secs(5) }
    }
}

impl RetryPolicy {
    /// One try, no retry.
    pub const fn none() -> Self {
        RetryPolicy { attempts: 1, base_delay: Duration::ZERO, max_delay: Duration::ZERO }
    }

    /// The longest wait before retry `retry` (1 for the first): `base_delay * 2^(retry-1)`,
    /// capped at `max_delay`.
    pub fn max_backoff(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        self.base_delay.saturating_mul(1u32 << doublings).min(self.max_delay)
    }

    /// The wait before retry `retry`: a random duration between half of
    /// [`max_backoff`](Self::max_backoff) and all of it.
    pub fn backoff(&self, retry: u32) -> Duration {
        let cap = self.max_backoff(retry);
        let half = cap / 2;
        let spread = (cap - half).as_nanos().min(u64::MAX as u128) as u64;
        if spread == 0 {
            return cap;
        }
        half + Duration::from_nanos(rand::rng().random_range(0..=spread))
    }

    /// Runs `op` (given the 1-based try number) until it succeeds, fails with an error that
    /// `is_transient` rejects, or the tries run out. The error comes back with the tries made.
    pub async fn run<T, E, F, Fut>(&self, mut op: F, is_transient: impl Fn(&E) -> bool) -> Result<T, (E, u32)>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let attempts = self.attempts.max(1);
        let mut attempt = 1;
        loop {
            match op(attempt).await {
                Ok(value) => return Ok(value),
                Err(error) if attempt >= attempts || !is_transient(&error) => return Err((error, attempt)),
                Err(_) => {
                    tokio::time::sleep(self.backoff(attempt)).await;
                    attempt += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter_in_the_upper_half() {
        let policy =
            RetryPolicy { attempts: 10, base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(1) };
        let caps: Vec<u128> = (1..=6).map(|n| policy.max_backoff(n).as_millis()).collect();
        assert_eq!(caps, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(policy.max_backoff(u32::MAX), Duration::from_secs(1));
        for retry in 1..=6 {
            for _ in 0..50 {
                let wait = policy.backoff(retry);
                let cap = policy.max_backoff(retry);
                assert!(wait >= cap / 2 && wait <= cap, "retry {retry}: {wait:?} outside [{:?}, {cap:?}]", cap / 2);
            }
        }
        assert_eq!(RetryPolicy::none().backoff(3), Duration::ZERO);
    }

    fn fast(attempts: u32) -> RetryPolicy {
        RetryPolicy { attempts, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(2) }
    }

    #[tokio::test]
    async fn run_retries_transient_failures_until_success() {
        let calls = AtomicU32::new(0);
        let result = fast(5)
            .run(
                |attempt| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async move {
                        if attempt < 3 {
                            Err("503")
                        } else {
                            Ok(attempt)
                        }
                    }
                },
                |e: &&str| *e == "503",
            )
            .await;
        assert_eq!(result, Ok(3));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn run_gives_up_after_the_attempts_or_at_a_permanent_error() {
        let exhausted: Result<(), _> = fast(4).run(|_| async { Err("503") }, |e: &&str| *e == "503").await;
        assert_eq!(exhausted, Err(("503", 4)));

        let calls = AtomicU32::new(0);
        let permanent: Result<(), _> = fast(4)
            .run(
                |_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async { Err("403") }
                },
                |e: &&str| *e == "503",
            )
            .await;
        assert_eq!(permanent, Err(("403", 1)));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let zero: Result<(), _> = fast(0).run(|_| async { Err("503") }, |_: &&str| true).await;
        assert_eq!(zero, Err(("503", 1)), "0 attempts still makes one");
    }
}
