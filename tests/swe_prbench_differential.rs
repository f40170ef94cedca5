//! SWE-PRBench through the real run path, against the reference harness's own outputs:
//! `lightsout run` over the golden kit's dataset (`tests/golden/swe-prbench/inputs/dataset`, the
//! benchmark's layout unchanged, configs A, B and C as a matrix axis), its agent and judge calls
//! answered by a server that replays the answers the harness was given — keyed by the exact
//! message the harness sent (SHA-256 from the harness's `calls.jsonl`), so a message of ours that
//! differs by one byte gets no answer — and its embeddings from the kit's fixed vectors. Every
//! per-record field of `verdicts.json` must equal the harness's `eval_results` to 1e-9, and each
//! variant's `swe_prbench.report` the harness's `eval_report.json` over the same records.
//!
//! One record departs by design: the harness's judge call for `kappa__1010` in config C got a
//! provider error and fell back; a provider error is never the model's doing here, so that trial
//! is left unjudged (and compared on the harness's other records). The recorded provider error
//! of `theta__808`'s first agent call is served as a 503, which Lightsout's client retries, as
//! the harness retries the attempt.

mod common;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const AGENT_MODEL: &str = "golden-agent";
const JUDGE_MODEL: &str = "golden-judge";
const EMBEDDING_MODEL: &str = "golden-vectors";
/// The record whose judge call the harness saw fail (see the module docs).
const UNJUDGED: (&str, &str) = ("kappa__1010", "config_C_full_context");

fn kit() -> PathBuf {
    common::repo_root().join("tests/golden/swe-prbench")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// What the replay server answers, by (model, SHA-256 of the user message), in the harness's
/// call order; and the system message each call must carry.
#[derive(Default)]
struct Script {
    answers: HashMap<(String, String), VecDeque<Value>>,
    systems: HashMap<(String, String), String>,
    vectors: HashMap<String, Value>,
    /// What went wrong, for the test's failure message.
    problems: Vec<String>,
    /// Calls for a known message after its recorded answers were used up (the retries of a
    /// call whose recorded answer was a provider error).
    used_up: Vec<String>,
    served: usize,
}

impl Script {
    fn load(run: &str) -> Script {
        let replay = read_json(&kit().join("inputs/replay.json"));
        let records: HashMap<(String, String), &Value> = replay["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| ((r["task_id"].as_str().unwrap().into(), r["config"].as_str().unwrap().into()), r))
            .collect();
        let mut script = Script::default();
        let calls = std::fs::read_to_string(kit().join("outputs").join(run).join("calls.jsonl")).unwrap();
        for line in calls.lines().filter(|l| !l.trim().is_empty()) {
            let call: Value = serde_json::from_str(line).unwrap();
            let record = records[&(call["task_id"].as_str().unwrap().into(), call["config"].as_str().unwrap().into())];
            let kind = call["kind"].as_str().unwrap();
            let answer = record[kind][call["answer_index"].as_u64().unwrap() as usize].clone();
            let key = (call["model"].as_str().unwrap().to_string(), call["user_sha256"].as_str().unwrap().to_string());
            script.systems.insert(key.clone(), call["system_sha256"].as_str().unwrap().to_string());
            script.answers.entry(key).or_default().push_back(answer);
        }
        let vectors = read_json(&kit().join("inputs/vectors.json"));
        script.vectors = vectors["vectors"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        script
    }

    /// The answer to a chat request: `(status, text or error)`.
    fn chat(&mut self, body: &Value) -> (u16, String) {
        let model = body["model"].as_str().unwrap_or_default().to_string();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let of_role = |role: &str| {
            messages.iter().find(|m| m["role"] == role).and_then(|m| m["content"].as_str()).unwrap_or_default()
        };
        let key = (model.clone(), sha256(of_role("user")));
        let system = sha256(of_role("system"));
        let known = self.answers.contains_key(&key);
        match self.answers.get_mut(&key).and_then(VecDeque::pop_front) {
            None if known => {
                self.used_up.push(format!("{model} {}", &of_role("user")[..of_role("user").len().min(60)]));
                (400, "the recorded answers are used up".into())
            }
            None => {
                let user: String = of_role("user").chars().take(120).collect();
                self.problems.push(format!("{model}: no recorded answer for the message starting {user:?}"));
                (400, "no recorded answer for this message".into())
            }
            Some(_) if self.systems.get(&key) != Some(&system) => {
                let start: String = of_role("system").chars().take(80).collect();
                self.problems.push(format!("{model}: the system message differs from the harness's: {start:?}"));
                (400, "wrong system message".into())
            }
            Some(Value::String(text)) => {
                self.served += 1;
                if body["max_completion_tokens"] != 4000 {
                    self.problems.push(format!("{model}: max_completion_tokens {}", body["max_completion_tokens"]));
                }
                (200, text)
            }
            Some(error) => {
                self.served += 1;
                (503, error["error"].as_str().unwrap_or("recorded provider error").to_string())
            }
        }
    }

    fn embeddings(&mut self, body: &Value) -> (u16, Value) {
        let mut data = Vec::new();
        for (index, text) in body["input"].as_array().cloned().unwrap_or_default().iter().enumerate() {
            let Some(vector) = self.vectors.get(text.as_str().unwrap_or_default()) else {
                self.problems.push(format!("no fixed vector for {text}"));
                return (400, json!({"error": {"message": "no vector"}}));
            };
            data.push(json!({"object": "embedding", "index": index, "embedding": vector}));
        }
        (
            200,
            json!({"object": "list", "data": data, "model": EMBEDDING_MODEL, "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
    }
}

/// A minimal HTTP/1.1 server on loopback (one thread a connection, `Connection: close`).
struct ReplayServer {
    port: u16,
    script: Arc<Mutex<Script>>,
}

impl ReplayServer {
    fn start(script: Script) -> ReplayServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let script = Arc::new(Mutex::new(script));
        let shared = script.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let script = shared.clone();
                std::thread::spawn(move || serve(stream, &script));
            }
        });
        ReplayServer { port, script }
    }
}

fn serve(mut stream: TcpStream, script: &Mutex<Script>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
    let respond = |stream: &mut TcpStream, status: u16, content_type: &str, text: &str| {
        let reason = if status == 200 { "OK" } else { "Error" };
        let head = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            text.len()
        );
        let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(text.as_bytes()));
    };
    if path.ends_with("/embeddings") {
        let (status, answer) = script.lock().unwrap().embeddings(&body);
        respond(&mut stream, status, "application/json", &answer.to_string());
        return;
    }
    let (status, text) = script.lock().unwrap().chat(&body);
    if status != 200 {
        respond(&mut stream, status, "application/json", &json!({"error": {"message": text}}).to_string());
        return;
    }
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110});
    if body["stream"] == true {
        let chunk = json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]});
        let last = json!({"object": "chat.completion.chunk", "choices": [], "usage": usage});
        let events = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
        respond(&mut stream, 200, "text/event-stream", &events);
    } else {
        let answer = json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], "usage": usage});
        respond(&mut stream, 200, "application/json", &answer.to_string());
    }
}

