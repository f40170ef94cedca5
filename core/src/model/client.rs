//! The model client: one request shape, three APIs, retries that honour `Retry-After`.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{wire, Usage};
use crate::api::{ApiKind, ReasoningEffort};

/// Where and how to reach one provider. The key is only ever held by trusted code (the judge,
/// the single-shot harness, the worker's proxy), never by an agent.
#[derive(Clone)]
pub struct Endpoint {
    pub provider: String,
    /// e.g. `https://api.openai.com/v1`; the API's path is appended.
    pub base_url: String,
    pub api_kind: ApiKind,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_kind", &self.api_kind)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub system: Option<String>,
    pub user: String,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub max_output_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub usage: Usage,
    /// From the first byte sent to the last byte read, over all attempts.
    pub latency_ms: u64,
    pub attempts: u32,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The provider answered with an error status.
    #[error("{provider}: HTTP {status}: {message}")]
    Status { provider: String, status: u16, message: String },
    /// The provider could not be reached or did not answer in time.
    #[error("{provider}: {message}")]
    Transport { provider: String, message: String },
    /// The answer was not the API's shape.
    #[error("{provider}: malformed answer: {message}")]
    Malformed { provider: String, message: String },
}

impl CallError {
    /// Whether another attempt may succeed: timeouts, rate limits, conflicts and server errors.
    pub fn is_retryable(&self) -> bool {
        match self {
            CallError::Status { status, .. } => matches!(status, 408 | 409 | 425 | 429) || *status >= 500,
            CallError::Transport { .. } => true,
            CallError::Malformed { .. } => false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 4, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

#[derive(Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    retry: RetryPolicy,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient").field("retry", &self.retry).finish()
    }
}

impl ModelClient {
    pub fn new(request_timeout: Duration, retry: RetryPolicy) -> Self {
        let http = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("the TLS backend initialises");
        ModelClient { http, retry }
    }

    /// Sends the request, retrying what [`CallError::is_retryable`] allows with exponential
    /// backoff, or the provider's `Retry-After` when it gives one.
    pub async fn complete(&self, endpoint: &Endpoint, req: &ChatRequest) -> Result<Completion, CallError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt(endpoint, req).await {
                Ok((text, usage)) => {
                    return Ok(Completion {
                        text,
                        usage,
                        latency_ms: started.elapsed().as_millis() as u64,
                        attempts: attempt,
                    })
                }
                Err((error, retry_after)) => {
                    if !error.is_retryable() || attempt >= self.retry.attempts {
                        return Err(error);
                    }
                    let backoff = self.retry.base_delay.saturating_mul(1 << (attempt - 1).min(16));
                    tokio::time::sleep(retry_after.unwrap_or(backoff).min(self.retry.max_delay)).await;
                }
            }
        }
    }

    async fn attempt(
        &self,
        endpoint: &Endpoint,
        req: &ChatRequest,
    ) -> Result<(String, Usage), (CallError, Option<Duration>)> {
        let provider = endpoint.provider.clone();
        let (path, body) = wire::request(endpoint.api_kind, req);
        let url = format!("{}{}", endpoint.base_url.trim_end_matches('/'), path);
        let mut request = self.http.post(url).json(&body);
        let key = endpoint.api_key.as_deref().unwrap_or_default();
        request = match endpoint.api_kind {
            ApiKind::Anthropic => request.header("x-api-key", key).header("anthropic-version", "2023-06-01"),
            ApiKind::OpenAiChat | ApiKind::OpenAiResponses => request.bearer_auth(key),
        };
        let transport =
            |e: reqwest::Error| (CallError::Transport { provider: provider.clone(), message: e.to_string() }, None);
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|secs| Duration::from_secs_f64(secs.max(0.0)));
        let text = response.text().await.map_err(transport)?;
        if !status.is_success() {
            let message: String = text.chars().take(500).collect();
            return Err((CallError::Status { provider, status: status.as_u16(), message }, retry_after));
        }
        let json: Value = serde_json::from_str(&text).map_err(|e| {
            (CallError::Malformed { provider: provider.clone(), message: format!("not JSON: {e}") }, None)
        })?;
        wire::response(endpoint.api_kind, &json).map_err(|message| (CallError::Malformed { provider, message }, None))
    }
}
