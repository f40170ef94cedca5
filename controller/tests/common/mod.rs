//! A cluster without a cluster, for the reconcile tests: kube-fake-client's stateful API server,
//! moto as the S3 results store, the scripted model server as the provider and the judges, and a
//! "kubelet" that runs a trial's pod with the worker's own trial code (single-shot) and marks
//! its Job and pod as Kubernetes would.

#![allow(dead_code)]

#[path = "../../../tests/common/moto.rs"]
pub mod moto;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::ByteString;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::Client;
use kube_fake_client::ClientBuilder;
use lightsout_api::{EvaluationRun, EvaluationRunStatus, S3Connection};
use lightsout_controller::context::{ClusterView, Context, ControllerSettings};
use lightsout_controller::job::{TrialSettings, JOB_ANNOTATION, JOB_JSON_KEY};
use lightsout_controller::metrics::Metrics;
use lightsout_controller::reconcile::reconcile;
use lightsout_core::pod_job::PodJob;
use lightsout_core::trial::TrialSummary;
use lightsout_model::pricing::PricingTable;
use lightsout_model::{ModelClient, RetryPolicy};
use lightsout_s3::{Results, S3Credentials};
use lightsout_scripted::{ScriptedConfig, ScriptedServer};
use lightsout_worker::trial::{run_trial, TrialJob};
use serde_json::json;

pub const NAMESPACE: &str = "evals";
pub const RUN: &str = "nightly";
pub const MODEL_KEY: &str = "scripted-model-key";

/// The sample dataset's first three tasks, two reasoning efforts: six trials.
pub fn run_yaml(scripted_url: &str, moto_url: &str) -> String {
    let dataset = concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/sample/crbugbench.jsonl");
    format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: {RUN}, namespace: {NAMESPACE}, uid: 0b5e8f6a-0000-4000-8000-00000000c0de, generation: 1}}
spec:
  dataset:
    format: crbugbench
    source: "file://{dataset}"
    filter: {{ids: [pyledger-001, pyledger-002, pyledger-003]}}
  agent:
    harness: {{name: single-shot, version: "1.0.0"}}
    prompt: {{preset: default}}
    timeout: 5m
  matrix:
    models: [{{name: gpt-5-mini, provider: scripted}}]
    reasoningEfforts: [low, high]
    repeats: 1
  judges:
    panel:
      - {{name: gpt-5, provider: scripted}}
      - {{name: claude-haiku-4-5, provider: scripted}}
      - {{name: gpt-4.1, provider: scripted}}
    vote: majority
    k: [1, 3]
  providers:
    scripted:
      baseUrl: "{scripted_url}"
      apiKind: openai-chat
      secretRef: {{name: model-key, key: api-key}}
  storage:
    results: s3://results/lightsout
    s3: {{endpoint: "{moto_url}", region: us-east-1, secretName: s3-creds, forcePathStyle: true}}
  parallelism: 2
  retries: 1
"#
    )
}

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
        ..Default::default()
    }
}

/// A copy of the sample's first task with a diff too large to travel inline in its Job (the
/// ConfigMap path); the file lives until the test process ends.
pub fn large_diff_dataset() -> String {
    let sample =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/sample/crbugbench.jsonl")).unwrap();
    let mut task: serde_json::Value = serde_json::from_str(sample.lines().next().unwrap()).unwrap();
    let padding: String = (0..6000).map(|i| format!("+# padding line {i} of a large generated change\n")).collect();
    task["diff"] = format!("{}{padding}", task["diff"].as_str().unwrap()).into();
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("large.jsonl");
    std::fs::write(&path, format!("{task}\n")).unwrap();
    format!("file://{}", path.display())
}

/// How the test's kubelet ends a trial pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodEnd {
    /// The worker runs the trial for real (single-shot against the scripted model) and exits 0.
    Worker,
    /// The worker runs with a trial token limit of 1, which the answer passes: an agent outcome
    /// (budget exceeded), exit 0.
    AgentOverBudget,
    /// The node evicts the pod before it finishes.
    Evicted,
    /// The kubelet evicts the pod because the agent wrote past its `scratch` emptyDir's limit.
    ScratchFull,
}

