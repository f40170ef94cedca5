//! The metering proxy: the only way an agent reaches a model.
//!
//! It listens on loopback for one trial. The agent holds only a per-trial dummy key; the proxy
//! checks it, swaps in the real credential (invariant 1), forwards the call to the provider,
//! passes streamed answers through chunk by chunk as they arrive, reads the usage out of every
//! answer (streamed or not), prices it, refuses further calls once the trial's token or USD
//! limit is spent, and records every exchange (invariant 3). Usage of failed and retried calls is
//! counted like any other: what the provider reported is what was paid for.
//!
//! Routes: `/v1/chat/completions` (OpenAI Chat), `/v1/responses` (OpenAI Responses) and
//! `/v1/messages` (Anthropic) are metered; other `/v1/...` paths (e.g. `/v1/models`) are
//! passed through and recorded without usage.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::stream::{BoxStream, Stream, StreamExt};
use lightsout_api::ApiKind;
use lightsout_model::exchange::{Exchange, ExchangeBody};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{usage_of, Endpoint, StreamedAnswer, Usage};
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// One trial's proxy settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where calls go, with the real key.
    pub upstream: Endpoint,
    /// The dummy key the agent is given; calls without it are refused.
    pub agent_key: String,
    pub pricing: PricingTable,
    /// The trial's limits; once reached, further calls are refused.
    pub max_tokens: Option<u64>,
    pub max_usd: Option<f64>,
    /// Each exchange is appended here as it completes, so a killed worker keeps what it saw.
    pub log_path: Option<PathBuf>,
    /// Also listen on this Unix socket: the way in from a sandboxed agent's network namespace.
    pub unix_socket: Option<PathBuf>,
    /// A provider that sends nothing for this long (no byte of its answer, headers included) is
    /// hanging: the call fails, a 502 to the agent recorded as the provider's failure. The same
    /// setting as the single-shot harness's model client (`DEFAULT_STALL_TIMEOUT` by default).
    pub stall_timeout: Duration,
}

/// What a trial's model calls have cost so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub usage: Usage,
    /// Over the calls whose model has a price.
    pub cost_usd: f64,
    /// Calls whose model has no price: their cost is unknown and not in `cost_usd`.
    pub unpriced_calls: u32,
    /// Calls forwarded to the provider.
    pub calls: u32,
    /// Calls the proxy refused because the trial's budget was spent.
    pub refused: u32,
    /// Answers (errors included) that came from the scripted model server, which marks them
    /// ([`lightsout_model::SCRIPTED_HEADER`]); the trial's result records that its
    /// numbers say nothing about a real model.
    pub scripted_answers: u32,
    /// Forwarded calls the provider failed: answered 429 or 5xx, could not be reached, stalled
    /// (nothing for [`ProxyConfig::stall_timeout`]) or broke off its answer.
    pub provider_failures: u32,
    /// The last forwarded call to finish was such a failure: the provider was failing when the
    /// agent stopped (a time limit then is not the model's doing).
    pub last_call_failed: Option<String>,
}

impl Totals {
    /// The cost when every call was priced; `None` when any was not.
    pub fn known_cost(&self) -> Option<f64> {
        (self.unpriced_calls == 0).then_some(self.cost_usd)
    }
}

struct Meter {
    totals: Totals,
    exchanges: Vec<Exchange>,
    log: Option<std::fs::File>,
}

struct Shared {
    config: ProxyConfig,
    http: reqwest::Client,
    seq: AtomicU64,
    meter: Mutex<Meter>,
    /// Where forwarded calls are also added, for a worker stopped mid-attempt.
    spend: std::sync::OnceLock<crate::interruption::SpendSoFar>,
}

