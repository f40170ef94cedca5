//! The provider-neutral view of a model request, and the field readers the three APIs share.
//! Readers return a message naming the offending field, which becomes the 400's error text.

use serde_json::{Map, Value};

use super::usage::{Effort, Usage};

/// What the scripted models need from a request, whichever API it came through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub model: String,
    /// The system prompt (or instructions, or else the first message): decides the role.
    pub instructions: String,
    /// Every message's text but the system prompt's, newline-joined.
    pub user: String,
    /// All text the model is shown, system prompt included: what the prompt tokens count.
    pub prompt: String,
    pub effort: Option<Effort>,
    pub stream: bool,
    /// Whether a stream ends with a usage report (always, except opt-in for Chat Completions).
    pub include_usage: bool,
    /// The shell tool the request offers, if any (tool-calling agents such as mini-swe-agent,
    /// Codex or Claude Code): the scripted agent then works in steps through that tool.
    pub shell_tool: Option<ShellTool>,
    /// Tool calls the assistant already made in this conversation: the step the agent is at.
    pub tool_calls_so_far: u32,
}

/// A shell tool a tool-calling agent offers the model, recognised by its function name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShellTool {
    /// `bash` with `{"command": "…"}` (mini-swe-agent): the agent ends its run when the model
    /// runs the submit command.
    Bash,
    /// `exec_command` with `{"cmd": "…"}` (Codex): the agent ends its run when the model answers
    /// without calling a tool.
    ExecCommand,
    /// `Bash` with `{"command": "…"}` (Claude Code, over the Messages API): the agent ends its run
    /// when the model answers without calling a tool.
    ClaudeBash,
    /// `bash` with `{"command": "…"}` offered beside `read_bash` (GitHub Copilot CLI): the agent
    /// ends its run when the model answers without calling a tool.
    CopilotBash,
}

impl ShellTool {
    fn from_name(name: &str) -> Option<ShellTool> {
        match name {
            "bash" => Some(ShellTool::Bash),
            "exec_command" => Some(ShellTool::ExecCommand),
            "Bash" => Some(ShellTool::ClaudeBash),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ShellTool::Bash | ShellTool::CopilotBash => "bash",
            ShellTool::ExecCommand => "exec_command",
            ShellTool::ClaudeBash => "Bash",
        }
    }

    /// The call's arguments, as a JSON object (Anthropic's `input`).
    pub fn input(self, command: &str) -> Value {
        let key = match self {
            ShellTool::Bash | ShellTool::ClaudeBash | ShellTool::CopilotBash => "command",
            ShellTool::ExecCommand => "cmd",
        };
        serde_json::json!({ key: command })
    }

    /// The call's arguments, as the JSON text a model writes.
    pub fn arguments(self, command: &str) -> String {
        self.input(command).to_string()
    }

    /// Whether the run ends with an answer that calls no tool, rather than with the submit
    /// command.
    pub fn ends_with_answer(self) -> bool {
        matches!(self, ShellTool::ExecCommand | ShellTool::ClaudeBash | ShellTool::CopilotBash)
    }
}

/// The shell tool among a request's `tools`: a function named `bash` or `exec_command`, in
/// Chat Completions' shape (`{"type": "function", "function": {"name"}}`) or Responses'
/// (`{"type": "function", "name"}`), or Claude Code's `Bash` in the Messages API's shape
/// (`{"name", "input_schema"}`).
///
/// A `bash` offered beside `read_bash` is GitHub Copilot CLI's (it reads the output of its
/// background shells with it), whichever API carries it.
pub(crate) fn shell_tool(body: &Map<String, Value>) -> Option<ShellTool> {
    let tools = body.get("tools")?.as_array()?;
    let names =
        || tools.iter().filter_map(|tool| tool.pointer("/function/name").or_else(|| tool.get("name"))?.as_str());
    match names().find_map(ShellTool::from_name)? {
        ShellTool::Bash if names().any(|name| name == "read_bash") => Some(ShellTool::CopilotBash),
        tool => Some(tool),
    }
}

