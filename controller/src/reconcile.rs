//! The EvaluationRun reconciler: dereference → validate → apply.
//!
//! One pass, all I/O through the [`Context`]:
//!
//! 1. **Deleted?** Clean up through the finalizer ([`crate::finalize`]). Otherwise make sure the
//!    finalizer is on the run.
//! 2. **Dereference and validate** the spec ([`prepare::prepare`]), once per generation: a
//!    problem becomes `Accepted=False` with a message naming what and where, and no Job.
//! 3. **NetworkPolicy**: applied once per generation (server-side apply).
//! 4. **Observe** the run's Jobs and pods ([`observe`]) and **record** what finished, in the
//!    results store, before anything is deleted or retried: a complete attempt's `result.json`
//!    (written by the worker) is read; an attempt that failed on infrastructure gets an
//!    `infra-failed` `result.json` written by the controller (its error starts with the reason,
//!    e.g. `Evicted: …`). Only then are stuck Jobs deleted and finished Jobs given their TTL,
//!    so an attempt number is never forgotten and reused.
//! 5. **Decide** ([`decide`]) from the Jobs and the stored results alone, and create one Job
//!    (then its ConfigMap) per start. Names are a function of (run, trial, attempt), so a
//!    restarted controller gets `AlreadyExists`, never a second Job for an attempt.
//! 6. **Judge**: store the verdicts the judge queue finished and hand it the finished reviews
//!    still without ([`crate::judging`], [`crate::judge_queue`]); the pass never waits on a
//!    model, and a judged review wakes the run again.
//! 7. **Summarise** from the stored results and verdicts with the shared scoring code
//!    (`summary.json`, throttled to [`ControllerSettings::summary_interval`] while trials
//!    finish), and write `.status` when it changed; Events on milestones.
//!
//! Because every decision is a function of the API's state and the results store, killing the
//! controller at any point and starting it again continues the run without duplicating or
//! losing a trial, and counts every result once.
//!
//! [`ControllerSettings::summary_interval`]: crate::context::ControllerSettings::summary_interval

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use lightsout_api::{condition, EvaluationRun, EvaluationRunStatus};
use lightsout_core::results::ResultStore;
use lightsout_core::summary::{self, DatasetSummary, RunIdentity};
use lightsout_core::trial_record::HeldResult;

use crate::budget::{self, Budget};
use crate::context::Context;
use crate::error::{gone_is_ok, Error};
pub use crate::finalize::FINALIZER;
use crate::job::{self, TrialInput};
use crate::judging::{awaiting_judges, judge_reviews};
use crate::metrics::{Role, RunKey, TrialGauges};
use crate::network::{self, ServiceBackend};
use crate::observation::{AttemptState, InfraReason};
use crate::observe::{self, observe, Admission};
use crate::prepare::{self, PrepareError};
use crate::record::{infra_result, put_result, record_finished, stored_reason};
use crate::run_state::{self, PreparedRun, RunState};
use crate::schedule::{decide, Decision, Policy};
use crate::status::{self, compute_status, Refusal};

/// How soon to come back while reviews wait for the judges (a judged review also wakes the run
/// at once; this covers a controller whose wakes are not wired, as in the tests).
const JUDGING_REQUEUE: Duration = Duration::from_secs(2);
/// How soon to come back to a run whose spec is refused (a missing Secret may appear).
const INVALID_REQUEUE: Duration = Duration::from_secs(60);

/// Reconciles one EvaluationRun (the kube-rs `Controller`'s reconcile function).
pub async fn reconcile(run: Arc<EvaluationRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_run(&run, &ctx).await;
    ctx.metrics.reconcile_finished(started.elapsed().as_secs_f64(), result.as_ref().err().map(Error::category));
    result
}

/// What to do after a failed reconcile: log it and try again soon.
pub fn error_policy(run: Arc<EvaluationRun>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(
        namespace = run.metadata.namespace.as_deref().unwrap_or(""),
        run = run.metadata.name.as_deref().unwrap_or(""),
        category = error.category(),
        error = %error,
        "reconcile failed; retrying"
    );
    Action::requeue(match error {
        Error::Metadata(_) => Duration::from_secs(300),
        _ => Duration::from_secs(15),
    })
}

