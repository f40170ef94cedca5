//! The SWE-PRBench scoring protocol: one judge call per PR labels the agent's comments against
//! the human review comments, a one-to-one matching decides which human comments were caught,
//! and eight per-PR metrics combine into a composite that is aggregated with log weights.
//!
//! Every rule is implemented beside its documentation; this overview says where.
//!
//! # Inputs
//! - **Agent output** ([`AgentOutput`]): parsed with [`crate::findings::parse_json_findings`],
//!   which is the reference harness's extraction ([`harness::agent`]). Output that does not
//!   parse is a *parse failure* and blank output or an explicit `[]` is *empty*; both score 0
//!   without any judge call.
//!
//! [`harness`] scores a record exactly as the reference harness does, end to end (dataset
//! layout, judge answer schema and fallbacks, matching, every per-record field and the
//! aggregates), proven against the harness's own outputs by `core/tests/swe_prbench_golden.rs`.
//! The run path below does not use it yet beyond the agent's extraction.
//! - **Ground truth**: the human comments of [`crate::dataset::GroundTruth::ReviewComments`]
//!   (the loader already keeps the `substantive_comment_ids`, or else the initiating comments).
//!
//! # The judge ([`SwePrBenchJudge`], [`judge_prompt`], [`parse_judge_answer`])
//! One call per PR over all agent comments at once. The judge sees the PR title, the diff capped
//! at 12,000 characters with non-test files first ([`cap_diff`], test files per
//! [`is_test_file`]), the human comments and the agent comments, and labels each agent comment
//! CONFIRMED (same underlying issue as a human comment it names), PLAUSIBLE (correct but
//! unmatched; never a hallucination) or FABRICATED (wrong facts, or code not in what it was
//! shown), with an actionability score 1–5. An unreadable answer is asked again once with a
//! stricter instruction; a second unreadable answer, or an answer that labels fewer comments than
//! it was given, makes the PR fall back: all agent comments PLAUSIBLE, all human comments
//! MISSED, composite halved. Provider failures are errors: the PR is judged again later.
//!
//! # Similarity ([`SimilarityBackend`])
//! Cosine similarity of embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (all of
//! a PR's texts in one call), or, when none is configured, of lexical term-frequency vectors
//! ([`lexical_terms`]). Every verdict records which ([`SimilarityKind`]) so reports can say so.
//!
//! # Matching ([`match_comments`], [`cluster_duplicates`])
//! Stage 1 takes the judge's CONFIRMED pairs, stage 2 pairs the rest by affinity (cosine plus
//! file and line bonuses, kept at ≥ 0.30); both greedy and one-to-one. Matched agent comments
//! are CONFIRMED, unmatched non-fabricated ones PLAUSIBLE. Duplicates are clustered at cosine
//! ≥ 0.65.
//!
//! # Scores ([`PrScores`], [`aggregate`])
//! recall, precision, efficiency, hallucination, redundancy, plausible penalty, actionability
//! and semantic alignment per PR, combined into the composite; aggregated as means weighted by
//! ln(human comments + 1), overall, by context configuration, by difficulty and crossed.
//!
//! # Paper and harness
//! Where the paper's text and the released harness differ, [`ProtocolReading::Harness`] (the
//! default) follows the harness and [`ProtocolReading::Paper`] the paper. The differences:
//!
//! 1. **Stage 2 and FABRICATED comments.** The harness offers every agent comment left unmatched
//!    by stage 1 to stage 2, a comment the judge called FABRICATED included, and counts a
//!    stage-2 match as CONFIRMED. The paper's stage 2 considers only non-fabricated comments.
//!    Hallucination counts *final* labels under both readings, so under the harness a
//!    FABRICATED comment matched in stage 2 is not a hallucination (under the paper it cannot
//!    be matched, so it always is).
//!
//! Points neither text pins down are Lightsout's choices, each documented where it is made (tie
//! breaks, path comparison, float tolerance at thresholds, how unreadable judge entries count).

mod aggregate;
mod diff;
pub mod harness;
mod judge;
mod matching;
mod pr;
mod score;
mod similarity;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::model::{CallError, Usage};
use crate::pricing::PricingTable;

