//! The agent side of the reference harness (`runner.py`): which calls are made for one record,
//! and the one parser that decides an answer's comments.
//!
//! - [`run_agent`]: a first generation of up to 3 attempts (an attempt fails on a provider
//!   error or a blank answer); if its answer does not parse, one retry generation (the retry
//!   prompt) of up to 2 attempts. The caller makes the calls (and sleeps between attempts, as
//!   the harness does: 1 s, then 2 s).
//! - [`parse_agent_json`]: the whole text as JSON; else with every ```` ```json ```` / ```` ``` ````
//!   removed; else the last list (or object with a list `comments`) among the JSON values
//!   starting at any `[` or `{`; else every object with a string `body`.
//! - [`agent_comments`]: at most [`MAX_AGENT_COMMENTS`] objects with a non-blank body, ids
//!   `<task>_<config>_<list index>`, `line` by Python `int()`, severity `P0|P1|P2` or none.
//! - An answer that yields no comment but looks structured (`"body":` or ```` ```json ````) does
//!   not parse.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::layout::EvalInput;
use super::python;

/// Comments kept from one answer; the rest are ignored.
pub const MAX_AGENT_COMMENTS: usize = 30;
/// Attempts of the first generation and of the retry generation.
pub const FIRST_ATTEMPTS: usize = 3;
pub const RETRY_ATTEMPTS: usize = 2;
/// The harness's default `--agent-max-tokens`.
pub const DEFAULT_AGENT_MAX_TOKENS: u32 = 4000;

const UNPARSEABLE: &str = "Unable to parse agent JSON response: line 1 column 1 (char 0)";
const STRUCTURED_BUT_EMPTY: &str = "Agent response looked structured but no parseable comments were extracted.";
const EMPTY_RESPONSE: &str = "Empty model response";

/// One agent comment (`AgentComment`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentComment {
    pub comment_id: String,
    pub body: String,
    pub file_reference: Option<String>,
    pub line_reference: Option<i64>,
    pub severity_claim: Option<String>,
    pub is_outside_diff: bool,
}

/// What one record's agent produced (`AgentOutput`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentOutput {
    pub raw_response: String,
    pub comments: Vec<AgentComment>,
    pub parse_success: bool,
    pub parse_error: Option<String>,
}

/// Which generation an agent call belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentCallKind {
    /// The rendered context as the user message.
    First,
    /// The rendered context followed by the harness's retry suffix.
    Retry,
}

/// One agent call to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentCall {
    pub kind: AgentCallKind,
    /// 0-based attempt within its generation; the harness sleeps min(2^(attempt−1), 8) s before
    /// attempt ≥ 1.
    pub attempt: usize,
    pub max_tokens: u32,
}

/// The line numbers of the new file that the diff adds, over all files at once (see the module
/// docs of [`super`] for the counter rules).
pub fn added_lines(diff_patch: &str) -> HashSet<i64> {
    let mut lines = HashSet::new();
    let mut current: Option<i64> = None;
    for line in python::splitlines(diff_patch) {
        if let Some(start) = hunk_new_start(line) {
            current = Some(start);
            continue;
        }
        let Some(counter) = current.as_mut() else { continue };
        if line.starts_with('+') && !line.starts_with("+++") {
            lines.insert(*counter);
            *counter += 1;
        } else if line.starts_with('-') && !line.starts_with("---") {
        } else {
            *counter += 1;
        }
    }
    lines
}

/// `@@ -a[,b] +c[,d] @@` at the start of `line` → c.
fn hunk_new_start(line: &str) -> Option<i64> {
    let rest = line.strip_prefix("@@ -")?;
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let skip_range = |s: &str| -> Option<usize> {
        let n = digits(s);
        if n == 0 {
            return None;
        }
        match s[n..].strip_prefix(',') {
            Some(after) if digits(after) > 0 => Some(n + 1 + digits(after)),
            _ => Some(n),
        }
    };
    let old = skip_range(rest)?;
    let rest = rest[old..].strip_prefix(" +")?;
    let start_len = digits(rest);
    if start_len == 0 {
        return None;
    }
    let new = skip_range(rest)?;
    rest[new..].starts_with(" @@").then(|| rest[..start_len].parse().ok()).flatten()
}

/// Every "```json" (any case) and "```" removed, as the harness's regex does left to right.
fn remove_fences(text: &str, ignore_case: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("```") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let json_tag =
            after.get(..4).is_some_and(|t| if ignore_case { t.eq_ignore_ascii_case("json") } else { t == "json" });
        rest = if json_tag { &after[4..] } else { after };
    }
    out.push_str(rest);
    out
}

