//! A harness's own session log, and merging it into the proxy's trajectory.
//!
//! The proxy sees what the model asked for; only the harness knows what then happened. Each
//! harness that keeps a session log records its tool executions there, and this module reads
//! them ([`parse_session`], one module a format) into [`HarnessToolCall`]s: the tool, its
//! arguments, and — what the proxy log cannot know for sure — the result: the exit code, whether
//! the harness marked it an error, and the size of its output.
//!
//! [`merge_session`] then attaches each execution to the tool call the proxy saw:
//!
//! 1. by call id first (every harness keeps the provider's tool-call id: `call_…`, `toolu_…`);
//! 2. then in order: an execution left over is matched to the next unmatched proxy tool call of
//!    the same name after the previous match, provided the two do not carry different ids (a
//!    text-protocol call has none);
//! 3. an execution still unmatched was not visible in the proxy log: it is added with source
//!    `harness`, classified like any other, right after the tool call matched to the execution
//!    before it, with that call's `seq` and `turn` (at the end, with the last model call's, when
//!    none was matched before it).
//!
//! Matched tool calls get source `proxy+harness` and the result fields; tool calls the harness
//! log does not mention keep source `proxy`. A line that cannot be read is skipped with a
//! warning naming the file and the line.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{classify_tool, parse_arguments, Trajectory, TrajectoryEvent};

/// The artifact holding a JSON-lines session log (several files are concatenated).
pub const SESSION_JSONL_ARTIFACT: &str = "harness-session.jsonl.zst";
/// The artifact holding a JSON session log (mini-swe-agent's trajectory).
pub const SESSION_JSON_ARTIFACT: &str = "harness-session.json.zst";

/// Where a tool call in the trajectory is known from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ToolSource {
    /// Only the proxy log: the model asked for it; what happened is not known.
    #[default]
    #[serde(rename = "proxy")]
    Proxy,
    /// The proxy log, with the result from the harness's session log.
    #[serde(rename = "proxy+harness")]
    ProxyHarness,
    /// Only the harness's session log: an execution the proxy log does not show.
    #[serde(rename = "harness")]
    Harness,
}

/// The session log formats this build reads, one per harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionFormat {
    /// Codex: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`.
    CodexRollout,
    /// Claude Code: `~/.claude/projects/<cwd slug>/<session id>.jsonl`.
    ClaudeCode,
    /// GitHub Copilot CLI: `$COPILOT_HOME/session-state/<session id>/events.jsonl`.
    CopilotEvents,
    /// mini-swe-agent: the trajectory JSON written with `-o`.
    MiniSweAgent,
}

impl SessionFormat {
    /// The artifact the raw log is stored as.
    pub fn artifact(self) -> &'static str {
        match self {
            SessionFormat::MiniSweAgent => SESSION_JSON_ARTIFACT,
            _ => SESSION_JSONL_ARTIFACT,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SessionFormat::CodexRollout => "codex rollout",
            SessionFormat::ClaudeCode => "claude-code session",
            SessionFormat::CopilotEvents => "copilot-cli events",
            SessionFormat::MiniSweAgent => "mini-swe-agent trajectory",
        }
    }
}

/// One tool execution as a harness's session log records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessToolCall {
    /// The provider's tool-call id, when the harness kept it.
    pub id: Option<String>,
    pub name: String,
    /// The arguments as the harness recorded them: JSON text for function tools, free text for
    /// custom tools.
    pub arguments: String,
    /// The exit code of a command.
    pub exit_code: Option<i64>,
    /// Whether the call failed: a non-zero exit code, or a result the harness marked an error.
    pub is_error: Option<bool>,
    /// The size of the tool's output in bytes (a command's output, without the wrapping the
    /// harness adds for the model where the log keeps the two apart).
    pub output_bytes: Option<u64>,
}

impl HarnessToolCall {
    /// Whether the log says how the call ended.
    pub fn has_result(&self) -> bool {
        self.exit_code.is_some() || self.is_error.is_some()
    }

    /// Sets the result from an exit code: an error when it is not zero.
    pub(crate) fn set_exit_code(&mut self, code: i64) {
        self.exit_code = Some(code);
        self.is_error = Some(self.is_error.unwrap_or(false) || code != 0);
    }
}

/// What a session log held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionParse {
    /// The tool executions, in the order the harness started them.
    pub calls: Vec<HarnessToolCall>,
    /// What could not be read, each naming the file and the line.
    pub warnings: Vec<String>,
}