fn lock(meter: &Mutex<Meter>) -> MutexGuard<'_, Meter> {
    meter.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn record(&self, exchange: Exchange, forwarded: bool) {
        let mut meter = lock(&self.meter);
        let totals = &mut meter.totals;
        if exchange.refused.is_some() {
            totals.refused += 1;
        } else if forwarded {
            totals.calls += 1;
            totals.usage += exchange.usage;
            if let Some(spend) = self.spend.get() {
                spend.add(exchange.usage, exchange.cost_usd, 1);
            }
            // A stream the agent hung up on says nothing of the provider's health.
            let hung_up = matches!(&exchange.response, ExchangeBody::Sse(raw) if raw.trim_end().ends_with(&format!("{AGENT_HUNG_UP}]")));
            if !hung_up {
                totals.last_call_failed = provider_failure(&exchange);
                totals.provider_failures += u32::from(totals.last_call_failed.is_some());
            }
            match exchange.cost_usd {
                Some(cost) => totals.cost_usd += cost,
                None if exchange.usage != Usage::default() => totals.unpriced_calls += 1,
                None => {}
            }
        }
        if let Some(file) = meter.log.as_mut() {
            if let Ok(mut line) = serde_json::to_vec(&exchange) {
                line.push(b'\n');
                // A log write failure must not fail the agent's call; the in-memory record stays.
                let _ = file.write_all(&line);
            }
        }
        meter.exchanges.push(exchange);
    }

    /// Why the next call must be refused, if the budget is spent.
    fn over_budget(&self) -> Option<String> {
        let totals = lock(&self.meter).totals.clone();
        if let Some(limit) = self.config.max_tokens {
            if totals.usage.total_tokens() >= limit {
                return Some(format!(
                    "lightsout: this trial's token budget is spent ({} of {limit} tokens); no further model calls are allowed",
                    totals.usage.total_tokens()
                ));
            }
        }
        if let Some(limit) = self.config.max_usd {
            if totals.cost_usd >= limit {
                return Some(format!(
                    "lightsout: this trial's budget is spent ({:.4} of {limit} USD); no further model calls are allowed",
                    totals.cost_usd
                ));
            }
        }
        None
    }

    fn price(&self, model: Option<&str>, usage: &Usage) -> Option<f64> {
        model.and_then(|m| self.config.pricing.cost(m, usage))
    }
}

/// Why an exchange is the provider's failure, if it is: a 429 or 5xx answer (the proxy's own
/// 502s for an unreachable, stalled or broken-off provider included), or a stream that ended
/// early for a reason other than the agent hanging up.
fn provider_failure(exchange: &Exchange) -> Option<String> {
    if exchange.status == 429 || exchange.status >= 500 {
        return Some(format!("HTTP {}", exchange.status));
    }
    match &exchange.response {
        ExchangeBody::Sse(raw) => raw
            .rsplit_once(STREAM_BROKE_OFF)
            .map(|(_, reason)| reason.trim().trim_end_matches(']').to_string())
            .filter(|reason| reason != AGENT_HUNG_UP)
            .map(|reason| format!("the stream broke off: {reason}")),
        _ => None,
    }
}

const STREAM_BROKE_OFF: &str = "[lightsout proxy: stream ended early:";
const AGENT_HUNG_UP: &str = "the agent closed the connection";

/// A running proxy. Dropping it stops it.
pub struct MeteringProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl MeteringProxy {
    /// Listens on 127.0.0.1 on an ephemeral port.
    pub async fn start(config: ProxyConfig) -> std::io::Result<MeteringProxy> {
        let log = match &config.log_path {
            Some(path) => Some(std::fs::OpenOptions::new().create(true).append(true).open(path)?),
            None => None,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A hanging provider fails the call rather than holding the agent.
            .read_timeout(config.stall_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared {
            config,
            http,
            seq: AtomicU64::new(0),
            meter: Mutex::new(Meter { totals: Totals::default(), exchanges: Vec::new(), log }),
            spend: std::sync::OnceLock::new(),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let unix = match &shared.config.unix_socket {
            Some(path) => {
                let _ = std::fs::remove_file(path);
                Some(tokio::net::UnixListener::bind(path)?)
            }
            None => None,
        };
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let (unix_shutdown, unix_stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // Streamed tokens arrive as small writes; without TCP_NODELAY, Nagle's algorithm and
            // delayed ACKs hold one back ~40 ms at the start of many streams.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let tcp = axum::serve(listener, app.clone()).with_graceful_shutdown(async {
                let _ = stopped.await;
                let _ = unix_shutdown.send(());
            });
            let unix = async move {
                if let Some(unix) = unix {
                    axum::serve(unix, app)
                        .with_graceful_shutdown(async {
                            let _ = unix_stopped.await;
                        })
                        .await
                } else {
                    Ok(())
                }
            };
            let tcp = async move { tcp.await };
            let (tcp, unix) = tokio::join!(tcp, unix);
            if let Err(e) = tcp.and(unix) {
                tracing::warn!(error = %e, "metering proxy stopped with an error");
            }
        });
        Ok(MeteringProxy { addr, shared, shutdown: Some(shutdown), task: Some(task) })
    }

