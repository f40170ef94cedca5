//! A deterministic, scripted model server (on loopback unless told otherwise) that speaks OpenAI Chat Completions,
//! OpenAI Responses and Anthropic Messages, so Lightsout runs offline with no API key and tests
//! drive the real agent and judge code paths.
//!
//! Every answer is a pure function of (model, reasoning effort, prompt), built from the sample
//! fixtures embedded at compile time (`datasets/sample/`): judge requests (system prompt starting
//! with [`JUDGE_SYSTEM_PREFIX`]) get a verdict from the answer key, SWE-PRBench judge requests
//! (the reference harness's judge system prompt) get classifications by word overlap
//! ([`harness_judge_answer`]), `/v1/embeddings` gets hashed bag-of-words vectors ([`embed`]),
//! everything else gets a code review ([`agent_answer`]; the harness's agent system prompt gets
//! the JSON array it asks for, [`harness_agent_answer`]). The only per-instance state is the simulated
//! prompt cache, the `malformed` judges' first-attempt memory, fault counters and the request log.

mod agent;
mod anthropic;
pub mod chaos;
mod det;
mod embeddings;
mod fixtures;
pub(crate) mod harness_judge;
mod judge;
mod openai;
mod request;
mod server;
mod sse;
mod usage;

#[cfg(test)]
mod harness_tests;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use agent::{
    agent_answer, agentic_step, harness_agent_answer, ReviewComment, SCRIPTED_COMMAND_MARKER, SUBMIT_COMMAND,
};
pub use embeddings::{embed, DIMENSIONS as EMBEDDING_DIMENSIONS};
pub use harness_judge::harness_judge_answer;
pub use judge::{answers_prose, judge_answer, JUDGE_SYSTEM_PREFIX, PROSE_ANSWER};
pub use usage::{estimate_tokens, Effort};

pub use lightsout_model::SCRIPTED_HEADER;

/// How a [`ScriptedServer`] behaves beyond answering.
#[derive(Debug, Clone, Default)]
pub struct ScriptedConfig {
    /// When set, only this key is accepted (others get 401); when unset any non-empty key is.
    pub expected_api_key: Option<String>,
    pub faults: Faults,
}

/// Injected failures, to exercise clients' retry and parsing paths.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// Answer this status (429 with `retry-after: 0`, or 5xx) to every nth authenticated model
    /// request, counted per path (1-based: n=3 → requests 3, 6, 9…). n = 0 disables it.
    pub status_every_nth: Option<(u16, u64)>,
    /// In streams, emit one malformed chunk (`data: {not json`) before the real ones.
    pub malformed_stream_chunk: bool,
    /// Sleep this long before answering each model request.
    pub delay_ms: u64,
    /// A provider's rate limit: requests beyond it are answered 429 (see [`RateLimit`]).
    pub rate_limit: Option<RateLimit>,
    /// This fraction (0..=1) of authenticated model requests is answered 429 at random, as by an
    /// overloaded provider whatever this client's rate: a 30% storm is `0.3`. Drawn from a
    /// ChaCha8 generator seeded with `seed`, one draw per request in arrival order, so a run
    /// with the same arrival order gets the same answers. Such a 429 carries `retry-after-ms:
    /// rate_limited_retry_after_ms` and `retry-after` in whole seconds rounded up (both 0 by
    /// default: retry at once), and does not use the rate limit's tokens.
    pub rate_limited_fraction: f64,
    pub rate_limited_retry_after_ms: u64,
    pub seed: u64,
}

/// A token bucket: `burst` tokens, refilled at `per_second` (starting full). A model request
/// that passes the other faults takes a token, or, finding less than one, is answered 429 with
/// `retry-after-ms` (the milliseconds until a token is available, rounded up) and `retry-after`
/// (the same in whole seconds, rounded up), as OpenAI sends them. Only requests that are
/// answered count against the limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

/// Which scripted model answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The system prompt starts with [`JUDGE_SYSTEM_PREFIX`].
    Judge,
    /// The system prompt starts with the reference harness's
    /// [`lightsout_swe_prbench::harness::prompts::JUDGE_SYSTEM_PREFIX`].
    SwePrBenchJudge,
    /// Any other request: a code reviewer.
    Agent,
}

