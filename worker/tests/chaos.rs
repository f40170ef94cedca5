//! A provider storm over a whole run: `run_local` with the single-shot harness and a panel of
//! three judges, all calling the scripted model server through the seeded chaos layer
//! (`lightsout_scripted::chaos`): 429s with and without retry headers, 5xx, hangs, garbage
//! bodies, bodies and event streams cut short.
//!
//! The faults are a pure function of the seed and each request, so what the layer served
//! decides every outcome, and the test derives each expected outcome from the layer's log:
//! - each trial attempt is one model call; it fails when the client's retry budgets run out
//!   (`attempts` for 5xx/hangs/garbage/truncation, the rate-limit budget for 429s, set small so
//!   that 429s alone fail some calls): the attempt is
//!   `infra-failed` (never timed-out or no-findings), and the trial is retried as infrastructure;
//! - each judge vote is present when its call got an answer, else recorded missing with its
//!   error, and asked again (only it) on the next run;
//! - the tokens in the summary are exactly the usage of the answers the layer let through;
//! - running again finishes every infra-failed and unjudged trial.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use lightsout_api::validate::parse_run;
use lightsout_core::judge::VoteValue;
use lightsout_core::scoring::Verdicts;
use lightsout_core::trial::{Outcome, TrialResult};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{RateLimitPolicy, RetryPolicy, Usage};
use lightsout_scripted::chaos::{fault_for, ChaosConfig, ChaosRequest, ChaosServer, Fault, FaultRates};
use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use lightsout_worker::local::{run_local, LocalRun, LocalRunReport};
use serde_json::Value;

const TASKS: usize = 220;
const SEED: u64 = 16;
const JUDGES: [&str; 3] = ["claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-1"];
/// The model client's budget of attempts ending in a failure other than 429.
const ATTEMPTS: u32 = 2;
/// How many 429s one call accepts: small, so that in a 20% storm some calls run out of it
/// (0.2³ ≈ 1% of calls) and end as failures like the others.
const RATE_LIMITED_ATTEMPTS: u32 = 3;
const STORM: FaultRates = FaultRates {
    rate_limited: 0.20,
    server_error: 0.10,
    hang: 0.03,
    garbage: 0.05,
    truncated_body: 0.04,
    truncated_sse: 0.04,
    stalled_answer: 0.0,
};

/// A CRBugBench dataset of `TASKS` tasks, each with a two-line diff (the scripted model's two
/// findings) and one bug, every text naming its task so the layer's log can be read back.
fn write_dataset(dir: &Path) -> std::path::PathBuf {
    let lines: Vec<String> = (0..TASKS)
        .map(|i| {
            let diff = format!(
                "diff --git a/src/m{i}.rs b/src/m{i}.rs\n--- a/src/m{i}.rs\n+++ b/src/m{i}.rs\n@@ -1,2 +1,4 @@\n fn a() {{}}\n+let chaos_left_{i} = read({i});\n+let chaos_right_{i} = write({i});\n fn b() {{}}\n"
            );
            serde_json::json!({
                "task_id": format!("chaos-task-{i:03}"),
                "repo": "chaos/repo",
                "title": format!("chaos-task-{i:03}: change module {i}"),
                "description": format!("Changes module {i}."),
                "diff": diff,
                "track": "pre-merge",
                "bugs": [{"description": format!("chaos-bug-{i:03}: write({i}) runs before read({i}) finishes"), "file": format!("src/m{i}.rs"), "line": 3}],
            })
            .to_string()
        })
        .collect();
    let path = dir.join("chaos.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn run_yaml(dataset: &Path, url: &str) -> String {
    let panel: Vec<String> = JUDGES.iter().map(|j| format!("{{name: {j}, provider: judge}}")).collect();
    format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: chaos}}
