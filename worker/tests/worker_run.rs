//! `lightsout-worker run --job FILE`, the in-pod entrypoint: one attempt, its artifacts stored,
//! a summary within the termination message's 4 KiB, and an exit status the controller can act
//! on (0 stored, 3 infrastructure failure, 2 bad job).

use std::path::{Path, PathBuf};

use lightsout_api::validate::parse_run;
use lightsout_api::variant::variants;
use lightsout_api::{ApiKind, DatasetFormat};
use lightsout_core::dataset::load_file;
use lightsout_core::prompts::review_prompt;
use lightsout_core::trial::TrialSummary;
use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use lightsout_worker::job::{PodJob, ProviderEndpoint};

fn job(base_url: &str, results: &Path, termination: &Path) -> PodJob {
    job_with_harness("{name: single-shot, version: \"1.0.0\"}", base_url, results, termination)
}

fn job_with_harness(harness: &str, base_url: &str, results: &Path, termination: &Path) -> PodJob {
    let spec = parse_run(
        &format!(
            r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: pod}}
spec:
  dataset: {{format: crbugbench, source: "file://x"}}
  agent: {{harness: {harness}}}
  matrix: {{models: [{{name: gpt-5-mini, provider: p}}]}}
  providers: {{p: {{baseUrl: "http://x", apiKind: openai-chat}}}}
  storage: {{results: "file://x"}}
"#
        ),
        "job",
    )
    .unwrap()
    .spec;
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/crbugbench.jsonl");
    let task = load_file(DatasetFormat::CrBugBench, &sample).unwrap().tasks.remove(0).task;
    let variant = variants(&spec).remove(0);
    let single_shot = variant.harness.name == lightsout_api::HarnessName::SingleShot;
    PodJob {
        run: "pod".into(),
        prompt: if single_shot {
            review_prompt(&variant.prompt, &task, None)
        } else {
            lightsout_core::prompts::agentic_review_prompt(&variant.prompt, &task, None)
        },
        base_tree: (!single_shot).then(|| lightsout_core::workspace::local_base_tree(&sample, &task.repo)),
        trial_id: lightsout_core::plan::trial_id(&variant.id, &task.id, 0),
        variant,
        task,
        context_config: None,
        repeat: 0,
        attempt: 1,
        provider: ProviderEndpoint {
            name: "p".into(),
            base_url: base_url.into(),
            api_kind: ApiKind::OpenAiChat,
            api_key_env: "POD_KEY".into(),
        },
        timeout_seconds: 60,
        max_tokens: None,
        max_usd: None,
        max_turns: None,
        max_file_bytes: None,
        scratch_mib: None,
        results: format!("file://{}", results.display()),
        s3: None,
        harness_root: None,
        termination_log: termination.to_path_buf(),
        upload_deadline_seconds: 5,
        provider_stall_timeout_seconds: None,
    }
}

fn worker(job_file: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_lightsout-worker"))
        .args(["run", "--job"])
        .arg(job_file)
        .env("POD_KEY", "pod-secret")
        .output()
        .unwrap()
}

