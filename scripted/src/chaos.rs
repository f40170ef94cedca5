//! A seeded chaos layer: a reverse proxy on loopback in front of a model server (the scripted
//! one in tests) that answers some model requests with a fault instead of forwarding them.
//!
//! Which fault a request gets is a pure function of the seed, the request (its path and body)
//! and how many times that same request was seen before ([`fault_for`]): a client's retries
//! of one call, and a trial's later attempts, draw the next faults of that request's sequence.
//! So a run's faults are reproducible from the seed whatever order concurrent requests arrive
//! in, as long as identical requests are not sent concurrently.
//!
//! Faults: 429 with `retry-after` (seconds), with `retry-after-ms`, or with neither; a 5xx; a
//! hang (nothing at all sent, not even headers, for [`ChaosConfig::hang_for`]); a garbage body
//! (200, not JSON); a body that breaks off half-way; a truncated event stream (200,
//! `text/event-stream`, broken off); an answer that stalls after its first bytes (the model
//! started answering, then nothing for `hang_for`). Every request is logged ([`ChaosRequest`]),
//! with the usage of the answers it let through, streamed or not: what a provider would have
//! billed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use lightsout_api::ApiKind;
use lightsout_model::{usage_of, StreamedAnswer, Usage};

/// A fault the layer answers with instead of forwarding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// 429 with `retry-after: 0` (seconds).
    RateLimitedRetryAfter,
    /// 429 with `retry-after-ms: 1`.
    RateLimitedRetryAfterMs,
    /// 429 with no header: the client backs off on its own.
    RateLimitedBare,
    /// 500, 502, 503 or 529 (by the request's draw).
    ServerError(u16),
    /// Nothing at all, not even headers, for [`ChaosConfig::hang_for`].
    Hang,
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with a JSON body that breaks off half-way (the connection is cut).
    TruncatedBody,
    /// 200 `text/event-stream` with one event, then the connection is cut.
    TruncatedSse,
    /// The upstream's status, headers and the head of its answer (its first event, or the first
    /// half of an unstreamed body), then nothing for [`ChaosConfig::hang_for`], then the
    /// connection is cut: a model that started answering and did not go on in time. Never an
    /// answer, so it bills nothing here.
    StalledAnswer,
}

impl Fault {
    pub fn is_rate_limit(self) -> bool {
        matches!(self, Fault::RateLimitedRetryAfter | Fault::RateLimitedRetryAfterMs | Fault::RateLimitedBare)
    }

    /// A short name for tables, e.g. `429 retry-after`.
    pub fn name(self) -> String {
        match self {
            Fault::RateLimitedRetryAfter => "429 retry-after".into(),
            Fault::RateLimitedRetryAfterMs => "429 retry-after-ms".into(),
            Fault::RateLimitedBare => "429 no header".into(),
            Fault::ServerError(status) => format!("{status}"),
            Fault::Hang => "hang".into(),
            Fault::Garbage => "garbage body".into(),
            Fault::TruncatedBody => "truncated body".into(),
            Fault::TruncatedSse => "truncated SSE".into(),
            Fault::StalledAnswer => "stalled answer".into(),
        }
    }
}

/// How often each fault is drawn (fractions of model requests; the rest are forwarded).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRates {
    /// Split evenly between the three kinds of 429.
    pub rate_limited: f64,
    pub server_error: f64,
    pub hang: f64,
    pub garbage: f64,
    pub truncated_body: f64,
    pub truncated_sse: f64,
    pub stalled_answer: f64,
}

impl FaultRates {
    pub const NONE: FaultRates = FaultRates {
        rate_limited: 0.0,
        server_error: 0.0,
        hang: 0.0,
        garbage: 0.0,
        truncated_body: 0.0,
        truncated_sse: 0.0,
        stalled_answer: 0.0,
    };
}

#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// The base URL requests are forwarded to, e.g. `http://127.0.0.1:PORT/v1`.
    pub upstream: String,
    pub seed: u64,
    pub rates: FaultRates,
    /// How long a hang (or a stalled answer) holds a request before the layer gives up on it
    /// (longer than the client's stall timeout or time limit, so the client gives up first).
    pub hang_for: Duration,
}

