//! Scoring one finished trial under the run's protocol, and what is recorded of it
//! (`verdicts.json`).
//!
//! - **CRBugBench** ([`crate::judge`]): every judge of the panel votes on each of the top `k_max`
//!   findings against each ground-truth item; recall@k.
//! - **SWE-PRBench** ([`lightsout_swe_prbench`]): the protocol is single-judge, so the *first* judge of
//!   the panel labels the comments; the others are not asked (their votes would not enter the
//!   score, and the published numbers come from one judge). recall@k is also given for it: a task
//!   is hit at k when one of the agent's first k comments was matched to a human comment.
//!
//! The protocol in force is `spec.judges.protocol`, by default the dataset format's own.

use std::collections::BTreeMap;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::dataset::LoadedTask;
use crate::findings::ParsedReview;
use crate::judge::{Judge, Panel, TrialVerdicts};
use lightsout_api::{ContextConfig, EvaluationRunSpec, ScoringProtocol};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{Endpoint, ModelClient, Usage};
use lightsout_swe_prbench::harness::agent::parse_failure;
use lightsout_swe_prbench::harness::AgentOutput;
use lightsout_swe_prbench::scorer::{agent_output, no_answer};
use lightsout_swe_prbench::{EmbeddingsBackend, Metering, PrVerdict, SwePrBenchScorer};

/// A trial's verdicts under either protocol, tagged with it in `verdicts.json`.
// Not boxed: CRBugBench verdicts are the common case (a controller holds one per trial), so the
// enum's size is theirs anyway; boxing would add an allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "protocol")]
pub enum Verdicts {
    #[serde(rename = "crbugbench")]
    CrBugBench(TrialVerdicts),
    #[serde(rename = "swe-prbench")]
    SwePrBench(Box<PrVerdict>),
    /// A SWE-PRBench judging a provider failure stopped: the trial is unjudged and judged again
    /// later; the calls that succeeded are in its spend.
    #[serde(rename = "swe-prbench-unjudged")]
    SwePrBenchUnjudged(UnjudgedPr),
}

/// What is kept of a SWE-PRBench judging that a provider failure stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnjudgedPr {
    /// The failure, for the operator.
    pub error: String,
    /// Every successful call of this trial's judgings so far.
    pub spent: Metering,
}

// Verdicts written before the protocol tag existed are CRBugBench panels.
impl<'de> Deserialize<'de> for Verdicts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = serde_json::Value::deserialize(deserializer)?;
        let protocol = match value.as_object_mut() {
            Some(object) => object.remove("protocol"),
            None => return Err(D::Error::custom("verdicts must be a JSON object")),
        };
        match protocol.as_ref().and_then(|p| p.as_str()) {
            None | Some("crbugbench") => {
                serde_json::from_value(value).map(Verdicts::CrBugBench).map_err(D::Error::custom)
            }
            Some("swe-prbench") => {
                serde_json::from_value(value).map(|v| Verdicts::SwePrBench(Box::new(v))).map_err(D::Error::custom)
            }
            Some("swe-prbench-unjudged") => {
                serde_json::from_value(value).map(Verdicts::SwePrBenchUnjudged).map_err(D::Error::custom)
            }
            Some(other) => Err(D::Error::custom(format!("unknown verdicts protocol {other:?}"))),
        }
    }
}

/// Judge calls and their cost, for one trial.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JudgeSpend {
    pub calls: u32,
    pub usage: Usage,
    pub cost_usd: f64,
    /// Calls whose cost is unknown (no price); not in `cost_usd`.
    pub unpriced_calls: u32,
}

impl JudgeSpend {
    /// The calls of `self` that are not in `earlier`, which they include (verdicts judged again
    /// carry the spend of the verdicts they were judged from).
    pub fn since(self, earlier: JudgeSpend) -> JudgeSpend {
        let usage = Usage {
            input_tokens: self.usage.input_tokens.saturating_sub(earlier.usage.input_tokens),
            output_tokens: self.usage.output_tokens.saturating_sub(earlier.usage.output_tokens),
            cached_read_tokens: self.usage.cached_read_tokens.saturating_sub(earlier.usage.cached_read_tokens),
            cache_write_tokens: self.usage.cache_write_tokens.saturating_sub(earlier.usage.cache_write_tokens),
            reasoning_tokens: self.usage.reasoning_tokens.saturating_sub(earlier.usage.reasoning_tokens),
        };
        JudgeSpend {
            calls: self.calls.saturating_sub(earlier.calls),
            usage,
            cost_usd: (self.cost_usd - earlier.cost_usd).max(0.0),
            unpriced_calls: self.unpriced_calls.saturating_sub(earlier.unpriced_calls),
        }
    }
}

impl Verdicts {
    /// The spend of the calls made for these verdicts and not for `previous`, the stored
    /// verdicts they were judged again from: what a meter that already counted `previous` adds.
    pub fn spend_since(&self, previous: Option<&Verdicts>) -> JudgeSpend {
        match previous {
            Some(previous) if previous.protocol() == self.protocol() => self.spend().since(previous.spend()),
            _ => self.spend(),
        }
    }