fn write(dir: &Path, job: &PodJob) -> PathBuf {
    let path = dir.join("job.json");
    std::fs::write(&path, serde_json::to_vec(job).unwrap()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_attempt_stores_its_results_and_summarises_them() {
    let server = ScriptedServer::start(ScriptedConfig {
        expected_api_key: Some("pod-secret".into()),
        faults: Faults::default(),
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (results, termination) = (dir.path().join("results"), dir.path().join("termination-log"));
    let job = job(&server.base_url(), &results, &termination);
    let file = write(dir.path(), &job);
    let output = tokio::task::spawn_blocking(move || worker(&file)).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let message = std::fs::read_to_string(&termination).unwrap();
    assert!(message.len() <= 4096);
    let summary: TrialSummary = serde_json::from_str(&message).unwrap();
    assert_eq!((summary.trial_id.as_str(), summary.attempt), (job.trial_id.as_str(), 1));
    assert!(summary.findings >= 3 && summary.usage.output_tokens > 0, "{summary:?}");
    let attempt = results.join(format!("runs/pod/{}/{}/attempt-1", job.variant.id, job.trial_id));
    for file in ["prompt.txt", "review.md", "findings.json", "result.json"] {
        assert!(attempt.join(file).exists(), "{file}");
    }
    // The provider was the scripted server, which marks its answers: the result says so.
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(attempt.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["scripted_model"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_provider_is_an_infrastructure_failure() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (results, termination) = (dir.path().join("results"), dir.path().join("termination-log"));
    let file = write(dir.path(), &job(&format!("http://127.0.0.1:{port}/v1"), &results, &termination));
    let output = tokio::task::spawn_blocking(move || worker(&file)).await.unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: TrialSummary = serde_json::from_str(&std::fs::read_to_string(&termination).unwrap()).unwrap();
    assert_eq!(summary.outcome, lightsout_core::trial::Outcome::InfraFailed);
}

#[test]
fn a_bad_job_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut value = serde_json::to_value(job("http://127.0.0.1:1/v1", dir.path(), &dir.path().join("t"))).unwrap();
    value["timeoutSeconds"] = serde_json::json!("soon");
    let path = dir.path().join("job.json");
    std::fs::write(&path, value.to_string()).unwrap();
    let output = worker(&path);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("field timeoutSeconds"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A pod stopped mid-attempt (Kueue preempting its Job, an eviction): the worker gets SIGTERM
/// while a real harness (mini-swe-agent) is between model calls. It stops the agent (nothing of
/// it is left running), stores what the calls it made cost as an `interrupted-<ms>.json` record
/// (no `result.json`: the attempt is not done), and the run's summary counts that spend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_records_what_its_calls_spent_and_leaves_nothing_running() {
    use lightsout_core::results::{LocalStore, RunLayout};
    use lightsout_core::stored::StoredRun;
    let server = ScriptedServer::start(ScriptedConfig {
        expected_api_key: Some("pod-secret".into()),
        faults: Faults { delay_ms: 1500, ..Default::default() },
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (results, termination) = (dir.path().join("results"), dir.path().join("termination-log"));
    let mut job =
        job_with_harness("{name: mini-swe-agent, version: \"2.4.6\"}", &server.base_url(), &results, &termination);
    job.timeout_seconds = 120;
    let file = write(dir.path(), &job);
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_lightsout-worker"))
        .args(["run", "--job"])
        .arg(&file)
        .env("POD_KEY", "pod-secret")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Two model requests seen: the agent has had at least one answer (it calls one at a time).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while server.requests().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "mini-swe-agent made no second call");
        assert!(worker.try_wait().unwrap().is_none(), "the worker ended before it was stopped");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // SAFETY: signals a child of this test.
    unsafe { libc::kill(worker.id() as libc::pid_t, libc::SIGTERM) };
    let stopped_at = std::time::Instant::now();
    let output = tokio::task::spawn_blocking(move || worker.wait_with_output()).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stopped_at.elapsed() < std::time::Duration::from_secs(15), "took {:?}: {stderr}", stopped_at.elapsed());
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("stopped (SIGTERM)"), "{stderr}");

    let attempt = results.join(format!("runs/pod/{}/{}/attempt-1", job.variant.id, job.trial_id));
    assert!(!attempt.join("result.json").exists(), "a stopped attempt is not done");
    let records: Vec<_> = std::fs::read_dir(&attempt)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("interrupted-"))
        .collect();
    assert_eq!(records.len(), 1, "{stderr}");
    let record: lightsout_core::interruption::Interruption =
        serde_json::from_slice(&std::fs::read(records[0].path()).unwrap()).unwrap();
    let answered = server.requests().len() as u32;
    assert!(record.model_calls >= 1 && record.model_calls <= answered, "{record:?}, {answered} requests");
    assert!(record.usage.output_tokens > 0 && record.cost_usd > 0.0, "{record:?}");
    assert_eq!(
        (record.trial_id.as_str(), record.attempt, record.signal.as_str()),
        (job.trial_id.as_str(), 1, "SIGTERM")
    );
    // Nothing the agent started is left: no process runs in its scratch directory.
    let scratch = std::env::temp_dir().join(format!("lightsout-{}-1", job.trial_id));
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        if let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) {
            assert!(!cwd.starts_with(&scratch), "process {:?} still runs in {}", entry.file_name(), cwd.display());
        }
    }
    assert!(!scratch.exists(), "the scratch space is removed");

    // The store's reader counts it: in the trial's spend beside its attempts, in the run's.
    let stored = StoredRun::scan(&LocalStore::new(&results), &RunLayout::new("pod")).await.unwrap();
    let spend = stored.earlier_spend(&job.trial_id, None).unwrap();
    assert_eq!((spend.usage, spend.cost_usd), (record.usage, record.cost_usd));
    assert_eq!(stored.spent_usd(), record.cost_usd);
    // Its attempt has no result yet: the run that follows may still be stopped.
    assert_eq!(spend.preempted_runs, 1);
}
