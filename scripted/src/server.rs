//! Routes, the shared per-instance state, and the pipeline every model request goes through:
//! delay → authenticate → inject faults → parse → answer → record.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::det::hash_u64;
use super::request::{Completion, Exchange, ToolCall};
use super::usage::{cache_prefix, Usage};
use super::{agent, anthropic, harness_judge, judge, openai, Faults, RateLimit, RecordedRequest, Role, ScriptedConfig};

/// State shared by all handlers of one server instance.
pub(crate) struct Shared {
    config: ScriptedConfig,
    /// The faults in force; starts as `config.faults`, replaceable while serving.
    faults: Mutex<Faults>,
    log: Mutex<Vec<RecordedRequest>>,
    models: Mutex<Vec<String>>,
    /// Authenticated model requests per path, for `status_every_nth`.
    counts: Mutex<HashMap<&'static str, u64>>,
    /// The draws of `rate_limited_fraction`, seeded with `Faults::seed`.
    storm: Mutex<ChaCha8Rng>,
    /// The `rate_limit` token bucket: (tokens, when last refilled); `None` until first used.
    bucket: Mutex<Option<(f64, Instant)>>,
    /// Hashes of the prompt prefixes seen: the simulated prompt cache.
    cache: Mutex<HashSet<u64>>,
    /// (judge model, finding, ground truth) already answered: `malformed` judges recover on retry.
    judged: Mutex<HashSet<String>>,
    /// Shell commands a tool-calling agent of a given model runs instead of its review steps
    /// (see [`super::ScriptedServer::script_agent`]).
    agent_scripts: Mutex<HashMap<String, Vec<String>>>,
    next_id: AtomicU64,
}

