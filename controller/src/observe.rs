//! From the run's Jobs and pods to the scheduler's [`Observation`], and the summaries of the
//! attempts that finished.
//!
//! [`observe`] is pure: it reads the Jobs and pods listed by the run's label
//! ([`crate::labels::run_selector`]), a map from trial id (the `lightsout.dev/trial` label
//! value) to plan index, the time now and the grace periods of [`ObserveSettings`]. A Job's pods
//! are those whose `job-name` label is the Job's name; when there are several (there should be
//! one: `backoffLimit: 0`), the newest by creation time (then name) is the one examined. The
//! trial container is the container named `trial`.
//!
//! **Which attempt.** Trial and attempt come from the Job's labels `lightsout.dev/trial` and
//! `lightsout.dev/attempt` (a positive integer). A Job whose labels do not parse, or whose trial
//! is not in the plan, is counted with [`Observation::record_unplanned_active`] while it is
//! active (it holds a slot) and otherwise listed in [`Observed::ignored`].
//!
//! **When a Job is finished.** A Job is complete when it has a `Complete` condition with status
//! `True`, failed when it has a `Failed` condition with status `True`, and active otherwise
//! (including a Job suspended by Kueue, or one whose pod has ended but whose terminal condition
//! is not yet set: the next reconcile sees it).
//!
//! Rules, in order:
//!
//! | seen | recorded as |
//! | --- | --- |
//! | Job run on another cluster ([`managed_elsewhere`]: `spec.managedBy` MultiKueue's), no pod here: active / complete / failed by its synced status | `Active` (suspended: queued) / `Finished` with no summary (its result is read from the store; none there is an infrastructure failure) / `InfraFailed{Other}` (the worker's own record wins when it wrote one) |
//! | active Job, its pod's containers (init or `trial`) waiting with `ErrImagePull` or `ImagePullBackOff`, the pod created more than [`ObserveSettings::image_pull_grace`] ago | `InfraFailed{ImagePull}`, Job listed in [`Observed::to_delete`] |
//! | active Job, its pod `Pending` and not scheduled (`PodScheduled` not `True`), created more than [`ObserveSettings::unscheduled_grace`] ago | `InfraFailed{NeverStarted}`, Job listed in [`Observed::to_delete`] |
//! | active Job suspended (`spec.suspend: true`): its queue (Kueue) has not admitted it yet, or took its admission back | `Active`, counted in [`Observed::queued`]: it holds a slot, and it is waiting, never a pod that fails to start |
//! | any other active Job (with or without a pod) | `Active` |
//! | complete Job whose trial container's termination message parses as a [`TrialSummary`] of this trial and attempt with a scored outcome | `Finished`, summary in [`Observed::summaries`] |
//! | complete Job whose summary says `infra-failed` | `InfraFailed{Other}` (never scored) |
//! | complete Job whose pod is missing or whose trial container is not seen terminated, completed at most [`POD_SETTLE_GRACE`] ago | `Active` (our pod cache lags the Job's; looked at again when the grace ends) |
//! | complete Job whose pod is still missing or unterminated after that, whose trial container ended without a termination message, or with one that does not parse or names another trial or attempt | `InfraFailed{Other}` and an [`ErrorKind::UnreadableSummary`] error naming the Job: the attempt is retried, never scored |
//! | failed Job, its pod `Evicted` with the kubelet's message that the `scratch` emptyDir exceeds its `sizeLimit` (`spec.agent.scratchMiB`) | `Finished` with an `agent-failed` summary written by the controller ([`FinishedAttempt::decided_by_controller`]): the agent filled its own space, as a tmpfs scratch would have refused it under `lightsout run`; scored, not retried |
//! | failed Job, its pod's `status.reason` `Evicted`, or a `DisruptionTarget` condition `True` (other than the node-loss one below) | `InfraFailed{Evicted}` |
//! | failed Job, its pod's `status.reason` `NodeLost`, or a `DisruptionTarget` condition with reason `DeletionByTaintManager` (the node became unreachable) | `InfraFailed{NodeLost}` |
//! | failed Job, trial container terminated with exit code 3 | `InfraFailed{WorkerExit}` |
//! | failed Job, trial container terminated with exit code 2 (bad job) | `InfraFailed{Other}` and an [`ErrorKind::BadJob`] error: retrying will not help, the controller should surface it as a condition |
//! | failed Job with reason `DeadlineExceeded`, the trial container started | `InfraFailed{Other}`: the worker's own time limit should have ended it first |
//! | failed Job with reason `DeadlineExceeded`, the trial container never started, a container waiting on an image pull | `InfraFailed{ImagePull}` |
//! | failed Job with reason `DeadlineExceeded`, the trial container never started otherwise (unscheduled, init containers or volumes stuck) | `InfraFailed{NeverStarted}` |
//! | failed Job, trial container terminated with any other exit code | `InfraFailed{Other}` and an [`ErrorKind::UnexpectedExit`] error |
//! | any other failed Job (e.g. no pod left to examine) | `InfraFailed{Other}` |
//!
//! **When.** `at` of a failed Job is its `Failed` condition's `lastTransitionTime`, else the
//! trial container's `finishedAt`, else now. For a complete Job counted as a failure it is the
//! `Complete` condition's `lastTransitionTime`, else `status.completionTime`, else the
//! container's `finishedAt`, else now. For an active Job failed by a grace period it is the
//! pod's creation time plus the grace, so it does not move between reconciles.
//!
//! **Deleting stuck Jobs.** The Jobs in [`Observed::to_delete`] are still active and hold their
//! slot until deleted; the controller deletes them. Because attempt numbers are read from the
//! Jobs that exist (see [`crate::observation`]), it must record the failure (e.g. an
//! `infra-failed` result in the results store) **before** deleting the Job, or the attempt
//! number would be reused.
//!
//! Every list in [`Observed`] is sorted, and [`Observation`]'s fold is order-independent, so the
//! result does not depend on the order of the input lists.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use lightsout_core::trial::{Outcome, TrialSummary};

