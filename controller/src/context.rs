//! Everything the reconciler reads or writes goes through [`Context`]: the Kubernetes API (a
//! `kube::Client`, which tests point at a stateful fake API server), the Jobs and pods it
//! watches, the results store, model calls (judges), Events, metrics and the clock. Reconcile
//! itself holds no other handle, so it runs unchanged against a cluster or a fake one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};
use lightsout_api::EvaluationRun;
use lightsout_model::pricing::PricingTable;
use lightsout_model::ModelClient;

use crate::backoff::Backoff;
use crate::error::Error;
use crate::job::TrialSettings;
use crate::judge_queue::JudgeQueue;
use crate::labels;
use crate::metrics::Metrics;
use crate::network::NetworkSettings;
use crate::observe::{ObserveSettings, JOB_NAME_LABEL};
use crate::run_state::RunState;

/// The time now; injected so tests move it.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The controller's configuration (flags of `lightsout-controller`).
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// How trial Jobs are built.
    pub trial: TrialSettings,
    /// Grace periods before a stuck pod counts as an infrastructure failure.
    pub observe: ObserveSettings,
    /// Where trial pods may connect to, beyond what run specs name.
    pub network: NetworkSettings,
    /// The delay before retrying an attempt that failed on infrastructure.
    pub backoff: Backoff,
    /// `ttlSecondsAfterFinished` set on a finished Job once its result is stored.
    pub finished_job_ttl_seconds: i32,
    /// Reconcile at least this often while a run is not complete.
    pub idle_requeue: Duration,
    /// The run's summary (bootstrap intervals and all) is recomputed at most this often while
    /// trials finish; always at once when the run completes.
    pub summary_interval: Duration,
    /// Reviews judged at once (all runs together), and held in the judge queue per run.
    pub judge_concurrency: usize,
    pub judge_batch: usize,
    /// The expected cost of a trial before any of its variant has finished; `None` uses the
    /// run's `budget.maxTrialUSD` or the built-in prior.
    pub prior_trial_usd: Option<f64>,
    /// Where `s3://` datasets are downloaded to.
    pub dataset_cache: PathBuf,
    /// The field manager of server-side applies and the Events' reporting controller.
    pub field_manager: String,
}

impl ControllerSettings {
    pub fn new(trial: TrialSettings) -> Self {
        ControllerSettings {
            trial,
            observe: ObserveSettings::default(),
            network: NetworkSettings::default(),
            backoff: Backoff::default(),
            finished_job_ttl_seconds: 600,
            idle_requeue: Duration::from_secs(300),
            summary_interval: Duration::from_secs(30),
            judge_concurrency: 8,
            judge_batch: 64,
            prior_trial_usd: None,
            dataset_cache: std::env::temp_dir().join("lightsout-datasets"),
            field_manager: "lightsout".into(),
        }
    }
}

/// Drops what the reconciler never reads from a watched Job or pod before it is cached: managed
/// fields and the inline job file (the largest part of a trial's Job and pod). Keeps the
/// controller's memory proportional to the trials in flight, not to their prompts.
pub fn trim_for_cache(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(crate::job::JOB_ANNOTATION);
    }
}

/// Trims a watched Job for the cache (its pod template carries the job file too).
pub fn trim_job(job: &mut Job) {
    trim_for_cache(&mut job.metadata);
    if let Some(template) = job.spec.as_mut().and_then(|s| s.template.metadata.as_mut()) {
        trim_for_cache(template);
    }
}

/// Trims a watched pod for the cache.
pub fn trim_pod(pod: &mut Pod) {
    trim_for_cache(&mut pod.metadata);
}

/// How the reconciler sees the run's Jobs and pods.
#[derive(Clone)]
pub enum ClusterView {
    /// Lists them through the API on every reconcile (tests against the fake API server).
    Listed,
    /// Reads the caches the controller's watches keep (production: no request per reconcile).
    Watched { jobs: Store<Job>, pods: Store<Pod> },
}

pub struct Context {
    pub client: Client,
    pub settings: ControllerSettings,
    pub view: ClusterView,
    pub metrics: Arc<Metrics>,
    pub models: ModelClient,
    pub pricing: PricingTable,
    /// Judging, off the reconcile path.
    pub judges: JudgeQueue,
    recorder: Recorder,
    clock: Clock,
    /// Per run (by uid): what was derived from its spec and read from its results store.
    runs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<RunState>>>>,
}