/// The run's namespace, name and uid.
fn identity(run: &EvaluationRun) -> Result<(String, String, String), Error> {
    Ok((
        run.metadata.namespace.clone().ok_or(Error::Metadata("metadata.namespace is missing"))?,
        run.metadata.name.clone().ok_or(Error::Metadata("metadata.name is missing"))?,
        run.metadata.uid.clone().ok_or(Error::Metadata("metadata.uid is missing"))?,
    ))
}

async fn reconcile_run(run: &EvaluationRun, ctx: &Context) -> Result<Action, Error> {
    let (namespace, name, uid) = identity(run)?;
    if run.metadata.deletion_timestamp.is_some() {
        return crate::finalize::cleanup(run, ctx).await;
    }
    ensure_finalizer(run, ctx, &namespace, &name).await?;

    let state_lock = ctx.run_state(&uid);
    let mut state = state_lock.lock().await;
    let generation = run.metadata.generation;

    // Dereference and validate, once per generation.
    if state.prepared.as_ref().map(|p| p.generation) != Some(generation) {
        match prepare::prepare(run, ctx).await {
            Ok((prepared, stored)) => {
                let max_attempts = prepared.max_attempts(&run.spec);
                if state.stored.is_none() {
                    // Results stored before this process started are not counted again.
                    state.counted = prepared
                        .plan
                        .trials
                        .iter()
                        .filter(|t| stored.final_result(&t.id, max_attempts).is_some())
                        .map(|t| run_state::counted_key(&t.id))
                        .collect();
                    let mut stored = stored;
                    stored.compact();
                    state.stored = Some(stored);
                    state.summary_dirty = true;
                }
                if state.prepared.is_none() {
                    ctx.event(
                        run,
                        false,
                        "Accepted",
                        format!(
                            "planned {} trials: {} variants × {} tasks × {} repeats",
                            prepared.plan.trials.len(),
                            prepared.plan.variants.len(),
                            prepared.tasks.len(),
                            run.spec.matrix.repeats.max(1)
                        ),
                    )
                    .await;
                }
                state.prepared = Some(Arc::new(prepared));
            }
            Err(PrepareError::Refused(refusal)) => {
                state.prepared = None;
                return reject(run, ctx, &state, refusal).await;
            }
            Err(PrepareError::Infra(e)) => return Err(e),
        }
    }
    let prepared = state.prepared.clone().expect("prepared above");

    if state.network_generation != generation {
        if let Err(message) = apply_network_policy(run, ctx, &namespace).await? {
            state.prepared = None;
            return reject(run, ctx, &state, Refusal::invalid(message)).await;
        }
        state.network_generation = generation;
    }

    let key = RunKey { namespace: namespace.clone(), run: name.clone() };
    let now = ctx.now();
    let (jobs, pods) = ctx.jobs_and_pods(&namespace, &name).await?;
    let mut observed =
        observe(&jobs, &pods, prepared.plan.trials.len(), &prepared.trial_index, now, &ctx.settings.observe);
    for error in &observed.errors {
        tracing::warn!(namespace, run = name, job = error.job, kind = ?error.kind, "{}", error.message);
    }
    // Counted in status and the histogram only once the status holding them is written: a pass
    // that fails before leaves them to the next. The counts so far are this process's (seeded
    // from status once), never the status just read, which may lag behind our last write.
    let admission_waits = new_admission_waits(&mut state, &observed);
    let queue_counted = state
        .queue_counted
        .get_or_insert_with(|| status::QueueCounts::of(run.status.as_ref().and_then(|s| s.queue.as_ref())))
        .with(&admission_waits);
    // Only while Jobs wait: whether Kueue could ever admit them (one read).
    let queue_blocked = match (&run.spec.queue_name, &observed.oldest_queued) {
        (Some(_), Some(queued)) => ctx.queue_blocked(&namespace, &queued.uid).await,
        _ => None,
    };
    let jobs_by_attempt: HashMap<(&str, u32), &Job> =
        jobs.iter().filter_map(|j| observe::identity(j).map(|id| (id, j))).collect();

    record_finished(run, ctx, &prepared, &mut state, &observed, &jobs_by_attempt, &key, now).await?;
    delete_stuck_jobs(ctx, &namespace, &observed.to_delete).await?;
    set_finished_ttls(ctx, &namespace, &jobs, state.stored.as_ref().expect("stored")).await?;
    if !state.config_maps_checked {
        recreate_config_maps(run, ctx, &prepared, &jobs).await?;
        state.config_maps_checked = true;
    }

    // The stored results complete the picture: Jobs of recorded attempts may be gone.
    let max_attempts = prepared.max_attempts(&run.spec);
    {
        let stored = state.stored.as_ref().expect("stored");
        for (index, trial) in prepared.plan.trials.iter().enumerate() {
            let Some(trial_results) = stored.trials.get(&trial.id) else { continue };
            for (attempt, result) in &trial_results.results {
                observed.observation.record(index, *attempt, attempt_state(result));
            }
        }
    }

    let spec = &run.spec;
    let policy = Policy::from_spec(spec, ctx.settings.backoff);
    let means = budget::variant_mean_costs(&prepared.plan.variants, state.summary.as_ref());
    let spent = state.stored.as_ref().expect("stored").spent_usd();
    let decision = {
        let budget = Budget {
            max_usd: spec.budget.max_usd,
            spent_usd: spent,
            variant_mean_usd: &means,
            prior_usd: budget::prior_usd(&spec.budget, ctx.settings.prior_trial_usd),
        };
        decide(&prepared.plan.trials, &observed.observation, &policy, &budget, now)
    };
    let counted_before = state.counted.len();
    count_final_trials(ctx, &prepared, &mut state, &key, max_attempts);
    let started = start_trials(run, ctx, &prepared, &mut state, &decision, &key, now).await?;
    if state.last_progress.is_none() || started > 0 || state.counted.len() != counted_before {
        state.last_progress = Some(now);
    }

    let judged_all = judge_reviews(run, ctx, &prepared, &mut state, &key, &uid).await;
    let awaiting_judges = awaiting_judges(&prepared, &state, max_attempts);

    summarise(run, ctx, &prepared, &mut state, &decision, awaiting_judges).await?;
    let new_status = compute_status(
        run.status.as_ref(),
        &status::Observed {
            generation,
            spec_valid: Ok(()),
            suspended: spec.suspend,
            budget_usd: spec.budget.max_usd,
            running: decision.counts.running() as i64,
            queued: observed.queued as i64,
            budget_gate_closed: decision.budget_exceeded,
            awaiting_judges: awaiting_judges as i64,
            summary: state.summary.as_ref(),
            queue: run.spec.queue_name.as_ref().map(|_| status::QueueObserved {
                counted: queue_counted,
                oldest_waiting_since: observed.oldest_queued.as_ref().map(|q| q.created),
                blocked: queue_blocked,
            }),
            now,
        },
    );
    milestones(run, ctx, run.status.as_ref(), &new_status, started).await;
    write_status(run, ctx, &new_status).await?;
    mark_admissions_counted(ctx, &mut state, &key, &observed);
    state.queue_counted = Some(queue_counted);

    ctx.metrics.run_gauges(
        &key,
        spec.budget.max_usd,
        new_status.spend.total_usd,
        TrialGauges {
            active: decision.counts.running() as u64,
            pending: decision.counts.pending() as u64,
            queued: observed.queued as u64,
            preempted: new_status.trials.preempted.max(0) as u64,
        },
    );
    let complete = status::condition(&new_status, condition::COMPLETE).is_some_and(|c| c.status == "True");
    ctx.metrics.run_progress(&key, complete, state.last_progress.unwrap_or(now));
    if let Some(summary) = &state.summary {
        for variant in &summary.variants {
            let composite = variant.swe_prbench.as_ref().map(|s| s.composite);
            ctx.metrics.variant_scores(&key, &variant.name, &variant.recall, composite);
        }
    }
    for stats in ctx.models.stats() {
        ctx.metrics.provider_totals(&stats.provider, stats.rate_limited, stats.retries);
    }

    let mut next: Option<Duration> = decision.requeue_after(now);
    let mut sooner = |d: Duration| next = Some(next.map_or(d, |n| n.min(d)));
    if !judged_all {
        sooner(JUDGING_REQUEUE);
    }
    if state.summary_dirty {
        sooner(ctx.settings.summary_interval);
    }
    if !complete {
        sooner(ctx.settings.idle_requeue);
    }
    if let Some(expiry) = observed.next_grace_expiry {
        // A second past it, so the pod is past its grace when looked at again.
        sooner((expiry - now).to_std().unwrap_or_default() + Duration::from_secs(1));
    }
    Ok(next.map(Action::requeue).unwrap_or_else(Action::await_change))
}

