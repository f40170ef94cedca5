//! Differential test against the SWE-PRBench reference harness: the golden kit in
//! `tests/golden/swe-prbench/` holds the harness's own outputs on a synthetic dataset with
//! recorded agent and judge answers. Fed the same inputs and answers, Lightsout's harness
//! scoring must reproduce every per-record field (numbers to 1e-9), the agent outputs, the
//! judge outputs and every aggregate cell as the harness rounds it.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use lightsout_swe_prbench::harness::agent::{AgentCall, AgentCallKind, DEFAULT_AGENT_MAX_TOKENS};
use lightsout_swe_prbench::harness::judge_diff::{judge_diff_snippet, JUDGE_DIFF_MAX_CHARS};
use lightsout_swe_prbench::harness::judge_message::judge_user_message;
use lightsout_swe_prbench::harness::layout::full_config_name;
use lightsout_swe_prbench::harness::report::eval_result_file_name;
use lightsout_swe_prbench::harness::verdict::JUDGE_MAX_TOKENS;
use lightsout_swe_prbench::harness::{
    eval_report, evaluate_record, judge_output, judge_skipped, run_agent, BenchmarkLayout, Departures, Embedder,
    EvalResult, Scoring, Similarity,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

const MODEL_LABEL: &str = "golden_agent::judge=golden_judge";
const TOLERANCE: f64 = 1e-9;

fn kit() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/swe-prbench")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// `inputs/vectors.json`: fixed vectors standing in for `all-mpnet-base-v2`; a text without a
/// vector is an error, as in the harness's stub.
struct Vectors(HashMap<String, Vec<f64>>);

impl Vectors {
    fn load() -> Vectors {
        let doc = read_json(&kit().join("inputs/vectors.json"));
        let vectors = doc["vectors"].as_object().expect("vectors.json has a vectors object");
        Vectors(
            vectors
                .iter()
                .map(|(text, v)| {
                    let v = v.as_array().expect("a vector is an array").iter().map(|x| x.as_f64().unwrap()).collect();
                    (text.clone(), v)
                })
                .collect(),
        )
    }
}

impl Embedder for Vectors {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f64>>, String> {
        texts.iter().map(|t| self.0.get(*t).cloned().ok_or_else(|| format!("no vector for {t:?}"))).collect()
    }
}

/// The recorded answers of one record, served in call order.
struct Recorded {
    agent: VecDeque<Value>,
    judge: VecDeque<Value>,
}

/// An answer's text, or the error the harness's OpenAI-compatible client reports for it.
fn answer_of(value: Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text),
        Value::Object(error) => {
            let status = error["http_status"].as_i64().expect("an error answer has http_status");
            let message = serde_json::to_string(error["error"].as_str().unwrap_or_default()).unwrap();
            Err(format!("OpenAI-compatible request failed ({status}): {{\"error\": {{\"message\": {message}}}}}"))
        }
        other => panic!("an answer is a string or an error object, not {other}"),
    }
}

fn load_replay() -> BTreeMap<(String, String), Recorded> {
    let doc = read_json(&kit().join("inputs/replay.json"));
    let queue = |v: &Value| v.as_array().expect("answers are a list").iter().cloned().collect::<VecDeque<_>>();
    doc["records"]
        .as_array()
        .expect("replay.json has records")
        .iter()
        .map(|r| {
            let key = (r["task_id"].as_str().unwrap().to_string(), full_config_name(r["config"].as_str().unwrap()));
            (key, Recorded { agent: queue(&r["agent"]), judge: queue(&r["judge"]) })
        })
        .collect()
}

struct Run {
    name: &'static str,
    layout: BenchmarkLayout,
    configs: Vec<String>,
}