/// Collects tool calls and their results, which may come in any order and several times.
#[derive(Default)]
pub(crate) struct Collector {
    pub(crate) out: SessionParse,
    by_id: HashMap<String, usize>,
}

impl Collector {
    /// Records a call; a call id seen before updates that call instead (a log may repeat it).
    pub(crate) fn call(&mut self, id: Option<&str>, name: &str, arguments: String) -> usize {
        if let Some(&index) = id.and_then(|id| self.by_id.get(id)) {
            let call = &mut self.out.calls[index];
            if call.name.is_empty() {
                call.name = name.to_string();
            }
            if call.arguments.is_empty() {
                call.arguments = arguments;
            }
            return index;
        }
        let index = self.out.calls.len();
        self.out.calls.push(HarnessToolCall {
            id: id.map(str::to_string),
            name: name.to_string(),
            arguments,
            ..HarnessToolCall::default()
        });
        if let Some(id) = id {
            self.by_id.insert(id.to_string(), index);
        }
        index
    }

    /// The position of the call with this id, if it was recorded.
    pub(crate) fn index(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The call with this id, if it was recorded.
    pub(crate) fn get(&mut self, id: &str) -> Option<&mut HarnessToolCall> {
        self.by_id.get(id).map(|&index| &mut self.out.calls[index])
    }

    /// A warning about line `line` (from 1) of `file`.
    pub(crate) fn warn(&mut self, file: &str, line: usize, what: impl std::fmt::Display) {
        self.out.warnings.push(format!("{file}:{line}: {what}"));
    }

    /// A warning about message `index` (from 0) of a JSON log.
    pub(crate) fn warn_message(&mut self, file: &str, index: usize, what: impl std::fmt::Display) {
        self.out.warnings.push(format!("{file}: message {index}: {what}"));
    }
}

/// Reads each line of a JSON-lines file as JSON; a line that is not JSON is skipped with a
/// warning. `f` gets the line number (from 1) and the value.
pub(crate) fn each_json_line(
    collector: &mut Collector,
    file: &str,
    text: &str,
    mut f: impl FnMut(&mut Collector, usize, &Value),
) {
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(value) => f(collector, number, &value),
            Err(e) => collector.warn(file, number, format_args!("skipped a line that is not JSON ({e})")),
        }
    }
}

/// A content value's text: a string, or the `text` of each part of an array.
pub(crate) fn text_of(content: Option<&Value>) -> Option<String> {
    match content? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect()),
        _ => None,
    }
}

/// Parses the session log files of one harness, in order. Each file is `(name, text)`; the name
/// is used in warnings.
pub fn parse_session(format: SessionFormat, files: &[(String, String)]) -> SessionParse {
    let mut collector = Collector::default();
    for (name, text) in files {
        match format {
            SessionFormat::CodexRollout => super::session_codex::parse(&mut collector, name, text),
            SessionFormat::ClaudeCode => super::session_claude::parse(&mut collector, name, text),
            SessionFormat::CopilotEvents => super::session_copilot::parse(&mut collector, name, text),
            SessionFormat::MiniSweAgent => super::session_mini_swe::parse(&mut collector, name, text),
        }
    }
    collector.out
}