pub use aggregate::{aggregate, GroupScores, PrOutcome, SwePrBenchAggregate, NO_CONTEXT, UNKNOWN_DIFFICULTY};
pub use diff::{cap_diff, is_test_file, CappedDiff, DiffStats, DIFF_CAP_CHARS};
pub use judge::{
    judge_prompt, parse_judge_answer, JudgeAnswer, JudgeFallback, JudgeLabel, JudgeRun, SwePrBenchJudge,
    JUDGE_MAX_OUTPUT_TOKENS, SWE_PRBENCH_JUDGE_PROMPT_VERSION, SWE_PRBENCH_JUDGE_SYSTEM_PREFIX,
};
pub(crate) use judge::{PromptComment, AGENT_COMMENTS_TAG, DIFF_TAG, HUMAN_COMMENTS_TAG};
pub use matching::{
    affinity, cluster_duplicates, final_labels, match_comments, Location, MatchStage, MatchedPair, AFFINITY_THRESHOLD,
    DUPLICATE_THRESHOLD,
};
pub use pr::{
    evaluate_pr, human_comments, AgentCommentVerdict, AgentOutput, AgentOutputStatus, Evaluation, HumanCommentStatus,
    HumanCommentVerdict, JudgeRecord, MatchRecord, PrInput, PrVerdict, SwePrBenchScorer,
};
pub use score::{score_pr, PrScores, ScoreInput};
pub use similarity::{
    cosine, lexical_terms, lexical_vectors, EmbeddingsBackend, PrSimilarity, SimilarityBackend, SimilarityKind,
};

/// Which text rules where the paper and the released harness differ (see the module docs).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProtocolReading {
    /// The released harness (the default).
    #[default]
    Harness,
    /// The paper's text.
    Paper,
}

/// An agent comment's label: the judge's, or the final one after matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Label {
    /// Raises the same issue as a human comment.
    Confirmed,
    /// Correct but matched to no human comment; never counted as a hallucination.
    Plausible,
    /// Wrong facts, or code that is not in what the judge was shown.
    Fabricated,
}

impl Label {
    /// `"CONFIRMED"`, `"PLAUSIBLE"` or `"FABRICATED"`, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Confirmed => "CONFIRMED",
            Label::Plausible => "PLAUSIBLE",
            Label::Fabricated => "FABRICATED",
        }
    }
}

/// Tokens and cost of model calls (judge or embeddings), metered as [`crate::judge`] does: a
/// call whose model has no price is counted in `unpriced_calls` and left out of `cost_usd`,
/// never priced at 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Metering {
    pub calls: u32,
    pub usage: Usage,
    #[serde(rename = "cost_usd")]
    pub cost_usd: f64,
    pub unpriced_calls: u32,
}

impl Metering {
    /// Adds one call of `model` that used `usage`; `None` usage means the provider reported
    /// none, so its cost is unknown.
    pub fn add_call(&mut self, model: &str, usage: Option<Usage>, pricing: &PricingTable) {
        self.calls += 1;
        match usage {
            Some(usage) => {
                self.usage += usage;
                match pricing.cost(model, &usage) {
                    Some(cost) => self.cost_usd += cost,
                    None => self.unpriced_calls += 1,
                }
            }
            None => self.unpriced_calls += 1,
        }
    }
}

impl Metering {
    pub fn is_zero(&self) -> bool {
        *self == Metering::default()
    }
}

/// A PR's judging stopped by a provider failure (after the client's retries), with the calls
/// that had already succeeded: they were paid for, so they are counted although the PR is not
/// scored.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct JudgingFailed {
    pub error: CallError,
    pub spent: Metering,
}

impl std::ops::Add for Metering {
    type Output = Metering;
    fn add(self, other: Metering) -> Metering {
        Metering {
            calls: self.calls + other.calls,
            usage: self.usage + other.usage,
            cost_usd: self.cost_usd + other.cost_usd,
            unpriced_calls: self.unpriced_calls + other.unpriced_calls,
        }
    }
}
