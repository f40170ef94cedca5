//! Property tests of the scheduling decision, driven through a simulated cluster.
//!
//! Each case plans random trials (durations, per-attempt outcomes: an agent outcome or an
//! infrastructure failure), random `parallelism`, `retries` and backoff, and optionally a budget,
//! then runs a discrete-event loop: every reconcile rebuilds the observation from the simulated
//! Jobs (as a restarted controller would), calls `decide`, creates the Jobs, and advances to the
//! next Job completion or requeue time. Checked against an independent oracle on every
//! decision, and at the end.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use lightsout_controller::backoff::Backoff;
use lightsout_controller::budget::Budget;
use lightsout_controller::observation::{AttemptState, InfraReason, Observation};
use lightsout_controller::schedule::{decide, Decision, Policy};
use lightsout_core::plan::PlannedTrial;
use proptest::prelude::*;

/// How one attempt of a trial ends, and after how long.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ends {
    Agent,
    Infra,
}

#[derive(Debug, Clone)]
struct TrialScript {
    expected_s: u64,
    variant: u32,
    /// Attempt k (1-based) runs `attempts[k-1]`; past the end, attempts end with an agent outcome
    /// after 1 s.
    attempts: Vec<(Ends, u64)>,
    cost_usd: f64,
}

#[derive(Debug, Clone)]
struct Scenario {
    trials: Vec<TrialScript>,
    parallelism: u32,
    retries: u32,
    base_s: u64,
    cap_s: u64,
    /// `(maxUSD, prior)`; `None`: no budget.
    budget: Option<(f64, f64)>,
    /// Reconciles record the observed Jobs in reverse order on odd steps.
    reverse_odd: bool,
}

/// One simulated Job.
#[derive(Debug, Clone, Copy)]
struct Job {
    trial: usize,
    attempt: u32,
    started_ms: u64,
    /// When it ends, and how; the Job is active before that time.
    ends_ms: u64,
    ends: Ends,
}

fn epoch() -> DateTime<Utc> {
    DateTime::from_timestamp(1_750_000_000, 0).unwrap()
}

fn time(ms: u64) -> DateTime<Utc> {
    epoch() + chrono::Duration::milliseconds(ms as i64)
}

struct Sim<'a> {
    scenario: &'a Scenario,
    plan: Vec<PlannedTrial>,
    /// Plan index → script index.
    script_of: Vec<usize>,
    policy: Policy,
    jobs: Vec<Job>,
    now_ms: u64,
    max_usd: Option<f64>,
    steps: usize,
}

impl<'a> Sim<'a> {
    fn new(scenario: &'a Scenario) -> Self {
        let mut plan: Vec<PlannedTrial> = scenario
            .trials
            .iter()
            .enumerate()
            .map(|(i, t)| PlannedTrial {
                id: format!("trial-{i:03}"),
                variant: t.variant,
                task: i as u32,
                context: None,
                repeat: 0,
                expected_ms: t.expected_s * 1000,
            })
            .collect();
        plan.sort_by(|a, b| b.expected_ms.cmp(&a.expected_ms).then_with(|| a.id.cmp(&b.id)));
        let script_of = plan.iter().map(|t| t.task as usize).collect();
        let policy = Policy {
            parallelism: scenario.parallelism,
            retries: scenario.retries,
            suspend: false,
            backoff: Backoff { base: Duration::from_secs(scenario.base_s), cap: Duration::from_secs(scenario.cap_s) },
        };
        Sim {
            scenario,
            plan,
            script_of,
            policy,
            jobs: Vec::new(),
            now_ms: 0,
            max_usd: scenario.budget.map(|b| b.0),
            steps: 0,
        }
    }

    fn script(&self, trial: usize) -> &TrialScript {
        &self.scenario.trials[self.script_of[trial]]
    }

    fn active(&self, job: &Job) -> bool {
        job.ends_ms > self.now_ms
    }

    /// The observation a freshly started controller builds from the Jobs (all kept).
    fn observe(&self) -> Observation {
        let mut observation = Observation::new(self.plan.len());
        let record = |observation: &mut Observation, job: &Job| {
            let state = if self.active(job) {
                AttemptState::Active
            } else {
                match job.ends {
                    Ends::Agent => AttemptState::Finished,
                    Ends::Infra => AttemptState::InfraFailed { at: time(job.ends_ms), reason: InfraReason::Evicted },
                }
            };
            observation.record(job.trial, job.attempt, state);
        };
        if self.scenario.reverse_odd && self.steps % 2 == 1 {
            self.jobs.iter().rev().for_each(|job| record(&mut observation, job));
        } else {
            self.jobs.iter().for_each(|job| record(&mut observation, job));
        }
        observation
    }

