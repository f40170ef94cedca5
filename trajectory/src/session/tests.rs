//! Merging recorded session logs into trajectories built from the same trials' proxy logs
//! (samples recorded from the pinned harnesses against the scripted model, in a repository
//! whose `.git` was removed so that the first command fails), and the merge rules on small
//! made-up trajectories.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::{build, to_jsonl, Action, Trajectory, TrajectoryEvent};
use lightsout_model::exchange::Exchange;

fn exchanges(jsonl: &str) -> Vec<Exchange> {
    jsonl.lines().map(|line| serde_json::from_str(line).expect("a recorded exchange")).collect()
}

/// `(name, source, exit_code, is_error, output_bytes)` of each tool call.
type Row = (String, ToolSource, Option<i64>, Option<bool>, Option<u64>);

fn rows(trajectory: &Trajectory) -> Vec<Row> {
    trajectory
        .events
        .iter()
        .filter_map(|event| match event {
            TrajectoryEvent::ToolCall { name, source, exit_code, is_error, output_bytes, .. } => {
                Some((name.clone(), *source, *exit_code, *is_error, *output_bytes))
            }
            _ => None,
        })
        .collect()
}

fn merged(format: SessionFormat, exchanges_jsonl: &str, session: &str) -> Trajectory {
    let mut trajectory = build(&exchanges(exchanges_jsonl));
    assert!(trajectory.warnings.is_empty(), "{:?}", trajectory.warnings);
    assert!(rows(&trajectory).iter().all(|row| row.1 == ToolSource::Proxy));
    let parsed = parse_session(format, &[("session".into(), session.into())]);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    merge_session(&mut trajectory, &parsed.calls);
    trajectory
}

const GIT_FAILED: &str = "fatal: not a git repository (or any of the parent directories): .git";

#[test]
fn codex_rollout_merges_by_call_id() {
    let t = merged(
        SessionFormat::CodexRollout,
        include_str!("../samples/codex-exchanges.jsonl"),
        include_str!("../samples/codex-rollout.jsonl"),
    );
    let both = ToolSource::ProxyHarness;
    assert_eq!(
        rows(&t),
        [
            ("exec_command".into(), both, Some(128), Some(true), Some(GIT_FAILED.len() as u64 + 1)),
            ("exec_command".into(), both, Some(0), Some(false), Some(0)),
        ]
    );
    assert_eq!((t.tool_calls, t.confirmed_tool_calls, t.failed_tool_calls, t.harness_only_tool_calls), (2, 2, 1, 0));
    assert_eq!(t.action_mix, BTreeMap::from([(Action::Git, 1), (Action::Write, 1)]));
    let jsonl = to_jsonl(&t);
    assert!(jsonl.contains("\"source\":\"proxy+harness\",\"exit_code\":128,\"is_error\":true"), "{jsonl}");
}

#[test]
fn claude_code_session_merges_by_tool_use_id() {
    let t = merged(
        SessionFormat::ClaudeCode,
        include_str!("../samples/claude-code-exchanges.jsonl"),
        include_str!("../samples/claude-code-session.jsonl"),
    );
    let both = ToolSource::ProxyHarness;
    assert_eq!(
        rows(&t),
        [
            ("Bash".into(), both, Some(128), Some(true), Some(GIT_FAILED.len() as u64)),
            ("Bash".into(), both, Some(0), Some(false), Some(0)),
        ]
    );
    assert_eq!((t.confirmed_tool_calls, t.failed_tool_calls), (2, 1));
}

#[test]
fn copilot_events_merge_over_both_apis() {
    for (exchanges, events) in [
        (include_str!("../samples/copilot-cli-exchanges.jsonl"), include_str!("../samples/copilot-cli-events.jsonl")),
        (
            include_str!("../samples/copilot-cli-anthropic-exchanges.jsonl"),
            include_str!("../samples/copilot-cli-anthropic-events.jsonl"),
        ),
    ] {
        let t = merged(SessionFormat::CopilotEvents, exchanges, events);
        let both = ToolSource::ProxyHarness;
        assert_eq!(
            rows(&t),
            [
                ("bash".into(), both, Some(128), Some(true), Some(GIT_FAILED.len() as u64)),
                ("bash".into(), both, Some(0), Some(false), Some(0)),
            ]
        );
        assert_eq!((t.confirmed_tool_calls, t.failed_tool_calls), (2, 1));
    }
}

#[test]
fn mini_swe_agent_trajectory_merges_by_tool_call_id() {
    let t = merged(
        SessionFormat::MiniSweAgent,
        include_str!("../samples/mini-swe-agent-exchanges.jsonl"),
        include_str!("../samples/mini-swe-agent-trajectory.json"),
    );
    let both = ToolSource::ProxyHarness;
    assert_eq!(
        rows(&t),
        [
            ("bash".into(), both, Some(128), Some(true), Some(GIT_FAILED.len() as u64 + 1)),
            ("bash".into(), both, Some(0), Some(false), Some(0)),
            // The submit command: in the log, but not run as far as mini-swe-agent says.
            ("bash".into(), both, None, None, None),
        ]
    );
    assert_eq!((t.tool_calls, t.confirmed_tool_calls, t.failed_tool_calls), (3, 2, 1));
}

