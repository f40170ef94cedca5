//! OpenAI Chat Completions answers: `choices[0].message`, or the `choices[0].delta` chunks of a
//! stream, whose tool-call fragments concatenate by `index`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::sse::{self, snippet};
use super::{arguments_text, content_text, Answer, AnswerToolCall};

pub(crate) fn from_json(body: &Value, warnings: &mut Vec<String>) -> Answer {
    let Some(message) = body.pointer("/choices/0/message") else {
        warnings.push(format!("no choices[0].message in the answer: {}", snippet(&body.to_string())));
        return Answer::default();
    };
    let mut answer = Answer { text: content_text(message.get("content")), tool_calls: Vec::new() };
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let function = call.get("function").unwrap_or(&Value::Null);
        answer.tool_calls.push(AnswerToolCall {
            id: call.get("id").and_then(Value::as_str).map(str::to_string),
            name: function.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
            arguments: arguments_text(function.get("arguments")),
        });
    }
    // The deprecated single `function_call`.
    if let Some(function) = message.get("function_call").filter(|f| f.is_object()) {
        answer.tool_calls.push(AnswerToolCall {
            id: None,
            name: function.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
            arguments: arguments_text(function.get("arguments")),
        });
    }
    answer
}

#[derive(Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl Partial {
    fn add(&mut self, id: Option<&str>, function: &Value) {
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            self.id.get_or_insert_with(|| id.to_string());
        }
        // Names usually come whole in the first fragment; some servers repeat them.
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            if self.name != name {
                self.name.push_str(name);
            }
        }
        match function.get("arguments") {
            Some(Value::String(fragment)) => self.arguments.push_str(fragment),
            Some(value @ (Value::Object(_) | Value::Array(_))) => self.arguments = value.to_string(),
            _ => {}
        }
    }
}

pub(crate) fn from_sse(text: &str, warnings: &mut Vec<String>) -> Answer {
    let mut content = String::new();
    let mut calls: BTreeMap<u64, Partial> = BTreeMap::new();
    let mut legacy: Option<Partial> = None;
    for event in sse::json_events(text, warnings) {
        let chunk = &event.data;
        if let Some(error) = chunk.get("error") {
            warnings.push(format!("error in the stream: {}", snippet(&error.to_string())));
            continue;
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let Some(delta) = choice.get("delta") else { continue };
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                content.push_str(text);
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let id = call.get("id").and_then(Value::as_str);
                let index = match call.get("index").and_then(Value::as_u64) {
                    Some(index) => index,
                    // No index (some compatible servers): a new id starts a call, else continue the last.
                    None => match id.and_then(|id| calls.iter().find(|(_, p)| p.id.as_deref() == Some(id))) {
                        Some((index, _)) => *index,
                        None if id.is_some() => calls.keys().next_back().map_or(0, |last| last + 1),
                        None => calls.keys().next_back().copied().unwrap_or(0),
                    },
                };
                calls.entry(index).or_default().add(id, call.get("function").unwrap_or(&Value::Null));
            }
            if let Some(function) = delta.get("function_call").filter(|f| f.is_object()) {
                legacy.get_or_insert_with(Partial::default).add(None, function);
            }
        }
    }
    let tool_calls = calls
        .into_values()
        .chain(legacy)
        .map(|p| AnswerToolCall { id: p.id, name: p.name, arguments: p.arguments })
        .collect();
    Answer { text: content, tool_calls }
}
