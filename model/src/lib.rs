//! Calling models: one client for OpenAI Chat Completions, OpenAI Responses and Anthropic
//! Messages, with metered usage and a concurrency limit per provider that adapts to its rate
//! limits. Used by the single-shot harness (streamed) and by the judges; the worker's metering
//! proxy extracts usage with the same [`Usage`] model and streamed answers with [`StreamedAnswer`].

mod client;
pub mod event_stream;
pub mod exchange;
mod limiter;
mod offline;
pub mod pricing;
mod streamed_answer;
mod usage;
mod wire;

pub use client::*;
pub use limiter::{ProviderStats, RateLimitPolicy};
pub use offline::{OfflineModels, OfflineServer};
pub use streamed_answer::StreamedAnswer;
pub use usage::*;

/// The header every answer of the scripted model server (`lightsout-scripted`) carries (value
/// `1`), so whoever receives one — the model client, the worker's metering proxy — knows it came
/// from canned answers and not from a real model, whatever the run's configuration claimed. A
/// trial's `scripted_model` and a summary's `scripted_models` (and its notice) follow from it.
pub const SCRIPTED_HEADER: &str = "x-lightsout-scripted";
