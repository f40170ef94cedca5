//! One model exchange as the worker's metering proxy records it: the raw trajectory.
//!
//! Written one JSON object a line (`exchanges.jsonl`), in the order calls started. The request
//! body is kept as the agent sent it; credentials travel in headers and are never recorded.

use serde::{Deserialize, Serialize};

use crate::Usage;
use lightsout_api::ApiKind;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// 1-based order in which the calls started.
    pub seq: u64,
    pub api: ApiKind,
    /// The path under the provider's base URL, e.g. `/chat/completions`.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Time to the first byte of the provider's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u64>,
    pub duration_ms: u64,
    /// The status the agent saw (the provider's, or the proxy's own when it refused the call).
    pub status: u16,
    pub stream: bool,
    /// The request body as the agent sent it.
    pub request: serde_json::Value,
    pub response: ExchangeBody,
    pub usage: Usage,
    /// `None` when the model has no price.
    pub cost_usd: Option<f64>,
    /// Why the proxy refused the call without forwarding it (e.g. the trial's budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// An answer as it came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "body", rename_all = "kebab-case")]
pub enum ExchangeBody {
    /// A JSON answer (non-streaming, or an error).
    Json(serde_json::Value),
    /// A streamed answer: the server-sent events exactly as received.
    Sse(String),
    /// Anything else, as text.
    Text(String),
}
