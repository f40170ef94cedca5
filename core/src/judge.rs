//! The judge panel (CRBugBench protocol): each of a review's top findings is judged against
//! each ground-truth item by each judge; the panel's vote decides whether the finding identifies
//! the item.
//!
//! Rules, as applied here:
//! - Only the top `k_max` findings (the largest k of recall@k) are judged, in the agent's order.
//! - A judge answers `{"verdict": "yes"|"no", "reason": …}`. An answer that cannot be parsed, or
//!   a provider answer that is not the API's shape, is asked again once, with a stricter
//!   instruction.
//! - A *failed* vote: the judge answered twice and neither answer could be read. It is the
//!   judge's own answer, final, recorded and left out of the count (an abstention).
//! - A *missing* vote: the judge gave no answer — its call failed after the model client's
//!   retries (5xx, 429 past the rate-limit budget, a hang past the read timeout, a broken or
//!   garbled answer), or the stricter retry did. It is recorded with the error, counted as
//!   absent, and asked again when the trial is judged again (the next `lightsout run`, or the
//!   controller's next pass). The other votes and the usage of every successful call are kept:
//!   an outage is never turned into "no" votes, and no paid call goes uncounted.
//! - `majority`: the finding identifies the item when more of the valid votes say yes than no.
//!   A tie is not a match; no valid vote is not a match.
//! - `unanimous`: every valid vote says yes (and there is at least one).
//! - With missing votes, a pair's decision stands only when it would be the same whatever the
//!   missing votes said (all yes or all no): 2 yes of a 3-judge panel with one missing is a
//!   match; 1 yes, 1 no, 1 missing is *undecided*. A trial with an undecided pair is *unjudged*:
//!   not scored, its verdicts (and their spend) stored, and the missing votes asked again later.
//! - The item is caught at the best (lowest) rank whose finding the panel matched to it; the
//!   task is hit at k when any of its items is caught at a rank ≤ k.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};

use crate::dataset::TruthItem;
use crate::findings::Finding;
use lightsout_api::{ModelRef, VoteRule};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{CallError, ChatRequest, Endpoint, ModelClient, Usage};

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
    /// No answer: the call failed (see the module rules); not counted, asked again later.
    Missing,
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
    /// Why a missing vote has no answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// The panel's decision on one (finding, item) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairDecision {
    pub rank: u32,
    pub truth_id: String,
    pub yes: u32,
    pub no: u32,
    pub failed: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing: u32,
    pub matched: bool,
    /// Missing votes could still change the decision: the trial is unjudged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undecided: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
    /// Successful judge calls (each paid for), strict retries included.
    pub calls: u32,
    /// Votes with no answer (see the module rules).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing_votes: u32,
    /// Pairs that missing votes leave undecided; when any, the trial is unjudged.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undecided_pairs: u32,
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

    /// Whether every pair is decided, so the trial can be scored.
    pub fn is_complete(&self) -> bool {
        self.undecided_pairs == 0
    }

    /// The votes asked for these verdicts rather than kept from `previous` (the verdicts they
    /// were judged again from, see [`Panel::judge_again`]): every vote when there is none.
    pub fn votes_asked_since<'a>(&'a self, previous: Option<&'a TrialVerdicts>) -> impl Iterator<Item = &'a Vote> + 'a {
        let kept: std::collections::BTreeSet<(u32, &str, &str)> = previous
            .map(|p| p.votes.iter().filter(|v| v.value != VoteValue::Missing))
            .into_iter()
            .flatten()
            .map(|v| (v.rank, v.truth_id.as_str(), v.judge.as_str()))
            .collect();
        self.votes.iter().filter(move |v| !kept.contains(&(v.rank, v.truth_id.as_str(), v.judge.as_str())))
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
                VoteValue::Failed | VoteValue::Missing => RATING_NONE,
            };
        }
        PanelRatings { judges, cells: rows.into_values().flatten().collect() }
    }

    /// The verdicts recomputed from the judges' recorded raw answers under `rule`, with no judge
    /// call: each answer is read again with [`parse_answer`] (an unreadable one is a failed vote;
    /// a missing vote stays missing), and the pairs are decided again. With the rule they were made under, this reproduces the
    /// stored verdicts exactly; with another rule, it re-scores a finished run for free. (Of
    /// verdicts as read from `verdicts.json`: compacted ones in memory hold no answers.)
    pub fn rescored(&self, rule: VoteRule) -> TrialVerdicts {
        let votes: Vec<Vote> = self
            .votes
            .iter()
            .map(|vote| {
                if vote.value == VoteValue::Missing {
                    return vote.clone();
                }
                let (value, reason) = parse_answer(&vote.answer).unwrap_or((VoteValue::Failed, String::new()));
                Vote { value, reason, ..vote.clone() }
            })
            .collect();
        let pairs: Vec<(u32, String)> = self.decisions.iter().map(|d| (d.rank, d.truth_id.clone())).collect();
        let (decisions, caught) = decide_pairs(rule, &pairs, &votes);
        TrialVerdicts {
            vote_rule: rule,
            first_hit_rank: caught.values().copied().min(),
            undecided_pairs: decisions.iter().filter(|d| d.undecided).count() as u32,
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
        let settled = settle(rule, pair);
        let matched = settled == Some(true);
        let count = |value| pair.iter().filter(|v| **v == value).count() as u32;
        decisions.push(PairDecision {
            rank: *rank,
            truth_id: truth_id.clone(),
            yes: count(VoteValue::Yes),
            no: count(VoteValue::No),
            failed: count(VoteValue::Failed),
            missing: count(VoteValue::Missing),
            matched,
            undecided: settled.is_none(),
        });
        if matched {
            let best = caught.entry(truth_id.clone()).or_insert(*rank);
            *best = (*best).min(*rank);
        }
    }
    (decisions, caught)
}

