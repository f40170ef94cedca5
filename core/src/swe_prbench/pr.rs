//! Judging and scoring one PR end to end, and the verdict recorded for it (`verdicts.json`).

use serde::{Deserialize, Serialize};

use super::{
    cap_diff, cluster_duplicates, final_labels, judge_prompt, match_comments, score_pr, DiffStats, JudgeFallback,
    JudgeLabel, JudgingFailed, Label, Location, MatchStage, MatchedPair, Metering, PrScores, PrSimilarity,
    ProtocolReading, ScoreInput, SimilarityBackend, SimilarityKind, SwePrBenchJudge, DIFF_CAP_CHARS,
    SWE_PRBENCH_JUDGE_PROMPT_VERSION,
};
use crate::api::ContextConfig;
use crate::dataset::{GroundTruth, HumanComment, Task};
use crate::findings::{parse_swe_prbench_answer, Finding, ParsedReview, ReviewFormat};
use crate::pricing::PricingTable;

/// What became of the agent's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentOutputStatus {
    /// At least one comment.
    Parsed,
    /// Blank output, or an explicit empty list: scored 0.
    Empty,
    /// Not JSON, or structured output without a single usable comment: scored 0.
    ParseFailed,
}

/// The agent's comments on a PR.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutput {
    pub status: AgentOutputStatus,
    /// In the agent's order (at most 30); empty unless `Parsed`.
    pub comments: Vec<Finding>,
    pub parse_error: Option<String>,
}

impl AgentOutput {
    /// Reads the agent's answer as the SWE-PRBench prompt's review ([`parse_swe_prbench_answer`],
    /// the reference harness's extraction): the same reading as `findings.json`'s.
    pub fn from_text(text: &str) -> AgentOutput {
        AgentOutput::from_parsed_review(&parse_swe_prbench_answer(text))
    }

    /// From a review the worker already parsed (`findings.json`): JSON findings count; a
    /// markdown review is not the protocol's JSON answer, so it is a parse failure.
    pub fn from_parsed_review(review: &ParsedReview) -> AgentOutput {
        match review.format {
            ReviewFormat::Json => AgentOutput::from_comments(review.findings.clone()),
            ReviewFormat::Empty => {
                AgentOutput { status: AgentOutputStatus::Empty, comments: Vec::new(), parse_error: None }
            }
            ReviewFormat::Unparseable => AgentOutput {
                status: AgentOutputStatus::ParseFailed,
                comments: Vec::new(),
                parse_error: review.warnings.first().cloned(),
            },
            ReviewFormat::Markdown => AgentOutput {
                status: AgentOutputStatus::ParseFailed,
                comments: Vec::new(),
                parse_error: Some("the review is markdown, not the JSON comment list the protocol asks for".into()),
            },
        }
    }

    fn from_comments(comments: Vec<Finding>) -> AgentOutput {
        let status = if comments.is_empty() { AgentOutputStatus::Empty } else { AgentOutputStatus::Parsed };
        AgentOutput { status, comments, parse_error: None }
    }
}

/// The human comments of a SWE-PRBench ground truth; `None` for other kinds.
pub fn human_comments(truth: &GroundTruth) -> Option<&[HumanComment]> {
    match truth {
        GroundTruth::ReviewComments { comments, .. } => Some(comments),
        GroundTruth::Bugs { .. } => None,
    }
}

/// One PR to judge.
#[derive(Debug, Clone, Copy)]
pub struct PrInput<'a> {
    pub task: &'a Task,
    pub human_comments: &'a [HumanComment],
    /// The context configuration the agent was given (`None`: diff only, no render).
    pub context_config: Option<ContextConfig>,
    pub agent: &'a AgentOutput,
}

/// The judge's exchange for a PR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRecord {
    pub model: String,
    pub attempts: u32,
    /// The last raw answer.
    pub answer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<JudgeFallback>,
    pub metering: Metering,
}

