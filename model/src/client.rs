//! The model client: one request shape, three APIs, retries that honour `Retry-After`, and a
//! concurrency limit per provider that adapts to its rate limits (see [`RateLimitPolicy`]). The
//! retry rules are [`ModelClient::complete`]'s.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;

use super::limiter::{Limiter, Limiters, Permit, ProviderStats, RateLimitPolicy};
use super::{wire, StreamedAnswer, Usage};
use lightsout_api::{ApiKind, ReasoningEffort};

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
    /// From the first byte sent to the last byte read, over all attempts (time spent waiting
    /// for the first attempt's turn under the provider's concurrency limit is not included).
    pub latency_ms: u64,
    /// HTTP requests sent for this call, 429s included.
    pub attempts: u32,
    /// The answer came from Lightsout's scripted model server (it marks its answers with
    /// [`crate::SCRIPTED_HEADER`]), not from a real model.
    pub scripted: bool,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The provider answered with an error status.
    #[error("{provider}: HTTP {status}: {message}")]
    Status { provider: String, status: u16, message: String },
    /// The provider could not be reached, did not answer in time, stalled (sent nothing for the
    /// stall timeout), broke off its answer, or answered with a body that is not JSON at all.
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

    /// The HTTP status, if the provider answered with an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts a call may make that end in a retryable error other than 429 (the first
    /// included); 429s have their own budget, [`RateLimitPolicy::rate_limited_attempts`].
    pub attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

/// How long a provider may send nothing (no byte of its answer, headers included) before an
/// attempt is taken for a hang: generous, because a non-streamed answer arrives only once the
/// model has finished writing it.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(300);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 4, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

impl RetryPolicy {
    /// The wait before the next attempt after the `n`-th failure of its kind (1-based) when the
    /// provider gave no `Retry-After`: uniform in `[d/2, d]`, `d = min(base × 2^(n−1), max)`.
    fn backoff(&self, n: u32) -> Duration {
        let full = self.base_delay.saturating_mul(1 << n.saturating_sub(1).min(16)).min(self.max_delay);
        let half = full / 2;
        half + (full - half).mul_f64(rand::rng().random::<f64>())
    }
}

/// A call that did not finish by its deadline ([`ModelClient::complete_until`]): whose time ran
/// out, the model's or the provider's.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DeadlineError {
    #[error(transparent)]
    Call(#[from] CallError),
    /// The deadline passed while the model was answering: the attempt in flight had its answer
    /// under way (the provider had sent a success status) and no earlier attempt had failed.
    #[error("the time limit ran out while the model was answering")]
    Answering,
    /// The deadline passed while the provider was failing the call, not while the model was
    /// answering: the attempt in flight had received nothing of its answer, not even its
    /// headers, for `silent_for`; or an earlier attempt had failed (`after`: the last such
    /// failure, a 5xx, 429, stall or transport failure); or, with neither, the request was never
    /// sent, waiting for a slot under the provider's concurrency limit.
    #[error("{}", describe_provider_failing(*.silent_for, .after.as_ref()))]
    ProviderFailing { silent_for: Option<Duration>, after: Option<CallError> },
}

fn describe_provider_failing(silent_for: Option<Duration>, after: Option<&CallError>) -> String {
    let silent = silent_for.map(|silent| {
        format!("the provider sent nothing for {:.1}s (no byte of its answer, not even headers)", silent.as_secs_f64())
    });
    let parts: Vec<String> =
        silent.into_iter().chain(after.map(|e| format!("an earlier attempt failed: {e}"))).collect();
    if parts.is_empty() {
        return "the request was never sent: it waited for a slot under the provider's concurrency limit".into();
    }
    parts.join("; ")
}

/// What a call under a deadline has seen of the provider so far.
#[derive(Debug, Default)]
struct Progress {
    last_failure: Option<CallError>,
    /// When the attempt in flight was sent; `None` between attempts.
    sent_at: Option<Instant>,
    /// The attempt in flight has a success status: its answer is under way.
    answering: bool,
}

