//! OpenAI Responses answers: the `output` items, or from a stream `response.completed`'s output
//! when it has any, else the `response.output_item.done` items, else items rebuilt from deltas.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::sse::{self, snippet};
use super::{arguments_text, Answer, AnswerToolCall};

pub(crate) fn from_json(body: &Value, warnings: &mut Vec<String>) -> Answer {
    match body.get("output").and_then(Value::as_array) {
        Some(items) => from_items(items),
        None => {
            warnings.push(format!("no output in the answer: {}", snippet(&body.to_string())));
            Answer::default()
        }
    }
}

/// Text of `message` items (their `output_text` parts; one line between messages) and the
/// tool calls: `function_call`, `custom_tool_call`, `local_shell_call` (named `local_shell`, its
/// `action` as arguments) and any other `*_call` item (`shell_call`, `apply_patch_call`,
/// `mcp_call`, server-side `web_search_call`…).
fn from_items(items: &[Value]) -> Answer {
    let mut messages = Vec::new();
    let mut tool_calls = Vec::new();
    for item in items {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        let call_id = item.get("call_id").or_else(|| item.get("id")).and_then(Value::as_str).map(str::to_string);
        let name = item.get("name").and_then(Value::as_str).map(str::to_string);
        match kind {
            "message" => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|part| matches!(part.get("type").and_then(Value::as_str), Some("output_text" | "text")))
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect();
                if !text.is_empty() {
                    messages.push(text);
                }
            }
            "function_call" => tool_calls.push(AnswerToolCall {
                id: call_id,
                name: name.unwrap_or_default(),
                arguments: arguments_text(item.get("arguments")),
            }),
            "custom_tool_call" => tool_calls.push(AnswerToolCall {
                id: call_id,
                name: name.unwrap_or_default(),
                arguments: arguments_text(item.get("input")),
            }),
            "local_shell_call" => tool_calls.push(AnswerToolCall {
                id: call_id,
                name: "local_shell".to_string(),
                arguments: arguments_text(item.get("action")),
            }),
            other if other.ends_with("_call") => {
                let arguments = ["arguments", "input", "action", "operation"].iter().find_map(|key| item.get(*key));
                tool_calls.push(AnswerToolCall {
                    id: call_id,
                    name: name.unwrap_or_else(|| other.trim_end_matches("_call").to_string()),
                    arguments: arguments.map_or_else(|| "{}".to_string(), |v| arguments_text(Some(v))),
                });
            }
            _ => {}
        }
    }
    Answer { text: messages.join("\n"), tool_calls }
}

#[derive(Default)]
struct ItemState {
    added: Option<Value>,
    done: Option<Value>,
    text: String,
    arguments: String,
}

pub(crate) fn from_sse(text: &str, warnings: &mut Vec<String>) -> Answer {
    let mut completed: Option<Vec<Value>> = None;
    let mut items: BTreeMap<u64, ItemState> = BTreeMap::new();
    for event in sse::json_events(text, warnings) {
        let data = &event.data;
        let index = data.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let delta = data.get("delta").and_then(Value::as_str).unwrap_or_default();
        match event.kind() {
            "response.output_text.delta" => items.entry(index).or_default().text.push_str(delta),
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                items.entry(index).or_default().arguments.push_str(delta)
            }
            "response.output_item.added" => items.entry(index).or_default().added = data.get("item").cloned(),
            "response.output_item.done" => items.entry(index).or_default().done = data.get("item").cloned(),
            "response.completed" | "response.incomplete" => {
                if let Some(output) = data.pointer("/response/output").and_then(Value::as_array) {
                    if !output.is_empty() {
                        completed = Some(output.clone());
                    }
                }
            }
            "response.failed" | "error" => {
                let error = data.pointer("/response/error").or_else(|| data.get("error")).unwrap_or(data);
                warnings.push(format!("error in the stream: {}", snippet(&error.to_string())));
            }
            _ => {}
        }
    }
    if let Some(output) = completed {
        return from_items(&output);
    }
    let rebuilt: Vec<Value> = items.into_values().filter_map(rebuild).collect();
    from_items(&rebuilt)
}

/// An output item from its `done` event, else from its `added` event and the deltas.
fn rebuild(state: ItemState) -> Option<Value> {
    if state.done.is_some() {
        return state.done;
    }
    match state.added {
        Some(mut item) => {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => item["content"] = json!([{"type": "output_text", "text": state.text}]),
                Some("function_call") => item["arguments"] = Value::String(state.arguments),
                Some("custom_tool_call") => item["input"] = Value::String(state.arguments),
                _ => {}
            }
            Some(item)
        }
        None if !state.text.is_empty() => {
            Some(json!({"type": "message", "content": [{"type": "output_text", "text": state.text}]}))
        }
        None => None,
    }
}
