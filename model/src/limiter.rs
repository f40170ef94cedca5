//! Adaptive concurrency per provider: how many requests [`ModelClient`](super::ModelClient) keeps
//! in flight to one provider endpoint, shrunk when the provider rate-limits and grown back while
//! it does not (AIMD, as in TCP congestion control).
//!
//! The rules are [`RateLimitPolicy`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Usage;
use lightsout_api::ApiKind;

/// How [`ModelClient`](super::ModelClient) adapts to rate limits: the per-provider concurrency
/// limit and the retry budget of rate-limited (429) attempts.
///
/// Rules:
/// - One limiter per provider endpoint: the API kind plus the base URL (trailing `/` ignored).
///   Every call to that endpoint through a client, or any of its clones, shares it, whichever
///   model or key it uses (an account's limits usually cover all of them).
/// - A call takes a slot before sending its first attempt. It gives the slot back when it ends,
///   and while it waits out the backoff after an error other than 429. After a 429 it keeps the
///   slot through the wait the provider asked for (`Retry-After`) and retries with it: the limit
///   bounds requests in flight *plus* requests told to wait, so a provider's pacing paces the
///   client too (were the slot handed to another call meanwhile, a provider that answers 429 in
///   a millisecond would be asked again at once, by call after call). Only when the limit has
///   just dropped below the slots held does a rate-limited call give its slot up, and queue
///   for one again after its wait.
/// - The limit starts at [`Self::initial_limit`] (default 32) and stays within
///   `1..=`[`Self::max_limit`] (default 256).
/// - **Windows**: answers are judged by rounds. A window is the next `max(limit,
///   `[`Self::window_answers`]`)` answers (default at least 64; successes and 429s,
///   other errors do not count) to requests sent since the last decrease. Answers to requests
///   sent before the last decrease belong to the overload that caused it and are not counted
///   again. Fewer than 64 answers would too easily take a run of random 429s for overload.
/// - **Multiplicative decrease**: a window in which more than
///   [`Self::rate_limited_share`] (default ½) of the answers were 429 sets the limit
///   to `floor(limit × decrease_factor)` (default ×0.7), never below 1, and opens a new window.
///   So a burst of 429s from one overload is one decrease, and the limit shrinks at most once
///   per window. A smaller share of 429s is not treated as overload: some providers reject a
///   share of requests whatever one client's rate (a "storm"); shrinking on every such 429 would
///   collapse the limit (classic AIMD under random loss) while sending less would not make the
///   storm stop. ½ is the tolerance of Google's client-side throttling (requests ≤ 2 ×
///   accepts): a client whose requests are mostly answered keeps its pace. Every 429 counts, so
///   calls that keep being rejected while they hold their slots drive the limit down.
/// - **Additive increase**: every `limit` successful answers since the limit last changed raise
///   it by 1 (about +1 per round), up to the maximum. Before the first decrease (slow start, as
///   TCP's), every success raises it by 1, so a client finds a provider's capacity quickly.
/// - Other errors (5xx, timeouts, malformed answers) leave the limit alone.
/// - When the limit drops below the slots held, none is taken away: the excess is retired as
///   slots come back.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitPolicy {
    /// Slots of a provider before it has said anything about its limits.
    pub initial_limit: u32,
    /// The limit never grows beyond this.
    pub max_limit: u32,
    /// A decrease multiplies the limit by this (in `0..1`), rounding down, never below 1.
    pub decrease_factor: f64,
    /// A window whose share of 429 answers exceeds this (in `0..1`) decreases the limit.
    pub rate_limited_share: f64,
    /// A window has at least this many answers (and at least `limit`).
    pub window_answers: u32,
    /// How many 429 answers one call accepts before it gives up with the last one. They do not
    /// count against [`RetryPolicy::attempts`](super::RetryPolicy::attempts), which bounds the
    /// other retryable failures: a provider that rate-limits asks to be called again later,
    /// it is not failing. At the default 64, a call in a storm where 30% of requests are
    /// answered 429 gives up with probability 0.3^64 ≈ 10⁻³⁴; even at 60% (a storm plus
    /// overload), 0.6^64 ≈ 10⁻¹⁴.
    pub rate_limited_attempts: u32,
    /// A `Retry-After` longer than this is waited only this long.
    pub max_retry_after: Duration,
}

