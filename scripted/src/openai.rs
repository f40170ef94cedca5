//! OpenAI's Chat Completions (`/v1/chat/completions`) and Responses (`/v1/responses`) wire
//! formats.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::request::{self, Completion, Exchange, CREATED};
use super::sse;
use super::usage::Usage;

/// Parses a Chat Completions request.
pub(crate) fn parse_chat(body: &Value) -> Result<Exchange, String> {
    let body = request::object(body)?;
    let model = request::model(body)?;
    let mut system = None;
    let mut texts = Vec::new();
    for (i, message) in request::array(body, "messages")?.iter().enumerate() {
        let role = request::role(message).ok_or_else(|| format!("`messages[{i}].role` must be a string"))?;
        let text = request::content_text(message.get("content"), &format!("messages[{i}].content"))?;
        // The first system/developer message is the system prompt; later ones are just context.
        if system.is_none() && texts.is_empty() && matches!(role, "system" | "developer") {
            system = Some(text);
        } else {
            texts.push(text);
        }
    }
    let effort = request::effort(body.get("reasoning_effort"), "reasoning_effort")?;
    let mut exchange = Exchange::new(model, system, texts, effort);
    exchange.shell_tool = request::shell_tool(body);
    exchange.tool_calls_so_far = request::array(body, "messages")?
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .map(|calls| calls.len() as u32)
        .sum();
    exchange.stream = request::flag(body, "stream")?;
    exchange.include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(options)) => request::flag(options, "include_usage")?,
        Some(_) => return Err("`stream_options` must be an object".into()),
    };
    Ok(exchange)
}

/// Parses a Responses request (`input` as a string or a list of items, optional `instructions`).
pub(crate) fn parse_responses(body: &Value) -> Result<Exchange, String> {
    let body = request::object(body)?;
    let model = request::model(body)?;
    let mut system = match body.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err("`instructions` must be a string".into()),
    };
    let mut texts = Vec::new();
    let mut tool_calls_so_far = 0;
    match body.get("input") {
        Some(Value::String(text)) => texts.push(text.clone()),
        Some(Value::Array(items)) if !items.is_empty() => {
            // The conversation so far, replayed by the client: its function calls are the steps
            // the agent has taken.
            tool_calls_so_far =
                items.iter().filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call")).count()
                    as u32;
            for (i, item) in items.iter().enumerate() {
                // Function-call outputs carry their text in `output`; messages in `content`.
                let content = item.get("content").or_else(|| item.get("output"));
                let text = request::content_text(content, &format!("input[{i}].content"))?;
                if system.is_none() && texts.is_empty() && matches!(request::role(item), Some("system" | "developer")) {
                    system = Some(text);
                } else {
                    texts.push(text);
                }
            }
        }
        None | Some(Value::Null) => return Err("missing required field `input`".into()),
        Some(_) => return Err("`input` must be a string or a non-empty array of input items".into()),
    }
    let effort = match body.get("reasoning") {
        None | Some(Value::Null) => None,
        Some(Value::Object(reasoning)) => request::effort(reasoning.get("effort"), "reasoning.effort")?,
        Some(_) => return Err("`reasoning` must be an object".into()),
    };
    let mut exchange = Exchange::new(model, system, texts, effort);
    exchange.shell_tool = request::shell_tool(body);
    exchange.tool_calls_so_far = tool_calls_so_far;
    exchange.stream = request::flag(body, "stream")?;
    exchange.include_usage = true;
    Ok(exchange)
}

fn chat_usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.output(),
        "total_tokens": usage.prompt + usage.output(),
        "prompt_tokens_details": {"cached_tokens": usage.cached},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    })
}

/// The `tool_calls` of a message carrying the scripted agent's shell call.
fn chat_tool_calls(completion: &Completion) -> Option<Value> {
    completion.tool_call.as_ref().map(|call| {
        json!([{
            "id": call.id,
            "type": "function",
            "function": {"name": call.tool.name(), "arguments": call.tool.arguments(&call.command)},
        }])
    })
}

