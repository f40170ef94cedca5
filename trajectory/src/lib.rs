//! The agent's trajectory, rebuilt from the exchanges the metering proxy recorded
//! (`exchanges.jsonl`): each model call, the text it answered, and the tool calls it issued,
//! each classified as read, probe, write, execute, git or other (see [`classify_tool`]).
//! Written one event a line as `trajectory.jsonl` ([`to_jsonl`]).
//!
//! Answers are reassembled per API, from a JSON body or from the recorded server-sent events
//! ([`reassemble`]). Malformed events and unexpected shapes are skipped with a warning; answers
//! with an error status, and calls the proxy refused, have no text and no tool calls.
//!
//! Agents that act through text (mini-swe-agent) issue no tool calls: when an answer has none
//! and its request offered no tools, each fenced shell block in its text (```` ```bash ````) is
//! taken as a tool call named `bash`. A request that offered tools means the agent acts through
//! them, so shell blocks in its text are only text.
//!
//! # Turns
//!
//! A turn is one step of the agent's loop: a model call that succeeded (status below 400 and not
//! refused by the proxy). Successful calls are numbered 1, 2, … in the order they started, and
//! [`Trajectory::turns`] is their count. A failed or refused call adds no turn; its `turn` is the
//! one it attempted: that of the first later call with the same request messages (its retry by
//! the harness; for Chat Completions `messages`, for Responses `input`, `instructions` and
//! `previous_response_id`, for Anthropic `system` and `messages`), else the turn after the last
//! successful call (a turn that never completed). Side calls a harness makes besides its loop
//! (e.g. a title summary) are model calls like any other and count as turns.
//!
//! # The harness's own log
//!
//! Where the harness keeps a session log, its tool executions are merged in afterwards
//! ([`merge_session`], see [`session`]): each tool call then says where it is known from
//! (`source`: `proxy`, `proxy+harness` or `harness`) and, when the harness recorded it, how it
//! ended (`exit_code`, `is_error`) and how much it printed (`output_bytes`).

mod anthropic;
mod classify;
mod openai_chat;
mod openai_responses;
pub mod session;
mod shell;
mod sse;
mod text_protocol;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use lightsout_api::ApiKind;
use lightsout_model::exchange::{Exchange, ExchangeBody};
use lightsout_model::Usage;

pub use classify::{classify_command, classify_tool};
pub use session::{merge_session, parse_session, HarnessToolCall, SessionFormat, SessionParse, ToolSource};

/// What a tool call does. Declaration order is the order of [`Trajectory::action_mix`]; the
/// order of importance when a command does several things is [`Action::significance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Reads file contents (`cat`, `sed -n`, `Read`).
    Read,
    /// Looks for files or text (`ls`, `find`, `grep`, `rg`, `Glob`).
    Probe,
    /// Creates, changes or removes files (`Edit`, `apply_patch`, `sed -i`, `> file`).
    Write,
    /// Runs programs: tests, builds, scripts, package managers.
    Execute,
    /// Runs git (or the GitHub CLI).
    Git,
    /// Anything else (`echo`, planning tools, web tools, a bare `cd`).
    Other,
}

