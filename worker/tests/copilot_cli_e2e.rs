//! A real, pinned GitHub Copilot CLI (`@github/copilot` from npm) reviewing sample tasks end to
//! end: installed at its exact version, run offline in the task's repository behind the metering
//! proxy — inside the network and filesystem sandbox when the tests run as root, as CI does —
//! against the scripted model server over OpenAI Chat Completions and over Anthropic Messages
//! (its custom-provider mode, no GitHub sign-in); its review is parsed, its trajectory
//! classified, its usage priced.

mod common;

use lightsout_scripted::Role;
use serde_json::Value;

const COPILOT: &str = "1.0.102";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_cli_reviews_through_the_proxy_in_the_sandbox() {
    let server = common::keyed_scripted_server().await;
    let dataset = common::sample_dataset();
    let yaml = format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: copilot-cli-e2e}}
spec:
  dataset:
    format: crbugbench
    source: "file://{}"
    filter: {{ids: [pyledger-001, tinyq-003]}}
  agent: {{harness: {{name: copilot-cli, version: "{COPILOT}"}}, timeout: 3m}}
  matrix:
    models: [{{name: gpt-5-mini, provider: p}}, {{name: claude-haiku-4-5, provider: a}}]
    reasoningEfforts: [high]
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers:
    p: {{baseUrl: "{base}", apiKind: openai-chat, apiKeyEnv: E2E_KEY}}
    a: {{baseUrl: "{base}", apiKind: anthropic, apiKeyEnv: E2E_KEY}}
  storage: {{results: "file:///unused"}}
  parallelism: 2
  retries: 0
"#,
        dataset.display(),
        base = server.base_url()
    );
    let common::E2eRun { results, report, .. } =
        common::run_two_trials_per_variant(&yaml, "copilot-cli-e2e.yaml").await;
    assert_eq!(report.summary.variants.len(), 2);

    // The provider saw only the real key; the harness only ever had the dummy one. Copilot spoke
    // each provider's API, streamed, and nothing else reached the provider: no GitHub sign-in, no
    // utility calls of its own.
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.api_key.as_deref() == Some("real-key")), "{requests:?}");
    let agent: Vec<_> = requests.iter().filter(|r| r.role == Some(Role::Agent)).collect();
    assert_eq!(agent.len(), 12, "3 turns per trial: {requests:?}");
    assert!(agent.iter().all(|r| r.stream && r.status == 200), "{agent:?}");
    for (path, model) in [("/v1/chat/completions", "gpt-5-mini"), ("/v1/messages", "claude-haiku-4-5")] {
        let calls = agent.iter().filter(|r| r.path == path && r.model.as_deref() == Some(model)).count();
        assert_eq!(calls, 6, "{path}: {agent:?}");
    }

    for trial in common::walk(results.path(), "result.json") {
        let (dir, result, exchanges) = common::assert_reviewed_trial(&trial, COPILOT);
        for (i, line) in exchanges.lines().enumerate() {
            let exchange: Value = serde_json::from_str(line).unwrap();
            // The variant's effort is passed on: as extended thinking over the Messages API,
            // which Copilot asks for only while the answers so far carry thinking blocks (the
            // scripted model's do not).
            let request = &exchange["request"];
            match exchange["path"].as_str() {
                Some("/chat/completions") => assert_eq!(request["reasoning_effort"], "high", "{request}"),
                Some("/messages") if i == 0 => assert_eq!(request["thinking"]["type"], "enabled", "{request}"),
                Some("/messages") => {}
                other => panic!("unexpected path {other:?}"),
            }
            let tools: Vec<&str> = request["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
                .collect();
            assert!(tools.contains(&"bash") && tools.contains(&"read_bash"), "Copilot's shell tools: {tools:?}");
            // Offline mode drops the tools that reach GitHub or the web.
            assert!(!tools.contains(&"web_fetch") && !tools.contains(&"semantic_code_search"), "{tools:?}");
        }
        let trajectory = String::from_utf8(
            lightsout_core::compress::decompress(&std::fs::read(dir.join("trajectory.jsonl.zst")).unwrap()).unwrap(),
        )
        .unwrap();
        assert!(
            trajectory.contains("\"name\":\"bash\"")
                && trajectory.contains("\"action\":\"write\"")
                && trajectory.contains("review.md"),
            "{trajectory}"
        );

        // Copilot's session events, stored and merged: both commands ran and exited 0.
        let calls = common::assert_session_merged(
            &dir,
            &result,
            "harness-session.jsonl.zst",
            "\"tool.execution_complete\"",
            &[],
        );
        assert_eq!(calls.len(), 2, "{calls:?}");

        // Copilot's own log: its events as JSON lines ending with the run's result, and the
        // session as markdown.
        let stdout = std::fs::read_to_string(dir.join("agent.stdout")).unwrap();
        let events: Vec<Value> = stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
        let result_event = events.iter().find(|e| e["type"] == "result").unwrap_or_else(|| panic!("{stdout}"));
        assert_eq!(result_event["exitCode"], 0, "{result_event}");
        assert!(events.iter().any(|e| e["type"] == "assistant.message"), "{stdout}");
        let session = std::fs::read_to_string(dir.join("harness-copilot-session.md")).unwrap();
        assert!(session.contains("The review is written."), "{session}");
        assert!(dir.join("verdicts.json").exists());
    }
}
