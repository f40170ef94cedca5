//! Comparison and report benchmark: two runs of 100,000 trials each (5 variants × 10,000 tasks ×
//! 2 repeats, CRBugBench, k = 1, 3, 5) compared as `lightsout compare` and an `EvaluationSchedule`
//! compare them (paired bootstrap intervals with 10,000 resamples, McNemar's exact test per k),
//! then the candidate's HTML report showing the comparison built and rendered, as `lightsout
//! report --baseline` and the schedule write it.
//!
//! The runs are held in memory as the comparison's loader leaves them ([`ComparedRun`]); reading
//! them from a store is the loader's cost, measured by the controller's scale bench. The
//! candidate's first variant has a planted drop (a tenth of its hits lost); its other variants
//! are the baseline's own trials. The bench checks the verdicts before it reports a time.
//!
//! Run: `cargo bench -p lightsout-core --bench compare_report`.

use std::sync::Arc;
use std::time::Instant;

use lightsout_api::variant::Variant;
use lightsout_api::{HarnessName, HarnessRef, ModelRef, PromptRef, ScoringProtocol};
use lightsout_core::scoring::Verdicts;
use lightsout_core::summary::{summarise_run, DatasetSummary, RunIdentity, ScoringSettings};
use lightsout_core::trial::Outcome;
use lightsout_core::trial_record::HeldResult;
use lightsout_core::trial_record::TrialRecord;
use lightsout_report::compare::{compare_runs, CompareSettings, ComparedRun, StoredTrialRef, Verdict};
use lightsout_report::{self as report, ArtifactIndex, LINKED_ARTIFACTS, TRIAL_ROWS_SHOWN};
use lightsout_stats::BootstrapConfig;
use lightsout_swe_prbench::{ProtocolReading, SimilarityKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const VARIANTS: usize = 5;
const TASKS: usize = 10_000;
const REPEATS: usize = 2;
const KS: [u32; 3] = [1, 3, 5];

fn variant(i: usize) -> Variant {
    Variant {
        id: format!("variant-{i}"),
        name: format!("model-{i}/single-shot@1.0.0/default"),
        model: ModelRef { name: format!("model-{i}"), provider: "openai".into() },
        reasoning_effort: None,
        harness: HarnessRef { name: HarnessName::SingleShot, version: "1.0.0".into() },
        prompt: PromptRef::default_preset(),
    }
}

/// A judged trial's verdicts, as stored: only its first hit matters to recall@k.
fn verdicts(first_hit_rank: Option<u32>) -> Arc<Verdicts> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "protocol": "crbugbench", "prompt_version": "v1", "vote_rule": "majority", "judges": [],
            "judged_findings": 5, "truth_items": 1, "votes": [], "decisions": [], "caught": {},
            "first_hit_rank": first_hit_rank,
            "usage": {"input_tokens": 900, "output_tokens": 60, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
            "cost_usd": 0.0012, "unpriced_calls": 0, "calls": 3,
        }))
        .expect("verdicts parse"),
    )
}

/// The rank of a trial's first hit: a variant-, task- and repeat-seeded draw, so the same trial
/// of two runs draws the same; `drop` loses that share of the hits.
fn first_hit(variant: usize, task: usize, repeat: usize, drop: f64) -> Option<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(((variant * TASKS + task) * REPEATS + repeat) as u64);
    let skill = 0.35 + 0.08 * variant as f64;
    let rank = (1..=5).find(|_| rng.random_bool(skill / 2.0))?;
    let lost = rng.random_bool(drop);
    (!lost).then_some(rank)
}

