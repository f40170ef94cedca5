//! The run's aggregates as the reference harness's `aggregate.py` writes them in
//! `eval_report.json`: plain means (and one difficulty-weighted mean of the composite) by
//! configuration, by difficulty and crossed, every mean rounded by Python's `round(x, 3)`.
//!
//! The harness rebuilds the report from its `eval_results/*_eval.json` files sorted by name
//! ([`eval_result_file_name`]); means are summed in that order.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::python::round3;
use super::record::EvalResult;

/// The difficulties of the ablation table, in its order.
pub const DIFFICULTIES: [&str; 3] = ["Type1_Direct", "Type2_Contextual", "Type3_Latent_Candidate"];
const CONFIGS: [&str; 3] = ["config_A", "config_B", "config_C"];

/// The harness's file name for a record: `<task>_<requested full config name>_eval.json`.
pub fn eval_result_file_name(task_id: &str, full_config: &str) -> String {
    format!("{task_id}_{full_config}_eval.json")
}

/// `by_config` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigAggregate {
    pub n: usize,
    pub detection_rate: f64,
    pub false_positive_rate: f64,
    pub precision: f64,
    pub recall: f64,
    pub f1_score: f64,
    pub hallucination_rate: f64,
    pub actionability_score: f64,
    pub semantic_alignment: f64,
    pub redundancy_penalty: f64,
    pub coverage: f64,
    pub attempt_rate: f64,
    pub difficulty_weight: f64,
    /// The most common tag; ties go to the first seen.
    pub pr_difficulty_tag: String,
    pub no_attempt_count: usize,
    pub plausible_penalty: f64,
    pub fallback_penalty: f64,
    pub adjacent_detection_rate: f64,
    pub overall_score: f64,
    /// Σ score·weight / Σ weight, the plain mean when Σ weight ≤ 0.
    pub overall_score_weighted: f64,
}

/// `by_difficulty` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DifficultyAggregate {
    pub n: usize,
    pub detection_rate: f64,
    pub coverage: f64,
    pub f1_score: f64,
    pub adjacent_detection_rate: f64,
    pub overall_score: f64,
    pub overall_score_weighted: f64,
}

/// `ablation_table[difficulty][config]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AblationCell {
    pub n: usize,
    pub detection_rate: f64,
    pub actionability_score: f64,
    pub adjacent_detection_rate: f64,
    pub overall_score: f64,
}

/// `eval_report.json` without `run_date` and `records`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Distinct PR numbers (two tasks sharing a number count once).
    pub total_prs: usize,
    pub total_eval_records: usize,
    pub by_config: BTreeMap<String, ConfigAggregate>,
    pub by_difficulty: BTreeMap<String, DifficultyAggregate>,
    pub ablation_table: BTreeMap<String, BTreeMap<String, AblationCell>>,
    pub agent_parse_failures: usize,
    pub judge_parse_fallback_count: usize,
}

/// `config_A|B|C` for the full and short names; other names unchanged.
pub fn config_group(config_name: &str) -> &str {
    match config_name {
        "config_A_diff_only" | "config_A" => "config_A",
        "config_B_with_file_content" | "config_B" => "config_B",
        "config_C_full_context" | "config_C" => "config_C",
        other => other,
    }
}

fn mean(rows: &[&EvalResult], field: impl Fn(&EvalResult) -> f64) -> f64 {
    if rows.is_empty() {
        return 0.0;
    }
    rows.iter().fold(0.0, |sum, r| sum + field(r)) / rows.len() as f64
}

fn weighted_mean(rows: &[&EvalResult]) -> f64 {
    let total_weight = rows.iter().fold(0.0, |sum, r| sum + r.difficulty_weight);
    if total_weight <= 0.0 {
        return mean(rows, |r| r.overall_score);
    }
    rows.iter().fold(0.0, |sum, r| sum + r.overall_score * r.difficulty_weight) / total_weight
}

fn most_common(rows: &[&EvalResult]) -> String {
    let mut counts: IndexMap<&str, usize> = IndexMap::new();
    for row in rows {
        *counts.entry(row.pr_difficulty_tag.as_str()).or_default() += 1;
    }
    let best = counts.values().copied().max().unwrap_or(0);
    counts.iter().find(|(_, n)| **n == best).map(|(tag, _)| tag.to_string()).unwrap_or_else(|| "easy".to_string())
}

