//! `summary.json`: a run's results per variant, computed from the trials' `result.json` and
//! `verdicts.json` only, so anyone can recompute it from the stored artifacts — and, with the same
//! artifacts and bootstrap seed, get the same file bit for bit (apart from `generated_at`).
//!
//! Scoring rules applied here:
//! - A trial counts in a score when its outcome is the agent's doing (ok, agent-failed,
//!   timed-out, budget-exceeded); the last three count as a review with no finding (SWE-PRBench:
//!   an empty output, composite 0). Infrastructure failures are never scored. An ok trial not yet
//!   judged, or whose verdicts missing judge votes leave incomplete ([`crate::judge`]), is not
//!   scored yet (`unjudged`); the judge spend of incomplete verdicts is counted.
//! - Spend and tokens count every attempt of a trial: an infrastructure failure's successful
//!   calls were paid for too.
//! - recall@k = the share of scored trials whose task is hit at k (see [`crate::scoring`]); with
//!   repeats, each repeat is one sample. Also given per track (pre-merge, post-merge).
//! - Intervals: 95% cluster-bootstrap intervals ([`lightsout_stats`]) that resample tasks, so a
//!   task's repeats stay together; `spec.judges.bootstrap` sets resamples and seed.
//! - SWE-PRBench: each scored trial is one of the reference harness's records (its `EvalResult`;
//!   a trial without an answer is the harness's record of a failed generation), and the
//!   variant's `swe_prbench` holds the harness's `eval_report.json` cells over them
//!   ([`lightsout_swe_prbench::harness::eval_report`], records in the harness's file-name order)
//!   and the headline `composite`: the overall score weighted by ln(human comments + 1), as the
//!   harness weights within a configuration. Its interval resamples tasks with the same weights.
//! - Judge agreement (CRBugBench, two or more judges): Fleiss' kappa and pairwise agreement over
//!   the judged (finding, ground-truth item) pairs of the variant's scored trials.
//! - Comparisons: every variant against the first, paired by (task, repeat) — and context
//!   configuration, on the `matrix.contextConfigs` axis ([`TrialRecord::pairing_index`]):
//!   McNemar's exact test on hit@k and a paired bootstrap of the recall difference.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::judge::{PanelRatings, TrialVerdicts};
use crate::scoring::Verdicts;
use crate::trial::Outcome;
use crate::trial_record::{HeldTrajectory, TrialRecord};
use lightsout_api::variant::Variant;
use lightsout_api::{ContextConfig, EvaluationRunSpec, ScoringProtocol, Track};
use lightsout_model::Usage;
use lightsout_stats::{
    self as stats, Agreement, BootstrapConfig, Cluster, Interval, McNemar, PairedDifference, Sample,
};
use lightsout_swe_prbench::harness::report::eval_result_file_name;
use lightsout_swe_prbench::harness::{eval_report, Departures, EvalReport, EvalResult};
use lightsout_swe_prbench::scorer::{model_label, no_answer, score_unjudged};
use lightsout_swe_prbench::{ProtocolReading, SimilarityKind};