/// Decides a pair from its valid votes under `rule` (see the module rules); failed and missing
/// votes are left out.
pub fn decide(rule: VoteRule, votes: &[VoteValue]) -> bool {
    let yes = votes.iter().filter(|v| **v == VoteValue::Yes).count();
    let no = votes.iter().filter(|v| **v == VoteValue::No).count();
    rule_holds(rule, yes, no)
}

/// Decides a pair with missing votes: `Some` when the decision is the same whatever the missing
/// votes would have said, `None` (undecided) when they could change it. Both rules only grow
/// with yes votes and shrink with no votes, so the two extremes (every missing vote yes, every
/// one no) bound every possibility.
pub fn settle(rule: VoteRule, votes: &[VoteValue]) -> Option<bool> {
    let count = |value| votes.iter().filter(|v| **v == value).count();
    let (yes, no, missing) = (count(VoteValue::Yes), count(VoteValue::No), count(VoteValue::Missing));
    let if_all_yes = rule_holds(rule, yes + missing, no);
    let if_all_no = rule_holds(rule, yes, no + missing);
    (if_all_yes == if_all_no).then_some(if_all_yes)
}

fn rule_holds(rule: VoteRule, yes: usize, no: usize) -> bool {
    match rule {
        VoteRule::Majority => yes > no,
        VoteRule::Unanimous => yes > 0 && no == 0,
    }
}

/// The longest judge answer that is read; a longer one is unreadable (a judge asked for one
/// short JSON object does not write 64 KiB).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The longest verdict object looked for: each `{` of the answer is tried as the start of one,
/// and bounding how far each try may read keeps the whole search linear in the answer's length
/// (unbounded, `{"a":1,{"a":1,…` made every try read to the end).
pub const MAX_VERDICT_BYTES: usize = 16 * 1024;

/// Reads a judge's answer: the first JSON object in it with a `verdict` of yes/no (or
/// true/false), within [`MAX_VERDICT_BYTES`] of its opening brace. Anything else, and any
/// answer over [`MAX_ANSWER_BYTES`], is `None`.
pub fn parse_answer(answer: &str) -> Option<(VoteValue, String)> {
    let text = answer.trim();
    if text.len() > MAX_ANSWER_BYTES {
        return None;
    }
    for (start, _) in text.match_indices('{') {
        let mut end = (start + MAX_VERDICT_BYTES).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[start..end]).into_iter::<serde_json::Value>();
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
    /// Successful calls (each paid for).
    calls: u32,
}

