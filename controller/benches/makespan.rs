//! Makespan benchmark: how close the controller's scheduling decision gets to the best possible
//! finish time, and what one decision costs.
//!
//! A cluster of 500 slots runs 10,000 trials with lognormal durations (median 10 min, σ 0.8,
//! seeded ChaCha). The scheduler knows each trial's duration only to ±30% (its estimate is the
//! true duration times a uniform factor in [0.7, 1.3]). A discrete-event loop drives the real
//! [`decide`]: every completion triggers one decision, as a reconcile would, over an
//! [`Observation`] rebuilt from scratch, as a reconcile does. Reported against the lower bound
//! max(longest trial, total work / slots):
//! - longest-first: the plan's order (longest estimate first) — target ≤ 1.05 × lower bound;
//! - FIFO: the same decision over the trials in dataset order;
//! - static sharding: the trials pre-split into 500 equal-count shards, each run sequentially
//!   (an Indexed Job).
//!
//! Under a queue (Kueue, issue 18): the same decision creates at most `parallelism` Jobs, and a
//! simulated Kueue admits them in creation order up to a quota that changes mid-run (borrowed
//! quota appears, then is reclaimed: the newest admitted are preempted back into the queue and
//! restart from scratch), with other tenants preempting 2% of the admitted trials every 30
//! minutes. Its lower bound is max(longest trial, the time by which the quota has supplied the
//! total work), ignoring the work preemption wastes — target ≤ 1.05 × that bound still.
//!
//! Then the cost of one decision (and of building its observation) at 100,000 trials.
//!
//! Run: `cargo bench -p lightsout-controller --bench makespan`

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use lightsout_controller::backoff::Backoff;
use lightsout_controller::budget::Budget;
use lightsout_controller::observation::{AttemptState, InfraReason, Observation};
use lightsout_controller::schedule::{decide, Policy};
use lightsout_core::plan::PlannedTrial;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SLOTS: u32 = 500;
const TRIALS: usize = 10_000;
const MEDIAN_MS: f64 = 600_000.0;
const SIGMA: f64 = 0.8;
const ESTIMATE_ERROR: f64 = 0.3;
const SEED: u64 = 5;
const TARGET: f64 = 1.05;

/// Trials in dataset order: their true and estimated durations.
struct Workload {
    true_ms: Vec<u64>,
    expected_ms: Vec<u64>,
}

impl Workload {
    fn generate(trials: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut true_ms = Vec::with_capacity(trials);
        let mut expected_ms = Vec::with_capacity(trials);
        for _ in 0..trials {
            let duration = MEDIAN_MS * (SIGMA * standard_normal(&mut rng)).exp();
            let factor = rng.random_range(1.0 - ESTIMATE_ERROR..=1.0 + ESTIMATE_ERROR);
            true_ms.push(duration.round().max(1.0) as u64);
            expected_ms.push((duration * factor).round().max(1.0) as u64);
        }
        Workload { true_ms, expected_ms }
    }

    fn lower_bound_ms(&self, slots: u32) -> f64 {
        let longest = *self.true_ms.iter().max().expect("trials") as f64;
        let total: u64 = self.true_ms.iter().sum();
        longest.max(total as f64 / f64::from(slots))
    }

    /// The trials as planned: `task` is the dataset index. Longest first sorts as
    /// `lightsout_core::plan::plan` does (expected duration descending, then id).
    fn plan(&self, longest_first: bool) -> Vec<PlannedTrial> {
        let mut trials: Vec<PlannedTrial> = self
            .expected_ms
            .iter()
            .enumerate()
            .map(|(i, &expected_ms)| PlannedTrial {
                id: format!("trial-{i:06}"),
                variant: 0,
                task: i as u32,
                context: None,
                repeat: 0,
                expected_ms,
            })
            .collect();
        if longest_first {
            trials.sort_unstable_by(|a, b| b.expected_ms.cmp(&a.expected_ms).then_with(|| a.id.cmp(&b.id)));
        }
        trials
    }
}

/// Box–Muller.
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn epoch() -> DateTime<Utc> {
    DateTime::from_timestamp(1_750_000_000, 0).expect("valid time")
}

fn policy(parallelism: u32) -> Policy {
    Policy { parallelism, retries: 2, suspend: false, backoff: Backoff::default() }
}

/// What the simulated cluster holds for one trial.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sim {
    Waiting,
    Running,
    Done,
}