/// A poisoned lock only means another handler panicked mid-update of plain collections; the
/// data is still usable, and one bad request must not take the server down.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(config: ScriptedConfig) -> Shared {
        Shared {
            storm: Mutex::new(ChaCha8Rng::seed_from_u64(config.faults.seed)),
            bucket: Mutex::default(),
            faults: Mutex::new(config.faults.clone()),
            config,
            log: Mutex::default(),
            models: Mutex::default(),
            counts: Mutex::default(),
            cache: Mutex::default(),
            judged: Mutex::default(),
            agent_scripts: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.log).clone()
    }

    /// Replacing the faults restarts the random 429s from the new seed and refills the bucket.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.storm) = ChaCha8Rng::seed_from_u64(faults.seed);
        *lock(&self.bucket) = None;
        *lock(&self.faults) = faults;
    }

    pub fn script_agent(&self, model: &str, commands: Vec<String>) {
        lock(&self.agent_scripts).insert(model.to_string(), commands);
    }

    fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    pub fn models(&self) -> Vec<String> {
        lock(&self.models).clone()
    }

    fn record(&self, entry: RecordedRequest) {
        lock(&self.log).push(entry);
    }

    fn remember_model(&self, model: &str) {
        let mut models = lock(&self.models);
        if !models.iter().any(|m| m == model) {
            models.push(model.to_string());
        }
    }

    /// Whether the key is acceptable: non-empty, and the expected one if one is configured.
    fn authorize(&self, key: Option<&str>) -> Result<(), &'static str> {
        match (key, &self.config.expected_api_key) {
            (None, _) => Err("missing API key"),
            (Some(key), Some(expected)) if key != expected => Err("incorrect API key provided"),
            _ => Ok(()),
        }
    }

    /// The injected failure for this authenticated model request, if any, in this order:
    /// `status_every_nth`, then `rate_limited_fraction`, then `rate_limit` (so only a request
    /// that would be answered takes a token).
    fn fault(&self, path: &'static str) -> Option<Fault> {
        let faults = self.faults();
        if let Some(status) = self.nth_fault(&faults, path) {
            return Some(Fault::Status(status));
        }
        if faults.rate_limited_fraction > 0.0 && lock(&self.storm).random::<f64>() < faults.rate_limited_fraction {
            return Some(Fault::RateLimited {
                message: "injected fault: 429 (random rate limiting)".into(),
                retry_after: Duration::from_millis(faults.rate_limited_retry_after_ms),
            });
        }
        let limit = faults.rate_limit?;
        self.take_token(limit).err().map(|retry_after| Fault::RateLimited {
            message: format!("rate limit reached: {} requests per second", limit.per_second),
            retry_after,
        })
    }

    /// The `status_every_nth` status, if this request is an nth one on its path.
    fn nth_fault(&self, faults: &Faults, path: &'static str) -> Option<StatusCode> {
        let (status, every) = faults.status_every_nth?;
        if every == 0 {
            return None;
        }
        let mut counts = lock(&self.counts);
        let count = counts.entry(path).or_insert(0);
        *count += 1;
        count.is_multiple_of(every).then(|| StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
    }

    /// Takes a token from the bucket, or says how long until there is one.
    fn take_token(&self, limit: RateLimit) -> Result<(), Duration> {
        let rate = if limit.per_second.is_finite() { limit.per_second.max(1e-6) } else { f64::MAX };
        let burst = f64::from(limit.burst.max(1));
        let now = Instant::now();
        let mut bucket = lock(&self.bucket);
        let (tokens, last) = bucket.get_or_insert((burst, now));
        *tokens = (*tokens + now.saturating_duration_since(*last).as_secs_f64() * rate).min(burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(((1.0 - *tokens) / rate).min(1e9)))
        }
    }

    fn complete(&self, api: Api, exchange: &Exchange) -> (Role, Completion) {
        let role = Role::of(&exchange.instructions);
        let mut tool_call = None;
        let text = match role {
            Role::Judge => {
                // Judge blocks live in the user text; the system prompt may describe the tags.
                let prompt = if exchange.user.contains("<finding>") { &exchange.user } else { &exchange.prompt };
                // Only `malformed` judges need the memory; don't grow it for the rest.
                let first = !exchange.model.contains("malformed")
                    || lock(&self.judged).insert(judge::attempt_key(&exchange.model, prompt));
                judge::judge_answer(&exchange.model, prompt, first)
            }
            Role::SwePrBenchJudge => {
                let first = !exchange.model.contains("malformed")
                    || lock(&self.judged).insert(harness_judge::harness_attempt_key(&exchange.model, &exchange.user));
                harness_judge::harness_judge_answer(&exchange.model, &exchange.user, first)
            }
            Role::Agent if exchange.shell_tool.is_some() => {
                let step = exchange.tool_calls_so_far;
                let script = lock(&self.agent_scripts).get(&exchange.model).cloned();
                let (text, command, finished) = match script {
                    Some(commands) => match commands.get(step as usize) {
                        Some(command) => (format!("Scripted step {}.", step + 1), command.clone(), false),
                        None => ("The script is done.".to_string(), agent::SUBMIT_COMMAND.to_string(), true),
                    },
                    None => {
                        let (text, command) =
                            agent::agentic_step(&exchange.model, exchange.effort, &exchange.prompt, step);
                        (text, command, step >= agent::WORK_STEPS)
                    }
                };
                let tool = exchange.shell_tool.filter(|tool| !(tool.ends_with_answer() && finished));
                tool_call = tool.map(|tool| ToolCall {
                    id: format!("call_scripted_{}", self.next_id.load(Ordering::Relaxed)),
                    tool,
                    command,
                });
                text
            }
            Role::Agent if agent::is_harness_agent(&exchange.instructions) => {
                agent::harness_agent_answer(&exchange.model, exchange.effort, &exchange.user)
            }
            Role::Agent => agent::agent_answer(&exchange.model, exchange.effort, &exchange.prompt),
        };
        let cache_hit = !lock(&self.cache).insert(hash_u64(&cache_prefix(&exchange.prompt)));
        let usage = Usage::new(&exchange.prompt, &text, exchange.effort, cache_hit);
        let id = format!("{}{:06}", api.id_prefix(), self.next_id.fetch_add(1, Ordering::Relaxed));
        (role, Completion { id, text, tool_call, usage })
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/models", get(list_models))
        .route(
            "/v1/chat/completions",
            post(|s: State<Arc<Shared>>, h: HeaderMap, b: Bytes| model_request(s, Api::Chat, h, b)),
        )
        .route(
            "/v1/responses",
            post(|s: State<Arc<Shared>>, h: HeaderMap, b: Bytes| model_request(s, Api::Responses, h, b)),
        )
        .route(
            "/v1/messages",
            post(|s: State<Arc<Shared>>, h: HeaderMap, b: Bytes| model_request(s, Api::Messages, h, b)),
        )
        .route("/v1/embeddings", post(embeddings_request))
        .layer(axum::middleware::map_response(mark_scripted))
        .with_state(shared)
}

