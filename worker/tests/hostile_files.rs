//! A hostile agent leaves something other than a review in `review.md`: a symbolic link to the
//! worker's environment, to `/etc/shadow` or to the hidden dataset; a FIFO; a 1 GB sparse file;
//! a directory. The real mini-swe-agent harness does it (from PyPI, in the sandbox when root, as
//! CI runs), told to by the scripted model. Each such trial must end `agent-failed` naming the
//! file and what was wrong, the run must go on (a FIFO must not block it) and finish a normal
//! trial beside them, and no secret of the worker's environment — provider, judge and storage
//! keys — may appear anywhere in the stored results.
//!
//! `/proc/self/environ` holds the environment a process started with, so the run happens in a
//! child process of this test started with the secrets in its environment; the test then reads
//! what the child stored.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use lightsout_scripted::{ScriptedConfig, ScriptedServer, SCRIPTED_COMMAND_MARKER};
use lightsout_worker::local::run_local;
use serde_json::Value;

const MINI_SWE_AGENT: &str = "2.4.6";
const TEST_NAME: &str = "hostile_review_files_fail_their_trial_and_leak_nothing";
/// Set in the child process: where to store its results, and the dataset to run.
const CHILD_RESULTS: &str = "LIGHTSOUT_HOSTILE_RESULTS";
const CHILD_DATASET: &str = "LIGHTSOUT_HOSTILE_DATASET";
/// The run's cap on an agent file (`agent.maxFileBytes`).
const MAX_FILE_BYTES: u64 = 4 << 20;

const SYMLINK: &str = "repo/review.md: is a symbolic link or lies under one, which is not followed";

/// Each attack: the task id suffix, the command the agent runs instead of writing its review, and
/// the refusal its trial must record. `{dataset}` is the hidden dataset file.
const ATTACKS: &[(&str, &str, &str)] = &[
    ("environ", "ln -s /proc/self/environ review.md", SYMLINK),
    ("shadow", "ln -s /etc/shadow review.md", SYMLINK),
    ("dataset", "ln -s {dataset} review.md", SYMLINK),
    ("fifo", "mkfifo review.md", "repo/review.md: is a FIFO, not a regular file"),
    (
        "huge",
        "truncate -s 1G review.md",
        "repo/review.md: 1073741824 bytes, over the 4194304-byte limit (agent.maxFileBytes)",
    ),
    ("directory", "mkdir review.md", "repo/review.md: is a directory, not a regular file"),
];

fn random_secret(kind: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{kind}-{}", lightsout_api::hash::sha256_hex(format!("{kind}{nanos}").as_bytes()))
}

/// The sample dataset's first task, once as it is and once per attack (its description ending
/// with the scripted agent's command), beside the sample repositories.
fn write_dataset(dir: &Path) -> PathBuf {
    let sample = common::sample_dataset();
    let line = std::fs::read_to_string(&sample).unwrap().lines().next().unwrap().to_string();
    let task: Value = serde_json::from_str(&line).unwrap();
    let dataset = dir.join("crbugbench.jsonl");
    let mut lines = vec![line];
    for (name, command, _) in ATTACKS {
        let mut hostile = task.clone();
        hostile["task_id"] = format!("{}-{name}", task["task_id"].as_str().unwrap()).into();
        let command = command.replace("{dataset}", dataset.to_str().unwrap());
        hostile["description"] =
            format!("{}\n{SCRIPTED_COMMAND_MARKER} {command}", task["description"].as_str().unwrap()).into();
        lines.push(hostile.to_string());
    }
    std::fs::write(&dataset, lines.join("\n") + "\n").unwrap();
    std::os::unix::fs::symlink(sample.parent().unwrap().join("repos"), dir.join("repos")).unwrap();
    dataset
}