use crate::job::SCRATCH_VOLUME;
use crate::labels;
use crate::observation::{AttemptState, InfraReason, Observation};

/// The label the Job controller puts on a Job's pods.
pub const JOB_NAME_LABEL: &str = "job-name";
/// The main container of a trial pod.
pub const TRIAL_CONTAINER: &str = "trial";
/// The worker's exit code for an infrastructure failure.
pub const EXIT_INFRA: i32 = 3;
/// The worker's exit code for a bad job.
pub const EXIT_BAD_JOB: i32 = 2;

/// How long a pod may wait before [`observe`] declares its attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserveSettings {
    /// How long after its creation a pod may keep failing to pull an image. Default 5 minutes.
    pub image_pull_grace: TimeDelta,
    /// How long after its creation a pod may stay unscheduled. Default 15 minutes.
    pub unscheduled_grace: TimeDelta,
}

impl Default for ObserveSettings {
    fn default() -> Self {
        ObserveSettings { image_pull_grace: TimeDelta::minutes(5), unscheduled_grace: TimeDelta::minutes(15) }
    }
}

/// How long after a Job completed its pod may still be missing or unterminated in the
/// controller's view (watch caches of Jobs and pods lag independently) before the attempt counts
/// as unreadable. Acting at once retried attempts whose results were already stored.
pub const POD_SETTLE_GRACE: TimeDelta = TimeDelta::seconds(60);

/// What went wrong with a Job, for the controller to log or surface as a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// A complete Job whose termination message is missing, does not parse, or names another
    /// trial or attempt.
    UnreadableSummary,
    /// The worker exited with code 2: the job it was given is bad; retrying will not help.
    BadJob,
    /// The trial container exited with a code the worker does not use.
    UnexpectedExit,
}

/// An error about one Job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObserveError {
    pub job: String,
    pub kind: ErrorKind,
    pub message: String,
}

/// The summary of a finished attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedAttempt {
    pub job: String,
    /// Index into the plan's trials.
    pub trial: usize,
    pub attempt: u32,
    /// From the trial container's termination message; `None` for a Job that ran on another
    /// cluster ([`managed_elsewhere`]: MultiKueue), whose pod is not here: its result is read
    /// from the store only.
    pub summary: Option<TrialSummary>,
    /// The outcome was decided by the controller from what the kubelet reported (the agent filled
    /// its scratch), not by the worker: no worker `result.json` is expected, and the controller
    /// writes one from `summary`.
    pub decided_by_controller: bool,
}

/// What [`observe`] saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub observation: Observation,
    /// One per `Finished` attempt, sorted by Job name.
    pub summaries: Vec<FinishedAttempt>,
    /// Active Jobs declared failed (stuck on an image pull, unscheduled): record the failure,
    /// then delete them. Sorted.
    pub to_delete: Vec<String>,
    /// Finished Jobs whose labels do not parse or whose trial is not in the plan. Sorted.
    pub ignored: Vec<String>,
    /// Sorted.
    pub errors: Vec<ObserveError>,
    /// Active Jobs of planned trials that are suspended, waiting for their queue to admit them.
    pub queued: usize,
    /// Jobs submitted to a queue (`kueue.x-k8s.io/queue-name`) that it has admitted, with how
    /// long they waited: from creation to `status.startTime` (set on admission; a Job
    /// readmitted after a preemption has a new one). Sorted by Job name.
    pub admissions: Vec<Admission>,
    /// The queued Job created first (the longest waiting), if any.
    pub oldest_queued: Option<QueuedJob>,
    /// The earliest moment a pod that is waiting on an image or for a node now passes its grace
    /// period: the reconciler must look again then, since such a pod may change no more (a
    /// kubelet backing off an image pull reports the same status over and over).
    pub next_grace_expiry: Option<DateTime<Utc>>,
}