pub const SUMMARY_SCHEMA: &str = "lightsout.dev/summary/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub schema: String,
    pub run: RunIdentity,
    /// True when a trial's model calls were answered by the built-in scripted server (its
    /// results say so): the numbers then say nothing about real models.
    pub scripted_models: bool,
    pub dataset: DatasetSummary,
    pub protocol: ScoringProtocol,
    pub k: Vec<u32>,
    /// How every interval below was computed.
    pub bootstrap: BootstrapConfig,
    pub trials: OutcomeCounts,
    pub spend: SpendSummary,
    /// Tokens over the run, agents and judges apart.
    pub tokens: TokenSummary,
    /// Things a reader must know before quoting a number (e.g. a lexical similarity fallback).
    pub notices: Vec<String>,
    pub variants: Vec<VariantSummary>,
    /// Every other variant against the first one.
    pub comparisons: Vec<Comparison>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenSummary {
    pub agent: Usage,
    pub judge: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunIdentity {
    pub name: String,
    pub spec_hash: String,
    pub generated_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    pub format: String,
    pub source: String,
    pub tasks: u32,
    pub skipped_lines: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    pub planned: u32,
    /// Planned trials with no final result yet.
    pub pending: u32,
    pub ok: u32,
    pub agent_failed: u32,
    pub timed_out: u32,
    pub budget_exceeded: u32,
    pub infra_failed: u32,
    /// `ok` trials not scored yet because they have no complete verdicts: not judged yet, or
    /// missing judge votes leave a pair undecided (all `ok` trials of a run without judges).
    #[serde(default)]
    pub unjudged: u32,
    /// Runs of attempts that were preempted (their queue stopped them) and run again: not
    /// trials and not outcomes, and no infrastructure failure; their spend is in the totals.
    #[serde(default)]
    pub preempted: u32,
}

impl OutcomeCounts {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::AgentFailed => self.agent_failed += 1,
            Outcome::TimedOut => self.timed_out += 1,
            Outcome::BudgetExceeded => self.budget_exceeded += 1,
            Outcome::InfraFailed => self.infra_failed += 1,
        }
    }

    pub fn finished(&self) -> u32 {
        self.ok + self.agent_failed + self.timed_out + self.budget_exceeded + self.infra_failed
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendSummary {
    pub agent_usd: f64,
    pub judge_usd: f64,
    pub total_usd: f64,
    /// Model calls with no price in the pricing table: their cost is missing from the totals.
    pub unpriced_calls: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantSummary {
    pub id: String,
    pub name: String,
    pub model: String,
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    pub harness: String,
    pub prompt: String,
    pub trials: OutcomeCounts,
    /// Trials that count in the scores below.
    pub scored: u32,
    /// Tasks with at least one scored trial (the bootstrap's clusters).
    pub scored_tasks: u32,
    /// recall@k by k over all scored trials; absent until a trial is scored.
    pub recall: BTreeMap<String, f64>,
    /// recall@k's bootstrap interval, by k.
    pub recall_interval: BTreeMap<String, Interval>,
    /// recall@k by track, then k.
    pub recall_by_track: BTreeMap<String, BTreeMap<String, f64>>,
    /// recall@k by task difficulty, then k (tasks the dataset gives no difficulty are left out).
    #[serde(default)]
    pub recall_by_difficulty: BTreeMap<String, BTreeMap<String, f64>>,
    /// recall@k by task language, then k (tasks the dataset gives no language are left out).
    #[serde(default)]
    pub recall_by_language: BTreeMap<String, BTreeMap<String, f64>>,
    pub findings_per_review: Option<f64>,
    pub words_per_review: Option<f64>,
    /// CRBugBench panels of two or more judges: how much the judges agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_agreement: Option<Agreement>,
    /// SWE-PRBench: the composite and its parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swe_prbench: Option<SwePrBenchSummary>,
    pub agent_tokens: Usage,
    pub judge_tokens: Usage,
    pub spend: SpendSummary,
    /// Agent spend per finished, non-infrastructure trial.
    pub agent_usd_per_trial: Option<f64>,
    /// Trial wall-clock duration quantiles over finished, non-infrastructure trials.
    pub latency_ms: Option<Quantiles>,
    /// What the agent did (agentic harnesses): over the finished, non-infrastructure trials
    /// whose result carries a trajectory; absent when none does (e.g. the single-shot harness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<TrajectoryStats>,
}

/// A variant's trajectories in brief, from each trial's `result.json` `trajectory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryStats {
    /// Trials with a trajectory: the figures below are over these.
    pub trials: u32,
    /// Mean turns (model calls of the agent loop) per trial, and their nearest-rank quantiles.
    pub turns_per_trial: f64,
    pub turns: Quantiles,
    /// Mean tool calls per trial.
    pub tool_calls_per_trial: f64,
    /// Tool calls by action kind (`read`, `probe`, `write`, `execute`, `git`, `other`), summed
    /// over the trials; every kind is present.
    pub action_mix: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwePrBenchSummary {
    /// Records scored (trials, one a (task, configuration, repeat)).
    pub records: u32,
    /// The overall score over every record, weighted by ln(human comments + 1) (the harness's
    /// `overall_score_weighted` of one configuration; over all of them here).
    pub composite: f64,
    /// The weighted composite's bootstrap interval.
    pub composite_interval: Option<Interval>,
    /// `embeddings`, or `lexical`: the harness's Jaccard fallback, not its published similarity.
    pub similarity: SimilarityKind,
    /// The harness's `eval_report.json` over the records (without `run_date` and `records`).
    pub report: EvalReport,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: u64,
    pub p95: u64,
}

/// A variant against the baseline (the first variant), paired by (task, repeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    /// By k: McNemar's exact test on hit@k, and the recall difference (candidate − baseline)
    /// with its paired bootstrap interval.
    pub by_k: BTreeMap<String, KComparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KComparison {
    pub mcnemar: McNemar,
    pub recall_difference: PairedDifference,
}

/// How a run is scored, from its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringSettings {
    pub protocol: ScoringProtocol,
    pub ks: Vec<u32>,
    pub bootstrap: BootstrapConfig,
    /// `agent.contextConfig`: every trial's, when the run has no `matrix.contextConfigs`.
    pub context_config: Option<ContextConfig>,
    pub reading: ProtocolReading,
    pub similarity: SimilarityKind,
    /// SWE-PRBench: the judge's model name (results are labelled `<agent>::judge=<judge>`) and
    /// the departures in force.
    pub judge_model: String,
    pub departures: Departures,
}

impl ScoringSettings {
    pub fn of(spec: &EvaluationRunSpec) -> ScoringSettings {
        let judges = &spec.judges;
        ScoringSettings {
            protocol: judges.protocol_for(spec.dataset.format),
            ks: judges.k.iter().map(|k| (*k).max(1) as u32).collect(),
            bootstrap: BootstrapConfig {
                resamples: judges.bootstrap.resamples.max(1) as u32,
                ..BootstrapConfig::with_seed(judges.bootstrap.seed as u64)
            },
            context_config: spec.agent.context_config,
            reading: judges.swe_prbench.reading,
            similarity: if judges.swe_prbench.embeddings.is_some() {
                SimilarityKind::Embeddings
            } else {
                SimilarityKind::Lexical
            },
            judge_model: judges.panel.first().map(|m| m.name.clone()).unwrap_or_default(),
            departures: judges.swe_prbench.departures_in_force(),
        }
    }
}

/// The run's summary from its trial records (in the plan's order), variants in the plan's order.
/// `scripted_models` follows from the results: true when a final result's model calls were
/// answered by the scripted model server, whoever ran the trial.
pub fn summarise_run(
    run: RunIdentity,
    dataset: DatasetSummary,
    settings: &ScoringSettings,
    variants: &[Variant],
    records: &[TrialRecord],
) -> RunSummary {
    let mut notices = Vec::new();
    let scripted_models = records.iter().filter_map(|r| r.result.as_deref()).any(|r| r.scripted_model);
    let mut by_variant: Vec<Vec<&TrialRecord>> = vec![Vec::new(); variants.len()];
    for record in records {
        if let Some(mine) = by_variant.get_mut(record.variant as usize) {
            mine.push(record);
        }
    }
    let summaries: Vec<VariantSummary> = variants
        .iter()
        .zip(&by_variant)
        .map(|(variant, mine)| summarise_variant(variant, mine, settings, &mut notices))
        .collect();
    let comparisons = match by_variant.split_first() {
        Some((baseline, candidates)) => candidates
            .iter()
            .zip(&variants[1..])
            .filter_map(|(candidate, variant)| {
                compare(&variants[0], baseline, variant, candidate, settings, &mut notices)
            })
            .collect(),
        None => Vec::new(),
    };
    if settings.protocol == ScoringProtocol::SwePrBench
        && settings.similarity == SimilarityKind::Lexical
        && summaries.iter().any(|v| v.swe_prbench.as_ref().is_some_and(|s| s.records > 0))
    {
        notices.insert(
            0,
            "SWE-PRBench similarity is LEXICAL (no embeddings endpoint in spec.judges.swePrbench.embeddings): \
             the reference harness's Jaccard fallback, not its all-mpnet-base-v2 embeddings; stage-2 matching, \
             duplicate clusters and alignment differ from the published numbers"
                .to_string(),
        );
    }
    let (trials, spend) = totals(&summaries);
    let tokens = TokenSummary {
        agent: summaries.iter().map(|v| v.agent_tokens).sum(),
        judge: summaries.iter().map(|v| v.judge_tokens).sum(),
    };
    RunSummary {
        schema: SUMMARY_SCHEMA.to_string(),
        run,
        scripted_models,
        dataset,
        protocol: settings.protocol,
        k: settings.ks.clone(),
        bootstrap: settings.bootstrap,
        trials,
        spend,
        tokens,
        notices,
        variants: summaries,
        comparisons,
    }
}

/// A scored trial: its hits and, under SWE-PRBench, its PR outcome.
struct Scored<'a> {
    record: &'a TrialRecord,
    hits: Vec<bool>,
    pr: Option<std::borrow::Cow<'a, EvalResult>>,
}