impl Panel {
    /// Judges the top `k_max` findings against every item. Never fails: a vote whose call failed
    /// is recorded missing (see the module rules), and the trial is unjudged when that leaves a
    /// pair undecided.
    pub async fn judge(&self, findings: &[Finding], truth: &[TruthItem], k_max: u32) -> TrialVerdicts {
        self.judge_again(findings, truth, k_max, None).await
    }

    /// [`Panel::judge`], keeping the answered votes of `previous` (the same attempt's stored
    /// verdicts) and asking only its missing ones; the spend adds up both, so every paid call is
    /// counted once.
    pub async fn judge_again(
        &self,
        findings: &[Finding],
        truth: &[TruthItem],
        k_max: u32,
        previous: Option<&TrialVerdicts>,
    ) -> TrialVerdicts {
        let top: Vec<&Finding> = findings.iter().filter(|f| f.rank <= k_max).collect();
        let answered: BTreeMap<(u32, &str, &str), &Vote> = previous
            .map(|p| p.votes.iter().filter(|v| v.value != VoteValue::Missing))
            .into_iter()
            .flatten()
            .map(|v| ((v.rank, v.truth_id.as_str(), v.judge.as_str()), v))
            .collect();
        let mut slots: Vec<Result<Vote, usize>> = Vec::new();
        let mut jobs = Vec::new();
        for finding in &top {
            for item in truth {
                for judge in &self.judges {
                    match answered.get(&(finding.rank, item.id.as_str(), judge.model.name.as_str())) {
                        Some(vote) => slots.push(Ok((*vote).clone())),
                        None => {
                            slots.push(Err(jobs.len()));
                            jobs.push((*finding, item, judge));
                        }
                    }
                }
            }
        }
        // The calls' futures are made up front rather than by a closure inside the stream: a
        // closure over borrowed findings makes callers' futures fail rustc's `Send` inference
        // (rust-lang/rust#102211), and the controller runs this inside a spawned reconcile.
        let calls: Vec<_> = jobs.into_iter().map(|(finding, item, judge)| self.ask(judge, finding, item)).collect();
        let mut outcomes: Vec<Option<CallOutcome>> =
            stream::iter(calls).buffered(self.concurrency.max(1)).map(Some).collect().await;

        let mut usage = previous.map(|p| p.usage).unwrap_or_default();
        let mut cost_usd = previous.map(|p| p.cost_usd).unwrap_or_default();
        let mut unpriced_calls = previous.map(|p| p.unpriced_calls).unwrap_or_default();
        let mut calls = previous.map(|p| p.calls).unwrap_or_default();
        let mut votes = Vec::with_capacity(slots.len());
        for slot in slots {
            let vote = match slot {
                Ok(kept) => kept,
                Err(index) => {
                    let outcome = outcomes[index].take().expect("each call's outcome is taken once");
                    usage += outcome.usage;
                    match outcome.cost {
                        Some(cost) => cost_usd += cost,
                        None => unpriced_calls += outcome.calls,
                    }
                    calls += outcome.calls;
                    outcome.vote
                }
            };
            votes.push(vote);
        }

        let pairs: Vec<(u32, String)> =
            top.iter().flat_map(|f| truth.iter().map(|item| (f.rank, item.id.clone()))).collect();
        let (decisions, caught) = decide_pairs(self.vote, &pairs, &votes);
        TrialVerdicts {
            prompt_version: JUDGE_PROMPT_VERSION.to_string(),
            vote_rule: self.vote,
            judges: self.judges.iter().map(|j| j.model.name.clone()).collect(),
            judged_findings: top.len() as u32,
            truth_items: truth.len() as u32,
            first_hit_rank: caught.values().copied().min(),
            missing_votes: votes.iter().filter(|v| v.value == VoteValue::Missing).count() as u32,
            undecided_pairs: decisions.iter().filter(|d| d.undecided).count() as u32,
            votes,
            decisions,
            caught,
            usage,
            cost_usd,
            unpriced_calls,
            calls,
            held_ratings: None,
        }
    }