/// How a stored result enters the scheduler's observation.
fn attempt_state(result: &HeldResult) -> AttemptState {
    if result.outcome.is_scored() {
        AttemptState::Finished
    } else {
        AttemptState::InfraFailed { at: result.finished_at, reason: stored_reason(result.error.as_deref()) }
    }
}

async fn ensure_finalizer(run: &EvaluationRun, ctx: &Context, namespace: &str, name: &str) -> Result<(), Error> {
    let finalizers = run.metadata.finalizers.as_deref().unwrap_or(&[]);
    if finalizers.iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let patch: serde_json::Value = if run.metadata.finalizers.is_none() {
        serde_json::json!([{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}])
    } else {
        serde_json::json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}])
    };
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a valid JSON patch");
    Api::<EvaluationRun>::namespaced(ctx.client.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await?;
    Ok(())
}

/// Writes the status of a run that was refused, with a Warning Event (the refusal's reason) when
/// the refusal is new. A spec problem is looked at again after [`INVALID_REQUEUE`] (a missing
/// Secret or bucket may appear); a transient one fails the reconcile, so it is retried sooner
/// and counted among the reconcile errors.
async fn reject(run: &EvaluationRun, ctx: &Context, state: &RunState, refusal: Refusal) -> Result<Action, Error> {
    let previous = run.status.as_ref();
    let new_status = compute_status(
        previous,
        &status::Observed {
            generation: run.metadata.generation,
            spec_valid: Err(refusal.clone()),
            suspended: run.spec.suspend,
            budget_usd: run.spec.budget.max_usd,
            running: 0,
            queued: 0,
            budget_gate_closed: false,
            awaiting_judges: 0,
            summary: state.summary.as_ref(),
            queue: None,
            now: ctx.now(),
        },
    );
    let was = previous.and_then(|p| status::condition(p, condition::ACCEPTED));
    if was.is_none_or(|c| c.status != "False" || c.reason != refusal.reason || c.message != refusal.message) {
        ctx.event(run, true, refusal.reason, refusal.message.clone()).await;
    }
    write_status(run, ctx, &new_status).await?;
    if refusal.transient {
        return Err(Error::Dataset(refusal.message));
    }
    Ok(Action::requeue(INVALID_REQUEUE))
}

