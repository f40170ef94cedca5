//! Lightsout on a real Kubernetes control plane (lightsout-testkit): the chart installed with
//! Helm, the real `lightsout-controller` binary run with the chart's ServiceAccount token (so
//! it has exactly the chart's RBAC), trial pods run by the test kit's kubelet with the real
//! `lightsout-worker` inside, moto as S3 and the scripted model server as the providers and
//! judges, both on loopback.
//!
//! Each test gets its own namespace (Pod Security `restricted` enforced, as a careful cluster
//! admin would), its own moto and model server, and its own controller(s) watching only that
//! namespace with a Lease of its own.

#![allow(dead_code)]

#[path = "../../../tests/common/moto.rs"]
pub mod moto;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::Client;
use lightsout_api::{EvaluationRun, S3Connection};
use lightsout_s3::{Results, S3Credentials};
use lightsout_testkit::binaries::workspace_binary;
use lightsout_testkit::control_plane::unique;
use lightsout_testkit::process::{free_port, Process};
use lightsout_testkit::{shared, ControlPlane, Image};
use serde_json::json;

/// The namespace the chart is installed in (the controller's ServiceAccount and Leases).
pub const SYSTEM_NAMESPACE: &str = "lightsout-system";
/// The chart's controller ServiceAccount (release `lightsout`).
pub const CONTROLLER_ACCOUNT: &str = "lightsout-controller";
/// The image trial pods' `worker` init container copies the worker out of.
pub const WORKER_IMAGE: &str = "testkit.local/lightsout/lightsout:dev";
/// The image of tasks that name none (the sample dataset's).
pub const TASK_IMAGE: &str = "testkit.local/lightsout/task:dev";
/// The key every provider Secret holds; the scripted server accepts any non-empty key.
pub const MODEL_KEY: &str = "scripted-model-key";
pub const BUCKET: &str = "results";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs `command`, failing the test with its output when it fails.
pub fn run_ok(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(output.status.success(), "{command:?} failed:\n{}\n{}", stdout(&output), stderr(&output));
    stdout(&output)
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `command` with `input` on its standard input.
pub fn run_with_input(command: &mut Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The control plane with Lightsout's chart installed (once per test binary): CRDs, RBAC, the
/// controller's ServiceAccount; the Deployment at zero replicas, since tests run the controller
/// themselves. `None` when the control plane is not built (the test is skipped).
pub fn control_plane() -> Option<&'static ControlPlane> {
    let control_plane = shared()?;
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let installed = helm_install(control_plane);
        assert!(installed.status.success(), "helm install: {}{}", stdout(&installed), stderr(&installed));
        add_trial_images(control_plane);
    });
    Some(control_plane)
}

/// The images trial pods run, for `control_plane`'s kubelet: the worker's, and the task images
/// the sample dataset's tasks name (Debian-like, with the repository under review at /repo; the
/// single-shot harness reads none of it).
pub fn add_trial_images(control_plane: &ControlPlane) {
    let worker = workspace_binary("lightsout-worker");
    control_plane.images.add(WORKER_IMAGE, Image::on_host_base().with("/lightsout-worker", worker));
    let repo = control_plane.scratch_dir("task-repo");
    for image in [TASK_IMAGE, "node:22-slim", "python:3.12-slim"] {
        control_plane.images.add(image, Image::on_host_base().with("/repo", &repo));
    }
}

/// `helm install lightsout charts/lightsout` into [`SYSTEM_NAMESPACE`], the Deployment at zero
/// replicas (tests run the controller themselves), waiting for what it creates.
pub fn helm_install(control_plane: &ControlPlane) -> Output {
    control_plane
        .helm()
        .args(["install", "lightsout"])
        .arg(repo_root().join("charts/lightsout"))
        .args([
            "--namespace",
            SYSTEM_NAMESPACE,
            "--create-namespace",
            "--set",
            "replicas=0",
            "--wait",
            "--timeout",
            "3m",
        ])
        .output()
        .unwrap()
}

/// A dataset of the sample's first task changed by `edit`, in a file of its own; its
/// `file://` URI.
pub fn one_task_dataset(control_plane: &ControlPlane, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let sample = std::fs::read_to_string(repo_root().join("datasets/sample/crbugbench.jsonl")).unwrap();
    let mut task: serde_json::Value = serde_json::from_str(sample.lines().next().unwrap()).unwrap();
    edit(&mut task);
    let dataset = control_plane.scratch_dir("dataset").join("tasks.jsonl");
    std::fs::write(&dataset, format!("{task}\n")).unwrap();
    format!("file://{}", dataset.display())
}