/// Folds the run's `jobs` and `pods` into an [`Observation`] of a plan of `trials` trials;
/// `trial_index` maps a trial id (label value) to its index in the plan (indices `>= trials` are
/// treated as not planned). The rules are the module's.
pub fn observe(
    jobs: &[Job],
    pods: &[Pod],
    trials: usize,
    trial_index: &HashMap<String, usize>,
    now: DateTime<Utc>,
    settings: &ObserveSettings,
) -> Observed {
    let mut pods_by_job: BTreeMap<&str, &Pod> = BTreeMap::new();
    for pod in pods {
        let Some(job) = pod.metadata.labels.as_ref().and_then(|l| l.get(JOB_NAME_LABEL)) else { continue };
        let newer = match pods_by_job.get(job.as_str()) {
            Some(current) => pod_key(pod) > pod_key(current),
            None => true,
        };
        if newer {
            pods_by_job.insert(job, pod);
        }
    }

    let mut observed = Observed {
        observation: Observation::new(trials),
        summaries: Vec::new(),
        to_delete: Vec::new(),
        ignored: Vec::new(),
        errors: Vec::new(),
        queued: 0,
        admissions: Vec::new(),
        oldest_queued: None,
        next_grace_expiry: None,
    };
    for job in jobs {
        let name = job.metadata.name.clone().unwrap_or_default();
        let pod = pods_by_job.get(name.as_str()).copied();
        let planned = identity(job).and_then(|(trial_id, attempt)| {
            trial_index.get(trial_id).filter(|&&i| i < trials).map(|&i| (trial_id, i, attempt))
        });
        let Some((trial_id, trial, attempt)) = planned else {
            if finish(job).is_none() {
                observed.observation.record_unplanned_active();
            } else {
                observed.ignored.push(name);
            }
            continue;
        };
        let state = classify(job, &name, pod, trial_id, attempt, now, settings, &mut observed);
        let decided_by_controller = matches!(state, Classified::AgentFilledScratch(_));
        let summary = match &state {
            Classified::Finished(summary) | Classified::AgentFilledScratch(summary) => Some(Some(summary.clone())),
            Classified::FinishedElsewhere => Some(None),
            _ => None,
        };
        if let Some(summary) = summary {
            observed.summaries.push(FinishedAttempt {
                job: name.clone(),
                trial,
                attempt,
                summary,
                decided_by_controller,
            });
        }
        let suspended = job.spec.as_ref().and_then(|spec| spec.suspend) == Some(true);
        if let Some(admission) = admission(job, &name).filter(|_| !suspended) {
            observed.admissions.push(admission);
        }
        let state = match state {
            Classified::Active => {
                if suspended {
                    observed.queued += 1;
                    let queued = QueuedJob::of(job);
                    if queued.created < observed.oldest_queued.as_ref().map_or(DateTime::<Utc>::MAX_UTC, |q| q.created)
                    {
                        observed.oldest_queued = Some(queued);
                    }
                }
                AttemptState::Active
            }
            Classified::Finished(_) | Classified::AgentFilledScratch(_) | Classified::FinishedElsewhere => {
                AttemptState::Finished
            }
            Classified::Failed(at, reason) => AttemptState::InfraFailed { at, reason },
            Classified::Stuck(at, reason) => {
                observed.to_delete.push(name);
                AttemptState::InfraFailed { at, reason }
            }
        };
        observed.observation.record(trial, attempt, state);
    }
    observed.summaries.sort_by(|a, b| (&a.job, a.trial, a.attempt).cmp(&(&b.job, b.trial, b.attempt)));
    observed.admissions.sort_by(|a, b| a.job.cmp(&b.job));
    observed.to_delete.sort();
    observed.ignored.sort();
    observed.errors.sort();
    observed
}

/// A queued Job's admission: its name, when it was admitted, and how long it waited.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub job: String,
    pub admitted_at: DateTime<Utc>,
    pub wait_seconds: f64,
}

/// A Job waiting for its queue: when it was created, and its uid (which names its Kueue
/// Workload, see [`crate::queue_admission`]).
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedJob {
    pub created: DateTime<Utc>,
    pub uid: String,
}

impl QueuedJob {
    fn of(job: &Job) -> QueuedJob {
        QueuedJob {
            created: job.metadata.creation_timestamp.as_ref().map(to_chrono).unwrap_or(DateTime::<Utc>::MAX_UTC),
            uid: job.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

impl Admission {
    /// What tells one admission from another: the Job and when it was admitted (a Job admitted
    /// again after a preemption is a new admission).
    pub fn key(&self) -> (String, i64) {
        (self.job.clone(), self.admitted_at.timestamp_millis())
    }
}

/// The admission of a Job submitted to a queue, once it has a `startTime`.
fn admission(job: &Job, name: &str) -> Option<Admission> {
    job.metadata.labels.as_ref()?.get(labels::KUEUE_QUEUE_NAME)?;
    let created = to_chrono(job.metadata.creation_timestamp.as_ref()?);
    let admitted_at = to_chrono(job.status.as_ref()?.start_time.as_ref()?);
    let wait_seconds = ((admitted_at - created).num_milliseconds().max(0)) as f64 / 1000.0;
    Some(Admission { job: name.to_string(), admitted_at, wait_seconds })
}

enum Classified {
    Active,
    Finished(TrialSummary),
    /// Complete on the cluster it was dispatched to ([`managed_elsewhere`]): the store has its
    /// result.
    FinishedElsewhere,
    /// Evicted for writing past the scratch limit: the agent's failure, summarised here.
    AgentFilledScratch(TrialSummary),
    Failed(DateTime<Utc>, InfraReason),
    /// An active Job to delete.
    Stuck(DateTime<Utc>, InfraReason),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    Complete,
    Failed,
}

/// The trial id and attempt from a Job's labels.
pub fn identity(job: &Job) -> Option<(&str, u32)> {
    let labels = job.metadata.labels.as_ref()?;
    let trial = labels.get(labels::TRIAL)?;
    let attempt = labels.get(labels::ATTEMPT)?.parse::<u32>().ok().filter(|&a| a > 0)?;
    Some((trial.as_str(), attempt))
}

fn pod_key(pod: &Pod) -> (Option<DateTime<Utc>>, &str) {
    (pod.metadata.creation_timestamp.as_ref().map(to_chrono), pod.metadata.name.as_deref().unwrap_or(""))
}

fn to_chrono(time: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(time.0.as_second(), time.0.subsec_nanosecond().max(0) as u32).unwrap_or_default()
}

fn job_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has a terminal condition (`Complete` or `Failed` with status `True`).
pub fn is_finished(job: &Job) -> bool {
    finish(job).is_some()
}

/// The controller a Job is managed by when it is not the cluster's own Job controller
/// (`spec.managedBy`, Kubernetes 1.30+): MultiKueue (`kueue.x-k8s.io/multikueue`) runs such a
/// Job's copy on a worker cluster and syncs its status back; its pods never exist here.
pub fn managed_elsewhere(job: &Job) -> Option<&str> {
    job.spec.as_ref()?.managed_by.as_deref().filter(|m| *m != "kubernetes.io/job-controller")
}

fn finish(job: &Job) -> Option<Finish> {
    if job_condition(job, "Complete").is_some() {
        Some(Finish::Complete)
    } else if job_condition(job, "Failed").is_some() {
        Some(Finish::Failed)
    } else {
        None
    }
}

fn trial_status(pod: Option<&Pod>) -> Option<&ContainerStatus> {
    pod?.status.as_ref()?.container_statuses.as_ref()?.iter().find(|c| c.name == TRIAL_CONTAINER)
}

fn all_statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let status = pod.status.as_ref();
    let init = status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or_default();
    let main = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    init.iter().chain(main)
}

fn waiting_on_image(pod: &Pod) -> bool {
    all_statuses(pod).any(|c| {
        let reason = c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.as_deref());
        matches!(reason, Some("ErrImagePull" | "ImagePullBackOff"))
    })
}

fn scheduled(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    conditions.iter().any(|c| c.type_ == "PodScheduled" && c.status == "True")
}

fn pending(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|p| p == "Pending")
}