/// One model request as the layer handled it.
#[derive(Debug, Clone)]
pub struct ChaosRequest {
    /// SHA-256 of the path and body: identical requests share it.
    pub key: String,
    /// How many times the same request was seen before this one.
    pub occurrence: u32,
    /// The request body (JSON), for tests to tell which call it was.
    pub body: Arc<Value>,
    /// `None`: forwarded.
    pub fault: Option<Fault>,
    /// Forwarded requests: the upstream's status, once its answer was passed on (`None`: the
    /// client hung up first, e.g. at its stall timeout, and never got it), and the usage that
    /// answer reported.
    pub status: Option<u16>,
    pub usage: Usage,
}

/// The fault the `occurrence`-th sight (0-based) of the request `key` gets under `seed`: one
/// uniform draw from SHA-256(seed, key, occurrence), laid over the rates in their order.
pub fn fault_for(seed: u64, rates: &FaultRates, key: &str, occurrence: u32) -> Option<Fault> {
    let digest = Sha256::new()
        .chain_update(seed.to_le_bytes())
        .chain_update(key.as_bytes())
        .chain_update(occurrence.to_le_bytes())
        .finalize();
    let bits = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
    let draw = (bits >> 11) as f64 / (1u64 << 53) as f64;
    let third = rates.rate_limited / 3.0;
    let statuses = [500, 502, 503, 529];
    let table = [
        (third, Fault::RateLimitedRetryAfter),
        (third, Fault::RateLimitedRetryAfterMs),
        (third, Fault::RateLimitedBare),
        (rates.server_error, Fault::ServerError(statuses[(digest[8] % 4) as usize])),
        (rates.hang, Fault::Hang),
        (rates.garbage, Fault::Garbage),
        (rates.truncated_body, Fault::TruncatedBody),
        (rates.truncated_sse, Fault::TruncatedSse),
        (rates.stalled_answer, Fault::StalledAnswer),
    ];
    let mut upto = 0.0;
    for (rate, fault) in table {
        upto += rate;
        if draw < upto {
            return Some(fault);
        }
    }
    None
}

/// The request key [`fault_for`] draws from.
pub fn request_key(path: &str, body: &[u8]) -> String {
    lightsout_api::hash::sha256_hex(&[path.as_bytes(), b"\0", body].concat())
}

struct Shared {
    config: ChaosConfig,
    /// The rates in force: `config.rates` until replaced.
    rates: Mutex<FaultRates>,
    http: reqwest::Client,
    log: Mutex<Vec<ChaosRequest>>,
    seen: Mutex<std::collections::HashMap<String, u32>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running chaos layer; stops when dropped.
pub struct ChaosServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl ChaosServer {
    pub async fn start(config: ChaosConfig) -> std::io::Result<ChaosServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let http = reqwest::Client::builder().build().map_err(std::io::Error::other)?;
        let rates = Mutex::new(config.rates);
        let shared = Arc::new(Shared { config, rates, http, log: Mutex::default(), seen: Mutex::default() });
        let app = axum::Router::new().fallback(handle).with_state(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "chaos layer stopped with an error");
            }
        });
        Ok(ChaosServer { addr, shared, shutdown: Some(shutdown), task })
    }

    /// The base URL to give clients, e.g. `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every model request so far, in arrival order.
    pub fn requests(&self) -> Vec<ChaosRequest> {
        lock(&self.shared.log).clone()
    }

    /// Replaces the fault rates (e.g. to end a storm); the per-request counts carry on.
    pub fn set_rates(&self, rates: FaultRates) {
        *lock(&self.shared.rates) = rates;
    }
}

impl Drop for ChaosServer {
    fn drop(&mut self) {
        if let Some(sender) = self.shutdown.take() {
            let _ = sender.send(());
        }
        // Hung requests would hold a graceful shutdown open.
        self.task.abort();
    }
}

