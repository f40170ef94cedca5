//! Whose time ran out when a single-shot trial hits its time limit (invariant 5: infrastructure
//! failures are never scored as model failures). `run_local` with a 2 s limit, for each API kind,
//! the agent's calls going through the chaos layer (`lightsout_scripted::chaos`) in front
//! of the scripted server, the judge calling the scripted server directly:
//! - the provider sends nothing at all, not even headers (a hang the layer holds far past the
//!   limit, and a stall timeout longer than the limit, so only the limit ends the call): every
//!   attempt is `infra-failed` with the provider named, retried, never scored; once the provider
//!   answers, the next run finishes the trials;
//! - the answer starts streaming and then stalls past the limit: the model was answering, so
//!   `timed-out`, not retried, and scored (as no finding).

use std::path::Path;
use std::time::Duration;

use lightsout_api::validate::parse_run;
use lightsout_api::ApiKind;
use lightsout_core::trial::{Outcome, TrialResult};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{RateLimitPolicy, RetryPolicy};
use lightsout_scripted::chaos::{ChaosConfig, ChaosServer, FaultRates};
use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use lightsout_worker::local::{run_local, LocalRun, LocalRunReport};

const TASKS: usize = 2;
/// Longer than the time limit, so the limit, not the stall timeout, ends a silent call.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the layer holds a hang or a stalled answer: far past the limit.
const HOLD: Duration = Duration::from_secs(20);

fn write_dataset(dir: &Path) -> std::path::PathBuf {
    let lines: Vec<String> = (0..TASKS)
        .map(|i| {
            serde_json::json!({
                "task_id": format!("hang-task-{i}"),
                "repo": "hang/repo",
                "title": format!("hang-task-{i}: change module {i}"),
                "description": format!("Changes module {i}."),
                "diff": format!("diff --git a/src/m{i}.rs b/src/m{i}.rs\n--- a/src/m{i}.rs\n+++ b/src/m{i}.rs\n@@ -1,1 +1,2 @@\n fn a() {{}}\n+let left_{i} = read({i});\n"),
                "track": "pre-merge",
                "bugs": [{"description": format!("read({i}) is never checked"), "file": format!("src/m{i}.rs"), "line": 2}],
            })
            .to_string()
        })
        .collect();
    let path = dir.join("hang.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn run_yaml(dataset: &Path, agent_url: &str, api_kind: ApiKind, judge_url: &str) -> String {
    let (kind, model) = match api_kind {
        ApiKind::OpenAiChat => ("openai-chat", "gpt-5-mini"),
        ApiKind::OpenAiResponses => ("openai-responses", "gpt-5-mini"),
        ApiKind::Anthropic => ("anthropic", "claude-sonnet-4-5"),
    };
    format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: hang}}
spec:
  dataset: {{format: crbugbench, source: "file://{}"}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, timeout: 2s}}
  matrix: {{models: [{{name: {model}, provider: agent}}]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: judge}}], k: [1]}}
  providers:
    agent: {{baseUrl: "{agent_url}", apiKind: {kind}, apiKeyEnv: HANG_KEY}}
    judge: {{baseUrl: "{judge_url}", apiKind: anthropic, apiKeyEnv: HANG_KEY}}
  storage: {{results: "file:///unused"}}
  parallelism: {TASKS}
  retries: 1
"#,
        dataset.display()
    )
}

fn config(yaml: &str, results: &Path) -> LocalRun {
    LocalRun {
        run: parse_run(yaml, "hang.yaml").unwrap_or_else(|e| panic!("{e}")),
        results_uri: Some(format!("file://{}", results.display())),
        pricing: PricingTable::default(),
        env: Box::new(|name| (name == "HANG_KEY").then(|| "secret".to_string())),
        retry_delay: Duration::from_millis(1),
        model_retry: RetryPolicy::default(),
        model_rate_limits: RateLimitPolicy::default(),
        provider_stall_timeout: STALL_TIMEOUT,
        harness_root: results.join("harnesses"),
        sandbox: None,
        upload_deadline: Duration::from_secs(10),
        offline_models: Some(std::sync::Arc::new(lightsout_scripted::ScriptedModels::default())),
    }
}