    /// The base URL to give the agent, e.g. `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Also adds every forwarded call to `spend` from now on (set once; before the agent starts).
    pub fn report_spend_to(&self, spend: crate::interruption::SpendSoFar) {
        let _ = self.shared.spend.set(spend);
    }

    pub fn totals(&self) -> Totals {
        lock(&self.shared.meter).totals.clone()
    }

    /// Whether a call was refused for the trial's budget.
    pub fn budget_exceeded(&self) -> bool {
        self.totals().refused > 0
    }

    /// Every exchange so far, in the order they completed.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut exchanges = lock(&self.shared.meter).exchanges.clone();
        exchanges.sort_by_key(|e| e.seq);
        exchanges
    }

    /// Stops accepting calls and waits briefly for those in flight.
    pub async fn shutdown(mut self) {
        if let Some(sender) = self.shutdown.take() {
            let _ = sender.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for MeteringProxy {
    fn drop(&mut self) {
        if let Some(sender) = self.shutdown.take() {
            let _ = sender.send(());
        }
    }
}

fn api_of(path: &str) -> Option<ApiKind> {
    match path {
        "/chat/completions" => Some(ApiKind::OpenAiChat),
        "/responses" => Some(ApiKind::OpenAiResponses),
        "/messages" => Some(ApiKind::Anthropic),
        _ => None,
    }
}

/// The key the agent presented, in either provider's header.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok())).map(str::trim)
}

/// An error in the shape the agent's API expects, so its client reports it legibly.
fn error_response(api: Option<ApiKind>, status: StatusCode, kind: &str, message: &str) -> Response {
    let body = match api {
        Some(ApiKind::Anthropic) => json!({"type": "error", "error": {"type": kind, "message": message}}),
        _ => json!({"error": {"message": message, "type": kind, "code": kind}}),
    };
    (status, axum::Json(body)).into_response()
}

/// Headers not forwarded: per-hop ones, the agent's credentials, and compression (the proxy
/// must read the answer to meter it).
const DROPPED_HEADERS: [&str; 9] = [
    "host",
    "authorization",
    "x-api-key",
    "content-length",
    "connection",
    "transfer-encoding",
    "accept-encoding",
    "keep-alive",
    "proxy-authorization",
];

async fn forward(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started_at = chrono::Utc::now();
    let clock = Instant::now();
    let path = uri.path().strip_prefix("/v1").unwrap_or(uri.path()).to_string();
    let api = api_of(&path);
    if presented_key(&headers) != Some(shared.config.agent_key.as_str()) {
        return error_response(
            api,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "lightsout proxy: unknown API key",
        );
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = request.get("model").and_then(Value::as_str).map(str::to_string);
    let stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let seq = shared.seq.fetch_add(1, Ordering::SeqCst) + 1;
    let record =
        |status: u16, response: ExchangeBody, usage: Usage, first_byte_ms: Option<u64>, refused: Option<String>| {
            Exchange {
                seq,
                api: api.unwrap_or(shared.config.upstream.api_kind),
                path: path.clone(),
                model: model.clone(),
                started_at,
                first_byte_ms,
                duration_ms: clock.elapsed().as_millis() as u64,
                status,
                stream,
                request: request.clone(),
                response,
                cost_usd: shared.price(model.as_deref(), &usage),
                usage,
                refused,
            }
        };

    if api.is_some() {
        if let Some(reason) = shared.over_budget() {
            let response = error_response(api, StatusCode::FORBIDDEN, "budget_exceeded", &reason);
            shared.record(record(403, ExchangeBody::Text(reason.clone()), Usage::default(), None, Some(reason)), false);
            return response;
        }
    }

    // A streamed Chat Completions answer reports usage only when asked to; metering must be
    // complete, so the proxy asks. (The extra final chunk has no choices, which clients expect.)
    let mut outgoing = body;
    if api == Some(ApiKind::OpenAiChat) && stream {
        let asked = request.pointer("/stream_options/include_usage").and_then(Value::as_bool) == Some(true);
        if !asked {
            let mut amended = request.clone();
            amended["stream_options"]["include_usage"] = json!(true);
            if let Ok(bytes) = serde_json::to_vec(&amended) {
                outgoing = Bytes::from(bytes);
            }
        }
    }

    let upstream = &shared.config.upstream;
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let url = format!("{}{path}{query}", upstream.base_url.trim_end_matches('/'));
    let mut forwarded = shared.http.request(method, url).body(outgoing);
    for (name, value) in headers.iter() {
        if !DROPPED_HEADERS.contains(&name.as_str()) {
            forwarded = forwarded.header(name, value);
        }
    }
    let key = upstream.api_key.as_deref().unwrap_or_default();
    forwarded = match upstream.api_kind {
        ApiKind::Anthropic => forwarded.header("x-api-key", key),
        ApiKind::OpenAiChat | ApiKind::OpenAiResponses => forwarded.bearer_auth(key),
    };
    let answer = match forwarded.send().await {
        Ok(answer) => answer,
        Err(e) => {
            let message = format!("lightsout proxy: the provider could not be reached: {e}");
            shared.record(record(502, ExchangeBody::Text(message.clone()), Usage::default(), None, None), true);
            return error_response(api, StatusCode::BAD_GATEWAY, "api_error", &message);
        }
    };
    let first_byte_ms = Some(clock.elapsed().as_millis() as u64);
    if answer.headers().contains_key(lightsout_model::SCRIPTED_HEADER) {
        lock(&shared.meter).totals.scripted_answers += 1;
    }
    let status = answer.status();
    let mut response_headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !matches!(name.as_str(), "content-length" | "transfer-encoding" | "connection") {
            response_headers.insert(name.clone(), value.clone());
        }
    }
    let is_sse = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));

    if is_sse {
        let pending = Pending {
            shared: shared.clone(),
            exchange: record(status.as_u16(), ExchangeBody::Sse(String::new()), Usage::default(), first_byte_ms, None),
        };
        let metered = MeteredStream {
            inner: answer.bytes_stream().boxed(),
            tracker: api.map(StreamedAnswer::new),
            raw: Vec::new(),
            pending: Some(pending),
        };
        let mut response = Response::new(Body::from_stream(metered));
        *response.status_mut() = status;
        *response.headers_mut() = response_headers;
        return response;
    }

    let bytes = match answer.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => {
            let message = format!("lightsout proxy: the provider's answer broke off: {e}");
            shared
                .record(record(502, ExchangeBody::Text(message.clone()), Usage::default(), first_byte_ms, None), true);
            return error_response(api, StatusCode::BAD_GATEWAY, "api_error", &message);
        }
    };
    let (body, usage) = match serde_json::from_slice::<Value>(&bytes) {
        Ok(json) => {
            let usage = api.and_then(|kind| usage_of(kind, &json)).unwrap_or_default();
            (ExchangeBody::Json(json), usage)
        }
        Err(_) => (ExchangeBody::Text(String::from_utf8_lossy(&bytes).into_owned()), Usage::default()),
    };
    shared.record(record(status.as_u16(), body, usage, first_byte_ms, None), true);
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = response_headers;
    response
}

