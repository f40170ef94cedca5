//! A real, pinned Codex CLI (`@openai/codex` from npm) reviewing sample tasks end to end:
//! installed at its exact version, run in the task's repository behind the metering proxy —
//! inside the network and filesystem sandbox when the tests run as root, as CI does — against
//! the scripted model server over the OpenAI Responses API; its review is parsed, its trajectory
//! classified, its usage priced.

mod common;

use lightsout_scripted::Role;
use serde_json::Value;

const CODEX: &str = "0.171.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_reviews_through_the_proxy_in_the_sandbox() {
    let server = common::keyed_scripted_server().await;
    let dataset = common::sample_dataset();
    let yaml = format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: codex-e2e}}
spec:
  dataset:
    format: crbugbench
    source: "file://{}"
    filter: {{ids: [pyledger-001, tinyq-003]}}
  agent: {{harness: {{name: codex, version: "{CODEX}"}}, timeout: 3m, maxTurns: 10}}
  matrix: {{models: [{{name: gpt-5-mini, provider: p}}], reasoningEfforts: [high]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers: {{p: {{baseUrl: "{}", apiKind: openai-responses, apiKeyEnv: E2E_KEY}}}}
  storage: {{results: "file:///unused"}}
  parallelism: 2
  retries: 0
"#,
        dataset.display(),
        server.base_url()
    );
    let common::E2eRun { results, .. } = common::run_two_trials_per_variant(&yaml, "codex-e2e.yaml").await;

    // The provider saw only the real key; the harness only ever had the dummy one. Codex spoke
    // the Responses API, and nothing else reached the provider.
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.api_key.as_deref() == Some("real-key")), "{requests:?}");
    let agent: Vec<_> = requests.iter().filter(|r| r.role == Some(Role::Agent)).collect();
    assert_eq!(agent.len(), 6, "3 turns per trial: {requests:?}");
    assert!(agent.iter().all(|r| r.path == "/v1/responses" && r.stream && r.status == 200), "{agent:?}");

    for trial in common::walk(results.path(), "result.json") {
        let (dir, result, exchanges) = common::assert_reviewed_trial(&trial, CODEX);
        for line in exchanges.lines() {
            let exchange: Value = serde_json::from_str(line).unwrap();
            let tools: Vec<&Value> = exchange["request"]["tools"].as_array().unwrap().iter().collect();
            assert!(tools.iter().any(|t| t["name"] == "exec_command"), "Codex's shell tool is offered");
            assert!(!tools.iter().any(|t| t["type"] == "web_search"), "web search is switched off: {tools:?}");
        }
        let trajectory = String::from_utf8(
            lightsout_core::compress::decompress(&std::fs::read(dir.join("trajectory.jsonl.zst")).unwrap()).unwrap(),
        )
        .unwrap();
        assert!(
            trajectory.contains("\"name\":\"exec_command\"")
                && trajectory.contains("\"action\":\"write\"")
                && trajectory.contains("review.md"),
            "{trajectory}"
        );

        // Codex's rollout, stored and merged: both commands ran and exited 0.
        let calls = common::assert_session_merged(&dir, &result, "harness-session.jsonl.zst", "\"session_meta\"", &[]);
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls.iter().all(|c| c["id"].as_str().is_some_and(|id| id.starts_with("call_"))), "{calls:?}");

        // Codex's own log: its events as JSON lines, and its last message.
        let stdout = std::fs::read_to_string(dir.join("agent.stdout")).unwrap();
        let kinds: Vec<String> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|e| e["type"].as_str().map(str::to_string))
            .collect();
        assert!(kinds.iter().any(|k| k == "turn.completed"), "{stdout}");
        let last = std::fs::read_to_string(dir.join("harness-codex-last-message.md")).unwrap();
        assert_eq!(last.trim(), "The review is written.");
        assert!(dir.join("verdicts.json").exists());
    }
}

#[path = "../../tests/common/moto.rs"]
mod moto;

/// The issue's "done when": a real pinned harness, results in a real S3-compatible server
/// (moto), its trajectory classified and merged with the harness's own log, its cost priced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_trial_artifacts_land_in_s3() {
    let s3 = moto::Moto::start();
    s3.python("s3.create_bucket(Bucket='results')");
    let server = common::keyed_scripted_server().await;
    let dataset = common::sample_dataset();
    let yaml = format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: codex-s3}}
spec:
  dataset: {{format: crbugbench, source: "file://{}", filter: {{ids: [pyledger-001]}}}}
  agent: {{harness: {{name: codex, version: "{CODEX}"}}, timeout: 3m}}
  matrix: {{models: [{{name: gpt-5-mini, provider: p}}]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers: {{p: {{baseUrl: "{}", apiKind: openai-responses, apiKeyEnv: E2E_KEY}}}}
  storage:
    results: s3://results/lightsout
    s3: {{endpoint: "{}", forcePathStyle: true, region: us-east-1}}
"#,
        dataset.display(),
        server.base_url(),
        s3.endpoint()
    );
    let spool = tempfile::tempdir().unwrap();
    let mut config = common::e2e_config(&yaml, "codex-s3.yaml", spool.path(), common::is_root());
    config.results_uri = None;
    config.env = Box::new(|name| match name {
        "E2E_KEY" => Some("real-key".to_string()),
        "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => Some("test".to_string()),
        _ => None,
    });
    let report = lightsout_worker::local::run_local(config, |_| {}).await.unwrap();
    assert_eq!(report.summary.trials.ok, 1, "{:?}", report.summary.trials);

    let keys = s3.keys();
    let result = keys.iter().find(|k| k.ends_with("/attempt-1/result.json")).expect("result.json in S3");
    let attempt = result.trim_end_matches("result.json");
    for artifact in [
        "review.md",
        "findings.json",
        "trajectory.jsonl.zst",
        "exchanges.jsonl.zst",
        "harness-session.jsonl.zst",
        "verdicts.json",
    ] {
        assert!(keys.contains(&format!("{attempt}{artifact}")), "{artifact} missing from S3: {keys:#?}");
    }
    assert!(keys.contains(&"lightsout/runs/codex-s3/summary.json".to_string()), "{keys:#?}");
    let result: Value = serde_json::from_str(
        &s3.python(&format!("print(s3.get_object(Bucket='results', Key='{result}')['Body'].read().decode())")),
    )
    .unwrap();
    assert!(result["cost_usd"].as_f64().unwrap() > 0.0, "priced: {result}");
    let trajectory = &result["trajectory"];
    assert!(trajectory["tool_calls"].as_u64().unwrap() > 0, "{trajectory}");
    assert!(trajectory["confirmed_tool_calls"].as_u64().unwrap() > 0, "merged with codex's own log: {trajectory}");
}