fn run_file(port: u16, results: &Path, embeddings: bool) -> String {
    let similarity = if embeddings {
        format!("\n    swePrbench:\n      embeddings: {{name: {EMBEDDING_MODEL}, provider: replay}}")
    } else {
        String::new()
    };
    format!(
        r#"apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata:
  name: golden
spec:
  dataset:
    format: swe-prbench
    source: file://{dataset}
  agent:
    harness: {{name: single-shot, version: "1.0.0"}}
    prompt: {{preset: swe-prbench}}
    timeout: 5m
  matrix:
    models:
      - {{name: {AGENT_MODEL}, provider: replay}}
    contextConfigs: [config_A, config_B, config_C]
  judges:
    panel:
      - {{name: {JUDGE_MODEL}, provider: replay}}{similarity}
  providers:
    replay: {{baseUrl: "http://127.0.0.1:{port}/v1", apiKind: openai-chat, apiKeyEnv: LIGHTSOUT_GOLDEN_KEY}}
  storage:
    results: file://{results}
  parallelism: 4
"#,
        dataset = kit().join("inputs/dataset/prs.jsonl").display(),
        results = results.display(),
    )
}

/// Each stored verdict's `result`, by the harness's file name.
fn our_results(results: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for file in common::files_under(results).into_iter().filter(|f| f.ends_with("verdicts.json")) {
        let verdicts = read_json(&results.join(&file));
        if verdicts["protocol"] != "swe-prbench" {
            continue;
        }
        let result = &verdicts["result"];
        let name = format!(
            "{}_{}_eval.json",
            result["task_id"].as_str().unwrap(),
            lightsout_swe_prbench::harness::layout::full_config_name(verdicts["context_config"].as_str().unwrap())
        );
        out.insert(name, result.clone());
    }
    out
}