fn summarise_variant(
    variant: &Variant,
    records: &[&TrialRecord],
    settings: &ScoringSettings,
    notices: &mut Vec<String>,
) -> VariantSummary {
    let ks = &settings.ks;
    let mut trials = OutcomeCounts { planned: records.len() as u32, ..Default::default() };
    let mut spend = SpendSummary::default();
    let mut agent_tokens = Usage::default();
    let mut judge_tokens = Usage::default();
    let mut durations = Vec::new();
    let mut findings = Vec::new();
    let mut words = Vec::new();
    let mut scored: Vec<Scored> = Vec::new();
    let mut panels: Vec<&TrialVerdicts> = Vec::new();
    let mut trajectories: Vec<&HeldTrajectory> = Vec::new();

    for record in records {
        if let Some(earlier) = &record.earlier_attempts {
            agent_tokens += earlier.usage;
            spend.agent_usd += earlier.cost_usd;
            spend.unpriced_calls += earlier.unpriced_calls;
            trials.preempted += earlier.preempted_runs;
        }
        let Some(result) = &record.result else {
            trials.pending += 1;
            continue;
        };
        trials.add(result.outcome);
        agent_tokens += result.usage;
        match result.cost_usd {
            Some(cost) => spend.agent_usd += cost,
            None if result.model_calls > 0 => spend.unpriced_calls += result.model_calls,
            None => {}
        }
        if let Some(verdicts) = &record.verdicts {
            let judged = verdicts.spend();
            judge_tokens += judged.usage;
            spend.judge_usd += judged.cost_usd;
            spend.unpriced_calls += judged.unpriced_calls;
        }
        if !result.outcome.is_scored() {
            continue;
        }
        durations.push(result.duration_ms);
        if let Some(trajectory) = &result.trajectory {
            trajectories.push(trajectory);
        }
        let (hits, pr) = match (result.outcome, &record.verdicts) {
            (Outcome::Ok, Some(verdicts)) if verdicts.is_complete() => {
                let hits = ks.iter().map(|k| verdicts.hit_at(*k)).collect();
                match verdicts.as_ref() {
                    Verdicts::CrBugBench(panel) => {
                        panels.push(panel);
                        (hits, None)
                    }
                    Verdicts::SwePrBench(pr) => (hits, Some(std::borrow::Cow::Borrowed(&pr.result))),
                    // Never complete: the guard above counts it unjudged.
                    Verdicts::SwePrBenchUnjudged(_) => {
                        trials.unjudged += 1;
                        continue;
                    }
                }
            }
            (Outcome::Ok, _) => {
                trials.unjudged += 1;
                continue;
            }
            _ => (vec![false; ks.len()], no_review_result(record, result.outcome, variant, settings)),
        };
        if result.outcome == Outcome::Ok {
            findings.push(result.findings as f64);
            words.push(result.review_words as f64);
        }
        scored.push(Scored { record, hits, pr });
    }
    spend.total_usd = spend.agent_usd + spend.judge_usd;

    let recall_of = |rows: &[&Scored]| -> BTreeMap<String, f64> {
        if rows.is_empty() {
            return BTreeMap::new();
        }
        ks.iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), rows.iter().filter(|s| s.hits[i]).count() as f64 / rows.len() as f64))
            .collect()
    };
    let all: Vec<&Scored> = scored.iter().collect();
    let mut recall_by_track = BTreeMap::new();
    for track in [Track::PreMerge, Track::PostMerge] {
        let rows: Vec<_> = scored.iter().filter(|s| s.record.track == Some(track)).collect();
        if !rows.is_empty() {
            recall_by_track.insert(track.as_str().to_string(), recall_of(&rows));
        }
    }
    let recall_by = |key: fn(&TrialRecord) -> Option<&str>| -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut groups: BTreeMap<&str, Vec<&Scored>> = BTreeMap::new();
        for s in &scored {
            if let Some(group) = key(s.record) {
                groups.entry(group).or_default().push(s);
            }
        }
        groups.into_iter().map(|(group, rows)| (group.to_string(), recall_of(&rows))).collect()
    };
    let recall_by_difficulty = recall_by(|r| r.difficulty.as_deref());
    let recall_by_language = recall_by(|r| r.language.as_deref());

    // One set of task draws for every recall@k column and the composite.
    let mut columns: Vec<Vec<Cluster<&str>>> = vec![Vec::new(); ks.len()];
    let mut composite: Vec<Cluster<&str>> = Vec::new();
    let mut tasks: BTreeMap<&str, Vec<&Scored>> = BTreeMap::new();
    for s in &scored {
        tasks.entry(s.record.task.as_str()).or_default().push(s);
    }
    for (task, rows) in &tasks {
        for (i, column) in columns.iter_mut().enumerate() {
            column.push(Cluster::new(*task, rows.iter().map(|s| f64::from(u8::from(s.hits[i]))).collect()));
        }
        let prs: Vec<&EvalResult> = rows.iter().filter_map(|s| s.pr.as_deref()).collect();
        if let Some(first) = prs.first() {
            let weight = first.difficulty_weight;
            composite.push(Cluster::weighted(*task, weight, prs.iter().map(|p| p.overall_score).collect()));
        }
    }
    let has_composite = !composite.is_empty();
    if has_composite {
        columns.push(composite);
    }
    let mut intervals = match stats::bootstrap_columns(&columns, &settings.bootstrap) {
        Ok(intervals) => intervals,
        Err(e) => {
            notices.push(format!("variant {}: no bootstrap intervals: {e}", variant.name));
            vec![None; columns.len()]
        }
    };
    let composite_interval = if has_composite { intervals.pop().flatten() } else { None };
    let recall_interval =
        ks.iter().zip(intervals).filter_map(|(k, interval)| Some((k.to_string(), interval?))).collect();

    let swe_prbench = (settings.protocol == ScoringProtocol::SwePrBench).then(|| {
        let mut results: Vec<(String, &EvalResult)> = scored
            .iter()
            .filter_map(|s| {
                let pr = s.pr.as_deref()?;
                let config =
                    crate::dataset::swe_prbench::config_or_default(s.record.context_config.or(settings.context_config));
                let name = eval_result_file_name(&pr.task_id, &crate::dataset::swe_prbench::full_name(config));
                Some((format!("{name}\u{0}{:08}", s.record.repeat), pr))
            })
            .collect();
        // The harness reads its records in file-name order; repeats after one another.
        results.sort_by(|a, b| a.0.cmp(&b.0));
        let results: Vec<EvalResult> = results.into_iter().map(|(_, r)| r.clone()).collect();
        SwePrBenchSummary {
            records: results.len() as u32,
            composite: weighted_composite(&results),
            composite_interval,
            similarity: settings.similarity,
            report: eval_report(&results),
        }
    });
    let judge_agreement = panel_agreement(&panels, variant, notices);
    let finished_scored = durations.len();
    VariantSummary {
        id: variant.id.clone(),
        name: variant.name.clone(),
        model: variant.model.name.clone(),
        provider: variant.model.provider.clone(),
        reasoning_effort: variant.reasoning_effort.map(|e| e.as_str().to_string()),
        harness: format!("{}@{}", variant.harness.name.as_str(), variant.harness.version),
        prompt: variant.prompt.label(),
        trials,
        scored: scored.len() as u32,
        scored_tasks: tasks.len() as u32,
        recall: recall_of(&all),
        recall_interval,
        recall_by_track,
        recall_by_difficulty,
        recall_by_language,
        findings_per_review: mean(&findings),
        words_per_review: mean(&words),
        judge_agreement,
        swe_prbench,
        agent_tokens,
        judge_tokens,
        agent_usd_per_trial: (finished_scored > 0).then(|| spend.agent_usd / finished_scored as f64),
        spend,
        latency_ms: quantiles(&mut durations),
        trajectory: trajectory_stats(&trajectories),
    }
}

