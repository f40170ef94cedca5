//! The controller's Prometheus metrics, kept in an own [`Registry`] (not the process-global one)
//! and served by [`crate::http`] at `GET /metrics`.
//!
//! Families (names carry their unit; counters end in `_total`):
//!
//! - `lightsout_trials_total{namespace,run,variant,outcome}` — trials that reached a final result;
//!   `outcome` is one of `ok`, `agent-failed`, `timed-out`, `budget-exceeded`, `infra-failed`.
//! - `lightsout_trial_attempt_infra_failures_total{namespace,run,reason}` — attempts that failed on
//!   infrastructure, retried or not; `reason` is a short Kubernetes-ish reason such as `Evicted`,
//!   `ImagePullBackOff`, `NodeLost`, `WorkerInfraExit`, `NeverStarted`, `InfraFailure`.
//! - `lightsout_trial_duration_seconds{namespace,run,variant}` — histogram of final trials'
//!   durations, buckets from 10 s to 4 h.
//! - `lightsout_tokens_total{namespace,run,variant,model,role,kind}` — metered tokens; `role` is
//!   `agent` or `judge`, `kind` is `input`, `output`, `cached_read`, `cache_write` or `reasoning`.
//! - `lightsout_cost_usd_total{namespace,run,variant,model,role}` — priced spend in USD.
//! - `lightsout_unpriced_calls_total{namespace,run,model,role}` — model calls whose cost is unknown
//!   (they add nothing to the cost counter).
//! - `lightsout_run_budget_usd{namespace,run}` — the run's budget, present only while it has one.
//! - `lightsout_run_spend_usd{namespace,run}` — the run's spend as recorded in its status.
//! - `lightsout_active_trials{namespace,run}` / `lightsout_pending_trials{namespace,run}` — trials
//!   with a Job (queued ones included) / waiting to be scheduled.
//! - `lightsout_trials_queued{namespace,run}` — trials whose Job waits for its queue (Kueue) to
//!   admit it (suspended): waiting, never counted as failing to start.
//! - `lightsout_trials_preempted{namespace,run}` — runs of trial attempts that their queue
//!   preempted and that ran again (counted as each attempt ends), as `status.trials.preempted`.
//! - `lightsout_trial_queue_wait_seconds{namespace,run}` — histogram of how long trial Jobs
//!   waited for their queue to admit them (creation to admission; a readmission after a
//!   preemption counts again), buckets from 1 s to 4 h. Admissions seen by this process only.
//! - `lightsout_judge_calls_total{namespace,run,model}` / `lightsout_judge_failures_total{namespace,run,model}`
//!   — judge votes requested / votes that failed.
//! - `lightsout_provider_rate_limited_total{provider}` / `lightsout_provider_retries_total{provider}`
//!   — rate-limit responses and retries seen by the model clients.
//! - `lightsout_run_complete{namespace,run}` — 1 once the run is `Complete`, else 0.
//! - `lightsout_run_last_progress_timestamp_seconds{namespace,run}` — Unix time of the run's last
//!   progress: a trial started or reached its final result (this process's start counts as
//!   progress, so a restarted controller delays a "stuck" alert by at most its window).
//! - `lightsout_variant_recall{namespace,run,variant,k}` — a variant's recall@k so far (0..1).
//! - `lightsout_variant_composite_score{namespace,run,variant}` — a variant's SWE-PRBench weighted
//!   composite so far (0..1); only in runs scored by that protocol.
//! - `lightsout_schedule_regressed{namespace,schedule}` — 1 when an `EvaluationSchedule`'s last
//!   compared run regressed against its baseline, else 0.
//! - `lightsout_schedule_comparisons_total{namespace,schedule,verdict}` — runs compared, by
//!   verdict (`Regressed`, `Improved`, `NoSignificantChange`, `NoBaseline`).
//! - `lightsout_reconcile_duration_seconds` — histogram of reconcile durations (1 ms … 10 s),
//!   `lightsout_reconciles_total`, `lightsout_reconcile_errors_total{category}`.
//! - `lightsout_leader` — 1 while this replica holds the leader lease, else 0.
//!
//! Cardinality is bounded: no family carries a trial or task label (a run has thousands of
//! trials; those belong in the run's status and results, not in time series). The label values
//! come from small sets: the runs that exist (and [`Metrics::forget_run`] drops a run's series
//! when it is deleted), the variants and models a run's spec declares, two roles, five token kinds,
//! five outcomes, a handful of infrastructure reasons and error categories, and the configured
//! providers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use lightsout_model::Usage;
use prometheus::{
    Counter, CounterVec, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// A run's identity in metric labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    pub namespace: String,
    pub run: String,
}