/// The summary.json `lightsout run` writes for `spec` (a cluster run's) with its results on
/// local disk and a model server of its own, as fresh as the cluster's was: the scripted
/// server's simulated prompt cache (cached-read tokens) depends on what it has seen.
pub fn local_summary(control_plane: &ControlPlane, spec: &str, cluster_models: &ModelServer) -> serde_json::Value {
    let local_dir = control_plane.scratch_dir("local-run");
    let local_models = ModelServer::start(control_plane);
    let local_spec = spec
        .replace(&format!("results: s3://{BUCKET}/lightsout"), &format!("results: file://{}", local_dir.display()))
        .replace(&cluster_models.base_url(), &local_models.base_url());
    let spec_file = local_dir.join("run.yaml");
    std::fs::write(&spec_file, &local_spec).unwrap();
    run_ok(
        Command::new(workspace_binary("lightsout"))
            .args(["run", "-f"])
            .arg(&spec_file)
            .env("OPENAI_API_KEY", MODEL_KEY)
            .env("ANTHROPIC_API_KEY", MODEL_KEY),
    );
    let name = serde_yaml::from_str::<serde_json::Value>(&local_spec).unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    serde_json::from_slice(&std::fs::read(local_dir.join(format!("runs/{name}/summary.json"))).unwrap()).unwrap()
}

/// A namespace for one test, with what a run there needs: the trial ServiceAccount and the
/// model and S3 Secrets.
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
}

impl TestNamespace {
    pub async fn create(control_plane: &ControlPlane, prefix: &str) -> TestNamespace {
        TestNamespace::create_named(control_plane, &format!("{prefix}-{}", unique())).await
    }