async fn write_status(run: &EvaluationRun, ctx: &Context, new_status: &EvaluationRunStatus) -> Result<(), Error> {
    if run.status.as_ref() == Some(new_status) {
        return Ok(());
    }
    let (namespace, name, _) = identity(run)?;
    let patch = serde_json::json!({
        "apiVersion": "lightsout.dev/v1alpha1",
        "kind": "EvaluationRun",
        "status": new_status,
    });
    Api::<EvaluationRun>::namespaced(ctx.client.clone(), &namespace)
        .patch_status(&name, &PatchParams::apply(&ctx.settings.field_manager).force(), &Patch::Apply(&patch))
        .await?;
    Ok(())
}

/// Applies the run's NetworkPolicy; `Ok(Err(message))` when the spec names an endpoint trial
/// pods cannot be confined to.
async fn apply_network_policy(
    run: &EvaluationRun,
    ctx: &Context,
    namespace: &str,
) -> Result<Result<(), String>, Error> {
    let mut settings = ctx.settings.network.clone();
    // In-cluster Services the configuration does not list are looked up: their pods are the target.
    let mut urls: Vec<String> = run
        .spec
        .matrix
        .models
        .iter()
        .filter_map(|m| run.spec.providers.get(&m.provider))
        .map(|p| p.base_url.clone())
        .collect();
    urls.extend(run.spec.storage.s3.as_ref().and_then(|s3| s3.endpoint.clone()));
    for url in urls {
        let Some((service_namespace, service, port)) = network::in_cluster_service(&url) else { continue };
        let key = format!("{service_namespace}/{service}");
        if settings.services.contains_key(&key) {
            continue;
        }
        let Some(found) = Api::<Service>::namespaced(ctx.client.clone(), &service_namespace).get_opt(&service).await?
        else {
            return Ok(Err(format!("{url}: Service {key} does not exist")));
        };
        let spec = found.spec.unwrap_or_default();
        let Some(selector) = spec.selector.filter(|s| !s.is_empty()) else {
            return Ok(Err(format!("{url}: Service {key} has no pod selector, so no NetworkPolicy can name its pods")));
        };
        let target_port =
            spec.ports.unwrap_or_default().into_iter().find(|p| p.port == i32::from(port)).and_then(|p| {
                match p.target_port {
                    Some(IntOrString::Int(n)) => u16::try_from(n).ok(),
                    Some(IntOrString::String(_)) => None,
                    None => Some(port),
                }
            });
        settings.services.insert(key, ServiceBackend { pod_selector: selector, target_port });
    }
    let targets = match network::run_egress_targets(run, &settings) {
        Ok(targets) => targets,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let policy = match network::network_policy(run, &targets) {
        Ok(policy) => policy,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let name = policy.metadata.name.clone().expect("the policy has a name");
    let mut body = serde_json::to_value(&policy).expect("a policy serialises");
    body["apiVersion"] = "networking.k8s.io/v1".into();
    body["kind"] = "NetworkPolicy".into();
    Api::<NetworkPolicy>::namespaced(ctx.client.clone(), namespace)
        .patch(&name, &PatchParams::apply(&ctx.settings.field_manager).force(), &Patch::Apply(&body))
        .await?;
    Ok(Ok(()))
}

async fn delete_stuck_jobs(ctx: &Context, namespace: &str, names: &[String]) -> Result<(), Error> {
    let api = Api::<Job>::namespaced(ctx.client.clone(), namespace);
    for name in names {
        gone_is_ok(api.delete(name, &DeleteParams::background()).await)?;
    }
    Ok(())
}

/// Gives finished Jobs whose result is stored their TTL, so Kubernetes removes them (with
/// their pods and ConfigMaps).
async fn set_finished_ttls(
    ctx: &Context,
    namespace: &str,
    jobs: &[Job],
    stored: &lightsout_core::stored::StoredRun,
) -> Result<(), Error> {
    let api = Api::<Job>::namespaced(ctx.client.clone(), namespace);
    for job in jobs {
        let has_ttl = job.spec.as_ref().is_some_and(|s| s.ttl_seconds_after_finished.is_some());
        if has_ttl || !observe::is_finished(job) {
            continue;
        }
        let Some((trial, attempt)) = observe::identity(job) else { continue };
        if !stored.has_result(trial, attempt) {
            continue;
        }
        let name = job.metadata.name.as_deref().unwrap_or_default();
        let patch = job::ttl_patch(ctx.settings.finished_job_ttl_seconds);
        gone_is_ok(api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await)?;
    }
    Ok(())
}

/// After a (re)start: the ConfigMap of every active Job whose job file is too large to travel
/// inline, created again if it is missing.
async fn recreate_config_maps(
    run: &EvaluationRun,
    ctx: &Context,
    prepared: &PreparedRun,
    jobs: &[Job],
) -> Result<(), Error> {
    let namespace = run.metadata.namespace.as_deref().unwrap_or_default();
    let api = Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace);
    for job in jobs {
        if observe::is_finished(job) {
            continue;
        }
        let Some((trial_id, attempt)) = observe::identity(job) else { continue };
        let Some(&index) = prepared.trial_index.get(trial_id) else { continue };
        let Ok(objects) = trial_objects(run, ctx, prepared, index, attempt) else { continue };
        let Some(config_map) = objects.config_map else { continue };
        let Ok(config_map) = job::config_map_for_job(config_map, job) else { continue };
        create_ignoring_existing(&api, &config_map).await?;
    }
    Ok(())
}

fn trial_objects(
    run: &EvaluationRun,
    ctx: &Context,
    prepared: &PreparedRun,
    trial: usize,
    attempt: u32,
) -> Result<job::TrialObjects, job::JobError> {
    let planned = &prepared.plan.trials[trial];
    let variant = &prepared.plan.variants[planned.variant as usize];
    let task = &prepared.tasks[planned.task as usize].task;
    let prompt = job::prompt_for(variant, task, planned.context_config(&run.spec));
    let input = TrialInput {
        run,
        variant,
        task,
        trial_id: &planned.id,
        context: planned.context,
        repeat: planned.repeat,
        attempt,
        prompt: &prompt,
    };
    job::build_trial(&input, &ctx.settings.trial)
}

/// Creates `object`; one that already exists (a restarted controller repeating a create) is fine.
async fn create_ignoring_existing<K>(api: &Api<K>, object: &K) -> Result<Option<K>, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Creates the Jobs (and ConfigMaps) of the decision's starts. A trial whose objects cannot be
/// built (a task without an image, a job file over 1 MiB) cannot run at all: it is stored as
/// infra-failed at its last attempt, reported in an Event, and never scored.
async fn start_trials(
    run: &EvaluationRun,
    ctx: &Context,
    prepared: &PreparedRun,
    state: &mut RunState,
    decision: &Decision,
    key: &RunKey,
    now: DateTime<Utc>,
) -> Result<usize, Error> {
    let namespace = run.metadata.namespace.as_deref().unwrap_or_default();
    let jobs = Api::<Job>::namespaced(ctx.client.clone(), namespace);
    let config_maps = Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace);
    let mut started = 0;
    for start in &decision.start {
        let objects = match trial_objects(run, ctx, prepared, start.trial, start.attempt) {
            Ok(objects) => objects,
            Err(e) => {
                let last = prepared.max_attempts(&run.spec).max(start.attempt);
                let record =
                    infra_result(run, prepared, start.trial, last, None, now, InfraReason::Other, &e.to_string());
                put_result(&prepared.store, prepared, &record).await?;
                ctx.event(run, true, "TrialNotStarted", format!("task {}: {e}", record.task_id)).await;
                ctx.metrics.attempt_infra_failed(key, InfraReason::Other.as_str());
                state.stored.as_mut().expect("stored").insert_result(&record);
                state.summary_dirty = true;
                continue;
            }
        };
        let job = match create_ignoring_existing(&jobs, &objects.job).await? {
            Some(created) => created,
            // Created by an earlier pass (or replica) that did not see it yet: its ConfigMap too.
            None => match jobs.get_opt(objects.job.metadata.name.as_deref().unwrap_or_default()).await? {
                Some(existing) => existing,
                None => continue,
            },
        };
        if let Some(config_map) = objects.config_map {
            let config_map = job::config_map_for_job(config_map, &job)
                .map_err(|e| Error::Store(format!("the created Job has no uid: {e}")))?;
            create_ignoring_existing(&config_maps, &config_map).await?;
        }
        started += 1;
    }
    Ok(started)
}

