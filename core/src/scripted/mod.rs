//! A deterministic, scripted model server on loopback that speaks OpenAI Chat Completions,
//! OpenAI Responses and Anthropic Messages, so Lightsout runs offline with no API key and tests
//! drive the real agent and judge code paths.
//!
//! Every answer is a pure function of (model, reasoning effort, prompt), built from the sample
//! fixtures embedded at compile time (`datasets/sample/`): judge requests (system prompt starting
//! with [`JUDGE_SYSTEM_PREFIX`]) get a verdict from the answer key, everything else gets a code
//! review ([`agent_answer`], [`judge_answer`]). The only per-instance state is the simulated
//! prompt cache, the `malformed` judges' first-attempt memory, fault counters and the request log.

mod agent;
mod anthropic;
mod det;
mod fixtures;
mod judge;
mod openai;
mod request;
mod server;
mod sse;
mod usage;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use agent::{agent_answer, agentic_step, ReviewComment, SUBMIT_COMMAND};
pub use judge::{answers_prose, judge_answer, JUDGE_SYSTEM_PREFIX, PROSE_ANSWER};
pub use usage::{estimate_tokens, Effort};

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
}

/// Which scripted model answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The system prompt starts with [`JUDGE_SYSTEM_PREFIX`].
    Judge,
    /// Any other request: a code reviewer.
    Agent,
}

impl Role {
    /// The role a request's system prompt (or instructions, or first message) selects.
    pub fn of(instructions: &str) -> Role {
        if instructions.trim_start().starts_with(JUDGE_SYSTEM_PREFIX) {
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
        fixtures::load().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
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

    /// The OpenAI/Anthropic base URL, e.g. `http://127.0.0.1:PORT/v1`.
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

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(sender) = self.shutdown.take() {
            let _ = sender.send(());
        }
    }
}
