//! What answers for providers without an API key under `lightsout run` (its offline mode): the
//! scripted model server, which the CLI supplies (`lightsout-scripted`). The worker's local runner
//! knows only these traits, so neither the worker nor the controller binary carries canned
//! answers or the sample's answer key.

use futures::future::BoxFuture;

/// Starts a model server for providers without a key.
pub trait OfflineModels: Send + Sync {
    fn start(&self) -> BoxFuture<'static, std::io::Result<Box<dyn OfflineServer>>>;
}

/// A running offline model server.
pub trait OfflineServer: Send + Sync {
    /// The base URL providers are pointed at (`http://127.0.0.1:PORT/v1`).
    fn base_url(&self) -> String;
    /// Stops it, letting answers in flight finish.
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()>;
}
