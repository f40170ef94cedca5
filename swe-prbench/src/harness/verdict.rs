//! The judge's answer as the reference harness reads it (`judge.py`): the JSON object (whole
//! text; else without ```` ```json ```` / ```` ``` ```` fences, case-sensitive; else from the
//! first `{` to the last `}`), its `agent_classifications` (CONFIRMED / PLAUSIBLE / FABRICATED,
//! any case; other entries dropped; actionability by Python `int()`, 3 when that fails,
//! clamped to 1–5) and `human_comment_statuses` (CAUGHT / MISSED; never used for scoring).
//!
//! Fallbacks: no usable status → every ground-truth comment MISSED; no usable classification
//! while the agent has comments → each PLAUSIBLE with actionability 3 (`fallback_default`, no
//! penalty); an unreadable answer or a provider error → each PLAUSIBLE with actionability 3,
//! every human MISSED, and the prompt version `v1.0+fallback` (the composite is halved).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::agent::{remove_fences_case_sensitive, AgentOutput};
use super::python;
use lightsout_api::protocol::Departures;

/// The judge prompt version the harness records.
pub const JUDGE_PROMPT_VERSION: &str = "v1.0";
const FALLBACK_SUFFIX: &str = "+fallback";
const AGENT_PARSE_FAILED_SUFFIX: &str = "+agent_parse_failed";
/// The judge's output budget.
pub const JUDGE_MAX_TOKENS: u32 = 4000;

/// One judge entry about an agent comment (`JudgeClassification`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeClassification {
    pub comment_id: String,
    /// `CONFIRMED`, `PLAUSIBLE` or `FABRICATED`.
    pub classification: String,
    pub matched_human_comment_id: Option<String>,
    /// 1–5.
    pub actionability_score: i64,
    pub reasoning: Option<String>,
}

/// One judge entry about a human comment (`HumanCommentStatus`); recorded, never scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanCommentStatus {
    pub comment_id: String,
    /// `CAUGHT` or `MISSED`.
    pub status: String,
    pub matched_agent_comment_id: Option<String>,
}

/// What the judge said about one record (`JudgeOutput`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeOutput {
    pub agent_classifications: Vec<JudgeClassification>,
    pub human_comment_statuses: Vec<HumanCommentStatus>,
    pub judge_prompt_version: String,
}

impl JudgeOutput {
    /// Whether the answer fell back (unreadable answer or provider error).
    pub fn fallback_used(&self) -> bool {
        self.judge_prompt_version.ends_with(FALLBACK_SUFFIX)
    }
}

/// The human id as the harness writes it: `str(comment_id or "")`.
pub fn human_id(comment: &Map<String, Value>) -> String {
    python::text_or_empty(comment, "comment_id")
}

fn all_missed(humans: &[Map<String, Value>]) -> Vec<HumanCommentStatus> {
    humans
        .iter()
        .map(|c| HumanCommentStatus {
            comment_id: human_id(c),
            status: "MISSED".into(),
            matched_agent_comment_id: None,
        })
        .collect()
}

fn all_plausible(agent: &AgentOutput, reasoning: &str) -> Vec<JudgeClassification> {
    agent
        .comments
        .iter()
        .map(|c| JudgeClassification {
            comment_id: c.comment_id.clone(),
            classification: "PLAUSIBLE".into(),
            matched_human_comment_id: None,
            actionability_score: 3,
            reasoning: Some(reasoning.to_string()),
        })
        .collect()
}

/// The judge output when the judge is not called because the agent's answer did not parse.
pub fn judge_skipped(humans: &[Map<String, Value>]) -> JudgeOutput {
    JudgeOutput {
        agent_classifications: Vec::new(),
        human_comment_statuses: all_missed(humans),
        judge_prompt_version: format!("{JUDGE_PROMPT_VERSION}{AGENT_PARSE_FAILED_SUFFIX}"),
    }
}

