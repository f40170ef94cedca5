//! Scoring 100,000 SWE-PRBench records exactly as the reference harness does: the 39 records of
//! the golden kit (`tests/golden/swe-prbench/`, recorded agent and judge answers) repeated to
//! 100,000, each extracted, judged (answer parsing), matched and scored
//! (`swe_prbench::harness::evaluate_record`), then aggregated (`eval_report`). Two figures: the
//! harness's Jaccard similarity (no embedding model) and the golden kit's fixed vectors.
//!
//! Run: `cargo bench -p lightsout-core --bench swe_prbench_harness`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Instant;

use lightsout_core::swe_prbench::harness::agent::DEFAULT_AGENT_MAX_TOKENS;
use lightsout_core::swe_prbench::harness::layout::full_config_name;
use lightsout_core::swe_prbench::harness::{
    eval_report, evaluate_record, judge_output, judge_skipped, run_agent, AgentOutput, BenchmarkLayout, Departures,
    Embedder, EvalInput, JudgeOutput, Scoring, Similarity,
};
use serde_json::Value;

const RECORDS: usize = 100_000;

fn kit() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/swe-prbench")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the golden kit is readable")).expect("golden JSON")
}

struct Vectors(HashMap<String, Vec<f64>>);

impl Embedder for Vectors {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f64>>, String> {
        texts.iter().map(|t| self.0.get(*t).cloned().ok_or_else(|| format!("no vector for {t:?}"))).collect()
    }
}

fn answer(value: Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text),
        other => Err(format!("request failed: {other}")),
    }
}

/// The golden records, extracted and judged from the recorded answers.
fn golden_records() -> Vec<(EvalInput, AgentOutput, JudgeOutput)> {
    let replay = read_json(&kit().join("inputs/replay.json"));
    let mut answers: BTreeMap<(String, String), (VecDeque<Value>, VecDeque<Value>)> = BTreeMap::new();
    for record in replay["records"].as_array().unwrap() {
        let key =
            (record["task_id"].as_str().unwrap().to_string(), full_config_name(record["config"].as_str().unwrap()));
        let queue = |v: &Value| v.as_array().unwrap().iter().cloned().collect::<VecDeque<_>>();
        answers.insert(key, (queue(&record["agent"]), queue(&record["judge"])));
    }
    let dataset = kit().join("inputs/dataset");
    let layout = BenchmarkLayout::new(dataset.join("prs.jsonl"), dataset.join("contexts"), dataset.join("annotations"));
    let configs: Vec<String> = ["A", "B", "C"].map(String::from).to_vec();
    let mut out = Vec::new();
    for task_id in layout.discover_task_ids(&configs).unwrap() {
        for config in &configs {
            let input = layout.load_eval_input(&task_id, config).unwrap();
            let (agent_answers, judge_answers) = answers.get_mut(&(task_id.clone(), full_config_name(config))).unwrap();
            let agent = run_agent(&input, DEFAULT_AGENT_MAX_TOKENS, |_| answer(agent_answers.pop_front().unwrap()));
            let judge = if agent.parse_success {
                let reply = answer(judge_answers.pop_front().unwrap());
                judge_output(
                    reply.as_deref().map_err(Clone::clone),
                    &agent,
                    &input.human_comments,
                    &Departures::default(),
                )
            } else {
                judge_skipped(&input.human_comments)
            };
            out.push((input, agent, judge));
        }
    }
    out
}

fn bench(name: &str, records: &[(EvalInput, AgentOutput, JudgeOutput)], similarity: Similarity) {
    let scoring = Scoring::harness(similarity, "agent::judge=judge");
    let started = Instant::now();
    let results: Vec<_> = (0..RECORDS)
        .map(|i| {
            let (input, agent, judge) = &records[i % records.len()];
            evaluate_record(input, agent, judge, &scoring)
        })
        .collect();
    let scored = started.elapsed();
    let started = Instant::now();
    let report = eval_report(&results);
    let aggregated = started.elapsed();
    println!(
        "{name}: {RECORDS} records scored in {:.3} s ({:.1} µs/record), aggregated in {:.3} s ({} report rows by config)",
        scored.as_secs_f64(),
        scored.as_secs_f64() * 1e6 / RECORDS as f64,
        aggregated.as_secs_f64(),
        report.by_config.len(),
    );
}

fn main() {
    let started = Instant::now();
    let records = golden_records();
    println!("{} golden records extracted and judged in {:.3} s", records.len(), started.elapsed().as_secs_f64());
    let doc = read_json(&kit().join("inputs/vectors.json"));
    let vectors = Vectors(
        doc["vectors"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(text, v)| (text.clone(), v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()))
            .collect(),
    );
    bench("jaccard", &records, Similarity::Lexical);
    bench("fixed vectors", &records, Similarity::Embeddings(&vectors));
}