/// Every difference between two JSON values, numbers to 1e-9.
fn differences(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            if (a - b).abs() > 1e-9 {
                out.push(format!("{path}: ours {a}, harness {b}"));
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for (key, theirs) in b {
                match a.get(key) {
                    Some(ours) => differences(&format!("{path}.{key}"), ours, theirs, out),
                    None => out.push(format!("{path}.{key}: missing from ours")),
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

fn check_run(run: &str, embeddings: bool) {
    let server = ReplayServer::start(Script::load(run));
    let dir = tempfile::tempdir().unwrap();
    let path =
        common::write_run(dir.path(), "golden.yaml", &run_file(server.port, &dir.path().join("results"), embeddings));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lightsout"))
        .args(["run", "-f", &path])
        .current_dir(common::repo_root())
        .env("LIGHTSOUT_GOLDEN_KEY", "golden")
        .output()
        .unwrap();
    let (out, err) = (common::stdout(&output), common::stderr(&output));
    let errors: Vec<String> = common::files_under(&dir.path().join("results"))
        .into_iter()
        .filter(|f| f.ends_with("result.json"))
        .filter_map(|f| read_json(&dir.path().join("results").join(f))["error"].as_str().map(str::to_string))
        .collect();
    let problems = std::mem::take(&mut server.script.lock().unwrap().problems);
    assert!(problems.is_empty(), "the run's calls differ from the harness's:\n{}", problems.join("\n"));
    let used_up = std::mem::take(&mut server.script.lock().unwrap().used_up);
    assert!(
        !used_up.is_empty() && used_up.iter().all(|u| u.starts_with(JUDGE_MODEL) && u.contains("kappa/io.py")),
        "only the judge call the harness saw fail is asked again: {used_up:?}"
    );
    // Exit 3: the one trial whose judge call the harness saw fail is left unjudged.
    assert_eq!(output.status.code(), Some(3), "stdout:\n{out}\nstderr:\n{err}\ntrial errors: {errors:?}");

    let outputs = kit().join("outputs").join(run);
    let ours = our_results(&dir.path().join("results"));
    let unjudged = format!("{}_{}_eval.json", UNJUDGED.0, UNJUDGED.1);
    let mut failures = Vec::new();
    let mut theirs_all = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(outputs.join("eval_results"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 39, "the harness scored 39 records");
    for name in &names {
        if *name == unjudged {
            assert!(!ours.contains_key(name), "{name} must be left unjudged");
            continue;
        }
        let theirs = read_json(&outputs.join("eval_results").join(name));
        match ours.get(name) {
            Some(ours) => {
                // The harness labels results with its model config's keys (`golden_agent`), a run
                // of Lightsout with the models' names, as `<agent>::judge=<judge>` both.
                assert_eq!(ours["model"], format!("{AGENT_MODEL}::judge={JUDGE_MODEL}"), "{name}");
                assert_eq!(theirs["model"], "golden_agent::judge=golden_judge", "{name}");
                let mut ours = ours.clone();
                ours["model"] = theirs["model"].clone();
                differences(name, &ours, &theirs, &mut failures)
            }
            None => failures.push(format!("{name}: no verdict of ours")),
        }
        theirs_all.push(serde_json::from_value(theirs).expect("the harness's record reads as an EvalResult"));
    }
    assert_eq!(ours.len(), 38, "{:?}", ours.keys().collect::<Vec<_>>());
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));

    // The aggregates: the harness's report over the same 38 records, cell for cell.
    let summary = read_json(&dir.path().join("results/runs/golden/summary.json"));
    let report = &summary["variants"][0]["swe_prbench"]["report"];
    let expected = serde_json::to_value(lightsout_swe_prbench::harness::eval_report(&theirs_all)).unwrap();
    assert_eq!(report, &expected, "summary.json's report");
    assert_eq!(summary["trials"]["unjudged"], 1);
    assert_eq!(summary["variants"][0]["swe_prbench"]["records"], 38);
    // Without the departing record the report is the harness's own, by construction of the
    // check above; with it, the harness's eval_report.json has one more record per cell.
    let harness_report = read_json(&outputs.join("eval_report.json"));
    assert_eq!(harness_report["total_eval_records"], 39);
}

#[test]
fn the_run_path_reproduces_the_harness_with_fixed_embedding_vectors() {
    check_run("embeddings", true);
}

#[test]
fn the_run_path_reproduces_the_harness_with_its_jaccard_fallback() {
    check_run("lexical", false);
}