/// Turns, tool calls and the action mix over `trajectories`; `None` when there is none.
fn trajectory_stats(trajectories: &[&HeldTrajectory]) -> Option<TrajectoryStats> {
    let n = trajectories.len();
    let mut turns: Vec<u64> = trajectories.iter().map(|t| u64::from(t.turns)).collect();
    let turns_per_trial = mean(&turns.iter().map(|t| *t as f64).collect::<Vec<_>>())?;
    let tool_calls: u64 = trajectories.iter().map(|t| u64::from(t.tool_calls)).sum();
    let action_mix = lightsout_trajectory::Action::ALL
        .iter()
        .enumerate()
        .map(|(i, action)| (action.as_str().to_string(), trajectories.iter().map(|t| u64::from(t.action_mix[i])).sum()))
        .collect();
    Some(TrajectoryStats {
        trials: n as u32,
        turns_per_trial,
        turns: quantiles(&mut turns)?,
        tool_calls_per_trial: tool_calls as f64 / n as f64,
        action_mix,
    })
}

/// Under SWE-PRBench, a scored trial without a review (agent failure, timeout, trial budget) is
/// the harness's record of a generation that failed: no comment, the judge skipped, every
/// score 0, weighted by its PR's human comments like any other.
fn no_review_result<'a>(
    record: &TrialRecord,
    outcome: Outcome,
    variant: &Variant,
    settings: &ScoringSettings,
) -> Option<std::borrow::Cow<'a, EvalResult>> {
    let input = record.swe_prbench_input.as_deref().filter(|_| settings.protocol == ScoringProtocol::SwePrBench)?;
    let reason = format!("Agent generation failed: the trial ended {}", outcome.as_str());
    let label = model_label(&variant.model.name, &settings.judge_model);
    Some(std::borrow::Cow::Owned(score_unjudged(input, &no_answer(&reason), &label, settings.departures)))
}

