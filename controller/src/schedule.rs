//! Which trial attempts to start now: the controller's scheduling decision, as a pure function.
//!
//! On every reconcile the controller folds the run's Jobs and stored results into an
//! [`Observation`] (see [`crate::observation`]), calls [`decide`], creates one Job per
//! [`Start`] and requeues at [`Decision::requeue_at`]. [`decide`] reads nothing but its
//! arguments — no clock, no memory of earlier calls — so a restarted controller that observes
//! the same state makes the same decision, and attempt numbers come from the observed state
//! alone, so it never creates a second Job for an attempt that already has one.
//!
//! The rules:
//!
//! 1. **Order.** Trials are considered in the order of the plan's slice: [`plan::plan`] sorts
//!    them longest expected duration first, so long trials start early and the run's tail is
//!    short ones. A retry is considered at its trial's place in that order, not at the end.
//! 2. **Parallelism.** Active Jobs — planned trials' latest attempts and
//!    [`Observation::other_active`] Jobs alike — never exceed `parallelism`: a decision starts at
//!    most `parallelism − active` trials, none when the run is already at or over it (after
//!    `parallelism` is lowered, running Jobs finish and nothing starts until below it).
//! 3. **Attempts.** A trial with no observed attempt starts attempt 1. An agent outcome
//!    (`ok`, `agent-failed`, `timed-out`, `budget-exceeded`) is final and never retried. An
//!    infrastructure failure of attempt `n` at time `T` makes attempt `n + 1` startable from
//!    `T + min(cap, base × 2^(n-1))` ([`Backoff`]) while `n ≤ retries`; attempt `retries + 1`
//!    failing makes the trial final as infra-failed, counted and listed apart
//!    ([`Decision::infra_failed`]) and never scored. Attempts are 1-based, so `retries: 0` runs
//!    each trial once. (Raising `retries` later makes such trials startable again.)
//! 4. **Budget.** With `maxUSD` set, no trial starts while `spent + in-flight estimate ≥ maxUSD`,
//!    where every active Job — and every trial this decision starts, from the moment it starts —
//!    is charged its variant's mean trial cost or the prior ([`crate::budget`]). When the gate is
//!    closed and trials are still waiting to start, [`Decision::budget_exceeded`] is set
//!    (condition `BudgetExceeded`); raising `maxUSD` reopens the gate on the next decision.
//!    The budget stops creation; it never skips ahead to a cheaper trial.
//! 5. **Suspend.** With `spec.suspend`, nothing starts; active Jobs run to the end (the
//!    controller deletes nothing). Counts and the budget verdict are still computed.
//! 6. **Requeue.** [`Decision::requeue_at`] is the earliest future time a trial in backoff may
//!    start its next attempt; `None` when no trial is in backoff or the run is suspended. Job
//!    changes and spec changes trigger reconciles on their own.
//!
//! Cost: one pass over the trials, O(trials) time and O(parallelism + infra-failed trials)
//! memory per call (`cargo bench -p lightsout-controller --bench makespan` measures it at
//! 100,000 trials).
//!
//! [`plan::plan`]: lightsout_core::plan::plan

use chrono::{DateTime, Utc};
use lightsout_api::EvaluationRunSpec;
use lightsout_core::plan::PlannedTrial;

use crate::backoff::Backoff;
use crate::budget::{self, Budget};
use crate::observation::{InfraReason, Observation, TrialState};

/// The run's scheduling settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Most Jobs active at once.
    pub parallelism: u32,
    /// Extra attempts after infrastructure failures: a trial runs at most `retries + 1` times.
    pub retries: u32,
    /// No new trial starts; active ones finish.
    pub suspend: bool,
    /// The delay before the attempt after an infrastructure failure.
    pub backoff: Backoff,
}

impl Policy {
    /// `spec.parallelism` (at least 1), `spec.retries` (at least 0) and `spec.suspend`.
    pub fn from_spec(spec: &EvaluationRunSpec, backoff: Backoff) -> Self {
        Policy {
            parallelism: spec.parallelism.max(1) as u32,
            retries: spec.retries.max(0) as u32,
            suspend: spec.suspend,
            backoff,
        }
    }