impl Role {
    /// The role a request's system prompt (or instructions, or first message) selects.
    pub fn of(instructions: &str) -> Role {
        let instructions = instructions.trim_start();
        if instructions.starts_with(lightsout_swe_prbench::harness::prompts::JUDGE_SYSTEM_PREFIX) {
            Role::SwePrBenchJudge
        } else if instructions.starts_with(JUDGE_SYSTEM_PREFIX) {
            Role::Judge
        } else {
            Role::Agent
        }
    }
}

/// One request as the server saw it (`/healthz` is not recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// e.g. `/v1/chat/completions`.
    pub path: String,
    /// The requested model, when the body parsed.
    pub model: Option<String>,
    /// The credential presented, if any: the `Authorization: Bearer` token (OpenAI paths) or
    /// `x-api-key` (`/v1/messages`), else whichever of the two was sent (which is then rejected).
    pub api_key: Option<String>,
    /// None when the body did not parse or the path is not a model endpoint.
    pub role: Option<Role>,
    pub stream: bool,
    /// The HTTP status answered.
    pub status: u16,
}

/// A running scripted server; stops on [`ScriptedServer::shutdown`] or when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Binds 127.0.0.1 on an ephemeral port and serves in the background on the current tokio
    /// runtime. Fails with `InvalidData` if the embedded fixtures do not parse.
    pub async fn start(config: ScriptedConfig) -> std::io::Result<ScriptedServer> {
        ScriptedServer::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), config).await
    }

    /// Like [`ScriptedServer::start`], but binds `addr` (port 0: an ephemeral port), e.g.
    /// `0.0.0.0:8080` to serve other pods from a container. Fails with `InvalidData` if the
    /// embedded fixtures do not parse, or with the bind error.
    pub async fn start_on(addr: SocketAddr, config: ScriptedConfig) -> std::io::Result<ScriptedServer> {
        fixtures::load().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(server::Shared::new(config));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let app = server::router(shared.clone());
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                // A dropped sender also stops the server.
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "scripted model server stopped with an error");
            }
        });
        Ok(ScriptedServer { addr, shared, shutdown: Some(shutdown), task: Some(task) })
    }

    /// The OpenAI/Anthropic base URL, e.g. `http://127.0.0.1:PORT/v1` (the bound address: for an
    /// unspecified one such as `0.0.0.0`, clients elsewhere use a name or IP of this host).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the faults in force, e.g. to end a simulated outage mid-test.
    pub fn set_faults(&self, faults: Faults) {
        self.shared.set_faults(faults);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests()
    }

    /// Scripts the tool-calling agent of `model`: from now on, in each of its conversations, it
    /// runs `commands` through the shell tool one per turn, in order, and then submits (or, for
    /// harnesses that end on an answer, answers without a tool call) — instead of looking at the
    /// change and writing its review. Tests use it to make a real harness run what they choose,
    /// e.g. the attacks of a hostile agent.
    pub fn script_agent(&self, model: &str, commands: Vec<String>) {
        self.shared.script_agent(model, commands);
    }

    /// Models requested so far, in first-seen order (what `GET /v1/models` lists).
    pub fn models(&self) -> Vec<String> {
        self.shared.models()
    }

    /// Stops accepting connections and waits (up to 5 s) for in-flight requests to finish.
    pub async fn shutdown(mut self) {
        if let Some(sender) = self.shutdown.take() {
            let _ = sender.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            // Idle keep-alive connections of clients can hold graceful shutdown open; cap it.
            if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
                abort.abort();
            }
        }
    }
}

/// The scripted server as `lightsout run`'s offline models: providers without a key are
/// answered by a [`ScriptedServer`] of this configuration.
#[derive(Debug, Clone, Default)]
pub struct ScriptedModels(pub ScriptedConfig);

impl lightsout_model::OfflineModels for ScriptedModels {
    fn start(&self) -> futures::future::BoxFuture<'static, std::io::Result<Box<dyn lightsout_model::OfflineServer>>> {
        let config = self.0.clone();
        Box::pin(async move {
            let server = ScriptedServer::start(config).await?;
            Ok(Box::new(server) as Box<dyn lightsout_model::OfflineServer>)
        })
    }
}

impl lightsout_model::OfflineServer for ScriptedServer {
    fn base_url(&self) -> String {
        ScriptedServer::base_url(self)
    }

    fn shutdown(self: Box<Self>) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(ScriptedServer::shutdown(*self))
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(sender) = self.shutdown.take() {
            let _ = sender.send(());
        }
    }
}
