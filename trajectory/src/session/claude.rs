//! Claude Code's session log: `~/.claude/projects/<cwd slug>/<session id>.jsonl`, one record a
//! line (as Claude Code 2.1.332 writes it). Read here:
//!
//! - `assistant` records: their `message.content` blocks of type `tool_use` (`id`, `name`,
//!   `input`) are the calls (Claude Code writes one record per content block);
//! - `user` records: their `message.content` blocks of type `tool_result` (`tool_use_id`,
//!   `content`, `is_error`) are the results, and the record's `toolUseResult` is the tool's own
//!   view of it — for `Bash`, `stdout` and `stderr` when the command succeeded, and a text
//!   starting `Error: Exit code N` when it did not.
//!
//! A failed command's result starts `Exit code N`, which gives its exit code; Claude Code
//! reports every non-zero exit that way, so a `Bash` result that is not an error, not
//! interrupted and carries the command's `stdout` exited 0. Other records (`api-request-blob`
//! copies of what was sent, attachments, queue operations, costs) are left to the proxy log.

use serde_json::Value;

use super::collector::{each_json_line, text_of, Collector};
use crate::arguments_text;

pub(crate) fn parse(collector: &mut Collector, file: &str, text: &str) {
    each_json_line(collector, file, text, |collector, line, record| {
        let kind = record.get("type").and_then(Value::as_str);
        if !matches!(kind, Some("assistant" | "user")) {
            return;
        }
        let Some(Value::Array(blocks)) = record.get("message").and_then(|m| m.get("content")) else { return };
        for block in blocks {
            match (kind, block.get("type").and_then(Value::as_str)) {
                (Some("assistant"), Some("tool_use")) => {
                    let (Some(id), Some(name)) =
                        (block.get("id").and_then(Value::as_str), block.get("name").and_then(Value::as_str))
                    else {
                        collector.warn(file, line, "a tool_use without an id or a name");
                        continue;
                    };
                    collector.call(Some(id), name, arguments_text(block.get("input")));
                }
                (Some("user"), Some("tool_result")) => {
                    tool_result(collector, file, line, block, record.get("toolUseResult"));
                }
                _ => {}
            }
        }
    });
}

fn tool_result(collector: &mut Collector, file: &str, line: usize, block: &Value, tool: Option<&Value>) {
    let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
        collector.warn(file, line, "a tool_result without a tool_use_id");
        return;
    };
    let Some(call) = collector.get(id) else {
        collector.warn(file, line, format_args!("a result for tool call {id}, which the log does not show"));
        return;
    };
    let content = text_of(block.get("content")).unwrap_or_default();
    let is_error = block.get("is_error").and_then(Value::as_bool);
    let exit_line = content.lines().next().and_then(|first| first.strip_prefix("Exit code ")).map(str::trim);
    let failed_code = exit_line.filter(|_| is_error == Some(true)).and_then(|code| code.parse::<i64>().ok());
    let streams = tool.filter(|t| t.is_object()).and_then(|t| {
        let stdout = t.get("stdout").and_then(Value::as_str)?;
        let stderr = t.get("stderr").and_then(Value::as_str).unwrap_or_default();
        Some((stdout.len() + stderr.len(), t.get("interrupted").and_then(Value::as_bool)))
    });
    call.is_error = is_error.or(call.is_error);
    if let Some(code) = failed_code {
        call.set_exit_code(code);
    } else if call.name == "Bash" && is_error == Some(false) && matches!(streams, Some((_, Some(false)))) {
        call.set_exit_code(0);
    }
    call.output_bytes = Some(match (streams, failed_code) {
        (Some((bytes, _)), _) => bytes as u64,
        // The output after the `Exit code N` line.
        (None, Some(_)) => content.split_once('\n').map_or(0, |(_, rest)| rest.len()) as u64,
        (None, None) => content.len() as u64,
    });
}

#[cfg(test)]
mod tests {
    use crate::session::{parse_session, SessionFormat};

    const SESSION: &str = include_str!("../samples/claude-code-session.jsonl");

    #[test]
    fn reads_bash_calls_with_their_results() {
        let parsed = parse_session(SessionFormat::ClaudeCode, &[("s.jsonl".into(), SESSION.into())]);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let calls = parsed.call_rows();
        assert_eq!(
            calls,
            [
                (
                    "toolu_scripted_3",
                    "Bash",
                    Some(128),
                    Some(true),
                    Some("fatal: not a git repository (or any of the parent directories): .git".len() as u64)
                ),
                ("toolu_scripted_5", "Bash", Some(0), Some(false), Some(0)),
            ]
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&parsed.calls[0].arguments).unwrap()["command"],
            "git status --short && git diff --stat"
        );
    }

    #[test]
    fn copies_of_requests_do_not_count_twice() {
        // The sample holds `api-request-blob` records repeating each tool result.
        assert!(SESSION.lines().any(|l| l.contains("\"api-request-blob\"") && l.contains("tool_result")));
        let parsed = parse_session(SessionFormat::ClaudeCode, &[("s.jsonl".into(), SESSION.into())]);
        assert_eq!(parsed.calls.len(), 2);
    }

    #[test]
    fn a_result_without_its_call_is_reported() {
        let results: String =
            SESSION.lines().filter(|l| !l.contains("\"tool_use\"")).map(|l| format!("{l}\n")).collect();
        let parsed = parse_session(SessionFormat::ClaudeCode, &[("s.jsonl".into(), results)]);
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
        assert!(parsed.warnings[0].contains("toolu_scripted_3"), "{:?}", parsed.warnings);
    }
}
