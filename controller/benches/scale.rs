//! A large run against the fake API server: the controller's peak memory, the size of the
//! status object, and the Kubernetes API requests it makes per finished trial beyond the watch.
//!
//!   cargo bench -p lightsout-controller --bench scale -- [--trials 100000] [--parallelism 500]
//!
//! Two processes, so that the controller's memory is measured alone. This one is the controller:
//! the real reconciler with `ClusterView::Watched` over reflector stores (the bench lists the API
//! into them before each reconcile, as the watch would, not counted) and a `kube::Client` over
//! HTTP. The other (this binary with `--serve-api`) is the API server and the cluster: the fake
//! API (kube-fake-client) served on loopback, and a cluster step after each reconcile in which
//! every active Job's pod finishes (its `result.json` written to the results store as the worker
//! would, the Job marked complete with the trial summary as its pod's termination message) and
//! finished Jobs with a TTL are deleted as the TTL controller would. Requests are counted by verb
//! (by the fake API's interceptors) only while the reconciler runs. No judges (the panel is
//! empty): judging is model traffic, not API traffic. The results store is a local directory
//! (`TrialSettings::allow_local_results`): moto answers ~100 requests/s on this machine, which
//! would make a 100,000-trial run take an hour of S3 traffic that is not what is measured here
//! (the S3 path is tested in `tests/reconcile.rs`). Peak RSS is this process's `VmHWM`; the watch
//! caches are trimmed as `lightsout-controller`'s are (`context::trim_job`, `trim_pod`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use futures::stream::{FuturesUnordered, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::ByteString;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use kube::Client;
use kube_fake_client::interceptor::Funcs;
use kube_fake_client::ClientBuilder;
use lightsout_api::hash::sha256_hex;
use lightsout_api::EvaluationRun;
use lightsout_controller::context::{self, ClusterView, Context, ControllerSettings};
use lightsout_controller::job::{TrialSettings, JOB_ANNOTATION};
use lightsout_controller::metrics::Metrics;
use lightsout_controller::observe::is_finished;
use lightsout_controller::reconcile::reconcile;
use lightsout_core::pod_job::PodJob;
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::trial::{Outcome, TrialResult, TrialSummary, RESULT_SCHEMA};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{ModelClient, RetryPolicy, Usage};
use lightsout_s3::Results;
use serde_json::json;

const NAMESPACE: &str = "evals";
const RUN: &str = "scale";
const REPEATS: usize = 50;
const EFFORTS: usize = 2;

/// Kubernetes API requests by verb, counted while `on`.
#[derive(Default)]
struct Requests {
    on: AtomicBool,
    by_verb: Mutex<BTreeMap<&'static str, u64>>,
}

impl Requests {
    fn count(&self, verb: &'static str) {
        if self.on.load(Ordering::Relaxed) {
            *self.by_verb.lock().unwrap().entry(verb).or_default() += 1;
        }
    }
}

fn interceptors(requests: &Arc<Requests>) -> Funcs {
    let r = requests.clone();
    let funcs = Funcs::default().create(move |_| {
        r.count("create");
        Ok(None)
    });
    let r = requests.clone();
    let funcs = funcs.get(move |_| {
        r.count("get");
        Ok(None)
    });
    let r = requests.clone();
    let funcs = funcs.list(move |_| {
        r.count("list");
        Ok(None)
    });
    let r = requests.clone();
    let funcs = funcs.patch(move |_| {
        r.count("patch");
        Ok(None)
    });
    let r = requests.clone();
    let funcs = funcs.update(move |_| {
        r.count("update");
        Ok(None)
    });
    let r = requests.clone();
    let funcs = funcs.delete(move |_| {
        r.count("delete");
        Ok(None)
    });
    let r = requests.clone();
    let funcs = funcs.patch_status(move |_| {
        r.count("patch-status");
        Ok(None)
    });
    let r = requests.clone();
    funcs.replace_status(move |_| {
        r.count("replace-status");
        Ok(None)
    })
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn peak_rss_mib() -> f64 {
    rss_mib("VmHWM:")
}

/// A `/proc/self/status` memory line (`VmRSS:`, `VmHWM:`) in MiB.
fn rss_mib(line: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with(line))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn write_dataset(tasks: usize) -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("tasks.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 0..tasks {
        let line = json!({
            "id": format!("task-{i:05}"), "repo": "acme/widgets", "image": "python:3.12-slim",
            "title": format!("Change {i}"), "description": "A change to review.",
            "diff": format!("--- a/src/m{i}.py\n+++ b/src/m{i}.py\n@@ -1 +1 @@\n-x = {i}\n+x = {i} + 1\n"),
            "track": if i % 2 == 0 { "pre-merge" } else { "post-merge" },
            "ground_truth": {"kind": "bugs", "bugs": [{"description": "off by one", "file": format!("src/m{i}.py"), "line": 1}]},
        });
        writeln!(file, "{line}").unwrap();
    }
    path
}