impl RunKey {
    pub fn new(namespace: impl Into<String>, run: impl Into<String>) -> RunKey {
        RunKey { namespace: namespace.into(), run: run.into() }
    }
}

/// Who spent the tokens: the agent under evaluation or a judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Agent,
    Judge,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Judge => "judge",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Buckets for queue waits: 1 s … 4 h.
const QUEUE_WAIT_BUCKETS: [f64; 12] =
    [1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0];

/// Buckets for trial durations: 10 s … 4 h.
pub const TRIAL_DURATION_BUCKETS: &[f64] =
    &[10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 5400.0, 7200.0, 14400.0];

/// Buckets for reconcile durations: 1 ms … 10 s.
pub const RECONCILE_DURATION_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The families that carry run labels, to remove a run's series in [`Metrics::forget_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum RunFamily {
    Trials,
    InfraFailures,
    TrialDuration,
    Tokens,
    Cost,
    Unpriced,
    Budget,
    Spend,
    Active,
    Pending,
    Queued,
    Preempted,
    QueueWait,
    JudgeCalls,
    JudgeFailures,
    Complete,
    LastProgress,
    Recall,
    Composite,
}

/// A run's series: each family with the label values (in the family's label order) of one series.
type RunSeries = BTreeSet<(RunFamily, Vec<String>)>;

/// A run's trial gauges: with a Job (queued included), not started, queued, and runs preempted.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrialGauges {
    pub active: u64,
    pub pending: u64,
    pub queued: u64,
    pub preempted: u64,
}

