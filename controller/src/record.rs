//! Recording what finished, in the results store, before anything is deleted or retried (step 4
//! of the reconcile, see [`crate::reconcile`]): a complete attempt's `result.json` (written by the
//! worker) is read; an attempt that failed on infrastructure gets an `infra-failed` `result.json`
//! written by the controller, whose error starts with the reason (`Evicted: …`). The worker's own
//! record always wins over one the controller would write.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use futures::stream::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use lightsout_api::hash::sha256_hex;
use lightsout_api::EvaluationRun;
use lightsout_core::results::ResultStore;
use lightsout_core::trial::{Outcome, TrialResult, RESULT_SCHEMA};

use crate::context::Context;
use crate::error::Error;
use crate::job;
use crate::metrics::RunKey;
use crate::observation::{InfraReason, TrialState};
use crate::observe;
use crate::run_state::{PreparedRun, RunState};

/// Results read from the store at once.
const READ_CONCURRENCY: usize = 32;

/// The infrastructure reason at the start of a stored error (`Evicted: …`); the worker's own
/// infrastructure failures carry none and count as `WorkerInfraExit`.
pub(crate) fn stored_reason(error: Option<&str>) -> InfraReason {
    let prefix = error.and_then(|e| e.split_once(':')).map(|(p, _)| p.trim()).unwrap_or("");
    [
        InfraReason::Evicted,
        InfraReason::ImagePull,
        InfraReason::NodeLost,
        InfraReason::WorkerExit,
        InfraReason::NeverStarted,
        InfraReason::Other,
    ]
    .into_iter()
    .find(|r| r.as_str() == prefix)
    .unwrap_or(InfraReason::WorkerExit)
}

/// Stores what the observed Jobs say finished: reads the worker's `result.json` of complete
/// attempts, and writes an `infra-failed` one for attempts that failed on infrastructure.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn record_finished(
    run: &EvaluationRun,
    ctx: &Context,
    prepared: &PreparedRun,
    state: &mut RunState,
    observed: &observe::Observed,
    jobs: &HashMap<(&str, u32), &Job>,
    key: &RunKey,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let store = &prepared.store;
    let stored = state.stored.as_mut().expect("stored");
    let mut changed = false;
    // Attempts recorded in this pass, whose stopped runs' records are read after.
    let mut recorded: Vec<(usize, u32)> = Vec::new();
    // The workers' results of newly complete attempts, read several at a time (one S3 round trip
    // each; a pass may see hundreds finish).
    let wanted: Vec<(usize, String)> = observed
        .summaries
        .iter()
        .enumerate()
        .filter(|(_, f)| !stored.has_result(&prepared.plan.trials[f.trial].id, f.attempt))
        .map(|(i, f)| {
            let trial = &prepared.plan.trials[f.trial];
            let variant = &prepared.plan.variants[trial.variant as usize];
            (i, prepared.layout.artifact(&variant.id, &trial.id, f.attempt, "result.json"))
        })
        .collect();
    let mut fetched = read_all(store, wanted).await;
    fetched.sort_by_key(|(i, _, _)| *i);
    for (i, result_key, bytes) in fetched {
        let finished = &observed.summaries[i];
        let trial = &prepared.plan.trials[finished.trial];
        let bytes = bytes.map_err(|e| Error::store(store.uri(&result_key), e))?;
        let parsed = bytes.map(|b| serde_json::from_slice::<TrialResult>(&b));
        let result = match parsed {
            Some(Ok(result)) if result.trial_id == trial.id && result.attempt == finished.attempt => result,
            other => {
                let job = jobs.get(&(trial.id.as_str(), finished.attempt)).copied();
                let (at, attempt) = (now, finished.attempt);
                let decided = finished.summary.as_ref().filter(|_| other.is_none() && finished.decided_by_controller);
                let record = if let Some(summary) = decided {
                    // The kubelet ended the attempt for the agent's doing (see `observe`); the
                    // worker could not write its record, so the controller does, from the summary.
                    let error = summary.error.clone().unwrap_or_default();
                    let mut record =
                        controller_result(run, prepared, finished.trial, attempt, job, at, summary.outcome, error);
                    record.duration_ms = summary.duration_ms;
                    record
                } else {
                    // The Job completed but its result is not readable: the attempt is retried,
                    // never scored.
                    let why = match other {
                        None => "is missing".to_string(),
                        Some(Err(e)) => format!("is not a valid trial result: {e}"),
                        Some(Ok(_)) => "names another trial or attempt".to_string(),
                    };
                    let message = format!("the Job completed but {} {why}", store.uri(&result_key));
                    infra_result(run, prepared, finished.trial, attempt, job, at, InfraReason::Other, &message)
                };
                put_result(store, prepared, &record).await?;
                record
            }
        };
        if !result.outcome.is_scored() {
            ctx.metrics.attempt_infra_failed(key, stored_reason(result.error.as_deref()).as_str());
        }
        stored.insert_result(&result);
        recorded.push((finished.trial, result.attempt));
        changed = true;
    }
    for (index, trial_state) in observed.observation.trials().iter().enumerate() {
        let TrialState::InfraFailed { attempt, at, reason } = *trial_state else { continue };
        let trial = &prepared.plan.trials[index];
        if stored.has_result(&trial.id, attempt) {
            continue;
        }
        if let Some(result) = worker_result(store, prepared, index, attempt).await? {
            // The worker stored this attempt's result after all (its Job's status was unreadable
            // to us): that is the attempt's truth, never to be overwritten by an infra record.
            tracing::info!(trial = trial.id, attempt, "the attempt's own result is stored; it is kept");
            if !result.outcome.is_scored() {
                ctx.metrics.attempt_infra_failed(key, stored_reason(result.error.as_deref()).as_str());
            }
            stored.insert_result(&result);
            recorded.push((index, attempt));
            changed = true;
            continue;
        }
        let job = jobs.get(&(trial.id.as_str(), attempt)).copied();
        let job_name = job.and_then(|j| j.metadata.name.clone()).unwrap_or_default();
        let detail = observed
            .errors
            .iter()
            .find(|e| e.job == job_name)
            .map(|e| e.message.clone())
            .unwrap_or_else(|| format!("Job {job_name} failed outside the agent"));
        let record = infra_result(run, prepared, index, attempt, job, at, reason, &detail);
        put_result(store, prepared, &record).await?;
        ctx.metrics.attempt_infra_failed(key, reason.as_str());
        stored.insert_result(&record);
        recorded.push((index, attempt));
        changed = true;
    }
    read_interruptions(prepared, stored, &recorded).await?;
    if changed {
        state.summary_dirty = true;
    }
    Ok(())
}