/// Counts trials that became final since the last pass in the metrics, once each.
fn count_final_trials(ctx: &Context, prepared: &PreparedRun, state: &mut RunState, key: &RunKey, max_attempts: u32) {
    let stored = state.stored.as_ref().expect("stored");
    for trial in &prepared.plan.trials {
        let counted = run_state::counted_key(&trial.id);
        if state.counted.contains(&counted) {
            continue;
        }
        let Some(result) = stored.final_result(&trial.id, max_attempts) else { continue };
        let variant = &prepared.plan.variants[trial.variant as usize];
        ctx.metrics.trial_final(key, &variant.name, result.outcome.as_str(), Some(result.duration_ms as f64 / 1000.0));
        ctx.metrics.usage(
            key,
            &variant.name,
            &variant.model.name,
            Role::Agent,
            &result.usage,
            result.cost_usd,
            u64::from(result.model_calls),
        );
        state.counted.insert(counted);
    }
}

/// The waits of the queue admissions this process has not counted yet (for `status.queue`). Its
/// first look takes what it finds as counted (admitted before it started, or counted by the
/// process before it).
fn new_admission_waits(state: &mut RunState, observed: &observe::Observed) -> Vec<f64> {
    let seen = state.admissions_seen.get_or_insert_with(|| observed.admissions.iter().map(Admission::key).collect());
    observed.admissions.iter().filter(|a| !seen.contains(&a.key())).map(|a| a.wait_seconds).collect()
}

