//! `run_local` against real scripted model servers on loopback: infrastructure failures are
//! retried and never scored, an interrupted run resumes without duplicates, the run budget stops
//! new trials, and unreadable or unreachable judges are handled as documented.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lightsout_api::validate::parse_run;
use lightsout_core::summary::RunSummary;
use lightsout_model::pricing::PricingTable;
use lightsout_model::RetryPolicy;
use lightsout_scripted::chaos::{ChaosConfig, ChaosServer, FaultRates};
use lightsout_scripted::{Faults, Role, ScriptedConfig, ScriptedServer};
use lightsout_worker::local::{run_local, Event, LocalRun, LocalRunReport};

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/crbugbench.jsonl")
}

/// A run over the first `tasks` sample tasks with one model (provider `agent`) and a judge
/// panel (provider `judge`), each pointed at the given server.
fn run_yaml(agent_url: &str, judge_url: &str, judges: &[&str], extra: &str) -> String {
    let panel: Vec<String> = judges.iter().map(|j| format!("{{name: {j}, provider: judge}}")).collect();
    format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: test}}
spec:
  dataset:
    format: crbugbench
    source: "file://{}"
    filter: {{ids: [pyledger-001, pyledger-002, pyledger-004, tinyq-001]}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, timeout: 30s}}
  matrix:
    models: [{{name: gpt-5-mini, provider: agent}}]
  judges:
    panel: [{}]
  providers:
    agent: {{baseUrl: "{agent_url}", apiKind: openai-chat, apiKeyEnv: AGENT_KEY}}
    judge: {{baseUrl: "{judge_url}", apiKind: anthropic, apiKeyEnv: JUDGE_KEY}}
  storage: {{results: "file:///unused"}}
  parallelism: 2
  retries: 2
{extra}
"#,
        sample().display(),
        panel.join(", ")
    )
}

