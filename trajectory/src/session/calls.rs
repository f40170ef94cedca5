//! What a session log says of each tool execution, and where a trajectory's tool call is known
//! from.

use serde::{Deserialize, Serialize};

/// Where a tool call in the trajectory is known from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ToolSource {
    /// Only the proxy log: the model asked for it; what happened is not known.
    #[default]
    #[serde(rename = "proxy")]
    Proxy,
    /// The proxy log, with the result from the harness's session log.
    #[serde(rename = "proxy+harness")]
    ProxyHarness,
    /// Only the harness's session log: an execution the proxy log does not show.
    #[serde(rename = "harness")]
    Harness,
}

/// One tool execution as a harness's session log records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessToolCall {
    /// The provider's tool-call id, when the harness kept it.
    pub id: Option<String>,
    pub name: String,
    /// The arguments as the harness recorded them: JSON text for function tools, free text for
    /// custom tools.
    pub arguments: String,
    /// The exit code of a command.
    pub exit_code: Option<i64>,
    /// Whether the call failed: a non-zero exit code, or a result the harness marked an error.
    pub is_error: Option<bool>,
    /// The size of the tool's output in bytes (a command's output, without the wrapping the
    /// harness adds for the model where the log keeps the two apart).
    pub output_bytes: Option<u64>,
}

impl HarnessToolCall {
    /// Whether the log says how the call ended.
    pub fn has_result(&self) -> bool {
        self.exit_code.is_some() || self.is_error.is_some()
    }

    /// Sets the result from an exit code: an error when it is not zero.
    pub(crate) fn set_exit_code(&mut self, code: i64) {
        self.exit_code = Some(code);
        self.is_error = Some(self.is_error.unwrap_or(false) || code != 0);
    }
}

/// What a session log held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionParse {
    /// The tool executions, in the order the harness started them.
    pub calls: Vec<HarnessToolCall>,
    /// What could not be read, each naming the file and the line.
    pub warnings: Vec<String>,
}

/// `(id, name, exit_code, is_error, output_bytes)` of a call, as the readers' tests compare them.
#[cfg(test)]
pub(crate) type CallRow<'a> = (&'a str, &'a str, Option<i64>, Option<bool>, Option<u64>);

#[cfg(test)]
impl SessionParse {
    pub(crate) fn call_rows(&self) -> Vec<CallRow<'_>> {
        self.calls
            .iter()
            .map(|c| (c.id.as_deref().unwrap(), c.name.as_str(), c.exit_code, c.is_error, c.output_bytes))
            .collect()
    }
}