/// The judge output for one call's result: the answer's text, or the provider error's text.
pub fn judge_output(
    answer: Result<&str, String>,
    agent: &AgentOutput,
    humans: &[Map<String, Value>],
    departures: &Departures,
) -> JudgeOutput {
    let parsed = answer.and_then(parse_judge_object).and_then(|object| {
        match departures.fall_back_on_incomplete_judge_answers.then(|| incompleteness(&object, agent, humans)) {
            Some(Some(gap)) => Err(format!("incomplete judge answer: {gap}")),
            _ => Ok(object),
        }
    });
    match parsed {
        Ok(object) => {
            let mut agent_classifications = classifications(object.get("agent_classifications"));
            let mut human_comment_statuses = statuses(object.get("human_comment_statuses"));
            if human_comment_statuses.is_empty() {
                human_comment_statuses = all_missed(humans);
            }
            if agent_classifications.is_empty() && !agent.comments.is_empty() {
                agent_classifications = all_plausible(agent, "fallback_default");
            }
            JudgeOutput {
                agent_classifications,
                human_comment_statuses,
                judge_prompt_version: JUDGE_PROMPT_VERSION.to_string(),
            }
        }
        Err(error) => JudgeOutput {
            agent_classifications: all_plausible(agent, &format!("fallback_due_to_parse_error: {error}")),
            human_comment_statuses: all_missed(humans),
            judge_prompt_version: format!("{JUDGE_PROMPT_VERSION}{FALLBACK_SUFFIX}"),
        },
    }
}

/// What makes an answer incomplete for [`Departures::fall_back_on_incomplete_judge_answers`]:
/// an entry that is dropped or names an unknown comment, a CONFIRMED naming no ground-truth
/// comment, or an agent comment without a usable entry.
fn incompleteness(object: &Map<String, Value>, agent: &AgentOutput, humans: &[Map<String, Value>]) -> Option<String> {
    let items = match object.get("agent_classifications") {
        Some(Value::Array(items)) => items.as_slice(),
        _ => &[],
    };
    let usable = classifications(object.get("agent_classifications"));
    if usable.len() < items.len() {
        return Some(format!("{} of {} entries are unusable", items.len() - usable.len(), items.len()));
    }
    let human_ids: Vec<String> = humans.iter().map(human_id).collect();
    for entry in &usable {
        if !agent.comments.iter().any(|c| c.comment_id == entry.comment_id) {
            return Some(format!("an entry names the unknown comment {:?}", entry.comment_id));
        }
        let names_human = entry.matched_human_comment_id.as_ref().is_some_and(|h| human_ids.contains(h));
        if entry.classification == "CONFIRMED" && !names_human {
            return Some(format!("{} is CONFIRMED without a ground-truth comment", entry.comment_id));
        }
    }
    agent
        .comments
        .iter()
        .find(|c| !usable.iter().any(|e| e.comment_id == c.comment_id))
        .map(|c| format!("no entry for {}", c.comment_id))
}

/// The answer's JSON object (see the module docs), or why not.
pub fn parse_judge_object(raw: &str) -> Result<Map<String, Value>, String> {
    let text = python::strip(raw);
    if text.is_empty() {
        return Err("Empty judge response.".to_string());
    }
    let value = match python::loads(text) {
        Some(value) => value,
        None => {
            let clean = remove_fences_case_sensitive(text);
            let clean = python::strip(&clean);
            match python::loads(clean) {
                Some(value) => value,
                None => {
                    let (start, end) = (clean.find('{'), clean.rfind('}'));
                    match (start, end) {
                        (Some(start), Some(end)) if end > start => python::loads(&clean[start..=end])
                            .ok_or_else(|| "the judge answer's {…} slice is not JSON".to_string())?,
                        _ => return Err("the judge answer is not JSON".to_string()),
                    }
                }
            }
        }
    };
    match value {
        Value::Object(map) => Ok(map),
        _ => Err("Judge response must be a JSON object.".to_string()),
    }
}

/// `str(value)` unless the member is missing, `null` or `""`.
fn optional_text(item: &Map<String, Value>, key: &str) -> Option<String> {
    item.get(key).filter(|v| !v.is_null() && v.as_str() != Some("")).map(python::str_of)
}

