//! An EvaluationRun's `.status`, computed from what the reconciler observed in one pass.
//!
//! Pure: no I/O and no clock. The reconciler gathers an [`Observed`], calls [`compute_status`]
//! with the status it read, and writes back the result; the same inputs always give the same
//! status, so an unchanged run produces an unchanged status and no write.
//!
//! Conditions follow the Kubernetes API conventions: one condition of each type in
//! [`condition::ALL`], in that order, each with status `True` or `False`, a CamelCase reason, a
//! human message and the generation it was computed from; `lastTransitionTime` moves only when
//! the condition's status changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use lightsout_api::{
    condition, EvaluationRunStatus, QueueStatus, Spend, TrialCounts, VariantStatus, MAX_STATUS_VARIANTS,
};
use lightsout_core::summary::{OutcomeCounts, RunSummary, VariantSummary};

/// What the reconciler observed this pass.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `Err` when validating or dereferencing the spec failed (e.g. the dataset is missing).
    pub spec_valid: Result<(), Refusal>,
    /// `spec.suspend`.
    pub suspended: bool,
    /// `spec.budget.maxUSD`.
    pub budget_usd: Option<f64>,
    /// Trials with an active Job.
    pub running: i64,
    /// Of those, Jobs suspended until their queue admits them.
    pub queued: i64,
    /// The scheduler's budget gate is closed (`spent + in-flight estimate ≥ maxUSD`) while
    /// trials wait to start.
    pub budget_gate_closed: bool,
    /// Finished reviews whose verdicts are not in yet: the run is not complete until they are.
    pub awaiting_judges: i64,
    /// The results aggregated so far; `None` before there are any.
    pub summary: Option<&'a RunSummary>,
    /// The queue's side (`spec.queueName` runs, accepted); `None` keeps what status had.
    pub queue: Option<QueueObserved>,
    /// The time of this pass: used for new condition transitions, `startTime` and
    /// `completionTime`.
    pub now: chrono::DateTime<chrono::Utc>,
}

/// What the reconciler saw of the run's queue this pass.
#[derive(Debug, Clone, Default)]
pub struct QueueObserved {
    /// The admissions counted so far, this pass's included (kept by the reconciler, seeded from
    /// the status it found at its start: a status read from a lagging cache must not be added to).
    pub counted: QueueCounts,
    /// When the longest-waiting queued Job was created.
    pub oldest_waiting_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Why Kueue cannot admit the run's Jobs as things stand (see `queue_admission`).
    pub blocked: Option<String>,
}

/// Admissions counted and their waits, in whole seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub admitted: i64,
    pub total_wait_seconds: i64,
    pub longest_wait_seconds: i64,
}

impl QueueCounts {
    /// What `status.queue` holds.
    pub fn of(status: Option<&QueueStatus>) -> QueueCounts {
        status.map_or_else(QueueCounts::default, |q| QueueCounts {
            admitted: q.admitted,
            total_wait_seconds: q.total_wait_seconds,
            longest_wait_seconds: q.longest_wait_seconds,
        })
    }

    /// These counts with admissions that waited `waits` seconds added.
    pub fn with(mut self, waits: &[f64]) -> QueueCounts {
        for wait in waits {
            let seconds = wait.round().max(0.0) as i64;
            self.admitted += 1;
            self.total_wait_seconds += seconds;
            self.longest_wait_seconds = self.longest_wait_seconds.max(seconds);
        }
        self
    }
}

/// Why a run is not accepted: its `Accepted=False` condition's reason and message.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
    /// The cause may pass by itself (the dataset's store did not answer): the run is retried
    /// soon and has not failed. Otherwise the spec, or what it names, must change.
    pub transient: bool,
}

impl Refusal {
    /// The spec is invalid, or names something missing: `InvalidSpec`.
    pub fn invalid(message: String) -> Refusal {
        Refusal { reason: reason::INVALID_SPEC, message, transient: false }
    }
}

const TRUE: &str = "True";
const FALSE: &str = "False";

/// Condition reasons.
pub mod reason {
    pub const ACCEPTED: &str = "Accepted";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The dataset's bucket or object does not exist.
    pub const DATASET_NOT_FOUND: &str = "DatasetNotFound";
    /// `spec.queueName` names no LocalQueue in the run's namespace: Kueue would keep every trial
    /// Job suspended.
    pub const LOCAL_QUEUE_NOT_FOUND: &str = "LocalQueueNotFound";
    /// `spec.queueName` is set and the cluster has no Kueue.
    pub const KUEUE_NOT_INSTALLED: &str = "KueueNotInstalled";
    /// The dataset's store refuses the run's credentials.
    pub const DATASET_ACCESS_DENIED: &str = "DatasetAccessDenied";
    /// The dataset's store did not answer (5xx, timeout, connection refused): retried.
    pub const DATASET_UNAVAILABLE: &str = "DatasetUnavailable";
    pub const TRIALS_RUNNING: &str = "TrialsRunning";
    /// Kueue cannot admit the run's trial Jobs as things stand (a request above what the
    /// ClusterQueue could ever give, its queues missing or inactive): they would wait forever.
    pub const QUEUE_INADMISSIBLE: &str = "QueueInadmissible";
    pub const SUSPENDED: &str = "Suspended";
    pub const COMPLETE: &str = "Complete";
    pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";
    pub const ALL_TRIALS_FINISHED: &str = "AllTrialsFinished";
    pub const TRIALS_PENDING: &str = "TrialsPending";
    pub const ALL_TRIALS_INFRA_FAILED: &str = "AllTrialsInfraFailed";
    pub const NOT_FAILED: &str = "NotFailed";
    pub const SUSPENDED_BY_SPEC: &str = "SuspendedBySpec";
    pub const NOT_SUSPENDED: &str = "NotSuspended";
    pub const BUDGET_REACHED: &str = "BudgetReached";
    pub const WITHIN_BUDGET: &str = "WithinBudget";
    pub const NO_BUDGET: &str = "NoBudget";
}