pub struct Cluster {
    pub client: Client,
    pub moto: moto::Moto,
    pub scripted: ScriptedServer,
    pub clock: Arc<Mutex<DateTime<Utc>>>,
    pub metrics: Arc<Metrics>,
    pub ctx: Arc<Context>,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Cluster::start_with(|_| {}).await
    }

    /// `edit` changes the run before it is created.
    pub async fn start_with(edit: impl FnOnce(&mut EvaluationRun)) -> Cluster {
        Cluster::start_full(edit, |builder| builder).await
    }

    /// As [`Cluster::start_with`]; `objects` adds resources and objects to the fake API server
    /// (an `EvaluationSchedule`, say).
    pub async fn start_full(
        edit: impl FnOnce(&mut EvaluationRun),
        objects: impl FnOnce(ClientBuilder) -> ClientBuilder,
    ) -> Cluster {
        let moto = moto::Moto::start();
        moto.python("s3.create_bucket(Bucket='results')");
        let scripted = ScriptedServer::start(ScriptedConfig::default()).await.unwrap();
        let mut run: EvaluationRun = serde_yaml::from_str(&run_yaml(&scripted.base_url(), &moto.endpoint())).unwrap();
        edit(&mut run);
        // An object with a status makes the fake API give its type a status subresource.
        run.status.get_or_insert_with(Default::default);
        let builder = ClientBuilder::new()
            .with_resource::<EvaluationRun>()
            .with_object(run)
            .with_object(secret("model-key", &[("api-key", MODEL_KEY)]))
            .with_object(secret("s3-creds", &[("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")]));
        let client = objects(builder).build().await.unwrap();
        let clock = Arc::new(Mutex::new(DateTime::parse_from_rfc3339("2026-12-01T08:00:00Z").unwrap().to_utc()));
        let metrics = Arc::new(Metrics::new());
        let ctx = Cluster::context(&client, &clock, &metrics);
        Cluster { client, moto, scripted, clock, metrics, ctx }
    }

    /// A fresh controller (empty memory) over the same API and store: a restart.
    pub fn restart_controller(&mut self) {
        self.metrics = Arc::new(Metrics::new());
        self.ctx = Cluster::context(&self.client, &self.clock, &self.metrics);
    }

    /// A fresh controller whose trial pods run tasks that name no image (SWE-PRBench's) on `image`.
    pub fn set_default_task_image(&mut self, image: &str) {
        let image = image.to_string();
        self.ctx = Cluster::context_with(&self.client, &self.clock, &self.metrics, move |settings| {
            settings.trial.default_task_image = Some(image)
        });
    }

    fn context(client: &Client, clock: &Arc<Mutex<DateTime<Utc>>>, metrics: &Arc<Metrics>) -> Arc<Context> {
        Cluster::context_with(client, clock, metrics, |_| {})
    }

    fn context_with(
        client: &Client,
        clock: &Arc<Mutex<DateTime<Utc>>>,
        metrics: &Arc<Metrics>,
        edit: impl FnOnce(&mut ControllerSettings),
    ) -> Arc<Context> {
        let mut settings = ControllerSettings::new(TrialSettings::new(
            "ghcr.io/lightsout-dev/lightsout:test",
            "ghcr.io/lightsout-dev/harness",
        ));
        edit(&mut settings);
        settings.summary_interval = Duration::ZERO;
        settings.dataset_cache = std::env::temp_dir().join("lightsout-controller-tests");
        let clock = clock.clone();
        Arc::new(Context::new(
            client.clone(),
            settings,
            ClusterView::Listed,
            metrics.clone(),
            ModelClient::new(Duration::from_secs(30), RetryPolicy::default()),
            PricingTable::default(),
            Arc::new(move || *clock.lock().unwrap()),
        ))
    }

    pub fn advance(&self, seconds: i64) {
        *self.clock.lock().unwrap() += TimeDelta::seconds(seconds);
    }

    pub fn now(&self) -> DateTime<Utc> {
        *self.clock.lock().unwrap()
    }

    pub fn runs(&self) -> Api<EvaluationRun> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    pub async fn run(&self) -> EvaluationRun {
        self.runs().get(RUN).await.unwrap()
    }

    /// One reconcile of the run as it is in the API now.
    pub async fn reconcile(&self) -> Action {
        self.reconcile_run(RUN).await
    }

    /// One reconcile of the run `name` as it is in the API now, with its judging done as one
    /// reconcile did it before the judge queue: when the reconcile handed reviews to the queue,
    /// they are judged and the run reconciled again (as their wake would), which stores them.
    /// Nothing is left being judged when this returns.
    pub async fn reconcile_run(&self, name: &str) -> Action {
        let run = Arc::new(self.runs().get(name).await.unwrap());
        let uid = run.metadata.uid.clone().unwrap_or_default();
        let action = reconcile(run, self.ctx.clone()).await.expect("reconcile");
        if !self.ctx.judges.is_busy(&uid) {
            return action;
        }
        self.ctx.judges.settled(&uid).await;
        let run = Arc::new(self.runs().get(name).await.unwrap());
        let action = reconcile(run, self.ctx.clone()).await.expect("reconcile");
        self.ctx.judges.settled(&uid).await;
        action
    }

    /// Reconciles `run` as given (e.g. with a deletion timestamp the fake API cannot set).
    pub async fn reconcile_object(&self, run: EvaluationRun) -> Action {
        reconcile(Arc::new(run), self.ctx.clone()).await.expect("reconcile")
    }

    pub async fn jobs(&self) -> Vec<Job> {
        let mut jobs =
            Api::<Job>::namespaced(self.client.clone(), NAMESPACE).list(&ListParams::default()).await.unwrap().items;
        jobs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        jobs
    }

    pub async fn active_jobs(&self) -> Vec<Job> {
        self.jobs().await.into_iter().filter(|j| !lightsout_controller::observe::is_finished(j)).collect()
    }

    pub async fn config_maps(&self) -> Vec<ConfigMap> {
        Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE).list(&ListParams::default()).await.unwrap().items
    }

    pub async fn network_policies(&self) -> Vec<NetworkPolicy> {
        Api::<NetworkPolicy>::namespaced(self.client.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    pub async fn services(&self) -> Vec<Service> {
        Api::<Service>::namespaced(self.client.clone(), NAMESPACE).list(&ListParams::default()).await.unwrap().items
    }

    pub fn store(&self) -> Results {
        let connection = S3Connection {
            endpoint: Some(self.moto.endpoint()),
            region: Some("us-east-1".into()),
            secret_name: None,
            force_path_style: Some(true),
        };
        Results::open("s3://results/lightsout", Some(&connection), Some(S3Credentials::new("test", "test"))).unwrap()
    }

    /// Patches the run's spec (a new generation, as the API server would count it).
    pub async fn patch_spec(&self, spec: serde_json::Value) {
        let run = self.run().await;
        let generation = run.metadata.generation.unwrap_or(1) + 1;
        self.runs()
            .patch(
                RUN,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"generation": generation}, "spec": spec})),
            )
            .await
            .unwrap();
    }

    /// What the kubelet and the Job controller do for one trial pod, ending as `end`.
    pub async fn run_pod(&self, job: &Job, end: PodEnd) -> Option<TrialSummary> {
        let name = job.metadata.name.clone().unwrap();
        let template = job.spec.as_ref().unwrap().template.metadata.clone().unwrap();
        let text = match template.annotations.unwrap_or_default().get(JOB_ANNOTATION) {
            Some(inline) => inline.clone(),
            None => {
                let config_map = Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE).get(&name).await.unwrap();
                let owner = &config_map.metadata.owner_references.as_ref().unwrap()[0];
                assert_eq!(
                    (owner.kind.as_str(), owner.name.as_str()),
                    ("Job", name.as_str()),
                    "the ConfigMap belongs to its Job"
                );
                config_map.data.unwrap()[JOB_JSON_KEY].clone()
            }
        };
        let pod_job = PodJob::parse(&text).unwrap();
        let at = self.now();
        let (job_status, pod_status, summary) = match end {
            PodEnd::Worker | PodEnd::AgentOverBudget => {
                let trial = TrialJob {
                    run: pod_job.run.clone(),
                    variant: pod_job.variant.clone(),
                    task: pod_job.task.clone(),
                    trial_id: pod_job.trial_id.clone(),
                    context_config: pod_job.context_config,
                    repeat: pod_job.repeat,
                    attempt: pod_job.attempt,
                    prompt: pod_job.prompt.clone(),
                    endpoint: pod_job.endpoint(MODEL_KEY.into()),
                    timeout: pod_job.timeout(),
                    max_tokens: if end == PodEnd::AgentOverBudget { Some(1) } else { pod_job.max_tokens },
                    max_usd: pod_job.max_usd,
                    agent: None,
                    spend: Default::default(),
                };
                let client = ModelClient::new(Duration::from_secs(30), RetryPolicy::default());
                let artifacts =
                    run_trial(&trial, &client, &PricingTable::default(), &self.store(), Duration::from_secs(30))
                        .await
                        .unwrap();
                let summary = TrialSummary::of(&artifacts.result);
                let message = summary.to_termination_message();
                (
                    json!({"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at.to_rfc3339()}],
                           "succeeded": 1, "completionTime": at.to_rfc3339()}),
                    json!({"phase": "Succeeded", "containerStatuses": [{"name": "trial", "ready": false, "restartCount": 0,
                        "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 0, "message": message,
                        "finishedAt": at.to_rfc3339()}}}]}),
                    Some(summary),
                )
            }
            PodEnd::Evicted => (
                json!({"conditions": [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                       "lastTransitionTime": at.to_rfc3339()}], "failed": 1}),
                json!({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}),
                None,
            ),
            PodEnd::ScratchFull => (
                json!({"conditions": [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                       "lastTransitionTime": at.to_rfc3339()}], "failed": 1}),
                json!({"phase": "Failed", "reason": "Evicted", "startTime": at.to_rfc3339(),
                       "message": "Usage of EmptyDir volume \"scratch\" exceeds the limit \"4096Mi\". "}),
                None,
            ),
        };
        let mut labels: BTreeMap<String, String> =
            job.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap_or_default();
        labels.insert("job-name".into(), name.clone());
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-pod"), "namespace": NAMESPACE, "labels": labels,
                         "creationTimestamp": at.to_rfc3339()},
            "spec": {"containers": [{"name": "trial", "image": "i"}]},
        }))
        .unwrap();
        let pods = Api::<Pod>::namespaced(self.client.clone(), NAMESPACE);
        pods.create(&PostParams::default(), &pod).await.unwrap();
        pods.patch_status(
            &pod.metadata.name.clone().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": pod_status})),
        )
        .await
        .unwrap();
        Api::<Job>::namespaced(self.client.clone(), NAMESPACE)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": job_status})))
            .await
            .unwrap();
        summary
    }

    /// Runs every active Job's pod to `end`.
    pub async fn run_active(&self, end: PodEnd) -> usize {
        let active = self.active_jobs().await;
        for job in &active {
            self.run_pod(job, end).await;
        }
        active.len()
    }

    /// What TTL-after-finished does: deletes finished Jobs that have a TTL (and their pods and
    /// ConfigMaps).
    pub async fn expire_finished_jobs(&self) {
        let jobs = Api::<Job>::namespaced(self.client.clone(), NAMESPACE);
        let pods = Api::<Pod>::namespaced(self.client.clone(), NAMESPACE);
        let config_maps = Api::<ConfigMap>::namespaced(self.client.clone(), NAMESPACE);
        for job in self.jobs().await {
            let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
            if ttl.is_some() && lightsout_controller::observe::is_finished(&job) {
                let name = job.metadata.name.clone().unwrap();
                jobs.delete(&name, &Default::default()).await.unwrap();
                let _ = pods.delete(&format!("{name}-pod"), &Default::default()).await;
                let _ = config_maps.delete(&name, &Default::default()).await;
            }
        }
    }

    pub fn keys(&self) -> Vec<String> {
        self.moto.keys()
    }

    /// The Events published in the namespace: (type, reason, note), oldest first.
    pub async fn events(&self) -> Vec<(String, String, String)> {
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(self.client.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        events
            .into_iter()
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }
}

/// A condition's (status, reason, message).
pub fn condition_of(status: &EvaluationRunStatus, type_: &str) -> (String, String, String) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// Reconciles and runs pods until the run is complete (at most `rounds` rounds).
pub async fn run_to_completion(cluster: &Cluster, rounds: usize) -> EvaluationRun {
    run_named_to_completion(cluster, RUN, rounds).await
}

/// Reconciles the run `name` and runs pods until it is complete (at most `rounds` rounds).
pub async fn run_named_to_completion(cluster: &Cluster, name: &str, rounds: usize) -> EvaluationRun {
    for _ in 0..rounds {
        cluster.reconcile_run(name).await;
        let run = cluster.runs().get(name).await.unwrap();
        if condition_of(run.status.as_ref().unwrap(), lightsout_api::condition::COMPLETE).0 == "True" {
            return run;
        }
        cluster.run_active(PodEnd::Worker).await;
        cluster.expire_finished_jobs().await;
    }
    panic!("the run {name} did not complete: {:?}", cluster.runs().get(name).await.unwrap().status);
}
