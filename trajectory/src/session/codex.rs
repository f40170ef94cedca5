//! Codex's rollout: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, one
//! `{"timestamp", "ordinal", "type", "payload"}` object a line (as codex-cli 0.171.0 writes it).
//! Read here:
//!
//! - `response_item` lines whose payload is a Responses API tool call — `function_call`
//!   (`call_id`, `name`, `arguments`), `custom_tool_call` (`call_id`, `name`, `input`),
//!   `local_shell_call` (`call_id`, `action`) — the calls, named as the proxy names them;
//! - `event_msg` lines `item_completed` whose `item` is a `CommandExecution`: `id` (the call id),
//!   `exit_code`, `status` (`completed`, `failed`) and `aggregated_output`: how a command ended;
//! - `response_item` lines `function_call_output` / `custom_tool_call_output` (`call_id`,
//!   `output`): the result given back to the model. For `exec_command` it is a header
//!   (`Chunk ID`, `Wall time`, `Process exited with code N`, `Original token count`) ending
//!   `Output:` and then the output; the exit code and output are taken from it when no
//!   `CommandExecution` gave them.
//!
//! Everything else (messages, reasoning, token counts, settings) is left to the proxy log.

use serde_json::Value;

use super::collector::{each_json_line, text_of, Collector};
use crate::{arguments_text, sse::snippet};

pub(crate) fn parse(collector: &mut Collector, file: &str, text: &str) {
    each_json_line(collector, file, text, |collector, line, value| {
        let payload = value.get("payload");
        let kind = payload.and_then(|p| p.get("type")).and_then(Value::as_str).unwrap_or_default();
        match (value.get("type").and_then(Value::as_str), payload) {
            (Some("response_item"), Some(item)) => response_item(collector, file, line, kind, item),
            (Some("event_msg"), Some(event)) if kind == "item_completed" => {
                if let Some(item) = event.get("item").filter(|i| i["type"] == "CommandExecution") {
                    command_execution(collector, file, line, item);
                }
            }
            _ => {}
        }
    });
}

fn call_id(item: &Value) -> Option<&str> {
    item.get("call_id").or_else(|| item.get("id")).and_then(Value::as_str)
}

fn response_item(collector: &mut Collector, file: &str, line: usize, kind: &str, item: &Value) {
    let name = item.get("name").and_then(Value::as_str);
    match kind {
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            let (name, arguments) = match kind {
                "function_call" => (name, item.get("arguments")),
                "custom_tool_call" => (name, item.get("input")),
                _ => (Some("local_shell"), item.get("action")),
            };
            let Some(name) = name else {
                collector.warn(file, line, format_args!("a {kind} without a name"));
                return;
            };
            collector.call(call_id(item), name, arguments_text(arguments));
        }
        "function_call_output" | "custom_tool_call_output" => {
            let Some(id) = item.get("call_id").and_then(Value::as_str) else {
                collector.warn(file, line, format_args!("a {kind} without a call_id"));
                return;
            };
            let Some(output) = text_of(item.get("output")) else { return };
            let Some(call) = collector.get(id) else {
                collector.warn(file, line, format_args!("output for call {id}, which the log does not show"));
                return;
            };
            let (exit_code, body) = exec_output(&output);
            if call.exit_code.is_none() {
                if let Some(code) = exit_code {
                    call.set_exit_code(code);
                }
            }
            if call.output_bytes.is_none() {
                call.output_bytes = Some(body.len() as u64);
            }
        }
        _ => {}
    }
}

fn command_execution(collector: &mut Collector, file: &str, line: usize, item: &Value) {
    let Some(id) = item.get("id").and_then(Value::as_str) else {
        collector.warn(file, line, "a CommandExecution without an id");
        return;
    };
    let Some(call) = collector.get(id) else {
        let command = item.get("command").map(Value::to_string).unwrap_or_default();
        collector.warn(
            file,
            line,
            format_args!("a command for call {id} the log does not show: {}", snippet(&command)),
        );
        return;
    };
    if let Some(code) = item.get("exit_code").and_then(Value::as_i64) {
        call.set_exit_code(code);
    }
    if item.get("status").and_then(Value::as_str) == Some("failed") {
        call.is_error = Some(true);
    }
    if let Some(output) = item.get("aggregated_output").and_then(Value::as_str) {
        call.output_bytes = Some(output.len() as u64);
    }
}

/// The exit code in an `exec_command` result's header, and the output after it (the whole
/// text when it has no such header).
fn exec_output(text: &str) -> (Option<i64>, &str) {
    let Some((header, body)) = text.split_once("\nOutput:\n") else { return (None, text) };
    if !header.starts_with("Chunk ID:") && !header.contains("\nWall time:") {
        return (None, text);
    }
    let code = header
        .lines()
        .find_map(|line| line.strip_prefix("Process exited with code "))
        .and_then(|code| code.trim().parse().ok());
    (code, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{parse_session, SessionFormat};

    const ROLLOUT: &str = include_str!("../samples/codex-rollout.jsonl");

    #[test]
    fn reads_commands_with_their_exit_codes() {
        let parsed = parse_session(SessionFormat::CodexRollout, &[("rollout.jsonl".into(), ROLLOUT.into())]);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let calls = parsed.call_rows();
        assert_eq!(
            calls,
            [
                (
                    "call_scripted_2",
                    "exec_command",
                    Some(128),
                    Some(true),
                    Some("fatal: not a git repository (or any of the parent directories): .git\n".len() as u64)
                ),
                ("call_scripted_4", "exec_command", Some(0), Some(false), Some(0)),
            ]
        );
        assert!(parsed.calls[0].arguments.contains("git status --short"), "{}", parsed.calls[0].arguments);
    }

    #[test]
    fn the_result_header_gives_the_exit_code_without_the_command_event() {
        // The same log without its `item_completed` events: the exit codes come from the
        // outputs given to the model.
        let without: String =
            ROLLOUT.lines().filter(|l| !l.contains("\"item_completed\"")).map(|l| format!("{l}\n")).collect();
        assert_ne!(without.len(), ROLLOUT.len());
        let parsed = parse_session(SessionFormat::CodexRollout, &[("r.jsonl".into(), without)]);
        let codes: Vec<_> = parsed.calls.iter().map(|c| (c.exit_code, c.is_error, c.output_bytes)).collect();
        let git_failed = "fatal: not a git repository (or any of the parent directories): .git\n".len() as u64;
        assert_eq!(codes, [(Some(128), Some(true), Some(git_failed)), (Some(0), Some(false), Some(0))]);
    }

    #[test]
    fn a_malformed_line_is_skipped_with_its_file_and_line() {
        let mut text = ROLLOUT.to_string();
        text.insert_str(0, "{\"type\": \"response_item\", \"payload\": \n");
        let parsed = parse_session(SessionFormat::CodexRollout, &[("rollout-x.jsonl".into(), text)]);
        assert_eq!(parsed.calls.len(), 2);
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        assert!(
            parsed.warnings[0].starts_with("rollout-x.jsonl:1: skipped a line that is not JSON"),
            "{:?}",
            parsed.warnings
        );
    }

    #[test]
    fn exec_output_headers() {
        let text = "Chunk ID: 805610\nWall time: 0.0000 seconds\nProcess exited with code 2\nOriginal token count: 3\nOutput:\nboom\n";
        assert_eq!(exec_output(text), (Some(2), "boom\n"));
        assert_eq!(exec_output("plain text\nOutput:\nmore\n"), (None, "plain text\nOutput:\nmore\n"));
    }
}