fn run_object(dataset: &std::path::Path, results: &std::path::Path, parallelism: usize) -> EvaluationRun {
    serde_yaml::from_str(&format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: {RUN}, namespace: {NAMESPACE}, uid: 5ca1e000-0000-4000-8000-000000000001, generation: 1}}
spec:
  dataset: {{format: jsonl, source: "file://{}"}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, prompt: {{preset: default}}, timeout: 30m}}
  matrix: {{models: [{{name: gpt-5-mini, provider: openai}}], reasoningEfforts: [low, high], repeats: {REPEATS}}}
  providers: {{openai: {{baseUrl: "http://127.0.0.1:9/v1", apiKind: openai-chat, secretRef: {{name: key, key: k}}}}}}
  storage: {{results: "file://{}"}}
  parallelism: {parallelism}
  retries: 2
status: {{}}
"#,
        dataset.display(),
        results.display()
    ))
    .unwrap()
}

async fn refresh<K>(writer: &mut Writer<K>, api: &Api<K>, trim: fn(&mut K))
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let items = api.list(&ListParams::default()).await.unwrap().items;
    writer.apply_watcher_event(&watcher::Event::Init);
    for mut item in items {
        trim(&mut item);
        writer.apply_watcher_event(&watcher::Event::InitApply(item));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
}

/// The worker's part, for one Job: its result in S3 and its summary.
async fn finish_trial(store: &Results, job: &Job, minutes: f64) -> (String, String) {
    let template = job.spec.as_ref().unwrap().template.metadata.as_ref().unwrap();
    let pod_job = PodJob::parse(&template.annotations.as_ref().unwrap()[JOB_ANNOTATION]).unwrap();
    let finished_at = Utc::now();
    let duration_ms = (minutes * 60_000.0) as u64;
    let result = TrialResult {
        schema: RESULT_SCHEMA.into(),
        run: pod_job.run.clone(),
        variant_id: pod_job.variant.id.clone(),
        variant: pod_job.variant.name.clone(),
        trial_id: pod_job.trial_id.clone(),
        context_config: pod_job.context_config,
        task_id: pod_job.task.id.clone(),
        repeat: pod_job.repeat,
        attempt: pod_job.attempt,
        outcome: Outcome::Ok,
        error: None,
        harness: pod_job.variant.harness.clone(),
        harness_version_reported: Some("1.0.0".into()),
        model: pod_job.variant.model.name.clone(),
        provider: pod_job.variant.model.provider.clone(),
        reasoning_effort: pod_job.variant.reasoning_effort,
        prompt_sha256: sha256_hex(pod_job.prompt.as_bytes()),
        started_at: finished_at - TimeDelta::milliseconds(duration_ms as i64),
        finished_at,
        duration_ms,
        usage: Usage {
            input_tokens: 12_000,
            output_tokens: 900,
            cached_read_tokens: 4_000,
            cache_write_tokens: 0,
            reasoning_tokens: 300,
        },
        cost_usd: Some(0.004),
        model_calls: 1,
        findings: 3,
        review_words: 180,
        scripted_model: false,
        trajectory: None,
        isolation: None,
    };
    let key = RunLayout::new(RUN).artifact(&result.variant_id, &result.trial_id, result.attempt, "result.json");
    store.put(&key, &serde_json::to_vec(&result).unwrap()).await.unwrap();
    (job.metadata.name.clone().unwrap(), TrialSummary::of(&result).to_termination_message())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    if std::env::args().any(|a| a == "--serve-api") {
        runtime.block_on(serve_api());
    } else {
        runtime.block_on(bench());
    }
}

fn path_arg(name: &str) -> std::path::PathBuf {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name).unwrap_or_else(|| panic!("{name} is required"));
    args[i + 1].clone().into()
}

