//! The SWE-PRBench judge: one call per PR labels every agent comment.
//!
//! Rules:
//! - The prompt shows the PR title, the capped diff (`<diff>`), the human comments
//!   (`<human_comments>`, ids `H1`, `H2`, … in ground-truth order) and the agent comments
//!   (`<agent_comments>`, ids `A1`, `A2`, … in the agent's order), each block a JSON array (with
//!   `</` written `<\/` so no text can close a block early).
//! - The judge answers `{"labels": [{"id": "A1", "label": "CONFIRMED"|"PLAUSIBLE"|"FABRICATED",
//!   "human": "H2"|null, "actionability": 1-5, "reason": "…"}]}`; a bare array of such entries
//!   is read too, as is the object inside prose or a code fence ([`parse_judge_answer`]).
//! - Reading an entry (Lightsout's leniency): ids and labels in any case, `A3` or `3`, `H2` or
//!   `2`; an actionability that is a number or numeric string is rounded and kept when within
//!   1–5, otherwise the comment has no score. An entry is not a label when its id names no agent
//!   comment, its label is unknown, or it is CONFIRMED without naming a listed human comment;
//!   the first label of an agent comment counts.
//! - An answer with no readable label list is asked again once, with [`STRICT_REMINDER`]
//!   appended; a second such answer falls back. A readable answer that labels fewer agent
//!   comments than it was given falls back at once. A fallback labels nothing: the PR is scored
//!   with every agent comment PLAUSIBLE, every human comment MISSED and the composite halved.
//! - A call that fails for infrastructure reasons is an error: the PR is judged again later.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CappedDiff, JudgingFailed, Label, Metering};
use crate::api::ModelRef;
use crate::dataset::HumanComment;
use crate::findings::Finding;
use crate::model::{ChatRequest, Endpoint, ModelClient};
use crate::pricing::PricingTable;

/// Recorded with every verdict; bump when the judge prompt's text changes.
pub const SWE_PRBENCH_JUDGE_PROMPT_VERSION: &str = "swe-prbench-judge/v1";

/// Every SWE-PRBench judge system prompt starts with this (the scripted server routes on it).
pub const SWE_PRBENCH_JUDGE_SYSTEM_PREFIX: &str = "You are the SWE-PRBench review judge";

/// Room for 30 labelled comments with their reasons.
pub const JUDGE_MAX_OUTPUT_TOKENS: u32 = 8192;

pub(crate) const DIFF_TAG: &str = "diff";
pub(crate) const HUMAN_COMMENTS_TAG: &str = "human_comments";
pub(crate) const AGENT_COMMENTS_TAG: &str = "agent_comments";

pub(crate) const SWE_PRBENCH_JUDGE_SYSTEM: &str = "You are the SWE-PRBench review judge. You compare the \
comments an AI reviewer left on a pull request with the comments human reviewers left on it, and you check \
every AI comment against the diff you are shown.";

const INSTRUCTIONS: &str = "Label every agent comment with exactly one of:\n\
- CONFIRMED: it raises the same underlying issue as one of the human comments, even if it is phrased differently \
or proposes another fix. Name that human comment in \"human\".\n\
- PLAUSIBLE: it is a correct, reasonable observation about the change, but no human comment raised it.\n\
- FABRICATED: it states something false about the change, or refers to code, files or behaviour that are not in \
the diff you were shown.\n\
Also rate how actionable each agent comment is, from 1 (vague, nothing to act on) to 5 (says precisely what is \
wrong, where, and how to fix it).\n\n\
Answer with a JSON object only, with one entry per agent comment, in order:\n\
{\"labels\": [{\"id\": \"A1\", \"label\": \"CONFIRMED\" | \"PLAUSIBLE\" | \"FABRICATED\", \"human\": \"H1\" or null, \
\"actionability\": 1-5, \"reason\": \"one sentence\"}]}";

const STRICT_REMINDER: &str = "Your previous answer could not be read. Answer with the JSON object only, no other \
text: {\"labels\": [...]} with exactly one entry for each agent comment (A1, A2, …), each with \"id\", \"label\" \
(CONFIRMED, PLAUSIBLE or FABRICATED), \"human\" (the H id for CONFIRMED, else null), \"actionability\" (an integer \
from 1 to 5) and \"reason\".";

/// A comment as listed in the judge prompt's blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PromptComment {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    pub body: String,
}