/// Merges a harness's tool executions into the trajectory built from the proxy log (see the
/// module documentation), and updates its counts.
pub fn merge_session(trajectory: &mut Trajectory, calls: &[HarnessToolCall]) {
    // The proxy's tool calls, by their position in the events.
    let proxy: Vec<usize> = trajectory
        .events
        .iter()
        .enumerate()
        .filter(|(_, event)| matches!(event, TrajectoryEvent::ToolCall { .. }))
        .map(|(i, _)| i)
        .collect();
    let info = |p: usize| match &trajectory.events[proxy[p]] {
        TrajectoryEvent::ToolCall { id, name, .. } => (id.clone(), name.clone()),
        _ => unreachable!("only tool calls are listed"),
    };
    let proxy_info: Vec<(Option<String>, String)> = (0..proxy.len()).map(info).collect();
    let mut proxy_match: Vec<Option<usize>> = vec![None; proxy.len()];
    let mut harness_match: Vec<Option<usize>> = vec![None; calls.len()];

    let mut by_id: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (p, (id, _)) in proxy_info.iter().enumerate() {
        if let Some(id) = id {
            by_id.entry(id.as_str()).or_default().push_back(p);
        }
    }
    for (h, call) in calls.iter().enumerate() {
        if let Some(p) = call.id.as_deref().and_then(|id| by_id.get_mut(id)).and_then(VecDeque::pop_front) {
            proxy_match[p] = Some(h);
            harness_match[h] = Some(p);
        }
    }
    let mut cursor = 0;
    for (h, call) in calls.iter().enumerate() {
        if let Some(p) = harness_match[h] {
            cursor = p + 1;
            continue;
        }
        let found = (cursor..proxy.len()).find(|&p| {
            let (id, name) = &proxy_info[p];
            proxy_match[p].is_none() && *name == call.name && (id.is_none() || call.id.is_none())
        });
        if let Some(p) = found {
            proxy_match[p] = Some(h);
            harness_match[h] = Some(p);
            cursor = p + 1;
        }
    }

    for (p, h) in proxy_match.iter().enumerate() {
        let Some(h) = *h else { continue };
        if let TrajectoryEvent::ToolCall { source, exit_code, is_error, output_bytes, .. } =
            &mut trajectory.events[proxy[p]]
        {
            *source = ToolSource::ProxyHarness;
            *exit_code = calls[h].exit_code;
            *is_error = calls[h].is_error;
            *output_bytes = calls[h].output_bytes;
        }
    }

    // Executions the proxy did not see, each after the event of the last match before it.
    let last_model_call = trajectory.events.iter().rev().find_map(|event| match event {
        TrajectoryEvent::ModelCall { seq, turn, .. } => Some((*seq, *turn)),
        _ => None,
    });
    let mut inserts: Vec<(Option<usize>, TrajectoryEvent)> = Vec::new();
    let mut anchor: Option<usize> = None;
    for (h, call) in calls.iter().enumerate() {
        if let Some(p) = harness_match[h] {
            anchor = Some(proxy[p]);
            continue;
        }
        let (seq, turn) = match anchor.map(|i| &trajectory.events[i]) {
            Some(TrajectoryEvent::ToolCall { seq, turn, .. }) => (*seq, *turn),
            _ => last_model_call.unwrap_or((0, 0)),
        };
        let mut warnings = Vec::new();
        let parsed = parse_arguments(&call.arguments, &call.name, seq, &mut warnings);
        trajectory.warnings.extend(warnings.into_iter().map(|w| format!("harness log: {w}")));
        let (action, command) = classify_tool(&call.name, &parsed);
        inserts.push((
            anchor,
            TrajectoryEvent::ToolCall {
                seq,
                turn,
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                command,
                action,
                source: ToolSource::Harness,
                exit_code: call.exit_code,
                is_error: call.is_error,
                output_bytes: call.output_bytes,
            },
        ));
    }
    if !inserts.is_empty() {
        let mut after: HashMap<Option<usize>, Vec<TrajectoryEvent>> = HashMap::new();
        for (anchor, event) in inserts {
            after.entry(anchor).or_default().push(event);
        }
        let old = std::mem::take(&mut trajectory.events);
        for (i, event) in old.into_iter().enumerate() {
            trajectory.events.push(event);
            if let Some(extra) = after.remove(&Some(i)) {
                trajectory.events.extend(extra);
            }
        }
        if let Some(extra) = after.remove(&None) {
            trajectory.events.extend(extra);
        }
    }

    recount(trajectory);
}

/// Recomputes the tool-call counts from the events.
fn recount(trajectory: &mut Trajectory) {
    trajectory.tool_calls = 0;
    trajectory.action_mix.clear();
    trajectory.confirmed_tool_calls = 0;
    trajectory.failed_tool_calls = 0;
    trajectory.harness_only_tool_calls = 0;
    for event in &trajectory.events {
        if let TrajectoryEvent::ToolCall { action, source, exit_code, is_error, .. } = event {
            trajectory.tool_calls += 1;
            *trajectory.action_mix.entry(*action).or_insert(0) += 1;
            if exit_code.is_some() || is_error.is_some() {
                trajectory.confirmed_tool_calls += 1;
            }
            if *is_error == Some(true) {
                trajectory.failed_tool_calls += 1;
            }
            if *source == ToolSource::Harness {
                trajectory.harness_only_tool_calls += 1;
            }
        }
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