fn api_of(path: &str) -> Option<ApiKind> {
    match path.strip_prefix("/v1").unwrap_or(path) {
        "/chat/completions" => Some(ApiKind::OpenAiChat),
        "/responses" => Some(ApiKind::OpenAiResponses),
        "/messages" => Some(ApiKind::Anthropic),
        _ => None,
    }
}

/// A body that sends `head` and then fails, so the server cuts the connection mid-answer.
fn broken_off(head: String) -> Body {
    use futures::StreamExt as _;
    let head = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(head)) });
    let cut = futures::stream::once(async {
        // The status, headers and head reach the client first, as from a provider that dies
        // mid-answer (failing at once, the server would cut the connection before any of it).
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(std::io::Error::other("chaos: connection cut"))
    });
    Body::from_stream(head.chain(cut))
}

async fn handle(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let Some(api) = api_of(&path) else {
        return forward(&shared, &uri, &headers, body).await.0;
    };
    let key = request_key(&path, &body);
    let occurrence = {
        let mut seen = lock(&shared.seen);
        let count = seen.entry(key.clone()).or_insert(0);
        *count += 1;
        *count - 1
    };
    let rates = *lock(&shared.rates);
    let fault = fault_for(shared.config.seed, &rates, &key, occurrence);
    let parsed = Arc::new(serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null));
    // Logged on arrival: a client that hangs up drops this handler, and the log still shows the
    // request (a forwarded one with no status: never answered).
    let index = {
        let mut log = lock(&shared.log);
        log.push(ChaosRequest { key, occurrence, body: parsed, fault, status: None, usage: Usage::default() });
        log.len() - 1
    };
    if let Some(fault) = fault {
        return fault_response(fault, &shared, (&uri, &headers, body)).await;
    }
    let (response, status, answer) = forward(&shared, &uri, &headers, body).await;
    let mut log = lock(&shared.log);
    log[index].status = Some(status);
    if (200..300).contains(&status) {
        log[index].usage = usage_of_answer(api, &response, &answer);
    }
    response
}

/// The usage an answer's body reports, streamed or not.
fn usage_of_answer(api: ApiKind, response: &Response, body: &Bytes) -> Usage {
    let streamed = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if streamed {
        let mut stream = StreamedAnswer::new(api);
        stream.feed(body);
        return stream.finish_usage().unwrap_or_default();
    }
    serde_json::from_slice::<Value>(body).ok().and_then(|json| usage_of(api, &json)).unwrap_or_default()
}

/// The upstream's `response` with only the head of its `body` (up to the end of its first event,
/// else its first half), then nothing for `hang_for`, then the connection cut.
fn stalled(response: Response, body: Bytes, hang_for: Duration) -> Response {
    use futures::StreamExt as _;
    let head_len = body.windows(2).position(|w| w == b"\n\n").map_or(body.len() / 2, |at| at + 2);
    let head = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body.slice(..head_len)) });
    let cut = futures::stream::once(async move {
        tokio::time::sleep(hang_for).await;
        Err(std::io::Error::other("chaos: stalled answer cut"))
    });
    let (parts, _) = response.into_parts();
    Response::from_parts(parts, Body::from_stream(head.chain(cut)))
}