spec:
  dataset: {{format: crbugbench, source: "file://{}"}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, timeout: 60s}}
  matrix: {{models: [{{name: gpt-5-mini, provider: agent}}]}}
  judges: {{panel: [{}], k: [1, 5]}}
  providers:
    agent: {{baseUrl: "{url}", apiKind: openai-chat, apiKeyEnv: CHAOS_KEY}}
    judge: {{baseUrl: "{url}", apiKind: anthropic, apiKeyEnv: CHAOS_KEY}}
  storage: {{results: "file:///unused"}}
  parallelism: 8
  retries: 1
"#,
        dataset.display(),
        panel.join(", ")
    )
}

fn config(yaml: &str, results: &Path) -> LocalRun {
    LocalRun {
        run: parse_run(yaml, "chaos.yaml").unwrap_or_else(|e| panic!("{e}")),
        results_uri: Some(format!("file://{}", results.display())),
        pricing: PricingTable::default(),
        env: Box::new(|name| (name == "CHAOS_KEY").then(|| "secret".to_string())),
        retry_delay: Duration::from_millis(1),
        model_retry: RetryPolicy {
            attempts: ATTEMPTS,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
        },
        model_rate_limits: RateLimitPolicy {
            rate_limited_attempts: RATE_LIMITED_ATTEMPTS,
            ..RateLimitPolicy::default()
        },
        // Short, so a hang costs the test little (the layer holds a hang far longer), yet far
        // above the scripted server's answer time. An answer that is slower all the same is
        // logged as abandoned, and the checks count it as the stall the client saw.
        provider_stall_timeout: Duration::from_secs(1),
        harness_root: results.join("harnesses"),
        sandbox: None,
        upload_deadline: Duration::from_secs(10),
        offline_models: Some(std::sync::Arc::new(lightsout_scripted::ScriptedModels::default())),
    }
}

/// Every string in a JSON value, concatenated: a request's prompt text.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join("\n"),
        Value::Object(map) => map.values().map(text_of).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// What one request met: a fault, an answer, or neither (forwarded, but the client hung up
/// before the answer came: to the client, a stall like a hang).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Served {
    Fault(Fault),
    Answer,
    Abandoned,
}

fn served(request: &ChaosRequest) -> Served {
    match (request.fault, request.status) {
        (Some(fault), _) => Served::Fault(fault),
        (None, Some(_)) => Served::Answer,
        (None, None) => Served::Abandoned,
    }
}

/// How the model client turns what one request was served, in order, into calls: each call ends
/// at an answer (success) or when a retry budget runs out (failure). `Err` when the sequence
/// stops in the middle of a call (the client gave up early).
fn calls_of(served: &[Served]) -> Result<Vec<bool>, String> {
    let (mut calls, mut failures, mut rate_limited) = (Vec::new(), 0, 0);
    for fault in served {
        let ended = match fault {
            Served::Answer => Some(true),
            Served::Fault(f) if f.is_rate_limit() => {
                rate_limited += 1;
                (rate_limited >= RATE_LIMITED_ATTEMPTS).then_some(false)
            }
            Served::Fault(_) | Served::Abandoned => {
                failures += 1;
                (failures >= ATTEMPTS).then_some(false)
            }
        };
        if let Some(success) = ended {
            calls.push(success);
            (failures, rate_limited) = (0, 0);
        }
    }
    if failures + rate_limited > 0 {
        return Err(format!("the sequence {served:?} stops in the middle of a call"));
    }
    Ok(calls)
}

/// Each stored attempt's result, by trial directory, attempts in order.
fn stored_results(results: &Path) -> BTreeMap<String, Vec<(TrialResult, Option<Verdicts>)>> {
    let mut trials: BTreeMap<String, Vec<(TrialResult, Option<Verdicts>)>> = BTreeMap::new();
    let mut stack = vec![results.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "result.json") {
                let result: TrialResult = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                let verdicts = std::fs::read(path.with_file_name("verdicts.json"))
                    .ok()
                    .map(|bytes| serde_json::from_slice::<Verdicts>(&bytes).unwrap());
                trials.entry(result.task_id.clone()).or_default().push((result, verdicts));
            }
        }
    }
    for attempts in trials.values_mut() {
        attempts.sort_by_key(|(r, _)| r.attempt);
    }
    trials
}