fn upper_stripped(item: &Map<String, Value>, key: &str) -> String {
    python::strip(&python::text_or_empty(item, key)).to_uppercase()
}

fn classifications(raw: Option<&Value>) -> Vec<JudgeClassification> {
    let Some(Value::Array(items)) = raw else { return Vec::new() };
    items
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|item| {
            let classification = upper_stripped(item, "classification");
            if !matches!(classification.as_str(), "CONFIRMED" | "PLAUSIBLE" | "FABRICATED") {
                return None;
            }
            let actionability = item.get("actionability_score").and_then(python::int_of).unwrap_or(3).clamp(1, 5);
            Some(JudgeClassification {
                comment_id: python::text_or_empty(item, "comment_id"),
                classification,
                matched_human_comment_id: optional_text(item, "matched_human_comment_id"),
                actionability_score: actionability,
                reasoning: Some(python::text_or_empty(item, "reasoning")).filter(|r| !r.is_empty()),
            })
        })
        .collect()
}

fn statuses(raw: Option<&Value>) -> Vec<HumanCommentStatus> {
    let Some(Value::Array(items)) = raw else { return Vec::new() };
    items
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|item| {
            let status = upper_stripped(item, "status");
            matches!(status.as_str(), "CAUGHT" | "MISSED").then(|| HumanCommentStatus {
                comment_id: python::text_or_empty(item, "comment_id"),
                status,
                matched_agent_comment_id: optional_text(item, "matched_agent_comment_id"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent_with(ids: &[&str]) -> AgentOutput {
        AgentOutput {
            raw_response: String::new(),
            comments: ids
                .iter()
                .map(|id| super::super::agent::AgentComment {
                    comment_id: id.to_string(),
                    body: "b".into(),
                    file_reference: None,
                    line_reference: None,
                    severity_claim: None,
                    is_outside_diff: false,
                })
                .collect(),
            parse_success: true,
            parse_error: None,
        }
    }

    #[test]
    fn actionability_follows_python_int_and_is_clamped() {
        let answer = r#"{"agent_classifications": [
            {"comment_id": "a", "classification": "confirmed", "matched_human_comment_id": "h", "actionability_score": "4"},
            {"comment_id": "b", "classification": "PLAUSIBLE", "actionability_score": 4.7},
            {"comment_id": "c", "classification": "FABRICATED", "actionability_score": 9},
            {"comment_id": "d", "classification": "PLAUSIBLE", "actionability_score": "high"},
            {"comment_id": "e", "classification": "PARTIAL", "actionability_score": 0},
            {"comment_id": "f", "classification": "PLAUSIBLE", "actionability_score": 0}]}"#;
        let out = judge_output(Ok(answer), &agent_with(&["a"]), &[], &Departures::default());
        let scores: Vec<i64> = out.agent_classifications.iter().map(|c| c.actionability_score).collect();
        assert_eq!(scores, vec![4, 4, 5, 3, 1]);
        assert_eq!(out.agent_classifications[0].classification, "CONFIRMED");
        assert!(!out.fallback_used());
    }

    #[test]
    fn only_unusable_entries_default_to_plausible_without_penalty() {
        let answer = r#"{"agent_classifications": [{"classification": "PARTIAL"}]}"#;
        let out = judge_output(Ok(answer), &agent_with(&["a"]), &[], &Departures::default());
        assert_eq!(out.agent_classifications[0].reasoning.as_deref(), Some("fallback_default"));
        assert!(!out.fallback_used());
    }

    #[test]
    fn unreadable_answers_and_errors_fall_back() {
        for answer in [Ok("no json"), Ok("[1, 2]"), Err("HTTP 400".to_string())] {
            let answer = answer.as_deref().map_err(Clone::clone);
            let out = judge_output(answer, &agent_with(&["a"]), &[], &Departures::default());
            assert!(out.fallback_used());
            assert_eq!(out.agent_classifications[0].actionability_score, 3);
        }
        let prose = "Verdict:\n```json\n{\"agent_classifications\": []}\n```\nthanks";
        assert!(parse_judge_object(prose).is_ok());
    }
}
