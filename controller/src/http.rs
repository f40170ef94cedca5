//! The operations endpoint: Prometheus metrics and the liveness and readiness probes.
//!
//! - `GET /metrics` — the controller's [`Metrics`] in the text exposition format 0.0.4.
//! - `GET /healthz` — liveness: 200 `ok` as long as the process serves requests.
//! - `GET /readyz` — readiness: 200 `ready` once [`Health::set_ready`] was called with `true`
//!   (e.g. the caches are synced), else 503 `not ready`.
//!
//! Any other path is 404.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::metrics::Metrics;

/// The content type of the Prometheus text exposition format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The controller's readiness, shared between the controller (which sets it) and `/readyz`.
/// Clones share the same flag; it starts not ready.
#[derive(Debug, Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Health,
}

/// The endpoint's routes: `/metrics`, `/healthz`, `/readyz`; 404 elsewhere.
pub fn router(metrics: Arc<Metrics>, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .with_state(AppState { metrics, health })
}

async fn metrics_handler(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], state.metrics.encode())
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.health.is_ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found")
}

/// Serves [`router`] on `listener` until `shutdown` resolves, then stops gracefully (in-flight
/// requests finish).
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics and health probes");
    }
    axum::serve(listener, router(metrics, health)).with_graceful_shutdown(shutdown).await
}
