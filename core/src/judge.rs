//! The judge panel (CRBugBench protocol): each of a review's top findings is judged against
//! each ground-truth item by each judge; the panel's vote decides whether the finding identifies
//! the item.
//!
//! Rules, as applied here:
//! - Only the top `k_max` findings (the largest k of recall@k) are judged, in the agent's order.
//! - A judge answers `{"verdict": "yes"|"no", "reason": …}`. An answer that cannot be parsed is
//!   asked again once, with a stricter instruction; a second unparseable answer is a *failed
//!   vote*. Failed votes are recorded and left out of the count.
//! - `majority`: the finding identifies the item when more than half of the valid votes say yes.
//!   A tie is not a match; no valid vote is not a match.
//! - `unanimous`: every valid vote says yes (and there is at least one).
//! - The item is caught at the best (lowest) rank whose finding the panel matched to it; the
//!   task is hit at k when any of its items is caught at a rank ≤ k.
//! - A judge call that fails for infrastructure reasons (provider 5xx, unreachable, after the
//!   client's retries) fails the judging of the whole trial, which is retried later: an outage
//!   is never turned into "no" votes.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};

use crate::api::{ModelRef, VoteRule};
use crate::dataset::TruthItem;
use crate::findings::Finding;
use crate::model::{CallError, ChatRequest, Endpoint, ModelClient, Usage};
use crate::pricing::PricingTable;

/// Recorded with every verdict; bump when the judge prompt's text changes.
pub const JUDGE_PROMPT_VERSION: &str = "crbugbench-judge/v1";

const JUDGE_SYSTEM: &str = "You are a code review judge. You decide whether a code review finding identifies \
a known bug: the same underlying defect, even if it is phrased differently or proposes another fix. \
A finding about a different problem in the same place does not identify it.";

const STRICT_REMINDER: &str = "Your previous answer could not be read. Answer with the JSON object only, \
exactly {\"verdict\": \"yes\"} or {\"verdict\": \"no\"} with an optional \"reason\" field, and no other text.";

/// One judge: a model at a provider.
#[derive(Debug, Clone)]
pub struct Judge {
    pub model: ModelRef,
    pub endpoint: Endpoint,
}

#[derive(Debug, Clone)]
pub struct Panel {
    pub judges: Vec<Judge>,
    pub vote: VoteRule,
    pub client: ModelClient,
    pub pricing: PricingTable,
    /// Judge calls in flight at once for one trial.
    pub concurrency: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VoteValue {
    Yes,
    No,
    /// Unparseable after the retry; not counted.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    pub rank: u32,
    pub truth_id: String,
    pub judge: String,
    pub value: VoteValue,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The judge's raw answer, kept so a verdict can be audited and re-scored.
    pub answer: String,
    pub attempts: u32,
}

/// The panel's decision on one (finding, item) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairDecision {
    pub rank: u32,
    pub truth_id: String,
    pub yes: u32,
    pub no: u32,
    pub failed: u32,
    pub matched: bool,
}

/// Everything the panel said about one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialVerdicts {
    pub prompt_version: String,
    pub vote_rule: VoteRule,
    pub judges: Vec<String>,
    pub judged_findings: u32,
    pub truth_items: u32,
    pub votes: Vec<Vote>,
    pub decisions: Vec<PairDecision>,
    /// Ground-truth item → the best rank that caught it.
    pub caught: BTreeMap<String, u32>,
    /// The best rank at which any item was caught.
    pub first_hit_rank: Option<u32>,
    pub usage: Usage,
    #[serde(rename = "cost_usd")]
    pub cost_usd: f64,
    /// Judge calls whose model has no price; their cost is not in `cost_usd`.
    pub unpriced_calls: u32,
    pub calls: u32,
}

impl TrialVerdicts {
    pub fn hit_at(&self, k: u32) -> bool {
        self.first_hit_rank.is_some_and(|rank| rank <= k)
    }
}