/// The status to write for `observed`, given the status read from the object (`previous`).
pub fn compute_status(previous: Option<&EvaluationRunStatus>, observed: &Observed) -> EvaluationRunStatus {
    let now = to_time(observed.now);
    let trials = trial_counts(observed);
    let spend = spend(observed.summary);
    let (variants, headline) = variants(observed.summary);

    let verdicts = verdicts(observed, &trials, &spend);
    let complete = verdicts.iter().any(|v| v.type_ == condition::COMPLETE && v.status);
    let was_complete = previous.and_then(|p| condition(p, condition::COMPLETE)).is_some_and(|c| c.status == TRUE);
    let conditions = verdicts
        .into_iter()
        .map(|v| {
            let previous = previous.and_then(|p| condition(p, v.type_));
            v.into_condition(previous, observed.generation, &now)
        })
        .collect();

    let previous_start = previous.and_then(|p| p.start_time.clone());
    let previous_completion = previous.and_then(|p| p.completion_time.clone());
    let started = trials.running > 0 || trials.succeeded + trials.failed + trials.infra_failed > 0;
    EvaluationRunStatus {
        // observedGeneration: the generation this status was computed from.
        observed_generation: observed.generation,
        conditions,
        trials,
        spend,
        headline,
        variants,
        // startTime: kept once set; otherwise set when the first trial is running or finished.
        start_time: previous_start.or_else(|| started.then(|| now.clone())),
        // completionTime: set when Complete turns True, kept while it stays True, and kept (not
        // cleared) after, like startTime.
        completion_time: match (complete, was_complete) {
            (true, true) => previous_completion.or_else(|| Some(now.clone())),
            (true, false) => Some(now.clone()),
            (false, _) => previous_completion,
        },
        queue: match &observed.queue {
            Some(queue) => Some(queue_status(queue)),
            None => previous.and_then(|p| p.queue.clone()),
        },
    }
}

/// The queue's figures.
fn queue_status(observed: &QueueObserved) -> QueueStatus {
    let QueueCounts { admitted, total_wait_seconds, longest_wait_seconds } = observed.counted;
    QueueStatus {
        admitted,
        total_wait_seconds,
        mean_wait_seconds: if admitted > 0 { total_wait_seconds / admitted } else { 0 },
        longest_wait_seconds,
        oldest_waiting_since: observed.oldest_waiting_since.map(to_time),
    }
}

/// The condition of type `type_` in `status`, if any.
pub fn condition<'a>(status: &'a EvaluationRunStatus, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Trial counts, from the summary's outcome counts and the observed active Jobs.
fn trial_counts(observed: &Observed) -> TrialCounts {
    let counts = observed.summary.map(|s| s.trials.clone()).unwrap_or_default();
    // Trials the summary has no final result for: running or not started yet.
    let unfinished = i64::from(counts.pending);
    // running: trials with an active Job, clamped to the unfinished trials (a Job whose result
    // is already in the summary is finishing, not running).
    let running = observed.running.clamp(0, unfinished);
    let queued = observed.queued.clamp(0, running);
    TrialCounts {
        // total: every planned trial.
        total: i64::from(counts.planned),
        // pending: unfinished trials that are not running.
        pending: unfinished - running,
        // running: admitted; queued: created, waiting for their queue (Kueue) to admit them.
        running: running - queued,
        queued,
        // succeeded: the agent produced a review.
        succeeded: i64::from(counts.ok),
        // failed: the agent's own failures, which are results (scored as no finding).
        failed: agent_failures(&counts),
        // infraFailed: out of infrastructure retries; never scored.
        infra_failed: i64::from(counts.infra_failed),
        // preempted: runs stopped by their queue and run again, apart from failures.
        preempted: i64::from(counts.preempted),
    }
}

/// Agent failures: agent-failed, timed-out and budget-exceeded trials.
fn agent_failures(counts: &OutcomeCounts) -> i64 {
    i64::from(counts.agent_failed) + i64::from(counts.timed_out) + i64::from(counts.budget_exceeded)
}

/// Spend, copied from the summary (zero before there is one).
fn spend(summary: Option<&RunSummary>) -> Spend {
    let Some(summary) = summary else { return Spend::default() };
    Spend {
        agent_usd: summary.spend.agent_usd,
        judge_usd: summary.spend.judge_usd,
        total_usd: summary.spend.total_usd,
        unpriced_calls: i64::from(summary.spend.unpriced_calls),
    }
}

