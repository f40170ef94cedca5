//! Reconciles `EvaluationSchedule`s into `EvaluationRun`s: nightly regressions.
//!
//! Dereference → validate → apply, as for runs:
//! 1. **Validate** the cron pattern and time zone (`Ready=False` with the reason otherwise).
//! 2. **List** the schedule's runs (label `lightsout.dev/schedule`).
//! 3. **Due?** A run is due at the latest cron time (read in `spec.timeZone`) after the last
//!    scheduled time (the schedule's creation at first) that is not in the future; missed times
//!    before it are not made up, as a CronJob does. A changed model list (`spec.models`: a new
//!    release) makes a run due at once. A due run is created (name from the due time, or from the
//!    model list's hash and the generation, so a restarted controller repeating the create gets
//!    `AlreadyExists`, never a second run) unless another of the schedule's runs is still
//!    running: `Forbid` skips it (a model change stays due until the running one finishes),
//!    `Replace` deletes the running ones first.
//! 4. **Compare** each run that became `Complete` with its baseline (the schedule's previous
//!    complete run, or `baseline.run`) using the shared comparison code, and record the verdict
//!    on the run (label `lightsout.dev/verdict`), in the schedule's status (`lastComparison`,
//!    condition `NoRegression`) and in `lightsout_schedule_regressed`.
//! 5. **History**: complete runs beyond `successfulRunsHistoryLimit` and failed ones beyond
//!    `failedRunsHistoryLimit` are deleted, oldest first, never the baseline; their results stay
//!    in storage.
//! 6. **Status** (server-side apply on the status subresource) and a requeue at the next due time.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use lightsout_api::hash::sha256_hex;
use lightsout_api::{
    condition, schedule_condition, ConcurrencyPolicy, EvaluationRun, EvaluationSchedule, EvaluationScheduleStatus,
    ScheduleComparison, MODELS_HASH_ANNOTATION, SCHEDULED_AT_ANNOTATION, SCHEDULE_LABEL, VERDICT_LABEL,
};

use crate::context::Context;
use crate::error::{gone_is_ok, Error};
use crate::metrics::RunKey;
use crate::status::{from_time, to_time};

/// Field manager of the schedule's status patches.
const MANAGER: &str = "lightsout-controller";
/// The verdict of a run compared with no baseline (the schedule's first).
pub const NO_BASELINE: &str = "NoBaseline";
/// The longest a run name's schedule part may be: run names become label values (≤ 63).
const NAME_PREFIX_MAX: usize = 40;

/// Why a schedule cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid(pub String);

/// The schedule's cron pattern and time zone, parsed.
#[derive(Debug, Clone)]
pub struct Timing {
    cron: croner::Cron,
    zone: chrono_tz::Tz,
}

impl Timing {
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Timing, Invalid> {
        let cron = croner::Cron::from_str(schedule)
            .map_err(|e| Invalid(format!("spec.schedule {schedule:?} is not a cron pattern: {e}")))?;
        let zone = match time_zone {
            None => chrono_tz::UTC,
            Some(name) => chrono_tz::Tz::from_str(name).map_err(|_| {
                Invalid(format!("spec.timeZone {name:?} is not an IANA time zone (e.g. Europe/Berlin)"))
            })?,
        };
        Ok(Timing { cron, zone })
    }

    /// The first cron time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_next_occurrence(&after.with_timezone(&self.zone), false).ok().map(|t| t.with_timezone(&Utc))
    }

    /// The latest cron time in (`after`, `now`], if any: the one run that is due.
    pub fn due(&self, after: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut due = None;
        let mut cursor = after;
        // Bounded: a schedule missed for years does not spin; the newest time wins anyway.
        for _ in 0..100_000 {
            match self.next_after(cursor) {
                Some(t) if t <= now => {
                    due = Some(t);
                    cursor = t;
                }
                _ => break,
            }
        }
        due
    }
}

/// A short, stable hash of the schedule's model list.
pub fn models_hash(schedule: &EvaluationSchedule) -> String {
    let json = serde_json::to_vec(&schedule.spec.models).expect("models serialise");
    sha256_hex(&json)[..12].to_string()
}