    /// Recorded spend (finished Jobs; infrastructure failures cost nothing here) and the mean
    /// cost per variant of trials with an agent outcome.
    fn spend(&self) -> (f64, Vec<Option<f64>>) {
        let mut spent = 0.0;
        let mut by_variant: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
        for job in self.jobs.iter().filter(|j| !self.active(j) && j.ends == Ends::Agent) {
            let script = self.script(job.trial);
            spent += script.cost_usd;
            let entry = by_variant.entry(script.variant).or_default();
            entry.0 += script.cost_usd;
            entry.1 += 1;
        }
        let means = (0..2).map(|v| by_variant.get(&v).map(|(sum, n)| sum / f64::from(*n))).collect();
        (spent, means)
    }

    fn decide(&self) -> Decision {
        let (spent, means) = self.spend();
        let prior = self.scenario.budget.map_or(0.0, |b| b.1);
        let budget = Budget { max_usd: self.max_usd, spent_usd: spent, variant_mean_usd: &means, prior_usd: prior };
        decide(&self.plan, &self.observe(), &self.policy, &budget, time(self.now_ms))
    }

    /// The trial's Jobs, in attempt order.
    fn attempts(&self, trial: usize) -> Vec<Job> {
        let mut jobs: Vec<Job> = self.jobs.iter().filter(|j| j.trial == trial).copied().collect();
        jobs.sort_by_key(|j| j.attempt);
        jobs
    }

    /// The oracle: may `trial` start attempt `attempt` now?
    fn startable(&self, trial: usize) -> Option<u32> {
        let jobs = self.attempts(trial);
        let Some(last) = jobs.last() else { return Some(1) };
        if self.active(last) || last.ends == Ends::Agent || last.attempt > self.scenario.retries {
            return None;
        }
        let delay = self.policy.backoff.delay(last.attempt).as_millis() as u64;
        (self.now_ms >= last.ends_ms + delay).then_some(last.attempt + 1)
    }

    fn in_flight_estimate(&self, trial: usize, means: &[Option<f64>]) -> f64 {
        let prior = self.scenario.budget.map_or(0.0, |b| b.1);
        means[self.plan[trial].variant as usize].unwrap_or(prior)
    }

    /// Checks one decision against the oracle, then creates its Jobs.
    fn apply(&mut self, decision: &Decision) {
        let startable: Vec<(usize, u32)> =
            (0..self.plan.len()).filter_map(|t| self.startable(t).map(|a| (t, a))).collect();
        let active = self.jobs.iter().filter(|j| self.active(j)).count();
        let slots = (self.scenario.parallelism as usize).saturating_sub(active);
        let starts: Vec<(usize, u32)> = decision.start.iter().map(|s| (s.trial, s.attempt)).collect();

        // Longest first: the starts are the first startable trials in plan order, with the
        // attempt the oracle expects; all of them when neither slots nor the budget stop it.
        assert!(starts.len() <= slots, "{} starts with {slots} free slots", starts.len());
        assert_eq!(starts[..], startable[..starts.len()], "not the first startable trials in plan order");
        if self.max_usd.is_none() {
            assert_eq!(starts.len(), slots.min(startable.len()), "a free slot left unused");
        }

        // No attempt started twice; numbering follows the observed attempts.
        let existing: HashSet<(usize, u32)> = self.jobs.iter().map(|j| (j.trial, j.attempt)).collect();
        for &(trial, attempt) in &starts {
            assert!(!existing.contains(&(trial, attempt)), "attempt {attempt} of trial {trial} started twice");
            assert!(attempt <= self.scenario.retries + 1, "attempt {attempt} beyond retries");
        }

        // The budget: each start happened while spent + in-flight < maxUSD.
        if let Some(max) = self.max_usd {
            let (spent, means) = self.spend();
            let mut in_flight: f64 =
                self.jobs.iter().filter(|j| self.active(j)).map(|j| self.in_flight_estimate(j.trial, &means)).sum();
            for &(trial, _) in &starts {
                assert!(spent + in_flight < max + 1e-4, "started at {spent} + {in_flight} ≥ {max}");
                in_flight += self.in_flight_estimate(trial, &means);
            }
            if starts.len() < slots.min(startable.len()) {
                assert!(spent + in_flight >= max - 1e-4, "stopped below the budget: {spent} + {in_flight} < {max}");
                assert!(decision.budget_exceeded);
            }
        }

        for (trial, attempt) in starts {
            let script = self.script(trial);
            let (ends, duration_s) = script.attempts.get(attempt as usize - 1).copied().unwrap_or((Ends::Agent, 1));
            self.jobs.push(Job {
                trial,
                attempt,
                started_ms: self.now_ms,
                ends_ms: self.now_ms + duration_s * 1000,
                ends,
            });
        }
        let active = self.jobs.iter().filter(|j| self.active(j)).count();
        assert!(active <= self.scenario.parallelism as usize, "{active} active > parallelism");
    }