/// Every stored attempt's result, attempts in order.
fn stored_results(results: &Path) -> Vec<TrialResult> {
    let mut found = Vec::new();
    let mut stack = vec![results.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "result.json") {
                found.push(serde_json::from_slice::<TrialResult>(&std::fs::read(&path).unwrap()).unwrap());
            }
        }
    }
    found.sort_by(|a, b| (&a.task_id, a.attempt).cmp(&(&b.task_id, b.attempt)));
    found
}

struct Setup {
    _dir: tempfile::TempDir,
    _scripted: ScriptedServer,
    chaos: ChaosServer,
    yaml: String,
    results: std::path::PathBuf,
}

async fn setup(api_kind: ApiKind, rates: FaultRates) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let dataset = write_dataset(dir.path());
    let scripted =
        ScriptedServer::start(ScriptedConfig { expected_api_key: Some("secret".into()), faults: Faults::default() })
            .await
            .unwrap();
    let chaos = ChaosServer::start(ChaosConfig { upstream: scripted.base_url(), seed: 5, rates, hang_for: HOLD })
        .await
        .unwrap();
    let yaml = run_yaml(&dataset, &chaos.base_url(), api_kind, &scripted.base_url());
    let results = dir.path().join("results");
    Setup { _dir: dir, _scripted: scripted, chaos, yaml, results }
}

async fn run(setup: &Setup) -> LocalRunReport {
    run_local(config(&setup.yaml, &setup.results), |_| {}).await.unwrap()
}

const KINDS: [ApiKind; 3] = [ApiKind::OpenAiChat, ApiKind::OpenAiResponses, ApiKind::Anthropic];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_sends_nothing_by_the_time_limit_fails_the_attempt_on_infrastructure() {
    for kind in KINDS {
        let setup = setup(kind, FaultRates { hang: 1.0, ..FaultRates::NONE }).await;
        let report = run(&setup).await;
        let results = stored_results(&setup.results);
        assert_eq!(results.len(), 2 * TASKS, "{kind:?}: each trial's attempt and its retry: {results:#?}");
        for result in &results {
            assert_eq!(result.outcome, Outcome::InfraFailed, "{kind:?}: {result:#?}");
            let error = result.error.as_deref().unwrap_or_default();
            assert!(error.contains("the provider sent nothing for"), "{kind:?}: {error}");
        }
        let summary = &report.summary;
        assert_eq!((summary.trials.infra_failed, summary.trials.timed_out), (TASKS as u32, 0), "{kind:?}");
        assert_eq!(summary.variants[0].scored, 0, "{kind:?}: never scored");
        assert_eq!(report.unfinished.infra_failed, TASKS as u32, "{kind:?}");
        // Every request the layer saw was a streamed one.
        assert!(setup.chaos.requests().iter().all(|r| r.body["stream"] == true), "{kind:?}");

        // The provider recovers: the next run finishes the trials.
        setup.chaos.set_rates(FaultRates::NONE);
        let report = run(&setup).await;
        assert!(report.unfinished.is_empty(), "{kind:?}: {:?}", report.unfinished);
        assert_eq!(report.summary.trials.ok, TASKS as u32, "{kind:?}");
        assert_eq!(report.summary.variants[0].scored, TASKS as u32, "{kind:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_started_and_stalled_past_the_time_limit_is_the_models_timeout() {
    for kind in KINDS {
        let setup = setup(kind, FaultRates { stalled_answer: 1.0, ..FaultRates::NONE }).await;
        let report = run(&setup).await;
        let results = stored_results(&setup.results);
        assert_eq!(results.len(), TASKS, "{kind:?}: one attempt per trial, not retried: {results:#?}");
        for result in &results {
            assert_eq!(result.outcome, Outcome::TimedOut, "{kind:?}: {result:#?}");
            assert_eq!(result.usage, Default::default(), "{kind:?}: no completed answer, no usage");
        }
        let summary = &report.summary;
        assert_eq!((summary.trials.timed_out, summary.trials.infra_failed), (TASKS as u32, 0), "{kind:?}");
        assert_eq!(summary.variants[0].scored, TASKS as u32, "{kind:?}: scored, as no finding");
        assert!(report.unfinished.is_empty(), "{kind:?}: {:?}", report.unfinished);
    }
}