/// Once the status holding them is written: puts the new admissions into the queue-wait
/// histogram and remembers them as counted.
fn mark_admissions_counted(ctx: &Context, state: &mut RunState, key: &RunKey, observed: &observe::Observed) {
    let seen = state.admissions_seen.get_or_insert_with(HashSet::new);
    for admission in &observed.admissions {
        if seen.insert(admission.key()) {
            ctx.metrics.queue_wait(key, admission.wait_seconds);
        }
    }
    // Jobs collected after their TTL are gone for good: forget them, so the set stays small.
    let current: HashSet<(String, i64)> = observed.admissions.iter().map(Admission::key).collect();
    seen.retain(|admission| current.contains(admission));
}

/// Recomputes `summary.json` when results changed: at once while there is none or when every
/// trial is final and judged, otherwise at most every `summary_interval`.
async fn summarise(
    run: &EvaluationRun,
    ctx: &Context,
    prepared: &PreparedRun,
    state: &mut RunState,
    decision: &Decision,
    awaiting_judges: usize,
) -> Result<(), Error> {
    if !state.summary_dirty && state.summary.is_some() {
        return Ok(());
    }
    let settled = decision.all_final() && awaiting_judges == 0;
    let due = state.summary_computed_at.is_none_or(|at| at.elapsed() >= ctx.settings.summary_interval);
    if state.summary.is_some() && !settled && !due {
        return Ok(());
    }
    let max_attempts = prepared.max_attempts(&run.spec);
    let stored = state.stored.as_ref().expect("stored");
    let records =
        stored.trial_records(&prepared.plan.trials, &prepared.tasks, max_attempts, prepared.scoring.context_config);
    let spec = &run.spec;
    let summary = summary::summarise_run(
        RunIdentity {
            name: prepared.layout.run.clone(),
            spec_hash: prepared.spec_hash.clone(),
            generated_at: ctx.now(),
        },
        DatasetSummary {
            format: spec.dataset.format.as_str().to_string(),
            source: spec.dataset.source.clone(),
            tasks: prepared.tasks.len() as u32,
            skipped_lines: prepared.skipped_lines,
        },
        &prepared.scoring,
        &prepared.plan.variants,
        &records,
    );
    let key = prepared.layout.summary_json();
    let bytes = serde_json::to_vec_pretty(&summary).expect("a summary serialises");
    prepared.store.put(&key, &bytes).await.map_err(|e| Error::store(prepared.store.uri(&key), e))?;
    state.summary = Some(summary);
    state.summary_dirty = false;
    state.summary_computed_at = Some(Instant::now());
    Ok(())
}