/// Decides a pair from its votes under `rule` (see the module rules).
pub fn decide(rule: VoteRule, votes: &[VoteValue]) -> bool {
    let yes = votes.iter().filter(|v| **v == VoteValue::Yes).count();
    let no = votes.iter().filter(|v| **v == VoteValue::No).count();
    match rule {
        VoteRule::Majority => yes > no,
        VoteRule::Unanimous => yes > 0 && no == 0,
    }
}

/// Reads a judge's answer: the first JSON object in it with a `verdict` of yes/no (or
/// true/false). Anything else is `None`.
pub fn parse_answer(answer: &str) -> Option<(VoteValue, String)> {
    let text = answer.trim();
    for (start, _) in text.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
        let Some(Ok(value)) = stream.next() else { continue };
        let verdict = match value.get("verdict") {
            Some(serde_json::Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "yes" | "match" | "true" => Some(VoteValue::Yes),
                "no" | "no match" | "false" => Some(VoteValue::No),
                _ => None,
            },
            Some(serde_json::Value::Bool(b)) => Some(if *b { VoteValue::Yes } else { VoteValue::No }),
            _ => None,
        };
        if let Some(verdict) = verdict {
            let reason = value.get("reason").and_then(|r| r.as_str()).unwrap_or_default().to_string();
            return Some((verdict, reason));
        }
    }
    None
}

fn judge_prompt(finding: &Finding, item: &TruthItem) -> String {
    let location = match (&item.file, item.line) {
        (Some(file), Some(line)) => format!("\nLocation: {file}:{line}"),
        (Some(file), None) => format!("\nLocation: {file}"),
        _ => String::new(),
    };
    format!(
        "<ground_truth>\n{}{location}\n</ground_truth>\n\n<finding>\n{}\n</finding>\n\n\
         Does the finding identify the bug in <ground_truth>? Answer with a JSON object only: \
         {{\"verdict\": \"yes\" or \"no\", \"reason\": \"one sentence\"}}.",
        item.text.trim(),
        finding.body.trim()
    )
}

struct CallOutcome {
    vote: Vote,
    usage: Usage,
    cost: Option<f64>,
    calls: u32,
}

impl Panel {
    /// Judges the top `k_max` findings against every item.
    pub async fn judge(
        &self,
        findings: &[Finding],
        truth: &[TruthItem],
        k_max: u32,
    ) -> Result<TrialVerdicts, CallError> {
        let top: Vec<&Finding> = findings.iter().filter(|f| f.rank <= k_max).collect();
        let mut jobs = Vec::new();
        for finding in &top {
            for item in truth {
                for judge in &self.judges {
                    jobs.push((*finding, item, judge));
                }
            }
        }
        let outcomes: Vec<Result<CallOutcome, CallError>> = stream::iter(jobs)
            .map(|(finding, item, judge)| self.ask(judge, finding, item))
            .buffered(self.concurrency.max(1))
            .collect()
            .await;

        let mut votes = Vec::new();
        let mut usage = Usage::default();
        let mut cost_usd = 0.0;
        let mut unpriced_calls = 0;
        let mut calls = 0;
        for outcome in outcomes {
            let outcome = outcome?;
            usage += outcome.usage;
            match outcome.cost {
                Some(cost) => cost_usd += cost,
                None => unpriced_calls += outcome.calls,
            }
            calls += outcome.calls;
            votes.push(outcome.vote);
        }

        let mut decisions = Vec::new();
        let mut caught: BTreeMap<String, u32> = BTreeMap::new();
        for finding in &top {
            for item in truth {
                let pair: Vec<VoteValue> =
                    votes.iter().filter(|v| v.rank == finding.rank && v.truth_id == item.id).map(|v| v.value).collect();
                let matched = decide(self.vote, &pair);
                let count = |value| pair.iter().filter(|v| **v == value).count() as u32;
                decisions.push(PairDecision {
                    rank: finding.rank,
                    truth_id: item.id.clone(),
                    yes: count(VoteValue::Yes),
                    no: count(VoteValue::No),
                    failed: count(VoteValue::Failed),
                    matched,
                });
                if matched {
                    let best = caught.entry(item.id.clone()).or_insert(finding.rank);
                    *best = (*best).min(finding.rank);
                }
            }
        }
        Ok(TrialVerdicts {
            prompt_version: JUDGE_PROMPT_VERSION.to_string(),
            vote_rule: self.vote,
            judges: self.judges.iter().map(|j| j.model.name.clone()).collect(),
            judged_findings: top.len() as u32,
            truth_items: truth.len() as u32,
            first_hit_rank: caught.values().copied().min(),
            votes,
            decisions,
            caught,
            usage,
            cost_usd,
            unpriced_calls,
            calls,
        })
    }