pub(crate) fn render_chat(exchange: &Exchange, completion: &Completion, malformed_chunk: bool) -> Response {
    let tool_calls = chat_tool_calls(completion);
    let finish_reason = if tool_calls.is_some() { "tool_calls" } else { "stop" };
    if !exchange.stream {
        let mut message = json!({"role": "assistant", "content": completion.text});
        if let Some(calls) = &tool_calls {
            message["tool_calls"] = calls.clone();
        }
        return Json(json!({
            "id": completion.id,
            "object": "chat.completion",
            "created": CREATED,
            "model": exchange.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": chat_usage(&completion.usage),
        }))
        .into_response();
    }
    let chunk = |delta: Value, finish_reason: Value| {
        let mut chunk = json!({
            "id": completion.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": exchange.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        if exchange.include_usage {
            // Upstream marks every chunk but the last with `"usage": null` when usage is on.
            chunk["usage"] = Value::Null;
        }
        sse::data(&chunk)
    };
    let mut frames = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    frames.extend(sse::deltas(&completion.text).into_iter().map(|d| chunk(json!({"content": d}), Value::Null)));
    if let Some(Value::Array(calls)) = &tool_calls {
        // One chunk with the whole call, index-tagged as upstream streams them.
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut c = c.clone();
                c["index"] = json!(i);
                c
            })
            .collect();
        frames.push(chunk(json!({"tool_calls": calls}), Value::Null));
    }
    frames.push(chunk(json!({}), json!(finish_reason)));
    if exchange.include_usage {
        frames.push(sse::data(&json!({
            "id": completion.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": exchange.model,
            "choices": [],
            "usage": chat_usage(&completion.usage),
        })));
    }
    frames.push("data: [DONE]\n\n".to_string());
    sse::response(frames, malformed_chunk)
}

fn message_id(completion: &Completion) -> String {
    format!("msg_{}", completion.id.trim_start_matches("resp_"))
}

/// The answer's output items, finished: the assistant's message, then its shell call if any.
fn output_items(completion: &Completion) -> Vec<Value> {
    let mut items = vec![json!({
        "type": "message",
        "id": message_id(completion),
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": completion.text, "annotations": []}],
    })];
    if let Some(call) = &completion.tool_call {
        items.push(json!({
            "type": "function_call",
            "id": format!("fc_{}", completion.id.trim_start_matches("resp_")),
            "status": "completed",
            "call_id": call.id,
            "name": call.tool.name(),
            "arguments": call.tool.arguments(&call.command),
        }));
    }
    items
}

/// The full Responses object; `done` selects the final shape over the in-progress one.
fn response_object(exchange: &Exchange, completion: &Completion, done: bool) -> Value {
    let usage = &completion.usage;
    let (status, output, usage) = if done {
        let usage = json!({
            "input_tokens": usage.prompt,
            "output_tokens": usage.output(),
            "total_tokens": usage.prompt + usage.output(),
            "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        });
        ("completed", json!(output_items(completion)), usage)
    } else {
        ("in_progress", json!([]), Value::Null)
    };
    json!({
        "id": completion.id,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": exchange.model,
        "output": output,
        "usage": usage,
    })
}

/// A Responses stream as upstream sends it: `response.created`; for each output item
/// `response.output_item.added`, its text or arguments in deltas, `response.output_item.done`;
/// then `response.completed` with the whole response. Clients that act on the finished items
/// (Codex) and clients that assemble the deltas both get the whole answer.
pub(crate) fn render_responses(exchange: &Exchange, completion: &Completion, malformed_chunk: bool) -> Response {
    if !exchange.stream {
        return Json(response_object(exchange, completion, true)).into_response();
    }
    let mut sequence = 0u64;
    let mut frames = Vec::new();
    let mut push = |name: &str, mut payload: Value| {
        payload["type"] = json!(name);
        payload["sequence_number"] = json!(sequence);
        sequence += 1;
        frames.push(sse::event(name, &payload));
    };
    push("response.created", json!({"response": response_object(exchange, completion, false)}));
    for (index, item) in output_items(completion).into_iter().enumerate() {
        let item_id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "message" {
            added["content"] = json!([]);
            push("response.output_item.added", json!({"output_index": index, "item": added}));
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            push(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
            );
            for delta in sse::deltas(&completion.text) {
                push(
                    "response.output_text.delta",
                    json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": delta}),
                );
            }
            push(
                "response.output_text.done",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": completion.text}),
            );
            push(
                "response.content_part.done",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": item["content"][0]}),
            );
        } else {
            added["arguments"] = json!("");
            push("response.output_item.added", json!({"output_index": index, "item": added}));
            let arguments = item["arguments"].as_str().unwrap_or_default();
            for delta in sse::deltas(arguments) {
                push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": index, "delta": delta}),
                );
            }
            push(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": arguments}),
            );
        }
        push("response.output_item.done", json!({"output_index": index, "item": item}));
    }
    push("response.completed", json!({"response": response_object(exchange, completion, true)}));
    sse::response(frames, malformed_chunk)
}

/// An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    let (kind, code) = match status.as_u16() {
        400 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        404 => ("invalid_request_error", json!("model_not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        _ => ("server_error", Value::Null),
    };
    let body = json!({"error": {"message": message, "type": kind, "param": Value::Null, "code": code}});
    (status, Json(body)).into_response()
}