impl Progress {
    fn update(progress: Option<&std::sync::Mutex<Progress>>, change: impl FnOnce(&mut Progress)) {
        if let Some(progress) = progress {
            change(&mut progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        }
    }

    /// Whose time ran out when the deadline passed now.
    fn deadline_error(self) -> DeadlineError {
        if self.answering && self.last_failure.is_none() {
            return DeadlineError::Answering;
        }
        let silent_for = self.sent_at.filter(|_| !self.answering).map(|sent| sent.elapsed());
        DeadlineError::ProviderFailing { silent_for, after: self.last_failure }
    }
}

/// Calls models. Clones share the HTTP connection pool and the per-provider limiters.
#[derive(Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    retry: RetryPolicy,
    limiters: Arc<Limiters>,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient").field("retry", &self.retry).field("rate_limits", self.limiters.policy()).finish()
    }
}

impl ModelClient {
    /// A client with the default [`RateLimitPolicy`].
    pub fn new(request_timeout: Duration, retry: RetryPolicy) -> Self {
        ModelClient::with_rate_limits(request_timeout, retry, RateLimitPolicy::default())
    }

    pub fn with_rate_limits(request_timeout: Duration, retry: RetryPolicy, rate_limits: RateLimitPolicy) -> Self {
        ModelClient::with_timeouts(request_timeout, None, retry, rate_limits)
    }

    /// A client whose attempts also fail when the provider sends nothing for `stall_timeout`
    /// (no byte of the answer, its headers included): a hanging provider. Such a stall is a
    /// transport failure, retried like any other.
    pub fn with_timeouts(
        request_timeout: Duration,
        stall_timeout: Option<Duration>,
        retry: RetryPolicy,
        rate_limits: RateLimitPolicy,
    ) -> Self {
        let mut http = reqwest::Client::builder().timeout(request_timeout).connect_timeout(Duration::from_secs(10));
        if let Some(stall) = stall_timeout {
            http = http.read_timeout(stall);
        }
        let http = http.build().expect("the TLS backend initialises");
        ModelClient { http, retry, limiters: Arc::new(Limiters::new(rate_limits)) }
    }

    pub fn rate_limits(&self) -> &RateLimitPolicy {
        self.limiters.policy()
    }

    /// What this client (and its clones) has seen of each provider endpoint it called.
    pub fn stats(&self) -> Vec<ProviderStats> {
        self.limiters.stats()
    }

    /// Sends the request under the provider's concurrency limit ([`RateLimitPolicy`]), retrying:
    /// - Retryable ([`CallError::is_retryable`]): 408, 409, 425, 429, 5xx, timeouts, stalls,
    ///   connection errors, answers that break off and answer bodies that are not JSON at all
    ///   (garbled in transit). Anything else (400, 401, 403, 404, 422, JSON that is not the API's
    ///   shape) is returned at once.
    /// - Two budgets per call: at most [`RetryPolicy::attempts`] attempts ending in a retryable error
    ///   other than 429, and at most [`RateLimitPolicy::rate_limited_attempts`] answered 429. The
    ///   first budget to run out ends the call with that attempt's error. 429s have their own, larger
    ///   budget because a rate-limited provider is working and asks to be called later: a 30% storm
    ///   of 429s must not turn into lost calls.
    /// - The wait before the next attempt: the answer's `retry-after-ms` (milliseconds, as OpenAI
    ///   sends besides `retry-after`), else its `Retry-After` (seconds or an HTTP-date), capped at
    ///   [`RateLimitPolicy::max_retry_after`]; without either, exponential backoff with jitter: the
    ///   n-th wait of its kind (n-th 429, or n-th other failure) is uniform in `[d/2, d]` where
    ///   `d = min(base_delay × 2^(n−1), max_delay)`.
    /// - While waiting after a 429 the call keeps its slot of the provider's concurrency limit;
    ///   after any other error it gives the slot back (see [`RateLimitPolicy`]).
    /// - Usage: only a successful answer carries usage. A failed attempt (429, 5xx, timeout) carries
    ///   no tokens (providers do not bill rejected requests), so a call's usage is its one answer's,
    ///   counted once however many attempts it took.
    pub async fn complete(&self, endpoint: &Endpoint, req: &ChatRequest) -> Result<Completion, CallError> {
        self.complete_observed(endpoint, req, None).await
    }