/// What a fault led to, for the table in the test's output.
#[derive(Default)]
struct FaultTally {
    served: u32,
    /// Calls that met this fault and still got an answer (the client's retries).
    recovered_calls: u32,
    /// Calls that met it and failed: an infra-failed trial attempt, or a missing judge vote.
    failed_calls: u32,
}

/// Checks everything the stored results say against what the layer served, and returns how many
/// trials are infra-failed and unjudged.
fn check_against_the_layer(log: &[ChaosRequest], results: &Path, report: &LocalRunReport) -> (u32, u32) {
    let rates_checked =
        log.iter().all(|r| r.fault.is_none() || r.fault == fault_for(SEED, &STORM, &r.key, r.occurrence));
    assert!(rates_checked, "every fault served is the seed's");
    let mut by_key: HashMap<&str, Vec<&ChaosRequest>> = HashMap::new();
    for request in log {
        by_key.entry(request.key.as_str()).or_default().push(request);
    }
    let calls_by_key: HashMap<&str, Vec<bool>> = by_key
        .iter()
        .map(|(key, requests)| {
            let served: Vec<Served> = requests.iter().map(|r| served(r)).collect();
            (*key, calls_of(&served).unwrap_or_else(|e| panic!("{e}")))
        })
        .collect();
    let texts: HashMap<&str, String> = by_key.iter().map(|(key, r)| (*key, text_of(&r[0].body))).collect();
    let model_of = |key: &str| by_key[key][0].body["model"].as_str().unwrap_or_default().to_string();
    // Requests by the task they name: agents' by the title's `chaos-task-NNN`, judges' by the
    // bug's `chaos-bug-NNN` (and their model).
    let number_after = |text: &str, marker: &str| -> Option<String> {
        let at = text.find(marker)? + marker.len();
        text.get(at..at + 3).map(str::to_string)
    };
    let mut agent_requests: HashMap<String, Vec<&str>> = HashMap::new();
    let mut judge_requests: HashMap<(String, String), Vec<&str>> = HashMap::new();
    for (key, text) in &texts {
        let model = model_of(key);
        if JUDGES.contains(&model.as_str()) {
            let task = number_after(text, "chaos-bug-").expect("a judge request names its bug");
            judge_requests.entry((model, task)).or_default().push(key);
        } else {
            let task = number_after(text, "chaos-task-").expect("an agent request names its task");
            agent_requests.entry(task).or_default().push(key);
        }
    }

    let stored = stored_results(results);
    assert_eq!(stored.len(), TASKS, "every trial has a result");
    let (mut infra_failed, mut unjudged) = (0, 0);
    let mut tokens = Usage::default();
    for (task, attempts) in &stored {
        // The agent's one request (the same prompt on every attempt).
        let number = &task["chaos-task-".len()..];
        let agent_keys = &agent_requests[number];
        assert_eq!(agent_keys.len(), 1, "{task}: one agent request");
        let calls = &calls_by_key[agent_keys[0]];
        let outcomes: Vec<Outcome> = attempts.iter().map(|(r, _)| r.outcome).collect();
        let expected: Vec<Outcome> =
            calls.iter().map(|ok| if *ok { Outcome::Ok } else { Outcome::InfraFailed }).collect();
        assert_eq!(outcomes, expected, "{task}: one attempt per call, infra-failed exactly when the call failed");
        for (result, _) in attempts {
            tokens += result.usage;
            if result.outcome == Outcome::InfraFailed {
                assert!(result.error.as_deref().is_some_and(|e| !e.is_empty()), "{task}: the error is recorded");
            }
        }
        let (last, verdicts) = attempts.last().unwrap();
        if last.outcome == Outcome::InfraFailed {
            infra_failed += 1;
            continue;
        }
        let Some(Verdicts::CrBugBench(panel)) = verdicts else { panic!("{task}: an ok review is judged") };
        tokens += panel.usage;
        let findings: Value = serde_json::from_slice(
            &std::fs::read(results.join(format!(
                "runs/chaos/{}/{}/attempt-{}/findings.json",
                last.variant_id, last.trial_id, last.attempt
            )))
            .unwrap(),
        )
        .unwrap();
        let finding_body = |rank: u32| -> String {
            findings["findings"].as_array().unwrap().iter().find(|f| f["rank"] == rank).unwrap()["body"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(panel.votes.len(), 2 * JUDGES.len(), "{task}: two findings × one bug × three judges");
        for vote in &panel.votes {
            let body = finding_body(vote.rank);
            let keys: Vec<&str> = judge_requests[&(vote.judge.clone(), number.to_string())]
                .iter()
                .filter(|key| texts[**key].contains(&body))
                .copied()
                .collect();
            assert_eq!(keys.len(), 1, "{task}: one request for the vote of {} on rank {}", vote.judge, vote.rank);
            let calls = &calls_by_key[keys[0]];
            let (last_call, earlier) = calls.split_last().expect("the vote was asked");
            assert!(earlier.iter().all(|ok| !ok), "{task}: a vote is asked again only while missing: {calls:?}");
            if *last_call {
                assert!(matches!(vote.value, VoteValue::Yes | VoteValue::No), "{task}: answered, so present: {vote:?}");
            } else {
                assert_eq!(vote.value, VoteValue::Missing, "{task}: {vote:?}");
                assert!(!vote.error.is_empty(), "{task}: a missing vote records why");
            }
        }
        assert_eq!(panel.missing_votes as usize, panel.votes.iter().filter(|v| v.value == VoteValue::Missing).count());
        if !panel.is_complete() {
            unjudged += 1;
        }
    }

    let let_through: Usage = log.iter().map(|r| r.usage).sum();
    assert_eq!(tokens, let_through, "every answer let through is counted once, in its attempt's result or verdicts");
    let summary = &report.summary;
    assert_eq!(summary.tokens.agent + summary.tokens.judge, let_through, "the summary's tokens are the answers'");
    assert_eq!(summary.trials.infra_failed, infra_failed);
    assert_eq!(summary.trials.unjudged, unjudged);
    assert_eq!(
        (report.unfinished.infra_failed, report.unfinished.unjudged, report.unfinished.pending),
        (infra_failed, unjudged, 0)
    );
    (infra_failed, unjudged)
}

/// The rows of [`fault_table`] for calls that failed because their 429s ran out of the budget:
/// an agent's (an infra-failed attempt) and a judge's (a missing vote).
const AGENT_RATE_LIMIT_EXHAUSTED: &str = "429 budget out: agent";
const JUDGE_RATE_LIMIT_EXHAUSTED: &str = "429 budget out: judge";

fn fault_table(log: &[ChaosRequest]) -> BTreeMap<String, FaultTally> {
    let mut table: BTreeMap<String, FaultTally> = BTreeMap::new();
    let mut by_key: HashMap<&str, Vec<Served>> = HashMap::new();
    let mut judged_keys = std::collections::HashSet::new();
    for request in log {
        by_key.entry(request.key.as_str()).or_default().push(served(request));
        if JUDGES.contains(&request.body["model"].as_str().unwrap_or_default()) {
            judged_keys.insert(request.key.as_str());
        }
        if let Some(fault) = request.fault {
            table.entry(fault.name()).or_default().served += 1;
        }
    }
    for (key, served) in &by_key {
        let (mut start, calls) = (0, calls_of(served).unwrap());
        // Walk the sequence call by call: each call's faults are those up to its end.
        let mut ends = Vec::new();
        let (mut failures, mut rate_limited) = (0, 0);
        for (i, fault) in served.iter().enumerate() {
            let ended = match fault {
                Served::Answer => true,
                Served::Fault(f) if f.is_rate_limit() => {
                    rate_limited += 1;
                    rate_limited >= RATE_LIMITED_ATTEMPTS
                }
                Served::Fault(_) | Served::Abandoned => {
                    failures += 1;
                    failures >= ATTEMPTS
                }
            };
            if ended {
                ends.push(i);
                (failures, rate_limited) = (0, 0);
            }
        }
        for (end, ok) in ends.into_iter().zip(calls) {
            if !ok && matches!(served[end], Served::Fault(f) if f.is_rate_limit()) {
                let row =
                    if judged_keys.contains(key) { JUDGE_RATE_LIMIT_EXHAUSTED } else { AGENT_RATE_LIMIT_EXHAUSTED };
                table.entry(row.into()).or_default().failed_calls += 1;
            }
            let mut met: Vec<String> = served[start..=end]
                .iter()
                .filter_map(|s| match s {
                    Served::Fault(f) => Some(f.name()),
                    Served::Abandoned => Some("slow answer (client stalled)".into()),
                    Served::Answer => None,
                })
                .collect();
            met.sort();
            met.dedup();
            for name in met {
                let tally = table.entry(name).or_default();
                if ok {
                    tally.recovered_calls += 1;
                } else {
                    tally.failed_calls += 1;
                }
            }
            start = end + 1;
        }
    }
    table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_storm_is_classified_retried_and_metered_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = write_dataset(dir.path());
    let scripted =
        ScriptedServer::start(ScriptedConfig { expected_api_key: Some("secret".into()), faults: Faults::default() })
            .await
            .unwrap();
    let chaos = ChaosServer::start(ChaosConfig {
        upstream: scripted.base_url(),
        seed: SEED,
        rates: STORM,
        hang_for: Duration::from_secs(20),
    })
    .await
    .unwrap();
    let yaml = run_yaml(&dataset, &chaos.base_url());
    let results = dir.path().join("results");

    let events = Mutex::new(Vec::new());
    let run = || run_local(config(&yaml, &results), |e| events.lock().unwrap().push(e));
    let first = run().await.unwrap();
    let (infra_failed, unjudged) = check_against_the_layer(&chaos.requests(), &results, &first);
    let table = fault_table(&chaos.requests());
    println!("after the first run: {infra_failed} infra-failed, {unjudged} unjudged of {TASKS} trials");
    println!("{:<20} {:>7} {:>10} {:>8}", "fault", "served", "recovered", "failed");
    for (name, tally) in &table {
        println!("{name:<20} {:>7} {:>10} {:>8}", tally.served, tally.recovered_calls, tally.failed_calls);
    }
    // The seed gives a storm that exercises every path.
    assert!(infra_failed > 0 && unjudged > 0, "{infra_failed} infra-failed, {unjudged} unjudged");
    for fault in [
        "429 retry-after",
        "429 retry-after-ms",
        "429 no header",
        "hang",
        "garbage body",
        "truncated body",
        "truncated SSE",
    ] {
        let tally = table.get(fault).unwrap_or_else(|| panic!("{fault} was never served"));
        assert!(tally.recovered_calls > 0, "{fault}: some call recovered from it");
    }
    for fault in [
        "hang",
        "garbage body",
        "truncated body",
        "truncated SSE",
        AGENT_RATE_LIMIT_EXHAUSTED,
        JUDGE_RATE_LIMIT_EXHAUSTED,
    ] {
        assert!(table[fault].failed_calls > 0, "{fault}: some call failed on it");
    }
    assert!(!first.unfinished.is_empty());

    // Running again in the same storm retries the infra-failed trials and asks the missing
    // votes; once the storm ends, one more run finishes everything.
    let second = run().await.unwrap();
    check_against_the_layer(&chaos.requests(), &results, &second);
    chaos.set_rates(FaultRates::NONE);
    let third = run().await.unwrap();
    check_against_the_layer(&chaos.requests(), &results, &third);
    assert!(third.unfinished.is_empty(), "{:?}", third.unfinished);
    assert_eq!(third.summary.trials.ok, TASKS as u32);
    assert_eq!(third.summary.variants[0].scored, TASKS as u32);
}