impl Exchange {
    /// Builds the exchange from the system text and the other messages' texts.
    pub fn new(model: String, system: Option<String>, messages: Vec<String>, effort: Option<Effort>) -> Exchange {
        let instructions = system.clone().or_else(|| messages.first().cloned()).unwrap_or_default();
        let user = messages.join("\n");
        let prompt = match system {
            Some(system) if !system.is_empty() => format!("{system}\n{user}"),
            _ => user.clone(),
        };
        Exchange {
            model,
            instructions,
            user,
            prompt,
            effort,
            stream: false,
            include_usage: false,
            shell_tool: None,
            tool_calls_so_far: 0,
        }
    }
}

/// The scripted model's answer to an [`Exchange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completion {
    /// Unique within the server instance (ids are per-response, not per-prompt, as upstream).
    pub id: String,
    pub text: String,
    /// A call of the request's shell tool.
    pub tool_call: Option<ToolCall>,
    pub usage: Usage,
}

/// The scripted agent's call of a shell tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolCall {
    pub id: String,
    pub tool: ShellTool,
    pub command: String,
}

/// The `created` timestamp every response reports: fixed, so responses are reproducible.
pub(crate) const CREATED: u64 = 1_700_000_000;

pub(crate) fn object(body: &Value) -> Result<&Map<String, Value>, String> {
    body.as_object().ok_or_else(|| "the request body must be a JSON object".to_string())
}

pub(crate) fn model(body: &Map<String, Value>) -> Result<String, String> {
    match body.get("model") {
        Some(Value::String(model)) if !model.trim().is_empty() => Ok(model.clone()),
        None | Some(Value::Null) => Err("missing required field `model`".into()),
        Some(_) => Err("`model` must be a non-empty string".into()),
    }
}

/// An optional boolean field (absent or null → false).
pub(crate) fn flag(body: &Map<String, Value>, name: &str) -> Result<bool, String> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(format!("`{name}` must be a boolean")),
    }
}

/// An optional effort string (absent or null → none given).
pub(crate) fn effort(value: Option<&Value>, name: &str) -> Result<Option<Effort>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Effort::parse(s).map(Some).ok_or_else(|| {
            format!("unsupported `{name}` value `{s}` (expected none, minimal, low, medium, high or xhigh)")
        }),
        Some(_) => Err(format!("`{name}` must be a string")),
    }
}

/// The text of a message content: a string, or an array of parts whose `text` fields are
/// concatenated (images and other non-text parts contribute nothing); null is empty.
pub(crate) fn content_text(content: Option<&Value>, name: &str) -> Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                Value::Object(part) => part.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")),
        Some(_) => Err(format!("`{name}` must be a string or an array of content parts")),
    }
}

/// A required non-empty array field.
pub(crate) fn array<'a>(body: &'a Map<String, Value>, name: &str) -> Result<&'a Vec<Value>, String> {
    match body.get(name) {
        Some(Value::Array(items)) if !items.is_empty() => Ok(items),
        None | Some(Value::Null) => Err(format!("missing required field `{name}`")),
        Some(_) => Err(format!("`{name}` must be a non-empty array")),
    }
}

/// A message's role, if it has one.
pub(crate) fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_shapes() {
        assert_eq!(content_text(Some(&json!("a")), "c"), Ok("a".into()));
        let parts = json!([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "input_text", "text": "b"}]);
        assert_eq!(content_text(Some(&parts), "c"), Ok("a\nb".into()));
        assert!(content_text(Some(&json!(3)), "messages[0].content").unwrap_err().contains("messages[0].content"));
    }

    #[test]
    fn instructions_default_to_first_message() {
        let ex = Exchange::new("m".into(), None, vec!["first".into(), "second".into()], None);
        assert_eq!((ex.instructions.as_str(), ex.prompt.as_str()), ("first", "first\nsecond"));
        let ex = Exchange::new("m".into(), Some("sys".into()), vec!["u".into()], None);
        assert_eq!((ex.instructions.as_str(), ex.user.as_str(), ex.prompt.as_str()), ("sys", "u", "sys\nu"));
    }
}