/// An exchange whose streamed answer is still flowing.
struct Pending {
    shared: Arc<Shared>,
    exchange: Exchange,
}

/// Passes a streamed answer through unchanged, chunk by chunk, while metering it; the exchange
/// is recorded when the stream ends, breaks, or the agent hangs up.
struct MeteredStream {
    inner: BoxStream<'static, reqwest::Result<Bytes>>,
    tracker: Option<StreamedAnswer>,
    raw: Vec<u8>,
    pending: Option<Pending>,
}

impl MeteredStream {
    fn finish(&mut self, error: Option<String>) {
        let Some(Pending { shared, mut exchange }) = self.pending.take() else { return };
        let usage = self.tracker.take().and_then(StreamedAnswer::finish_usage).unwrap_or_default();
        let mut raw = String::from_utf8_lossy(&std::mem::take(&mut self.raw)).into_owned();
        if let Some(error) = error {
            raw.push_str(&format!("\n{STREAM_BROKE_OFF} {error}]\n"));
        }
        exchange.duration_ms = (chrono::Utc::now() - exchange.started_at).num_milliseconds().max(0) as u64;
        exchange.response = ExchangeBody::Sse(raw);
        exchange.cost_usd = shared.price(exchange.model.as_deref(), &usage);
        exchange.usage = usage;
        shared.record(exchange, true);
    }
}

impl Stream for MeteredStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(tracker) = self.tracker.as_mut() {
                    tracker.feed(&chunk);
                }
                self.raw.extend_from_slice(&chunk);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.finish(Some(e.to_string()));
                Poll::Ready(Some(Err(std::io::Error::other(e))))
            }
            Poll::Ready(None) => {
                self.finish(None);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for MeteredStream {
    fn drop(&mut self) {
        self.finish(Some(AGENT_HUNG_UP.into()));
    }
}