    /// The last attempt an infrastructure failure may be retried up to.
    pub fn max_attempts(&self) -> u32 {
        self.retries.saturating_add(1)
    }
}

/// One Job to create: attempt `attempt` of the plan's trial at index `trial`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Start {
    pub trial: usize,
    pub attempt: u32,
}

/// A trial that is final because its last allowed attempt failed on infrastructure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InfraFailedTrial {
    pub trial: usize,
    /// Its attempts, all failed (the last one's number).
    pub attempts: u32,
    /// When the last one failed, and why.
    pub at: DateTime<Utc>,
    pub reason: InfraReason,
}

/// Trial counts, as observed (before the decision's Jobs are created).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Planned trials: `not_started + active + retrying + finished + infra_failed`.
    pub total: usize,
    /// No attempt observed.
    pub not_started: usize,
    /// The latest attempt has an active Job.
    pub active: usize,
    /// Active Jobs that are not a planned trial's latest attempt (they hold slots too).
    pub other_active: usize,
    /// The latest attempt failed on infrastructure and another is allowed (due or in backoff).
    pub retrying: usize,
    /// Of `retrying`, those whose backoff has not expired yet.
    pub backing_off: usize,
    /// Final with an agent outcome.
    pub finished: usize,
    /// Final after `retries + 1` infrastructure failures.
    pub infra_failed: usize,
    /// Trials this decision starts.
    pub starting: usize,
}

impl Counts {
    /// Trials running once the decision's Jobs are created.
    pub fn running(&self) -> usize {
        self.active + self.starting
    }

    /// Trials still waiting to start once the decision's Jobs are created.
    pub fn pending(&self) -> usize {
        self.not_started + self.retrying - self.starting
    }

    /// Trials with a final result (an agent outcome or out of retries).
    pub fn final_trials(&self) -> usize {
        self.finished + self.infra_failed
    }
}

/// What to do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The Jobs to create, in start order (the plan's order).
    pub start: Vec<Start>,
    /// `spec.suspend` held creation back.
    pub suspended: bool,
    /// The budget gate is closed (`spent + in-flight ≥ maxUSD`) and trials are waiting to start.
    pub budget_exceeded: bool,
    /// Recorded spend, as passed in.
    pub spent_usd: f64,
    /// The estimate charged for active Jobs and the trials this decision starts.
    pub in_flight_usd: f64,
    /// When to reconcile again: the earliest future backoff expiry.
    pub requeue_at: Option<DateTime<Utc>>,
    pub counts: Counts,
    /// Trials final as infra-failed, in plan order.
    pub infra_failed: Vec<InfraFailedTrial>,
}

impl Decision {
    /// How long from `now` until [`Decision::requeue_at`] (zero if it has passed).
    pub fn requeue_after(&self, now: DateTime<Utc>) -> Option<std::time::Duration> {
        self.requeue_at.map(|at| (at - now).to_std().unwrap_or_default())
    }

    /// Every trial is final: nothing runs, waits or will start.
    pub fn all_final(&self) -> bool {
        self.counts.final_trials() == self.counts.total
    }
}