    /// [`ModelClient::complete`] with a deadline, the answer streamed: the request asks for
    /// server-sent events (Chat Completions with `stream_options.include_usage`), read as they
    /// arrive and assembled into the same text and usage as the unstreamed answer (an answer sent
    /// unstreamed all the same is read as such). When the deadline passes first, the error tells
    /// whose time ran out ([`DeadlineError`]): a non-streamed answer sends nothing until the model
    /// has finished, so only a stream tells a model still answering from a provider that hangs.
    /// A stream that breaks off or reports an error is a transport failure, retried; usage comes
    /// only from a completed answer.
    pub async fn complete_until(
        &self,
        endpoint: &Endpoint,
        req: &ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, DeadlineError> {
        let progress = std::sync::Mutex::new(Progress::default());
        let outcome = tokio::time::timeout_at(deadline, self.complete_observed(endpoint, req, Some(&progress))).await;
        match outcome {
            Ok(result) => Ok(result?),
            Err(_) => Err(progress.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).deadline_error()),
        }
    }

    /// Streamed when `progress` is given (see [`ModelClient::complete_until`]).
    async fn complete_observed(
        &self,
        endpoint: &Endpoint,
        req: &ChatRequest,
        progress: Option<&std::sync::Mutex<Progress>>,
    ) -> Result<Completion, CallError> {
        let (path, body) = match progress {
            Some(_) => wire::streamed_request(endpoint.api_kind, req),
            None => wire::request(endpoint.api_kind, req),
        };
        let read =
            |json: &Value| wire::response(endpoint.api_kind, json).map(|(text, usage)| ((text, usage), Some(usage)));
        let limiter = self.limiters.get(&endpoint.provider, &endpoint.base_url, endpoint.api_kind);
        limiter.call_started();
        let result = self.post_limited(&limiter, endpoint, path, &body, &read, progress).await;
        limiter.call_finished(result.as_ref().ok().map(|answer| answer.usage.unwrap_or_default()));
        let answer = result?;
        let (text, usage) = answer.value;
        Ok(Completion {
            text,
            usage,
            latency_ms: answer.latency_ms,
            attempts: answer.attempts,
            scripted: answer.scripted,
        })
    }

    /// POSTs `body` to `path` under the endpoint's base URL, authenticated for its API kind,
    /// through the provider's adaptive limit and with the retry rules of [`ModelClient::complete`];
    /// `read` turns a successful answer into a value and the usage it reports (an `Err` makes the
    /// answer malformed, which is not retried). Other endpoints of a provider (e.g. embeddings)
    /// share its limit this way.
    pub async fn post<T>(
        &self,
        endpoint: &Endpoint,
        path: &str,
        body: &Value,
        read: impl Fn(&Value) -> Result<(T, Option<Usage>), String>,
    ) -> Result<Answer<T>, CallError> {
        let limiter = self.limiters.get(&endpoint.provider, &endpoint.base_url, endpoint.api_kind);
        limiter.call_started();
        let result = self.post_limited(&limiter, endpoint, path, body, &read, None).await;
        limiter.call_finished(result.as_ref().ok().map(|answer| answer.usage.unwrap_or_default()));
        result
    }