#[test]
fn hostile_review_files_fail_their_trial_and_leak_nothing() {
    if let (Some(results), Some(dataset)) = (std::env::var_os(CHILD_RESULTS), std::env::var_os(CHILD_DATASET)) {
        run_child(Path::new(&results), Path::new(&dataset));
        return;
    }
    let secrets = [
        ("E2E_AGENT_KEY", random_secret("agent")),
        ("E2E_JUDGE_KEY", random_secret("judge")),
        ("AWS_SECRET_ACCESS_KEY", random_secret("s3")),
    ];
    let results = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dataset = write_dataset(data.path());
    let child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_RESULTS, results.path())
        .env(CHILD_DATASET, &dataset)
        .envs(secrets.iter().map(|(k, v)| (k, v)))
        .status()
        .unwrap();
    assert!(child.success(), "the run in the child process failed: {child}");

    let trials = common::walk(results.path(), "result.json");
    assert_eq!(trials.len(), ATTACKS.len() + 1, "{trials:?}");
    let ground_truth =
        serde_json::from_str::<Value>(std::fs::read_to_string(&dataset).unwrap().lines().next().unwrap()).unwrap()
            ["bugs"][0]["description"]
            .as_str()
            .unwrap()
            .to_string();
    let mut refused = Vec::new();
    for trial in &trials {
        let dir = trial.parent().unwrap();
        let result: Value = serde_json::from_slice(&std::fs::read(trial).unwrap()).unwrap();
        let task = result["task_id"].as_str().unwrap();
        let Some((name, _, refusal)) = ATTACKS.iter().find(|(name, _, _)| task.ends_with(&format!("-{name}"))) else {
            // The normal trial beside the attacks is reviewed and judged as ever.
            common::assert_reviewed_trial(trial, MINI_SWE_AGENT);
            assert!(dir.join("verdicts.json").exists(), "judged");
            continue;
        };
        assert_eq!(result["outcome"], "agent-failed", "{name}: {result}");
        assert_eq!(
            result["error"].as_str().unwrap(),
            format!("refused what the agent left: {refusal}"),
            "{name}: {result}"
        );
        assert_eq!(result["findings"], 0, "{name}");
        for artifact in ["review.md", "findings.json", "verdicts.json"] {
            assert!(!dir.join(artifact).exists(), "{name}: {artifact} stored");
        }
        // What the agent did is still stored: its exchanges and its trajectory.
        assert!(dir.join(lightsout_core::compress::EXCHANGES_ARTIFACT).exists(), "{name}");
        assert!(dir.join(lightsout_core::compress::TRAJECTORY_ARTIFACT).exists(), "{name}");
        for file in files_under(dir) {
            let text = readable(&file);
            assert!(!text.contains(&ground_truth), "{name}: the ground truth is in {}", file.display());
        }
        refused.push(*name);
    }
    refused.sort();
    let mut expected: Vec<&str> = ATTACKS.iter().map(|(name, _, _)| *name).collect();
    expected.sort();
    assert_eq!(refused, expected);

    for file in files_under(results.path()) {
        let text = readable(&file);
        for (name, secret) in &secrets {
            assert!(!text.contains(secret.as_str()), "{name} leaked into {}", file.display());
        }
    }
}

/// The run, in the child process whose environment holds the secrets.
fn run_child(results: &Path, dataset: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        // Any non-empty key is accepted: the agent's and the judge's differ.
        let server = ScriptedServer::start(ScriptedConfig::default()).await.unwrap();
        let yaml = format!(
            r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: hostile}}
spec:
  dataset: {{format: crbugbench, source: "file://{}"}}
  agent:
    harness: {{name: mini-swe-agent, version: "{MINI_SWE_AGENT}"}}
    timeout: 3m
    maxTurns: 10
    maxFileBytes: {MAX_FILE_BYTES}
  matrix: {{models: [{{name: gpt-5-mini, provider: agent}}]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: judge}}]}}
  providers:
    agent: {{baseUrl: "{url}", apiKind: openai-chat, apiKeyEnv: E2E_AGENT_KEY}}
    judge: {{baseUrl: "{url}", apiKind: openai-chat, apiKeyEnv: E2E_JUDGE_KEY}}
  storage: {{results: "file:///unused"}}
  parallelism: 2
  retries: 0
"#,
            dataset.display(),
            url = server.base_url()
        );
        let mut config = common::e2e_config(&yaml, "hostile.yaml", results, common::is_root());
        config.env = Box::new(|name| std::env::var(name).ok());
        let report = run_local(config, |event| eprintln!("{event:?}")).await.unwrap();
        let trials = &report.summary.variants[0].trials;
        assert_eq!((trials.ok, trials.agent_failed), (1, ATTACKS.len() as u32), "{trials:?}");
    });
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A stored file as text, decompressed when it is a `.zst` artifact.
fn readable(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let bytes = if path.extension().is_some_and(|e| e == "zst") {
        lightsout_core::compress::decompress(&bytes).unwrap()
    } else {
        bytes
    };
    String::from_utf8_lossy(&bytes).into_owned()
}
