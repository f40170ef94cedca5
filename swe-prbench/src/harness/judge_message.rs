//! The judge's user message as the reference harness builds it (`judge.py:_build_judge_message`):
//! the diff snippet in a `diff` fence, then the ground-truth comments, then the agent's comments
//! (ids `<task>_<config>_<index>`), each section under its heading. The judge's *system* prompt
//! is the harness's text and is not part of this repository.

use serde_json::{Map, Value};

use super::agent::AgentOutput;
use super::judge_diff::{judge_diff_snippet, JUDGE_DIFF_MAX_CHARS};
use super::layout::EvalInput;
use super::python;

/// A ground-truth member as Python's `f"{c.get(key, default)}"` prints it: the default when the
/// key is missing, `None` for `null`, else `str()` of the value.
fn member(comment: &Map<String, Value>, key: &str, default: &str) -> String {
    comment.get(key).map(python::str_of).unwrap_or_else(|| default.to_string())
}

/// The judge's user message for one record.
pub fn judge_user_message(input: &EvalInput, agent: &AgentOutput) -> String {
    let diff = judge_diff_snippet(&input.diff_patch, JUDGE_DIFF_MAX_CHARS);
    let diff_section = format!("## Diff\n```diff\n{diff}\n```");
    let mut human_section = String::from("## Human Expert Review Comments (Ground Truth)\n");
    for comment in &input.human_comments {
        let id = comment.get("comment_id").map(python::str_of).unwrap_or_else(|| "None".to_string());
        human_section.push_str(&format!(
            "- comment_id: {id}\n  file: {}\n  line: {}\n  severity: {}\n  body: {}\n\n",
            member(comment, "file", "general"),
            member(comment, "line", "N/A"),
            member(comment, "severity", "unspecified"),
            member(comment, "body", ""),
        ));
    }
    let mut agent_section = String::from("## AI Agent Review Comments (To Evaluate)\n");
    if agent.comments.is_empty() {
        agent_section.push_str("(Agent produced no comments)\n");
    }
    for comment in &agent.comments {
        agent_section.push_str(&format!(
            "- comment_id: {}\n  file: {}\n  line: {}\n  severity_claimed: {}\n  body: {}\n\n",
            comment.comment_id,
            comment.file_reference.as_deref().filter(|f| !f.is_empty()).unwrap_or("general"),
            comment.line_reference.map_or_else(|| "N/A".to_string(), |l| l.to_string()),
            comment.severity_claim.as_deref().filter(|s| !s.is_empty()).unwrap_or("unspecified"),
            comment.body,
        ));
    }
    format!("{diff_section}\n\n{human_section}\n\n{agent_section}")
}