/// The other process: the fake API server (served over HTTP on loopback) and the cluster, so that
/// the bench process holds the controller alone. Paths under `/bench/` are the bench's own: the
/// cluster's step, and the request counter's switch and totals; everything else goes to the fake
/// API. It exits when the bench process closes its stdin.
async fn serve_api() {
    use axum::extract::{Request, State};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};

    #[derive(Clone)]
    struct Served {
        client: Client,
        requests: Arc<Requests>,
        store: Arc<Results>,
        rng: Arc<Mutex<u64>>,
    }

    async fn forward(State(served): State<Served>, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let request = axum::http::Request::from_parts(parts, kube::client::Body::from(bytes));
        match served.client.send(request).await {
            Ok(response) => {
                let (parts, body) = response.into_parts();
                Response::from_parts(parts, axum::body::Body::from(body.collect_bytes().await.unwrap()))
            }
            Err(e) => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }

    let dataset = path_arg("--dataset");
    let results_dir = path_arg("--results");
    let parallelism = arg("--parallelism", 500);
    let requests = Arc::new(Requests::default());
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("key".into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), ByteString(b"sk-test".to_vec()))].into()),
        ..Default::default()
    };
    let client: Client = ClientBuilder::new()
        .with_resource::<EvaluationRun>()
        .with_object(run_object(&dataset, &results_dir, parallelism))
        .with_object(secret)
        .with_interceptor_funcs(interceptors(&requests))
        .build()
        .await
        .unwrap();
    let store = Results::open(&format!("file://{}", results_dir.display()), None, None).unwrap();
    let served = Served { client, requests, store: Arc::new(store), rng: Arc::new(Mutex::new(0x2545_f491_4f6c_dd1d)) };
    let app = axum::Router::new()
        .route(
            "/bench/step",
            post(|State(s): State<Served>| async move {
                let mut rng = *s.rng.lock().unwrap();
                cluster_step(&s.client, &s.store, &mut rng).await;
                *s.rng.lock().unwrap() = rng;
            }),
        )
        .route(
            "/bench/counting/{on}",
            post(|State(s): State<Served>, axum::extract::Path(on): axum::extract::Path<bool>| async move {
                s.requests.on.store(on, Ordering::Relaxed);
            }),
        )
        .route(
            "/bench/counts",
            get(|State(s): State<Served>| async move { axum::Json(s.requests.by_verb.lock().unwrap().clone()) }),
        )
        .route("/bench/peak-rss", get(|| async { peak_rss_mib().to_string() }))
        .fallback(forward)
        .with_state(served);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening {}", listener.local_addr().unwrap().port());
    std::thread::spawn(|| {
        // The bench process holds our stdin; EOF means it is gone.
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    axum::serve(listener, app).await.unwrap();
}

/// The cluster: every active trial finishes; finished Jobs with a TTL expire.
async fn cluster_step(client: &Client, store: &Results, rng: &mut u64) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    let mut finishing = FuturesUnordered::new();
    for job in all.iter().filter(|j| !is_finished(j)) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        finishing.push(finish_trial(store, job, 5.0 + (*rng % 1000) as f64 / 50.0));
        if finishing.len() >= 32 {
            let (name, message) = finishing.next().await.unwrap();
            mark_complete(&jobs, &pods, &all, &name, &message).await;
        }
    }
    while let Some((name, message)) = finishing.next().await {
        mark_complete(&jobs, &pods, &all, &name, &message).await;
    }
    for job in &all {
        if is_finished(job) && job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished).is_some() {
            let name = job.metadata.name.clone().unwrap();
            jobs.delete(&name, &Default::default()).await.unwrap();
            let _ = pods.delete(&format!("{name}-pod"), &Default::default()).await;
        }
    }
}

/// A request to the other process's `/bench/` paths.
async fn bench_call(client: &Client, method: &str, path: &str) -> String {
    let request = axum::http::Request::builder().method(method).uri(path).body(Vec::new()).unwrap();
    client.request_text(request).await.unwrap()
}