/// Σ overall·weight / Σ weight over `results`, the plain mean when the weights sum to 0 (the
/// harness's weighted mean); 0 without results.
fn weighted_composite(results: &[EvalResult]) -> f64 {
    if results.is_empty() {
        return 0.0;
    }
    let weight: f64 = results.iter().map(|r| r.difficulty_weight).sum();
    if weight <= 0.0 {
        return results.iter().map(|r| r.overall_score).sum::<f64>() / results.len() as f64;
    }
    results.iter().map(|r| r.overall_score * r.difficulty_weight).sum::<f64>() / weight
}

/// Fleiss' kappa and pairwise agreement over every judged (finding, item) pair of `panels`;
/// `None` with fewer than two judges.
fn panel_agreement(panels: &[&TrialVerdicts], variant: &Variant, notices: &mut Vec<String>) -> Option<Agreement> {
    let ratings: Vec<PanelRatings> = panels.iter().map(|p| p.ratings()).collect();
    let judges = ratings.iter().map(|r| r.judges).max()?;
    if judges < 2 {
        return None;
    }
    let items: Vec<Vec<Option<u32>>> = ratings.iter().flat_map(|r| r.rows(judges)).collect();
    match stats::agreement(&items) {
        Ok(agreement) => Some(agreement),
        Err(e) => {
            notices.push(format!("variant {}: no judge agreement: {e}", variant.name));
            None
        }
    }
}