    /// One judge's vote on one pair, with one stricter retry when the answer is unreadable.
    async fn ask(&self, judge: &Judge, finding: &Finding, item: &TruthItem) -> Result<CallOutcome, CallError> {
        let prompt = judge_prompt(finding, item);
        let mut usage = Usage::default();
        let mut cost = Some(0.0);
        let mut answer = String::new();
        for attempt in 1..=2u32 {
            let user = if attempt == 1 { prompt.clone() } else { format!("{prompt}\n\n{STRICT_REMINDER}") };
            let request = ChatRequest {
                model: judge.model.name.clone(),
                system: Some(JUDGE_SYSTEM.to_string()),
                user,
                reasoning_effort: None,
                max_output_tokens: Some(1024),
            };
            let completion = self.client.complete(&judge.endpoint, &request).await?;
            usage += completion.usage;
            cost = match (cost, self.pricing.cost(&judge.model.name, &completion.usage)) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            answer = completion.text;
            if let Some((value, reason)) = parse_answer(&answer) {
                let vote = Vote {
                    rank: finding.rank,
                    truth_id: item.id.clone(),
                    judge: judge.model.name.clone(),
                    value,
                    reason,
                    answer,
                    attempts: attempt,
                };
                return Ok(CallOutcome { vote, usage, cost, calls: attempt });
            }
        }
        let vote = Vote {
            rank: finding.rank,
            truth_id: item.id.clone(),
            judge: judge.model.name.clone(),
            value: VoteValue::Failed,
            reason: String::new(),
            answer,
            attempts: 2,
        };
        Ok(CallOutcome { vote, usage, cost, calls: 2 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use VoteValue::*;

    #[test]
    fn majority_of_valid_votes_and_ties_are_not_matches() {
        assert!(decide(VoteRule::Majority, &[Yes, Yes, No]));
        assert!(!decide(VoteRule::Majority, &[Yes, No, Failed]));
        assert!(decide(VoteRule::Majority, &[Yes, Failed, Failed]));
        assert!(!decide(VoteRule::Majority, &[Failed, Failed, Failed]));
        assert!(!decide(VoteRule::Majority, &[]));
        assert!(decide(VoteRule::Unanimous, &[Yes, Yes, Failed]));
        assert!(!decide(VoteRule::Unanimous, &[Yes, Yes, No]));
    }

    #[test]
    fn answers_are_read_leniently_but_not_guessed() {
        assert_eq!(parse_answer(r#"{"verdict": "yes", "reason": "same bug"}"#), Some((Yes, "same bug".into())));
        assert_eq!(parse_answer("Sure.\n```json\n{\"verdict\":\"NO\"}\n```").map(|a| a.0), Some(No));
        assert_eq!(parse_answer(r#"{"verdict": true}"#).map(|a| a.0), Some(Yes));
        assert_eq!(parse_answer("I think it's probably a match."), None);
        assert_eq!(parse_answer(r#"{"verdict": "maybe"}"#), None);
    }
}