/// The judge's label of one agent comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeLabel {
    pub label: Label,
    /// The human comment named (index into the PR's human comments); CONFIRMED only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human: Option<usize>,
    /// 1–5; `None` when the judge gave no usable score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actionability: Option<u8>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// What an answer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeAnswer {
    /// One label per agent comment, in order.
    Labels(Vec<JudgeLabel>),
    /// A label list covering only `labelled` of the agent comments.
    Incomplete { labelled: usize },
    /// No label list could be read.
    Unparseable,
}

/// Why the judge's labels were not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum JudgeFallback {
    /// Both answers were unreadable.
    Unparseable,
    /// An answer labelled `labelled` of `expected` agent comments.
    Incomplete { labelled: usize, expected: usize },
}

/// The outcome of judging one PR.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeRun {
    /// One label per agent comment; `None` when the judge fell back.
    pub labels: Option<Vec<JudgeLabel>>,
    pub fallback: Option<JudgeFallback>,
    /// Calls made (1, or 2 after a retry).
    pub attempts: u32,
    /// The last raw answer, kept so the verdict can be audited and re-scored.
    pub answer: String,
    pub metering: Metering,
}

/// The judge model and how to reach it.
#[derive(Debug, Clone)]
pub struct SwePrBenchJudge {
    pub model: ModelRef,
    pub endpoint: Endpoint,
    pub client: ModelClient,
    pub max_output_tokens: u32,
}

/// JSON for a prompt block, with every `</` escaped as `<\/` (still the same JSON string).
fn block_json(comments: &[PromptComment]) -> String {
    serde_json::to_string_pretty(comments).unwrap_or_else(|_| "[]".into()).replace("</", "<\\/")
}

/// The judge's user prompt for a PR (see the module rules).
pub fn judge_prompt(title: &str, diff: &CappedDiff, human: &[HumanComment], agent: &[Finding]) -> String {
    let human: Vec<PromptComment> = human
        .iter()
        .enumerate()
        .map(|(i, c)| PromptComment {
            id: format!("H{}", i + 1),
            file: c.path.clone(),
            line: c.line,
            severity: None,
            body: c.body.trim().to_string(),
        })
        .collect();
    let agent: Vec<PromptComment> = agent
        .iter()
        .enumerate()
        .map(|(i, f)| PromptComment {
            id: format!("A{}", i + 1),
            file: f.file.clone(),
            line: f.line,
            severity: f.severity.map(|s| s.as_str().to_string()),
            body: f.body.trim().to_string(),
        })
        .collect();
    format!(
        "Pull request: {}\n\n<{DIFF_TAG}>\n{}\n</{DIFF_TAG}>\n\n\
         The comments human reviewers left:\n<{HUMAN_COMMENTS_TAG}>\n{}\n</{HUMAN_COMMENTS_TAG}>\n\n\
         The AI reviewer's comments:\n<{AGENT_COMMENTS_TAG}>\n{}\n</{AGENT_COMMENTS_TAG}>\n\n{INSTRUCTIONS}",
        title.trim(),
        diff.text.trim_end(),
        block_json(&human),
        block_json(&agent),
    )
}

/// An `A3`/`H2`-style id, or a bare number, as a 0-based index.
fn parse_id(value: &Value, prefix: char) -> Option<usize> {
    let number = match value {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => {
            let s = s.trim();
            let digits = s.strip_prefix(prefix).or_else(|| s.strip_prefix(prefix.to_ascii_lowercase())).unwrap_or(s);
            digits.trim().parse().ok()?
        }
        _ => return None,
    };
    usize::try_from(number).ok()?.checked_sub(1)
}

fn parse_label(value: Option<&Value>) -> Option<Label> {
    match value?.as_str()?.trim().to_ascii_uppercase().as_str() {
        "CONFIRMED" => Some(Label::Confirmed),
        "PLAUSIBLE" => Some(Label::Plausible),
        "FABRICATED" => Some(Label::Fabricated),
        _ => None,
    }
}

fn parse_actionability(value: Option<&Value>) -> Option<u8> {
    let number = match value? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    let rounded = number.round();
    (1.0..=5.0).contains(&rounded).then_some(rounded as u8)
}

