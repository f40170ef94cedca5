//! Calling models: one client for OpenAI Chat Completions, OpenAI Responses and Anthropic
//! Messages, with metered usage. Used by the single-shot harness and by the judges; the worker's
//! metering proxy extracts usage with the same [`Usage`] model.

mod client;
mod usage;
mod wire;

pub use client::*;
pub use usage::*;