fn compare(
    baseline_variant: &Variant,
    baseline: &[&TrialRecord],
    candidate_variant: &Variant,
    candidate: &[&TrialRecord],
    settings: &ScoringSettings,
    notices: &mut Vec<String>,
) -> Option<Comparison> {
    /// One sample per scored trial: its hit@k for every k.
    fn samples<'a>(records: &[&'a TrialRecord], ks: &[u32]) -> Vec<Sample<&'a str, Vec<bool>>> {
        records
            .iter()
            .filter_map(|r| {
                let result = r.result.as_ref().filter(|r| r.outcome.is_scored())?;
                let hits = match (result.outcome, &r.verdicts) {
                    (Outcome::Ok, Some(v)) => ks.iter().map(|k| v.hit_at(*k)).collect(),
                    (Outcome::Ok, None) => return None,
                    _ => vec![false; ks.len()],
                };
                Some(Sample { task: r.task.as_str(), repeat: r.pairing_index(), value: hits })
            })
            .collect()
    }
    /// Column `i` of `samples`.
    fn at<'a>(samples: &[Sample<&'a str, Vec<bool>>], i: usize) -> Vec<Sample<&'a str, bool>> {
        samples.iter().map(|s| Sample { task: s.task, repeat: s.repeat, value: s.value[i] }).collect()
    }
    /// Hits as 0/1 values.
    fn as_f64<'a>(samples: &[Sample<&'a str, Vec<bool>>]) -> Vec<Sample<&'a str, Vec<f64>>> {
        samples
            .iter()
            .map(|s| Sample {
                task: s.task,
                repeat: s.repeat,
                value: s.value.iter().map(|hit| f64::from(u8::from(*hit))).collect(),
            })
            .collect()
    }
    let ks = &settings.ks;
    let (b, c) = (samples(baseline, ks), samples(candidate, ks));
    // One paired bootstrap for every k: one pairing, and one draw per resample shared by every k.
    let differences = stats::paired_bootstrap_columns(&as_f64(&b), &as_f64(&c), &settings.bootstrap);
    let mut by_k = BTreeMap::new();
    for (i, k) in ks.iter().enumerate() {
        let outcome = stats::mcnemar(&at(&b, i), &at(&c, i)).and_then(|m| {
            let differences = differences.as_ref().map_err(Clone::clone)?;
            // With no sample at all there is no column, and McNemar has no pair.
            Ok(differences.get(i).cloned().map(|d| (m, d)))
        });
        match outcome {
            Ok(Some((mcnemar, recall_difference))) => {
                if mcnemar.pairs > 0 {
                    by_k.insert(k.to_string(), KComparison { mcnemar, recall_difference });
                }
            }
            Ok(None) => {}
            Err(e) => notices
                .push(format!("comparison {} vs {} at k={k}: {e}", candidate_variant.name, baseline_variant.name)),
        }
    }
    (!by_k.is_empty()).then(|| Comparison {
        baseline: baseline_variant.name.clone(),
        candidate: candidate_variant.name.clone(),
        by_k,
    })
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Nearest-rank quantiles.
fn quantiles(values: &mut [u64]) -> Option<Quantiles> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    Some(Quantiles { p50: rank(0.50), p95: rank(0.95) })
}

