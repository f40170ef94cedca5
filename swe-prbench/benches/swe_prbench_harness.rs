//! Scoring 100,000 SWE-PRBench records exactly as the reference harness does: the 39 records of
//! the golden kit (`tests/golden/swe-prbench/`, recorded agent and judge answers) repeated to
//! 100,000, each extracted, judged (answer parsing), matched and scored
//! (`swe_prbench::harness::evaluate_record`), then aggregated (`eval_report`). Two figures: the
//! harness's Jaccard similarity (no embedding model) and the golden kit's fixed vectors.
//!
//! Run: `cargo bench -p lightsout-core --bench swe_prbench_harness`.
//!
//! With `LIGHTSOUT_BENCH_DUMP=PATH` the bench also writes, after timing, the records it scored
//! (the cycle of (task, config, agent output, judge output) that record `i` repeats as
//! `cycle[i % len]`) and every record's `overall_score` under both similarities, so
//! `tests/golden/swe-prbench/tools/bench_harness.py` can time the reference harness on the
//! identical records and check its composites against ours.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Instant;

use lightsout_swe_prbench::harness::agent::DEFAULT_AGENT_MAX_TOKENS;
use lightsout_swe_prbench::harness::layout::full_config_name;
use lightsout_swe_prbench::harness::{
    eval_report, evaluate_record, judge_output, judge_skipped, run_agent, AgentOutput, BenchmarkLayout, Departures,
    Embedder, EvalInput, EvalReport, JudgeOutput, Scoring, Similarity,
};
use serde_json::{json, Value};

const RECORDS: usize = 100_000;
/// `Scoring::harness`'s model label, as the harness writes `<agent>::judge=<judge>`.
const MODEL_LABEL: &str = "agent::judge=judge";

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

/// One golden record: its task and config letter, as the harness's loader takes them, and what
/// the agent and the judge produced.
struct GoldenRecord {
    task_id: String,
    config: String,
    input: EvalInput,
    agent: AgentOutput,
    judge: JudgeOutput,
}

/// The golden records, extracted and judged from the recorded answers.
fn golden_records() -> Vec<GoldenRecord> {
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
            let agent = futures::executor::block_on(run_agent(&input, DEFAULT_AGENT_MAX_TOKENS, |_| {
                std::future::ready(Ok::<_, std::convert::Infallible>(answer(agent_answers.pop_front().unwrap())))
            }))
            .unwrap_or_else(|never| match never {});
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
            out.push(GoldenRecord { task_id: task_id.clone(), config: config.clone(), input, agent, judge });
        }
    }
    out
}

/// CPU seconds this process has used (user + system), from `/proc/self/stat` in USER_HZ = 100
/// ticks; `None` where that file is not there. The bench is single-threaded, so a stage's CPU
/// time is the difference; on a loaded machine it is the figure to compare, not wall time.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name's closing parenthesis start at field 3; utime and stime
    // are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |index: usize| fields.get(index)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

fn cpu_since(start: Option<f64>) -> String {
    match (start, process_cpu_seconds()) {
        (Some(start), Some(now)) => format!("{:.2} s cpu", now - start),
        _ => "cpu n/a".to_string(),
    }
}

/// Scores and aggregates `RECORDS` records, prints the timings and returns every record's
/// `overall_score` and the report.
fn bench(name: &str, records: &[GoldenRecord], similarity: Similarity) -> (Vec<f64>, EvalReport) {
    let scoring = Scoring::harness(similarity, MODEL_LABEL);
    let cpu_started = process_cpu_seconds();
    let started = Instant::now();
    let results: Vec<_> = (0..RECORDS)
        .map(|i| {
            let record = &records[i % records.len()];
            evaluate_record(&record.input, &record.agent, &record.judge, &scoring)
        })
        .collect();
    let scored = started.elapsed();
    let scored_cpu = cpu_since(cpu_started);
    let cpu_started = process_cpu_seconds();
    let started = Instant::now();
    let report = eval_report(&results);
    let aggregated = started.elapsed();
    let aggregated_cpu = cpu_since(cpu_started);
    println!(
        "{name}: {RECORDS} records scored in {:.3} s ({:.1} µs/record; {scored_cpu}), aggregated in {:.3} s \
         ({aggregated_cpu}; {} report rows by config)",
        scored.as_secs_f64(),
        scored.as_secs_f64() * 1e6 / RECORDS as f64,
        aggregated.as_secs_f64(),
        report.by_config.len(),
    );
    (results.iter().map(|result| result.overall_score).collect(), report)
}

/// Writes the scored records, their composites and the reports for the harness-side driver.
fn dump(
    path: &Path,
    records: &[GoldenRecord],
    jaccard: &(Vec<f64>, EvalReport),
    fixed_vectors: &(Vec<f64>, EvalReport),
) {
    let cycle: Vec<Value> = records
        .iter()
        .map(|r| json!({"task_id": r.task_id, "config": r.config, "agent": r.agent, "judge": r.judge}))
        .collect();
    let doc = json!({
        "format": "lightsout-swe-prbench-bench/1",
        "records": RECORDS,
        "model": MODEL_LABEL,
        "cycle": cycle,
        "overall_score": {"jaccard": jaccard.0, "fixed_vectors": fixed_vectors.0},
        "report": {"jaccard": jaccard.1, "fixed_vectors": fixed_vectors.1},
    });
    std::fs::write(path, serde_json::to_string(&doc).expect("the dump serialises"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    println!("records and composites written to {}", path.display());
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
    let jaccard = bench("jaccard", &records, Similarity::Lexical);
    let fixed_vectors = bench("fixed vectors", &records, Similarity::Embeddings(&vectors));
    if let Some(path) = std::env::var_os("LIGHTSOUT_BENCH_DUMP") {
        dump(Path::new(&path), &records, &jaccard, &fixed_vectors);
    }
}
