//! Per-PR metrics and the composite score.
//!
//! Rules (n = agent comments, m = human comments, counts over *final* labels):
//! - recall = caught / m (human comments matched; 0 when m = 0);
//! - precision = confirmed / n; efficiency = the same ratio (the harness computes it
//!   separately; it is confirmed / n too);
//! - hallucination = fabricated / n;
//! - redundancy = (n − duplicate clusters) / n;
//! - plausible penalty = max(0, plausible / n − 0.70) when n ≥ 3, else 0;
//! - actionability = (mean judge actionability − 1) / 4, the mean over the agent comments the
//!   judge gave a score (0 when none has one, e.g. after a judge fallback), × 0.2 when no agent
//!   comment is CONFIRMED;
//! - semantic alignment = mean cosine over matched pairs, each cosine clamped to [0, 1]
//!   (embeddings can be negative); 0 with no match;
//! - composite = clamp(0.40·recall + 0.25·precision + 0.15·alignment + 0.10·actionability +
//!   0.05·efficiency − 0.25·hallucination − 0.15·redundancy − 0.10·plausible penalty, 0, 1),
//!   halved when the judge's answer fell back, and 0 (with every metric 0) when the agent's
//!   output failed to parse or had no comment.

use serde::{Deserialize, Serialize};

use super::{AgentOutputStatus, Label};

const W_RECALL: f64 = 0.40;
const W_PRECISION: f64 = 0.25;
const W_ALIGNMENT: f64 = 0.15;
const W_ACTIONABILITY: f64 = 0.10;
const W_EFFICIENCY: f64 = 0.05;
const W_HALLUCINATION: f64 = 0.25;
const W_REDUNDANCY: f64 = 0.15;
const W_PLAUSIBLE_PENALTY: f64 = 0.10;
/// The share of PLAUSIBLE comments tolerated before the penalty starts.
const PLAUSIBLE_TOLERATED: f64 = 0.70;
/// The penalty needs at least this many agent comments.
const PLAUSIBLE_PENALTY_MIN_COMMENTS: usize = 3;
/// Actionability counts for this much when nothing is confirmed.
const UNCONFIRMED_ACTIONABILITY_FACTOR: f64 = 0.2;
/// A judge fallback halves the composite.
const FALLBACK_FACTOR: f64 = 0.5;

/// What the metrics of one PR are computed from.
#[derive(Debug, Clone, Copy)]
pub struct ScoreInput<'a> {
    pub agent_output: AgentOutputStatus,
    pub human_comments: usize,
    /// Final labels, one per agent comment.
    pub labels: &'a [Label],
    /// The judge's actionability per agent comment (empty or all `None` after a fallback).
    pub actionability: &'a [Option<u8>],
    /// The cosine of each matched pair.
    pub matched_cosines: &'a [f64],
    /// Duplicate clusters among the agent comments.
    pub clusters: usize,
    pub judge_fallback: bool,
}

/// One PR's metrics; every rate is in [0, 1].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrScores {
    pub agent_output: AgentOutputStatus,
    pub judge_fallback: bool,
    pub agent_comments: u32,
    pub human_comments: u32,
    /// Human comments matched.
    pub caught: u32,
    pub confirmed: u32,
    pub plausible: u32,
    pub fabricated: u32,
    pub clusters: u32,
    pub recall: f64,
    pub precision: f64,
    pub efficiency: f64,
    pub hallucination: f64,
    pub redundancy: f64,
    pub plausible_penalty: f64,
    pub actionability: f64,
    pub alignment: f64,
    /// The composite before the fallback halving (equal to `composite` without a fallback).
    pub composite_unhalved: f64,
    pub composite: f64,
}

/// The metrics and composite of one PR (see the module rules).
pub fn score_pr(input: &ScoreInput) -> PrScores {
    let n = input.labels.len();
    let m = input.human_comments;
    let count = |label| input.labels.iter().filter(|l| **l == label).count();
    let (confirmed, plausible, fabricated) =
        (count(Label::Confirmed), count(Label::Plausible), count(Label::Fabricated));
    let caught = input.matched_cosines.len().min(m);
    let mut scores = PrScores {
        agent_output: input.agent_output,
        judge_fallback: input.judge_fallback,
        agent_comments: n as u32,
        human_comments: m as u32,
        caught: caught as u32,
        confirmed: confirmed as u32,
        plausible: plausible as u32,
        fabricated: fabricated as u32,
        clusters: input.clusters.min(n) as u32,
        recall: 0.0,
        precision: 0.0,
        efficiency: 0.0,
        hallucination: 0.0,
        redundancy: 0.0,
        plausible_penalty: 0.0,
        actionability: 0.0,
        alignment: 0.0,
        composite_unhalved: 0.0,
        composite: 0.0,
    };
    if input.agent_output != AgentOutputStatus::Parsed || n == 0 {
        return scores;
    }
    let per_comment = |k: usize| k as f64 / n as f64;
    scores.recall = if m == 0 { 0.0 } else { caught as f64 / m as f64 };
    scores.precision = per_comment(confirmed);
    scores.efficiency = per_comment(confirmed);
    scores.hallucination = per_comment(fabricated);
    scores.redundancy = per_comment(n - input.clusters.clamp(1, n));
    scores.plausible_penalty =
        if n >= PLAUSIBLE_PENALTY_MIN_COMMENTS { (per_comment(plausible) - PLAUSIBLE_TOLERATED).max(0.0) } else { 0.0 };
    let rated: Vec<f64> = input.actionability.iter().flatten().map(|a| f64::from((*a).clamp(1, 5))).collect();
    if !rated.is_empty() {
        let mean = rated.iter().sum::<f64>() / rated.len() as f64;
        let factor = if confirmed == 0 { UNCONFIRMED_ACTIONABILITY_FACTOR } else { 1.0 };
        scores.actionability = (mean - 1.0) / 4.0 * factor;
    }
    if !input.matched_cosines.is_empty() {
        scores.alignment =
            input.matched_cosines.iter().map(|c| c.clamp(0.0, 1.0)).sum::<f64>() / input.matched_cosines.len() as f64;
    }
    let raw = W_RECALL * scores.recall
        + W_PRECISION * scores.precision
        + W_ALIGNMENT * scores.alignment
        + W_ACTIONABILITY * scores.actionability
        + W_EFFICIENCY * scores.efficiency
        - W_HALLUCINATION * scores.hallucination
        - W_REDUNDANCY * scores.redundancy
        - W_PLAUSIBLE_PENALTY * scores.plausible_penalty;
    scores.composite_unhalved = raw.clamp(0.0, 1.0);
    scores.composite =
        if input.judge_fallback { scores.composite_unhalved * FALLBACK_FACTOR } else { scores.composite_unhalved };
    scores
}