/// Whether the trial container ever started.
fn trial_started(pod: Option<&Pod>) -> bool {
    trial_status(pod).is_some_and(|c| {
        let ran = |s: &k8s_openapi::api::core::v1::ContainerState| s.running.is_some() || s.terminated.is_some();
        c.state.as_ref().is_some_and(ran) || c.last_state.as_ref().is_some_and(ran)
    })
}

fn trial_terminated(pod: Option<&Pod>) -> Option<&k8s_openapi::api::core::v1::ContainerStateTerminated> {
    trial_status(pod)?.state.as_ref()?.terminated.as_ref()
}

/// The kubelet's eviction message when the pod was evicted because its `scratch` emptyDir
/// passed its `sizeLimit` (`Usage of EmptyDir volume "scratch" exceeds the limit "4096Mi".`).
fn scratch_overflow(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    let message = status.message.as_deref()?;
    let scratch = format!("Usage of EmptyDir volume \"{SCRATCH_VOLUME}\" exceeds the limit");
    (status.reason.as_deref() == Some("Evicted") && message.starts_with(&scratch)).then_some(message)
}

/// The summary of an attempt whose agent filled its scratch: `agent-failed`, usage unknown (the
/// worker's record of the calls went with the pod).
fn scratch_overflow_summary(trial_id: &str, attempt: u32, message: &str, duration_ms: u64) -> TrialSummary {
    TrialSummary {
        trial_id: trial_id.to_string(),
        attempt,
        outcome: Outcome::AgentFailed,
        error: Some(format!(
            "the agent wrote past its scratch space (spec.agent.scratchMiB) and the kubelet evicted the pod: {}",
            message.trim()
        )),
        usage: Default::default(),
        cost_usd: None,
        duration_ms,
        model_calls: 0,
        findings: 0,
        harness_version: None,
    }
}

fn disruption(pod: &Pod) -> Option<Option<&str>> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == "DisruptionTarget" && c.status == "True").map(|c| c.reason.as_deref())
}

