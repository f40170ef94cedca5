//! One finished trial scored as the reference harness scores its record: the agent's answer
//! read by the harness's extraction, one judge call with the harness's prompts (only when the
//! answer parsed), the harness's similarities and [`evaluate_record`]. What is recorded
//! (`verdicts.json`) is the harness's own `EvalResult` with the judge's answer and what the
//! calls cost.
//!
//! Where the run path must differ from a script on one machine: a provider failure of the judge
//! or the embeddings endpoint (after the client's retries) does not fall back as the harness
//! does (all PLAUSIBLE, or Jaccard); it stops the judging, the calls made are kept, and the
//! trial is judged again later (infrastructure failures are never scored).

use serde::{Deserialize, Serialize};

use super::embeddings::{EmbeddingsBackend, SimilarityKind};
use super::harness::agent::{agent_output_from_answer, parse_failure, AgentOutput};
use super::harness::judge_message::judge_user_message;
use super::harness::prompts::JUDGE_SYSTEM_PROMPT;
use super::harness::similarity::{texts_to_embed, VectorTable};
use super::harness::verdict::JUDGE_MAX_TOKENS;
use super::harness::{
    evaluate_record, judge_output, judge_skipped, Departures, EvalInput, EvalResult, Scoring, Similarity,
};
use super::Metering;
use lightsout_api::{ContextConfig, ModelRef};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{CallError, ChatRequest, Endpoint, ModelClient};

/// The SWE-PRBench judge of a run and how it scores.
#[derive(Debug, Clone)]
pub struct SwePrBenchScorer {
    pub judge: ModelRef,
    pub endpoint: Endpoint,
    pub client: ModelClient,
    /// `None`: the harness's Jaccard fallback.
    pub embeddings: Option<EmbeddingsBackend>,
    pub departures: Departures,
    pub pricing: PricingTable,
}

/// What is recorded of one scored trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrVerdict {
    /// The configuration the agent was shown and the record is scored in.
    pub context_config: ContextConfig,
    pub similarity: SimilarityKind,
    /// The judge's answer as it came, when the judge was asked (the agent's answer parsed).
    pub judge_answer: Option<String>,
    /// `v1.0`, with the harness's suffix when the judge fell back or was skipped.
    pub judge_prompt_version: String,
    /// Every field the harness writes for the record, under its names.
    pub result: EvalResult,
    /// The calls of this judging.
    pub metering: Metering,
    /// Calls of earlier judgings of the same attempt that a provider failure stopped.
    #[serde(default, skip_serializing_if = "Metering::is_zero")]
    pub earlier_judging: Metering,
}

impl PrVerdict {
    /// The record's composite, the harness's `overall_score`.
    pub fn composite(&self) -> f64 {
        self.result.overall_score
    }

    /// The PR's ground-truth comments (its weight is ln(n + 1)).
    pub fn human_comments(&self) -> u32 {
        self.result.total_human_comments
    }

    /// The best rank (1 = the agent's first comment) of a comment matched to a human comment:
    /// recall@k for SWE-PRBench. Ranks are the comments' list indices, which the ids end with.
    pub fn first_hit_rank(&self) -> Option<u32> {
        self.result
            .matched_pairs
            .iter()
            .filter_map(|pair| pair.agent_comment_id.rsplit('_').next()?.parse::<u32>().ok())
            .map(|index| index + 1)
            .min()
    }
}

/// A judging stopped by a provider failure, with the calls that had already succeeded: they
/// were paid for, so they are counted although the trial is not scored.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct JudgingFailed {
    pub error: CallError,
    pub spent: Metering,
}

/// The label of a record's results, as the harness writes it: `<agent>::judge=<judge>`.
pub fn model_label(agent_model: &str, judge_model: &str) -> String {
    format!("{agent_model}::judge={judge_model}")
}

/// The agent's output for a trial that produced no answer (failed, timed out, over budget):
/// the harness's output of a generation that failed.
pub fn no_answer(error: &str) -> AgentOutput {
    AgentOutput {
        raw_response: String::new(),
        comments: Vec::new(),
        parse_success: false,
        parse_error: Some(error.to_string()),
    }
}

/// The agent's output for its final answer, as the harness reads it.
pub fn agent_output(input: &EvalInput, answer: &str) -> AgentOutput {
    agent_output_from_answer(input, answer).unwrap_or_else(|error| parse_failure(answer.to_string(), error))
}

/// Scores a record whose agent output needs no model call (the answer did not parse, or there
/// was none): the judge is skipped as in the harness, and so are embeddings.
pub fn score_unjudged(input: &EvalInput, agent: &AgentOutput, label: &str, departures: Departures) -> EvalResult {
    let judge = judge_skipped(&input.human_comments);
    evaluate_record(input, agent, &judge, &Scoring { similarity: Similarity::Lexical, departures, model: label })
}

impl SwePrBenchScorer {
    pub fn similarity_kind(&self) -> SimilarityKind {
        match self.embeddings {
            None => SimilarityKind::Lexical,
            Some(_) => SimilarityKind::Embeddings,
        }
    }

    /// Scores `agent` on `input` in `config` (see the module docs).
    pub async fn score(
        &self,
        input: &EvalInput,
        config: ContextConfig,
        agent: &AgentOutput,
        agent_model: &str,
    ) -> Result<PrVerdict, JudgingFailed> {
        let label = model_label(agent_model, &self.judge.name);
        let mut metering = Metering::default();
        let (judge, judge_answer) = if agent.parse_success {
            let request = ChatRequest {
                model: self.judge.name.clone(),
                system: Some(JUDGE_SYSTEM_PROMPT.to_string()),
                user: judge_user_message(input, agent),
                reasoning_effort: None,
                max_output_tokens: Some(JUDGE_MAX_TOKENS),
            };
            let completion = self
                .client
                .complete(&self.endpoint, &request)
                .await
                .map_err(|error| JudgingFailed { error, spent: metering })?;
            metering.add_call(&self.judge.name, Some(completion.usage), &self.pricing);
            let judged = judge_output(Ok(&completion.text), agent, &input.human_comments, &self.departures);
            (judged, Some(completion.text))
        } else {
            (judge_skipped(&input.human_comments), None)
        };
        let table = match &self.embeddings {
            Some(backend) if agent.parse_success => {
                let texts = texts_to_embed(input, agent);
                let (vectors, spent) = backend
                    .vectors(&texts, &self.pricing)
                    .await
                    .map_err(|error| JudgingFailed { error, spent: metering })?;
                metering = metering + spent;
                Some(VectorTable(texts.into_iter().zip(vectors).collect()))
            }
            _ => None,
        };
        let similarity = match &table {
            Some(table) => Similarity::Embeddings(table),
            None => Similarity::Lexical,
        };
        let result =
            evaluate_record(input, agent, &judge, &Scoring { similarity, departures: self.departures, model: &label });
        Ok(PrVerdict {
            context_config: config,
            similarity: self.similarity_kind(),
            judge_answer,
            judge_prompt_version: judge.judge_prompt_version.clone(),
            result,
            metering,
            earlier_judging: Metering::default(),
        })
    }
}