    /// Runs to the end; returns the number of decisions.
    fn run(&mut self) -> usize {
        let mut decisions = 0;
        loop {
            let decision = self.decide();
            decisions += 1;
            self.apply(&decision);
            self.steps += 1;
            // A second reconcile right after creating the Jobs, by a fresh controller: nothing new.
            let again = self.decide();
            assert_eq!(again.start, [], "a second reconcile started more");
            if decision.all_final() {
                return decisions;
            }
            let next_completion = self.jobs.iter().filter(|j| self.active(j)).map(|j| j.ends_ms).min();
            let requeue = decision.requeue_at.map(|at| (at - epoch()).num_milliseconds() as u64);
            match next_completion.into_iter().chain(requeue).min() {
                Some(next) => {
                    assert!(next > self.now_ms, "time must advance");
                    self.now_ms = next;
                }
                None => {
                    // Nothing runs and nothing is due: only the budget may stop a run, and raising
                    // it resumes creation.
                    assert!(decision.budget_exceeded, "the run stalled without a reason: {decision:?}");
                    assert!(self.max_usd.is_some());
                    self.max_usd = None;
                }
            }
            assert!(decisions < 10_000, "the simulation does not end");
        }
    }

    /// Every trial is final, and final for the right reason.
    fn check_final(&self) {
        let decision = self.decide();
        assert!(decision.all_final());
        assert_eq!(decision.counts.total, self.plan.len());
        for trial in 0..self.plan.len() {
            let jobs = self.attempts(trial);
            let last = jobs.last().expect("every trial ran");
            // Attempts are numbered 1, 2, … without gaps or repeats.
            assert!(jobs.iter().enumerate().all(|(i, j)| j.attempt == i as u32 + 1));
            // Every attempt but the last failed on infrastructure, and each retry waited out its
            // backoff.
            for pair in jobs.windows(2) {
                assert_eq!(pair[0].ends, Ends::Infra, "an agent outcome was retried");
                let delay = self.policy.backoff.delay(pair[0].attempt).as_millis() as u64;
                assert!(pair[1].started_ms >= pair[0].ends_ms + delay, "a retry started before its backoff");
            }
            match last.ends {
                Ends::Agent => assert!(last.attempt <= self.scenario.retries + 1),
                Ends::Infra => {
                    assert_eq!(last.attempt, self.scenario.retries + 1, "infra-failed before its retries ran out");
                    assert!(decision.infra_failed.iter().any(|f| f.trial == trial && f.attempts == last.attempt));
                }
            }
        }
        let infra =
            (0..self.plan.len()).filter(|&t| self.attempts(t).last().is_some_and(|j| j.ends == Ends::Infra)).count();
        assert_eq!((decision.counts.infra_failed, decision.infra_failed.len()), (infra, infra));
        assert_eq!(decision.counts.finished, self.plan.len() - infra);
    }
}

fn script() -> impl Strategy<Value = TrialScript> {
    let attempt = (prop_oneof![3 => Just(Ends::Agent), 2 => Just(Ends::Infra)], 1u64..600);
    (1u64..3600, 0u32..2, prop::collection::vec(attempt, 0..6), 1u32..200).prop_map(
        |(expected_s, variant, attempts, cents)| TrialScript {
            expected_s,
            variant,
            attempts,
            cost_usd: f64::from(cents) / 100.0,
        },
    )
}

fn scenario(with_budget: bool) -> impl Strategy<Value = Scenario> {
    let budget = if with_budget {
        (1u32..4000, 0u32..300)
            .prop_map(|(max, prior)| Some((f64::from(max) / 100.0, f64::from(prior) / 100.0)))
            .boxed()
    } else {
        Just(None).boxed()
    };
    (prop::collection::vec(script(), 1..40), 1u32..9, 0u32..4, 1u64..60, 1u64..300, budget, any::<bool>()).prop_map(
        |(trials, parallelism, retries, base_s, cap_s, budget, reverse_odd)| Scenario {
            trials,
            parallelism,
            retries,
            base_s,
            cap_s,
            budget,
            reverse_odd,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Never more than parallelism active, no attempt started twice, longest first, retries
    /// only after their backoff and only for infrastructure failures, and every trial final
    /// at the end.
    #[test]
    fn every_trial_ends_final_within_the_limits(scenario in scenario(false)) {
        let mut sim = Sim::new(&scenario);
        let decisions = sim.run();
        prop_assert!(decisions >= 1);
        sim.check_final();
    }

    /// The same with a budget: no trial starts once spend and in-flight estimates reach it, the
    /// run stops there, and raising it lets the run finish.
    #[test]
    fn the_budget_bounds_starts_and_raising_it_finishes_the_run(scenario in scenario(true)) {
        let mut sim = Sim::new(&scenario);
        sim.run();
        sim.check_final();
    }
}