/// Reads the records of the stopped runs ([`lightsout_core::interruption`]) of attempts that
/// just ended: their workers wrote them before exiting, so they are all stored by now (one
/// listing per attempt). The scan at the controller's start read those of earlier attempts;
/// a record seen twice counts once.
async fn read_interruptions(
    prepared: &PreparedRun,
    stored: &mut lightsout_core::stored::StoredRun,
    attempts: &[(usize, u32)],
) -> Result<(), Error> {
    use lightsout_core::interruption::Interruption;
    let store = &prepared.store;
    // Filled by hand, as `read_all`: a stream of closures borrowing the store fails rustc's
    // `Send` inference for the reconcile's future.
    let mut dirs = attempts.iter().map(|&(trial, attempt)| {
        let planned = &prepared.plan.trials[trial];
        let variant = &prepared.plan.variants[planned.variant as usize];
        (trial, attempt, prepared.layout.attempt_dir(&variant.id, &planned.id, attempt))
    });
    let mut listing = futures::stream::FuturesUnordered::new();
    let mut keys = Vec::new();
    loop {
        while listing.len() < READ_CONCURRENCY {
            let Some(dir) = dirs.next() else { break };
            listing.push(list_one(store, dir));
        }
        let Some((trial, attempt, listed)) = listing.next().await else { break };
        for key in listed? {
            if key.rsplit('/').next().is_some_and(Interruption::is_file_name) {
                keys.push((key, prepared.plan.trials[trial].id.as_str(), attempt));
            }
        }
    }
    keys.sort();
    for (key, trial, attempt) in keys {
        let Some(bytes) = store.get(&key).await.map_err(|e| Error::store(store.uri(&key), e))? else { continue };
        match lightsout_core::interruption::read_record(&bytes, trial, attempt) {
            Ok(record) => stored.insert_interruption(&record),
            Err(why) => tracing::warn!(key = store.uri(&key), why, "an interruption record cannot be counted"),
        }
    }
    Ok(())
}

/// The `result.json` the worker stored for this trial's `attempt`, if there is a valid one.
async fn worker_result(
    store: &lightsout_s3::Results,
    prepared: &PreparedRun,
    trial: usize,
    attempt: u32,
) -> Result<Option<TrialResult>, Error> {
    let planned = &prepared.plan.trials[trial];
    let variant = &prepared.plan.variants[planned.variant as usize];
    let result_key = prepared.layout.artifact(&variant.id, &planned.id, attempt, "result.json");
    let bytes = store.get(&result_key).await.map_err(|e| Error::store(store.uri(&result_key), e))?;
    Ok(bytes
        .and_then(|b| serde_json::from_slice::<TrialResult>(&b).ok())
        .filter(|r| r.trial_id == planned.id && r.attempt == attempt))
}