/// The fence removal of the judge's parser (case-sensitive there).
pub(super) fn remove_fences_case_sensitive(text: &str) -> String {
    remove_fences(text, false)
}

/// The JSON values that decode at each position of `text` holding one of `open`, in order.
fn values_at(text: &str, open: &[char]) -> Vec<Value> {
    text.char_indices()
        .filter(|(_, c)| open.contains(c))
        .filter_map(|(i, _)| python::decode_prefix(&text[i..]))
        .collect()
}

/// The JSON value of an agent answer (see the module docs), or the harness's error text.
pub fn parse_agent_json(raw: &str) -> Result<Value, String> {
    let text = python::strip(raw);
    if text.is_empty() {
        return Ok(Value::Array(Vec::new()));
    }
    if let Some(value) = python::loads(text) {
        return Ok(value);
    }
    let unfenced = remove_fences(text, true);
    let unfenced = python::strip(&unfenced);
    if let Some(value) = python::loads(unfenced) {
        return Ok(value);
    }
    let candidates: Vec<Value> = values_at(unfenced, &['[', '{']);
    for candidate in candidates.into_iter().rev() {
        match candidate {
            Value::Array(_) => return Ok(candidate),
            Value::Object(mut map) if matches!(map.get("comments"), Some(Value::Array(_))) => {
                return Ok(map.remove("comments").expect("checked above"))
            }
            _ => {}
        }
    }
    let fragments: Vec<Value> =
        values_at(unfenced, &['{']).into_iter().filter(|v| matches!(v.get("body"), Some(Value::String(_)))).collect();
    if fragments.is_empty() {
        Err(UNPARSEABLE.to_string())
    } else {
        Ok(Value::Array(fragments))
    }
}