fn runs() -> Vec<Run> {
    let dataset = kit().join("inputs/dataset");
    vec![
        Run {
            name: "embeddings",
            layout: BenchmarkLayout::new(
                dataset.join("prs.jsonl"),
                dataset.join("contexts"),
                dataset.join("annotations"),
            ),
            configs: ["A", "config_B", "config_C_full_context"].map(String::from).to_vec(),
        },
        Run {
            name: "lexical",
            layout: BenchmarkLayout::new(
                dataset.join("prs.json"),
                dataset.join("contexts/config_A"),
                dataset.join("annotations"),
            ),
            configs: ["A", "B", "C"].map(String::from).to_vec(),
        },
    ]
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// `calls.jsonl` of a run: the model calls the harness made, per (task, config letter), in order.
fn harness_calls(run: &str) -> BTreeMap<(String, String), Vec<Value>> {
    let path = kit().join("outputs").join(run).join("calls.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut calls: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let call: Value = serde_json::from_str(line).expect("calls.jsonl lines are JSON");
        let key = (call["task_id"].as_str().unwrap().to_string(), call["config"].as_str().unwrap().to_string());
        calls.entry(key).or_default().push(call);
    }
    calls
}

/// Our calls for one record must be the harness's: the same number of agent calls, each the
/// first prompt (the rendered context itself) or the retry prompt (the context and a suffix), with
/// the same token budget; and a judge call exactly when the harness made one, with the same
/// user message (and diff). `judged`: our judge's (diff, user message).
fn check_calls(
    record: &str,
    ours: &[AgentCall],
    judged: Option<(&str, &str)>,
    rendered: &str,
    theirs: &[Value],
    failures: &mut Vec<String>,
) {
    let of_kind = |kind: &str| theirs.iter().filter(move |c| c["kind"] == kind).collect::<Vec<_>>();
    let agent_calls = of_kind("agent");
    if agent_calls.len() != ours.len() {
        failures.push(format!("{record}: {} agent calls, harness {}", ours.len(), agent_calls.len()));
    }
    for (i, (call, theirs)) in ours.iter().zip(&agent_calls).enumerate() {
        let is_first = theirs["user_sha256"] == sha256(rendered).as_str();
        let is_retry = theirs["user_prefix_chars"] == 0 && !is_first;
        let same_kind = match call.kind {
            AgentCallKind::First => is_first,
            AgentCallKind::Retry => is_retry,
        };
        if !same_kind || theirs["max_tokens"] != call.max_tokens {
            failures.push(format!("{record}: agent call {i} is {call:?}, harness {theirs}"));
        }
    }
    let judge_calls = of_kind("judge");
    match (judged, judge_calls.as_slice()) {
        (None, []) => {}
        (Some((diff, message)), [theirs]) => {
            if theirs["judge_diff_sha256"] != sha256(diff).as_str() || theirs["max_tokens"] != JUDGE_MAX_TOKENS {
                failures
                    .push(format!("{record}: judge diff of {} chars differs from the harness's {theirs}", diff.len()));
            }
            if theirs["user_sha256"] != sha256(message).as_str() {
                failures.push(format!("{record}: judge message differs from the harness's:\n{message}"));
            }
        }
        (judged, theirs) => {
            failures.push(format!("{record}: judge called: ours {}, harness {} times", judged.is_some(), theirs.len()))
        }
    }
}

/// Every record of `run`, scored from the recorded answers: (file stem, result, agent output,
/// judge output), in the harness's call order; differences in the calls made go to `failures`.
fn score_run(run: &Run, similarity: Similarity, failures: &mut Vec<String>) -> Vec<(String, EvalResult, Value, Value)> {
    let mut replay = load_replay();
    let calls = harness_calls(run.name);
    let mut out = Vec::new();
    for task_id in run.layout.discover_task_ids(&run.configs).expect("the golden dataset loads") {
        for config in &run.configs {
            let full = full_config_name(config);
            let input = run.layout.load_eval_input(&task_id, config).expect("the golden record loads");
            let recorded = replay
                .get_mut(&(task_id.clone(), full.clone()))
                .unwrap_or_else(|| panic!("no recorded answers for {task_id}/{full}"));
            let agent_answers = RefCell::new(&mut recorded.agent);
            let mut agent_calls = Vec::new();
            let agent = futures::executor::block_on(run_agent(&input, DEFAULT_AGENT_MAX_TOKENS, |call| {
                agent_calls.push(call);
                let next = agent_answers.borrow_mut().pop_front();
                let answer = answer_of(
                    next.unwrap_or_else(|| panic!("{task_id}/{full}: an agent call without a recorded answer")),
                );
                std::future::ready(Ok::<_, std::convert::Infallible>(answer))
            }))
            .unwrap_or_else(|never| match never {});
            let judge = if agent.parse_success {
                let answer = recorded
                    .judge
                    .pop_front()
                    .unwrap_or_else(|| panic!("{task_id}/{full}: a judge call without a recorded answer"));
                let answer = answer_of(answer);
                judge_output(
                    answer.as_deref().map_err(Clone::clone),
                    &agent,
                    &input.human_comments,
                    &Departures::default(),
                )
            } else {
                judge_skipped(&input.human_comments)
            };
            let judged = agent.parse_success.then(|| {
                (judge_diff_snippet(&input.diff_patch, JUDGE_DIFF_MAX_CHARS), judge_user_message(&input, &agent))
            });
            let letter = full.trim_start_matches("config_").chars().next().unwrap().to_string();
            let theirs = calls.get(&(task_id.clone(), letter)).map(Vec::as_slice).unwrap_or_default();
            let record = format!("{}/{task_id}/{full}", run.name);
            let judged = judged.as_ref().map(|(diff, message)| (diff.as_str(), message.as_str()));
            check_calls(&record, &agent_calls, judged, &input.rendered_context, theirs, failures);
            let result = evaluate_record(&input, &agent, &judge, &Scoring::harness(similarity, MODEL_LABEL));
            let stem = format!("{task_id}_{full}");
            out.push((stem, result, serde_json::to_value(&agent).unwrap(), serde_json::to_value(&judge).unwrap()));
        }
    }
    for ((task_id, config), recorded) in replay {
        assert!(
            recorded.agent.is_empty() && recorded.judge.is_empty(),
            "{task_id}/{config}: recorded answers left unused (agent {}, judge {})",
            recorded.agent.len(),
            recorded.judge.len()
        );
    }
    out
}

/// Differences between two JSON values: numbers within [`TOLERANCE`], everything else equal.
fn differences(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            if (a - b).abs() > TOLERANCE {
                out.push(format!("{path}: ours {a}, harness {b}"));
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(&format!("{path}.{key}"), x, y, out),
                    (x, y) => out.push(format!("{path}.{key}: ours {x:?}, harness {y:?}")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: ours {a}, harness {b}")),
    }
}

/// The harness's agent output without the members we do not model (task, config, model).
fn harness_agent_output(path: &Path) -> Value {
    let mut value = read_json(path);
    let map = value.as_object_mut().unwrap();
    for key in ["task_id", "config_name", "model"] {
        map.remove(key);
    }
    value
}

/// The harness's judge output without task, config and judge model, and without the reasoning
/// of provider or parse-error fallbacks (it quotes Python's exception texts).
fn harness_judge_output(path: &Path) -> Value {
    let mut value = read_json(path);
    let map = value.as_object_mut().unwrap();
    for key in ["task_id", "config_name", "judge_model"] {
        map.remove(key);
    }
    value
}

fn without_error_reasoning(judge: &mut Value) {
    for entry in judge["agent_classifications"].as_array_mut().unwrap() {
        let reasoning = entry["reasoning"].as_str().unwrap_or_default();
        if reasoning.starts_with("fallback_due_to_parse_error: ") {
            entry["reasoning"] = Value::String("fallback_due_to_parse_error: …".into());
        }
    }
}

fn check_run(run: &Run, similarity: Similarity) {
    let outputs = kit().join("outputs").join(run.name);
    let mut failures = Vec::new();
    let scored = score_run(run, similarity, &mut failures);
    assert_eq!(scored.len(), 39, "{}: records", run.name);
    for (stem, result, agent, judge) in &scored {
        let theirs = read_json(&outputs.join("eval_results").join(format!("{stem}_eval.json")));
        differences(&format!("{}/{stem}", run.name), &serde_json::to_value(result).unwrap(), &theirs, &mut failures);
        let theirs = harness_agent_output(&outputs.join("agent_outputs").join(format!("{stem}_agent.json")));
        differences(&format!("{}/{stem} agent", run.name), agent, &theirs, &mut failures);
        let mut theirs = harness_judge_output(&outputs.join("judge_outputs").join(format!("{stem}_judge.json")));
        let mut ours = judge.clone();
        without_error_reasoning(&mut theirs);
        without_error_reasoning(&mut ours);
        differences(&format!("{}/{stem} judge", run.name), &ours, &theirs, &mut failures);
    }

    // The report is built from the eval files sorted by name.
    let mut by_file: Vec<(String, EvalResult)> = scored
        .into_iter()
        .map(|(stem, result, _, _)| {
            let (task, config) = stem.split_at(result.task_id.len() + 1);
            (eval_result_file_name(task.trim_end_matches('_'), config), result)
        })
        .collect();
    by_file.sort_by(|a, b| a.0.cmp(&b.0));
    let results: Vec<EvalResult> = by_file.into_iter().map(|(_, r)| r).collect();
    let report = serde_json::to_value(eval_report(&results)).unwrap();
    let mut theirs = read_json(&outputs.join("eval_report.json"));
    let records = theirs.as_object_mut().unwrap().remove("records").unwrap();
    theirs.as_object_mut().unwrap().remove("run_date");
    assert_eq!(records.as_array().unwrap().len(), results.len());
    exact_report_differences(&format!("{} report", run.name), &report, &theirs, &mut failures);
    assert!(failures.is_empty(), "{} differences from the harness:\n{}", failures.len(), failures.join("\n"));
}

/// Aggregates must equal the harness's rounded cells exactly.
fn exact_report_differences(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => {
            if a.as_f64() != b.as_f64() {
                out.push(format!("{path}: ours {a}, harness {b}"));
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => exact_report_differences(&format!("{path}.{key}"), x, y, out),
                    (x, y) => out.push(format!("{path}.{key}: ours {x:?}, harness {y:?}")),
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: ours {a}, harness {b}")),
    }
}

#[test]
fn embeddings_run_matches_the_harness() {
    let vectors = Vectors::load();
    let runs = runs();
    check_run(&runs[0], Similarity::Embeddings(&vectors));
}

#[test]
fn lexical_run_matches_the_harness() {
    let runs = runs();
    check_run(&runs[1], Similarity::Lexical);
}