/// Totals over variants.
pub fn totals(variants: &[VariantSummary]) -> (OutcomeCounts, SpendSummary) {
    let mut trials = OutcomeCounts::default();
    let mut spend = SpendSummary::default();
    for v in variants {
        trials.planned += v.trials.planned;
        trials.pending += v.trials.pending;
        trials.ok += v.trials.ok;
        trials.agent_failed += v.trials.agent_failed;
        trials.timed_out += v.trials.timed_out;
        trials.budget_exceeded += v.trials.budget_exceeded;
        trials.infra_failed += v.trials.infra_failed;
        trials.unjudged += v.trials.unjudged;
        trials.preempted += v.trials.preempted;
        spend.agent_usd += v.spend.agent_usd;
        spend.judge_usd += v.spend.judge_usd;
        spend.unpriced_calls += v.spend.unpriced_calls;
    }
    spend.total_usd = spend.agent_usd + spend.judge_usd;
    (trials, spend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trials_of_a_task_pair_by_repeat_and_context_configuration() {
        let record = |context_config, repeat| TrialRecord {
            variant: 0,
            task: "t".into(),
            context_config,
            repeat,
            track: None,
            difficulty: None,
            language: None,
            truth_items: 1,
            swe_prbench_input: None,
            result: None,
            verdicts: None,
            earlier_attempts: None,
        };
        assert_eq!(record(None, 7).pairing_index(), 7, "without the axis, the repeat");
        let configs = [None, Some(ContextConfig::ConfigA), Some(ContextConfig::ConfigB), Some(ContextConfig::ConfigC)];
        let indices: std::collections::HashSet<u32> =
            configs.iter().flat_map(|c| (0..100).map(|r| record(*c, r).pairing_index())).collect();
        assert_eq!(indices.len(), 4 * 100, "no two (configuration, repeat) share an index");
    }

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantiles(&mut v), Some(Quantiles { p50: 50, p95: 95 }));
        assert_eq!(quantiles(&mut [7]), Some(Quantiles { p50: 7, p95: 7 }));
        assert_eq!(quantiles(&mut []), None);
    }

    #[test]
    fn trajectory_stats_average_turns_and_sum_the_action_mix() {
        use crate::trial::TrajectorySummary;
        use HeldTrajectory;
        let a = HeldTrajectory { turns: 4, tool_calls: 6, action_mix: [3, 1, 0, 2, 0, 0] };
        // A kind this version does not know counts as `other`.
        let b = HeldTrajectory::from(&TrajectorySummary {
            turns: 10,
            tool_calls: 2,
            action_mix: [("write".to_string(), 1), ("browse".to_string(), 1)].into_iter().collect(),
            ..Default::default()
        });
        assert_eq!(b.action_mix, [0, 0, 1, 0, 0, 1]);
        let stats = trajectory_stats(&[&a, &b]).unwrap();
        assert_eq!((stats.trials, stats.turns_per_trial, stats.tool_calls_per_trial), (2, 7.0, 4.0));
        assert_eq!(stats.turns, Quantiles { p50: 4, p95: 10 });
        let mix: Vec<(&str, u64)> = stats.action_mix.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(mix, [("execute", 2), ("git", 0), ("other", 1), ("probe", 1), ("read", 3), ("write", 1)]);
        assert_eq!(trajectory_stats(&[]), None);
    }
}
