//! A real, pinned Claude Code (`@anthropic-ai/claude-code` from npm) reviewing sample tasks end
//! to end: installed at its exact version, run in the task's repository behind the metering proxy
//! — inside the network and filesystem sandbox when the tests run as root, as CI does — against
//! the scripted model server over the Anthropic Messages API; its review is parsed, its
//! trajectory classified, its usage priced.

mod common;

use std::path::Path;

use lightsout_core::compress::{decompress, TRAJECTORY_ARTIFACT};
use lightsout_scripted::Role;
use serde_json::Value;

const CLAUDE_CODE: &str = "2.1.332";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_reviews_through_the_proxy_in_the_sandbox() {
    let server = common::keyed_scripted_server().await;
    let dataset = common::sample_dataset();
    let yaml = format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: claude-code-e2e}}
spec:
  dataset:
    format: crbugbench
    source: "file://{}"
    filter: {{ids: [pyledger-001, tinyq-003]}}
  agent: {{harness: {{name: claude-code, version: "{CLAUDE_CODE}"}}, timeout: 3m, maxTurns: 10}}
  matrix: {{models: [{{name: claude-sonnet-4-5, provider: p}}], reasoningEfforts: [high]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers: {{p: {{baseUrl: "{}", apiKind: anthropic, apiKeyEnv: E2E_KEY}}}}
  storage: {{results: "file:///unused"}}
  parallelism: 2
  retries: 0
"#,
        dataset.display(),
        server.base_url()
    );
    let common::E2eRun { results, .. } = common::run_two_trials_per_variant(&yaml, "claude-code-e2e.yaml").await;

    // The provider saw only the real key; the harness only ever had the dummy one. Claude Code
    // spoke the Messages API, streaming, and nothing else reached the provider: no side calls,
    // no connectivity check.
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.api_key.as_deref() == Some("real-key")), "{requests:?}");
    let agent: Vec<_> = requests.iter().filter(|r| r.role == Some(Role::Agent)).collect();
    assert_eq!(agent.len(), 6, "3 turns per trial: {requests:?}");
    assert!(agent.iter().all(|r| r.path == "/v1/messages" && r.stream && r.status == 200), "{agent:?}");
    assert!(
        agent.iter().all(|r| r.model.as_deref() == Some("claude-sonnet-4-5")),
        "the variant's model, no other: {agent:?}"
    );

    for trial in common::walk(results.path(), "result.json") {
        let (dir, result, exchanges) = common::assert_reviewed_trial(&trial, CLAUDE_CODE);
        for line in exchanges.lines() {
            let exchange: Value = serde_json::from_str(line).unwrap();
            let request = &exchange["request"];
            let tools: Vec<&str> =
                request["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
            assert!(tools.contains(&"Bash"), "Claude Code's shell tool is offered: {tools:?}");
            assert!(!tools.iter().any(|t| t.starts_with("Web")), "web tools are switched off: {tools:?}");
            // High effort: the extended-thinking budget is Claude Code's largest.
            assert_eq!(request["thinking"]["type"], "enabled", "{}", request["thinking"]);
            assert!(request["thinking"]["budget_tokens"].as_u64().unwrap() > 10_000, "{}", request["thinking"]);
        }
        let trajectory = unpack(&dir.join(TRAJECTORY_ARTIFACT));
        assert!(
            trajectory.contains("\"name\":\"Bash\"")
                && trajectory.contains("\"action\":\"write\"")
                && trajectory.contains("review.md"),
            "{trajectory}"
        );

        // Claude Code's session log, stored and merged: both commands ran and exited 0.
        let calls = common::assert_session_merged(&dir, &result, "harness-session.jsonl.zst", "\"sessionId\"", &[]);
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls.iter().all(|c| c["id"].as_str().is_some_and(|id| id.starts_with("toolu_"))), "{calls:?}");

        // Claude Code's own log: its messages as JSON lines, from its start-up (key from the
        // environment, the pinned version) to its result (the final answer, no error).
        let stdout = std::fs::read_to_string(dir.join("agent.stdout")).unwrap();
        let log: Vec<Value> = stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
        let init = log.iter().find(|e| e["type"] == "system" && e["subtype"] == "init").expect(&stdout);
        assert_eq!(init["apiKeySource"], "ANTHROPIC_API_KEY", "{init}");
        assert_eq!(init["claude_code_version"], CLAUDE_CODE, "{init}");
        assert_eq!(init["permissionMode"], "bypassPermissions", "{init}");
        let outcome = log.iter().rev().find(|e| e["type"] == "result").expect(&stdout);
        assert_eq!((&outcome["subtype"], &outcome["is_error"]), (&Value::from("success"), &Value::from(false)));
        assert_eq!(outcome["result"], "The review is written.");
        assert_eq!(outcome["num_turns"], 3, "{outcome}");
        assert!(dir.join("verdicts.json").exists());
    }
}

/// A compressed JSON-lines artifact, as text.
fn unpack(path: &Path) -> String {
    String::from_utf8(decompress(&std::fs::read(path).unwrap()).unwrap()).unwrap()
}
