//! mini-swe-agent's trajectory: the JSON file written with `-o` (`trajectory_format`
//! `mini-swe-agent-1.1`, as mini-swe-agent 2.4.6 writes it): `{"info", "messages",
//! "trajectory_format"}`. Read here, from `messages`:
//!
//! - the assistant's messages: their `extra.actions`, each a bash `command` with the
//!   `tool_call_id` it came from (none in the text protocol), are the calls, named `bash` with
//!   arguments `{"command": …}`, as the model's tool call has them;
//! - observation messages (`role` `tool`, or `user` in the text protocol): their `extra` holds
//!   `returncode`, `raw_output` and `exception_info`; they answer the call `tool_call_id` (Chat
//!   Completions) or `call_id` (Responses), else the next action still unanswered.
//!
//! mini-swe-agent pads the observations of actions it did not run with `returncode` -1 and
//! `exception_info` `action was not executed` — the submit command, which ends the run, is
//! recorded so: such a call has no result. Another exception (a timeout, say) is an error with
//! no exit code.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::collector::Collector;

const NOT_EXECUTED: &str = "action was not executed";

pub(crate) fn parse(collector: &mut Collector, file: &str, text: &str) {
    let trajectory: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            collector.warn(file, e.line(), format_args!("not a mini-swe-agent trajectory: {e}"));
            return;
        }
    };
    let Some(messages) = trajectory.get("messages").and_then(Value::as_array) else {
        collector.warn(file, 1, "no messages in the trajectory");
        return;
    };
    // Calls still waiting for their observation, in order.
    let mut pending: VecDeque<usize> = VecDeque::new();
    for (index, message) in messages.iter().enumerate() {
        let extra = message.get("extra");
        if let Some(actions) = extra.and_then(|e| e.get("actions")).and_then(Value::as_array) {
            for action in actions {
                let Some(command) = action.get("command").and_then(Value::as_str) else {
                    collector.warn_message(file, index, "an action without a command");
                    continue;
                };
                let id = action.get("tool_call_id").and_then(Value::as_str);
                let call = collector.call(id, "bash", json!({ "command": command }).to_string());
                pending.push_back(call);
            }
            continue;
        }
        let Some(returncode) = extra.and_then(|e| e.get("returncode")) else { continue };
        let id = message.get("tool_call_id").or_else(|| message.get("call_id")).and_then(Value::as_str);
        let call = match id {
            Some(id) => match collector.index(id) {
                Some(call) => call,
                None => {
                    collector.warn_message(
                        file,
                        index,
                        format_args!("output for call {id}, which the log does not show"),
                    );
                    continue;
                }
            },
            None => match pending.front() {
                Some(&call) => call,
                None => {
                    collector.warn_message(file, index, "an output without an action");
                    continue;
                }
            },
        };
        pending.retain(|&c| c != call);
        let exception = extra.and_then(|e| e.get("exception_info")).and_then(Value::as_str).unwrap_or_default();
        let call = &mut collector.out.calls[call];
        if exception == NOT_EXECUTED {
            continue;
        }
        if !exception.is_empty() {
            call.is_error = Some(true);
        } else if let Some(code) = returncode.as_i64() {
            call.set_exit_code(code);
        }
        if let Some(output) = extra.and_then(|e| e.get("raw_output")).and_then(Value::as_str) {
            call.output_bytes = Some(output.len() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::session::{parse_session, SessionFormat};

    const TRAJECTORY: &str = include_str!("../samples/mini-swe-agent-trajectory.json");

    #[test]
    fn reads_actions_and_their_return_codes() {
        let parsed = parse_session(SessionFormat::MiniSweAgent, &[("t.json".into(), TRAJECTORY.into())]);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let calls = parsed.call_rows();
        let git_failed = "fatal: not a git repository (or any of the parent directories): .git\n".len() as u64;
        assert_eq!(
            calls,
            [
                ("call_scripted_4", "bash", Some(128), Some(true), Some(git_failed)),
                ("call_scripted_5", "bash", Some(0), Some(false), Some(0)),
                // The submit command ends the run: recorded as not executed, so no result.
                ("call_scripted_6", "bash", None, None, None),
            ]
        );
        let arguments: serde_json::Value = serde_json::from_str(&parsed.calls[0].arguments).unwrap();
        assert_eq!(arguments["command"], "git status --short && git diff --stat");
    }

    #[test]
    fn an_unreadable_trajectory_is_a_warning() {
        let parsed = parse_session(SessionFormat::MiniSweAgent, &[("t.json".into(), "{\"messages\": [".into())]);
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.warnings.len(), 1);
        assert!(parsed.warnings[0].starts_with("t.json:1: not a mini-swe-agent trajectory"), "{:?}", parsed.warnings);
    }
}
