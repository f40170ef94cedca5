//! Gathering tool calls from a session log that may give a call and its result in any order and
//! more than once; helpers the format readers share.

use std::collections::HashMap;

use serde_json::Value;

use super::calls::{HarnessToolCall, SessionParse};

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