    /// [`TestNamespace::create`] with the exact name `name` (a worker cluster's namespace is
    /// the manager's).
    pub async fn create_named(control_plane: &ControlPlane, name: &str) -> TestNamespace {
        let name = name.to_string();
        let client = control_plane.client().await;
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        }}}))
        .unwrap();
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &name);
        let trial: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "lightsout-trial"}})).unwrap();
        accounts.create(&PostParams::default(), &trial).await.unwrap();
        let secrets = Api::<Secret>::namespaced(client.clone(), &name);
        for (secret, data) in [
            ("model-key", json!({"api-key": MODEL_KEY})),
            ("s3-creds", json!({"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})),
        ] {
            let secret: Secret =
                serde_json::from_value(json!({"metadata": {"name": secret}, "stringData": data})).unwrap();
            secrets.create(&PostParams::default(), &secret).await.unwrap();
        }
        TestNamespace { name, client }
    }

    pub fn runs(&self) -> Api<EvaluationRun> {
        Api::namespaced(self.client.clone(), &self.name)
    }

    pub async fn run(&self, name: &str) -> EvaluationRun {
        self.runs().get(name).await.unwrap()
    }
}

/// The scripted model server (`lightsout scripted-server`) as its own process, as a Service
/// would run it.
pub struct ModelServer {
    pub process: Process,
    pub port: u16,
}

impl ModelServer {
    pub fn start(control_plane: &ControlPlane) -> ModelServer {
        let port = free_port();
        let mut command = Command::new(workspace_binary("lightsout"));
        command.args(["scripted-server", "--listen", &format!("127.0.0.1:{port}")]);
        let log = control_plane.scratch_dir("model-server").join("log");
        let process = Process::start("scripted-server", command, &log).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the scripted model server did not start: {}",
                process.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        ModelServer { process, port }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// moto with the results bucket.
pub fn start_moto() -> moto::Moto {
    let moto = moto::Moto::start();
    moto.python(&format!("s3.create_bucket(Bucket='{BUCKET}')"));
    moto
}

/// The results store of a run spec'd by [`quickstart_run`].
pub fn store(moto: &moto::Moto) -> Results {
    let connection = S3Connection {
        endpoint: Some(moto.endpoint()),
        region: Some("us-east-1".into()),
        secret_name: None,
        force_path_style: Some(true),
    };
    Results::open(&format!("s3://{BUCKET}/lightsout"), Some(&connection), Some(S3Credentials::new("test", "test")))
        .unwrap()
}

/// The quickstart (manifests/examples/quickstart.yaml) pointed at this cluster: the sample
/// dataset from the controller's disk, both providers served by the scripted model server,
/// results in moto. `extra` is appended to the spec (indented two spaces).
pub fn quickstart_run(name: &str, models: &ModelServer, moto: &moto::Moto, extra: &str) -> String {
    quickstart_run_at(name, &models.base_url(), moto, extra)
}

fn quickstart_run_at(name: &str, url: &str, moto: &moto::Moto, extra: &str) -> String {
    let dataset = repo_root().join("datasets/sample/crbugbench.jsonl").display().to_string();
    let s3 = moto.endpoint();
    format!(
        r#"apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata:
  name: {name}
spec:
  dataset:
    format: crbugbench
    source: file://{dataset}
  agent:
    harness: {{name: single-shot, version: "1.0.0"}}
    prompt: {{preset: default}}
    timeout: 5m
  matrix:
    models:
      - {{name: gpt-5-mini, provider: openai}}
      - {{name: claude-sonnet-4-5, provider: anthropic}}
    reasoningEfforts: [low, high]
    repeats: 1
  judges:
    panel:
      - {{name: gpt-5, provider: openai}}
      - {{name: claude-haiku-4-5, provider: anthropic}}
      - {{name: gpt-4.1, provider: openai}}
    vote: majority
    k: [1, 3, 5]
  providers:
    openai:
      baseUrl: {url}
      apiKind: openai-chat
      secretRef: {{name: model-key, key: api-key}}
    anthropic:
      baseUrl: {url}
      apiKind: anthropic
      secretRef: {{name: model-key, key: api-key}}
  storage:
    results: s3://{BUCKET}/lightsout
    s3: {{endpoint: "{s3}", region: us-east-1, secretName: s3-creds, forcePathStyle: true}}
  parallelism: 4
  retries: 2
  budget:
    maxUSD: 5
    maxTrialUSD: 0.5
{extra}"#
    )
}

/// `kubectl apply -f -` of `yaml` in `namespace`.
pub fn kubectl_apply(control_plane: &ControlPlane, namespace: &str, yaml: &str) -> Output {
    run_with_input(control_plane.kubectl().args(["apply", "-n", namespace, "-f", "-"]), yaml)
}

/// A `lightsout-controller` process watching one namespace, authenticated as the chart's
/// ServiceAccount.
pub struct Controller {
    pub process: Process,
    pub identity: String,
    pub metrics_port: u16,
}

/// How tests start controllers: their namespace, the Lease they share, extra flags.
#[derive(Clone)]
pub struct ControllerConfig {
    pub namespace: String,
    pub lease_name: String,
    pub kubeconfig: PathBuf,
    pub extra_args: Vec<String>,
}

impl ControllerConfig {
    pub async fn new(control_plane: &ControlPlane, namespace: &str) -> ControllerConfig {
        let kubeconfig = control_plane.service_account_kubeconfig(SYSTEM_NAMESPACE, CONTROLLER_ACCOUNT).await.unwrap();
        ControllerConfig {
            namespace: namespace.into(),
            lease_name: format!("lightsout-{namespace}"),
            kubeconfig,
            extra_args: Vec::new(),
        }
    }
}

impl Controller {
    pub fn start(control_plane: &ControlPlane, config: &ControllerConfig, identity: &str) -> Controller {
        let metrics_port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_lightsout-controller"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KUBECONFIG", &config.kubeconfig)
            .env("RUST_LOG", "info,kube=warn")
            .args(["--namespace", &config.namespace])
            .args(["--worker-image", WORKER_IMAGE])
            .args(["--default-task-image", TASK_IMAGE])
            .args(["--metrics-address", &format!("127.0.0.1:{metrics_port}")])
            .args(["--lease-namespace", SYSTEM_NAMESPACE])
            .args(["--lease-name", &config.lease_name])
            .args(["--identity", identity])
            .args(["--log-format", "text"])
            .args(&config.extra_args);
        let log = control_plane.scratch_dir(&format!("controller-{identity}")).join("log");
        let process = Process::start(&format!("lightsout-controller {identity}"), command, &log).unwrap();
        Controller { process, identity: identity.into(), metrics_port }
    }

    /// The controller's `/metrics` text.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.metrics_port)).await.unwrap().text().await.unwrap()
    }
}

/// Polls `check` every 250 ms until it returns `Some`, or fails after `timeout` with `context()`.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}\n{}", context());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A condition's (status, reason, message) on a run, if present.
pub fn condition(run: &EvaluationRun, type_: &str) -> Option<(String, String, String)> {
    run.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits for `type_` to have `status` on the run.
pub async fn wait_condition(
    ns: &TestNamespace,
    run: &str,
    type_: &str,
    status: &str,
    timeout: Duration,
    context: impl Fn() -> String,
) -> EvaluationRun {
    eventually(
        &format!("{run}: {type_}={status}"),
        timeout,
        async || {
            let current = ns.runs().get_opt(run).await.ok()??;
            (condition(&current, type_).map(|c| c.0).as_deref() == Some(status)).then_some(current)
        },
        context,
    )
    .await
}

/// What a failing test should show: the namespace's runs (status), Jobs, pods and Events.
pub fn diagnose(control_plane: &ControlPlane, namespace: &str) -> String {
    let get = |args: &[&str]| {
        let output = control_plane.kubectl().args(args).args(["-n", namespace]).output().unwrap();
        format!("$ kubectl {}\n{}{}", args.join(" "), stdout(&output), stderr(&output))
    };
    [
        get(&["get", "evalrun", "-o", "yaml"]),
        get(&["get", "jobs,pods,configmaps,networkpolicies", "-o", "wide"]),
        get(&["get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.phase} {.status.reason} {.status.initContainerStatuses[*].state} {.status.containerStatuses[*].state}{\"\\n\"}{end}"]),
        get(&["get", "events", "--sort-by=.lastTimestamp"]),
    ]
    .join("\n")
}

/// A run spec: the quickstart's (see [`quickstart_run`]) changed by `edit` on its JSON form.
pub fn run_spec(name: &str, models_url: &str, moto: &moto::Moto, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let yaml = quickstart_run_at(name, models_url, moto, "");
    let mut value: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
    edit(&mut value);
    serde_yaml::to_string(&value).unwrap()
}

/// The sample dataset's first `n` tasks' ids.
pub fn sample_task_ids(n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("datasets/sample/crbugbench.jsonl")).unwrap();
    text.lines()
        .take(n)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["task_id"].as_str().unwrap().to_string())
        .collect()
}