impl Default for RateLimitPolicy {
    fn default() -> Self {
        RateLimitPolicy {
            initial_limit: 32,
            max_limit: 256,
            decrease_factor: 0.7,
            rate_limited_share: 0.5,
            window_answers: 64,
            rate_limited_attempts: 64,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// What a client has seen of one provider endpoint, for monitoring (counters since the client
/// was created, gauges as of now).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderStats {
    /// The provider name of the first endpoint that used this limiter.
    pub provider: String,
    pub base_url: String,
    pub api_kind: ApiKind,
    /// Calls of [`ModelClient::complete`](super::ModelClient::complete) started. Those neither
    /// `succeeded` nor `failed` are in progress or were cancelled.
    pub calls: u64,
    pub succeeded: u64,
    /// Calls that returned an error (after their retries).
    pub failed: u64,
    /// HTTP requests sent: first attempts and retries.
    pub attempts: u64,
    /// Attempts after a call's first.
    pub retries: u64,
    /// Attempts answered 429.
    pub rate_limited: u64,
    /// The current concurrency limit.
    pub limit: u32,
    /// The lowest the limit has been.
    pub lowest_limit: u32,
    /// How many times the limit was decreased, and increased.
    pub decreases: u64,
    pub increases: u64,
    /// Slots held now: requests in flight and rate-limited calls waiting to retry.
    pub in_flight: u32,
    /// Calls waiting for a slot now.
    pub waiting: u32,
    /// Tokens of the successful answers. A failed attempt carries no usage (providers do not
    /// bill a rejected request), so each call's usage is counted once, from its one answer.
    pub usage: Usage,
}

/// The limit's arithmetic alone, driven by answers, with no clock.
#[derive(Debug, Clone)]
pub(crate) struct Aimd {
    limit: u32,
    max: u32,
    factor: f64,
    share: f64,
    window: u32,
    /// Successes since the limit last changed.
    successes: u32,
    /// Slow start: until the first decrease, every success raises the limit.
    slow_start: bool,
    /// Decreases so far: the epoch of the window. A request sent in an earlier epoch is not
    /// counted in the window.
    epoch: u64,
    window_ok: u32,
    window_rate_limited: u32,
}

impl Aimd {
    pub(crate) fn new(policy: &RateLimitPolicy) -> Aimd {
        let unit = |x: f64, default: f64| if x.is_finite() { x.clamp(0.0, 1.0) } else { default };
        let max = policy.max_limit.max(1);
        Aimd {
            limit: policy.initial_limit.clamp(1, max),
            max,
            factor: unit(policy.decrease_factor, 0.7),
            share: unit(policy.rate_limited_share, 0.5),
            window: policy.window_answers.max(1),
            successes: 0,
            slow_start: true,
            epoch: 0,
            window_ok: 0,
            window_rate_limited: 0,
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// The epoch to stamp on a request being sent.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The answer to a request sent in `epoch`: a success, or a 429. Returns the limit before.
    pub(crate) fn on_answer(&mut self, rate_limited: bool, epoch: u64) -> u32 {
        let old = self.limit;
        if !rate_limited {
            self.successes += 1;
            if self.slow_start || self.successes >= self.limit {
                self.successes = 0;
                self.limit = (self.limit + 1).min(self.max);
            }
        }
        if epoch != self.epoch {
            return old;
        }
        if rate_limited {
            self.window_rate_limited += 1;
        } else {
            self.window_ok += 1;
        }
        let answers = self.window_ok + self.window_rate_limited;
        if answers < self.limit.max(self.window) {
            return old;
        }
        let overloaded = f64::from(self.window_rate_limited) > self.share * f64::from(answers);
        self.window_ok = 0;
        self.window_rate_limited = 0;
        if overloaded {
            self.epoch += 1;
            self.slow_start = false;
            let shrunk = ((f64::from(self.limit) * self.factor).floor() as u32).max(1);
            if shrunk < self.limit {
                self.limit = shrunk;
                self.successes = 0;
            }
        }
        old
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The limiters of one client and its clones, by endpoint.
#[derive(Debug)]
pub(crate) struct Limiters {
    policy: RateLimitPolicy,
    by_endpoint: Mutex<HashMap<(ApiKind, String), Arc<Limiter>>>,
}

impl Limiters {
    pub(crate) fn new(policy: RateLimitPolicy) -> Limiters {
        Limiters { policy, by_endpoint: Mutex::default() }
    }

    pub(crate) fn policy(&self) -> &RateLimitPolicy {
        &self.policy
    }

    /// The endpoint's limiter, created on first use.
    pub(crate) fn get(&self, provider: &str, base_url: &str, api_kind: ApiKind) -> Arc<Limiter> {
        let base_url = base_url.trim_end_matches('/').to_string();
        lock(&self.by_endpoint)
            .entry((api_kind, base_url.clone()))
            .or_insert_with(|| Arc::new(Limiter::new(provider, base_url, api_kind, &self.policy)))
            .clone()
    }

    /// Every endpoint's stats, by provider name then base URL.
    pub(crate) fn stats(&self) -> Vec<ProviderStats> {
        let limiters: Vec<Arc<Limiter>> = lock(&self.by_endpoint).values().cloned().collect();
        let mut stats: Vec<ProviderStats> = limiters.iter().map(|l| l.stats()).collect();
        stats.sort_by(|a, b| (&a.provider, &a.base_url).cmp(&(&b.provider, &b.base_url)));
        stats
    }
}

/// One endpoint's limiter: a fair (FIFO) semaphore whose permits track the AIMD limit.
///
/// Invariant: available permits + permits held − `debt` = limit. A decrease forgets available
/// permits and records the rest as debt, repaid by forgetting permits as they come back.
#[derive(Debug)]
pub(crate) struct Limiter {
    semaphore: Arc<Semaphore>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    aimd: Aimd,
    debt: u32,
    stats: ProviderStats,
}

impl Limiter {
    pub(crate) fn new(provider: &str, base_url: String, api_kind: ApiKind, policy: &RateLimitPolicy) -> Limiter {
        let aimd = Aimd::new(policy);
        let limit = aimd.limit();
        Limiter {
            semaphore: Arc::new(Semaphore::new(limit as usize)),
            state: Mutex::new(State {
                aimd,
                debt: 0,
                stats: ProviderStats {
                    provider: provider.to_string(),
                    base_url,
                    api_kind,
                    calls: 0,
                    succeeded: 0,
                    failed: 0,
                    attempts: 0,
                    retries: 0,
                    rate_limited: 0,
                    limit,
                    lowest_limit: limit,
                    decreases: 0,
                    increases: 0,
                    in_flight: 0,
                    waiting: 0,
                    usage: Usage::default(),
                },
            }),
        }
    }

    pub(crate) fn stats(&self) -> ProviderStats {
        let state = lock(&self.state);
        ProviderStats { limit: state.aimd.limit(), ..state.stats.clone() }
    }

    pub(crate) fn call_started(&self) {
        lock(&self.state).stats.calls += 1;
    }

    /// A call's end: its usage when it succeeded.
    pub(crate) fn call_finished(&self, usage: Option<Usage>) {
        let mut state = lock(&self.state);
        match usage {
            Some(usage) => {
                state.stats.succeeded += 1;
                state.stats.usage += usage;
            }
            None => state.stats.failed += 1,
        }
    }

    /// Waits for a slot.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Permit {
        let waiting = Waiting::new(self);
        let permit = self.semaphore.clone().acquire_owned().await.expect("the limiter's semaphore is never closed");
        drop(waiting);
        lock(&self.state).stats.in_flight += 1;
        Permit { limiter: self.clone(), permit: Some(permit), epoch: 0 }
    }

    /// Applies an answer to the limit, adjusting the permits; returns whether the slot answered
    /// is to be retired (the limit is below the slots held).
    fn answer(&self, state: &mut State, rate_limited: bool, epoch: u64) {
        if rate_limited {
            state.stats.rate_limited += 1;
        }
        let old = state.aimd.on_answer(rate_limited, epoch);
        let new = state.aimd.limit();
        if new > old {
            state.stats.increases += 1;
            let repaid = (new - old).min(state.debt);
            state.debt -= repaid;
            self.semaphore.add_permits((new - old - repaid) as usize);
        } else if new < old {
            state.stats.decreases += 1;
            state.stats.lowest_limit = state.stats.lowest_limit.min(new);
            let forgotten = self.semaphore.forget_permits((old - new) as usize) as u32;
            state.debt += old - new - forgotten;
        }
    }

    /// Gives a slot back (or retires it, when in debt).
    fn release(&self, state: &mut State, permit: OwnedSemaphorePermit) {
        state.stats.in_flight -= 1;
        if state.debt > 0 {
            state.debt -= 1;
            permit.forget();
        } else {
            drop(permit);
        }
    }
}

/// Counts a call waiting for a slot, also when the wait is cancelled.
struct Waiting<'a>(&'a Limiter);

impl<'a> Waiting<'a> {
    fn new(limiter: &'a Limiter) -> Self {
        lock(&limiter.state).stats.waiting += 1;
        Waiting(limiter)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).stats.waiting -= 1;
    }
}

/// A slot of the limiter. Dropping it gives it back without changing the limit (an error
/// other than 429, or a cancelled call).
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
    permit: Option<OwnedSemaphorePermit>,
    /// The window epoch when the current attempt was sent.
    epoch: u64,
}

impl Permit {
    /// An attempt is being sent with this slot (`retry`: not the call's first).
    pub(crate) fn sending(&mut self, retry: bool) {
        let mut state = lock(&self.limiter.state);
        state.stats.attempts += 1;
        state.stats.retries += u64::from(retry);
        self.epoch = state.aimd.epoch();
    }

    /// The attempt got a successful answer; the slot is given back.
    pub(crate) fn succeeded(mut self) {
        if let Some(permit) = self.permit.take() {
            let mut state = lock(&self.limiter.state);
            self.limiter.answer(&mut state, false, self.epoch);
            self.limiter.release(&mut state, permit);
        }
    }

    /// The attempt was answered 429. The call keeps the slot for its retry, unless the limit
    /// is now below the slots held: then the slot is retired and the retry queues for another.
    pub(crate) fn rate_limited(mut self) -> Option<Permit> {
        let permit = self.permit.take()?;
        let mut state = lock(&self.limiter.state);
        self.limiter.answer(&mut state, true, self.epoch);
        if state.debt > 0 {
            self.limiter.release(&mut state, permit);
            return None;
        }
        drop(state);
        self.permit = Some(permit);
        Some(self)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.limiter.release(&mut lock(&self.limiter.state), permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(initial: u32, max: u32) -> RateLimitPolicy {
        // Windows of `limit` answers, so that the arithmetic shows in a few lines.
        RateLimitPolicy { initial_limit: initial, max_limit: max, window_answers: 1, ..RateLimitPolicy::default() }
    }

    /// Feeds answers to requests sent in `epoch`: `true` is a 429.
    fn answers(aimd: &mut Aimd, epoch: u64, pattern: &[bool]) {
        for rate_limited in pattern {
            aimd.on_answer(*rate_limited, epoch);
        }
    }

    const OK: bool = false;
    const RL: bool = true;

    #[test]
    fn decreases_once_per_overloaded_window_and_never_below_one() {
        let mut aimd = congestion_avoidance(&policy(10, 100));
        // A window of 10 answers with 5 429s is not overloaded (not more than half)...
        answers(&mut aimd, 0, &[RL, OK, RL, OK, RL, OK, RL, OK, RL, OK]);
        assert_eq!((aimd.limit(), aimd.epoch()), (10, 0));
        // ...nor is one whose 429s come late: it is judged when full, on its share.
        answers(&mut aimd, 0, &[OK; 4]);
        answers(&mut aimd, 0, &[RL; 5]);
        assert_eq!(aimd.limit(), 10, "9 answers of 10: the window is still open");
        aimd.on_answer(RL, 0);
        // 6 of 10 were 429s: floor(10 × 0.7) = 7, and a new window (epoch) opens.
        assert_eq!((aimd.limit(), aimd.epoch()), (7, 1));
        // The rest of the burst (requests sent before the decrease) does not decrease it again.
        answers(&mut aimd, 0, &[RL; 50]);
        assert_eq!((aimd.limit(), aimd.epoch()), (7, 1));
        // A window of 7 with 3 429s is tolerated (a steady storm of 30–40%).
        answers(&mut aimd, 1, &[RL, OK, RL, OK, RL, OK, OK]);
        assert_eq!((aimd.limit(), aimd.epoch()), (7, 1));
        // Overloaded windows: 7 → 4 → 2 → 1, then it stays at 1.
        for (epoch, expected) in [(1, 4), (2, 2), (3, 1), (4, 1), (5, 1)] {
            let window = vec![RL; aimd.limit() as usize];
            answers(&mut aimd, epoch, &window);
            assert_eq!((aimd.limit(), aimd.epoch()), (expected, epoch + 1));
        }
    }

    #[test]
    fn a_small_limit_is_judged_on_the_minimum_window() {
        let mut aimd = congestion_avoidance(&RateLimitPolicy {
            initial_limit: 2,
            window_answers: 8,
            ..RateLimitPolicy::default()
        });
        // A run of four 429s is not a full window of 8.
        answers(&mut aimd, 0, &[RL; 4]);
        assert_eq!((aimd.limit(), aimd.epoch()), (2, 0));
        answers(&mut aimd, 0, &[OK, OK, OK]);
        assert_eq!(aimd.limit(), 3, "3 successes grew it meanwhile (2 at limit 2)");
        // The eighth answer closes the window: 5 of 8 were 429s, floor(3 × 0.7) = 2.
        aimd.on_answer(RL, 0);
        assert_eq!((aimd.limit(), aimd.epoch()), (2, 1));
    }

    #[test]
    fn slow_start_then_one_per_limit_successes_up_to_the_cap() {
        let mut aimd = Aimd::new(&policy(3, 8));
        // Slow start: every success adds 1 until the first decrease.
        answers(&mut aimd, 0, &[OK, OK]);
        assert_eq!(aimd.limit(), 5);
        // 3 429s make the window of 5 overloaded: floor(5 × 0.7) = 3, and slow start ends.
        answers(&mut aimd, 0, &[RL, RL, RL]);
        assert_eq!((aimd.limit(), aimd.epoch()), (3, 1));
        // Now +1 per `limit` successes: 3 at limit 3, then 4 at limit 4.
        answers(&mut aimd, 1, &[OK, OK]);
        assert_eq!(aimd.limit(), 3);
        aimd.on_answer(OK, 1);
        assert_eq!(aimd.limit(), 4);
        answers(&mut aimd, 1, &[OK; 3]);
        assert_eq!(aimd.limit(), 4);
        aimd.on_answer(OK, 1);
        assert_eq!(aimd.limit(), 5);
        // Capped at the maximum.
        answers(&mut aimd, 1, &[OK; 100]);
        assert_eq!(aimd.limit(), 8);
        // The initial limit is clamped to 1..=max.
        assert_eq!(Aimd::new(&policy(0, 5)).limit(), 1);
        assert_eq!(Aimd::new(&policy(9, 5)).limit(), 5);
    }

    /// The limit's arithmetic after slow start.
    fn congestion_avoidance(policy: &RateLimitPolicy) -> Aimd {
        Aimd { slow_start: false, ..Aimd::new(policy) }
    }

    fn limiter(initial: u32, max: u32) -> Arc<Limiter> {
        let limiter = Limiter::new("p", "http://p/v1".into(), ApiKind::OpenAiChat, &policy(initial, max));
        lock(&limiter.state).aimd.slow_start = false;
        Arc::new(limiter)
    }

    async fn send(limiter: &Arc<Limiter>) -> Permit {
        let mut permit = limiter.acquire().await;
        permit.sending(false);
        permit
    }

    #[tokio::test]
    async fn slots_follow_the_limit_and_excess_ones_retire_as_they_come_back() {
        let limiter = limiter(2, 10);
        let (a, b) = (send(&limiter).await, send(&limiter).await);
        assert_eq!(limiter.semaphore.available_permits(), 0);
        // A window of 2 answers with one 429 is not overloaded; the call keeps its slot for
        // the retry.
        let mut a = a.rate_limited().expect("kept for the retry");
        a.sending(true);
        b.succeeded();
        assert_eq!((limiter.stats().limit, limiter.semaphore.available_permits()), (2, 1));
        // Two 429s in the next window: the limit drops to 1 while 2 slots are held. The first
        // call keeps its slot, the second gives it up (it is in excess) and would queue.
        let c = send(&limiter).await;
        let mut a = a.rate_limited().expect("kept");
        assert!(c.rate_limited().is_none(), "retired: the limit is now 1");
        let stats = limiter.stats();
        assert_eq!((stats.limit, stats.in_flight, stats.rate_limited, stats.decreases), (1, 1, 3, 1));
        assert_eq!(limiter.semaphore.available_permits(), 0);
        // One success at limit 1 grows it back to 2: a slot becomes available again.
        a.sending(true);
        a.succeeded();
        assert_eq!(limiter.semaphore.available_permits(), 2);
        let (c, d) = (send(&limiter).await, send(&limiter).await);
        let stats = limiter.stats();
        assert_eq!((stats.limit, stats.lowest_limit, stats.increases, stats.in_flight), (2, 1, 1, 2));
        drop((c, d));
        let stats = limiter.stats();
        assert_eq!((stats.attempts, stats.retries, stats.in_flight, stats.waiting), (7, 2, 0, 0));
        assert_eq!(limiter.semaphore.available_permits(), 2);
    }

    #[tokio::test]
    async fn a_full_limiter_makes_calls_wait() {
        let limiter = limiter(1, 1);
        let first = send(&limiter).await;
        let waiter = {
            let limiter = limiter.clone();
            tokio::spawn(async move { send(&limiter).await.succeeded() })
        };
        while limiter.stats().waiting == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        first.succeeded();
        waiter.await.expect("the waiter gets the slot");
        let stats = limiter.stats();
        assert_eq!((stats.attempts, stats.in_flight, stats.waiting, stats.limit), (2, 0, 0, 1));
    }
}