/// An agent comment's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCommentVerdict {
    /// The agent's order, 1-based.
    pub rank: u32,
    #[serde(flatten)]
    pub location: Location,
    /// The judge's label; `None` after a fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_label: Option<Label>,
    /// The human comment id the judge named (CONFIRMED).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_human_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actionability: Option<u8>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// After matching.
    pub label: Label,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_human_id: Option<i64>,
    /// Its duplicate cluster (0-based).
    pub cluster: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HumanCommentStatus {
    Caught,
    Missed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanCommentVerdict {
    pub id: i64,
    #[serde(flatten)]
    pub location: Location,
    pub status: HumanCommentStatus,
    /// The rank of the agent comment that caught it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caught_by_rank: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchRecord {
    pub agent_rank: u32,
    pub human_id: i64,
    pub stage: MatchStage,
    pub cosine: f64,
    pub affinity: f64,
}

/// Everything the protocol decided about one PR (the trial's `verdicts.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrVerdict {
    pub prompt_version: String,
    pub reading: ProtocolReading,
    /// `lexical` when no embedding endpoint was configured: reports must say so.
    pub similarity: SimilarityKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_config: Option<ContextConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_error: Option<String>,
    /// The diff as the judge saw it; `None` when the judge was not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffStats>,
    /// `None` when the judge was not asked (no agent comment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeRecord>,
    pub embeddings: Metering,
    pub agent_comments: Vec<AgentCommentVerdict>,
    pub human_comments: Vec<HumanCommentVerdict>,
    pub matches: Vec<MatchRecord>,
    pub scores: PrScores,
    /// The calls of earlier judgings of this trial that a provider failure stopped (see
    /// [`super::JudgingFailed`]): paid for, so in the trial's spend, but not this verdict's.
    #[serde(default, skip_serializing_if = "Metering::is_zero")]
    pub earlier_judging: Metering,
}

impl PrVerdict {
    /// Judge and embedding calls together.
    pub fn metering(&self) -> Metering {
        self.judge.as_ref().map(|j| j.metering).unwrap_or_default() + self.embeddings
    }

    /// What [`super::aggregate`] needs of this verdict.
    pub fn outcome(&self) -> super::PrOutcome {
        super::PrOutcome {
            prompt_version: self.prompt_version.clone(),
            reading: self.reading,
            similarity: self.similarity,
            context_config: self.context_config,
            difficulty: self.difficulty.clone(),
            scores: self.scores.clone(),
        }
    }
}

/// The matching, labels, clusters and scores of a PR.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub pairs: Vec<MatchedPair>,
    pub labels: Vec<Label>,
    pub clusters: Vec<usize>,
    pub scores: PrScores,
}

/// Matching and scoring without any call: `judged` is the judge's labels, or `None` after a
/// fallback (no matching at all: every human comment MISSED, every agent comment PLAUSIBLE,
/// composite halved). Duplicate clustering does not depend on the judge.
pub fn evaluate_pr(
    status: AgentOutputStatus,
    agent: &[Location],
    human: &[Location],
    judged: Option<&[JudgeLabel]>,
    similarity: &PrSimilarity,
    reading: ProtocolReading,
) -> Evaluation {
    let parsed = status == AgentOutputStatus::Parsed && !agent.is_empty();
    let pairs = match judged {
        Some(labels) if parsed => match_comments(agent, labels, human, &similarity.agent_human, reading),
        _ => Vec::new(),
    };
    let labels = if parsed { final_labels(agent.len(), judged, &pairs) } else { Vec::new() };
    let clusters = if parsed { cluster_duplicates(&similarity.agent_agent) } else { Vec::new() };
    let actionability: Vec<Option<u8>> =
        judged.map(|labels| labels.iter().map(|l| l.actionability).collect()).unwrap_or_default();
    let matched_cosines: Vec<f64> = pairs.iter().map(|p| p.cosine).collect();
    let scores = score_pr(&ScoreInput {
        agent_output: if parsed { AgentOutputStatus::Parsed } else { status },
        human_comments: human.len(),
        labels: &labels,
        actionability: &actionability,
        matched_cosines: &matched_cosines,
        clusters: clusters.iter().max().map_or(0, |c| c + 1),
        judge_fallback: parsed && judged.is_none(),
    });
    Evaluation { pairs, labels, clusters, scores }
}

/// Judges and scores PRs under the protocol.
#[derive(Debug, Clone)]
pub struct SwePrBenchScorer {
    pub judge: SwePrBenchJudge,
    pub similarity: SimilarityBackend,
    pub reading: ProtocolReading,
    pub pricing: PricingTable,
}