impl Context {
    pub fn new(
        client: Client,
        settings: ControllerSettings,
        view: ClusterView,
        metrics: Arc<Metrics>,
        models: ModelClient,
        pricing: PricingTable,
        clock: Clock,
    ) -> Self {
        let reporter =
            Reporter { controller: settings.field_manager.clone(), instance: std::env::var("POD_NAME").ok() };
        let recorder = Recorder::new(client.clone(), reporter);
        let judges = JudgeQueue::new(settings.judge_concurrency, settings.judge_batch);
        Context {
            client,
            settings,
            view,
            metrics,
            models,
            pricing,
            judges,
            recorder,
            clock,
            runs: Mutex::new(HashMap::new()),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// The state kept for the run with this uid, created empty on first use (and after a
    /// restart: it is then rebuilt from the API and the results store).
    pub fn run_state(&self, uid: &str) -> Arc<tokio::sync::Mutex<RunState>> {
        self.runs.lock().expect("runs lock").entry(uid.to_string()).or_default().clone()
    }

    /// Drops what was kept for a deleted run.
    pub fn forget_run(&self, uid: &str) {
        self.runs.lock().expect("runs lock").remove(uid);
        self.judges.forget_run(uid);
    }

    /// The run's Jobs and their pods, by the run's labels.
    pub async fn jobs_and_pods(&self, namespace: &str, run: &str) -> Result<(Vec<Job>, Vec<Pod>), Error> {
        let selector = labels::run_match_labels(run);
        match &self.view {
            ClusterView::Listed => {
                let params = ListParams::default().labels(&labels::run_selector_string(run));
                let jobs = Api::<Job>::namespaced(self.client.clone(), namespace).list(&params).await?.items;
                // Pods carry the Job's labels (the pod template's) and `job-name`.
                let pods = Api::<Pod>::namespaced(self.client.clone(), namespace).list(&params).await?.items;
                Ok((jobs, pods))
            }
            ClusterView::Watched { jobs, pods } => {
                let mine = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                    meta.namespace.as_deref() == Some(namespace)
                        && selector.iter().all(|(k, v)| meta.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
                };
                let jobs: Vec<Job> = jobs.state().iter().filter(|j| mine(&j.metadata)).map(|j| (**j).clone()).collect();
                let pods: Vec<Pod> = pods
                    .state()
                    .iter()
                    .filter(|p| mine(&p.metadata))
                    .filter(|p| p.metadata.labels.as_ref().is_some_and(|l| l.contains_key(JOB_NAME_LABEL)))
                    .map(|p| (**p).clone())
                    .collect();
                Ok((jobs, pods))
            }
        }
    }

    /// One key of a Secret in `namespace`, as text.
    pub async fn secret_value(&self, namespace: &str, name: &str, key: &str) -> Result<String, SecretError> {
        let secret = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|e| SecretError::Api(format!("reading Secret {namespace}/{name}: {e}")))?;
        let secret = secret.ok_or_else(|| SecretError::Missing(format!("Secret {namespace}/{name} does not exist")))?;
        let from_data = secret.data.as_ref().and_then(|d| d.get(key)).map(|v| String::from_utf8(v.0.clone()));
        let from_string = secret.string_data.as_ref().and_then(|d| d.get(key)).cloned();
        match (from_data, from_string) {
            (Some(Ok(value)), _) | (None, Some(value)) => Ok(value.trim().to_string()),
            (Some(Err(_)), _) => {
                Err(SecretError::Missing(format!("Secret {namespace}/{name}: key {key} is not UTF-8 text")))
            }
            (None, None) => Err(SecretError::Missing(format!("Secret {namespace}/{name} has no key {key}"))),
        }
    }

    /// Whether the Kueue LocalQueue `name` exists in `namespace` (`spec.queueName`).
    pub async fn local_queue(&self, namespace: &str, name: &str) -> Result<LocalQueueLookup, Error> {
        let resource = kueue_resource("LocalQueue", "localqueues");
        let api = Api::<kube::api::DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource);
        match api.get(name).await {
            Ok(_) => Ok(LocalQueueLookup::Found),
            Err(kube::Error::Api(response)) if response.code == 404 => {
                // A 404 is the same for a missing LocalQueue and a missing resource type.
                match self.client.list_api_group_resources(&resource.api_version).await {
                    Ok(list) if list.resources.iter().any(|r| r.name == "localqueues") => Ok(LocalQueueLookup::Missing),
                    _ => Ok(LocalQueueLookup::NoKueue),
                }
            }
            Err(e) => Err(Error::Kube(e)),
        }
    }

    /// Why Kueue cannot admit the queued Job of uid `job_uid` as things stand, read from its
    /// Workload ([`crate::queue_admission`]); `None` while it merely waits, or when the Workload
    /// cannot be read (a cluster whose RBAC predates the rule: the run waits as before, logged).
    pub async fn queue_blocked(&self, namespace: &str, job_uid: &str) -> Option<String> {
        use crate::queue_admission::{blocked_reason, JOB_UID_LABEL};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
        let resource = kueue_resource("Workload", "workloads");
        let api = Api::<kube::api::DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource);
        let selected = kube::api::ListParams::default().labels(&format!("{JOB_UID_LABEL}={job_uid}"));
        let workloads = match api.list(&selected).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(namespace, error = %e, "cannot read the Kueue Workloads of queued trial Jobs");
                return None;
            }
        };
        workloads.iter().find_map(|workload| {
            let conditions: Vec<Condition> =
                serde_json::from_value(workload.data.pointer("/status/conditions")?.clone()).ok()?;
            let name = workload.metadata.name.as_deref().unwrap_or_default();
            blocked_reason(&conditions).map(|message| format!("{message} (Workload {namespace}/{name})"))
        })
    }

    /// Publishes an Event about the run. Events are best effort: a failure is logged, never
    /// fails the reconcile.
    pub async fn event(&self, run: &EvaluationRun, warning: bool, reason: &str, note: String) {
        let event = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &run.object_ref(&())).await {
            tracing::warn!(run = run.metadata.name.as_deref().unwrap_or(""), reason, error = %e, "could not publish an Event");
        }
    }
}

/// Kueue's API group and the version the controller reads.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";
pub const KUEUE_VERSION: &str = "v1beta1";

/// A `kueue.x-k8s.io` resource of [`KUEUE_VERSION`], for a dynamic client.
fn kueue_resource(kind: &str, plural: &str) -> kube::discovery::ApiResource {
    kube::discovery::ApiResource {
        group: KUEUE_GROUP.into(),
        version: KUEUE_VERSION.into(),
        api_version: format!("{KUEUE_GROUP}/{KUEUE_VERSION}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// What [`Context::local_queue`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalQueueLookup {
    Found,
    /// Kueue is installed; the namespace has no LocalQueue of that name.
    Missing,
    /// The cluster serves no Kueue LocalQueues at all.
    NoKueue,
}

/// Reading a Secret failed.
#[derive(Debug)]
pub enum SecretError {
    /// The Secret or the key is not there: the run's spec names something that does not exist.
    Missing(String),
    /// The API did not answer.
    Api(String),
}