fn config(yaml: &str, results: &Path) -> LocalRun {
    LocalRun {
        run: parse_run(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}")),
        results_uri: Some(format!("file://{}", results.display())),
        pricing: PricingTable::default(),
        env: Box::new(|name| match name {
            "AGENT_KEY" => Some("agent-secret".into()),
            "JUDGE_KEY" => Some("judge-secret".into()),
            _ => None,
        }),
        retry_delay: Duration::from_millis(1),
        model_retry: RetryPolicy {
            attempts: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        model_rate_limits: lightsout_model::RateLimitPolicy::default(),
        provider_stall_timeout: lightsout_model::DEFAULT_STALL_TIMEOUT,
        harness_root: results.join("harnesses"),
        sandbox: None,
        upload_deadline: Duration::from_secs(5),
        offline_models: Some(std::sync::Arc::new(lightsout_scripted::ScriptedModels::default())),
    }
}

async fn server(faults: Faults, key: &str) -> ScriptedServer {
    ScriptedServer::start(ScriptedConfig { expected_api_key: Some(key.into()), faults }).await.unwrap()
}

async fn run(config: LocalRun) -> (LocalRunReport, Vec<Event>) {
    let events = Mutex::new(Vec::new());
    let report = run_local(config, |e| events.lock().unwrap().push(e)).await.unwrap();
    (report, events.into_inner().unwrap())
}

fn result_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "result.json") {
                out.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn only_variant(summary: &RunSummary) -> &lightsout_core::summary::VariantSummary {
    assert_eq!(summary.variants.len(), 1);
    &summary.variants[0]
}

#[tokio::test]
async fn keys_reach_only_their_own_provider_and_trials_are_scored() {
    let agent = server(Faults::default(), "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(
        &agent.base_url(),
        &judge.base_url(),
        &["claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-1"],
        "",
    );
    let (report, _) = run(config(&yaml, dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!((v.trials.ok, v.scored), (4, 4));
    // Keys set, so no built-in server was started; the endpoints are scripted servers all the
    // same, and their answers say so.
    assert!(report.summary.scripted_models, "the answers came from scripted servers");
    assert!(v.recall.contains_key("5"));
    assert!(agent.requests().iter().all(|r| r.api_key.as_deref() == Some("agent-secret") && r.status == 200));
    assert!(agent.requests().iter().all(|r| r.role == Some(Role::Agent)));
    assert!(judge
        .requests()
        .iter()
        .all(|r| r.api_key.as_deref() == Some("judge-secret") && r.role == Some(Role::Judge)));
    // Every finding within k_max × every bug × 3 judges was asked.
    assert!(judge.requests().len() >= 4 * 3);
}

#[tokio::test]
async fn infrastructure_failures_are_retried_as_new_attempts_and_never_scored() {
    let agent = server(Faults { status_every_nth: Some((503, 1)), ..Faults::default() }, "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(&agent.base_url(), &judge.base_url(), &["claude-haiku-4-5"], "");
    let (report, events) = run(config(&yaml, dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!(v.trials.infra_failed, 4);
    assert_eq!(v.trials.ok + v.trials.agent_failed, 0);
    assert_eq!(v.scored, 0, "infrastructure failures are not scored");
    assert!(v.recall.is_empty());
    // retries: 2 → three attempts per trial, each recorded apart.
    let files = result_files(dir.path());
    assert_eq!(files.len(), 12, "{files:?}");
    assert_eq!(files.iter().filter(|f| f.contains("attempt-3")).count(), 4);
    assert_eq!(events.iter().filter(|e| matches!(e, Event::TrialRetried { .. })).count(), 8);
    assert!(judge.requests().is_empty(), "nothing to judge");
}

#[tokio::test]
async fn bad_credentials_are_not_the_models_fault() {
    let agent = server(Faults::default(), "another-key").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(&agent.base_url(), &judge.base_url(), &["claude-haiku-4-5"], "");
    let (report, _) = run(config(&yaml, dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!(v.trials.infra_failed, 4);
    assert_eq!(v.scored, 0);
}

#[tokio::test]
async fn an_interrupted_run_resumes_without_duplicating_a_trial() {
    let agent = server(Faults { delay_ms: 40, ..Faults::default() }, "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(&agent.base_url(), &judge.base_url(), &["claude-haiku-4-5"], "")
        .replace("filter: {ids: [pyledger-001, pyledger-002, pyledger-004, tinyq-001]}", "filter: {}");

    // Stop the run (drop its future, as Ctrl-C does) once two trials have finished.
    let finished = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let (f, s) = (finished.clone(), stop.clone());
    let interrupted = run_local(config(&yaml, dir.path()), move |e| {
        if matches!(e, Event::TrialFinished { .. }) && f.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
            s.notify_one();
        }
    });
    tokio::select! {
        _ = interrupted => panic!("the run finished before it could be interrupted"),
        _ = stop.notified() => {}
    }
    // File writes already handed to tokio's blocking pool finish after the future is dropped (a
    // killed process would not finish them); let them land before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let done_before = result_files(dir.path());
    assert!(done_before.len() >= 2 && done_before.len() < 10, "{done_before:?}");
    let first_contents: Vec<Vec<u8>> = done_before.iter().map(|f| std::fs::read(dir.path().join(f)).unwrap()).collect();

    let (report, events) = run(config(&yaml, dir.path())).await;
    let planned = events.iter().find_map(|e| match e {
        Event::Planned { trials, finished, .. } => Some((*trials, *finished)),
        _ => None,
    });
    assert_eq!(planned, Some((10, done_before.len())));
    let files = result_files(dir.path());
    assert_eq!(files.len(), 10, "one result per trial: {files:?}");
    assert!(files.iter().all(|f| f.contains("attempt-1")));
    for (f, before) in done_before.iter().zip(first_contents) {
        assert_eq!(std::fs::read(dir.path().join(f)).unwrap(), before, "{f} was run again");
    }
    let v = only_variant(&report.summary);
    assert_eq!((v.trials.planned, v.trials.ok, v.trials.pending), (10, 10, 0));
}

#[tokio::test]
async fn the_run_budget_stops_new_trials() {
    let agent = server(Faults::default(), "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(&agent.base_url(), &judge.base_url(), &["claude-haiku-4-5"], "  budget: {maxUSD: 0.000001}")
        .replace("parallelism: 2", "parallelism: 1");
    let (report, events) = run(config(&yaml, dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!(v.trials.ok, 1, "the first trial spends past the budget; no other starts");
    assert_eq!(v.trials.pending, 3);
    assert!(events.iter().any(|e| matches!(e, Event::Notice(n) if n.contains("budget"))));
}

#[tokio::test]
async fn unreadable_judges_are_retried_once_then_counted_as_failed_votes() {
    let agent = server(Faults::default(), "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml =
        run_yaml(&agent.base_url(), &judge.base_url(), &["malformed-judge", "broken-judge", "claude-haiku-4-5"], "");
    let (report, _) = run(config(&yaml, dir.path())).await;
    assert_eq!(only_variant(&report.summary).scored, 4);
    let verdict_files: Vec<PathBuf> =
        result_files(dir.path()).iter().map(|f| dir.path().join(f.replace("result.json", "verdicts.json"))).collect();
    for path in verdict_files {
        let verdicts: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for vote in verdicts["votes"].as_array().unwrap() {
            match vote["judge"].as_str().unwrap() {
                "malformed-judge" => {
                    assert_eq!((vote["attempts"].as_u64(), vote["value"] != "failed"), (Some(2), true))
                }
                "broken-judge" => {
                    assert_eq!((vote["attempts"].as_u64(), vote["value"].as_str()), (Some(2), Some("failed")))
                }
                _ => assert_eq!(vote["attempts"], 1),
            }
        }
        for decision in verdicts["decisions"].as_array().unwrap() {
            assert_eq!(decision["failed"], 1, "the broken judge's vote is failed and left out: {decision}");
        }
    }
}

#[tokio::test]
async fn a_judge_outage_leaves_trials_unjudged_until_the_next_run() {
    let agent = server(Faults::default(), "agent-secret").await;
    let down = server(Faults { status_every_nth: Some((529, 1)), ..Faults::default() }, "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(&agent.base_url(), &down.base_url(), &["claude-haiku-4-5"], "");
    let (report, events) = run(config(&yaml, dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!((v.trials.ok, v.scored), (4, 0), "an outage is never turned into 'no' votes");
    assert_eq!(events.iter().filter(|e| matches!(e, Event::JudgingFailed { .. })).count(), 4);

    // The outage ends; running again judges the stored reviews without reviewing again.
    down.set_faults(Faults::default());
    let agent_calls = agent.requests().len();
    let (report, _) = run(config(&yaml, dir.path())).await;
    assert_eq!(only_variant(&report.summary).scored, 4);
    assert_eq!(agent.requests().len(), agent_calls, "finished reviews are judged, not reviewed again");
}

#[tokio::test]
async fn a_suspended_run_starts_nothing() {
    let agent = server(Faults::default(), "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = run_yaml(&agent.base_url(), &judge.base_url(), &["claude-haiku-4-5"], "  suspend: true");
    let (report, events) = run(config(&yaml, dir.path())).await;
    assert_eq!(only_variant(&report.summary).trials.pending, 4);
    assert!(agent.requests().is_empty());
    assert!(events.iter().any(|e| matches!(e, Event::Notice(n) if n.contains("suspend"))));
}

/// SWE-PRBench's one stricter retry: a model that answers the JSON request in markdown is asked
/// once more; its second answer is the review, both calls are paid for, and the PR is scored
/// with the protocol (not as a parse failure).
#[tokio::test]
async fn swe_prbench_output_that_does_not_parse_is_asked_again_once_with_a_stricter_instruction() {
    let agent = server(Faults::default(), "agent-secret").await;
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/swe-prbench/tasks.jsonl");
    let yaml = |model: &str| {
        format!(
            r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: strict-{model}}}
spec:
  dataset: {{format: swe-prbench, source: "file://{}", sample: {{size: 2, seed: 1}}}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, prompt: {{preset: swe-prbench}}, timeout: 30s}}
  matrix: {{models: [{{name: {model}, provider: agent}}]}}
  judges: {{panel: [{{name: gpt-5, provider: judge}}]}}
  providers:
    agent: {{baseUrl: "{}", apiKind: openai-chat, apiKeyEnv: AGENT_KEY}}
    judge: {{baseUrl: "{}", apiKind: openai-chat, apiKeyEnv: JUDGE_KEY}}
  storage: {{results: "file:///unused"}}
"#,
            tasks.display(),
            agent.base_url(),
            judge.base_url()
        )
    };
    let (tidy, _) = run(config(&yaml("gpt-5-mini"), dir.path())).await;
    let calls_after_tidy = agent.requests().len();
    let (sloppy, _) = run(config(&yaml("gpt-5-mini-sloppy"), dir.path())).await;
    let (tidy, sloppy) = (only_variant(&tidy.summary), only_variant(&sloppy.summary));

    assert_eq!(calls_after_tidy, 2, "one call per PR when the answer parses");
    let sloppy_calls = agent.requests()[calls_after_tidy..].to_vec();
    assert_eq!(sloppy_calls.len(), 4, "two calls per PR when the first answer does not parse");
    assert!(sloppy_calls.iter().all(|r| r.model.as_deref() == Some("gpt-5-mini-sloppy") && r.status == 200));
    let (tidy_swe, sloppy_swe) = (tidy.swe_prbench.as_ref().unwrap(), sloppy.swe_prbench.as_ref().unwrap());
    // The scripted `sloppy` model answers JSON only once told off by the harness's retry suffix:
    // no parse failure means the second call carried it and its answer was scored.
    assert_eq!(sloppy_swe.report.agent_parse_failures, 0, "the retry's JSON answer was scored");
    assert_eq!(sloppy_swe.records, 2);
    assert!(sloppy_swe.composite > 0.0);
    assert_eq!(tidy_swe.report.agent_parse_failures, 0);
    // Both calls are paid for: more input tokens than the tidy model's single calls.
    assert!(sloppy.agent_tokens.input_tokens > tidy.agent_tokens.input_tokens, "{:?}", sloppy.agent_tokens);
}

/// A time limit that runs out while the provider is failing (the client still retrying its 503s)
/// is the provider's doing: infra-failed, never the model's timed-out; so is one that runs out
/// while the provider has sent nothing at all (the scripted server holds every answer 5 s). One
/// that runs out while a healthy provider's model is still answering (its stream started, then
/// stalled, through the chaos layer) is the model's: timed-out.
#[tokio::test]
async fn a_time_limit_spent_on_a_failing_provider_is_infra_and_on_a_slow_answer_timed_out() {
    let failing = server(Faults { status_every_nth: Some((503, 1)), ..Faults::default() }, "agent-secret").await;
    let silent = server(Faults { delay_ms: 5_000, ..Faults::default() }, "agent-secret").await;
    let healthy = server(Faults::default(), "agent-secret").await;
    let slow = ChaosServer::start(ChaosConfig {
        upstream: healthy.base_url(),
        seed: 0,
        rates: FaultRates { stalled_answer: 1.0, ..FaultRates::NONE },
        hang_for: Duration::from_secs(5),
    })
    .await
    .unwrap();
    let judge = server(Faults::default(), "judge-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = |url: &str, name: &str| {
        run_yaml(url, &judge.base_url(), &["claude-haiku-4-5"], "")
            .replace("timeout: 30s", "timeout: 1s")
            .replace("metadata: {name: test}", &format!("metadata: {{name: {name}}}"))
            .replace("retries: 2", "retries: 0")
    };
    let error_of = |run: &str| -> String {
        let results = result_files(dir.path());
        let file = results.iter().find(|f| f.contains(&format!("runs/{run}/"))).unwrap();
        let result: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join(file)).unwrap()).unwrap();
        result["error"].as_str().unwrap().to_string()
    };
    let mut retrying = config(&yaml(&failing.base_url(), "failing"), dir.path());
    // Far more attempts than the time limit allows: only the time limit ends the call.
    retrying.model_retry =
        RetryPolicy { attempts: 100_000, base_delay: Duration::from_millis(20), max_delay: Duration::from_millis(20) };
    let (report, _) = run(retrying).await;
    let v = only_variant(&report.summary);
    assert_eq!((v.trials.infra_failed, v.trials.timed_out, v.scored), (4, 0, 0));
    assert_eq!(report.unfinished.infra_failed, 4, "the run says what is left to finish");
    let error = error_of("failing");
    assert!(
        error.contains("the provider was failing when the 1s time limit ran out") && error.contains("503"),
        "{error}"
    );

    let (report, _) = run(config(&yaml(&silent.base_url(), "silent"), dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!((v.trials.infra_failed, v.trials.timed_out, v.scored), (4, 0, 0));
    let error = error_of("silent");
    assert!(error.contains("the provider sent nothing for"), "{error}");

    let (report, _) = run(config(&yaml(&slow.base_url(), "slow"), dir.path())).await;
    let v = only_variant(&report.summary);
    assert_eq!((v.trials.timed_out, v.trials.infra_failed, v.scored), (4, 0, 4), "timed-out is scored as no finding");
}

/// The `verdicts.json` files under `dir`, parsed.
fn stored_verdicts(dir: &Path) -> Vec<lightsout_core::scoring::Verdicts> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "verdicts.json") {
                out.push(serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap());
            }
        }
    }
    out
}

/// A SWE-PRBench judging that a provider stops mid-way (the judge answered, the embeddings call
/// is refused) leaves the trial unjudged with the judge call's usage counted; the run says so,
/// and running it again judges the trial, counting that usage once more nowhere.
#[tokio::test]
async fn a_swe_prbench_judging_a_provider_stops_is_unjudged_keeps_its_paid_calls_and_a_rerun_finishes_it() {
    use lightsout_core::scoring::Verdicts;

    let agent = server(Faults::default(), "agent-secret").await;
    // The judge answers; the embeddings endpoint, called after it in each judging, is down
    // (nothing listens on its address) until the second run.
    let judge = server(Faults::default(), "judge-secret").await;
    let embeddings_down = server(Faults::default(), "judge-secret").await;
    let (embeddings_addr, embeddings_url) = (embeddings_down.addr(), embeddings_down.base_url());
    embeddings_down.shutdown().await;
    let dir = tempfile::tempdir().unwrap();
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/swe-prbench/tasks.jsonl");
    let yaml = format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: swe-unjudged}}
spec:
  dataset: {{format: swe-prbench, source: "file://{}", sample: {{size: 2, seed: 1}}}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, prompt: {{preset: swe-prbench}}, timeout: 30s}}
  matrix: {{models: [{{name: gpt-5-mini, provider: agent}}]}}
  judges:
    panel: [{{name: gpt-5, provider: judge}}]
    swePrbench: {{embeddings: {{name: text-embedding-3-small, provider: embeddings}}}}
  providers:
    agent: {{baseUrl: "{}", apiKind: openai-chat, apiKeyEnv: AGENT_KEY}}
    judge: {{baseUrl: "{}", apiKind: openai-chat, apiKeyEnv: JUDGE_KEY}}
    embeddings: {{baseUrl: "{}", apiKind: openai-chat, apiKeyEnv: JUDGE_KEY}}
  storage: {{results: "file:///unused"}}
  parallelism: 1
"#,
        tasks.display(),
        agent.base_url(),
        judge.base_url(),
        embeddings_url
    );
    let (first, events) = run(config(&yaml, dir.path())).await;
    assert_eq!((first.unfinished.unjudged, first.unfinished.infra_failed), (2, 0), "{:?}", first.unfinished);
    let failures: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::JudgingFailed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(failures.len(), 2, "{events:?}");
    assert!(failures.iter().all(|e| e.contains("Connection refused")), "{failures:?}");
    let unjudged = stored_verdicts(dir.path());
    assert_eq!(unjudged.len(), 2);
    let kept: Vec<_> = unjudged
        .iter()
        .map(|v| match v {
            Verdicts::SwePrBenchUnjudged(u) => u.spent,
            other => panic!("not unjudged: {other:?}"),
        })
        .collect();
    assert!(kept.iter().all(|m| m.calls == 1 && m.usage.input_tokens > 0), "the first answers were paid for: {kept:?}");
    let kept_tokens: lightsout_model::Usage = kept.iter().map(|m| m.usage).sum();
    assert_eq!(first.summary.tokens.judge, kept_tokens, "the summary counts the paid calls of the stopped judgings");

    let _embeddings = ScriptedServer::start_on(
        embeddings_addr,
        ScriptedConfig { expected_api_key: Some("judge-secret".into()), faults: Faults::default() },
    )
    .await
    .unwrap();
    let (second, _) = run(config(&yaml, dir.path())).await;
    assert!(second.unfinished.is_empty(), "{:?}", second.unfinished);
    let judged = stored_verdicts(dir.path());
    let mut new_tokens = lightsout_model::Usage::default();
    for verdicts in &judged {
        let Verdicts::SwePrBench(pr) = verdicts else { panic!("not judged: {verdicts:?}") };
        assert_eq!(pr.earlier_judging.calls, 1, "the stopped judging's call is carried once");
        new_tokens += pr.metering.usage;
    }
    assert_eq!(second.summary.tokens.judge, kept_tokens + new_tokens, "every judge call counted once");
    assert_eq!(only_variant(&second.summary).scored, 2);
}
