//! GitHub Copilot CLI's session events: `$COPILOT_HOME/session-state/<session id>/events.jsonl`,
//! one `{"type", "data", "id", "timestamp", "parentId"}` event a line (as Copilot CLI 1.0.102
//! writes it). Read here:
//!
//! - `tool.execution_start`: `toolCallId` (the provider's id), `toolName`, `arguments` (an
//!   object): a call;
//! - `tool.execution_complete`: `toolCallId`, `success` (whether the tool ran — a command that
//!   exits non-zero still succeeds), `shellExecution.exitCode` for shell tools, and
//!   `result.content`, the text given back to the model; for shell tools it ends with a line
//!   `<shellId: N completed with exit code M>`, which is not counted as output.
//!
//! A call failed when the tool did not succeed or its command exited non-zero. Other events
//! (messages, turns, usage) are left to the proxy log.

use serde_json::Value;

use super::collector::{each_json_line, Collector};
use crate::arguments_text;

pub(crate) fn parse(collector: &mut Collector, file: &str, text: &str) {
    each_json_line(collector, file, text, |collector, line, event| {
        let data = event.get("data");
        let id = data.and_then(|d| d.get("toolCallId")).and_then(Value::as_str);
        match (event.get("type").and_then(Value::as_str), data) {
            (Some("tool.execution_start"), Some(data)) => {
                let (Some(id), Some(name)) = (id, data.get("toolName").and_then(Value::as_str)) else {
                    collector.warn(file, line, "a tool.execution_start without a toolCallId or a toolName");
                    return;
                };
                collector.call(Some(id), name, arguments_text(data.get("arguments")));
            }
            (Some("tool.execution_complete"), Some(data)) => {
                let Some(id) = id else {
                    collector.warn(file, line, "a tool.execution_complete without a toolCallId");
                    return;
                };
                let Some(call) = collector.get(id) else {
                    collector.warn(
                        file,
                        line,
                        format_args!("a result for tool call {id}, which the log does not show"),
                    );
                    return;
                };
                let success = data.get("success").and_then(Value::as_bool);
                if let Some(success) = success {
                    call.is_error = Some(!success);
                }
                let exit_code = data.get("shellExecution").and_then(|s| s.get("exitCode")).and_then(Value::as_i64);
                if let Some(code) = exit_code {
                    call.set_exit_code(code);
                }
                if let Some(content) = data.get("result").and_then(|r| r.get("content")).and_then(Value::as_str) {
                    let output = if exit_code.is_some() { without_shell_trailer(content) } else { content };
                    call.output_bytes = Some(output.len() as u64);
                }
            }
            _ => {}
        }
    });
}

/// A shell tool's result without its last line `<shellId: N completed with exit code M>` (and
/// the newline before it).
fn without_shell_trailer(content: &str) -> &str {
    let (rest, last) = content.rsplit_once('\n').unwrap_or(("", content));
    if last.starts_with("<shellId: ") && last.ends_with('>') {
        rest
    } else {
        content
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{parse_session, SessionFormat};

    const EVENTS: &str = include_str!("../samples/copilot-cli-events.jsonl");
    const ANTHROPIC_EVENTS: &str = include_str!("../samples/copilot-cli-anthropic-events.jsonl");

    /// `(id, name, exit_code, is_error, output_bytes)` of each call.
    type Row = (String, String, Option<i64>, Option<bool>, Option<u64>);

    fn summary(text: &str) -> Vec<Row> {
        let parsed = parse_session(SessionFormat::CopilotEvents, &[("events.jsonl".into(), text.into())]);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        parsed
            .calls
            .iter()
            .map(|c| (c.id.clone().unwrap(), c.name.clone(), c.exit_code, c.is_error, c.output_bytes))
            .collect()
    }

    #[test]
    fn reads_shell_executions_with_their_exit_codes() {
        let git_failed = "fatal: not a git repository (or any of the parent directories): .git".len() as u64;
        assert_eq!(
            summary(EVENTS),
            [
                ("call_scripted_2".into(), "bash".into(), Some(128), Some(true), Some(git_failed)),
                ("call_scripted_3".into(), "bash".into(), Some(0), Some(false), Some(0)),
            ]
        );
        // Over the Anthropic API the ids are the provider's `toolu_…`.
        let anthropic = summary(ANTHROPIC_EVENTS);
        assert_eq!(anthropic.len(), 2);
        assert!(anthropic.iter().all(|c| c.0.starts_with("toolu_")), "{anthropic:?}");
        assert_eq!((anthropic[0].2, anthropic[1].2), (Some(128), Some(0)));
    }

    #[test]
    fn the_shell_trailer_is_not_output() {
        assert_eq!(without_shell_trailer("a\nb\n<shellId: 0 completed with exit code 0>"), "a\nb");
        assert_eq!(without_shell_trailer("\n<shellId: 1 completed with exit code 0>"), "");
        assert_eq!(without_shell_trailer("just text"), "just text");
    }
}
