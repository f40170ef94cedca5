//! Reasoning effort and the deterministic token accounting every API reports.

use std::fmt;

/// A reasoning-effort level as the providers spell it (`reasoning_effort`, `reasoning.effort`;
/// Anthropic extended thinking counts as `High`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    XHigh,
}

impl Effort {
    /// Parses a provider effort string; `None` for anything unknown (the caller answers 400).
    pub fn parse(value: &str) -> Option<Effort> {
        Some(match value {
            "none" => Effort::None,
            "minimal" => Effort::Minimal,
            "low" => Effort::Low,
            "medium" => Effort::Medium,
            "high" => Effort::High,
            "xhigh" => Effort::XHigh,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effort::None => "none",
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
        }
    }

    /// Reasoning tokens per answer token: models "think" more at higher effort.
    pub(crate) fn reasoning_factor(effort: Option<Effort>) -> u64 {
        match effort {
            None | Some(Effort::None) | Some(Effort::Minimal) => 0,
            Some(Effort::Low) => 1,
            Some(Effort::Medium) => 2,
            Some(Effort::High) => 4,
            Some(Effort::XHigh) => 8,
        }
    }
}

impl fmt::Display for Effort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The token estimate the server reports: ceil(chars / 4), counting Unicode scalar values.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// How many leading characters of a prompt identify it for the simulated prompt cache.
pub(crate) const CACHE_PREFIX_CHARS: usize = 1024;
/// The most tokens a cache hit reports.
const CACHE_HIT_TOKENS: u64 = 256;

/// Token counts for one answer, in provider-neutral terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// All prompt tokens, cached ones included (OpenAI's `prompt_tokens` convention).
    pub prompt: u64,
    /// Tokens of the visible answer.
    pub answer: u64,
    /// Hidden reasoning tokens; billed as output, so included in [`Usage::output`].
    pub reasoning: u64,
    /// Prompt tokens served from the simulated cache.
    pub cached: u64,
}

impl Usage {
    pub fn new(prompt_text: &str, answer_text: &str, effort: Option<Effort>, cache_hit: bool) -> Usage {
        let prompt = estimate_tokens(prompt_text);
        let answer = estimate_tokens(answer_text);
        Usage {
            prompt,
            answer,
            reasoning: answer * Effort::reasoning_factor(effort),
            cached: if cache_hit { prompt.min(CACHE_HIT_TOKENS) } else { 0 },
        }
    }

    /// Output tokens as billed: the visible answer plus reasoning, as both OpenAI APIs count them.
    pub fn output(&self) -> u64 {
        self.answer + self.reasoning
    }
}

/// The cache key of a prompt: its first [`CACHE_PREFIX_CHARS`] characters.
pub(crate) fn cache_prefix(prompt_text: &str) -> String {
    prompt_text.chars().take(CACHE_PREFIX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("ééééé"), 2);
    }

    #[test]
    fn reasoning_and_cache() {
        let usage = Usage::new(&"x".repeat(4000), "abcdefgh", Some(Effort::High), true);
        assert_eq!((usage.prompt, usage.answer, usage.reasoning, usage.cached), (1000, 2, 8, 256));
        assert_eq!(usage.output(), 10);
        let small = Usage::new("abcd", "abcd", None, true);
        assert_eq!((small.reasoning, small.cached), (0, 1));
    }
}
