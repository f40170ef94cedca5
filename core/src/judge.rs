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
    /// Set only in memory by [`crate::stored::compact_verdicts`], which drops `votes` and
    /// `decisions`: the votes as the rating matrix the judge-agreement statistics read.
    /// Boxed: most verdicts never hold it, and it would make every verdict larger.
    #[serde(skip)]
    pub held_ratings: Option<Box<PanelRatings>>,
}

/// A panel's votes as a rating matrix: one row per judged (finding, ground-truth item) pair, in
/// (rank, item id) order, with one cell per judge of the panel, in panel order: 1 yes, 0 no,
/// `None` for a failed vote (or a judge that did not vote on the pair).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PanelRatings {
    pub judges: usize,
    /// Row-major cells: [`RATING_YES`], [`RATING_NO`] or [`RATING_NONE`].
    cells: Vec<u8>,
}

const RATING_NO: u8 = 0;
const RATING_YES: u8 = 1;
const RATING_NONE: u8 = 2;

impl PanelRatings {
    /// The rows, each padded with `None` to `width` judges (the widest panel of a variant).
    pub fn rows(&self, width: usize) -> impl Iterator<Item = Vec<Option<u32>>> + '_ {
        self.cells.chunks(self.judges.max(1)).map(move |row| {
            let mut cells: Vec<Option<u32>> = row
                .iter()
                .map(|c| match *c {
                    RATING_YES => Some(1),
                    RATING_NO => Some(0),
                    _ => None,
                })
                .collect();
            cells.resize(width.max(cells.len()), None);
            cells
        })
    }
}

impl TrialVerdicts {
    pub fn hit_at(&self, k: u32) -> bool {
        self.first_hit_rank.is_some_and(|rank| rank <= k)
    }

    /// The votes as a rating matrix (see [`PanelRatings`]); votes by a judge not on the panel
    /// are left out.
    pub fn ratings(&self) -> PanelRatings {
        if let Some(held) = &self.held_ratings {
            return (**held).clone();
        }
        let judges = self.judges.len();
        if judges == 0 {
            return PanelRatings::default();
        }
        let mut rows: BTreeMap<(u32, &str), Vec<u8>> = BTreeMap::new();
        for vote in &self.votes {
            let Some(position) = self.judges.iter().position(|j| *j == vote.judge) else { continue };
            let row = rows.entry((vote.rank, vote.truth_id.as_str())).or_insert_with(|| vec![RATING_NONE; judges]);
            row[position] = match vote.value {
                VoteValue::Yes => RATING_YES,
                VoteValue::No => RATING_NO,
                VoteValue::Failed => RATING_NONE,
            };
        }
        PanelRatings { judges, cells: rows.into_values().flatten().collect() }
    }

    /// The verdicts recomputed from the judges' recorded raw answers under `rule`, with no judge
    /// call: each answer is read again with [`parse_answer`] (an unreadable one is a failed vote),
    /// and the pairs are decided again. With the rule they were made under, this reproduces the
    /// stored verdicts exactly; with another rule, it re-scores a finished run for free. (Of
    /// verdicts as read from `verdicts.json`: compacted ones in memory hold no answers.)
    pub fn rescored(&self, rule: VoteRule) -> TrialVerdicts {
        let votes: Vec<Vote> = self
            .votes
            .iter()
            .map(|vote| {
                let (value, reason) = parse_answer(&vote.answer).unwrap_or((VoteValue::Failed, String::new()));
                Vote { value, reason, ..vote.clone() }
            })
            .collect();
        let pairs: Vec<(u32, String)> = self.decisions.iter().map(|d| (d.rank, d.truth_id.clone())).collect();
        let (decisions, caught) = decide_pairs(rule, &pairs, &votes);
        TrialVerdicts {
            vote_rule: rule,
            first_hit_rank: caught.values().copied().min(),
            votes,
            decisions,
            caught,
            ..self.clone()
        }
    }
}