/// Events for the run's milestones, each published once, when its condition turns.
async fn milestones(
    run: &EvaluationRun,
    ctx: &Context,
    previous: Option<&EvaluationRunStatus>,
    new: &EvaluationRunStatus,
    started: usize,
) {
    // (reason, warning, note) of each milestone reached in this pass; published after.
    let mut events: Vec<(&str, bool, String)> = Vec::new();
    if started > 0 && previous.is_none_or(|p| p.start_time.is_none()) {
        events.push(("Started", false, format!("started the first {started} trials")));
    }
    if let Some(message) = turned_true(previous, new, condition::BUDGET_EXCEEDED) {
        events.push(("BudgetExceeded", true, message));
    }
    if let Some(message) = turned_true(previous, new, condition::COMPLETE) {
        let headline = new.headline.as_deref().map(|h| format!("; {h}")).unwrap_or_default();
        events.push(("Complete", false, format!("{message}{headline}")));
    }
    for (reason, warning, note) in events {
        ctx.event(run, warning, reason, note).await;
    }
}

/// The condition's message when it is `True` in `new` and was not in `previous`.
fn turned_true(previous: Option<&EvaluationRunStatus>, new: &EvaluationRunStatus, type_: &str) -> Option<String> {
    let was = previous.and_then(|p| status::condition(p, type_)).is_some_and(|c| c.status == "True");
    let now = status::condition(new, type_).filter(|c| c.status == "True")?;
    (!was).then(|| now.message.clone())
}
/// The Controller runs reconciles on a multi-threaded runtime: their futures must be `Send`.
/// This fails to compile when a change breaks that (see the note in `Panel::judge`).
#[allow(dead_code)]
fn reconcile_future_is_send(run: Arc<EvaluationRun>, ctx: Arc<Context>) {
    fn send<F: std::future::Future + Send + 'static>(_: F) {}
    send(reconcile(run, ctx));
}
