//! A real, pinned agent harness (mini-swe-agent from PyPI) reviewing sample tasks end to end:
//! installed at its exact version, run in the task's repository behind the metering proxy —
//! inside the network and filesystem sandbox when the tests run as root, as CI does — against
//! the scripted model server; its review is parsed, its trajectory classified, its usage priced.

mod common;

const MINI_SWE_AGENT: &str = "2.4.6";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mini_swe_agent_reviews_through_the_proxy_in_the_sandbox() {
    let server = common::keyed_scripted_server().await;
    let dataset = common::sample_dataset();
    let yaml = format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: e2e}}
spec:
  dataset:
    format: crbugbench
    source: "file://{}"
    filter: {{ids: [pyledger-001, tinyq-003]}}
  agent: {{harness: {{name: mini-swe-agent, version: "{MINI_SWE_AGENT}"}}, timeout: 3m, maxTurns: 10}}
  matrix: {{models: [{{name: gpt-5-mini, provider: p}}], reasoningEfforts: [high]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers: {{p: {{baseUrl: "{}", apiKind: openai-chat, apiKeyEnv: E2E_KEY}}}}
  storage: {{results: "file:///unused"}}
  parallelism: 2
  retries: 0
"#,
        dataset.display(),
        server.base_url()
    );
    let common::E2eRun { results, .. } = common::run_two_trials_per_variant(&yaml, "e2e.yaml").await;

    // The provider saw only the real key; the harness only ever had the dummy one.
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.api_key.as_deref() == Some("real-key")), "{requests:?}");
    assert!(
        requests.iter().filter(|r| r.role == Some(lightsout_scripted::Role::Agent)).count() >= 6,
        "3 turns per trial"
    );

    for trial in common::walk(results.path(), "result.json") {
        let (dir, result, _) = common::assert_reviewed_trial(&trial, MINI_SWE_AGENT);
        let trajectory = String::from_utf8(
            lightsout_core::compress::decompress(&std::fs::read(dir.join("trajectory.jsonl.zst")).unwrap()).unwrap(),
        )
        .unwrap();
        assert!(trajectory.contains("\"action\":\"write\"") && trajectory.contains("review.md"), "{trajectory}");
        // The harness's own log, its trajectory, is stored (once) and merged: the two commands
        // exited 0; the submit command ends the run, and mini-swe-agent records it as not run.
        assert!(!dir.join("harness-mini-swe-agent-trajectory.json").exists(), "stored once, compressed");
        let calls = common::assert_session_merged(
            &dir,
            &result,
            "harness-session.json.zst",
            "\"trajectory_format\"",
            &["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
        );
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert!(dir.join("verdicts.json").exists());
    }
}