/// The scheduling decision for `trials` (in start-priority order: [`lightsout_core::plan::plan`]
/// gives longest expected first) in the `observed` state at `now`. See the module docs for
/// the rules.
///
/// # Panics
/// When `observed` does not hold one state per trial.
pub fn decide(
    trials: &[PlannedTrial],
    observed: &Observation,
    policy: &Policy,
    budget: &Budget,
    now: DateTime<Utc>,
) -> Decision {
    let states = observed.trials();
    assert_eq!(states.len(), trials.len(), "the observation must hold one state per planned trial");
    let max_attempts = policy.max_attempts();
    let parallelism = policy.parallelism as usize;
    let other_active = observed.other_active();

    let mut counts = Counts { total: trials.len(), other_active, ..Counts::default() };
    let mut in_flight = budget.prior_micros().saturating_mul(other_active as u64);
    let mut requeue_at: Option<DateTime<Utc>> = None;
    let mut infra_failed = Vec::new();
    // The startable trials, in order; only the first `parallelism` can start in one decision.
    let mut candidates: Vec<Start> = Vec::with_capacity(parallelism.min(trials.len()));

    for (index, (trial, state)) in trials.iter().zip(states).enumerate() {
        match *state {
            TrialState::NotStarted => {
                counts.not_started += 1;
                if candidates.len() < parallelism {
                    candidates.push(Start { trial: index, attempt: 1 });
                }
            }
            TrialState::Active { .. } => {
                counts.active += 1;
                in_flight = in_flight.saturating_add(budget.estimate_micros(trial.variant));
            }
            TrialState::Finished { .. } => counts.finished += 1,
            TrialState::InfraFailed { attempt, at, reason } if attempt >= max_attempts => {
                counts.infra_failed += 1;
                infra_failed.push(InfraFailedTrial { trial: index, attempts: attempt, at, reason });
            }
            TrialState::InfraFailed { attempt, at, .. } => {
                counts.retrying += 1;
                let retry_at = policy.backoff.retry_at(at, attempt);
                if retry_at <= now {
                    if candidates.len() < parallelism {
                        candidates.push(Start { trial: index, attempt: attempt + 1 });
                    }
                } else {
                    counts.backing_off += 1;
                    requeue_at = Some(requeue_at.map_or(retry_at, |earliest| earliest.min(retry_at)));
                }
            }
        }
    }

    let spent = budget.spent_micros();
    let max = budget.max_micros();
    let gate_closed = |in_flight: u64| max.is_some_and(|max| spent.saturating_add(in_flight) >= max);
    let slots = parallelism.saturating_sub(counts.active + other_active);
    let mut start = Vec::with_capacity(slots.min(candidates.len()));
    if !policy.suspend {
        for candidate in candidates.into_iter().take(slots) {
            if gate_closed(in_flight) {
                break;
            }
            in_flight = in_flight.saturating_add(budget.estimate_micros(trials[candidate.trial].variant));
            start.push(candidate);
        }
    }
    counts.starting = start.len();

    Decision {
        start,
        suspended: policy.suspend,
        budget_exceeded: gate_closed(in_flight) && counts.pending() > 0,
        spent_usd: budget.spent_usd,
        in_flight_usd: budget::usd(in_flight),
        requeue_at: if policy.suspend { None } else { requeue_at },
        counts,
        infra_failed,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::observation::AttemptState;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000 + secs, 0).unwrap()
    }

    /// Trials with these expected durations (seconds), longest first as the plan orders them;
    /// trial `i` is of variant `i % 2`.
    fn plan(expected_secs: &[u64]) -> Vec<PlannedTrial> {
        let mut trials: Vec<PlannedTrial> = expected_secs
            .iter()
            .enumerate()
            .map(|(i, secs)| PlannedTrial {
                id: format!("trial-{i:03}"),
                variant: (i % 2) as u32,
                task: i as u32,
                context: None,
                repeat: 0,
                expected_ms: secs * 1000,
            })
            .collect();
        trials.sort_by(|a, b| b.expected_ms.cmp(&a.expected_ms).then_with(|| a.id.cmp(&b.id)));
        trials
    }

    fn policy(parallelism: u32, retries: u32) -> Policy {
        Policy {
            parallelism,
            retries,
            suspend: false,
            backoff: Backoff { base: Duration::from_secs(10), cap: Duration::from_secs(60) },
        }
    }

    type Record = (usize, u32, AttemptState);
    type Starts = Vec<(usize, u32)>;

    fn observe(trials: usize, records: &[Record]) -> Observation {
        let mut observation = Observation::new(trials);
        for &(trial, attempt, state) in records {
            observation.record(trial, attempt, state);
        }
        observation
    }

    fn infra(secs: i64) -> AttemptState {
        AttemptState::InfraFailed { at: at(secs), reason: InfraReason::WorkerExit }
    }

    fn starts(decision: &Decision) -> Vec<(usize, u32)> {
        decision.start.iter().map(|s| (s.trial, s.attempt)).collect()
    }

    /// The observed records plus an active Job for every start of `decision`.
    fn with_jobs_created(records: &[Record], decision: &Decision) -> Vec<Record> {
        let mut records = records.to_vec();
        records.extend(decision.start.iter().map(|s| (s.trial, s.attempt, AttemptState::Active)));
        records
    }

    #[test]
    fn the_first_decision_starts_exactly_parallelism_trials_longest_first() {
        let expected = [300, 60, 900, 120, 45, 600, 30, 240, 75, 500];
        let trials = plan(&expected);
        let mut longest: Vec<u64> = expected.iter().map(|s| s * 1000).collect();
        longest.sort_unstable_by(|a, b| b.cmp(a));
        for parallelism in [1, 3, 7, 10, 25] {
            let decision =
                decide(&trials, &Observation::new(trials.len()), &policy(parallelism, 2), &Budget::UNLIMITED, at(0));
            let n = (parallelism as usize).min(trials.len());
            assert_eq!(decision.start.len(), n, "parallelism {parallelism}");
            let started: Vec<u64> = decision.start.iter().map(|s| trials[s.trial].expected_ms).collect();
            assert_eq!(started, longest[..n], "parallelism {parallelism}");
            assert!(decision.start.iter().all(|s| s.attempt == 1));
            assert_eq!(decision.counts.not_started, 10);
            assert_eq!((decision.counts.running(), decision.counts.pending()), (n, 10 - n));
            assert_eq!(decision.requeue_at, None);
            assert!(!decision.budget_exceeded && !decision.suspended);
        }
    }

    #[test]
    fn completions_free_slots() {
        use AttemptState::{Active, Finished};
        let trials = plan(&[60; 8]);
        let cases: Vec<(&str, Vec<Record>, Starts)> = vec![
            ("all slots busy", vec![(0, 1, Active), (1, 1, Active), (2, 1, Active)], vec![]),
            ("one finished", vec![(0, 1, Active), (1, 1, Finished), (2, 1, Active)], vec![(3, 1)]),
            ("two finished", vec![(0, 1, Finished), (1, 1, Active), (2, 1, Finished)], vec![(3, 1), (4, 1)]),
            (
                "finished out of order",
                vec![(0, 1, Active), (1, 1, Finished), (2, 1, Finished), (5, 1, Finished)],
                vec![(3, 1), (4, 1)],
            ),
            ("only the last is left", (0..7).map(|i| (i, 1, Finished)).collect(), vec![(7, 1)]),
        ];
        for (name, records, expected) in cases {
            let decision = decide(&trials, &observe(8, &records), &policy(3, 2), &Budget::UNLIMITED, at(0));
            assert_eq!(starts(&decision), expected, "{name}");
            assert!(decision.counts.running() <= 3, "{name}");
        }
    }

    #[test]
    fn an_infrastructure_failure_is_retried_only_after_its_backoff() {
        // Backoff 10 s doubling, capped at 60 s; trial 0 is the longest.
        let trials = plan(&[600, 60, 60]);
        let p = policy(3, 3);
        struct Case {
            name: &'static str,
            records: Vec<Record>,
            now: i64,
            starts: Starts,
            requeue: Option<i64>,
        }
        let case = |name, records, now, starts, requeue| Case { name, records, now, starts, requeue };
        let cases = [
            case("attempt 1 failed at 100, now 105", vec![(0, 1, infra(100))], 105, vec![(1, 1), (2, 1)], Some(110)),
            case("attempt 1 failed at 100, now 110", vec![(0, 1, infra(100))], 110, vec![(0, 2), (1, 1), (2, 1)], None),
            case(
                "attempt 2 failed at 200, now 215",
                vec![(0, 1, infra(100)), (0, 2, infra(200))],
                215,
                vec![],
                Some(220),
            ),
            case(
                "attempt 2 failed at 200, now 220",
                vec![(0, 1, infra(100)), (0, 2, infra(200))],
                220,
                vec![(0, 3)],
                None,
            ),
            case("attempt 3 failed at 300, now 339", vec![(0, 3, infra(300))], 339, vec![], Some(340)),
            case("attempt 3 failed at 300, now 340", vec![(0, 3, infra(300))], 340, vec![(0, 4)], None),
        ];
        for Case { name, mut records, now, starts: expected, requeue } in cases {
            if !name.starts_with("attempt 1") {
                // The other trials are done, so only the retry can start.
                records.extend([(1, 1, AttemptState::Finished), (2, 1, AttemptState::Finished)]);
            }
            let decision = decide(&trials, &observe(3, &records), &p, &Budget::UNLIMITED, at(now));
            assert_eq!(starts(&decision), expected, "{name}");
            assert_eq!(decision.requeue_at, requeue.map(at), "{name}");
            assert_eq!(decision.requeue_after(at(now)), requeue.map(|r| Duration::from_secs((r - now) as u64)));
            assert_eq!(decision.counts.retrying, 1, "{name}");
            assert_eq!(decision.counts.backing_off, usize::from(requeue.is_some()), "{name}");
            assert!(decision.infra_failed.is_empty(), "{name}");
        }
    }

    #[test]
    fn after_retries_the_trial_is_final_as_infra_failed() {
        let trials = plan(&[600, 60]);
        for retries in [0, 1, 2, 5] {
            let last = retries + 1;
            let records = [
                (0, last, AttemptState::InfraFailed { at: at(50), reason: InfraReason::ImagePull }),
                (1, 1, AttemptState::Finished),
            ];
            let decision = decide(&trials, &observe(2, &records), &policy(2, retries), &Budget::UNLIMITED, at(10_000));
            assert_eq!(starts(&decision), [], "retries {retries}");
            assert_eq!(decision.requeue_at, None);
            assert_eq!(
                decision.infra_failed,
                [InfraFailedTrial { trial: 0, attempts: last, at: at(50), reason: InfraReason::ImagePull }]
            );
            assert_eq!((decision.counts.infra_failed, decision.counts.finished, decision.counts.retrying), (1, 1, 0));
            assert!(decision.all_final());

            // One attempt fewer: retried.
            if last > 1 {
                let records = [(0, last - 1, infra(50)), (1, 1, AttemptState::Finished)];
                let decision =
                    decide(&trials, &observe(2, &records), &policy(2, retries), &Budget::UNLIMITED, at(10_000));
                assert_eq!(starts(&decision), [(0, last)], "retries {retries}");
            }
        }
    }

    #[test]
    fn an_agent_outcome_is_final_and_never_retried() {
        let trials = plan(&[600, 60]);
        // Attempt 1 and a retried attempt 2 both ended with an agent outcome.
        for records in [vec![(0, 1, AttemptState::Finished)], vec![(0, 1, infra(0)), (0, 2, AttemptState::Finished)]] {
            let decision = decide(&trials, &observe(2, &records), &policy(4, 10), &Budget::UNLIMITED, at(10_000));
            assert_eq!(starts(&decision), [(1, 1)]);
            assert_eq!((decision.counts.finished, decision.counts.retrying), (1, 0));
            assert!(decision.infra_failed.is_empty());
        }
    }

    #[test]
    fn the_budget_stops_creation_and_resumes_when_raised() {
        use AttemptState::{Active, Finished};
        let trials = plan(&[60; 10]);
        // Variant 0 has a mean trial cost of $0.50; variant 1 none yet, so the $1 prior.
        let means = [Some(0.5), None];
        let budget = |max: f64, spent: f64| Budget {
            max_usd: Some(max),
            spent_usd: spent,
            variant_mean_usd: &means,
            prior_usd: 1.0,
        };
        struct Case<'a> {
            name: &'static str,
            records: Vec<Record>,
            budget: Budget<'a>,
            starts: Starts,
            exceeded: bool,
            in_flight: f64,
        }
        let case = |name, records, budget, starts, exceeded, in_flight| Case {
            name,
            records,
            budget,
            starts,
            exceeded,
            in_flight,
        };
        let jobs_created = || vec![(0, 1, Active), (1, 1, Active), (2, 1, Active), (3, 1, Active)];
        let cases = [
            // 0 → 0.5 → 1.5 → 2.0 → 3.0 ≥ 2.5: four starts, then the gate is closed.
            case("fresh run", vec![], budget(2.5, 0.0), vec![(0, 1), (1, 1), (2, 1), (3, 1)], true, 3.0),
            // The same run after creating those Jobs: still closed, nothing new.
            case("jobs created", jobs_created(), budget(2.5, 0.0), vec![], true, 3.0),
            // maxUSD raised to 5: 3.0 → 3.5 → 4.5 → 5.0 ≥ 5.
            case("raised", jobs_created(), budget(5.0, 0.0), vec![(4, 1), (5, 1), (6, 1)], true, 5.0),
            // Recorded spend counts: $2 spent + $0.50 in flight ≥ $2.50.
            case("spent", vec![(0, 1, Finished), (2, 1, Active)], budget(2.5, 2.0), vec![], true, 0.5),
            // Under the limit by a cent: one more starts, even though it overshoots.
            case("just under", vec![(0, 1, Finished), (2, 1, Active)], budget(2.51, 2.0), vec![(1, 1)], true, 1.5),
            // Over budget with nothing left to start: the budget stops nothing.
            case(
                "nothing waiting",
                (0..10).map(|i| (i, 1, if i < 8 { Finished } else { Active })).collect(),
                budget(1.0, 9.0),
                vec![],
                false,
                1.5,
            ),
            case(
                "no limit",
                vec![],
                Budget { max_usd: None, ..budget(0.0, 100.0) },
                (0..10).map(|i| (i, 1)).collect(),
                false,
                7.5,
            ),
        ];
        for Case { name, records, budget, starts: expected, exceeded, in_flight } in cases {
            let decision = decide(&trials, &observe(10, &records), &policy(10, 2), &budget, at(0));
            assert_eq!(starts(&decision), expected, "{name}");
            assert_eq!(decision.budget_exceeded, exceeded, "{name}");
            assert_eq!(decision.in_flight_usd, in_flight, "{name}");
        }
    }

    #[test]
    fn suspend_starts_nothing_and_active_trials_finish() {
        let trials = plan(&[600, 300, 60, 30]);
        let records = [(0, 1, AttemptState::Active), (1, 1, infra(0))];
        let mut p = policy(3, 2);
        p.suspend = true;
        let decision = decide(&trials, &observe(4, &records), &p, &Budget::UNLIMITED, at(5));
        assert!(decision.suspended);
        assert_eq!(starts(&decision), []);
        // The active trial keeps running (nothing is stopped) and no requeue for the backoff.
        assert_eq!((decision.counts.active, decision.counts.running(), decision.counts.pending()), (1, 1, 3));
        assert_eq!(decision.requeue_at, None);

        // Unsuspended: the two free slots go to the waiting trials, the retry after its backoff.
        p.suspend = false;
        let decision = decide(&trials, &observe(4, &records), &p, &Budget::UNLIMITED, at(5));
        assert!(!decision.suspended);
        assert_eq!(starts(&decision), [(2, 1), (3, 1)]);
        assert_eq!(decision.requeue_at, Some(at(10)));
        let decision = decide(&trials, &observe(4, &records), &p, &Budget::UNLIMITED, at(10));
        assert_eq!(starts(&decision), [(1, 2), (2, 1)]);
    }

    #[test]
    fn other_active_jobs_and_lowered_parallelism_hold_slots() {
        let trials = plan(&[60; 6]);
        // A superseded attempt still running and a Job of a trial no longer planned.
        let mut observation = observe(6, &[(0, 1, AttemptState::Active), (0, 2, AttemptState::Active)]);
        observation.record_unplanned_active();
        let decision = decide(&trials, &observation, &policy(4, 2), &Budget::UNLIMITED, at(0));
        assert_eq!((decision.counts.active, decision.counts.other_active), (1, 2));
        assert_eq!(starts(&decision), [(1, 1)]);

        // Five running, parallelism lowered to 3: nothing starts until below it.
        let records: Vec<Record> = (0..5).map(|i| (i, 1, AttemptState::Active)).collect();
        let decision = decide(&trials, &observe(6, &records), &policy(3, 2), &Budget::UNLIMITED, at(0));
        assert_eq!(starts(&decision), []);
    }

    #[test]
    fn a_restarted_controller_decides_the_same_and_never_duplicates_an_attempt() {
        use AttemptState::{Active, Finished};
        let trials = plan(&[900, 800, 700, 600, 500, 400, 300, 200, 100, 50]);
        let means = [Some(0.4), Some(0.6)];
        let limited = Budget { max_usd: Some(4.0), spent_usd: 1.0, variant_mean_usd: &means, prior_usd: 1.0 };
        let cases: Vec<(&str, Vec<Record>, Policy, Budget)> = vec![
            ("fresh", vec![], policy(4, 2), Budget::UNLIMITED),
            ("slots limit", vec![(0, 1, Finished), (3, 1, Active)], policy(3, 2), Budget::UNLIMITED),
            (
                "retries due and in backoff",
                vec![(0, 1, infra(0)), (1, 2, infra(95)), (2, 1, Finished), (4, 3, infra(0))],
                policy(5, 2),
                Budget::UNLIMITED,
            ),
            ("fewer waiting than slots", (0..8).map(|i| (i, 1, Finished)).collect(), policy(5, 2), Budget::UNLIMITED),
            ("budget limit", vec![(0, 1, Active), (5, 1, Finished)], policy(8, 2), limited),
        ];
        for (name, records, policy, budget) in cases {
            let first = decide(&trials, &observe(10, &records), &policy, &budget, at(100));
            assert!(!first.start.is_empty(), "{name}: the case must start something");
            // Fresh memory, the same observed state (recorded in another order): the same decision.
            let reversed: Vec<Record> = records.iter().rev().copied().collect();
            let again = decide(&trials, &observe(10, &reversed), &policy, &budget, at(100));
            assert_eq!(again, first, "{name}");
            // The Jobs created, a fresh controller observes them: nothing new to start.
            let after = decide(&trials, &observe(10, &with_jobs_created(&records, &first)), &policy, &budget, at(100));
            assert_eq!(starts(&after), [], "{name}");
            assert_eq!(after.counts.running(), first.counts.running(), "{name}");
        }
    }

    #[test]
    fn counts_partition_the_trials() {
        let trials = plan(&[60; 7]);
        let records = [
            (0, 1, AttemptState::Active),
            (1, 1, AttemptState::Finished),
            (2, 3, infra(0)),
            (3, 1, infra(95)),
            (4, 1, infra(0)),
        ];
        let decision = decide(&trials, &observe(7, &records), &policy(2, 2), &Budget::UNLIMITED, at(100));
        let c = decision.counts;
        assert_eq!(
            (c.total, c.not_started, c.active, c.retrying, c.backing_off, c.finished, c.infra_failed),
            (7, 2, 1, 2, 1, 1, 1)
        );
        assert_eq!(c.not_started + c.active + c.retrying + c.finished + c.infra_failed, c.total);
        // One slot: the due retry (trial 4, earlier in the plan than 5 and 6).
        assert_eq!(starts(&decision), [(4, 2)]);
        assert_eq!((c.running(), c.pending(), c.final_trials()), (2, 3, 2));
        assert!(!decision.all_final());
    }

    #[test]
    fn policy_from_spec_clamps_like_the_local_runner() {
        let yaml = r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {name: demo}
spec:
  dataset: {format: crbugbench, source: "file://x.jsonl"}
  agent: {harness: {name: single-shot, version: "1.0.0"}}
  matrix: {models: [{name: a, provider: p}]}
  providers: {p: {baseUrl: "http://localhost", apiKind: openai-chat}}
  storage: {results: "file://r"}
  parallelism: 12
  retries: 3
  suspend: true
"#;
        let mut spec = lightsout_api::validate::parse_run(yaml, "run").unwrap().spec;
        let p = Policy::from_spec(&spec, Backoff::default());
        assert_eq!((p.parallelism, p.retries, p.suspend, p.max_attempts()), (12, 3, true, 4));
        spec.parallelism = 0;
        spec.retries = -1;
        let p = Policy::from_spec(&spec, Backoff::default());
        assert_eq!((p.parallelism, p.retries, p.max_attempts()), (1, 0, 1));
    }
}