fn run(name: &str, planted_drop: f64) -> ComparedRun {
    let variants: Vec<Variant> = (0..VARIANTS).map(variant).collect();
    let (mut records, mut trials) = (Vec::new(), Vec::new());
    for v in 0..VARIANTS {
        for task in 0..TASKS {
            for repeat in 0..REPEATS {
                let drop = if v == 0 { planted_drop } else { 0.0 };
                let result = Arc::new(HeldResult {
                    attempt: 1,
                    outcome: Outcome::Ok,
                    error: None,
                    finished_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
                    duration_ms: 20_000 + (task as u64 * 7919) % 40_000,
                    usage: Default::default(),
                    cost_usd: Some(0.02 + 0.001 * v as f64),
                    model_calls: 4,
                    findings: 5,
                    review_words: 240,
                    scripted_model: false,
                    trajectory: None,
                });
                trials.push(StoredTrialRef { id: format!("trial-{v}-{task:05}-{repeat}"), attempt: 1, attempts: 1 });
                records.push(TrialRecord {
                    earlier_attempts: None,
                    variant: v as u32,
                    task: format!("task-{task:05}"),
                    context_config: None,
                    repeat: repeat as u32,
                    track: None,
                    difficulty: None,
                    language: None,
                    truth_items: 1,
                    swe_prbench_input: None,
                    result: Some(result),
                    verdicts: Some(verdicts(first_hit(v, task, repeat, drop))),
                });
            }
        }
    }
    let settings = ScoringSettings {
        protocol: ScoringProtocol::CrBugBench,
        ks: KS.to_vec(),
        bootstrap: BootstrapConfig::with_seed(7),
        context_config: None,
        reading: ProtocolReading::default(),
        similarity: SimilarityKind::Lexical,
        judge_model: String::new(),
        departures: Default::default(),
    };
    let identity = RunIdentity {
        name: name.into(),
        spec_hash: format!("hash-{name}"),
        generated_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
    };
    let dataset = DatasetSummary {
        format: "crbugbench".into(),
        source: "file://bench".into(),
        tasks: TASKS as u32,
        skipped_lines: 0,
    };
    let summary = summarise_run(identity, dataset, &settings, &variants, &records);
    ComparedRun {
        uri: format!("file:///bench/runs/{name}"),
        name: name.into(),
        spec_hash: format!("hash-{name}"),
        variants,
        summary,
        records,
        trials,
    }
}

/// Peak resident memory so far (VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn main() {
    let started = Instant::now();
    let baseline = run("nightly-baseline", 0.0);
    let candidate = run("nightly-candidate", 0.1);
    let trials = candidate.records.len();
    println!(
        "setup: two runs of {trials} trials with their summaries in {:.2} s (not part of the figures below)",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let comparison = compare_runs(&baseline, &candidate, &CompareSettings { k: None, alpha: 0.05, min_delta: 0.0 })
        .expect("the runs compare");
    let compare_s = started.elapsed().as_secs_f64();
    assert_eq!(comparison.verdict, Verdict::Regressed, "the planted drop is found");
    assert_eq!(comparison.variants[0].verdict, Verdict::Regressed);
    for v in &comparison.variants[1..] {
        assert_eq!(v.verdict, Verdict::NoSignificantChange, "{}: the baseline's own trials", v.variant);
    }

    let artifacts: ArtifactIndex =
        candidate.trials.iter().map(|t| ((t.id.clone(), t.attempt), LINKED_ARTIFACTS.to_vec())).collect();
    let started = Instant::now();
    let mut data = report::build(&candidate, &artifacts);
    data.comparison = Some(comparison);
    let html = report::render_html(&data);
    let report_s = started.elapsed().as_secs_f64();
    assert!(html.contains("id=\"change-table\"") && html.contains("id=\"trials-cut\""));

    println!("compare_runs: {trials} paired trials per run, {VARIANTS} variants, k {KS:?}: {compare_s:.3} s");
    println!(
        "report (build + render, with the comparison): {report_s:.3} s, {:.2} MiB of HTML ({TRIAL_ROWS_SHOWN} of {} trial rows)",
        html.len() as f64 / (1024.0 * 1024.0),
        data.trials.len()
    );
    println!("peak RSS: {:.1} MiB (both runs held in memory)", peak_rss_mib());
}
