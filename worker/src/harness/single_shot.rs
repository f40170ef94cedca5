//! `single-shot`: one model call over the task's context, as SWE-PRBench evaluates models.
//! The call is made by the worker itself, so the provider key stays in trusted code, and streamed
//! (`ModelClient::complete_until`), so that a time limit tells the provider's hang from the
//! model's slowness.

use lightsout_core::prompts::REVIEWER_SYSTEM;
use lightsout_model::{ChatRequest, Completion, DeadlineError, Endpoint, ModelClient};

pub struct SingleShot<'a> {
    pub client: &'a ModelClient,
    pub endpoint: &'a Endpoint,
}

/// The built-in harness's version: the version of its request shape and system prompt. A run
/// pins it like any other harness; it changes only when what the model is sent changes.
pub const VERSION: &str = "1.0.0";

impl SingleShot<'_> {
    /// The review, unless the call fails or `deadline` (the trial's time limit) passes first. A
    /// request without a system message of its own (one its prompt brings) gets the reviewer's.
    pub async fn review(
        &self,
        request: ChatRequest,
        deadline: tokio::time::Instant,
    ) -> Result<Completion, DeadlineError> {
        let system = request.system.clone().unwrap_or_else(|| REVIEWER_SYSTEM.to_string());
        let request = ChatRequest { system: Some(system), ..request };
        self.client.complete_until(self.endpoint, &request, deadline).await
    }
}
