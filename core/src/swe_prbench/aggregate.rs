//! Aggregating PR scores (for `summary.json`).
//!
//! Rules:
//! - Each PR (each repeat is one PR sample) weighs w = ln(human comments + 1). A group's score
//!   is the weighted mean Σ w·composite / Σ w (0 when Σ w = 0, which needs every PR to have no
//!   human comment).
//! - Detection rate = the weighted mean of recall, and false-positive rate = the weighted mean
//!   of hallucination, with the same weights (Lightsout's choice: one weighting for every rate).
//!   The other means given (precision, alignment, actionability, redundancy) use them too.
//! - PRs whose agent output failed to parse or was empty, and judge fallbacks, stay in every
//!   mean with the composite they scored (0, or halved), and are counted.
//! - Groups: overall, by context configuration (`config_A`/`B`/`C`, or [`NO_CONTEXT`]), by
//!   difficulty (or [`UNKNOWN_DIFFICULTY`]), and by configuration × difficulty.
//! - Sums are taken over the terms sorted by value, so a result does not depend on the order
//!   of the PRs, to the last bit.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{AgentOutputStatus, PrScores, ProtocolReading, SimilarityKind};
use crate::api::ContextConfig;

/// The group key of PRs reviewed without a context configuration.
pub const NO_CONTEXT: &str = "none";
/// The group key of PRs with no difficulty.
pub const UNKNOWN_DIFFICULTY: &str = "unknown";

/// What aggregation needs of one PR's verdict ([`super::PrVerdict::outcome`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrOutcome {
    pub prompt_version: String,
    pub reading: ProtocolReading,
    pub similarity: SimilarityKind,
    pub context_config: Option<ContextConfig>,
    pub difficulty: Option<String>,
    pub scores: PrScores,
}

/// The scores of a group of PRs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupScores {
    pub prs: u32,
    /// Σ ln(human comments + 1).
    pub weight: f64,
    /// The weighted mean composite: the benchmark's score.
    pub composite: f64,
    /// The weighted mean recall.
    pub detection_rate: f64,
    /// The weighted mean hallucination rate.
    pub false_positive_rate: f64,
    pub precision: f64,
    pub alignment: f64,
    pub actionability: f64,
    pub redundancy: f64,
    pub parse_failures: u32,
    pub empty_outputs: u32,
    pub judge_fallbacks: u32,
}

/// The protocol's results over many PRs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwePrBenchAggregate {
    /// Judge prompt versions seen (one, unless verdicts of several versions were mixed).
    pub prompt_versions: BTreeSet<String>,
    pub readings: BTreeSet<ProtocolReading>,
    /// Similarities used; contains `lexical` when any PR was matched without embeddings.
    pub similarity: BTreeSet<SimilarityKind>,
    pub overall: GroupScores,
    pub by_context: BTreeMap<String, GroupScores>,
    pub by_difficulty: BTreeMap<String, GroupScores>,
    /// Context configuration → difficulty → scores.
    pub by_context_and_difficulty: BTreeMap<String, BTreeMap<String, GroupScores>>,
}

impl SwePrBenchAggregate {
    /// Whether any PR was matched with the lexical fallback (reports must say so).
    pub fn lexical(&self) -> bool {
        self.similarity.contains(&SimilarityKind::Lexical)
    }
}

/// The PR's weight: ln(human comments + 1).
pub(crate) fn weight(scores: &PrScores) -> f64 {
    (f64::from(scores.human_comments) + 1.0).ln()
}

/// A sum that does not depend on the order of its terms.
fn order_free_sum(mut terms: Vec<f64>) -> f64 {
    terms.sort_by(f64::total_cmp);
    terms.into_iter().sum()
}

fn group(scores: &[&PrScores]) -> GroupScores {
    let weights: Vec<f64> = scores.iter().map(|s| weight(s)).collect();
    let total = order_free_sum(weights.clone());
    let mean = |metric: fn(&PrScores) -> f64| {
        if total <= 0.0 {
            return 0.0;
        }
        let terms = scores.iter().zip(&weights).map(|(s, w)| w * metric(s)).collect();
        (order_free_sum(terms) / total).clamp(0.0, 1.0)
    };
    let count = |keep: fn(&PrScores) -> bool| scores.iter().filter(|s| keep(s)).count() as u32;
    GroupScores {
        prs: scores.len() as u32,
        weight: total,
        composite: mean(|s| s.composite),
        detection_rate: mean(|s| s.recall),
        false_positive_rate: mean(|s| s.hallucination),
        precision: mean(|s| s.precision),
        alignment: mean(|s| s.alignment),
        actionability: mean(|s| s.actionability),
        redundancy: mean(|s| s.redundancy),
        parse_failures: count(|s| s.agent_output == AgentOutputStatus::ParseFailed),
        empty_outputs: count(|s| s.agent_output == AgentOutputStatus::Empty),
        judge_fallbacks: count(|s| s.judge_fallback),
    }
}

/// Aggregates PR outcomes (see the module rules).
pub fn aggregate(outcomes: &[PrOutcome]) -> SwePrBenchAggregate {
    let context_key = |o: &PrOutcome| o.context_config.map_or(NO_CONTEXT, ContextConfig::as_str).to_string();
    let difficulty_key = |o: &PrOutcome| o.difficulty.clone().unwrap_or_else(|| UNKNOWN_DIFFICULTY.to_string());
    let mut by_context: BTreeMap<String, Vec<&PrScores>> = BTreeMap::new();
    let mut by_difficulty: BTreeMap<String, Vec<&PrScores>> = BTreeMap::new();
    let mut crossed: BTreeMap<String, BTreeMap<String, Vec<&PrScores>>> = BTreeMap::new();
    for outcome in outcomes {
        by_context.entry(context_key(outcome)).or_default().push(&outcome.scores);
        by_difficulty.entry(difficulty_key(outcome)).or_default().push(&outcome.scores);
        crossed
            .entry(context_key(outcome))
            .or_default()
            .entry(difficulty_key(outcome))
            .or_default()
            .push(&outcome.scores);
    }
    let all: Vec<&PrScores> = outcomes.iter().map(|o| &o.scores).collect();
    SwePrBenchAggregate {
        prompt_versions: outcomes.iter().map(|o| o.prompt_version.clone()).collect(),
        readings: outcomes.iter().map(|o| o.reading).collect(),
        similarity: outcomes.iter().map(|o| o.similarity).collect(),
        overall: group(&all),
        by_context: by_context.into_iter().map(|(key, scores)| (key, group(&scores))).collect(),
        by_difficulty: by_difficulty.into_iter().map(|(key, scores)| (key, group(&scores))).collect(),
        by_context_and_difficulty: crossed
            .into_iter()
            .map(|(context, rows)| (context, rows.into_iter().map(|(d, scores)| (d, group(&scores))).collect()))
            .collect(),
    }
}