/// Runs `trials` on `slots` slots with the real decision; returns the makespan (ms) and the
/// number of decisions.
fn simulate(trials: &[PlannedTrial], true_ms: &[u64], slots: u32) -> (u64, usize) {
    let policy = policy(slots);
    let mut sim = vec![Sim::Waiting; trials.len()];
    let mut completions: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut now_ms = 0u64;
    let mut decisions = 0;
    loop {
        // A reconcile: observe everything afresh, decide, create the Jobs.
        let mut observation = Observation::new(trials.len());
        for (i, state) in sim.iter().enumerate() {
            match state {
                Sim::Waiting => {}
                Sim::Running => observation.record(i, 1, AttemptState::Active),
                Sim::Done => observation.record(i, 1, AttemptState::Finished),
            }
        }
        let now = epoch() + chrono::Duration::milliseconds(now_ms as i64);
        let decision = decide(trials, &observation, &policy, &Budget::UNLIMITED, now);
        decisions += 1;
        for start in &decision.start {
            assert_eq!(sim[start.trial], Sim::Waiting, "a trial started twice");
            sim[start.trial] = Sim::Running;
            completions.push(Reverse((now_ms + true_ms[trials[start.trial].task as usize], start.trial)));
        }
        assert!(completions.len() <= slots as usize, "more than {slots} running");
        if decision.all_final() {
            return (now_ms, decisions);
        }
        // The next completion triggers the next reconcile.
        let Reverse((finish, trial)) = completions.pop().expect("trials left but nothing running: the run stalled");
        now_ms = finish;
        sim[trial] = Sim::Done;
    }
}

/// A quota over time: `base` slots, plus `borrowed` between `from_ms` and `until_ms`.
#[derive(Debug, Clone, Copy)]
struct Quota {
    base: u32,
    borrowed: u32,
    from_ms: u64,
    until_ms: u64,
}

impl Quota {
    fn at(&self, t_ms: u64) -> u32 {
        self.base + if (self.from_ms..self.until_ms).contains(&t_ms) { self.borrowed } else { 0 }
    }

    /// The moments the quota changes.
    fn changes(&self) -> [u64; 2] {
        [self.from_ms, self.until_ms]
    }

    /// The time by which the quota has supplied `work_ms` slot-milliseconds.
    fn time_to_supply(&self, work_ms: f64) -> f64 {
        let (base, borrowed) = (f64::from(self.base), f64::from(self.borrowed));
        let (from, until) = (self.from_ms as f64, self.until_ms as f64);
        let before = base * from;
        if work_ms <= before {
            return work_ms / base;
        }
        let during = (base + borrowed) * (until - from);
        if work_ms <= before + during {
            return from + (work_ms - before) / (base + borrowed);
        }
        until + (work_ms - before - during) / base
    }
}

/// A trial under the simulated queue.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Queued {
    /// No Job yet.
    NoJob,
    /// Its Job waits; `created` orders admission (Kueue's strict FIFO keeps a preempted Job's
    /// place).
    Waiting {
        created: u64,
    },
    Admitted {
        created: u64,
        admitted: u64,
        finish_ms: u64,
    },
    Done,
}

