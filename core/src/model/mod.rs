//! Calling models: one client for OpenAI Chat Completions, OpenAI Responses and Anthropic
//! Messages, with metered usage and a concurrency limit per provider that adapts to its rate
//! limits. Used by the single-shot harness (streamed) and by the judges; the worker's metering
//! proxy extracts usage with the same [`Usage`] model and streamed answers with [`StreamedAnswer`].

mod client;
mod limiter;
mod sse;
mod usage;
mod wire;

pub use client::*;
pub use limiter::{ProviderStats, RateLimitPolicy};
pub use sse::StreamedAnswer;
pub use usage::*;