async fn bench() {
    let trials = arg("--trials", 100_000);
    let parallelism = arg("--parallelism", 500);
    let tasks = (trials / (REPEATS * EFFORTS)).max(1);
    let dataset = write_dataset(tasks);
    let results_dir = tempfile::tempdir().unwrap();

    let mut api_server = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--serve-api", "--parallelism", &parallelism.to_string()])
        .arg("--dataset")
        .arg(&dataset)
        .arg("--results")
        .arg(results_dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(api_server.stdout.take().unwrap()), &mut first_line)
        .unwrap();
    let port: u16 = first_line.trim().strip_prefix("listening ").unwrap().parse().unwrap();
    lightsout_controller::install_crypto_provider();
    let mut config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    config.default_namespace = NAMESPACE.into();
    let client = Client::try_from(config).unwrap();

    let (job_store, mut job_writer) = reflector::store::<Job>();
    let (pod_store, mut pod_writer) = reflector::store::<Pod>();
    let mut trial = TrialSettings::new("lightsout:bench", "harness");
    trial.allow_local_results = true;
    let mut settings = ControllerSettings::new(trial);
    settings.dataset_cache = std::env::temp_dir().join("lightsout-bench-datasets");
    let ctx = Arc::new(Context::new(
        client.clone(),
        settings,
        ClusterView::Watched { jobs: job_store, pods: pod_store },
        Arc::new(Metrics::new()),
        ModelClient::new(Duration::from_secs(30), RetryPolicy::default()),
        PricingTable::default(),
        Arc::new(Utc::now),
    ));
    let runs: Api<EvaluationRun> = Api::namespaced(client.clone(), NAMESPACE);
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let after_setup = rss_mib("VmRSS:");

    let started = Instant::now();
    let mut reconcile_time = Duration::ZERO;
    let mut reconciles = 0u32;
    let mut largest_status = 0usize;
    let finished_trials = loop {
        refresh(&mut job_writer, &jobs, context::trim_job).await;
        refresh(&mut pod_writer, &pods, context::trim_pod).await;
        let run = runs.get(RUN).await.unwrap();
        bench_call(&client, "POST", "/bench/counting/true").await;
        let t = Instant::now();
        reconcile(Arc::new(run), ctx.clone()).await.expect("reconcile");
        let reconcile_took = t.elapsed();
        bench_call(&client, "POST", "/bench/counting/false").await;
        reconcile_time += reconcile_took;
        reconciles += 1;

        let run = runs.get(RUN).await.unwrap();
        let status = run.status.clone().unwrap_or_default();
        largest_status = largest_status.max(serde_json::to_vec(&status).unwrap().len());
        if status.conditions.iter().any(|c| c.type_ == "Complete" && c.status == "True") {
            break (status.trials.succeeded + status.trials.failed + status.trials.infra_failed) as u64;
        }
        if reconciles <= 3 || reconciles.is_multiple_of(20) {
            eprintln!(
                "  {:>4} reconciles, {:>6} of {} trials finished, {:.0} s, last reconcile {:.0} ms, controller RSS {:.0} MiB (peak {:.0})",
                reconciles,
                status.trials.succeeded,
                status.trials.total,
                started.elapsed().as_secs_f64(),
                reconcile_took.as_secs_f64() * 1000.0,
                rss_mib("VmRSS:"),
                rss_mib("VmHWM:")
            );
        }
        bench_call(&client, "POST", "/bench/step").await;
    };

    let counts: BTreeMap<String, u64> =
        serde_json::from_str(&bench_call(&client, "GET", "/bench/counts").await).unwrap();
    let api_server_peak: f64 = bench_call(&client, "GET", "/bench/peak-rss").await.parse().unwrap();
    drop(api_server.stdin.take());
    let _ = api_server.wait();
    let total: u64 = counts.values().sum();
    println!("scale: {finished_trials} trials ({tasks} tasks × {EFFORTS} efforts × {REPEATS} repeats), parallelism {parallelism}");
    println!(
        "  wall time                {:.1} s ({reconciles} reconciles, mean {:.1} ms each)",
        started.elapsed().as_secs_f64(),
        reconcile_time.as_secs_f64() * 1000.0 / f64::from(reconciles)
    );
    println!("  API requests             {total} ({counts:?})");
    println!("  per finished trial       {:.3}", total as f64 / finished_trials.max(1) as f64);
    println!("  largest status object    {:.1} KiB", largest_status as f64 / 1024.0);
    println!("  controller peak RSS      {:.1} MiB (bench process; {after_setup:.1} MiB after setup)", peak_rss_mib());
    println!("  fake API + cluster       {api_server_peak:.1} MiB peak (other process, not the controller's)");
}

async fn mark_complete(jobs: &Api<Job>, pods: &Api<Pod>, all: &[Job], name: &str, message: &str) {
    let now = Utc::now().to_rfc3339();
    let job = all.iter().find(|j| j.metadata.name.as_deref() == Some(name)).unwrap();
    let mut labels = job.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap_or_default();
    labels.insert("job-name".into(), name.to_string());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-pod"), "namespace": NAMESPACE, "labels": labels},
        "spec": {"containers": [{"name": "trial", "image": "i"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{"name": "trial", "ready": false, "restartCount": 0,
            "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 0, "message": message, "finishedAt": now}}}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    jobs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": now}], "succeeded": 1}})),
    )
    .await
    .unwrap();
}