/// Runs `trials` with the real decision at `parallelism` Jobs, admitted by a simulated Kueue under
/// `quota`, other tenants preempting `preempt_share` of the admitted trials every
/// `preempt_every_ms`; returns the makespan (ms), the preemptions and the most Jobs admitted at
/// once.
fn simulate_queued(
    trials: &[PlannedTrial],
    true_ms: &[u64],
    parallelism: u32,
    quota: Quota,
    preempt_every_ms: u64,
    preempt_share: f64,
) -> (u64, usize, u32) {
    let policy = policy(parallelism);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut state = vec![Queued::NoJob; trials.len()];
    let (mut now_ms, mut sequence, mut preemptions, mut most_admitted) = (0u64, 0u64, 0usize, 0u32);
    loop {
        // A reconcile: Jobs waiting in the queue and admitted ones are both active.
        let mut observation = Observation::new(trials.len());
        for (i, s) in state.iter().enumerate() {
            match s {
                Queued::NoJob => {}
                Queued::Waiting { .. } | Queued::Admitted { .. } => observation.record(i, 1, AttemptState::Active),
                Queued::Done => observation.record(i, 1, AttemptState::Finished),
            }
        }
        let now = epoch() + chrono::Duration::milliseconds(now_ms as i64);
        let decision = decide(trials, &observation, &policy, &Budget::UNLIMITED, now);
        for start in &decision.start {
            assert_eq!(state[start.trial], Queued::NoJob, "a trial got a second Job");
            state[start.trial] = Queued::Waiting { created: sequence };
            sequence += 1;
        }
        if decision.all_final() {
            return (now_ms, preemptions, most_admitted);
        }
        // Kueue: reclaim quota that is gone (newest admitted first), then admit in creation order.
        let capacity = quota.at(now_ms) as usize;
        let mut admitted: Vec<(u64, usize)> = state
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Queued::Admitted { admitted, .. } => Some((*admitted, i)),
                _ => None,
            })
            .collect();
        if admitted.len() > capacity {
            admitted.sort_unstable();
            for &(_, i) in &admitted[capacity..] {
                let Queued::Admitted { created, .. } = state[i] else { unreachable!() };
                state[i] = Queued::Waiting { created };
                preemptions += 1;
            }
            admitted.truncate(capacity);
        }
        let mut waiting: Vec<(u64, usize)> = state
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Queued::Waiting { created } => Some((*created, i)),
                _ => None,
            })
            .collect();
        waiting.sort_unstable();
        for &(created, i) in waiting.iter().take(capacity.saturating_sub(admitted.len())) {
            let finish_ms = now_ms + true_ms[trials[i].task as usize];
            state[i] = Queued::Admitted { created, admitted: sequence, finish_ms };
            sequence += 1;
        }
        let running = state.iter().filter(|s| matches!(s, Queued::Admitted { .. })).count() as u32;
        most_admitted = most_admitted.max(running);
        // The next event: a completion, a quota change or another tenant's preemption.
        let next_finish = state
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Queued::Admitted { finish_ms, .. } => Some((*finish_ms, i)),
                _ => None,
            })
            .min();
        let next_change = quota.changes().into_iter().filter(|&t| t > now_ms).min();
        let next_preemption = (now_ms / preempt_every_ms + 1) * preempt_every_ms;
        let (finish_ms, trial) = next_finish.expect("Jobs waiting but none admitted: the run stalled");
        if finish_ms <= next_change.unwrap_or(u64::MAX).min(next_preemption) {
            now_ms = finish_ms;
            state[trial] = Queued::Done;
        } else if next_change.is_some_and(|t| t <= next_preemption) {
            now_ms = next_change.expect("checked");
        } else {
            now_ms = next_preemption;
            for s in state.iter_mut() {
                if let Queued::Admitted { created, .. } = *s {
                    if rng.random::<f64>() < preempt_share {
                        *s = Queued::Waiting { created };
                        preemptions += 1;
                    }
                }
            }
        }
    }
}

/// Static sharding: 500 shards of equal count in dataset order, each run sequentially.
fn static_sharding(true_ms: &[u64], shards: u32) -> u64 {
    let per_shard = true_ms.len().div_ceil(shards as usize);
    true_ms.chunks(per_shard).map(|shard| shard.iter().sum::<u64>()).max().unwrap_or(0)
}

fn hours(ms: f64) -> f64 {
    ms / 3_600_000.0
}

fn line(name: &str, makespan_ms: u64, bound_ms: f64, extra: &str) -> f64 {
    let ratio = makespan_ms as f64 / bound_ms;
    println!("{name}: makespan {:.2} h = {ratio:.3} × lower bound{extra}", hours(makespan_ms as f64));
    ratio
}

/// A mid-run state of `n` trials: 40% finished, `SLOTS` active, 1% in backoff or due for a
/// retry, 0.1% out of retries, the rest waiting.
fn mid_run(n: usize) -> Vec<(usize, u32, AttemptState)> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut records = Vec::with_capacity(n);
    let mut active = 0;
    for i in 0..n {
        let roll: f64 = rng.random();
        let failed_at = epoch() + chrono::Duration::seconds(rng.random_range(0..120));
        let infra = AttemptState::InfraFailed { at: failed_at, reason: InfraReason::Evicted };
        if roll < 0.4 {
            records.push((i, 1, AttemptState::Finished));
        } else if roll < 0.41 {
            records.push((i, 1, infra));
        } else if roll < 0.411 {
            records.push((i, 3, infra));
        } else if active < SLOTS && roll < 0.5 {
            active += 1;
            records.push((i, 1, AttemptState::Active));
        }
    }
    records
}

/// Median cost of building the observation and of one decision over `n` trials (the median,
/// so that other work on the machine does not skew it), and the trials started per decision.
fn decision_cost(n: usize) -> (Duration, Duration, usize) {
    let workload = Workload::generate(n, SEED);
    let trials = workload.plan(true);
    let records = mid_run(n);
    let means = [Some(0.12)];
    let budget = Budget { max_usd: Some(1e9), spent_usd: 1234.5, variant_mean_usd: &means, prior_usd: 0.2 };
    // One more slot than the active Jobs, so each decision starts a trial.
    let policy = policy(SLOTS + 1);
    let now = epoch() + chrono::Duration::seconds(60);
    let rounds = 201;
    let mut build = Vec::with_capacity(rounds);
    let mut decide_time = Vec::with_capacity(rounds);
    let mut started = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        let mut observation = Observation::new(n);
        for &(trial, attempt, state) in &records {
            observation.record(trial, attempt, state);
        }
        build.push(start.elapsed());
        let start = Instant::now();
        let decision = decide(&trials, std::hint::black_box(&observation), &policy, &budget, now);
        decide_time.push(start.elapsed());
        started = decision.start.len();
        std::hint::black_box(&decision);
    }
    build.sort_unstable();
    decide_time.sort_unstable();
    (build[rounds / 2], decide_time[rounds / 2], started)
}