/// The variants to list, best first, and the headline.
///
/// Variants are ranked by recall at the run's largest k (unscored variants last), ties broken
/// by name; at most [`MAX_STATUS_VARIANTS`] are listed (`summary.json` has all of them). The
/// headline is the best variant's recall at that k and its name, e.g.
/// `recall@5=0.625 gpt-5/high/single-shot@1.0.0/default`; `None` when nothing is scored yet.
fn variants(summary: Option<&RunSummary>) -> (Vec<VariantStatus>, Option<String>) {
    let Some(summary) = summary else { return (Vec::new(), None) };
    // The run's largest k; when the summary lists none, the largest k any variant has a recall for.
    let k =
        summary.k.iter().copied().max().or_else(|| {
            summary.variants.iter().flat_map(|v| v.recall.keys()).filter_map(|k| k.parse::<u32>().ok()).max()
        });
    let key = k.map(|k| k.to_string());
    let score = |v: &VariantSummary| key.as_ref().and_then(|key| v.recall.get(key)).copied();

    let mut ranked: Vec<(&VariantSummary, Option<f64>)> = summary.variants.iter().map(|v| (v, score(v))).collect();
    ranked.sort_by(|(a, a_score), (b, b_score)| {
        let by_score = match (a_score, b_score) {
            (Some(a), Some(b)) => b.total_cmp(a),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_score.then_with(|| a.name.cmp(&b.name))
    });

    let headline = match (ranked.first(), k) {
        (Some((best, Some(score))), Some(k)) => Some(format!("recall@{k}={} {}", decimal(*score), best.name)),
        _ => None,
    };
    let listed = ranked.iter().take(MAX_STATUS_VARIANTS).map(|(v, _)| variant_status(v)).collect();
    (listed, headline)
}

fn variant_status(v: &VariantSummary) -> VariantStatus {
    VariantStatus {
        name: v.name.clone(),
        succeeded: i64::from(v.trials.ok),
        failed: agent_failures(&v.trials),
        infra_failed: i64::from(v.trials.infra_failed),
        // recall@k by k as decimal strings with 3 decimals ("0.625").
        recall: v.recall.iter().map(|(k, r)| (k.clone(), decimal(*r))).collect(),
        // costUSD: the variant's agent and judge spend.
        cost_usd: v.spend.total_usd,
    }
}

fn decimal(value: f64) -> String {
    format!("{value:.3}")
}

/// One condition before its transition time is settled.
struct Verdict {
    type_: &'static str,
    status: bool,
    reason: &'static str,
    message: String,
}

impl Verdict {
    fn new(type_: &'static str, status: bool, reason: &'static str, message: impl Into<String>) -> Self {
        Verdict { type_, status, reason, message: message.into() }
    }

    /// The condition, with `lastTransitionTime` kept from `previous` when the status is
    /// unchanged, and `now` when it changed or the condition is new. Reason and message may
    /// change without a transition.
    fn into_condition(self, previous: Option<&Condition>, generation: Option<i64>, now: &Time) -> Condition {
        let status = if self.status { TRUE } else { FALSE };
        let last_transition_time = match previous {
            Some(previous) if previous.status == status => previous.last_transition_time.clone(),
            _ => now.clone(),
        };
        Condition {
            type_: self.type_.to_string(),
            status: status.to_string(),
            reason: self.reason.to_string(),
            message: self.message,
            observed_generation: generation,
            last_transition_time,
        }
    }
}

/// One verdict per condition type, in [`condition::ALL`] order.
fn verdicts(observed: &Observed, trials: &TrialCounts, spend: &Spend) -> Vec<Verdict> {
    let finished = trials.succeeded + trials.failed + trials.infra_failed;
    let progress = if trials.total == 0 {
        "no trials planned yet".to_string()
    } else {
        format!(
            "{finished} of {} trials finished; {} running, {} pending",
            trials.total, trials.running, trials.pending
        )
    };

    // Accepted: the spec validated and everything it refers to exists.
    let accepted = match &observed.spec_valid {
        Ok(()) => Verdict::new(condition::ACCEPTED, true, reason::ACCEPTED, "the spec is valid"),
        Err(refusal) => Verdict::new(condition::ACCEPTED, false, refusal.reason, refusal.message.as_str()),
    };

    // Complete: trials are planned and every one has a final result (running ⊆ unfinished, so
    // nothing is running either).
    let is_complete = trials.total > 0
        && trials.pending == 0
        && trials.running == 0
        && trials.queued == 0
        && observed.awaiting_judges == 0;
    let complete = if is_complete {
        Verdict::new(
            condition::COMPLETE,
            true,
            reason::ALL_TRIALS_FINISHED,
            format!(
                "{} trials: {} succeeded, {} failed, {} infrastructure failures",
                trials.total, trials.succeeded, trials.failed, trials.infra_failed
            ),
        )
    } else {
        let judging = match observed.awaiting_judges {
            0 => String::new(),
            n => format!("; {n} reviews awaiting the judges"),
        };
        Verdict::new(condition::COMPLETE, false, reason::TRIALS_PENDING, format!("{progress}{judging}"))
    };

    // Suspended: spec.suspend stops new trials from starting; running ones finish.
    let suspended = if observed.suspended {
        Verdict::new(
            condition::SUSPENDED,
            true,
            reason::SUSPENDED_BY_SPEC,
            "spec.suspend is true: no new trials start; running trials finish",
        )
    } else {
        Verdict::new(condition::SUSPENDED, false, reason::NOT_SUSPENDED, "spec.suspend is false")
    };

    // BudgetExceeded: a budget is set, the spend has reached it and trials are still waiting to
    // start (which they now will not). Once nothing is pending the budget stops nothing.
    let unpriced = if spend.unpriced_calls > 0 {
        format!(" ({} unpriced model calls not counted)", spend.unpriced_calls)
    } else {
        String::new()
    };
    let budget = match observed.budget_usd {
        None => Verdict::new(condition::BUDGET_EXCEEDED, false, reason::NO_BUDGET, "spec.budget.maxUSD is not set"),
        Some(max) if observed.budget_gate_closed && trials.pending > 0 && spend.total_usd < max => Verdict::new(
            condition::BUDGET_EXCEEDED,
            true,
            reason::BUDGET_REACHED,
            format!(
                "spent ${:.2} of the ${max:.2} budget{unpriced}, and the running trials' expected cost would reach it: \
                 {} pending trials wait",
                spend.total_usd, trials.pending
            ),
        ),
        Some(max) if spend.total_usd >= max && trials.pending > 0 => Verdict::new(
            condition::BUDGET_EXCEEDED,
            true,
            reason::BUDGET_REACHED,
            format!(
                "spent ${:.2} of the ${max:.2} budget{unpriced}: {} pending trials will not start",
                spend.total_usd, trials.pending
            ),
        ),
        Some(max) => Verdict::new(
            condition::BUDGET_EXCEEDED,
            false,
            reason::WITHIN_BUDGET,
            format!("spent ${:.2} of the ${max:.2} budget{unpriced}", spend.total_usd),
        ),
    };
    let budget_stopped = budget.status;

    // Progressing: trials are being started or run. When not, the reason says why, the first
    // that applies of: the spec is invalid, all trials finished, suspended, budget reached.
    let progressing = if let Err(refusal) = &observed.spec_valid {
        let message = if refusal.transient {
            "retrying: no new trials start until the run is accepted"
        } else {
            "the spec is invalid: no trials start"
        };
        Verdict::new(condition::PROGRESSING, false, refusal.reason, message)
    } else if is_complete {
        Verdict::new(condition::PROGRESSING, false, reason::COMPLETE, format!("all {} trials finished", trials.total))
    } else if observed.suspended {
        Verdict::new(
            condition::PROGRESSING,
            false,
            reason::SUSPENDED,
            format!("suspended: no new trials start; {progress}"),
        )
    } else if budget_stopped {
        Verdict::new(
            condition::PROGRESSING,
            false,
            reason::BUDGET_EXCEEDED,
            format!("budget reached: no new trials start; {progress}"),
        )
    } else if let Some(blocked) = observed.queue.as_ref().and_then(|q| q.blocked.as_deref()) {
        Verdict::new(
            condition::PROGRESSING,
            false,
            reason::QUEUE_INADMISSIBLE,
            format!("Kueue cannot admit the trial Jobs as the queues stand: {blocked}; {progress}"),
        )
    } else {
        Verdict::new(condition::PROGRESSING, true, reason::TRIALS_RUNNING, progress)
    };

    // Failed: the run cannot produce results: its spec is invalid, or it finished with every
    // trial failed on infrastructure (nothing scored). Agent failures are results, not a failed
    // run; nor is a refusal that is being retried.
    let failed = match &observed.spec_valid {
        Err(refusal) if !refusal.transient => {
            Verdict::new(condition::FAILED, true, refusal.reason, refusal.message.as_str())
        }
        Ok(()) if is_complete && trials.infra_failed == trials.total => Verdict::new(
            condition::FAILED,
            true,
            reason::ALL_TRIALS_INFRA_FAILED,
            format!("all {} trials failed on infrastructure after their retries", trials.total),
        ),
        Ok(()) | Err(_) => Verdict::new(condition::FAILED, false, reason::NOT_FAILED, "the run has not failed"),
    };

    let verdicts = vec![accepted, progressing, complete, failed, suspended, budget];
    debug_assert!(verdicts.iter().map(|v| v.type_).eq(condition::ALL));
    verdicts
}

/// A `metav1.Time` for `at`, truncated to whole seconds: that is all the API server stores, so
/// a time read back compares equal to the one computed.
pub fn to_time(at: chrono::DateTime<chrono::Utc>) -> Time {
    let seconds = at.timestamp();
    let timestamp =
        Timestamp::from_second(seconds).unwrap_or(if seconds < 0 { Timestamp::MIN } else { Timestamp::MAX });
    Time(timestamp)
}

/// The instant of a `metav1.Time`.
pub fn from_time(time: &Time) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(time.0.as_second(), time.0.subsec_nanosecond().max(0) as u32).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::{TimeZone, Utc};
    use lightsout_core::summary::{DatasetSummary, RunIdentity, SpendSummary, SUMMARY_SCHEMA};
    use lightsout_model::Usage;

    use super::*;

    fn at(seconds: i64) -> chrono::DateTime<Utc> {
        Utc.timestamp_opt(1_750_000_000 + seconds, 0).unwrap()
    }

    fn counts(planned: u32, pending: u32, ok: u32, agent_failed: u32, infra_failed: u32) -> OutcomeCounts {
        OutcomeCounts {
            planned,
            pending,
            ok,
            agent_failed,
            timed_out: 0,
            budget_exceeded: 0,
            infra_failed,
            unjudged: 0,
            preempted: 0,
        }
    }

    fn variant(name: &str, recall: &[(u32, f64)], total_usd: f64) -> VariantSummary {
        VariantSummary {
            id: format!("id-{name}"),
            name: name.to_string(),
            model: name.split('/').next().unwrap().to_string(),
            provider: "p".to_string(),
            reasoning_effort: None,
            harness: "single-shot@1.0.0".to_string(),
            prompt: "default".to_string(),
            trials: counts(4, 0, 3, 1, 0),
            scored: if recall.is_empty() { 0 } else { 4 },
            scored_tasks: if recall.is_empty() { 0 } else { 4 },
            recall: recall.iter().map(|(k, r)| (k.to_string(), *r)).collect(),
            recall_interval: BTreeMap::new(),
            recall_by_track: BTreeMap::new(),
            recall_by_difficulty: BTreeMap::new(),
            recall_by_language: BTreeMap::new(),
            findings_per_review: None,
            words_per_review: None,
            judge_agreement: None,
            swe_prbench: None,
            agent_tokens: Usage::default(),
            judge_tokens: Usage::default(),
            spend: SpendSummary { agent_usd: total_usd, judge_usd: 0.0, total_usd, unpriced_calls: 0 },
            agent_usd_per_trial: None,
            latency_ms: None,
            trajectory: None,
        }
    }

    fn summary(trials: OutcomeCounts, variants: Vec<VariantSummary>) -> RunSummary {
        RunSummary {
            schema: SUMMARY_SCHEMA.to_string(),
            run: RunIdentity { name: "demo".to_string(), spec_hash: "abc".to_string(), generated_at: at(0) },
            scripted_models: false,
            dataset: DatasetSummary {
                format: "jsonl".to_string(),
                source: "file://tasks.jsonl".to_string(),
                tasks: 10,
                skipped_lines: 0,
            },
            protocol: lightsout_api::ScoringProtocol::CrBugBench,
            k: vec![1, 3, 5],
            bootstrap: lightsout_stats::BootstrapConfig::default(),
            trials,
            spend: SpendSummary { agent_usd: 3.0, judge_usd: 1.5, total_usd: 4.5, unpriced_calls: 2 },
            tokens: Default::default(),
            notices: Vec::new(),
            variants,
            comparisons: Vec::new(),
        }
    }

    fn observed<'a>(summary: Option<&'a RunSummary>, running: i64, now: i64) -> Observed<'a> {
        Observed {
            generation: Some(3),
            spec_valid: Ok(()),
            suspended: false,
            budget_usd: None,
            running,
            queued: 0,
            budget_gate_closed: false,
            awaiting_judges: 0,
            summary,
            queue: None,
            now: at(now),
        }
    }

    #[test]
    fn queue_figures_add_each_admission_once_and_a_blocked_queue_stops_progress() {
        let counted = QueueCounts::default().with(&[10.4, 30.0]);
        let queue = QueueObserved { counted, oldest_waiting_since: Some(at(5)), blocked: None };
        let first = compute_status(None, &Observed { queue: Some(queue), queued: 2, ..observed(None, 2, 40) });
        let figures = first.queue.clone().unwrap();
        assert_eq!(
            (figures.admitted, figures.total_wait_seconds, figures.mean_wait_seconds, figures.longest_wait_seconds),
            (2, 40, 20, 30)
        );
        assert_eq!(figures.oldest_waiting_since, Some(to_time(at(5))));
        assert_eq!(state(&first, condition::PROGRESSING), ("True", "TrialsRunning"));
        // The next pass adds only its own admissions to what status held; nothing waits any more.
        let counted = QueueCounts::of(first.queue.as_ref()).with(&[50.0]);
        let queue = QueueObserved { counted, oldest_waiting_since: None, blocked: None };
        let next = compute_status(Some(&first), &Observed { queue: Some(queue), ..observed(None, 2, 60) });
        let figures = next.queue.clone().unwrap();
        assert_eq!((figures.admitted, figures.mean_wait_seconds, figures.longest_wait_seconds), (3, 30, 50));
        assert_eq!(figures.oldest_waiting_since, None);
        // A refused pass keeps them; a queue Kueue can never admit from says so.
        let refused = compute_status(Some(&next), &Observed { queue: None, ..observed(None, 0, 70) });
        assert_eq!(refused.queue, next.queue);
        let never = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, request > maximum capacity (3 > 2)";
        let counted = QueueCounts::of(next.queue.as_ref());
        let queue = QueueObserved { counted, oldest_waiting_since: Some(at(5)), blocked: Some(never.into()) };
        let blocked = compute_status(Some(&next), &Observed { queue: Some(queue), queued: 2, ..observed(None, 2, 80) });
        assert_eq!(state(&blocked, condition::PROGRESSING), ("False", "QueueInadmissible"));
        assert!(get(&blocked, condition::PROGRESSING).message.contains(never));
    }

    fn get<'a>(status: &'a EvaluationRunStatus, type_: &str) -> &'a Condition {
        condition(status, type_).unwrap_or_else(|| panic!("no {type_} condition"))
    }

    /// (status, reason) of a condition.
    fn state<'a>(status: &'a EvaluationRunStatus, type_: &str) -> (&'a str, &'a str) {
        let c = get(status, type_);
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn one_condition_of_each_type_in_order_with_generation() {
        let s = summary(counts(10, 10, 0, 0, 0), vec![]);
        let status = compute_status(None, &observed(Some(&s), 2, 0));
        let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, condition::ALL);
        assert_eq!(status.observed_generation, Some(3));
        for c in &status.conditions {
            assert_eq!(c.observed_generation, Some(3));
            assert!(c.status == "True" || c.status == "False");
            assert!(!c.reason.is_empty() && c.reason.chars().next().unwrap().is_ascii_uppercase());
            assert!(!c.message.is_empty());
            assert_eq!(c.last_transition_time, to_time(at(0)));
        }
    }

    #[test]
    fn counts_arithmetic() {
        let trials = OutcomeCounts {
            planned: 40,
            pending: 12,
            ok: 20,
            agent_failed: 3,
            timed_out: 2,
            budget_exceeded: 1,
            infra_failed: 2,
            unjudged: 0,
            preempted: 1,
        };
        let s = summary(trials.clone(), vec![]);
        let status = compute_status(None, &observed(Some(&s), 5, 0));
        assert_eq!(
            status.trials,
            TrialCounts {
                total: 40,
                pending: 7,
                running: 5,
                queued: 0,
                succeeded: 20,
                failed: 6,
                infra_failed: 2,
                preempted: 1
            }
        );
        // Jobs waiting for their queue are counted apart from the running ones.
        let status = compute_status(None, &Observed { queued: 2, ..observed(Some(&s), 5, 0) });
        assert_eq!((status.trials.running, status.trials.queued, status.trials.pending), (3, 2, 7));
        // Unfinished trials all waiting in the queue: not complete.
        let mut waiting = trials.clone();
        waiting.pending = 2;
        let w = summary(waiting, vec![]);
        let status = compute_status(None, &Observed { queued: 2, ..observed(Some(&w), 2, 0) });
        assert_eq!((status.trials.running, status.trials.queued, status.trials.pending), (0, 2, 0));
        assert_eq!(condition(&status, condition::COMPLETE).unwrap().status, "False");
        assert_eq!(status.spend, Spend { agent_usd: 3.0, judge_usd: 1.5, total_usd: 4.5, unpriced_calls: 2 });

        // Running is clamped to the unfinished trials, and never negative.
        let status = compute_status(None, &observed(Some(&s), 50, 0));
        assert_eq!((status.trials.running, status.trials.pending), (12, 0));
        let status = compute_status(None, &observed(Some(&s), -1, 0));
        assert_eq!((status.trials.running, status.trials.pending), (0, 12));

        // Before any summary: all zero.
        let status = compute_status(None, &observed(None, 3, 0));
        assert_eq!(status.trials, TrialCounts::default());
        assert_eq!(status.spend, Spend::default());
        assert!(status.variants.is_empty());
        assert_eq!(status.headline, None);
    }

    #[test]
    fn running_run_is_accepted_and_progressing() {
        let s = summary(counts(40, 30, 8, 1, 1), vec![]);
        let status = compute_status(None, &observed(Some(&s), 4, 0));
        assert_eq!(state(&status, condition::ACCEPTED), ("True", "Accepted"));
        assert_eq!(state(&status, condition::PROGRESSING), ("True", "TrialsRunning"));
        assert_eq!(get(&status, condition::PROGRESSING).message, "10 of 40 trials finished; 4 running, 26 pending");
        assert_eq!(state(&status, condition::COMPLETE), ("False", "TrialsPending"));
        assert_eq!(state(&status, condition::FAILED), ("False", "NotFailed"));
        assert_eq!(state(&status, condition::SUSPENDED), ("False", "NotSuspended"));
        assert_eq!(state(&status, condition::BUDGET_EXCEEDED), ("False", "NoBudget"));
        assert_eq!(status.start_time, Some(to_time(at(0))));
        assert_eq!(status.completion_time, None);
    }

    #[test]
    fn complete_when_every_trial_finished() {
        let s = summary(counts(40, 0, 38, 1, 1), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(state(&status, condition::COMPLETE), ("True", "AllTrialsFinished"));
        assert_eq!(
            get(&status, condition::COMPLETE).message,
            "40 trials: 38 succeeded, 1 failed, 1 infrastructure failures"
        );
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "Complete"));
        assert_eq!(state(&status, condition::FAILED), ("False", "NotFailed"));
        assert_eq!(status.completion_time, Some(to_time(at(0))));

        // Not complete while a trial is unfinished, even one that is running.
        let s = summary(counts(40, 1, 37, 1, 1), vec![]);
        let status = compute_status(None, &observed(Some(&s), 1, 0));
        assert_eq!(state(&status, condition::COMPLETE), ("False", "TrialsPending"));
        assert_eq!(status.completion_time, None);

        // Nor with nothing planned.
        let s = summary(counts(0, 0, 0, 0, 0), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(state(&status, condition::COMPLETE), ("False", "TrialsPending"));
        assert_eq!(get(&status, condition::COMPLETE).message, "no trials planned yet");
        assert_eq!(state(&status, condition::PROGRESSING), ("True", "TrialsRunning"));
        assert_eq!(status.start_time, None);
    }

    #[test]
    fn failed_when_every_trial_infra_failed() {
        let s = summary(counts(6, 0, 0, 0, 6), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(state(&status, condition::COMPLETE), ("True", "AllTrialsFinished"));
        assert_eq!(state(&status, condition::FAILED), ("True", "AllTrialsInfraFailed"));

        // Agent failures are results: the run has not failed.
        let s = summary(counts(6, 0, 0, 6, 0), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(state(&status, condition::FAILED), ("False", "NotFailed"));

        // Not failed before all trials finished, even if every finished one infra-failed.
        let s = summary(counts(6, 2, 0, 0, 4), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(state(&status, condition::FAILED), ("False", "NotFailed"));
    }

    #[test]
    fn invalid_spec() {
        let mut obs = observed(None, 0, 0);
        obs.spec_valid = Err(Refusal::invalid("dataset file://missing.jsonl: no such file".to_string()));
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::ACCEPTED), ("False", "InvalidSpec"));
        assert_eq!(get(&status, condition::ACCEPTED).message, "dataset file://missing.jsonl: no such file");
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "InvalidSpec"));
        assert_eq!(state(&status, condition::FAILED), ("True", "InvalidSpec"));
        assert_eq!(get(&status, condition::FAILED).message, "dataset file://missing.jsonl: no such file");
        assert_eq!(state(&status, condition::COMPLETE), ("False", "TrialsPending"));
        assert_eq!(status.start_time, None);

        // InvalidSpec wins over suspension as the reason for not progressing.
        obs.suspended = true;
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "InvalidSpec"));
        assert_eq!(state(&status, condition::SUSPENDED), ("True", "SuspendedBySpec"));
    }

    #[test]
    fn a_refusal_names_its_reason_and_a_transient_one_is_not_a_failure() {
        let mut obs = observed(None, 0, 0);
        obs.spec_valid = Err(Refusal {
            reason: reason::DATASET_NOT_FOUND,
            message: "spec.dataset.source s3://d/t.jsonl: NoSuchBucket".into(),
            transient: false,
        });
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::ACCEPTED), ("False", "DatasetNotFound"));
        assert_eq!(get(&status, condition::ACCEPTED).message, "spec.dataset.source s3://d/t.jsonl: NoSuchBucket");
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "DatasetNotFound"));
        assert_eq!(state(&status, condition::FAILED), ("True", "DatasetNotFound"));

        obs.spec_valid = Err(Refusal {
            reason: reason::DATASET_UNAVAILABLE,
            message: "spec.dataset.source s3://d/t.jsonl is unavailable: HTTP 503".into(),
            transient: true,
        });
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::ACCEPTED), ("False", "DatasetUnavailable"));
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "DatasetUnavailable"));
        assert!(get(&status, condition::PROGRESSING).message.starts_with("retrying"));
        assert_eq!(state(&status, condition::FAILED), ("False", "NotFailed"), "retried, not failed");
    }

    #[test]
    fn suspended() {
        let s = summary(counts(10, 8, 2, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 3, 0);
        obs.suspended = true;
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::SUSPENDED), ("True", "SuspendedBySpec"));
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "Suspended"));
        // Running trials still count as running.
        assert_eq!(status.trials.running, 3);

        // A complete run that is suspended is not progressing because it is complete.
        let s = summary(counts(10, 0, 10, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 0, 0);
        obs.suspended = true;
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "Complete"));
    }

    #[test]
    fn budget() {
        // summary spend total is 4.5.
        let s = summary(counts(10, 6, 4, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 2, 0);
        obs.budget_usd = Some(4.5);
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::BUDGET_EXCEEDED), ("True", "BudgetReached"));
        assert_eq!(
            get(&status, condition::BUDGET_EXCEEDED).message,
            "spent $4.50 of the $4.50 budget (2 unpriced model calls not counted): 4 pending trials will not start"
        );
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "BudgetExceeded"));

        obs.budget_usd = Some(10.0);
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::BUDGET_EXCEEDED), ("False", "WithinBudget"));
        assert_eq!(
            get(&status, condition::BUDGET_EXCEEDED).message,
            "spent $4.50 of the $10.00 budget (2 unpriced model calls not counted)"
        );
        assert_eq!(state(&status, condition::PROGRESSING), ("True", "TrialsRunning"));

        // Over budget with nothing left to start: the budget stops nothing.
        let s = summary(counts(10, 2, 8, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 2, 0);
        obs.budget_usd = Some(1.0);
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::BUDGET_EXCEEDED), ("False", "WithinBudget"));
        assert_eq!(state(&status, condition::PROGRESSING), ("True", "TrialsRunning"));

        // Suspension is the reason given when both apply.
        let s = summary(counts(10, 6, 4, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 0, 0);
        obs.budget_usd = Some(1.0);
        obs.suspended = true;
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::BUDGET_EXCEEDED), ("True", "BudgetReached"));
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "Suspended"));
    }

    #[test]
    fn a_closed_budget_gate_below_the_budget_is_reported_with_the_in_flight_reason() {
        let s = summary(counts(10, 6, 4, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 2, 0);
        obs.budget_usd = Some(10.0);
        obs.budget_gate_closed = true;
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::BUDGET_EXCEEDED), ("True", "BudgetReached"));
        assert!(get(&status, condition::BUDGET_EXCEEDED).message.contains("expected cost would reach it"));
        assert_eq!(state(&status, condition::PROGRESSING), ("False", "BudgetExceeded"));
    }

    #[test]
    fn a_run_is_not_complete_while_reviews_await_the_judges() {
        let s = summary(counts(10, 0, 10, 0, 0), vec![]);
        let mut obs = observed(Some(&s), 0, 0);
        obs.awaiting_judges = 3;
        let status = compute_status(None, &obs);
        assert_eq!(state(&status, condition::COMPLETE), ("False", "TrialsPending"));
        assert!(get(&status, condition::COMPLETE).message.ends_with("; 3 reviews awaiting the judges"));
        obs.awaiting_judges = 0;
        assert_eq!(state(&compute_status(None, &obs), condition::COMPLETE), ("True", "AllTrialsFinished"));
    }

    #[test]
    fn transition_time_kept_while_status_unchanged() {
        let s = summary(counts(10, 10, 0, 0, 0), vec![]);
        let first = compute_status(None, &observed(Some(&s), 2, 0));

        // Later pass, progress made but no condition's status changed; messages may change.
        let s = summary(counts(10, 5, 5, 0, 0), vec![]);
        let second = compute_status(Some(&first), &observed(Some(&s), 2, 60));
        for c in &second.conditions {
            assert_eq!(c.last_transition_time, to_time(at(0)), "{}", c.type_);
        }
        assert_ne!(get(&first, condition::PROGRESSING).message, get(&second, condition::PROGRESSING).message);

        // Suspending flips Suspended and Progressing; the others keep their times.
        let mut obs = observed(Some(&s), 2, 120);
        obs.suspended = true;
        let third = compute_status(Some(&second), &obs);
        assert_eq!(get(&third, condition::SUSPENDED).last_transition_time, to_time(at(120)));
        assert_eq!(get(&third, condition::PROGRESSING).last_transition_time, to_time(at(120)));
        assert_eq!(get(&third, condition::ACCEPTED).last_transition_time, to_time(at(0)));
        assert_eq!(get(&third, condition::COMPLETE).last_transition_time, to_time(at(0)));

        // A changed reason with the same status keeps the time: Progressing False/Suspended ->
        // False/Complete.
        let done = summary(counts(10, 0, 10, 0, 0), vec![]);
        let mut obs = observed(Some(&done), 0, 180);
        obs.suspended = true;
        let fourth = compute_status(Some(&third), &obs);
        assert_eq!(state(&fourth, condition::PROGRESSING), ("False", "Complete"));
        assert_eq!(get(&fourth, condition::PROGRESSING).last_transition_time, to_time(at(120)));
        assert_eq!(get(&fourth, condition::COMPLETE).last_transition_time, to_time(at(180)));

        // A condition missing from the previous status is new: it gets now.
        let mut partial = fourth.clone();
        partial.conditions.retain(|c| c.type_ != condition::FAILED);
        let fifth = compute_status(Some(&partial), &observed(Some(&done), 0, 240));
        assert_eq!(get(&fifth, condition::FAILED).last_transition_time, to_time(at(240)));
        assert_eq!(get(&fifth, condition::ACCEPTED).last_transition_time, to_time(at(0)));
    }

    #[test]
    fn start_and_completion_times() {
        // Nothing running or finished: no start time.
        let s = summary(counts(4, 4, 0, 0, 0), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(status.start_time, None);

        // First trial running: started now, and kept after.
        let status = compute_status(Some(&status), &observed(Some(&s), 1, 10));
        assert_eq!(status.start_time, Some(to_time(at(10))));
        let status = compute_status(Some(&status), &observed(Some(&s), 0, 20));
        assert_eq!(status.start_time, Some(to_time(at(10))));

        // Complete: completion time set when Complete turns True, kept after.
        let done = summary(counts(4, 0, 4, 0, 0), vec![]);
        let status = compute_status(Some(&status), &observed(Some(&done), 0, 30));
        assert_eq!(status.completion_time, Some(to_time(at(30))));
        let status = compute_status(Some(&status), &observed(Some(&done), 0, 40));
        assert_eq!(status.completion_time, Some(to_time(at(30))));
        assert_eq!(status.start_time, Some(to_time(at(10))));

        // Start time from a finished trial alone (the Job already gone).
        let s = summary(counts(4, 3, 1, 0, 0), vec![]);
        let status = compute_status(None, &observed(Some(&s), 0, 50));
        assert_eq!(status.start_time, Some(to_time(at(50))));

        // Times are whole seconds.
        let mut obs = observed(Some(&done), 0, 0);
        obs.now = at(60) + chrono::Duration::milliseconds(750);
        let status = compute_status(None, &obs);
        assert_eq!(status.completion_time, Some(to_time(at(60))));
        assert_eq!(serde_json::to_value(&status.completion_time).unwrap(), "2025-06-15T15:07:40Z");
    }

    #[test]
    fn variants_best_first_with_headline() {
        let s = summary(
            counts(16, 0, 12, 4, 0),
            vec![
                variant("b/low/single-shot@1.0.0/default", &[(1, 0.25), (3, 0.5), (5, 0.5)], 1.25),
                variant("gpt-5/high/single-shot@1.0.0/default", &[(1, 0.5), (3, 0.5), (5, 0.625)], 2.0),
                variant("a/low/single-shot@1.0.0/default", &[(1, 0.75), (3, 0.75), (5, 0.5)], 0.5),
                variant("unscored/single-shot@1.0.0/default", &[], 0.0),
            ],
        );
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        let names: Vec<&str> = status.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "gpt-5/high/single-shot@1.0.0/default",
                // Tied at recall@5 = 0.5: by name.
                "a/low/single-shot@1.0.0/default",
                "b/low/single-shot@1.0.0/default",
                "unscored/single-shot@1.0.0/default",
            ]
        );
        assert_eq!(status.headline.as_deref(), Some("recall@5=0.625 gpt-5/high/single-shot@1.0.0/default"));

        let best = &status.variants[0];
        assert_eq!(best.succeeded, 3);
        assert_eq!(best.failed, 1);
        assert_eq!(best.infra_failed, 0);
        assert_eq!(best.cost_usd, 2.0);
        let recall: Vec<(&str, &str)> = best.recall.iter().map(|(k, r)| (k.as_str(), r.as_str())).collect();
        assert_eq!(recall, [("1", "0.500"), ("3", "0.500"), ("5", "0.625")]);
        assert!(status.variants[3].recall.is_empty());
    }

    #[test]
    fn no_headline_when_nothing_scored() {
        let s = summary(
            counts(8, 8, 0, 0, 0),
            vec![variant("b/single-shot@1.0.0/default", &[], 0.0), variant("a/single-shot@1.0.0/default", &[], 0.0)],
        );
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(status.headline, None);
        let names: Vec<&str> = status.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a/single-shot@1.0.0/default", "b/single-shot@1.0.0/default"]);
    }

    #[test]
    fn variants_truncated_to_max() {
        // 40 variants; variant i has recall@5 = i/40, so the best are 39, 38, ...
        let variants: Vec<VariantSummary> = (0..40)
            .map(|i| variant(&format!("m{i:02}/single-shot@1.0.0/default"), &[(1, 0.0), (5, i as f64 / 40.0)], 0.1))
            .collect();
        let s = summary(counts(160, 0, 160, 0, 0), variants);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(status.variants.len(), MAX_STATUS_VARIANTS);
        let expected: Vec<String> =
            (0..40).rev().take(MAX_STATUS_VARIANTS).map(|i| format!("m{i:02}/single-shot@1.0.0/default")).collect();
        let names: Vec<String> = status.variants.iter().map(|v| v.name.clone()).collect();
        assert_eq!(names, expected);
        assert_eq!(status.variants[0].recall["5"], "0.975");
        assert_eq!(status.headline.as_deref(), Some("recall@5=0.975 m39/single-shot@1.0.0/default"));
    }

    #[test]
    fn largest_k_from_recall_keys_when_summary_lists_none() {
        let mut s = summary(
            counts(8, 0, 8, 0, 0),
            vec![
                variant("a/single-shot@1.0.0/default", &[(2, 0.9), (10, 0.1)], 0.0),
                variant("b/single-shot@1.0.0/default", &[(2, 0.1), (10, 0.2)], 0.0),
            ],
        );
        s.k.clear();
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        assert_eq!(status.headline.as_deref(), Some("recall@10=0.200 b/single-shot@1.0.0/default"));
    }

    #[test]
    fn status_serialises_with_api_field_names() {
        let s = summary(counts(4, 0, 4, 0, 0), vec![variant("a/single-shot@1.0.0/default", &[(5, 0.5)], 1.0)]);
        let status = compute_status(None, &observed(Some(&s), 0, 0));
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["trials"]["infraFailed"], 0);
        assert_eq!(json["spend"]["totalUSD"], 4.5);
        assert_eq!(json["variants"][0]["costUSD"], 1.0);
        assert_eq!(json["conditions"][2]["type"], "Complete");
        assert_eq!(json["conditions"][2]["lastTransitionTime"], "2025-06-15T15:06:40Z");
        assert_eq!(json["conditions"][2]["observedGeneration"], 3);
        // And reads back equal.
        let back: EvaluationRunStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
    }
}