/// Marks every answer, errors included, as the scripted server's ([`super::SCRIPTED_HEADER`]).
async fn mark_scripted(mut response: Response) -> Response {
    response.headers_mut().insert(super::SCRIPTED_HEADER, HeaderValue::from_static("1"));
    response
}

/// The three model APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Chat,
    Responses,
    Messages,
}

impl Api {
    fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Api::Chat => "chatcmpl-scripted-",
            Api::Responses => "resp_scripted_",
            Api::Messages => "msg_scripted_",
        }
    }

    /// The credential in the provider's own header; the other provider's header does not count,
    /// so a client sending the wrong one fails here as it would upstream.
    fn credential(self, headers: &HeaderMap) -> Option<String> {
        match self {
            Api::Chat | Api::Responses => bearer(headers),
            Api::Messages => header_value(headers, "x-api-key"),
        }
    }

    fn parse(self, body: &Value) -> Result<Exchange, String> {
        match self {
            Api::Chat => openai::parse_chat(body),
            Api::Responses => openai::parse_responses(body),
            Api::Messages => anthropic::parse(body),
        }
    }

    fn render(self, exchange: &Exchange, completion: &Completion, malformed: bool) -> Response {
        match self {
            Api::Chat => openai::render_chat(exchange, completion, malformed),
            Api::Responses => openai::render_responses(exchange, completion, malformed),
            Api::Messages => anthropic::render(exchange, completion, malformed),
        }
    }

    fn error(self, status: StatusCode, message: &str) -> Response {
        match self {
            Api::Chat | Api::Responses => openai::error(status, message),
            Api::Messages => anthropic::error(status, message),
        }
    }
}

fn header_value(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    (!value.is_empty()).then(|| value.to_string())
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = header_value(headers, header::AUTHORIZATION.as_str())?;
    let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?.trim();
    (!token.is_empty()).then(|| token.to_string())
}

async fn model_request(State(shared): State<Arc<Shared>>, api: Api, headers: HeaderMap, body: Bytes) -> Response {
    let delay = shared.faults().delay_ms;
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let key = api.credential(&headers);
    // Log a credential sent in the other provider's header too: it reached the server, even
    // though it does not authenticate here.
    let presented = key.clone().or_else(|| bearer(&headers)).or_else(|| header_value(&headers, "x-api-key"));
    // Parsed before authenticating only so that rejected requests are logged with their model.
    let parsed = serde_json::from_slice::<Value>(&body)
        .map_err(|e| format!("the request body is not valid JSON: {e}"))
        .and_then(|value| api.parse(&value));
    let mut role = None;
    let response = if let Err(reason) = shared.authorize(key.as_deref()) {
        let hint = match api {
            Api::Messages => "send it in the `x-api-key` header",
            _ => "send it as `Authorization: Bearer <key>`",
        };
        api.error(StatusCode::UNAUTHORIZED, &format!("{reason}: {hint}"))
    } else if let Some(fault) = shared.fault(api.path()) {
        fault_response(api, fault)
    } else {
        match &parsed {
            Err(problem) => api.error(StatusCode::BAD_REQUEST, problem),
            Ok(exchange) => {
                shared.remember_model(&exchange.model);
                let (answered_as, completion) = shared.complete(api, exchange);
                role = Some(answered_as);
                api.render(exchange, &completion, shared.faults().malformed_stream_chunk)
            }
        }
    };
    let exchange = parsed.as_ref().ok();
    shared.record(RecordedRequest {
        path: api.path().to_string(),
        model: exchange.map(|e| e.model.clone()),
        api_key: presented,
        role: role.or_else(|| exchange.map(|e| Role::of(&e.instructions))),
        stream: exchange.is_some_and(|e| e.stream),
        status: response.status().as_u16(),
    });
    response
}