impl Action {
    pub const ALL: [Action; 6] =
        [Action::Read, Action::Probe, Action::Write, Action::Execute, Action::Git, Action::Other];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Probe => "probe",
            Action::Write => "write",
            Action::Execute => "execute",
            Action::Git => "git",
            Action::Other => "other",
        }
    }

    /// Importance when one command does several things: Write > Execute > Git > Read > Probe >
    /// Other. `cat a && pytest` executes; `git diff > d.patch` writes.
    pub fn significance(self) -> u8 {
        match self {
            Action::Write => 5,
            Action::Execute => 4,
            Action::Git => 3,
            Action::Read => 2,
            Action::Probe => 1,
            Action::Other => 0,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of `trajectory.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TrajectoryEvent {
    /// One exchange with the model, successful or not.
    ModelCall {
        seq: u64,
        /// The turn this call made, or attempted when it failed (see the module docs).
        turn: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        status: u16,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_byte_ms: Option<u64>,
        usage: Usage,
        cost_usd: Option<f64>,
        stream: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
    /// A tool call issued by the answer of exchange `seq`.
    ToolCall {
        seq: u64,
        turn: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        name: String,
        /// The arguments as the model wrote them (for a text-protocol call, the block's content).
        arguments: String,
        /// For shell tools, the command that ran, without a `bash -lc` wrapper.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        action: Action,
        /// Where the call is known from: the proxy log, the harness's session log, or both.
        #[serde(default)]
        source: ToolSource,
        /// The command's exit code, from the harness's session log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        /// Whether the call failed (a non-zero exit code, or a result the harness marked an
        /// error), from the harness's session log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        /// The size of the tool's output in bytes, from the harness's session log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_bytes: Option<u64>,
    },
    /// The text the model answered in exchange `seq`.
    AssistantText { seq: u64, turn: u32, text: String },
}

/// The trajectory of one trial's agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub events: Vec<TrajectoryEvent>,
    /// Successful model calls (see the module docs).
    pub turns: u32,
    /// All exchanges, failed and refused ones included.
    pub model_calls: u32,
    pub tool_calls: u32,
    /// Tool calls by action.
    pub action_mix: BTreeMap<Action, u32>,
    /// Tool calls whose result (exit code or error flag) the harness's session log records.
    #[serde(default)]
    pub confirmed_tool_calls: u32,
    /// Tool calls that failed, by the harness's session log.
    #[serde(default)]
    pub failed_tool_calls: u32,
    /// Tool calls only the harness's session log shows (source `harness`).
    #[serde(default)]
    pub harness_only_tool_calls: u32,
    /// Parts of the recorded answers that could not be read, prefixed with the exchange's `seq`.
    pub warnings: Vec<String>,
}

/// A model's answer, reassembled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The text output (text blocks concatenated; separate Responses messages one line apart).
    pub text: String,
    /// The structured tool calls, in order.
    pub tool_calls: Vec<AnswerToolCall>,
}

/// A tool call as the model issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerToolCall {
    pub id: Option<String>,
    pub name: String,
    /// Raw: a JSON text for function tools, free text for custom tools.
    pub arguments: String,
}

/// Whether the call went through and was answered: status below 400 and not refused.
pub fn succeeded(exchange: &Exchange) -> bool {
    exchange.status < 400 && exchange.refused.is_none()
}

/// The answer of one exchange, with warnings about what could not be read. Failed and refused
/// calls have an empty answer.
pub fn reassemble(exchange: &Exchange) -> (Answer, Vec<String>) {
    let mut warnings = Vec::new();
    if !succeeded(exchange) {
        return (Answer::default(), warnings);
    }
    let answer = match &exchange.response {
        ExchangeBody::Json(body) => from_json(exchange.api, body, &mut warnings),
        ExchangeBody::Sse(text) => from_sse(exchange.api, text, &mut warnings),
        ExchangeBody::Text(text) => {
            let trimmed = text.trim_start();
            match serde_json::from_str::<Value>(text) {
                Ok(body) => from_json(exchange.api, &body, &mut warnings),
                Err(_) if trimmed.starts_with("data:") || trimmed.starts_with("event:") => {
                    from_sse(exchange.api, text, &mut warnings)
                }
                Err(_) => {
                    warnings.push(format!("answer is neither JSON nor SSE: {}", sse::snippet(text)));
                    Answer::default()
                }
            }
        }
    };
    (answer, warnings)
}

fn from_json(api: ApiKind, body: &Value, warnings: &mut Vec<String>) -> Answer {
    match api {
        ApiKind::OpenAiChat => openai_chat::from_json(body, warnings),
        ApiKind::OpenAiResponses => openai_responses::from_json(body, warnings),
        ApiKind::Anthropic => anthropic::from_json(body, warnings),
    }
}

fn from_sse(api: ApiKind, text: &str, warnings: &mut Vec<String>) -> Answer {
    match api {
        ApiKind::OpenAiChat => openai_chat::from_sse(text, warnings),
        ApiKind::OpenAiResponses => openai_responses::from_sse(text, warnings),
        ApiKind::Anthropic => anthropic::from_sse(text, warnings),
    }
}

/// A message content as text: a string, or the `text` of an array of parts.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

/// Tool-call arguments as raw text: a string as is, other JSON serialised, nothing empty.
pub(crate) fn arguments_text(arguments: Option<&Value>) -> String {
    match arguments {
        Some(Value::String(text)) => text.clone(),
        None | Some(Value::Null) => String::new(),
        Some(value) => value.to_string(),
    }
}

/// Whether the request offered the model any tools.
fn offers_tools(request: &Value) -> bool {
    ["tools", "functions"].iter().any(|key| request.get(key).and_then(Value::as_array).is_some_and(|t| !t.is_empty()))
}

/// The parts of a request that identify the conversation, to recognise a retry.
fn conversation(exchange: &Exchange) -> Vec<Option<&Value>> {
    let keys: &[&str] = match exchange.api {
        ApiKind::OpenAiChat => &["messages"],
        ApiKind::OpenAiResponses => &["input", "instructions", "previous_response_id"],
        ApiKind::Anthropic => &["system", "messages"],
    };
    keys.iter().map(|key| exchange.request.get(*key).filter(|v| !v.is_null())).collect()
}

fn is_retry_of(failed: &Exchange, later: &Exchange) -> bool {
    let key = conversation(failed);
    failed.api == later.api && key.iter().any(Option::is_some) && key == conversation(later)
}

/// The turn of each exchange (see the module docs).
fn assign_turns(exchanges: &[&Exchange]) -> Vec<u32> {
    let mut turns = vec![0; exchanges.len()];
    let mut before = vec![0; exchanges.len()];
    let mut count = 0;
    for (i, exchange) in exchanges.iter().enumerate() {
        before[i] = count;
        if succeeded(exchange) {
            count += 1;
            turns[i] = count;
        }
    }
    for i in (0..exchanges.len()).rev() {
        if succeeded(exchanges[i]) {
            continue;
        }
        let retry = (i + 1..exchanges.len()).find(|&j| is_retry_of(exchanges[i], exchanges[j]));
        turns[i] = retry.map_or(before[i] + 1, |j| turns[j]);
    }
    turns
}

/// Builds the trajectory of the exchanges (taken in `seq` order).
pub fn build(exchanges: &[Exchange]) -> Trajectory {
    let mut ordered: Vec<&Exchange> = exchanges.iter().collect();
    ordered.sort_by_key(|e| e.seq);
    let turns = assign_turns(&ordered);
    let mut trajectory = Trajectory { model_calls: ordered.len() as u32, ..Trajectory::default() };
    for (exchange, turn) in ordered.into_iter().zip(turns) {
        let seq = exchange.seq;
        trajectory.events.push(TrajectoryEvent::ModelCall {
            seq,
            turn,
            model: exchange
                .model
                .clone()
                .or_else(|| exchange.request.get("model").and_then(Value::as_str).map(str::to_string)),
            status: exchange.status,
            duration_ms: exchange.duration_ms,
            first_byte_ms: exchange.first_byte_ms,
            usage: exchange.usage,
            cost_usd: exchange.cost_usd,
            stream: exchange.stream,
            refused: exchange.refused.clone(),
        });
        if !succeeded(exchange) {
            continue;
        }
        trajectory.turns += 1;
        let (answer, warnings) = reassemble(exchange);
        trajectory.warnings.extend(warnings.into_iter().map(|w| format!("seq {seq}: {w}")));
        if !answer.text.trim().is_empty() {
            trajectory.events.push(TrajectoryEvent::AssistantText { seq, turn, text: answer.text.clone() });
        }
        let calls = if answer.tool_calls.is_empty() && !offers_tools(&exchange.request) {
            let blocks = text_protocol::shell_blocks(&answer.text);
            if blocks.len() > 1 {
                trajectory.warnings.push(format!(
                    "seq {seq}: {} shell blocks in one answer (mini-swe-agent runs only answers with exactly one)",
                    blocks.len()
                ));
            }
            blocks.into_iter().map(|block| (None, "bash".to_string(), block, true)).collect()
        } else {
            answer.tool_calls.into_iter().map(|call| (call.id, call.name, call.arguments, false)).collect::<Vec<_>>()
        };
        for (id, name, arguments, text_protocol) in calls {
            let parsed = if text_protocol {
                Value::String(arguments.clone())
            } else {
                parse_arguments(&arguments, &name, seq, &mut trajectory.warnings)
            };
            let (action, command) = classify_tool(&name, &parsed);
            *trajectory.action_mix.entry(action).or_insert(0) += 1;
            trajectory.tool_calls += 1;
            trajectory.events.push(TrajectoryEvent::ToolCall {
                seq,
                turn,
                id,
                name,
                arguments,
                command,
                action,
                source: ToolSource::Proxy,
                exit_code: None,
                is_error: None,
                output_bytes: None,
            });
        }
    }
    trajectory
}

/// Arguments as JSON; free text (a custom tool's input) as a JSON string; unreadable JSON
/// (starting with `{` or `[`) as null, with a warning.
fn parse_arguments(arguments: &str, name: &str, seq: u64, warnings: &mut Vec<String>) -> Value {
    if arguments.trim().is_empty() {
        return Value::Null;
    }
    match serde_json::from_str(arguments) {
        Ok(value) => value,
        Err(_) if arguments.trim_start().starts_with(['{', '[']) => {
            warnings.push(format!("seq {seq}: arguments of {name} are not JSON: {}", sse::snippet(arguments)));
            Value::Null
        }
        Err(_) => Value::String(arguments.to_string()),
    }
}

/// The events, one JSON object a line.
pub fn to_jsonl(trajectory: &Trajectory) -> String {
    let mut out = String::new();
    for event in &trajectory.events {
        out.push_str(&serde_json::to_string(event).expect("trajectory events serialise"));
        out.push('\n');
    }
    out
}
