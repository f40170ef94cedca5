//! `summary.json`: a run's results per variant, computed from the trials' `result.json` and
//! `verdicts.json` only, so anyone can recompute it from the stored artifacts.
//!
//! Scoring rules applied here:
//! - A trial counts in a score when its outcome is the agent's doing (ok, agent-failed,
//!   timed-out, budget-exceeded); the last three count as a review with no finding.
//!   Infrastructure failures are never scored. An ok trial not yet judged is not scored yet.
//! - recall@k = the share of scored trials whose task is hit at k (see [`crate::judge`]); with
//!   repeats, each repeat is one sample. Also given per track (pre-merge, post-merge).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::Track;
use crate::judge::TrialVerdicts;
use crate::model::Usage;
use crate::plan::Variant;
use crate::trial::{Outcome, TrialResult};

pub const SUMMARY_SCHEMA: &str = "lightsout.dev/summary/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub schema: String,
    pub run: RunIdentity,
    /// True when any model was the built-in scripted server: the numbers then say nothing about
    /// real models.
    pub scripted_models: bool,
    pub dataset: DatasetSummary,
    pub k: Vec<u32>,
    pub trials: OutcomeCounts,
    pub spend: SpendSummary,
    pub variants: Vec<VariantSummary>,
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
    /// recall@k by k over all scored trials; absent until a trial is scored.
    pub recall: BTreeMap<String, f64>,
    /// recall@k by track, then k.
    pub recall_by_track: BTreeMap<String, BTreeMap<String, f64>>,
    pub findings_per_review: Option<f64>,
    pub words_per_review: Option<f64>,
    pub agent_tokens: Usage,
    pub judge_tokens: Usage,
    pub spend: SpendSummary,
    /// Trial wall-clock duration quantiles over finished, non-infrastructure trials.
    pub latency_ms: Option<Quantiles>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: u64,
    pub p95: u64,
}

/// One planned trial as the summary sees it.
#[derive(Debug, Clone)]
pub struct TrialRecord {
    pub variant: u32,
    pub track: Option<Track>,
    /// The final attempt's result, if the trial has finished.
    pub result: Option<TrialResult>,
    pub verdicts: Option<TrialVerdicts>,
}

/// Aggregates trial records into per-variant summaries (in the variants' order).
pub fn summarise_variants(variants: &[Variant], records: &[TrialRecord], ks: &[u32]) -> Vec<VariantSummary> {
    let mut out = Vec::with_capacity(variants.len());
    for (index, variant) in variants.iter().enumerate() {
        let mine: Vec<&TrialRecord> = records.iter().filter(|r| r.variant as usize == index).collect();
        out.push(summarise_variant(variant, &mine, ks));
    }
    out
}

fn summarise_variant(variant: &Variant, records: &[&TrialRecord], ks: &[u32]) -> VariantSummary {
    let mut trials = OutcomeCounts { planned: records.len() as u32, ..Default::default() };
    let mut spend = SpendSummary::default();
    let mut agent_tokens = Usage::default();
    let mut judge_tokens = Usage::default();
    let mut durations = Vec::new();
    let mut findings = Vec::new();
    let mut words = Vec::new();
    // (track, hit@k for each k) per scored trial.
    let mut scored: Vec<(Option<Track>, Vec<bool>)> = Vec::new();

    for record in records {
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
            judge_tokens += verdicts.usage;
            spend.judge_usd += verdicts.cost_usd;
            spend.unpriced_calls += verdicts.unpriced_calls;
        }
        if !result.outcome.is_scored() {
            continue;
        }
        durations.push(result.duration_ms);
        let hits = match (result.outcome, &record.verdicts) {
            (Outcome::Ok, Some(verdicts)) => ks.iter().map(|k| verdicts.hit_at(*k)).collect(),
            (Outcome::Ok, None) => continue, // not judged yet
            _ => vec![false; ks.len()],
        };
        if result.outcome == Outcome::Ok {
            findings.push(result.findings as f64);
            words.push(result.review_words as f64);
        }
        scored.push((record.track, hits));
    }
    spend.total_usd = spend.agent_usd + spend.judge_usd;

    let recall_of = |rows: &[&(Option<Track>, Vec<bool>)]| -> BTreeMap<String, f64> {
        if rows.is_empty() {
            return BTreeMap::new();
        }
        ks.iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), rows.iter().filter(|(_, hits)| hits[i]).count() as f64 / rows.len() as f64))
            .collect()
    };
    let all: Vec<&(Option<Track>, Vec<bool>)> = scored.iter().collect();
    let mut recall_by_track = BTreeMap::new();
    for track in [Track::PreMerge, Track::PostMerge] {
        let rows: Vec<_> = scored.iter().filter(|(t, _)| *t == Some(track)).collect();
        if !rows.is_empty() {
            recall_by_track.insert(track.as_str().to_string(), recall_of(&rows));
        }
    }
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
        recall: recall_of(&all),
        recall_by_track,
        findings_per_review: mean(&findings),
        words_per_review: mean(&words),
        agent_tokens,
        judge_tokens,
        spend,
        latency_ms: quantiles(&mut durations),
    }
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
    fn nearest_rank_quantiles() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantiles(&mut v), Some(Quantiles { p50: 50, p95: 95 }));
        assert_eq!(quantiles(&mut [7]), Some(Quantiles { p50: 7, p95: 7 }));
        assert_eq!(quantiles(&mut []), None);
    }
}