/// An injected failure.
enum Fault {
    /// `status_every_nth`.
    Status(StatusCode),
    /// `rate_limited_fraction` or `rate_limit`: 429 asking to wait this long.
    RateLimited { message: String, retry_after: Duration },
}

fn fault_response(api: Api, fault: Fault) -> Response {
    match fault {
        // Zero so clients honouring it retry at once and tests stay fast.
        Fault::Status(StatusCode::TOO_MANY_REQUESTS) => {
            rate_limited(api, &format!("injected fault: {}", StatusCode::TOO_MANY_REQUESTS), Duration::ZERO)
        }
        Fault::Status(status) => api.error(status, &format!("injected fault: {status}")),
        Fault::RateLimited { message, retry_after } => rate_limited(api, &message, retry_after),
    }
}

/// A 429 with `retry-after` (whole seconds, rounded up) and `retry-after-ms` (rounded up).
fn rate_limited(api: Api, message: &str, retry_after: Duration) -> Response {
    let mut response = api.error(StatusCode::TOO_MANY_REQUESTS, message);
    let millis = retry_after.as_nanos().div_ceil(1_000_000);
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(millis.div_ceil(1000) as u64));
    headers.insert("retry-after-ms", HeaderValue::from(millis as u64));
    response
}

/// `GET /v1/models`: OpenAI's list shape; either provider's credential header is accepted.
async fn list_models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let key = bearer(&headers).or_else(|| header_value(&headers, "x-api-key"));
    let response = match shared.authorize(key.as_deref()) {
        Err(reason) => openai::error(StatusCode::UNAUTHORIZED, reason),
        Ok(()) => {
            let data: Vec<Value> = shared
                .models()
                .into_iter()
                .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "lightsout-scripted"}))
                .collect();
            Json(json!({"object": "list", "data": data})).into_response()
        }
    };
    shared.record(RecordedRequest {
        path: "/v1/models".to_string(),
        model: None,
        api_key: key,
        role: None,
        stream: false,
        status: response.status().as_u16(),
    });
    response
}

/// `POST /v1/embeddings` (OpenAI's shape, see `super::embeddings`): authenticated like the model
/// endpoints; no faults are injected here.
async fn embeddings_request(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let key = bearer(&headers);
    let parsed = serde_json::from_slice::<Value>(&body)
        .map_err(|e| format!("the request body is not valid JSON: {e}"))
        .and_then(|value| super::embeddings::parse(&value));
    let response = match (shared.authorize(key.as_deref()), &parsed) {
        (Err(reason), _) => {
            openai::error(StatusCode::UNAUTHORIZED, &format!("{reason}: send it as `Authorization: Bearer <key>`"))
        }
        (Ok(()), Err(problem)) => openai::error(StatusCode::BAD_REQUEST, problem),
        (Ok(()), Ok(request)) => {
            shared.remember_model(&request.model);
            Json(super::embeddings::answer(request)).into_response()
        }
    };
    shared.record(RecordedRequest {
        path: "/v1/embeddings".to_string(),
        model: parsed.as_ref().ok().map(|request| request.model.clone()),
        api_key: key,
        role: None,
        stream: false,
        status: response.status().as_u16(),
    });
    response
}