impl SwePrBenchScorer {
    /// Judges one PR: one judge call (two when the first answer is unreadable) and one
    /// embeddings call, concurrently; none when the agent's output has no comment. A provider
    /// failure of either is an error (judge the PR again later), never a score; it carries the
    /// usage of the calls that succeeded, the other one's included.
    pub async fn score_pr(&self, pr: &PrInput<'_>) -> Result<PrVerdict, JudgingFailed> {
        let agent = &pr.agent.comments;
        let agent_locations: Vec<Location> =
            agent.iter().map(|f| Location { file: f.file.clone(), line: f.line }).collect();
        let human_locations: Vec<Location> =
            pr.human_comments.iter().map(|c| Location { file: c.path.clone(), line: c.line }).collect();
        let judged = pr.agent.status == AgentOutputStatus::Parsed && !agent.is_empty();

        let (diff, judge_run, (vectors, embeddings)) = if judged {
            let diff = cap_diff(&pr.task.diff, DIFF_CAP_CHARS);
            let prompt = judge_prompt(&pr.task.title, &diff, pr.human_comments, agent);
            let texts: Vec<String> =
                agent.iter().map(|f| f.body.clone()).chain(pr.human_comments.iter().map(|c| c.body.clone())).collect();
            // Both run to their end (not `try_join`): a call cancelled by the other's failure
            // could have been paid for without its usage being known.
            let (judge_run, vectors) = futures::future::join(
                self.judge.label(&prompt, agent.len(), pr.human_comments.len(), &self.pricing),
                self.similarity.vectors(&texts, &self.pricing),
            )
            .await;
            let (judge_run, vectors) = match (judge_run, vectors) {
                (Ok(judge_run), Ok(vectors)) => (judge_run, vectors),
                (Err(mut failed), vectors) => {
                    failed.spent = failed.spent + vectors.map(|(_, metering)| metering).unwrap_or_default();
                    return Err(failed);
                }
                (Ok(judge_run), Err(error)) => return Err(JudgingFailed { error, spent: judge_run.metering }),
            };
            (Some(diff.stats), Some(judge_run), vectors)
        } else {
            (None, None, (Vec::new(), Metering::default()))
        };
        let (agent_vectors, human_vectors) = vectors.split_at(vectors.len().min(agent.len()));
        let similarity = PrSimilarity::from_vectors(agent_vectors, human_vectors);
        let labels = judge_run.as_ref().and_then(|run| run.labels.as_deref());
        let evaluation =
            evaluate_pr(pr.agent.status, &agent_locations, &human_locations, labels, &similarity, self.reading);

        let rank = |a: usize| agent.get(a).map_or(a as u32 + 1, |f| f.rank);
        let human_id = |h: usize| pr.human_comments[h].id;
        let agent_comments = agent
            .iter()
            .enumerate()
            .map(|(a, finding)| {
                let judged = labels.and_then(|l| l.get(a));
                AgentCommentVerdict {
                    rank: finding.rank,
                    location: agent_locations[a].clone(),
                    judge_label: judged.map(|l| l.label),
                    judge_human_id: judged.and_then(|l| l.human).map(human_id),
                    actionability: judged.and_then(|l| l.actionability),
                    reason: judged.map(|l| l.reason.clone()).unwrap_or_default(),
                    label: evaluation.labels.get(a).copied().unwrap_or(Label::Plausible),
                    matched_human_id: evaluation.pairs.iter().find(|p| p.agent == a).map(|p| human_id(p.human)),
                    cluster: evaluation.clusters.get(a).copied().unwrap_or(0) as u32,
                }
            })
            .collect();
        let human_comments = pr
            .human_comments
            .iter()
            .enumerate()
            .map(|(h, comment)| {
                let pair = evaluation.pairs.iter().find(|p| p.human == h);
                HumanCommentVerdict {
                    id: comment.id,
                    location: human_locations[h].clone(),
                    status: if pair.is_some() { HumanCommentStatus::Caught } else { HumanCommentStatus::Missed },
                    caught_by_rank: pair.map(|p| rank(p.agent)),
                }
            })
            .collect();
        let matches = evaluation
            .pairs
            .iter()
            .map(|p| MatchRecord {
                agent_rank: rank(p.agent),
                human_id: human_id(p.human),
                stage: p.stage,
                cosine: p.cosine,
                affinity: p.affinity,
            })
            .collect();
        Ok(PrVerdict {
            prompt_version: SWE_PRBENCH_JUDGE_PROMPT_VERSION.to_string(),
            reading: self.reading,
            similarity: self.similarity.kind(),
            embedding_model: self.similarity.model().map(str::to_string),
            task_id: pr.task.id.clone(),
            context_config: pr.context_config,
            difficulty: pr.task.difficulty.clone(),
            parse_error: pr.agent.parse_error.clone(),
            diff,
            judge: judge_run.map(|run| JudgeRecord {
                model: self.judge.model.name.clone(),
                attempts: run.attempts,
                answer: run.answer,
                fallback: run.fallback,
                metering: run.metering,
            }),
            embeddings,
            agent_comments,
            human_comments,
            matches,
            scores: evaluation.scores,
            earlier_judging: Metering::default(),
        })
    }
}