/// The trial Jobs of a run in the namespace, by name.
pub async fn jobs_of(ns: &TestNamespace, run: &str) -> Vec<k8s_openapi::api::batch::v1::Job> {
    let api = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(ns.client.clone(), &ns.name);
    let mut jobs =
        api.list(&kube::api::ListParams::default().labels(&format!("lightsout.dev/run={run}"))).await.unwrap().items;
    jobs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    jobs
}

/// Whether a Job finished, and how (`Complete` or `Failed`).
pub fn job_outcome(job: &k8s_openapi::api::batch::v1::Job) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.clone())
}

/// Every `result.json` of `run` in the results store, by key, sorted.
pub async fn attempt_outcomes(moto: &moto::Moto, run: &str) -> Vec<(String, serde_json::Value)> {
    use lightsout_core::results::ResultStore;
    let store = store(moto);
    let mut outcomes = Vec::new();
    for key in store.list(&format!("runs/{run}/")).await.unwrap() {
        if key.ends_with("/result.json") {
            let result: serde_json::Value = serde_json::from_slice(&store.get(&key).await.unwrap().unwrap()).unwrap();
            outcomes.push((key, result));
        }
    }
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    outcomes
}

/// The keys of the run's stored files whose key contains `part`, sorted.
pub async fn stored_keys(moto: &moto::Moto, run: &str, part: &str) -> Vec<String> {
    use lightsout_core::results::ResultStore;
    let mut keys: Vec<String> =
        store(moto).list(&format!("runs/{run}/")).await.unwrap().into_iter().filter(|k| k.contains(part)).collect();
    keys.sort();
    keys
}

/// The run's stored `summary.json`.
pub async fn stored_summary(moto: &moto::Moto, run: &str) -> serde_json::Value {
    use lightsout_core::results::ResultStore;
    let bytes = store(moto).get(&format!("runs/{run}/summary.json")).await.unwrap().expect("summary.json");
    serde_json::from_slice(&bytes).unwrap()
}
