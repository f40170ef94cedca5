//! Token usage by kind, normalised across APIs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use lightsout_api::ApiKind;

/// Tokens of one or more model calls.
///
/// `input_tokens` counts every prompt token, cached or not (OpenAI's convention; Anthropic's
/// separate cache counts are added in when parsing), so `input - cached_read - cache_write` is
/// the uncached input. `output_tokens` includes `reasoning_tokens`, which are billed as output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens.saturating_sub(self.cached_read_tokens + self.cache_write_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_read_tokens += other.cached_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;
    fn add(mut self, other: Usage) -> Usage {
        self += other;
        self
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |a, b| a + b)
    }
}

/// The usage of a whole (non-streamed) answer of the given API, if it reports one.
pub fn usage_of(kind: ApiKind, body: &Value) -> Option<Usage> {
    let usage = body.get("usage").filter(|u| u.is_object())?;
    Some(match kind {
        ApiKind::OpenAiChat => openai_chat_usage(usage),
        ApiKind::OpenAiResponses => openai_responses_usage(usage),
        ApiKind::Anthropic => anthropic_usage(usage),
    })
}

fn field(usage: &Value, path: &[&str]) -> u64 {
    path.iter().try_fold(usage, |v, key| v.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

/// OpenAI Chat Completions' `usage`.
pub fn openai_chat_usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: field(usage, &["prompt_tokens"]),
        output_tokens: field(usage, &["completion_tokens"]),
        cached_read_tokens: field(usage, &["prompt_tokens_details", "cached_tokens"]),
        cache_write_tokens: 0,
        reasoning_tokens: field(usage, &["completion_tokens_details", "reasoning_tokens"]),
    }
}

/// OpenAI Responses' `usage`.
pub fn openai_responses_usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: field(usage, &["input_tokens"]),
        output_tokens: field(usage, &["output_tokens"]),
        cached_read_tokens: field(usage, &["input_tokens_details", "cached_tokens"]),
        cache_write_tokens: 0,
        reasoning_tokens: field(usage, &["output_tokens_details", "reasoning_tokens"]),
    }
}

/// Anthropic's `usage`. Its `input_tokens` excludes cache reads and writes; they are added so
/// that [`Usage::input_tokens`] means the same thing for every API. Thinking tokens are part of
/// `output_tokens` and not reported apart.
pub fn anthropic_usage(usage: &Value) -> Usage {
    let cached = field(usage, &["cache_read_input_tokens"]);
    let written = field(usage, &["cache_creation_input_tokens"]);
    Usage {
        input_tokens: field(usage, &["input_tokens"]) + cached + written,
        output_tokens: field(usage, &["output_tokens"]),
        cached_read_tokens: cached,
        cache_write_tokens: written,
        reasoning_tokens: 0,
    }
}