/// The fault's answer; `request` is forwarded for the faults that start with the real answer.
async fn fault_response(fault: Fault, shared: &Shared, request: (&Uri, &HeaderMap, Bytes)) -> Response {
    let hang_for = shared.config.hang_for;
    let message = format!("{{\"error\": {{\"message\": \"chaos: {}\"}}}}", fault.name());
    let rate_limited = |header: Option<(&'static str, &'static str)>| {
        let mut response = (StatusCode::TOO_MANY_REQUESTS, message.clone()).into_response();
        if let Some((name, value)) = header {
            response.headers_mut().insert(name, HeaderValue::from_static(value));
        }
        response
    };
    match fault {
        Fault::RateLimitedRetryAfter => rate_limited(Some(("retry-after", "0"))),
        Fault::RateLimitedRetryAfterMs => rate_limited(Some(("retry-after-ms", "1"))),
        Fault::RateLimitedBare => rate_limited(None),
        Fault::ServerError(status) => {
            (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), message).into_response()
        }
        Fault::Hang => {
            tokio::time::sleep(hang_for).await;
            (StatusCode::GATEWAY_TIMEOUT, message).into_response()
        }
        Fault::Garbage => {
            let mut response = (StatusCode::OK, "<html><body>upstream connect error</body></html>").into_response();
            response.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            response
        }
        Fault::TruncatedBody => {
            let mut response =
                Response::new(broken_off(r#"{"id": "chatcmpl-chaos", "choices": [{"index": 0, "mess"#.into()));
            response.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            response
        }
        Fault::StalledAnswer => {
            let (uri, headers, body) = request;
            let (response, _, answer) = forward(shared, uri, headers, body).await;
            stalled(response, answer, hang_for)
        }
        Fault::TruncatedSse => {
            let head =
                "data: {\"id\": \"chaos\", \"choices\": [{\"delta\": {\"content\": \"Re\"}}]}\n\ndata: {\"id\": \"ch"
                    .to_string();
            let mut response = Response::new(broken_off(head));
            response.headers_mut().insert("content-type", HeaderValue::from_static("text/event-stream"));
            response
        }
    }
}

/// Forwards the request upstream; the response, its status, and its body.
async fn forward(shared: &Shared, uri: &Uri, headers: &HeaderMap, body: Bytes) -> (Response, u16, Bytes) {
    let path = uri.path().strip_prefix("/v1").unwrap_or(uri.path());
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let url = format!("{}{path}{query}", shared.config.upstream.trim_end_matches('/'));
    let mut request = shared.http.post(url).body(body);
    for (name, value) in headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection" | "transfer-encoding") {
            request = request.header(name, value);
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => {
            return ((StatusCode::BAD_GATEWAY, format!("chaos: upstream: {e}")).into_response(), 502, Bytes::new())
        }
    };
    let status = answer.status();
    let mut response_headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !matches!(name.as_str(), "content-length" | "transfer-encoding" | "connection") {
            response_headers.insert(name.clone(), value.clone());
        }
    }
    let bytes = match answer.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => {
            let response = (StatusCode::BAD_GATEWAY, format!("chaos: upstream body: {e}")).into_response();
            return (response, 502, Bytes::new());
        }
    };
    let mut response = Response::new(Body::from(bytes.clone()));
    *response.status_mut() = status;
    *response.headers_mut() = response_headers;
    (response, status.as_u16(), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_a_pure_function_of_the_seed_the_request_and_its_occurrence() {
        let rates = FaultRates {
            rate_limited: 0.2,
            server_error: 0.1,
            hang: 0.05,
            garbage: 0.05,
            truncated_body: 0.05,
            truncated_sse: 0.05,
            stalled_answer: 0.0,
        };
        let key = request_key("/v1/chat/completions", b"{}");
        let draws: Vec<_> = (0..2000).map(|n| fault_for(7, &rates, &key, n)).collect();
        assert_eq!(draws, (0..2000).map(|n| fault_for(7, &rates, &key, n)).collect::<Vec<_>>());
        assert_ne!(draws, (0..2000).map(|n| fault_for(8, &rates, &key, n)).collect::<Vec<_>>());
        let share = |f: &dyn Fn(&Fault) -> bool| draws.iter().flatten().filter(|d| f(d)).count() as f64 / 2000.0;
        // Within a few standard deviations of the rates.
        assert!((share(&|f| f.is_rate_limit()) - 0.2).abs() < 0.04);
        assert!((share(&|f| matches!(f, Fault::ServerError(_))) - 0.1).abs() < 0.03);
        assert!((share(&|f| *f == Fault::Hang) - 0.05).abs() < 0.02);
        assert!((draws.iter().filter(|d| d.is_none()).count() as f64 / 2000.0 - 0.5).abs() < 0.05);
        assert!((0..100).all(|n| fault_for(7, &FaultRates::NONE, &key, n).is_none()));
    }
}