#[allow(clippy::too_many_arguments)]
fn classify(
    job: &Job,
    name: &str,
    pod: Option<&Pod>,
    trial_id: &str,
    attempt: u32,
    now: DateTime<Utc>,
    settings: &ObserveSettings,
    observed: &mut Observed,
) -> Classified {
    let finished_at = || trial_terminated(pod).and_then(|t| t.finished_at.as_ref()).map(to_chrono);
    let mut error = |kind, message: String| observed.errors.push(ObserveError { job: name.to_string(), kind, message });
    if managed_elsewhere(job).is_some() {
        // Its pods run on another cluster: the Job's status (synced back by its manager) says
        // whether it finished; the worker's result.json says how, and a failed Job's record,
        // when the worker wrote one, wins over the controller's (see `record`).
        return match finish(job) {
            None => Classified::Active,
            Some(Finish::Complete) => Classified::FinishedElsewhere,
            Some(Finish::Failed) => {
                let at = job_condition(job, "Failed").and_then(|c| c.last_transition_time.as_ref()).map(to_chrono);
                Classified::Failed(at.unwrap_or(now), InfraReason::Other)
            }
        };
    }
    match finish(job) {
        None => {
            let Some(pod) = pod else { return Classified::Active };
            let Some(created) = pod.metadata.creation_timestamp.as_ref().map(to_chrono) else {
                return Classified::Active;
            };
            let mut expires = |at: DateTime<Utc>| {
                observed.next_grace_expiry = Some(observed.next_grace_expiry.map_or(at, |next| next.min(at)));
            };
            if pending(pod) && waiting_on_image(pod) {
                if now - created > settings.image_pull_grace {
                    return Classified::Stuck(created + settings.image_pull_grace, InfraReason::ImagePull);
                }
                expires(created + settings.image_pull_grace);
            }
            if pending(pod) && !scheduled(pod) {
                if now - created > settings.unscheduled_grace {
                    return Classified::Stuck(created + settings.unscheduled_grace, InfraReason::NeverStarted);
                }
                expires(created + settings.unscheduled_grace);
            }
            Classified::Active
        }
        Some(Finish::Complete) => {
            let at = job_condition(job, "Complete")
                .and_then(|c| c.last_transition_time.as_ref())
                .or(job.status.as_ref().and_then(|s| s.completion_time.as_ref()))
                .map(to_chrono)
                .or_else(finished_at)
                .unwrap_or(now);
            let Some(terminated) = trial_terminated(pod) else {
                // The Job controller completes a Job only after its pod succeeded, so a pod not
                // yet seen terminated is our watch cache lagging: wait for it, for a while.
                let settled = at + POD_SETTLE_GRACE;
                if now <= settled {
                    observed.next_grace_expiry = Some(observed.next_grace_expiry.map_or(settled, |n| n.min(settled)));
                    return Classified::Active;
                }
                let why = if pod.is_some() { "its trial container was never seen terminated" } else { "no pod" };
                error(ErrorKind::UnreadableSummary, format!("Job {name}: complete, but {why}; the attempt is retried"));
                return Classified::Failed(at, InfraReason::Other);
            };
            let message = terminated.message.as_deref();
            let summary = match message.map(serde_json::from_str::<TrialSummary>) {
                None => Err("no termination message from the trial container".to_string()),
                Some(Err(e)) => Err(format!("the termination message does not parse: {e}")),
                Some(Ok(s)) if s.trial_id != trial_id || s.attempt != attempt => Err(format!(
                    "the termination message is for trial {} attempt {}, not trial {trial_id} attempt {attempt}",
                    s.trial_id, s.attempt
                )),
                Some(Ok(s)) => Ok(s),
            };
            match summary {
                Ok(s) if s.outcome.is_scored() => Classified::Finished(s),
                Ok(_) => Classified::Failed(at, InfraReason::Other),
                Err(message) => {
                    error(ErrorKind::UnreadableSummary, format!("Job {name}: {message}; the attempt is retried"));
                    Classified::Failed(at, InfraReason::Other)
                }
            }
        }
        Some(Finish::Failed) => {
            let failed = job_condition(job, "Failed");
            let at =
                failed.and_then(|c| c.last_transition_time.as_ref()).map(to_chrono).or_else(finished_at).unwrap_or(now);
            let fail = |reason| Classified::Failed(at, reason);
            if let Some(pod) = pod {
                if let Some(message) = scratch_overflow(pod) {
                    let started = pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(to_chrono).unwrap_or(at);
                    let duration_ms = (at - started).num_milliseconds().max(0) as u64;
                    return Classified::AgentFilledScratch(scratch_overflow_summary(
                        trial_id,
                        attempt,
                        message,
                        duration_ms,
                    ));
                }
                let reason = pod.status.as_ref().and_then(|s| s.reason.as_deref());
                let disrupted = disruption(pod);
                if reason == Some("NodeLost") || disrupted == Some(Some("DeletionByTaintManager")) {
                    return fail(InfraReason::NodeLost);
                }
                if reason == Some("Evicted") || disrupted.is_some() {
                    return fail(InfraReason::Evicted);
                }
            }
            let exit = trial_terminated(pod).map(|t| t.exit_code);
            match exit {
                Some(EXIT_INFRA) => return fail(InfraReason::WorkerExit),
                Some(EXIT_BAD_JOB) => {
                    let detail = trial_terminated(pod).and_then(|t| t.message.as_deref()).unwrap_or("");
                    error(
                        ErrorKind::BadJob,
                        format!(
                            "Job {name}: the worker rejected its job (exit code 2); retrying will not help. {detail}"
                        )
                        .trim_end()
                        .to_string(),
                    );
                    return fail(InfraReason::Other);
                }
                _ => {}
            }
            if failed.and_then(|c| c.reason.as_deref()) == Some("DeadlineExceeded") {
                if trial_started(pod) {
                    return fail(InfraReason::Other);
                }
                if pod.is_some_and(waiting_on_image) {
                    return fail(InfraReason::ImagePull);
                }
                return fail(InfraReason::NeverStarted);
            }
            if let Some(code) = exit {
                error(ErrorKind::UnexpectedExit, format!("Job {name}: the trial container exited with code {code}"));
            }
            fail(InfraReason::Other)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::TrialState;
    use lightsout_core::trial::Outcome;
    use lightsout_model::Usage;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    use serde_json::{json, Value};

    const T0: &str = "2026-01-01T00:00:00Z";

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(T0).unwrap().with_timezone(&Utc) + TimeDelta::seconds(secs)
    }

    fn ts(secs: i64) -> String {
        t(secs).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    fn trial_id(i: usize) -> String {
        format!("{i:016x}")
    }

    fn job(name: &str, trial: usize, attempt: &str, conditions: Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "lightsout.dev/run": "demo", "lightsout.dev/trial": trial_id(trial), "lightsout.dev/attempt": attempt,
            }},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    fn complete(name: &str, trial: usize, attempt: u32) -> Job {
        job(
            name,
            trial,
            &attempt.to_string(),
            json!([{"type": "Complete", "status": "True", "lastTransitionTime": ts(100)}]),
        )
    }

    fn failed(name: &str, trial: usize, attempt: u32, reason: &str) -> Job {
        job(
            name,
            trial,
            &attempt.to_string(),
            json!([{"type": "Failed", "status": "True", "reason": reason, "lastTransitionTime": ts(200)}]),
        )
    }

    fn active(name: &str, trial: usize, attempt: u32) -> Job {
        job(name, trial, &attempt.to_string(), json!([]))
    }

    fn pod(job: &str, created: i64, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{job}-x"), "creationTimestamp": ts(created), "labels": {"job-name": job}},
            "status": status,
        }))
        .unwrap()
    }

    fn terminated(exit: i32, message: Option<&str>) -> Value {
        json!({"phase": if exit == 0 { "Succeeded" } else { "Failed" }, "containerStatuses": [{
            "name": "trial", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": exit, "message": message, "startedAt": ts(10), "finishedAt": ts(90)}},
        }]})
    }

    fn summary(trial: usize, attempt: u32, outcome: Outcome) -> TrialSummary {
        TrialSummary {
            trial_id: trial_id(trial),
            attempt,
            outcome,
            error: Some("x".repeat(10_000)),
            usage: Usage { input_tokens: 10, output_tokens: 5, ..Default::default() },
            cost_usd: Some(0.25),
            duration_ms: 1234,
            model_calls: 3,
            findings: 2,
            harness_version: Some("1.0.0".into()),
        }
    }

    fn index(n: usize) -> HashMap<String, usize> {
        (0..n).map(|i| (trial_id(i), i)).collect()
    }

    fn run(jobs: &[Job], pods: &[Pod], now: i64) -> Observed {
        observe(jobs, pods, 4, &index(4), t(now), &ObserveSettings::default())
    }

    fn one(job: Job, pod: Option<Pod>, now: i64) -> (TrialState, Observed) {
        let observed = run(&[job], &pod.into_iter().collect::<Vec<_>>(), now);
        (observed.observation.trials()[0], observed)
    }

    fn infra(attempt: u32, at: i64, reason: InfraReason) -> TrialState {
        TrialState::InfraFailed { attempt, at: t(at), reason }
    }

    #[test]
    fn observe_complete_job_round_trips_the_termination_message() {
        let s = summary(0, 2, Outcome::AgentFailed);
        let message = s.to_termination_message();
        let (state, observed) = one(complete("j", 0, 2), Some(pod("j", 0, terminated(0, Some(&message)))), 300);
        assert_eq!(state, TrialState::Finished { attempt: 2 });
        assert_eq!(observed.summaries.len(), 1);
        let got = &observed.summaries[0];
        assert_eq!((got.job.as_str(), got.trial, got.attempt), ("j", 0, 2));
        let summary = got.summary.as_ref().expect("from the termination message");
        assert_eq!(summary, &serde_json::from_str::<TrialSummary>(&message).unwrap());
        assert_eq!(summary.findings, 2);
        assert!(observed.errors.is_empty() && observed.to_delete.is_empty());
    }

    #[test]
    fn a_job_run_on_another_cluster_is_judged_by_its_synced_status_and_its_stored_result() {
        let elsewhere = |mut job: Job| {
            job.spec = Some(
                serde_json::from_value(json!({"managedBy": "kueue.x-k8s.io/multikueue", "template": {}})).unwrap(),
            );
            job
        };
        // Running there: active, though no pod is here (never taken for one that fails to start).
        let (state, observed) = one(elsewhere(job("j", 0, "1", json!([]))), None, 36_000);
        assert_eq!(state, TrialState::Active { attempt: 1 });
        assert!(observed.errors.is_empty() && observed.to_delete.is_empty());
        // Complete there: finished at once, its result to be read from the store.
        let (state, observed) = one(elsewhere(complete("j", 0, 2)), None, 300);
        assert_eq!(state, TrialState::Finished { attempt: 2 });
        assert_eq!(observed.summaries.len(), 1);
        assert!(observed.summaries[0].summary.is_none() && !observed.summaries[0].decided_by_controller);
        assert!(observed.errors.is_empty(), "no pod is not an unreadable summary: {:?}", observed.errors);
        // Failed there: an infrastructure failure unless the worker stored otherwise.
        let (state, _) = one(elsewhere(failed("j", 0, 1, "BackoffLimitExceeded")), None, 300);
        assert!(matches!(state, TrialState::InfraFailed { attempt: 1, reason: InfraReason::Other, .. }), "{state:?}");
        // The Job controller's own name is not elsewhere.
        let mut own = job("j", 0, "1", json!([]));
        own.spec =
            Some(serde_json::from_value(json!({"managedBy": "kubernetes.io/job-controller", "template": {}})).unwrap());
        assert_eq!(managed_elsewhere(&own), None);
    }

    #[test]
    fn a_job_its_queue_keeps_suspended_is_queued_however_long_it_waits() {
        let mut suspended = job("j", 0, "1", json!([]));
        suspended.spec = Some(serde_json::from_value(json!({"suspend": true, "template": {}})).unwrap());
        // Hours after creation, with no pod at all: waiting, never a pod that failed to start.
        let (state, observed) = one(suspended.clone(), None, 36_000);
        assert_eq!(state, TrialState::Active { attempt: 1 });
        assert_eq!(observed.queued, 1);
        assert!(observed.to_delete.is_empty() && observed.errors.is_empty());
        assert!(observed.admissions.is_empty());
        // Admitted (unsuspended): running, no longer queued, and how long it waited is known
        // once it is a queue's Job with a start time.
        suspended.spec.as_mut().unwrap().suspend = Some(false);
        let (state, observed) = one(suspended.clone(), Some(pod("j", 0, running_pod())), 36_000);
        assert_eq!((state, observed.queued), (TrialState::Active { attempt: 1 }, 0));
        assert!(observed.admissions.is_empty(), "not a queue's Job, no start time");
        suspended.metadata.labels.as_mut().unwrap().insert(labels::KUEUE_QUEUE_NAME.into(), "q".into());
        suspended.metadata.creation_timestamp = Some(serde_json::from_value(json!(ts(100))).unwrap());
        suspended.status.as_mut().unwrap().start_time = Some(serde_json::from_value(json!(ts(190))).unwrap());
        let (_, observed) = one(suspended, Some(pod("j", 0, running_pod())), 36_000);
        assert_eq!(observed.admissions, [Admission { job: "j".into(), admitted_at: t(190), wait_seconds: 90.0 }]);
    }

    #[test]
    fn observe_complete_job_waits_for_its_pod_to_be_seen_terminated() {
        // The pod cache lags the Job's: a running or missing pod is waited for, not retried.
        for pod_seen in [Some(pod("j", 0, running_pod())), None] {
            let (state, observed) = one(complete("j", 0, 1), pod_seen.clone(), 130);
            assert_eq!(state, TrialState::Active { attempt: 1 }, "{pod_seen:?}");
            assert!(observed.errors.is_empty());
            assert_eq!(observed.next_grace_expiry, Some(t(100) + POD_SETTLE_GRACE));
            // Once the grace has passed, it is unreadable and retried.
            let (state, observed) = one(complete("j", 0, 1), pod_seen, 161);
            assert_eq!(state, infra(1, 100, InfraReason::Other));
            assert_eq!(observed.errors[0].kind, ErrorKind::UnreadableSummary);
        }
    }

    #[test]
    fn observe_unreadable_summary_is_an_infra_failure_and_an_error() {
        for message in [None, Some("not json"), Some(summary(1, 1, Outcome::Ok).to_termination_message().as_str())] {
            let (state, observed) = one(complete("j", 0, 1), Some(pod("j", 0, terminated(0, message))), 300);
            assert_eq!(state, infra(1, 100, InfraReason::Other), "{message:?}");
            assert!(observed.summaries.is_empty());
            assert_eq!(observed.errors.len(), 1);
            assert_eq!(observed.errors[0].kind, ErrorKind::UnreadableSummary);
            assert!(observed.errors[0].message.contains("Job j"));
        }
        // No pod at all, past the settle grace.
        let (state, observed) = one(complete("j", 0, 1), None, 300);
        assert_eq!(state, infra(1, 100, InfraReason::Other));
        assert_eq!(observed.errors[0].kind, ErrorKind::UnreadableSummary);
        // An infra-failed outcome with exit 0 is not scored.
        let message = summary(0, 1, Outcome::InfraFailed).to_termination_message();
        let (state, observed) = one(complete("j", 0, 1), Some(pod("j", 0, terminated(0, Some(&message)))), 300);
        assert_eq!(state, infra(1, 100, InfraReason::Other));
        assert!(observed.summaries.is_empty() && observed.errors.is_empty());
    }

    fn running_pod() -> serde_json::Value {
        json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]})
    }

    #[test]
    fn observe_active_jobs_and_stuck_pods() {
        let running = json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]});
        assert_eq!(one(active("j", 0, 1), None, 10_000).0, TrialState::Active { attempt: 1 });
        assert_eq!(one(active("j", 0, 1), Some(pod("j", 0, running)), 10_000).0, TrialState::Active { attempt: 1 });

        let pulling = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
            "initContainerStatuses": [{"name": "worker", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]});
        let (state, observed) = one(active("j", 0, 1), Some(pod("j", 0, pulling.clone())), 299);
        assert_eq!(state, TrialState::Active { attempt: 1 });
        assert!(observed.to_delete.is_empty());
        // The reconciler is told when to look again: the pod's status may never change.
        assert_eq!(observed.next_grace_expiry, Some(t(300)));
        let (state, observed) = one(active("j", 0, 1), Some(pod("j", 0, pulling)), 301);
        assert_eq!(state, infra(1, 300, InfraReason::ImagePull));
        assert_eq!(observed.to_delete, ["j"]);

        let unscheduled = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
        let (state, observed) = one(active("j", 0, 1), Some(pod("j", 0, unscheduled.clone())), 899);
        assert_eq!(state, TrialState::Active { attempt: 1 });
        assert_eq!(observed.next_grace_expiry, Some(t(900)));
        assert_eq!(one(active("j", 0, 1), Some(pod("j", 0, running_pod())), 899).1.next_grace_expiry, None);
        let (state, observed) = one(active("j", 0, 1), Some(pod("j", 0, unscheduled)), 901);
        assert_eq!(state, infra(1, 900, InfraReason::NeverStarted));
        assert_eq!(observed.to_delete, ["j"]);
    }

    #[test]
    fn observe_failed_jobs_by_rule() {
        let evicted = json!({"phase": "Failed", "reason": "Evicted"});
        let disrupted = json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]});
        let tainted = json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]});
        let node_lost = json!({"phase": "Failed", "reason": "NodeLost"});
        let never_ran = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]});
        let pulling = json!({"phase": "Pending", "containerStatuses": [{"name": "trial", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ErrImagePull"}}}]});
        type Case<'a> = (&'a str, &'a str, Option<Value>, InfraReason, Option<ErrorKind>);
        let cases: Vec<Case> = vec![
            ("evicted", "BackoffLimitExceeded", Some(evicted), InfraReason::Evicted, None),
            ("disruption", "PodFailurePolicy", Some(disrupted), InfraReason::Evicted, None),
            ("taint manager", "BackoffLimitExceeded", Some(tainted), InfraReason::NodeLost, None),
            ("node lost", "BackoffLimitExceeded", Some(node_lost), InfraReason::NodeLost, None),
            ("exit 3", "BackoffLimitExceeded", Some(terminated(3, None)), InfraReason::WorkerExit, None),
            ("exit 2", "BackoffLimitExceeded", Some(terminated(2, None)), InfraReason::Other, Some(ErrorKind::BadJob)),
            ("deadline while running", "DeadlineExceeded", Some(terminated(137, None)), InfraReason::Other, None),
            ("deadline unscheduled", "DeadlineExceeded", Some(never_ran), InfraReason::NeverStarted, None),
            ("deadline no pod", "DeadlineExceeded", None, InfraReason::NeverStarted, None),
            ("deadline pulling", "DeadlineExceeded", Some(pulling), InfraReason::ImagePull, None),
            (
                "exit 1",
                "BackoffLimitExceeded",
                Some(terminated(1, None)),
                InfraReason::Other,
                Some(ErrorKind::UnexpectedExit),
            ),
            ("no pod", "BackoffLimitExceeded", None, InfraReason::Other, None),
        ];
        for (name, reason, status, expected, error) in cases {
            let (state, observed) = one(failed("j", 0, 1, reason), status.map(|s| pod("j", 0, s)), 300);
            assert_eq!(state, infra(1, 200, expected), "{name}");
            assert_eq!(observed.errors.iter().map(|e| e.kind).collect::<Vec<_>>(), Vec::from_iter(error), "{name}");
            assert!(observed.summaries.is_empty() && observed.to_delete.is_empty(), "{name}");
        }
    }

    #[test]
    fn a_pod_evicted_for_filling_its_scratch_is_the_agents_failure_and_any_other_eviction_is_not() {
        let message = "Usage of EmptyDir volume \"scratch\" exceeds the limit \"4096Mi\". ";
        let evicted = |message: &str| {
            json!({"phase": "Failed", "reason": "Evicted", "message": message, "startTime": ts(20),
                   "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]})
        };
        let (state, observed) = one(failed("j", 0, 1, "PodFailurePolicy"), Some(pod("j", 0, evicted(message))), 300);
        assert_eq!(state, TrialState::Finished { attempt: 1 }, "scored, not retried");
        assert_eq!(observed.summaries.len(), 1);
        let finished = &observed.summaries[0];
        assert!(finished.decided_by_controller, "no worker record is expected");
        let summary = finished.summary.as_ref().unwrap();
        assert_eq!(summary.outcome, Outcome::AgentFailed);
        assert_eq!(summary.duration_ms, 180_000, "from the pod's start to the Job's failure");
        assert_eq!(summary.cost_usd, None, "the usage went with the pod: unknown, not zero");
        let error = summary.error.as_deref().unwrap();
        assert!(error.contains("scratch") && error.contains("4096Mi"), "{error}");

        // Another volume, the pod's total ephemeral storage or memory pressure: the infrastructure's.
        for other in [
            "Usage of EmptyDir volume \"lightsout\" exceeds the limit \"1Gi\". ",
            "Pod ephemeral local storage usage exceeds the total limit of containers 8Gi. ",
            "The node was low on resource: memory. ",
        ] {
            let (state, observed) = one(failed("j", 0, 1, "PodFailurePolicy"), Some(pod("j", 0, evicted(other))), 300);
            assert_eq!(state, infra(1, 200, InfraReason::Evicted), "{other}");
            assert!(observed.summaries.is_empty(), "{other}");
        }
    }

    #[test]
    fn observe_failure_time_falls_back_to_finished_at_then_now() {
        let no_time = job("j", 0, "1", json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]));
        assert_eq!(
            one(no_time.clone(), Some(pod("j", 0, terminated(3, None))), 500).0,
            infra(1, 90, InfraReason::WorkerExit)
        );
        assert_eq!(one(no_time, None, 500).0, infra(1, 500, InfraReason::Other));
    }

    #[test]
    fn observe_unplanned_and_unparsable_jobs() {
        let jobs = [
            active("a", 9, 1),           // trial not in the plan, active
            job("b", 0, "x", json!([])), // attempt does not parse, active
            failed("c", 9, 1, "DeadlineExceeded"),
            job("d", 0, "0", json!([{"type": "Complete", "status": "True"}])),
        ];
        let observed = run(&jobs, &[], 300);
        assert_eq!(observed.observation.other_active(), 2);
        assert_eq!(observed.ignored, ["c", "d"]);
        assert!(observed.observation.trials().iter().all(|s| *s == TrialState::NotStarted));
    }

    #[test]
    fn observe_is_order_independent() {
        let message = |trial, attempt| summary(trial, attempt, Outcome::Ok).to_termination_message();
        let jobs = vec![
            failed("t0-1", 0, 1, "BackoffLimitExceeded"),
            complete("t0-2", 0, 2),
            active("t1-1", 1, 1),
            active("t1-2", 1, 2),
            complete("t2-1", 2, 1),
            complete("t3-1", 3, 1),
            active("x-1", 7, 1),
            failed("x-2", 7, 1, "DeadlineExceeded"),
            active("t3-2", 3, 2),
        ];
        let pending = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]});
        let pods = vec![
            pod("t0-1", 0, terminated(3, None)),
            pod("t0-2", 0, terminated(0, Some(&message(0, 2)))),
            pod("t2-1", 0, terminated(0, Some("garbage"))),
            pod("t3-1", 0, terminated(0, Some(&message(3, 1)))),
            pod("t3-2", 0, pending),
        ];
        let expected = run(&jobs, &pods, 10_000);
        assert_eq!(
            expected.observation.trials(),
            [
                TrialState::Finished { attempt: 2 },
                TrialState::Active { attempt: 2 },
                infra(1, 100, InfraReason::Other),
                infra(2, 900, InfraReason::NeverStarted),
            ]
        );
        assert_eq!(expected.observation.other_active(), 2);
        assert_eq!(expected.summaries.iter().map(|s| s.job.as_str()).collect::<Vec<_>>(), ["t0-2", "t3-1"]);
        assert_eq!(expected.to_delete, ["t3-2"]);
        assert_eq!(expected.ignored, ["x-2"]);
        assert_eq!(expected.errors.len(), 1);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..20 {
            let (mut jobs, mut pods) = (jobs.clone(), pods.clone());
            jobs.shuffle(&mut rng);
            pods.shuffle(&mut rng);
            assert_eq!(run(&jobs, &pods, 10_000), expected);
        }
    }
}