    /// One judge's vote on one pair: asked again once, with the stricter instruction, when the
    /// answer is unreadable or not the API's shape; missing when a call fails (after the client's
    /// retries). The usage of every successful call is kept, whatever the vote.
    async fn ask(&self, judge: &Judge, finding: &Finding, item: &TruthItem) -> CallOutcome {
        let prompt = judge_prompt(finding, item);
        let mut outcome = CallOutcome {
            vote: Vote {
                rank: finding.rank,
                truth_id: item.id.clone(),
                judge: judge.model.name.clone(),
                value: VoteValue::Failed,
                reason: String::new(),
                answer: String::new(),
                attempts: 0,
                error: String::new(),
            },
            usage: Usage::default(),
            cost: Some(0.0),
            calls: 0,
        };
        for attempt in 1..=2u32 {
            outcome.vote.attempts = attempt;
            let user = if attempt == 1 { prompt.clone() } else { format!("{prompt}\n\n{STRICT_REMINDER}") };
            let request = ChatRequest {
                model: judge.model.name.clone(),
                system: Some(JUDGE_SYSTEM.to_string()),
                user,
                reasoning_effort: None,
                max_output_tokens: Some(1024),
            };
            let completion = match self.client.complete(&judge.endpoint, &request).await {
                Ok(completion) => completion,
                // Not the API's shape: the provider answered, so the stricter retry may help.
                Err(error @ CallError::Malformed { .. }) if attempt == 1 => {
                    outcome.vote.error = error.to_string();
                    continue;
                }
                Err(error) => {
                    outcome.vote.value = VoteValue::Missing;
                    outcome.vote.answer = String::new();
                    outcome.vote.error = error.to_string();
                    return outcome;
                }
            };
            outcome.usage += completion.usage;
            outcome.cost = match (outcome.cost, self.pricing.cost(&judge.model.name, &completion.usage)) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            outcome.calls += 1;
            outcome.vote.error = String::new();
            if let Some((value, reason)) = parse_answer(&completion.text) {
                outcome.vote.value = value;
                outcome.vote.reason = reason;
                outcome.vote.answer = completion.text;
                return outcome;
            }
            outcome.vote.answer = completion.text;
        }
        // Two answers, neither readable: the judge's own failed vote. (A first answer that was
        // not the API's shape followed by an unreadable one is failed too: the judge answered.)
        outcome.vote.value = VoteValue::Failed;
        outcome
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

    /// A decision stands with missing votes only when they could not change it.
    #[test]
    fn missing_votes_leave_a_pair_undecided_only_when_they_could_change_it() {
        use VoteRule::{Majority, Unanimous};
        assert_eq!(settle(Majority, &[Yes, Yes, Missing]), Some(true), "2 of 3 is a majority of the panel");
        assert_eq!(settle(Majority, &[No, No, Missing]), Some(false));
        assert_eq!(settle(Majority, &[Yes, No, Missing]), None);
        assert_eq!(settle(Majority, &[Yes, Missing, Missing]), None);
        assert_eq!(settle(Majority, &[Missing]), None);
        assert_eq!(settle(Majority, &[Yes, Failed, Missing]), None, "a failed vote is an abstention");
        assert_eq!(settle(Majority, &[Yes, Yes, Failed]), Some(true), "no missing vote: as before");
        assert_eq!(settle(Majority, &[Failed, Failed]), Some(false));
        assert_eq!(settle(Unanimous, &[Yes, No, Missing]), Some(false), "one no already decides");
        assert_eq!(settle(Unanimous, &[Yes, Yes, Missing]), None);
        assert_eq!(settle(Unanimous, &[Failed, Missing]), None);
        // Without missing votes, `settle` is `decide`.
        for votes in [&[Yes, No, Failed][..], &[Yes, Yes, No], &[No], &[], &[Failed, Yes]] {
            for rule in [Majority, Unanimous] {
                assert_eq!(settle(rule, votes), Some(decide(rule, votes)), "{rule:?} {votes:?}");
            }
        }
    }

    #[test]
    fn rescoring_keeps_missing_votes_missing_and_the_trial_unjudged() {
        let vote = |judge: &str, value: VoteValue, answer: &str| Vote {
            rank: 1,
            truth_id: "bug".into(),
            judge: judge.into(),
            value,
            reason: String::new(),
            answer: answer.into(),
            attempts: 1,
            error: if value == Missing { "p: HTTP 503: down".into() } else { String::new() },
        };
        let stored = TrialVerdicts {
            prompt_version: JUDGE_PROMPT_VERSION.into(),
            vote_rule: VoteRule::Majority,
            judges: vec!["a".into(), "b".into(), "c".into()],
            judged_findings: 1,
            truth_items: 1,
            votes: vec![
                vote("a", Yes, r#"{"verdict":"yes"}"#),
                vote("b", No, r#"{"verdict":"no"}"#),
                vote("c", Missing, ""),
            ],
            decisions: vec![PairDecision {
                rank: 1,
                truth_id: "bug".into(),
                yes: 0,
                no: 0,
                failed: 0,
                missing: 0,
                matched: false,
                undecided: false,
            }],
            caught: BTreeMap::new(),
            first_hit_rank: None,
            usage: Usage::default(),
            cost_usd: 0.0,
            unpriced_calls: 0,
            calls: 2,
            missing_votes: 1,
            undecided_pairs: 0,
            held_ratings: None,
        };
        let rescored = stored.rescored(VoteRule::Majority);
        assert_eq!(rescored.votes[2].value, Missing);
        assert!(rescored.decisions[0].undecided && !rescored.decisions[0].matched);
        assert_eq!((rescored.undecided_pairs, rescored.is_complete()), (1, false));
        let back: TrialVerdicts = serde_json::from_str(&serde_json::to_string(&rescored).unwrap()).unwrap();
        assert_eq!(back, rescored, "missing votes and undecided pairs survive verdicts.json");
        assert_eq!(rescored.ratings().rows(3).next().unwrap(), vec![Some(1), Some(0), None]);
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
            error: String::new(),
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
                PairDecision {
                    rank: 1,
                    truth_id: "bug".into(),
                    yes: 0,
                    no: 0,
                    failed: 0,
                    missing: 0,
                    matched: false,
                    undecided: false,
                },
                PairDecision {
                    rank: 2,
                    truth_id: "bug".into(),
                    yes: 0,
                    no: 0,
                    failed: 0,
                    missing: 0,
                    matched: false,
                    undecided: false,
                },
            ],
            caught: BTreeMap::new(),
            first_hit_rank: None,
            usage: Usage::default(),
            cost_usd: 0.25,
            unpriced_calls: 0,
            calls: 6,
            missing_votes: 0,
            undecided_pairs: 0,
            held_ratings: None,
        };
        let majority = stored.rescored(VoteRule::Majority);
        // Rank 1: yes, no, failed → a tie of valid votes, not a match; rank 2: 2 of 3.
        assert_eq!(
            majority.decisions[0],
            PairDecision {
                rank: 1,
                truth_id: "bug".into(),
                yes: 1,
                no: 1,
                failed: 1,
                missing: 0,
                matched: false,
                undecided: false
            }
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

    #[test]
    fn a_verdict_is_found_after_many_unclosed_objects_and_an_oversized_answer_is_unreadable() {
        // Every `{` before the verdict starts an object that never closes.
        let unclosed = r#"{"a":1,"#.repeat(5_000);
        let answer = format!("{unclosed} {{\"verdict\": \"yes\", \"reason\": \"é\"}}");
        assert!(answer.len() < MAX_ANSWER_BYTES);
        assert_eq!(parse_answer(&answer), Some((Yes, "é".into())));
        // A window that ends inside a multi-byte character is cut at the character before it.
        let padded = format!("{{\"reason\": \"{}é\", \"verdict\": \"no\"}}", "x".repeat(MAX_VERDICT_BYTES - 13));
        assert_eq!(parse_answer(&padded), None, "a verdict object past the window is not read");
        let long = format!("{}{{\"verdict\": \"yes\"}}", " word".repeat(MAX_ANSWER_BYTES / 5 + 1));
        assert_eq!(parse_answer(&long), None, "over MAX_ANSWER_BYTES");
        assert_eq!(parse_answer(&long[long.len() - 400..]).map(|a| a.0), Some(Yes));
    }
}
