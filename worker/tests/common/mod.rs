//! What the harness end-to-end tests share: the run settings (sandboxed when root, as in CI)
//! and reading their results back.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use lightsout_api::validate::parse_run;
use lightsout_model::pricing::PricingTable;
use lightsout_model::{RateLimitPolicy, RetryPolicy};
use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use lightsout_worker::local::{run_local, Event, LocalRun, LocalRunReport, SandboxCommand};
use serde_json::Value;

/// The scripted model server, accepting only the key the e2e runs set (`real-key`).
pub async fn keyed_scripted_server() -> ScriptedServer {
    ScriptedServer::start(ScriptedConfig { expected_api_key: Some("real-key".into()), faults: Faults::default() })
        .await
        .unwrap()
}

/// The sample CRBugBench dataset's absolute path.
pub fn sample_dataset() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/crbugbench.jsonl").canonicalize().unwrap()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A local run of `yaml` into `results`, with the provider key `real-key` in `E2E_KEY`, the
/// harnesses in their default directory, and this build's sandbox when `sandboxed`.
pub fn e2e_config(yaml: &str, origin: &str, results: &Path, sandboxed: bool) -> LocalRun {
    LocalRun {
        run: parse_run(yaml, origin).unwrap(),
        results_uri: Some(format!("file://{}", results.display())),
        pricing: PricingTable::default(),
        env: Box::new(|name| (name == "E2E_KEY").then(|| "real-key".to_string())),
        retry_delay: Duration::from_millis(10),
        model_retry: RetryPolicy::default(),
        model_rate_limits: RateLimitPolicy::default(),
        provider_stall_timeout: lightsout_model::DEFAULT_STALL_TIMEOUT,
        harness_root: lightsout_worker::harness::default_root(),
        sandbox: sandboxed.then(|| SandboxCommand {
            program: env!("CARGO_BIN_EXE_lightsout-worker").into(),
            leading_args: vec!["sandbox".into()],
        }),
        upload_deadline: Duration::from_secs(30),
        offline_models: Some(std::sync::Arc::new(lightsout_scripted::ScriptedModels::default())),
    }
}

/// One end-to-end run: where its results went, its report and events, and whether it was
/// sandboxed.
pub struct E2eRun {
    pub results: tempfile::TempDir,
    pub report: LocalRunReport,
    pub events: Vec<Event>,
    pub sandboxed: bool,
}

/// Runs `yaml` with [`e2e_config`] (sandboxed when root) and checks that every variant reviewed
/// and scored its two trials with metered, priced usage — showing each trial's error and
/// `agent.stderr` when not — and that a run without the sandbox said so.
pub async fn run_two_trials_per_variant(yaml: &str, origin: &str) -> E2eRun {
    let results = tempfile::tempdir().unwrap();
    let sandboxed = is_root();
    let config = e2e_config(yaml, origin, results.path(), sandboxed);
    let events = std::sync::Mutex::new(Vec::new());
    let report = run_local(config, |e| events.lock().unwrap().push(e)).await.unwrap();
    let events = events.into_inner().unwrap();
    let failures: Vec<String> = walk(results.path(), "result.json")
        .iter()
        .map(|f| {
            let dir = f.parent().unwrap();
            let result: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            let stderr = std::fs::read_to_string(dir.join("agent.stderr")).unwrap_or_default();
            format!("{}\n--- agent.stderr:\n{stderr}", result["error"])
        })
        .collect();
    for v in &report.summary.variants {
        assert_eq!(v.trials.ok, 2, "{:#?}\n{events:#?}\n{}", v.trials, failures.join("\n"));
        assert_eq!(v.scored, 2);
        assert!(v.agent_tokens.output_tokens > 0 && v.spend.agent_usd > 0.0, "usage metered and priced: {v:?}");
    }
    if !sandboxed {
        assert!(events.iter().any(|e| matches!(e, Event::Notice(n) if n.contains("WITHOUT the network sandbox"))));
    }
    E2eRun { results, report, events, sandboxed }
}

/// Checks what every harness's end-to-end trial must show: an ok review of three turns with one
/// write, at least three findings under a `# Review` heading, the version that actually ran, and
/// three recorded exchanges that never hold the provider key. Returns the trial's directory, its
/// `result.json` and its exchanges.
pub fn assert_reviewed_trial(result_file: &Path, version: &str) -> (PathBuf, Value, String) {
    let dir = result_file.parent().unwrap().to_path_buf();
    let result: Value = serde_json::from_slice(&std::fs::read(result_file).unwrap()).unwrap();
    assert_eq!(result["outcome"], "ok", "{result}");
    assert_eq!(result["harness_version_reported"], version, "the version that actually ran");
    assert_eq!(result["trajectory"]["turns"], 3, "{result}");
    assert_eq!(result["trajectory"]["action_mix"]["write"], 1, "{result}");
    assert!(result["findings"].as_u64().unwrap() >= 3, "{result}");
    let review = std::fs::read_to_string(dir.join("review.md")).unwrap();
    assert!(review.starts_with("# Review"), "{review}");
    let exchanges = unpack(&dir.join(lightsout_core::compress::EXCHANGES_ARTIFACT));
    assert_eq!(exchanges.lines().count(), 3);
    assert!(!exchanges.contains("real-key"), "credentials are never recorded");
    (dir, result, exchanges)
}

/// Every file called `name` under `dir`.
pub fn walk(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path, name));
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
    out
}

/// A compressed artifact of a trial, as text.
pub fn unpack(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8(lightsout_core::compress::decompress(&bytes).unwrap()).unwrap()
}

/// Checks that the trial in `dir` stored the harness's own session log (`artifact`, holding
/// `marker`) and merged it into its trajectory: every tool call the proxy saw was confirmed by
/// the harness with exit code 0, but those listed in `unconfirmed` (by command), which the
/// harness recorded without a result. Returns the tool calls.
pub fn assert_session_merged(
    dir: &Path,
    result: &serde_json::Value,
    artifact: &str,
    marker: &str,
    unconfirmed: &[&str],
) -> Vec<serde_json::Value> {
    let session = unpack(&dir.join(artifact));
    assert!(session.contains(marker), "{artifact} is the harness's log: {}", &session[..session.len().min(500)]);
    let trajectory = unpack(&dir.join(lightsout_core::compress::TRAJECTORY_ARTIFACT));
    let calls: Vec<serde_json::Value> = trajectory
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_call")
        .collect();
    assert!(!calls.is_empty(), "{trajectory}");
    for call in &calls {
        assert_eq!(call["source"], "proxy+harness", "{call}");
        if unconfirmed.iter().any(|c| call["command"].as_str() == Some(c)) {
            assert!(call.get("exit_code").is_none() && call.get("is_error").is_none(), "{call}");
        } else {
            assert_eq!((&call["exit_code"], &call["is_error"]), (&0.into(), &false.into()), "{call}");
            assert!(call["output_bytes"].is_u64(), "{call}");
        }
    }
    let summary = &result["trajectory"];
    let confirmed = (calls.len() - unconfirmed.len()) as u64;
    assert_eq!(summary["confirmed_tool_calls"], confirmed, "{summary}");
    assert_eq!(summary["failed_tool_calls"], 0, "{summary}");
    assert_eq!(summary["harness_only_tool_calls"], 0, "{summary}");
    assert!(summary.get("warnings").is_none(), "nothing unreadable: {summary}");
    calls
}