    pub fn protocol(&self) -> ScoringProtocol {
        match self {
            Verdicts::CrBugBench(_) => ScoringProtocol::CrBugBench,
            Verdicts::SwePrBench(_) | Verdicts::SwePrBenchUnjudged(_) => ScoringProtocol::SwePrBench,
        }
    }

    /// The best (lowest) rank of a finding that caught a ground-truth item.
    pub fn first_hit_rank(&self) -> Option<u32> {
        match self {
            Verdicts::CrBugBench(v) => v.first_hit_rank,
            Verdicts::SwePrBench(v) => v.first_hit_rank(),
            Verdicts::SwePrBenchUnjudged(_) => None,
        }
    }

    pub fn hit_at(&self, k: u32) -> bool {
        self.first_hit_rank().is_some_and(|rank| rank <= k)
    }

    /// Whether the trial is judged: false while missing judge votes leave a CRBugBench pair
    /// undecided (see [`crate::judge`]) or a SWE-PRBench judging was stopped by a provider
    /// failure; such a trial is not scored and is judged again.
    pub fn is_complete(&self) -> bool {
        match self {
            Verdicts::CrBugBench(v) => v.is_complete(),
            Verdicts::SwePrBench(_) => true,
            Verdicts::SwePrBenchUnjudged(_) => false,
        }
    }

    pub fn spend(&self) -> JudgeSpend {
        match self {
            Verdicts::CrBugBench(v) => {
                JudgeSpend { calls: v.calls, usage: v.usage, cost_usd: v.cost_usd, unpriced_calls: v.unpriced_calls }
            }
            Verdicts::SwePrBenchUnjudged(v) => {
                let m = v.spent;
                JudgeSpend { calls: m.calls, usage: m.usage, cost_usd: m.cost_usd, unpriced_calls: m.unpriced_calls }
            }
            Verdicts::SwePrBench(v) => {
                let m = v.metering + v.earlier_judging;
                JudgeSpend { calls: m.calls, usage: m.usage, cost_usd: m.cost_usd, unpriced_calls: m.unpriced_calls }
            }
        }
    }
}

/// Scores finished trials under one protocol.
#[derive(Debug, Clone)]
pub enum Scorer {
    CrBugBench {
        panel: Panel,
        k_max: u32,
    },
    /// `context_config`: the run's `agent.contextConfig`, the configuration of every trial
    /// unless it has one of the `matrix.contextConfigs` axis ([`Scorer::score_in_context`]).
    SwePrBench {
        scorer: Box<SwePrBenchScorer>,
        context_config: Option<ContextConfig>,
    },
}