fn name_prefix(schedule: &str) -> &str {
    let end = schedule.char_indices().map(|(i, _)| i).take_while(|i| *i <= NAME_PREFIX_MAX).last().unwrap_or(0);
    let prefix = if schedule.len() <= NAME_PREFIX_MAX { schedule } else { &schedule[..end] };
    prefix.trim_end_matches('-')
}

/// The run due at `at`: `<schedule>-<yyyymmdd-hhmm>` (UTC).
pub fn scheduled_run_name(schedule: &str, at: DateTime<Utc>) -> String {
    format!("{}-{}", name_prefix(schedule), at.format("%Y%m%d-%H%M"))
}

/// The run a model-list change starts: `<schedule>-m<hash>-g<generation>`.
pub fn model_change_run_name(schedule: &str, hash: &str, generation: i64) -> String {
    format!("{}-m{}-g{generation}", name_prefix(schedule), &hash[..8])
}

/// Whether a run has finished: `Complete` or `Failed` is true.
fn finished(run: &EvaluationRun) -> Option<bool> {
    let conditions = run.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let is_true = |type_: &str| conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
    if is_true(condition::COMPLETE) {
        Some(true)
    } else if is_true(condition::FAILED) {
        Some(false)
    } else {
        None
    }
}

/// The run a schedule creates from its template.
pub fn run_for(schedule: &EvaluationSchedule, name: &str, reason: &str, hash: &str) -> Result<EvaluationRun, Error> {
    let mut spec = schedule.spec.template.spec.clone();
    spec.matrix.models = schedule.spec.models.clone();
    let template = &schedule.spec.template.metadata;
    let mut labels = template.labels.clone();
    labels.insert(SCHEDULE_LABEL.into(), schedule.name_any());
    let mut annotations = template.annotations.clone();
    annotations.insert(SCHEDULED_AT_ANNOTATION.into(), reason.into());
    annotations.insert(MODELS_HASH_ANNOTATION.into(), hash.into());
    let owner = schedule.controller_owner_ref(&()).ok_or(Error::Metadata("the schedule has no uid"))?;
    Ok(EvaluationRun {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: schedule.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference { block_owner_deletion: Some(true), ..owner }]),
            ..Default::default()
        },
        spec,
        status: None,
    })
}

/// What comparing a finished run with its baseline found.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonOutcome {
    /// `Regressed`, `Improved` or `NoSignificantChange`.
    pub verdict: String,
    pub message: String,
    /// Where the candidate's report (with the comparison) was written.
    pub report: String,
}

/// Compares two finished runs (results read from their stores); an error names what failed.
pub type Compare = Arc<
    dyn Fn(
            EvaluationRun,
            EvaluationRun,
            lightsout_api::ComparisonSpec,
        ) -> futures::future::BoxFuture<'static, Result<ComparisonOutcome, String>>
        + Send
        + Sync,
>;

/// What the schedule reconciler needs beyond the run controller's context.
#[derive(Clone)]
pub struct ScheduleContext {
    pub ctx: Arc<Context>,
    pub compare: Compare,
}