/// The comments of a parsed answer (see the module docs).
pub fn agent_comments(parsed: &Value, task_id: &str, config_name: &str, added: &HashSet<i64>) -> Vec<AgentComment> {
    let items = match parsed {
        Value::Array(items) => items,
        Value::Object(map) => match map.get("comments") {
            Some(Value::Array(items)) => items,
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if out.len() >= MAX_AGENT_COMMENTS {
            break;
        }
        let Value::Object(item) = item else { continue };
        let body = python::text_or_empty(item, "body");
        let body = python::strip(&body);
        if body.is_empty() {
            continue;
        }
        let line_reference = item.get("line").filter(|l| !l.is_null()).and_then(python::int_of);
        let file_reference = item.get("file").filter(|f| !f.is_null() && f.as_str() != Some("")).map(python::str_of);
        let severity_claim = item
            .get("severity")
            .and_then(Value::as_str)
            .map(|s| python::strip(s).to_uppercase())
            .filter(|s| matches!(s.as_str(), "P0" | "P1" | "P2"));
        out.push(AgentComment {
            comment_id: format!("{task_id}_{config_name}_{index}"),
            body: body.to_string(),
            file_reference,
            line_reference,
            severity_claim,
            is_outside_diff: line_reference.is_some_and(|line| !added.contains(&line)),
        });
    }
    out
}

/// Whether an answer "looks structured": `"body"` then optional whitespace then `:`, or
/// "```json" in any case.
pub fn looks_structured(raw: &str) -> bool {
    let text = python::strip(raw);
    if text.is_empty() {
        return false;
    }
    let body_key = text
        .match_indices("\"body\"")
        .any(|(at, key)| text[at + key.len()..].trim_start_matches(|c: char| c.is_whitespace()).starts_with(':'));
    body_key || text.to_lowercase().contains("```json")
}

/// The agent output of one answer, or the parse error (`build_agent_output_from_raw`).
pub fn agent_output_from_answer(input: &EvalInput, raw: &str) -> Result<AgentOutput, String> {
    let parsed = parse_agent_json(raw)?;
    let comments = agent_comments(&parsed, &input.task_id, &input.config_name, &added_lines(&input.diff_patch));
    if comments.is_empty() && looks_structured(raw) {
        return Err(STRUCTURED_BUT_EMPTY.to_string());
    }
    Ok(AgentOutput { raw_response: raw.to_string(), comments, parse_success: true, parse_error: None })
}

/// The output of an answer that did not parse (or of no answer): no comments, the error kept.
pub fn parse_failure(raw_response: String, error: String) -> AgentOutput {
    AgentOutput { raw_response, comments: Vec::new(), parse_success: false, parse_error: Some(error) }
}

/// One generation: up to `attempts` calls until one gives a non-blank answer. `Err` of the
/// outer result stops everything (see [`run_agent`]).
async fn generate<E, F, Fut>(
    kind: AgentCallKind,
    attempts: usize,
    max_tokens: u32,
    call: &mut F,
) -> Result<Result<String, String>, E>
where
    F: FnMut(AgentCall) -> Fut,
    Fut: std::future::Future<Output = Result<Result<String, String>, E>>,
{
    let mut last_error = String::new();
    for attempt in 0..attempts {
        match call(AgentCall { kind, attempt, max_tokens }).await? {
            Ok(answer) if !python::strip(&answer).is_empty() => return Ok(Ok(answer)),
            Ok(_) => last_error = EMPTY_RESPONSE.to_string(),
            Err(error) => last_error = error,
        }
    }
    Ok(Err(format!("Agent generation failed after {attempts} attempts: {last_error}")))
}

/// The agent output of one record, making its calls through `call` (see the module docs).
/// `call` answers `Ok(Ok(text))`, or `Ok(Err(error text))` for an attempt that failed as the
/// harness counts failures; `Err` stops the sequence and is returned (the run path's provider
/// outages and time limits, which are never the model's doing).
pub async fn run_agent<E, F, Fut>(input: &EvalInput, agent_max_tokens: u32, mut call: F) -> Result<AgentOutput, E>
where
    F: FnMut(AgentCall) -> Fut,
    Fut: std::future::Future<Output = Result<Result<String, String>, E>>,
{
    let first_tokens = agent_max_tokens.max(256);
    let first = match generate(AgentCallKind::First, FIRST_ATTEMPTS, first_tokens, &mut call).await? {
        Ok(answer) => answer,
        Err(error) => return Ok(parse_failure(String::new(), error)),
    };
    let first_error = match agent_output_from_answer(input, &first) {
        Ok(output) => return Ok(output),
        Err(error) => error,
    };
    let retry_tokens = agent_max_tokens.clamp(1024, 16384);
    let retry = match generate(AgentCallKind::Retry, RETRY_ATTEMPTS, retry_tokens, &mut call).await? {
        Ok(answer) => answer,
        Err(error) => return Ok(parse_failure(first, error)),
    };
    Ok(match agent_output_from_answer(input, &retry) {
        Ok(output) => output,
        Err(retry_error) => {
            parse_failure(retry, format!("initial_parse_error={first_error}; retry_parse_error={retry_error}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prose_ending_in_a_footnote_yields_the_footnote() {
        let raw = "Here: [{\"body\": \"x\"}] see [1]";
        assert_eq!(parse_agent_json(raw), Ok(json!([1])));
    }

    #[test]
    fn fenced_and_prose_wrapped_answers_parse() {
        assert_eq!(parse_agent_json("```JSON\n[{\"body\": \"x\"}]\n```"), Ok(json!([{"body": "x"}])));
        assert_eq!(parse_agent_json("Sure. {\"comments\": [{\"body\": \"y\"}]} done"), Ok(json!([{"body": "y"}])));
        assert_eq!(parse_agent_json("nothing here"), Err(UNPARSEABLE.to_string()));
    }

    #[test]
    fn hunk_headers_set_the_counter() {
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +10,3 @@\n ctx\n+add\n-del\n+add2\n";
        let added = added_lines(diff);
        assert_eq!(added, HashSet::from([11, 12]));
        assert_eq!(hunk_new_start("@@ -3 +7 @@ fn"), Some(7));
        assert_eq!(hunk_new_start("@@ -3 +x @@"), None);
    }

    #[test]
    fn issues_objects_give_no_comments_and_look_structured() {
        let input = EvalInput {
            task_id: "t".into(),
            pr_number: 1,
            repo: String::new(),
            config_name: "config_A_diff_only".into(),
            rendered_context: String::new(),
            total_tokens: 0,
            pipeline_version: String::new(),
            difficulty: String::new(),
            pr_type: String::new(),
            language: String::new(),
            diff_patch: String::new(),
            human_comments: Vec::new(),
            has_severity_annotations: false,
        };
        let raw = "{\"issues\": [{\"body\": \"x\"}]}";
        assert_eq!(agent_output_from_answer(&input, raw), Err(STRUCTURED_BUT_EMPTY.to_string()));
        assert!(agent_output_from_answer(&input, "[]").unwrap().comments.is_empty());
    }
}