/// A successful Chat Completions exchange answering `content` with `tool_calls`; tools are
/// offered when there are tool calls.
fn chat(seq: u64, content: &str, tool_calls: Value) -> Exchange {
    let offers_tools = tool_calls.as_array().is_some_and(|calls| !calls.is_empty());
    let mut request = json!({"model": "m", "messages": [{"role": "user", "content": format!("step {seq}")}]});
    if offers_tools {
        request["tools"] = json!([{"type": "function", "function": {"name": "bash"}}]);
    }
    serde_json::from_value(json!({
        "seq": seq, "api": "openai-chat", "path": "/chat/completions", "model": "m",
        "started_at": "2026-01-01T00:00:00Z", "duration_ms": 5, "status": 200, "stream": false,
        "request": request,
        "response": {"kind": "json", "body": {"choices": [{"index": 0, "message": {
            "role": "assistant", "content": content, "tool_calls": tool_calls}}]}},
        "usage": lightsout_model::Usage::default(), "cost_usd": null
    }))
    .unwrap()
}

fn bash_call(id: &str, command: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": json!({"command": command}).to_string()}})
}

fn harness(id: Option<&str>, command: &str, exit_code: i64) -> HarnessToolCall {
    HarnessToolCall {
        id: id.map(str::to_string),
        name: "bash".into(),
        arguments: json!({"command": command}).to_string(),
        exit_code: Some(exit_code),
        is_error: Some(exit_code != 0),
        output_bytes: Some(3),
    }
}

#[test]
fn text_protocol_calls_merge_in_order() {
    // No tools offered: each answer's shell block is the call, with no id.
    let exchanges =
        [chat(1, "Looking.\n```bash\nls\n```", Value::Null), chat(2, "Reading.\n```bash\ncat a.py\n```", Value::Null)];
    let mut t = build(&exchanges);
    assert_eq!(t.tool_calls, 2);
    merge_session(&mut t, &[harness(None, "ls", 0), harness(None, "cat a.py", 1)]);
    let rows = rows(&t);
    assert_eq!(rows[0], ("bash".into(), ToolSource::ProxyHarness, Some(0), Some(false), Some(3)));
    assert_eq!(rows[1], ("bash".into(), ToolSource::ProxyHarness, Some(1), Some(true), Some(3)));
    assert_eq!((t.tool_calls, t.confirmed_tool_calls, t.failed_tool_calls, t.harness_only_tool_calls), (2, 2, 1, 0));
}

#[test]
fn executions_the_proxy_did_not_see_are_added_after_the_one_before() {
    let exchanges =
        [chat(1, "", json!([bash_call("call_1", "git diff")])), chat(2, "", json!([bash_call("call_2", "pytest -q")]))];
    let mut t = build(&exchanges);
    // The harness ran `cat notes.txt` (call_9, unknown to the proxy) between the two, and its
    // id differs from both proxy calls', so it is not taken for either.
    merge_session(
        &mut t,
        &[
            harness(Some("call_1"), "git diff", 0),
            harness(Some("call_9"), "cat notes.txt", 0),
            harness(Some("call_2"), "pytest -q", 2),
        ],
    );
    let calls: Vec<(u64, u32, Option<String>, ToolSource, Action)> = t
        .events
        .iter()
        .filter_map(|e| match e {
            TrajectoryEvent::ToolCall { seq, turn, id, source, action, .. } => {
                Some((*seq, *turn, id.clone(), *source, *action))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            (1, 1, Some("call_1".into()), ToolSource::ProxyHarness, Action::Git),
            (1, 1, Some("call_9".into()), ToolSource::Harness, Action::Read),
            (2, 2, Some("call_2".into()), ToolSource::ProxyHarness, Action::Execute),
        ]
    );
    assert_eq!((t.tool_calls, t.confirmed_tool_calls, t.failed_tool_calls, t.harness_only_tool_calls), (3, 3, 1, 1));
    assert_eq!(t.action_mix, BTreeMap::from([(Action::Read, 1), (Action::Execute, 1), (Action::Git, 1)]));
    let jsonl = to_jsonl(&t);
    assert!(jsonl.contains("\"source\":\"harness\""), "{jsonl}");
}

#[test]
fn different_ids_never_match_in_order() {
    let mut t = build(&[chat(1, "", json!([bash_call("call_1", "ls")]))]);
    merge_session(&mut t, &[harness(Some("call_7"), "ls", 0)]);
    let rows = rows(&t);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].1, ToolSource::Proxy, "the proxy's call keeps no result");
    assert_eq!(rows[0].2, None);
    assert_eq!(rows[1].1, ToolSource::Harness);
    assert_eq!(t.harness_only_tool_calls, 1);
}

#[test]
fn without_a_session_log_calls_stay_proxy_only() {
    let mut t = build(&[chat(1, "", json!([bash_call("call_1", "ls")]))]);
    merge_session(&mut t, &[]);
    assert_eq!(rows(&t), [("bash".into(), ToolSource::Proxy, None, None, None)]);
    assert_eq!((t.tool_calls, t.confirmed_tool_calls, t.failed_tool_calls), (1, 0, 0));
    let line = to_jsonl(&t).lines().find(|l| l.contains("tool_call")).unwrap().to_string();
    assert!(line.contains("\"source\":\"proxy\"") && !line.contains("exit_code"), "{line}");
}

#[test]
fn older_trajectory_lines_still_read() {
    let old = r#"{"type":"tool_call","seq":1,"turn":1,"id":"c","name":"bash","arguments":"{}","command":"ls","action":"probe"}"#;
    let event: TrajectoryEvent = serde_json::from_str(old).unwrap();
    let TrajectoryEvent::ToolCall { source, exit_code, is_error, output_bytes, .. } = event else { panic!() };
    assert_eq!((source, exit_code, is_error, output_bytes), (ToolSource::Proxy, None, None, None));
}

#[test]
fn artifacts_are_named_by_format() {
    assert_eq!(SessionFormat::CodexRollout.artifact(), "harness-session.jsonl.zst");
    assert_eq!(SessionFormat::MiniSweAgent.artifact(), "harness-session.json.zst");
}