/// Decides each (rank, item) pair from its votes; returns the decisions in `pairs` order and each
/// caught item's best rank.
fn decide_pairs(rule: VoteRule, pairs: &[(u32, String)], votes: &[Vote]) -> (Vec<PairDecision>, BTreeMap<String, u32>) {
    let mut by_pair: BTreeMap<(u32, &str), Vec<VoteValue>> = BTreeMap::new();
    for vote in votes {
        by_pair.entry((vote.rank, vote.truth_id.as_str())).or_default().push(vote.value);
    }
    let mut decisions = Vec::with_capacity(pairs.len());
    let mut caught: BTreeMap<String, u32> = BTreeMap::new();
    for (rank, truth_id) in pairs {
        let pair = by_pair.get(&(*rank, truth_id.as_str())).map(Vec::as_slice).unwrap_or_default();
        let matched = decide(rule, pair);
        let count = |value| pair.iter().filter(|v| **v == value).count() as u32;
        decisions.push(PairDecision {
            rank: *rank,
            truth_id: truth_id.clone(),
            yes: count(VoteValue::Yes),
            no: count(VoteValue::No),
            failed: count(VoteValue::Failed),
            matched,
        });
        if matched {
            let best = caught.entry(truth_id.clone()).or_insert(*rank);
            *best = (*best).min(*rank);
        }
    }
    (decisions, caught)
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
        // The calls' futures are made up front rather than by a closure inside the stream: a
        // closure over borrowed findings makes callers' futures fail rustc's `Send` inference
        // (rust-lang/rust#102211), and the controller runs this inside a spawned reconcile.
        let calls: Vec<_> = jobs.into_iter().map(|(finding, item, judge)| self.ask(judge, finding, item)).collect();
        let outcomes: Vec<Result<CallOutcome, CallError>> =
            stream::iter(calls).buffered(self.concurrency.max(1)).collect().await;

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

        let pairs: Vec<(u32, String)> =
            top.iter().flat_map(|f| truth.iter().map(|item| (f.rank, item.id.clone()))).collect();
        let (decisions, caught) = decide_pairs(self.vote, &pairs, &votes);
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
            held_ratings: None,
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
    fn rescoring_rereads_recorded_answers_and_applies_the_rule() {
        let vote = |rank: u32, judge: &str, answer: &str| Vote {
            rank,
            truth_id: "bug".into(),
            judge: judge.into(),
            value: Failed, // deliberately wrong: rescoring must read the answer again
            reason: String::new(),
            answer: answer.into(),
            attempts: 1,
        };
        let (yes, no, prose) = (r#"{"verdict":"yes"}"#, r#"{"verdict":"no"}"#, "maybe?");
        let stored = TrialVerdicts {
            prompt_version: JUDGE_PROMPT_VERSION.into(),
            vote_rule: VoteRule::Majority,
            judges: vec!["a".into(), "b".into(), "c".into()],
            judged_findings: 2,
            truth_items: 1,
            votes: vec![
                vote(1, "a", yes),
                vote(1, "b", no),
                vote(1, "c", prose),
                vote(2, "a", yes),
                vote(2, "b", yes),
                vote(2, "c", no),
            ],
            decisions: vec![
                PairDecision { rank: 1, truth_id: "bug".into(), yes: 0, no: 0, failed: 0, matched: false },
                PairDecision { rank: 2, truth_id: "bug".into(), yes: 0, no: 0, failed: 0, matched: false },
            ],
            caught: BTreeMap::new(),
            first_hit_rank: None,
            usage: Usage::default(),
            cost_usd: 0.25,
            unpriced_calls: 0,
            calls: 6,
            held_ratings: None,
        };
        let majority = stored.rescored(VoteRule::Majority);
        // Rank 1: yes, no, failed → a tie of valid votes, not a match; rank 2: 2 of 3.
        assert_eq!(
            majority.decisions[0],
            PairDecision { rank: 1, truth_id: "bug".into(), yes: 1, no: 1, failed: 1, matched: false }
        );
        assert!(majority.decisions[1].matched);
        assert_eq!(majority.first_hit_rank, Some(2));
        assert_eq!(majority.votes[2].value, Failed);
        assert_eq!(majority.cost_usd, 0.25, "re-scoring costs nothing and keeps the spend");
        assert_eq!(majority.rescored(VoteRule::Majority), majority, "a fixed point");
        let unanimous = stored.rescored(VoteRule::Unanimous);
        assert_eq!(unanimous.first_hit_rank, None);
        assert_eq!(unanimous.vote_rule, VoteRule::Unanimous);
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
