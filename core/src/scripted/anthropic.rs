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
    for (i, message) in request::array(body, "messages")?.iter().enumerate() {
        if !matches!(request::role(message), Some("user" | "assistant")) {
            return Err(format!("`messages[{i}].role` must be \"user\" or \"assistant\""));
        }
        texts.push(request::content_text(message.get("content"), &format!("messages[{i}].content"))?);
    }
    // Extended thinking has a budget, not an effort level; any budget counts as high effort.
    let effort = match body.get("thinking") {
        None | Some(Value::Null) => None,
        Some(Value::Object(thinking)) => {
            let budget = thinking.get("budget_tokens").and_then(Value::as_u64).unwrap_or(0);
            let enabled = thinking.get("type").and_then(Value::as_str) != Some("disabled");
            (enabled && budget > 0).then_some(Effort::High)
        }
        Some(_) => return Err("`thinking` must be an object".into()),
    };
    let mut exchange = Exchange::new(model, system, texts, effort);
    exchange.stream = request::flag(body, "stream")?;
    exchange.include_usage = true;
    Ok(exchange)
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

fn message(exchange: &Exchange, completion: &Completion, done: bool) -> Value {
    let (content, stop_reason, output_tokens) = if done {
        (json!([{"type": "text", "text": completion.text}]), json!("end_turn"), completion.usage.output())
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

pub(crate) fn render(exchange: &Exchange, completion: &Completion, malformed_chunk: bool) -> Response {
    if !exchange.stream {
        return Json(message(exchange, completion, true)).into_response();
    }
    let mut frames = vec![
        sse::event("message_start", &json!({"type": "message_start", "message": message(exchange, completion, false)})),
        sse::event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for delta in sse::deltas(&completion.text) {
        frames.push(sse::event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": delta}}),
        ));
    }
    frames.push(sse::event("content_block_stop", &json!({"type": "content_block_stop", "index": 0})));
    frames.push(sse::event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": Value::Null},
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