/// The controller's metrics. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Metrics {
    registry: Registry,
    trials: IntCounterVec,
    infra_failures: IntCounterVec,
    trial_duration: HistogramVec,
    tokens: IntCounterVec,
    cost: CounterVec,
    unpriced: IntCounterVec,
    budget: GaugeVec,
    spend: GaugeVec,
    active: IntGaugeVec,
    pending: IntGaugeVec,
    queued: IntGaugeVec,
    preempted: IntGaugeVec,
    queue_wait: HistogramVec,
    judge_calls: IntCounterVec,
    judge_failures: IntCounterVec,
    complete: IntGaugeVec,
    last_progress: GaugeVec,
    recall: GaugeVec,
    composite: GaugeVec,
    schedule_regressed: IntGaugeVec,
    schedule_comparisons: IntCounterVec,
    provider_rate_limited: IntCounterVec,
    provider_retries: IntCounterVec,
    reconcile_duration: Histogram,
    reconcile_errors: IntCounterVec,
    reconciles: IntCounter,
    leader: IntGauge,
    /// Per run, the label values (in each family's label order) of every series created for it.
    run_series: Mutex<BTreeMap<RunKey, RunSeries>>,
    /// Per provider, the last cumulative (rate_limited, retries) totals seen.
    provider_last: Mutex<HashMap<String, (u64, u64)>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Adds a non-negative, finite amount to a float counter; anything else is ignored (a counter
/// never decreases, and `inc_by` asserts on negatives in debug builds).
fn add_float(counter: &Counter, v: f64) {
    if v.is_finite() && v >= 0.0 {
        counter.inc_by(v);
    } else {
        tracing::warn!(value = v, "ignoring a negative or non-finite increment of a float counter");
    }
}

impl Metrics {
    /// Creates every family and registers it in a fresh registry.
    pub fn new() -> Metrics {
        let registry = Registry::new();

        fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter options");
            registry.register(Box::new(c.clone())).expect("metric registered once");
            c
        }
        fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge options");
            registry.register(Box::new(g.clone())).expect("metric registered once");
            g
        }
        fn int_gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge options");
            registry.register(Box::new(g.clone())).expect("metric registered once");
            g
        }

        let trials = counter_vec(
            &registry,
            "lightsout_trials_total",
            "Trials that reached a final result, by outcome.",
            &["namespace", "run", "variant", "outcome"],
        );
        let infra_failures = counter_vec(
            &registry,
            "lightsout_trial_attempt_infra_failures_total",
            "Trial attempts that failed on infrastructure, retried or not, by reason.",
            &["namespace", "run", "reason"],
        );
        let trial_duration = HistogramVec::new(
            HistogramOpts::new("lightsout_trial_duration_seconds", "Duration of trials that reached a final result.")
                .buckets(TRIAL_DURATION_BUCKETS.to_vec()),
            &["namespace", "run", "variant"],
        )
        .expect("valid histogram options");
        registry.register(Box::new(trial_duration.clone())).expect("metric registered once");
        let tokens = counter_vec(
            &registry,
            "lightsout_tokens_total",
            "Metered model tokens, by role (agent or judge) and kind.",
            &["namespace", "run", "variant", "model", "role", "kind"],
        );
        let cost = CounterVec::new(
            Opts::new("lightsout_cost_usd_total", "Priced model spend in USD (unpriced calls add nothing)."),
            &["namespace", "run", "variant", "model", "role"],
        )
        .expect("valid counter options");
        registry.register(Box::new(cost.clone())).expect("metric registered once");
        let unpriced = counter_vec(
            &registry,
            "lightsout_unpriced_calls_total",
            "Model calls whose cost is unknown (no price for the model).",
            &["namespace", "run", "model", "role"],
        );
        let budget = gauge_vec(
            &registry,
            "lightsout_run_budget_usd",
            "The run's budget in USD (absent when the run has none).",
            &["namespace", "run"],
        );
        let spend =
            gauge_vec(&registry, "lightsout_run_spend_usd", "The run's recorded spend in USD.", &["namespace", "run"]);
        let active = int_gauge_vec(&registry, "lightsout_active_trials", "Trials running.", &["namespace", "run"]);
        let pending = int_gauge_vec(
            &registry,
            "lightsout_pending_trials",
            "Trials waiting to be scheduled.",
            &["namespace", "run"],
        );
        let queued = int_gauge_vec(
            &registry,
            "lightsout_trials_queued",
            "Trials whose Job waits for its queue to admit it.",
            &["namespace", "run"],
        );
        let preempted = int_gauge_vec(
            &registry,
            "lightsout_trials_preempted",
            "Runs of trial attempts their queue preempted and that ran again.",
            &["namespace", "run"],
        );
        let queue_wait = HistogramVec::new(
            HistogramOpts::new(
                "lightsout_trial_queue_wait_seconds",
                "How long trial Jobs waited for their queue to admit them.",
            )
            .buckets(QUEUE_WAIT_BUCKETS.to_vec()),
            &["namespace", "run"],
        )
        .expect("valid histogram options");
        registry.register(Box::new(queue_wait.clone())).expect("metric registered once");
        let judge_calls = counter_vec(
            &registry,
            "lightsout_judge_calls_total",
            "Judge votes requested.",
            &["namespace", "run", "model"],
        );
        let judge_failures = counter_vec(
            &registry,
            "lightsout_judge_failures_total",
            "Judge votes that failed.",
            &["namespace", "run", "model"],
        );
        let complete = int_gauge_vec(
            &registry,
            "lightsout_run_complete",
            "1 once the run is Complete (every trial final and judged), else 0.",
            &["namespace", "run"],
        );
        let last_progress = gauge_vec(
            &registry,
            "lightsout_run_last_progress_timestamp_seconds",
            "Unix time of the run's last progress: a trial started or reached its final result.",
            &["namespace", "run"],
        );
        let recall = gauge_vec(
            &registry,
            "lightsout_variant_recall",
            "A variant's recall@k over its scored trials so far.",
            &["namespace", "run", "variant", "k"],
        );
        let composite = gauge_vec(
            &registry,
            "lightsout_variant_composite_score",
            "A variant's SWE-PRBench weighted composite score so far.",
            &["namespace", "run", "variant"],
        );
        let schedule_regressed = int_gauge_vec(
            &registry,
            "lightsout_schedule_regressed",
            "1 when the schedule's last compared run regressed against its baseline, else 0.",
            &["namespace", "schedule"],
        );
        let schedule_comparisons = counter_vec(
            &registry,
            "lightsout_schedule_comparisons_total",
            "Runs of a schedule compared with their baseline, by verdict.",
            &["namespace", "schedule", "verdict"],
        );
        let provider_rate_limited = counter_vec(
            &registry,
            "lightsout_provider_rate_limited_total",
            "Rate-limited responses from a model provider.",
            &["provider"],
        );
        let provider_retries = counter_vec(
            &registry,
            "lightsout_provider_retries_total",
            "Retried requests to a model provider.",
            &["provider"],
        );
        let reconcile_duration = Histogram::with_opts(
            HistogramOpts::new("lightsout_reconcile_duration_seconds", "Duration of a reconcile.")
                .buckets(RECONCILE_DURATION_BUCKETS.to_vec()),
        )
        .expect("valid histogram options");
        registry.register(Box::new(reconcile_duration.clone())).expect("metric registered once");
        let reconcile_errors = counter_vec(
            &registry,
            "lightsout_reconcile_errors_total",
            "Reconciles that failed, by error category.",
            &["category"],
        );
        let reconciles = IntCounter::new("lightsout_reconciles_total", "Reconciles finished, failed or not.")
            .expect("valid counter options");
        registry.register(Box::new(reconciles.clone())).expect("metric registered once");
        let leader = IntGauge::new("lightsout_leader", "1 while this replica holds the leader lease, else 0.")
            .expect("valid gauge options");
        registry.register(Box::new(leader.clone())).expect("metric registered once");

        Metrics {
            registry,
            trials,
            infra_failures,
            trial_duration,
            tokens,
            cost,
            unpriced,
            budget,
            spend,
            active,
            pending,
            queued,
            preempted,
            queue_wait,
            judge_calls,
            judge_failures,
            complete,
            last_progress,
            recall,
            composite,
            schedule_regressed,
            schedule_comparisons,
            provider_rate_limited,
            provider_retries,
            reconcile_duration,
            reconcile_errors,
            reconciles,
            leader,
            run_series: Mutex::new(BTreeMap::new()),
            provider_last: Mutex::new(HashMap::new()),
        }
    }

    /// The registry holding every family (to gather or to register more collectors).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry in the Prometheus text exposition format 0.0.4.
    pub fn encode(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_else(|error| {
            tracing::error!(%error, "encoding metrics");
            String::new()
        })
    }

    /// Records that `values` (in `family`'s label order) is a series of `run`'s.
    fn track(&self, run: &RunKey, family: RunFamily, values: &[&str]) {
        let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        lock(&self.run_series).entry(run.clone()).or_default().insert((family, values));
    }

    fn untrack(&self, run: &RunKey, family: RunFamily, values: &[&str]) {
        let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        if let Some(set) = lock(&self.run_series).get_mut(run) {
            set.remove(&(family, values));
        }
    }

    /// A reconcile finished after `seconds`; `error_category` is set when it failed.
    pub fn reconcile_finished(&self, seconds: f64, error_category: Option<&str>) {
        self.reconciles.inc();
        if seconds.is_finite() && seconds >= 0.0 {
            self.reconcile_duration.observe(seconds);
        }
        if let Some(category) = error_category {
            self.reconcile_errors.with_label_values(&[category]).inc();
        }
    }

    /// A trial reached its final `outcome` (`ok`, `agent-failed`, `timed-out`, `budget-exceeded`,
    /// `infra-failed`), after `duration_seconds` when known.
    pub fn trial_final(&self, run: &RunKey, variant: &str, outcome: &str, duration_seconds: Option<f64>) {
        let labels = [run.namespace.as_str(), run.run.as_str(), variant, outcome];
        self.trials.with_label_values(&labels).inc();
        self.track(run, RunFamily::Trials, &labels);
        if let Some(seconds) = duration_seconds.filter(|s| s.is_finite() && *s >= 0.0) {
            let labels = [run.namespace.as_str(), run.run.as_str(), variant];
            self.trial_duration.with_label_values(&labels).observe(seconds);
            self.track(run, RunFamily::TrialDuration, &labels);
        }
    }

    /// One of `run`'s trial Jobs was admitted by its queue after waiting `seconds`.
    pub fn queue_wait(&self, run: &RunKey, seconds: f64) {
        let labels = [run.namespace.as_str(), run.run.as_str()];
        self.queue_wait.with_label_values(&labels).observe(seconds.max(0.0));
        self.track(run, RunFamily::QueueWait, &labels);
    }

    /// An attempt of one of `run`'s trials failed on infrastructure for `reason`.
    pub fn attempt_infra_failed(&self, run: &RunKey, reason: &str) {
        let labels = [run.namespace.as_str(), run.run.as_str(), reason];
        self.infra_failures.with_label_values(&labels).inc();
        self.track(run, RunFamily::InfraFailures, &labels);
    }

    /// Model usage of `calls` calls: tokens by kind always; `cost_usd` adds to the cost counter
    /// when known, otherwise the calls count as unpriced.
    #[allow(clippy::too_many_arguments)]
    pub fn usage(
        &self,
        run: &RunKey,
        variant: &str,
        model: &str,
        role: Role,
        usage: &Usage,
        cost_usd: Option<f64>,
        calls: u64,
    ) {
        let (ns, name, role) = (run.namespace.as_str(), run.run.as_str(), role.as_str());
        let kinds = [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cached_read", usage.cached_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("reasoning", usage.reasoning_tokens),
        ];
        for (kind, n) in kinds {
            let labels = [ns, name, variant, model, role, kind];
            self.tokens.with_label_values(&labels).inc_by(n);
            self.track(run, RunFamily::Tokens, &labels);
        }
        match cost_usd {
            Some(cost) => {
                let labels = [ns, name, variant, model, role];
                add_float(&self.cost.with_label_values(&labels), cost);
                self.track(run, RunFamily::Cost, &labels);
            }
            None => {
                let labels = [ns, name, model, role];
                self.unpriced.with_label_values(&labels).inc_by(calls);
                self.track(run, RunFamily::Unpriced, &labels);
            }
        }
    }

    /// `calls` more judge votes with `model`, of which `failures` failed.
    pub fn judge_calls(&self, run: &RunKey, model: &str, calls: u64, failures: u64) {
        let labels = [run.namespace.as_str(), run.run.as_str(), model];
        self.judge_calls.with_label_values(&labels).inc_by(calls);
        self.track(run, RunFamily::JudgeCalls, &labels);
        self.judge_failures.with_label_values(&labels).inc_by(failures);
        self.track(run, RunFamily::JudgeFailures, &labels);
    }

    /// A model client's CUMULATIVE rate-limited and retry totals for `provider`: adds only the
    /// increase since the previous call for that provider. A total lower than the previous one
    /// (a restarted client) adds nothing and becomes the new baseline.
    pub fn provider_totals(&self, provider: &str, rate_limited_total: u64, retries_total: u64) {
        let mut last = lock(&self.provider_last);
        let (prev_rate_limited, prev_retries) = last.get(provider).copied().unwrap_or((0, 0));
        let rate_limited_delta = rate_limited_total.saturating_sub(prev_rate_limited);
        let retries_delta = retries_total.saturating_sub(prev_retries);
        // Create the series even when nothing happened yet, so a provider shows up at 0.
        self.provider_rate_limited.with_label_values(&[provider]).inc_by(rate_limited_delta);
        self.provider_retries.with_label_values(&[provider]).inc_by(retries_delta);
        last.insert(provider.to_owned(), (rate_limited_total, retries_total));
    }

    /// The run's gauges: the budget (removed when the run has none), spend, active and pending trials.
    pub fn run_gauges(&self, run: &RunKey, budget_usd: Option<f64>, spend_usd: f64, trials: TrialGauges) {
        let TrialGauges { active, pending, queued, preempted } = trials;
        let labels = [run.namespace.as_str(), run.run.as_str()];
        match budget_usd {
            Some(budget) => {
                self.budget.with_label_values(&labels).set(budget);
                self.track(run, RunFamily::Budget, &labels);
            }
            None => {
                // Absent when it was never set: nothing to remove.
                let _ = self.budget.remove_label_values(&labels);
                self.untrack(run, RunFamily::Budget, &labels);
            }
        }
        self.spend.with_label_values(&labels).set(spend_usd);
        self.track(run, RunFamily::Spend, &labels);
        self.active.with_label_values(&labels).set(i64::try_from(active).unwrap_or(i64::MAX));
        self.track(run, RunFamily::Active, &labels);
        self.pending.with_label_values(&labels).set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.track(run, RunFamily::Pending, &labels);
        self.queued.with_label_values(&labels).set(i64::try_from(queued).unwrap_or(i64::MAX));
        self.track(run, RunFamily::Queued, &labels);
        self.preempted.with_label_values(&labels).set(i64::try_from(preempted).unwrap_or(i64::MAX));
        self.track(run, RunFamily::Preempted, &labels);
    }

    /// Whether the run is complete, and when it last made progress.
    pub fn run_progress(&self, run: &RunKey, complete: bool, last_progress: chrono::DateTime<chrono::Utc>) {
        let labels = [run.namespace.as_str(), run.run.as_str()];
        self.complete.with_label_values(&labels).set(i64::from(complete));
        self.track(run, RunFamily::Complete, &labels);
        self.last_progress.with_label_values(&labels).set(last_progress.timestamp_millis() as f64 / 1000.0);
        self.track(run, RunFamily::LastProgress, &labels);
    }

    /// A variant's scores so far: recall@k by k, and the SWE-PRBench composite when scored so.
    pub fn variant_scores(&self, run: &RunKey, variant: &str, recall: &BTreeMap<String, f64>, composite: Option<f64>) {
        for (k, value) in recall {
            let labels = [run.namespace.as_str(), run.run.as_str(), variant, k.as_str()];
            self.recall.with_label_values(&labels).set(*value);
            self.track(run, RunFamily::Recall, &labels);
        }
        if let Some(value) = composite {
            let labels = [run.namespace.as_str(), run.run.as_str(), variant];
            self.composite.with_label_values(&labels).set(value);
            self.track(run, RunFamily::Composite, &labels);
        }
    }

    /// A schedule's run was compared with its baseline. (Schedules are few and long-lived; their
    /// series stay until the controller restarts.)
    pub fn schedule_verdict(&self, schedule: &RunKey, verdict: &str) {
        let labels = [schedule.namespace.as_str(), schedule.run.as_str()];
        self.schedule_regressed.with_label_values(&labels).set(i64::from(verdict == "Regressed"));
        self.schedule_comparisons.with_label_values(&[labels[0], labels[1], verdict]).inc();
    }

    /// Whether this replica holds the leader lease.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Removes every series carrying `run`'s labels (when the run is deleted).
    pub fn forget_run(&self, run: &RunKey) {
        let Some(series) = lock(&self.run_series).remove(run) else {
            return;
        };
        for (family, values) in series {
            let result = match family {
                RunFamily::Trials => self.trials.remove_label_values(&values),
                RunFamily::InfraFailures => self.infra_failures.remove_label_values(&values),
                RunFamily::TrialDuration => self.trial_duration.remove_label_values(&values),
                RunFamily::Tokens => self.tokens.remove_label_values(&values),
                RunFamily::Cost => self.cost.remove_label_values(&values),
                RunFamily::Unpriced => self.unpriced.remove_label_values(&values),
                RunFamily::Budget => self.budget.remove_label_values(&values),
                RunFamily::Spend => self.spend.remove_label_values(&values),
                RunFamily::Active => self.active.remove_label_values(&values),
                RunFamily::Pending => self.pending.remove_label_values(&values),
                RunFamily::Queued => self.queued.remove_label_values(&values),
                RunFamily::Preempted => self.preempted.remove_label_values(&values),
                RunFamily::QueueWait => self.queue_wait.remove_label_values(&values),
                RunFamily::JudgeCalls => self.judge_calls.remove_label_values(&values),
                RunFamily::JudgeFailures => self.judge_failures.remove_label_values(&values),
                RunFamily::Complete => self.complete.remove_label_values(&values),
                RunFamily::LastProgress => self.last_progress.remove_label_values(&values),
                RunFamily::Recall => self.recall.remove_label_values(&values),
                RunFamily::Composite => self.composite.remove_label_values(&values),
            };
            if let Err(error) = result {
                tracing::debug!(%error, ?family, ?values, "removing a run's series");
            }
        }
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(run: &str) -> RunKey {
        RunKey::new("ns", run)
    }

    /// The value of the series whose line starts with `series` (name and labels), if present.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
            rest.trim().parse().ok()
        })
    }

    #[test]
    fn encode_contains_series_with_labels() {
        let m = Metrics::new();
        let r = key("r");
        m.trial_final(&r, "v", "ok", Some(42.0));
        m.attempt_infra_failed(&r, "Evicted");
        m.usage(
            &r,
            "v",
            "gpt",
            Role::Agent,
            &Usage {
                input_tokens: 100,
                output_tokens: 20,
                cached_read_tokens: 30,
                cache_write_tokens: 5,
                reasoning_tokens: 7,
            },
            Some(0.25),
            3,
        );
        m.judge_calls(&r, "judge-m", 4, 1);
        m.run_gauges(&r, Some(10.0), 2.5, TrialGauges { active: 3, pending: 7, queued: 2, preempted: 1 });
        m.queue_wait(&r, 42.0);
        m.run_progress(&r, false, chrono::DateTime::from_timestamp(1_700_000_000, 500_000_000).unwrap());
        m.variant_scores(&r, "v", &[("1".to_string(), 0.5), ("5".to_string(), 0.75)].into(), Some(0.42));
        m.provider_totals("openai", 2, 5);
        m.schedule_verdict(&key("nightly"), "Regressed");
        m.reconcile_finished(0.02, Some("kube"));
        m.reconcile_finished(0.01, None);
        m.set_leader(true);

        let text = m.encode();
        let expect = [
            (r#"lightsout_trials_total{namespace="ns",outcome="ok",run="r",variant="v"}"#, 1.0),
            (r#"lightsout_trial_attempt_infra_failures_total{namespace="ns",reason="Evicted",run="r"}"#, 1.0),
            (r#"lightsout_trial_duration_seconds_count{namespace="ns",run="r",variant="v"}"#, 1.0),
            (r#"lightsout_trial_duration_seconds_bucket{namespace="ns",run="r",variant="v",le="60"}"#, 1.0),
            (r#"lightsout_trial_duration_seconds_bucket{namespace="ns",run="r",variant="v",le="30"}"#, 0.0),
            (
                r#"lightsout_tokens_total{kind="input",model="gpt",namespace="ns",role="agent",run="r",variant="v"}"#,
                100.0,
            ),
            (
                r#"lightsout_tokens_total{kind="cached_read",model="gpt",namespace="ns",role="agent",run="r",variant="v"}"#,
                30.0,
            ),
            (
                r#"lightsout_tokens_total{kind="reasoning",model="gpt",namespace="ns",role="agent",run="r",variant="v"}"#,
                7.0,
            ),
            (r#"lightsout_cost_usd_total{model="gpt",namespace="ns",role="agent",run="r",variant="v"}"#, 0.25),
            (r#"lightsout_judge_calls_total{model="judge-m",namespace="ns",run="r"}"#, 4.0),
            (r#"lightsout_judge_failures_total{model="judge-m",namespace="ns",run="r"}"#, 1.0),
            (r#"lightsout_run_budget_usd{namespace="ns",run="r"}"#, 10.0),
            (r#"lightsout_run_spend_usd{namespace="ns",run="r"}"#, 2.5),
            (r#"lightsout_active_trials{namespace="ns",run="r"}"#, 3.0),
            (r#"lightsout_pending_trials{namespace="ns",run="r"}"#, 7.0),
            (r#"lightsout_trials_queued{namespace="ns",run="r"}"#, 2.0),
            (r#"lightsout_trials_preempted{namespace="ns",run="r"}"#, 1.0),
            (r#"lightsout_trial_queue_wait_seconds_count{namespace="ns",run="r"}"#, 1.0),
            (r#"lightsout_trial_queue_wait_seconds_bucket{namespace="ns",run="r",le="60"}"#, 1.0),
            (r#"lightsout_trial_queue_wait_seconds_bucket{namespace="ns",run="r",le="30"}"#, 0.0),
            (r#"lightsout_run_complete{namespace="ns",run="r"}"#, 0.0),
            (r#"lightsout_run_last_progress_timestamp_seconds{namespace="ns",run="r"}"#, 1_700_000_000.5),
            (r#"lightsout_variant_recall{k="1",namespace="ns",run="r",variant="v"}"#, 0.5),
            (r#"lightsout_variant_recall{k="5",namespace="ns",run="r",variant="v"}"#, 0.75),
            (r#"lightsout_variant_composite_score{namespace="ns",run="r",variant="v"}"#, 0.42),
            (r#"lightsout_provider_rate_limited_total{provider="openai"}"#, 2.0),
            (r#"lightsout_provider_retries_total{provider="openai"}"#, 5.0),
            (r#"lightsout_reconciles_total"#, 2.0),
            (r#"lightsout_schedule_regressed{namespace="ns",schedule="nightly"}"#, 1.0),
            (r#"lightsout_schedule_comparisons_total{namespace="ns",schedule="nightly",verdict="Regressed"}"#, 1.0),
            (r#"lightsout_reconcile_errors_total{category="kube"}"#, 1.0),
            (r#"lightsout_reconcile_duration_seconds_count"#, 2.0),
            (r#"lightsout_leader"#, 1.0),
        ];
        for (series, want) in expect {
            assert_eq!(value(&text, series), Some(want), "{series} in\n{text}");
        }
        assert!(text.contains("# TYPE lightsout_trial_duration_seconds histogram"));
        assert!(text.contains("# TYPE lightsout_run_spend_usd gauge"));
        // No trial or task label anywhere.
        assert!(!text.contains("trial=") && !text.contains("task="), "{text}");

        m.set_leader(false);
        assert_eq!(value(&m.encode(), "lightsout_leader"), Some(0.0));
    }

    #[test]
    fn forget_run_removes_only_that_runs_series() {
        let m = Metrics::new();
        let (a, b) = (key("a"), key("b"));
        for r in [&a, &b] {
            m.trial_final(r, "v", "ok", Some(100.0));
            m.attempt_infra_failed(r, "NodeLost");
            m.usage(r, "v", "gpt", Role::Judge, &Usage::default(), None, 2);
            m.usage(r, "v", "gpt", Role::Agent, &Usage::default(), Some(1.0), 1);
            m.judge_calls(r, "gpt", 1, 0);
            m.run_gauges(r, Some(5.0), 1.0, TrialGauges { active: 1, pending: 1, queued: 1, preempted: 1 });
            m.queue_wait(r, 3.0);
            m.run_progress(r, true, chrono::Utc::now());
            m.variant_scores(r, "v", &[("1".to_string(), 0.5)].into(), Some(0.3));
        }
        m.forget_run(&a);
        let text = m.encode();
        assert!(!text.contains(r#"run="a""#), "run a left series:\n{text}");
        for family in [
            "lightsout_trials_total",
            "lightsout_trial_attempt_infra_failures_total",
            "lightsout_trial_duration_seconds_count",
            "lightsout_tokens_total",
            "lightsout_cost_usd_total",
            "lightsout_unpriced_calls_total",
            "lightsout_judge_calls_total",
            "lightsout_judge_failures_total",
            "lightsout_run_budget_usd",
            "lightsout_run_spend_usd",
            "lightsout_active_trials",
            "lightsout_pending_trials",
            "lightsout_trials_queued",
            "lightsout_trials_preempted",
            "lightsout_trial_queue_wait_seconds_count",
            "lightsout_run_complete",
            "lightsout_run_last_progress_timestamp_seconds",
            "lightsout_variant_recall",
            "lightsout_variant_composite_score",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(family) && l.contains(r#"run="b""#)),
                "{family} of run b missing:\n{text}"
            );
        }
        // Forgetting twice, or an unknown run, is harmless; a forgotten run can come back.
        m.forget_run(&a);
        m.forget_run(&key("never"));
        m.trial_final(&a, "v", "ok", None);
        assert_eq!(
            value(&m.encode(), r#"lightsout_trials_total{namespace="ns",outcome="ok",run="a",variant="v"}"#),
            Some(1.0)
        );
    }

    #[test]
    fn budget_gauge_removed_when_run_has_no_budget() {
        let m = Metrics::new();
        let r = key("r");
        m.run_gauges(&r, Some(5.0), 1.0, TrialGauges::default());
        assert_eq!(value(&m.encode(), r#"lightsout_run_budget_usd{namespace="ns",run="r"}"#), Some(5.0));
        m.run_gauges(&r, None, 1.5, TrialGauges::default());
        let text = m.encode();
        assert!(!text.contains("lightsout_run_budget_usd{"), "{text}");
        assert_eq!(value(&text, r#"lightsout_run_spend_usd{namespace="ns",run="r"}"#), Some(1.5));
    }

    #[test]
    fn provider_totals_adds_deltas_and_ignores_decreases() {
        let m = Metrics::new();
        let rl = r#"lightsout_provider_rate_limited_total{provider="p"}"#;
        let rt = r#"lightsout_provider_retries_total{provider="p"}"#;
        m.provider_totals("p", 3, 5);
        m.provider_totals("p", 3, 5);
        let text = m.encode();
        assert_eq!((value(&text, rl), value(&text, rt)), (Some(3.0), Some(5.0)));
        m.provider_totals("p", 4, 9);
        let text = m.encode();
        assert_eq!((value(&text, rl), value(&text, rt)), (Some(4.0), Some(9.0)));
        // The client restarted: its totals went down. Nothing is subtracted...
        m.provider_totals("p", 1, 2);
        let text = m.encode();
        assert_eq!((value(&text, rl), value(&text, rt)), (Some(4.0), Some(9.0)));
        // ...and later increases count from the new baseline.
        m.provider_totals("p", 2, 2);
        let text = m.encode();
        assert_eq!((value(&text, rl), value(&text, rt)), (Some(5.0), Some(9.0)));
        // Providers are independent.
        m.provider_totals("q", 1, 0);
        let text = m.encode();
        assert_eq!(value(&text, r#"lightsout_provider_rate_limited_total{provider="q"}"#), Some(1.0));
        assert_eq!(value(&text, rl), Some(5.0));
    }

    #[test]
    fn unpriced_usage_counts_calls_not_cost() {
        let m = Metrics::new();
        let r = key("r");
        let usage = Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() };
        m.usage(&r, "v", "local", Role::Judge, &usage, None, 3);
        let text = m.encode();
        assert!(!text.contains("lightsout_cost_usd_total{"), "{text}");
        assert_eq!(
            value(&text, r#"lightsout_unpriced_calls_total{model="local",namespace="ns",role="judge",run="r"}"#),
            Some(3.0)
        );
        assert_eq!(
            value(
                &text,
                r#"lightsout_tokens_total{kind="output",model="local",namespace="ns",role="judge",run="r",variant="v"}"#
            ),
            Some(5.0)
        );

        m.usage(&r, "v", "local", Role::Judge, &usage, Some(0.5), 1);
        m.usage(&r, "v", "local", Role::Judge, &usage, Some(0.25), 1);
        let text = m.encode();
        assert_eq!(
            value(&text, r#"lightsout_cost_usd_total{model="local",namespace="ns",role="judge",run="r",variant="v"}"#),
            Some(0.75)
        );
        assert_eq!(
            value(&text, r#"lightsout_unpriced_calls_total{model="local",namespace="ns",role="judge",run="r"}"#),
            Some(3.0)
        );
    }
}