/// The label list of a decoded value: an object's `labels` array, or an array of objects that
/// have a `label` key.
fn label_entries(value: &Value) -> Option<&[Value]> {
    match value {
        Value::Object(map) => map.get("labels")?.as_array().map(Vec::as_slice),
        Value::Array(items) if !items.is_empty() && items.iter().all(|item| item.get("label").is_some()) => Some(items),
        _ => None,
    }
}

/// Reads a judge answer for `agent_count` agent comments and `human_count` human comments (see
/// the module rules): the first JSON value in the text, in order of its opening bracket, that
/// holds a label list.
pub fn parse_judge_answer(answer: &str, agent_count: usize, human_count: usize) -> JudgeAnswer {
    let entries = answer.char_indices().filter(|(_, c)| matches!(c, '{' | '[')).find_map(|(start, _)| {
        let mut stream = serde_json::Deserializer::from_str(&answer[start..]).into_iter::<Value>();
        let value = stream.next()?.ok()?;
        label_entries(&value).map(<[Value]>::to_vec)
    });
    let Some(entries) = entries else { return JudgeAnswer::Unparseable };
    let mut labels: Vec<Option<JudgeLabel>> = vec![None; agent_count];
    for (position, entry) in entries.iter().enumerate() {
        // An entry without an id labels the comment at its position.
        let agent = match entry.get("id").or_else(|| entry.get("comment")) {
            Some(id) => parse_id(id, 'A'),
            None => Some(position),
        };
        let Some(slot) = agent.and_then(|a| labels.get_mut(a)) else { continue };
        let Some(label) = parse_label(entry.get("label")) else { continue };
        let human = entry.get("human").and_then(|h| parse_id(h, 'H')).filter(|h| *h < human_count);
        if label == Label::Confirmed && human.is_none() {
            continue;
        }
        if slot.is_none() {
            *slot = Some(JudgeLabel {
                label,
                human: if label == Label::Confirmed { human } else { None },
                actionability: parse_actionability(entry.get("actionability")),
                reason: entry.get("reason").and_then(Value::as_str).unwrap_or_default().trim().to_string(),
            });
        }
    }
    let labelled = labels.iter().filter(|l| l.is_some()).count();
    if labelled < agent_count {
        return JudgeAnswer::Incomplete { labelled };
    }
    JudgeAnswer::Labels(labels.into_iter().flatten().collect())
}

impl SwePrBenchJudge {
    /// A judge with room for [`JUDGE_MAX_OUTPUT_TOKENS`] of answer.
    pub fn new(model: ModelRef, endpoint: Endpoint, client: ModelClient) -> Self {
        SwePrBenchJudge { model, endpoint, client, max_output_tokens: JUDGE_MAX_OUTPUT_TOKENS }
    }

    /// Labels the `agent_count` agent comments of `prompt` (see the module rules).
    pub async fn label(
        &self,
        prompt: &str,
        agent_count: usize,
        human_count: usize,
        pricing: &PricingTable,
    ) -> Result<JudgeRun, JudgingFailed> {
        let mut metering = Metering::default();
        let mut attempt = 1;
        loop {
            let user = if attempt == 1 { prompt.to_string() } else { format!("{prompt}\n\n{STRICT_REMINDER}") };
            let request = ChatRequest {
                model: self.model.name.clone(),
                system: Some(SWE_PRBENCH_JUDGE_SYSTEM.to_string()),
                user,
                reasoning_effort: None,
                max_output_tokens: Some(self.max_output_tokens),
            };
            // A failure of the stricter retry keeps the first answer's usage: it was paid for.
            let completion = self
                .client
                .complete(&self.endpoint, &request)
                .await
                .map_err(|error| JudgingFailed { error, spent: metering })?;
            metering.add_call(&self.model.name, Some(completion.usage), pricing);
            let answer = completion.text;
            let fallback = match parse_judge_answer(&answer, agent_count, human_count) {
                JudgeAnswer::Labels(labels) => {
                    return Ok(JudgeRun { labels: Some(labels), fallback: None, attempts: attempt, answer, metering })
                }
                JudgeAnswer::Incomplete { labelled } => JudgeFallback::Incomplete { labelled, expected: agent_count },
                JudgeAnswer::Unparseable if attempt == 1 => {
                    attempt += 1;
                    continue;
                }
                JudgeAnswer::Unparseable => JudgeFallback::Unparseable,
            };
            return Ok(JudgeRun { labels: None, fallback: Some(fallback), attempts: attempt, answer, metering });
        }
    }
}
