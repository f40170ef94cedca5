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

use crate::{classify_tool, parse_arguments, Trajectory, TrajectoryEvent};

mod calls;
mod claude;
mod codex;
mod collector;
mod copilot;
mod mini_swe;

pub use calls::{HarnessToolCall, SessionParse, ToolSource};
use collector::Collector;

/// The artifact holding a JSON-lines session log (several files are concatenated).
pub const SESSION_JSONL_ARTIFACT: &str = "harness-session.jsonl.zst";
/// The artifact holding a JSON session log (mini-swe-agent's trajectory).
pub const SESSION_JSON_ARTIFACT: &str = "harness-session.json.zst";

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

/// Parses the session log files of one harness, in order. Each file is `(name, text)`; the name
/// is used in warnings.
pub fn parse_session(format: SessionFormat, files: &[(String, String)]) -> SessionParse {
    let mut collector = Collector::default();
    for (name, text) in files {
        match format {
            SessionFormat::CodexRollout => codex::parse(&mut collector, name, text),
            SessionFormat::ClaudeCode => claude::parse(&mut collector, name, text),
            SessionFormat::CopilotEvents => copilot::parse(&mut collector, name, text),
            SessionFormat::MiniSweAgent => mini_swe::parse(&mut collector, name, text),
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
mod tests;