pub async fn reconcile(cached: Arc<EvaluationSchedule>, sctx: Arc<ScheduleContext>) -> Result<Action, Error> {
    let ctx = &sctx.ctx;
    let namespace = cached.namespace().ok_or(Error::Metadata("metadata.namespace is missing"))?;
    let name = cached.name_any();
    // The watch cache may not hold our last status write yet, and the status below is rebuilt
    // from the previous one and applied whole: from a stale copy it would drop what that write
    // recorded (`lastComparison`, `lastScheduleTime`). So the schedule is read fresh.
    let schedules: Api<EvaluationSchedule> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(schedule) = schedules.get_opt(&name).await.map_err(Error::Kube)? else {
        return Ok(Action::await_change());
    };
    let now = ctx.now();
    let previous = schedule.status.clone().unwrap_or_default();
    let mut status = EvaluationScheduleStatus {
        observed_generation: schedule.metadata.generation,
        conditions: previous.conditions.clone(),
        ..previous.clone()
    };

    let timing = match Timing::parse(&schedule.spec.schedule, schedule.spec.time_zone.as_deref()) {
        Ok(timing) => timing,
        Err(Invalid(message)) => {
            set_condition(&mut status, schedule_condition::READY, false, "InvalidSpec", &message, now, &schedule);
            write_status(ctx, &namespace, &name, &status).await?;
            return Ok(Action::await_change());
        }
    };
    set_condition(
        &mut status,
        schedule_condition::READY,
        true,
        "Valid",
        "the schedule and its time zone are valid",
        now,
        &schedule,
    );

    let runs_api: Api<EvaluationRun> = Api::namespaced(ctx.client.clone(), &namespace);
    let selector = format!("{SCHEDULE_LABEL}={name}");
    let mut runs = runs_api.list(&ListParams::default().labels(&selector)).await.map_err(Error::Kube)?.items;
    runs.sort_by_key(|a| (a.creation_timestamp(), a.name_any()));

    // 3. What is due.
    let hash = models_hash(&schedule);
    let created_at = schedule.creation_timestamp().map(|t| from_time(&t)).unwrap_or(now);
    let last_scheduled = previous.last_schedule_time.as_ref().map(from_time).unwrap_or(created_at);
    let cron_due = timing.due(last_scheduled, now);
    let models_changed = previous.models_hash.as_deref().is_some_and(|h| h != hash);
    if previous.models_hash.is_none() {
        // The first list is not a change: runs come on schedule.
        status.models_hash = Some(hash.clone());
    }
    let due: Option<(String, String)> = if models_changed {
        let generation = schedule.metadata.generation.unwrap_or(0);
        Some((model_change_run_name(&name, &hash, generation), format!("models changed (generation {generation})")))
    } else {
        cron_due.map(|at| (scheduled_run_name(&name, at), at.to_rfc3339()))
    };
    let active: Vec<&EvaluationRun> = runs.iter().filter(|r| finished(r).is_none()).collect();
    if let Some((run_name, reason)) = due.filter(|_| !schedule.spec.suspend) {
        let blocked = !active.is_empty() && !active.iter().any(|r| r.name_any() == run_name);
        let create = match (blocked, schedule.spec.concurrency_policy) {
            (false, _) => true,
            (true, ConcurrencyPolicy::Forbid) => {
                tracing::info!(
                    namespace,
                    schedule = name,
                    run = run_name,
                    "a run is due but another is running: skipped"
                );
                false
            }
            (true, ConcurrencyPolicy::Replace) => {
                for run in &active {
                    gone_is_ok(runs_api.delete(&run.name_any(), &DeleteParams::background()).await)?;
                }
                true
            }
        };
        if create {
            let run = run_for(&schedule, &run_name, &reason, &hash)?;
            match runs_api.create(&PostParams::default(), &run).await {
                Ok(created) => runs.push(created),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
            status.last_run = Some(run_name);
            status.models_hash = Some(hash.clone());
        }
        // A skipped cron time is spent; a skipped model change stays due.
        if create || !models_changed {
            if let Some(at) = cron_due {
                status.last_schedule_time = Some(to_time(at));
            }
        }
    }
    let scheduled_from = status.last_schedule_time.as_ref().map(from_time).unwrap_or(created_at);
    status.next_schedule_time = timing.next_after(scheduled_from.max(now)).map(to_time);
    status.active_runs = runs.iter().filter(|r| finished(r).is_none()).count() as i64;

    // 4. Compare what became complete.
    let complete: Vec<&EvaluationRun> = runs.iter().filter(|r| finished(r) == Some(true)).collect();
    for (position, run) in complete.iter().enumerate() {
        if run.labels().contains_key(VERDICT_LABEL) {
            continue;
        }
        let baseline = match (&schedule.spec.baseline.run, schedule.spec.baseline.policy) {
            (Some(pinned), lightsout_api::BaselineKind::Pinned) => {
                runs_api.get_opt(pinned).await.map_err(Error::Kube)?.filter(|b| b.name_any() != run.name_any())
            }
            _ => position.checked_sub(1).map(|p| complete[p].clone()),
        };
        let (verdict, message, baseline_name, report) = match baseline {
            None => (
                NO_BASELINE.to_string(),
                "no earlier complete run to compare with".to_string(),
                String::new(),
                String::new(),
            ),
            Some(baseline) => {
                let outcome = (sctx.compare)(baseline.clone(), (*run).clone(), schedule.spec.comparison.clone()).await;
                match outcome {
                    Ok(outcome) => (outcome.verdict, outcome.message, baseline.name_any(), outcome.report),
                    Err(e) => {
                        // Retried on the next reconcile: the run keeps no verdict label.
                        tracing::warn!(
                            namespace,
                            schedule = name,
                            run = run.name_any(),
                            error = e,
                            "comparison failed"
                        );
                        continue;
                    }
                }
            }
        };
        let label = serde_json::json!({"metadata": {"labels": {VERDICT_LABEL: verdict}}});
        runs_api.patch(&run.name_any(), &PatchParams::default(), &Patch::Merge(&label)).await.map_err(Error::Kube)?;
        status.last_comparison = Some(ScheduleComparison {
            candidate: run.name_any(),
            baseline: baseline_name,
            verdict: verdict.clone(),
            message: message.clone(),
            report,
            compared_at: to_time(now),
        });
        ctx.metrics.schedule_verdict(&RunKey::new(&namespace, &name), &verdict);
    }
    if let Some(last) = status.last_comparison.clone() {
        let regressed = last.verdict == "Regressed";
        let message = format!("{} against {}: {}", last.candidate, last.baseline, last.message);
        set_condition(
            &mut status,
            schedule_condition::NO_REGRESSION,
            !regressed,
            &last.verdict,
            &message,
            now,
            &schedule,
        );
    }

    // 5. History: oldest first beyond the limits, never a baseline still in use.
    let keep_baseline: Option<String> = match schedule.spec.baseline.policy {
        lightsout_api::BaselineKind::Pinned => schedule.spec.baseline.run.clone(),
        lightsout_api::BaselineKind::LastSuccessful => complete.last().map(|r| r.name_any()),
    };
    let failed: Vec<&EvaluationRun> = runs.iter().filter(|r| finished(r) == Some(false)).collect();
    let compared: Vec<&&EvaluationRun> = complete.iter().filter(|r| r.labels().contains_key(VERDICT_LABEL)).collect();
    let excess = |n: usize, limit: i32| n.saturating_sub(limit.max(0) as usize);
    let mut doomed: Vec<String> = compared
        .iter()
        .take(excess(complete.len(), schedule.spec.successful_runs_history_limit))
        .map(|r| r.name_any())
        .collect();
    doomed.extend(
        failed.iter().take(excess(failed.len(), schedule.spec.failed_runs_history_limit)).map(|r| r.name_any()),
    );
    for run in doomed.iter().filter(|r| Some(*r) != keep_baseline.as_ref()) {
        gone_is_ok(runs_api.delete(run, &DeleteParams::background()).await)?;
    }

    if Some(&status) != schedule.status.as_ref() {
        write_status(ctx, &namespace, &name, &status).await?;
    }
    let until_next = status
        .next_schedule_time
        .as_ref()
        .map(|t| (from_time(t) - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_secs(1));
    // Runs' own changes wake us through the watch; the next cron time needs a timer.
    Ok(until_next.map(Action::requeue).unwrap_or_else(Action::await_change))
}

fn set_condition(
    status: &mut EvaluationScheduleStatus,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
    schedule: &EvaluationSchedule,
) {
    let value = if ok { "True" } else { "False" };
    let generation = schedule.metadata.generation;
    if let Some(existing) = status.conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != value {
            existing.last_transition_time = to_time(now);
        }
        existing.status = value.into();
        existing.reason = reason.into();
        existing.message = message.into();
        existing.observed_generation = generation;
    } else {
        status.conditions.push(Condition {
            type_: type_.into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: generation,
            last_transition_time: to_time(now),
        });
    }
}

async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &EvaluationScheduleStatus,
) -> Result<(), Error> {
    let api: Api<EvaluationSchedule> = Api::namespaced(ctx.client.clone(), namespace);
    let patch = serde_json::json!({
        "apiVersion": EvaluationSchedule::api_version(&()),
        "kind": EvaluationSchedule::kind(&()),
        "status": status,
    });
    api.patch_status(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&patch)).await.map_err(Error::Kube)?;
    Ok(())
}

pub fn error_policy(schedule: Arc<EvaluationSchedule>, error: &Error, _ctx: Arc<ScheduleContext>) -> Action {
    tracing::warn!(schedule = schedule.name_any(), category = error.category(), error = %error, "schedule reconcile failed; retrying");
    Action::requeue(Duration::from_secs(30))
}