fn main() {
    let workload = Workload::generate(TRIALS, SEED);
    let bound = workload.lower_bound_ms(SLOTS);
    let longest = *workload.true_ms.iter().max().expect("trials") as f64;
    let work: u64 = workload.true_ms.iter().sum();
    println!(
        "workload: {TRIALS} trials on {SLOTS} slots, lognormal durations (median 10 min, σ {SIGMA}), estimates ±{:.0}%, seed {SEED}",
        ESTIMATE_ERROR * 100.0
    );
    println!(
        "lower bound {:.2} h = max(longest trial {:.2} h, total work / slots {:.2} h)",
        hours(bound),
        hours(longest),
        hours(work as f64 / f64::from(SLOTS))
    );

    let (longest_first, decisions_lf) = simulate(&workload.plan(true), &workload.true_ms, SLOTS);
    let (fifo, decisions_fifo) = simulate(&workload.plan(false), &workload.true_ms, SLOTS);
    let sharded = static_sharding(&workload.true_ms, SLOTS);
    let ratio = line("longest-first", longest_first, bound, &format!(" ({decisions_lf} decisions; target ≤ {TARGET})"));
    line("fifo", fifo, bound, &format!(" ({decisions_fifo} decisions)"));
    line("static sharding", sharded, bound, &format!(" ({SLOTS} shards of {} trials)", TRIALS / SLOTS as usize));

    // The same over other seeds, so the figure is not one lucky draw.
    let seeds = 1..=5;
    let mut worst = [0.0f64; 3];
    for seed in seeds.clone() {
        let w = Workload::generate(TRIALS, seed);
        let bound = w.lower_bound_ms(SLOTS);
        let ratios = [
            simulate(&w.plan(true), &w.true_ms, SLOTS).0 as f64 / bound,
            simulate(&w.plan(false), &w.true_ms, SLOTS).0 as f64 / bound,
            static_sharding(&w.true_ms, SLOTS) as f64 / bound,
        ];
        for (worst, ratio) in worst.iter_mut().zip(ratios) {
            *worst = worst.max(ratio);
        }
    }
    println!(
        "seeds {}..={}: worst longest-first {:.3}, fifo {:.3}, static sharding {:.3} × lower bound",
        seeds.start(),
        seeds.end(),
        worst[0],
        worst[1],
        worst[2]
    );

    // Under a queue whose quota changes mid-run, with preemptions.
    let hour = 3_600_000;
    let quota = Quota { base: 300, borrowed: 200, from_ms: hour, until_ms: 3 * hour };
    let mut worst_queued = 0.0f64;
    for seed in seeds.clone() {
        let w = Workload::generate(TRIALS, seed);
        let work: u64 = w.true_ms.iter().sum();
        let longest = *w.true_ms.iter().max().expect("trials") as f64;
        let bound = longest.max(quota.time_to_supply(work as f64));
        let (makespan, preempted, most) = simulate_queued(&w.plan(true), &w.true_ms, SLOTS, quota, hour / 2, 0.02);
        let ratio = makespan as f64 / bound;
        worst_queued = worst_queued.max(ratio);
        if seed == SEED {
            println!(
                "queued (quota 300, +200 borrowed from 1 h to 3 h, 2% preempted every 30 min, parallelism {SLOTS}): \
                 makespan {:.2} h = {ratio:.3} × lower bound {:.2} h; {preempted} preemptions; at most {most} admitted",
                hours(makespan as f64),
                hours(bound)
            );
        }
    }
    println!("seeds {}..={}: worst queued {:.3} × lower bound", seeds.start(), seeds.end(), worst_queued);

    for n in [10_000, 100_000] {
        let (build, decision, started) = decision_cost(n);
        println!(
            "decision cost at {n} trials: {:.1} µs per decide ({:.1} ns per trial), {:.1} µs to build the observation (medians of 201 calls; {started} started per call)",
            decision.as_secs_f64() * 1e6,
            decision.as_secs_f64() * 1e9 / n as f64,
            build.as_secs_f64() * 1e6,
        );
    }

    assert!(ratio <= TARGET, "longest-first makespan {ratio:.3} × lower bound exceeds the {TARGET} target");
    assert!(worst[0] <= TARGET, "longest-first makespan {:.3} × lower bound exceeds the {TARGET} target", worst[0]);
    assert!(worst_queued <= TARGET, "queued makespan {worst_queued:.3} × lower bound exceeds the {TARGET} target");
}