impl Scorer {
    /// The scorer a run's spec asks for, with judges at `endpoints` (by provider name); `None`
    /// when the panel is empty (reviews are collected, not scored).
    pub fn from_spec(
        spec: &EvaluationRunSpec,
        endpoints: &BTreeMap<String, Endpoint>,
        client: &ModelClient,
        pricing: &PricingTable,
    ) -> anyhow::Result<Option<Scorer>> {
        let judges = &spec.judges;
        if judges.panel.is_empty() {
            return Ok(None);
        }
        let endpoint_of = |provider: &str, field: &str| {
            endpoints
                .get(provider)
                .cloned()
                .with_context(|| format!("{field}: provider {provider:?} is not in spec.providers"))
        };
        match judges.protocol_for(spec.dataset.format) {
            ScoringProtocol::CrBugBench => {
                let panel = judges
                    .panel
                    .iter()
                    .map(|model| {
                        Ok(Judge { model: model.clone(), endpoint: endpoint_of(&model.provider, "spec.judges.panel")? })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let k_max = judges.k.iter().copied().max().unwrap_or(5).max(1) as u32;
                Ok(Some(Scorer::CrBugBench {
                    panel: Panel {
                        judges: panel,
                        vote: judges.vote,
                        client: client.clone(),
                        pricing: pricing.clone(),
                        concurrency: 8,
                    },
                    k_max,
                }))
            }
            ScoringProtocol::SwePrBench => {
                let model = &judges.panel[0];
                let embeddings = match &judges.swe_prbench.embeddings {
                    None => None,
                    Some(embeddings) => Some(EmbeddingsBackend {
                        endpoint: endpoint_of(&embeddings.provider, "spec.judges.swePrbench.embeddings")?,
                        model: embeddings.name.clone(),
                        client: client.clone(),
                    }),
                };
                Ok(Some(Scorer::SwePrBench {
                    scorer: Box::new(SwePrBenchScorer {
                        judge: model.clone(),
                        endpoint: endpoint_of(&model.provider, "spec.judges.panel")?,
                        client: client.clone(),
                        embeddings,
                        departures: judges.swe_prbench.departures_in_force(),
                        pricing: pricing.clone(),
                    }),
                    context_config: spec.agent.context_config,
                }))
            }
        }
    }

    /// Scores one trial's parsed review against its task's ground truth. `previous`: the same
    /// attempt's stored verdicts, when they are incomplete: a CRBugBench panel keeps their answered
    /// votes and asks the missing ones. A CRBugBench panel records a failed judge call as a
    /// missing vote ([`crate::judge`]); a provider failure of the SWE-PRBench judge or embeddings
    /// gives [`Verdicts::SwePrBenchUnjudged`] with the calls that succeeded, and the trial is
    /// judged again later (the new verdicts carry `previous`'s spend, so each call counts once).
    pub async fn score(
        &self,
        task: &LoadedTask,
        review: &ParsedReview,
        previous: Option<&Verdicts>,
        agent_model: &str,
    ) -> Result<Verdicts, ScoreError> {
        self.score_in_context(task, None, review, previous, agent_model).await
    }

    /// [`Scorer::score`] for a trial of the `matrix.contextConfigs` axis in configuration
    /// `context` (`None`: the run's own, as [`Scorer::score`]); SWE-PRBench verdicts record it,
    /// and the summary groups by it. `agent_model` labels SWE-PRBench results as the harness does.
    pub async fn score_in_context(
        &self,
        task: &LoadedTask,
        context: Option<ContextConfig>,
        review: &ParsedReview,
        previous: Option<&Verdicts>,
        agent_model: &str,
    ) -> Result<Verdicts, ScoreError> {
        match self {
            Scorer::CrBugBench { panel, k_max } => {
                let previous = match previous {
                    Some(Verdicts::CrBugBench(previous)) => Some(previous),
                    _ => None,
                };
                let truth = task.truth.items();
                Ok(Verdicts::CrBugBench(panel.judge_again(&review.findings, &truth, *k_max, previous).await))
            }
            Scorer::SwePrBench { scorer, context_config } => {
                let config = crate::dataset::swe_prbench::config_or_default(context.or(*context_config));
                let input = crate::dataset::swe_prbench::eval_input(&task.task, config, &task.truth)
                    .ok_or_else(|| ScoreError::NoSwePrBenchInput { task: task.task.id.clone(), config })?;
                let agent = swe_prbench_agent_output(&input, review);
                let earlier = match previous {
                    Some(previous @ Verdicts::SwePrBenchUnjudged(_)) => previous.spend(),
                    _ => JudgeSpend::default(),
                };
                let earlier = Metering {
                    calls: earlier.calls,
                    usage: earlier.usage,
                    cost_usd: earlier.cost_usd,
                    unpriced_calls: earlier.unpriced_calls,
                };
                Ok(match scorer.score(&input, config, &agent, agent_model).await {
                    Ok(verdict) => Verdicts::SwePrBench(Box::new(PrVerdict { earlier_judging: earlier, ..verdict })),
                    Err(failed) => Verdicts::SwePrBenchUnjudged(UnjudgedPr {
                        error: failed.error.to_string(),
                        spent: earlier + failed.spent,
                    }),
                })
            }
        }
    }
}

/// The harness's agent output for a stored review: the `swe-prbench` prompt's answer as the
/// worker kept it; any other review is not the JSON comment list the protocol reads.
fn swe_prbench_agent_output(input: &lightsout_swe_prbench::harness::EvalInput, review: &ParsedReview) -> AgentOutput {
    match &review.swe_prbench {
        Some(answer) => match &answer.parse_error {
            None => agent_output(input, &answer.raw_response),
            Some(error) => parse_failure(answer.raw_response.clone(), error.clone()),
        },
        None => no_answer("the review is not the JSON comment list of the swe-prbench prompt"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error(
        "task {task}: the SWE-PRBench protocol scores a context file ({}) against human review comments, and this \
         task has no such context or has ground-truth bugs; use judges.protocol: crbugbench", config.as_str()
    )]
    NoSwePrBenchInput { task: String, config: ContextConfig },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_without_a_protocol_tag_are_crbugbench() {
        let old = r#"{"prompt_version":"crbugbench-judge/v1","vote_rule":"majority","judges":["a"],
            "judged_findings":1,"truth_items":1,"votes":[],"decisions":[],"caught":{"bug-1":2},
            "first_hit_rank":2,"usage":{"input_tokens":1,"output_tokens":1,"cached_read_tokens":0,
            "cache_write_tokens":0,"reasoning_tokens":0},"cost_usd":0.5,"unpriced_calls":0,"calls":3}"#;
        let verdicts: Verdicts = serde_json::from_str(old).unwrap();
        assert_eq!(verdicts.protocol(), ScoringProtocol::CrBugBench);
        assert!(verdicts.hit_at(2) && !verdicts.hit_at(1));
        let again: Verdicts = serde_json::from_slice(&serde_json::to_vec(&verdicts).unwrap()).unwrap();
        assert_eq!(again, verdicts);
        assert!(serde_json::to_string(&verdicts).unwrap().contains(r#""protocol":"crbugbench""#));
        let unknown = r#"{"protocol":"other"}"#;
        assert!(serde_json::from_str::<Verdicts>(unknown).unwrap_err().to_string().contains("other"));
    }
}