/// Reads `keys` (tagged with an index) from the store, [`READ_CONCURRENCY`] at a time.
async fn read_all(
    store: &lightsout_s3::Results,
    keys: Vec<(usize, String)>,
) -> Vec<(usize, String, std::io::Result<Option<Vec<u8>>>)> {
    let mut keys = keys.into_iter();
    let mut reading = futures::stream::FuturesUnordered::new();
    let mut done = Vec::new();
    loop {
        while reading.len() < READ_CONCURRENCY {
            let Some((index, key)) = keys.next() else { break };
            reading.push(read_one(store, index, key));
        }
        match reading.next().await {
            Some(read) => done.push(read),
            None => return done,
        }
    }
}

async fn list_one(
    store: &lightsout_s3::Results,
    (trial, attempt, dir): (usize, u32, String),
) -> (usize, u32, Result<Vec<String>, Error>) {
    let listed = store.list(&dir).await.map_err(|e| Error::store(store.uri(&dir), e));
    (trial, attempt, listed)
}

async fn read_one(
    store: &lightsout_s3::Results,
    index: usize,
    key: String,
) -> (usize, String, std::io::Result<Option<Vec<u8>>>) {
    let bytes = store.get(&key).await;
    (index, key, bytes)
}

pub(crate) async fn put_result(
    store: &lightsout_s3::Results,
    prepared: &PreparedRun,
    result: &TrialResult,
) -> Result<(), Error> {
    let key = prepared.layout.artifact(&result.variant_id, &result.trial_id, result.attempt, "result.json");
    let bytes = serde_json::to_vec_pretty(result).expect("a result serialises");
    store.put(&key, &bytes).await.map_err(|e| Error::store(store.uri(&key), e))
}

/// The `result.json` the controller writes for an attempt that failed on infrastructure (or
/// could not be started): never scored; its usage is unknown (the pod's exchanges were not
/// stored), so its cost is `None`, not 0.
#[allow(clippy::too_many_arguments)]
pub(crate) fn infra_result(
    run: &EvaluationRun,
    prepared: &PreparedRun,
    trial: usize,
    attempt: u32,
    job: Option<&Job>,
    at: DateTime<Utc>,
    reason: InfraReason,
    message: &str,
) -> TrialResult {
    let error = format!("{}: {message}", reason.as_str());
    controller_result(run, prepared, trial, attempt, job, at, Outcome::InfraFailed, error)
}

/// A `result.json` written by the controller for an attempt whose worker could not write one:
/// usage unknown (`cost_usd` `None`, not 0), no findings.
#[allow(clippy::too_many_arguments)]
fn controller_result(
    run: &EvaluationRun,
    prepared: &PreparedRun,
    trial: usize,
    attempt: u32,
    job: Option<&Job>,
    at: DateTime<Utc>,
    outcome: Outcome,
    error: String,
) -> TrialResult {
    let planned = &prepared.plan.trials[trial];
    let variant = &prepared.plan.variants[planned.variant as usize];
    let task = &prepared.tasks[planned.task as usize].task;
    let started_at = job
        .and_then(|j| j.metadata.creation_timestamp.as_ref())
        .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0))
        .unwrap_or(at)
        .min(at);
    TrialResult {
        schema: RESULT_SCHEMA.to_string(),
        run: prepared.layout.run.clone(),
        variant_id: variant.id.clone(),
        variant: variant.name.clone(),
        trial_id: planned.id.clone(),
        task_id: task.id.clone(),
        context_config: planned.context,
        repeat: planned.repeat,
        attempt,
        outcome,
        error: Some(error),
        harness: variant.harness.clone(),
        harness_version_reported: None,
        model: variant.model.name.clone(),
        provider: variant.model.provider.clone(),
        reasoning_effort: variant.reasoning_effort,
        prompt_sha256: sha256_hex(job::prompt_for(variant, task, planned.context_config(&run.spec)).as_bytes()),
        started_at,
        finished_at: at,
        duration_ms: (at - started_at).num_milliseconds().max(0) as u64,
        usage: Default::default(),
        cost_usd: None,
        model_calls: 0,
        findings: 0,
        review_words: 0,
        scripted_model: false,
        trajectory: None,
        isolation: None,
    }
}