    async fn post_limited<T>(
        &self,
        limiter: &Arc<Limiter>,
        endpoint: &Endpoint,
        path: &str,
        body: &Value,
        read: &impl Fn(&Value) -> Result<(T, Option<Usage>), String>,
        progress: Option<&std::sync::Mutex<Progress>>,
    ) -> Result<Answer<T>, CallError> {
        let policy = self.limiters.policy();
        let mut started = None;
        let mut attempts = 0;
        let mut failures = 0;
        let mut rate_limited = 0;
        // A slot kept from a rate-limited attempt, for its retry.
        let mut kept: Option<Permit> = None;
        loop {
            let mut permit = match kept.take() {
                Some(permit) => permit,
                None => limiter.acquire().await,
            };
            permit.sending(attempts > 0);
            let started = *started.get_or_insert_with(Instant::now);
            attempts += 1;
            Progress::update(progress, |p| (p.sent_at, p.answering) = (Some(Instant::now()), false));
            let (error, retry_after) = match self.attempt(endpoint, path, body, read, progress).await {
                Ok(((value, usage), scripted)) => {
                    permit.succeeded();
                    let latency_ms = started.elapsed().as_millis() as u64;
                    return Ok(Answer { value, usage, latency_ms, attempts, scripted });
                }
                Err(failure) => failure,
            };
            Progress::update(progress, |p| {
                (p.sent_at, p.answering) = (None, false);
                p.last_failure = Some(error.clone());
            });
            let backoff = if error.status() == Some(429) {
                kept = permit.rate_limited();
                rate_limited += 1;
                if rate_limited >= policy.rate_limited_attempts {
                    return Err(error);
                }
                self.retry.backoff(rate_limited)
            } else {
                drop(permit);
                failures += 1;
                if !error.is_retryable() || failures >= self.retry.attempts {
                    return Err(error);
                }
                self.retry.backoff(failures)
            };
            let wait = retry_after.map_or(backoff, |after| after.min(policy.max_retry_after));
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
    }

    /// One HTTP request; a successful answer's value and usage, and whether the scripted server
    /// gave it. An event stream is read as it arrives (see [`StreamedAnswer`]); `progress` learns
    /// when the answer is under way.
    async fn attempt<T>(
        &self,
        endpoint: &Endpoint,
        path: &str,
        body: &Value,
        read: &impl Fn(&Value) -> Result<(T, Option<Usage>), String>,
        progress: Option<&std::sync::Mutex<Progress>>,
    ) -> Result<((T, Option<Usage>), bool), (CallError, Option<Duration>)> {
        let provider = endpoint.provider.clone();
        let url = format!("{}{}", endpoint.base_url.trim_end_matches('/'), path);
        let mut request = self.http.post(url).json(body);
        let key = endpoint.api_key.as_deref().unwrap_or_default();
        request = match endpoint.api_kind {
            ApiKind::Anthropic => request.header("x-api-key", key).header("anthropic-version", "2023-06-01"),
            ApiKind::OpenAiChat | ApiKind::OpenAiResponses => request.bearer_auth(key),
        };
        let transport =
            |e: reqwest::Error| (CallError::Transport { provider: provider.clone(), message: describe(&e) }, None);
        let mut response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = retry_after(response.headers(), chrono::Utc::now());
        let scripted = response.headers().contains_key(crate::SCRIPTED_HEADER);
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !status.is_success() {
            let text = response.text().await.map_err(transport)?;
            let message: String = text.chars().take(500).collect();
            return Err((CallError::Status { provider, status: status.as_u16(), message }, retry_after));
        }
        Progress::update(progress, |p| p.answering = true);
        let json = if streamed {
            let mut stream = StreamedAnswer::new(endpoint.api_kind);
            while let Some(chunk) = response.chunk().await.map_err(transport)? {
                stream.feed(&chunk);
            }
            // Broken off or failed mid-answer: as a body cut short, retried.
            stream
                .into_answer()
                .map_err(|message| (CallError::Transport { provider: provider.clone(), message }, None))?
        } else {
            let text = response.text().await.map_err(transport)?;
            // A success whose body is not JSON at all was garbled in transit (or is not the API's
            // answer, e.g. an event stream cut short): a transport failure, retried.
            serde_json::from_str(&text).map_err(|e| {
                let shown: String = text.chars().take(80).collect();
                let message = format!("the answer is not JSON ({e}): {shown:?}");
                (CallError::Transport { provider: provider.clone(), message }, None)
            })?
        };
        let answer = read(&json).map_err(|message| (CallError::Malformed { provider, message }, None))?;
        Ok((answer, scripted))
    }
}

/// A transport error with its causes (reqwest's own message names only the URL).
fn describe(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_timeout() {
        message.push_str(" (the provider sent nothing in time)");
    }
    message
}

/// A successful [`ModelClient::post`]: the value read from the answer, the usage it reported,
/// and the call's latency and HTTP requests (as in [`Completion`]).
#[derive(Debug, Clone)]
pub struct Answer<T> {
    pub value: T,
    pub usage: Option<Usage>,
    pub latency_ms: u64,
    pub attempts: u32,
    /// The scripted model server gave the answer (see [`Completion::scripted`]).
    pub scripted: bool,
}

/// How long the provider asks to wait: `retry-after-ms` (milliseconds, OpenAI), else
/// `Retry-After` as seconds or as an HTTP-date (relative to `now`). A date in the past is zero;
/// an unreadable value is ignored.
pub(crate) fn retry_after(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let non_negative = |x: f64| x.is_finite() && x >= 0.0;
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()).filter(|ms| non_negative(*ms)) {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(1e9)));
    }
    let value = header("retry-after")?;
    if let Some(secs) = value.parse::<f64>().ok().filter(|s| non_negative(*s)) {
        return Some(Duration::from_secs_f64(secs.min(1e9)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some((date.with_timezone(&chrono::Utc) - now).to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2015-10-21T07:27:00Z").unwrap().with_timezone(&chrono::Utc);
        let read = |pairs: &[(&'static str, &'static str)]| retry_after(&headers(pairs), now);
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(read(&[("retry-after", "0.5")]), Some(Duration::from_millis(500)));
        assert_eq!(read(&[("retry-after", "1"), ("retry-after-ms", "250")]), Some(Duration::from_millis(250)));
        assert_eq!(read(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]), Some(Duration::from_secs(60)));
        assert_eq!(read(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]), Some(Duration::ZERO));
        assert_eq!(read(&[("retry-after", "soon")]), None);
        assert_eq!(read(&[("retry-after", "-3")]), None);
        // An unreadable `retry-after-ms` falls back to `retry-after`.
        assert_eq!(read(&[("retry-after", "3"), ("retry-after-ms", "x")]), Some(Duration::from_secs(3)));
    }

    /// The scripted server marks its answers; a provider that does not is taken for a real one.
    #[tokio::test]
    async fn answers_of_the_scripted_server_are_marked_and_others_are_not() {
        use lightsout_scripted::{ScriptedConfig, ScriptedServer};
        let client = ModelClient::new(Duration::from_secs(10), RetryPolicy::default());
        let endpoint = |base_url: String| Endpoint {
            provider: "p".into(),
            base_url,
            api_kind: lightsout_api::ApiKind::OpenAiChat,
            api_key: Some("key".into()),
        };
        let request = ChatRequest {
            model: "gpt-5-mini".into(),
            system: None,
            user: "Review this change.".into(),
            reasoning_effort: None,
            max_output_tokens: None,
        };
        let scripted = ScriptedServer::start(ScriptedConfig::default()).await.unwrap();
        assert!(client.complete(&endpoint(scripted.base_url()), &request).await.unwrap().scripted);

        let answer = serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-5-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "No findings."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        });
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move || {
                let answer = answer.clone();
                async move { axum::Json(answer) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let completion = client.complete(&endpoint(base_url), &request).await.unwrap();
        assert_eq!(completion.text, "No findings.");
        assert!(!completion.scripted);
    }

    /// The streamed call ([`ModelClient::complete_until`]) reads the same text and the same usage,
    /// by kind, as the unstreamed one ([`ModelClient::complete`]), for every API: against two
    /// scripted servers (each with its own prompt cache), two calls each, the second a cache hit.
    #[tokio::test]
    async fn a_streamed_answer_reads_as_the_unstreamed_one_for_every_api() {
        use lightsout_scripted::{ScriptedConfig, ScriptedServer};
        let client = ModelClient::new(Duration::from_secs(10), RetryPolicy::default());
        for kind in [ApiKind::OpenAiChat, ApiKind::OpenAiResponses, ApiKind::Anthropic] {
            let request = ChatRequest {
                model: "some-model".into(),
                system: Some("You review code.".into()),
                user: "Review this change.\nTitle: Accept bank-export amount formats in CSV import\n".into(),
                reasoning_effort: Some(ReasoningEffort::High),
                max_output_tokens: None,
            };
            let endpoint = |base_url: String| Endpoint {
                provider: "p".into(),
                base_url,
                api_kind: kind,
                api_key: Some("key".into()),
            };
            let (plain, streamed) = (
                ScriptedServer::start(ScriptedConfig::default()).await.unwrap(),
                ScriptedServer::start(ScriptedConfig::default()).await.unwrap(),
            );
            for _ in 0..2 {
                let whole = client.complete(&endpoint(plain.base_url()), &request).await.unwrap();
                let deadline = Instant::now() + Duration::from_secs(10);
                let stream = client.complete_until(&endpoint(streamed.base_url()), &request, deadline).await.unwrap();
                assert!(!whole.text.is_empty() && whole.usage.output_tokens > 0, "{kind:?}: {whole:?}");
                assert_eq!((&stream.text, stream.usage), (&whole.text, whole.usage), "{kind:?}");
            }
            assert!(plain.requests().iter().all(|r| !r.stream), "{kind:?}");
            assert!(streamed.requests().iter().all(|r| r.stream), "{kind:?}: the streamed calls asked for streams");
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_cap() {
        let retry =
            RetryPolicy { attempts: 4, base_delay: Duration::from_millis(100), max_delay: Duration::from_millis(700) };
        for _ in 0..100 {
            for (n, full) in [(1, 100), (2, 200), (3, 400), (4, 700), (40, 700)] {
                let wait = retry.backoff(n);
                let full = Duration::from_millis(full);
                assert!(wait >= full / 2 && wait <= full, "backoff({n}) = {wait:?}");
            }
        }
    }
}
