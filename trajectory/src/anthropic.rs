//! Anthropic Messages answers: the `content` blocks, or a stream's blocks rebuilt from
//! `content_block_start` and the `text_delta`/`input_json_delta` fragments of each index.

use std::collections::BTreeMap;

use serde_json::Value;

use super::sse::{self, snippet};
use super::{arguments_text, Answer, AnswerToolCall};

/// Block types that are tool calls: the client's tools, and tools the server runs.
fn is_tool_use(kind: &str) -> bool {
    matches!(kind, "tool_use" | "server_tool_use" | "mcp_tool_use")
}

pub(crate) fn from_json(body: &Value, warnings: &mut Vec<String>) -> Answer {
    let Some(blocks) = body.get("content").and_then(Value::as_array) else {
        warnings.push(format!("no content in the answer: {}", snippet(&body.to_string())));
        return Answer::default();
    };
    let mut answer = Answer::default();
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind == "text" {
            answer.text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default());
        } else if is_tool_use(kind) {
            answer.tool_calls.push(AnswerToolCall {
                id: block.get("id").and_then(Value::as_str).map(str::to_string),
                name: block.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                arguments: arguments_text(block.get("input")),
            });
        }
    }
    answer
}

#[derive(Default)]
struct Block {
    kind: String,
    id: Option<String>,
    name: String,
    text: String,
    partial_json: String,
    input: Option<Value>,
}

pub(crate) fn from_sse(text: &str, warnings: &mut Vec<String>) -> Answer {
    let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
    for event in sse::json_events(text, warnings) {
        let data = &event.data;
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.kind() {
            "content_block_start" => {
                let start = data.get("content_block").unwrap_or(&Value::Null);
                blocks.insert(
                    index,
                    Block {
                        kind: start.get("type").and_then(Value::as_str).unwrap_or_default().to_string(),
                        id: start.get("id").and_then(Value::as_str).map(str::to_string),
                        name: start.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        text: start.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                        partial_json: String::new(),
                        input: start.get("input").cloned(),
                    },
                );
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let block = blocks.entry(index).or_default();
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if block.kind.is_empty() {
                            block.kind = "text".to_string();
                        }
                        block.text.push_str(delta.get("text").and_then(Value::as_str).unwrap_or_default());
                    }
                    Some("input_json_delta") => {
                        if block.kind.is_empty() {
                            block.kind = "tool_use".to_string();
                        }
                        block
                            .partial_json
                            .push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or_default());
                    }
                    _ => {}
                }
            }
            "error" => {
                let error = data.get("error").unwrap_or(data);
                warnings.push(format!("error in the stream: {}", snippet(&error.to_string())));
            }
            _ => {}
        }
    }
    let mut answer = Answer::default();
    for block in blocks.into_values() {
        if block.kind == "text" {
            answer.text.push_str(&block.text);
        } else if is_tool_use(&block.kind) {
            let arguments =
                if block.partial_json.is_empty() { arguments_text(block.input.as_ref()) } else { block.partial_json };
            answer.tool_calls.push(AnswerToolCall { id: block.id, name: block.name, arguments });
        }
    }
    answer
}
