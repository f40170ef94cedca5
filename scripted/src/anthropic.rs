//! Anthropic's Messages API (`/v1/messages`) wire format.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::request::{self, Completion, Exchange};
use super::sse;
use super::usage::{Effort, Usage};

/// Parses a Messages request. `max_tokens` is required, as upstream, so a client that forgets
/// it fails here rather than only against the real API.
///
/// A request offering Claude Code's `Bash` tool is a tool-calling agent's: the `tool_use` blocks
/// of the assistant messages replayed in it are the steps it has taken, and the `tool_result`
/// blocks answering them are part of what the model is shown.
pub(crate) fn parse(body: &Value) -> Result<Exchange, String> {
    let body = request::object(body)?;
    let model = request::model(body)?;
    match body.get("max_tokens") {
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => {}
        None | Some(Value::Null) => return Err("missing required field `max_tokens`".into()),
        Some(_) => return Err("`max_tokens` must be a positive integer".into()),
    }
    let system = match body.get("system") {
        None | Some(Value::Null) => None,
        system => Some(request::content_text(system, "system")?),
    };
    let mut texts = Vec::new();
    let mut tool_calls_so_far = 0;
    for (i, message) in request::array(body, "messages")?.iter().enumerate() {
        let role = request::role(message);
        if !matches!(role, Some("user" | "assistant")) {
            return Err(format!("`messages[{i}].role` must be \"user\" or \"assistant\""));
        }
        let content = message.get("content");
        let name = format!("messages[{i}].content");
        let mut text = request::content_text(content, &name)?;
        if let Some(Value::Array(blocks)) = content {
            if role == Some("assistant") {
                tool_calls_so_far += blocks.iter().filter(|b| block_type(b) == Some("tool_use")).count() as u32;
            }
            for block in blocks.iter().filter(|b| block_type(b) == Some("tool_result")) {
                let result = request::content_text(block.get("content"), &format!("{name}[].content"))?;
                if !result.is_empty() {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&result);
                }
            }
        }
        texts.push(text);
    }
    // The effort parameter (`output_config.effort`) when given; else extended thinking, which
    // has a budget, not an effort level: any budget counts as high effort.
    let effort = match body.get("output_config").and_then(|config| config.get("effort")) {
        None | Some(Value::Null) => thinking_effort(body.get("thinking"))?,
        // Anthropic's highest level; the scripted models' highest is `xhigh`.
        Some(Value::String(level)) if level == "max" => Some(Effort::XHigh),
        effort => request::effort(effort, "output_config.effort")?,
    };
    let mut exchange = Exchange::new(model, system, texts, effort);
    exchange.shell_tool = request::shell_tool(body);
    exchange.tool_calls_so_far = tool_calls_so_far;
    exchange.stream = request::flag(body, "stream")?;
    exchange.include_usage = true;
    Ok(exchange)
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

/// The effort an extended-thinking setting stands for: high when a budget is given (or thinking
/// is adaptive), none otherwise.
fn thinking_effort(thinking: Option<&Value>) -> Result<Option<Effort>, String> {
    match thinking {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(thinking)) => {
            let budget = thinking.get("budget_tokens").and_then(Value::as_u64).unwrap_or(0);
            let kind = thinking.get("type").and_then(Value::as_str);
            let enabled = kind != Some("disabled") && (budget > 0 || kind == Some("adaptive"));
            Ok(enabled.then_some(Effort::High))
        }
        Some(_) => Err("`thinking` must be an object".into()),
    }
}

/// Anthropic's `input_tokens` excludes cache reads (they are reported separately), unlike
/// OpenAI's `prompt_tokens`; thinking tokens are part of `output_tokens`.
fn usage_json(usage: &Usage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": usage.prompt - usage.cached,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": usage.cached,
        "cache_creation_input_tokens": 0,
    })
}

/// The id of the scripted agent's `tool_use` block, in Anthropic's style.
fn tool_use_id(id: &str) -> String {
    format!("toolu_{}", id.trim_start_matches("call_"))
}

/// The answer's content blocks, finished: the text, then the shell call if any.
fn content(completion: &Completion) -> Vec<Value> {
    let mut blocks = vec![json!({"type": "text", "text": completion.text})];
    if let Some(call) = &completion.tool_call {
        blocks.push(json!({
            "type": "tool_use",
            "id": tool_use_id(&call.id),
            "name": call.tool.name(),
            "input": call.tool.input(&call.command),
        }));
    }
    blocks
}

/// `tool_use` when the answer calls the shell tool (the client runs it and asks again), else
/// `end_turn`.
fn stop_reason(completion: &Completion) -> &'static str {
    if completion.tool_call.is_some() {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn message(exchange: &Exchange, completion: &Completion, done: bool) -> Value {
    let (content, stop_reason, output_tokens) = if done {
        (json!(content(completion)), json!(stop_reason(completion)), completion.usage.output())
    } else {
        (json!([]), Value::Null, 0)
    };
    json!({
        "id": completion.id,
        "type": "message",
        "role": "assistant",
        "model": exchange.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": Value::Null,
        "usage": usage_json(&completion.usage, output_tokens),
    })
}

/// A Messages stream as upstream sends it: `message_start`; per content block
/// `content_block_start`, its text (`text_delta`) or tool input (`input_json_delta`, partial
/// JSON) in deltas, `content_block_stop`; then `message_delta` with the stop reason and the
/// output tokens, and `message_stop`.
pub(crate) fn render(exchange: &Exchange, completion: &Completion, malformed_chunk: bool) -> Response {
    if !exchange.stream {
        return Json(message(exchange, completion, true)).into_response();
    }
    let mut frames = vec![sse::event(
        "message_start",
        &json!({"type": "message_start", "message": message(exchange, completion, false)}),
    )];
    for (index, block) in content(completion).into_iter().enumerate() {
        let (start, deltas) = if block["type"] == "tool_use" {
            let mut start = block.clone();
            start["input"] = json!({});
            let input = block["input"].to_string();
            let deltas: Vec<Value> = sse::deltas(&input)
                .into_iter()
                .map(|d| json!({"type": "input_json_delta", "partial_json": d}))
                .collect();
            (start, deltas)
        } else {
            let text = block["text"].as_str().unwrap_or_default();
            let deltas: Vec<Value> =
                sse::deltas(text).into_iter().map(|d| json!({"type": "text_delta", "text": d})).collect();
            (json!({"type": "text", "text": ""}), deltas)
        };
        frames.push(sse::event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            frames.push(sse::event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(sse::event("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
    }
    frames.push(sse::event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(completion), "stop_sequence": Value::Null},
            "usage": {"output_tokens": completion.usage.output()},
        }),
    ));
    frames.push(sse::event("message_stop", &json!({"type": "message_stop"})));
    sse::response(frames, malformed_chunk)
}

/// An error in Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    let kind = match status.as_u16() {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    (status, Json(json!({"type": "error", "error": {"type": kind, "message": message}}))).into_response()
}