fn group(results: &[EvalResult], key: impl Fn(&EvalResult) -> String) -> IndexMap<String, Vec<&EvalResult>> {
    let mut groups: IndexMap<String, Vec<&EvalResult>> = IndexMap::new();
    for result in results {
        groups.entry(key(result)).or_default().push(result);
    }
    groups
}

fn config_aggregate(rows: &[&EvalResult]) -> ConfigAggregate {
    let m = |field: fn(&EvalResult) -> f64| round3(mean(rows, field));
    ConfigAggregate {
        n: rows.len(),
        detection_rate: m(|r| r.detection_rate),
        false_positive_rate: m(|r| r.false_positive_rate),
        precision: m(|r| r.precision),
        recall: m(|r| r.recall),
        f1_score: m(|r| r.f1_score),
        hallucination_rate: m(|r| r.hallucination_rate),
        actionability_score: m(|r| r.actionability_score),
        semantic_alignment: m(|r| r.semantic_alignment),
        redundancy_penalty: m(|r| r.redundancy_penalty),
        coverage: m(|r| r.coverage),
        attempt_rate: m(|r| r.attempt_rate),
        difficulty_weight: m(|r| r.difficulty_weight),
        pr_difficulty_tag: most_common(rows),
        no_attempt_count: rows.iter().filter(|r| r.failure_type.as_deref() == Some("no_attempt")).count(),
        plausible_penalty: m(|r| r.plausible_penalty),
        fallback_penalty: m(|r| r.fallback_penalty),
        adjacent_detection_rate: m(|r| r.adjacent_detection_rate),
        overall_score: m(|r| r.overall_score),
        overall_score_weighted: round3(weighted_mean(rows)),
    }
}

fn difficulty_aggregate(rows: &[&EvalResult]) -> DifficultyAggregate {
    let m = |field: fn(&EvalResult) -> f64| round3(mean(rows, field));
    DifficultyAggregate {
        n: rows.len(),
        detection_rate: m(|r| r.detection_rate),
        coverage: m(|r| r.coverage),
        f1_score: m(|r| r.f1_score),
        adjacent_detection_rate: m(|r| r.adjacent_detection_rate),
        overall_score: m(|r| r.overall_score),
        overall_score_weighted: round3(weighted_mean(rows)),
    }
}

/// The report of `results`, given in the harness's file-name order.
pub fn eval_report(results: &[EvalResult]) -> EvalReport {
    let by_config = group(results, |r| config_group(&r.config_name).to_string())
        .into_iter()
        .map(|(key, rows)| (key, config_aggregate(&rows)))
        .collect();
    let by_difficulty = group(results, |r| r.difficulty.clone())
        .into_iter()
        .map(|(key, rows)| (key, difficulty_aggregate(&rows)))
        .collect();
    let ablation_table = DIFFICULTIES
        .iter()
        .map(|difficulty| {
            let cells = CONFIGS
                .iter()
                .filter_map(|config| {
                    let rows: Vec<&EvalResult> = results
                        .iter()
                        .filter(|r| r.difficulty == *difficulty && config_group(&r.config_name) == *config)
                        .collect();
                    let m = |field: fn(&EvalResult) -> f64| round3(mean(&rows, field));
                    (!rows.is_empty()).then(|| {
                        let cell = AblationCell {
                            n: rows.len(),
                            detection_rate: m(|r| r.detection_rate),
                            actionability_score: m(|r| r.actionability_score),
                            adjacent_detection_rate: m(|r| r.adjacent_detection_rate),
                            overall_score: m(|r| r.overall_score),
                        };
                        (config.to_string(), cell)
                    })
                })
                .collect();
            (difficulty.to_string(), cells)
        })
        .collect();
    let mut pr_numbers: Vec<i64> = results.iter().map(|r| r.pr_number).collect();
    pr_numbers.sort_unstable();
    pr_numbers.dedup();
    EvalReport {
        total_prs: pr_numbers.len(),
        total_eval_records: results.len(),
        by_config,
        by_difficulty,
        ablation_table,
        agent_parse_failures: results.iter().filter(|r| !r.agent_parse_success).count(),
        judge_parse_fallback_count: results.iter().filter(|r| r.judge_parse_fallback_used).count(),
    }
}
