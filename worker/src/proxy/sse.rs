//! Reading usage out of a server-sent event stream as it passes, chunk by chunk, without holding
//! the stream back.

use lightsout_core::api::ApiKind;
use lightsout_core::model::{anthropic_usage, openai_chat_usage, openai_responses_usage, Usage};
use serde_json::Value;

/// Follows one streamed answer and keeps the latest usage it reported.
#[derive(Debug)]
pub struct UsageTracker {
    kind: ApiKind,
    /// Bytes of an event line not yet complete.
    partial: Vec<u8>,
    usage: Option<Usage>,
    /// Anthropic reports input in `message_start` and output in `message_delta`.
    anthropic_start: Option<Usage>,
    pub malformed_lines: u32,
}

impl UsageTracker {
    pub fn new(kind: ApiKind) -> Self {
        UsageTracker { kind, partial: Vec::new(), usage: None, anthropic_start: None, malformed_lines: 0 }
    }

    /// Feeds the next chunk of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.partial.extend_from_slice(chunk);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.line(&line);
        }
    }

    /// The usage reported so far; `None` if the stream reported none.
    pub fn finish(mut self) -> Option<Usage> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
        self.usage
    }

    fn line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else { return };
        let data = String::from_utf8_lossy(data);
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return;
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            self.malformed_lines += 1;
            return;
        };
        match self.kind {
            ApiKind::OpenAiChat => {
                if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
                    self.usage = Some(openai_chat_usage(usage));
                }
            }
            ApiKind::OpenAiResponses => {
                let usage = event.pointer("/response/usage").filter(|u| u.is_object());
                if let Some(usage) = usage {
                    self.usage = Some(openai_responses_usage(usage));
                }
            }
            ApiKind::Anthropic => match event.get("type").and_then(Value::as_str) {
                Some("message_start") => {
                    if let Some(usage) = event.pointer("/message/usage") {
                        let start = anthropic_usage(usage);
                        self.anthropic_start = Some(start);
                        self.usage = Some(start);
                    }
                }
                Some("message_delta") => {
                    if let Some(delta) = event.get("usage") {
                        // `output_tokens` in message_delta is cumulative; input stays as started.
                        let mut usage = self.anthropic_start.unwrap_or_default();
                        usage.output_tokens = delta.get("output_tokens").and_then(Value::as_u64).unwrap_or(0);
                        self.usage = Some(usage);
                    }
                }
                _ => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(kind: ApiKind, stream: &str, chunk: usize) -> Option<Usage> {
        let mut tracker = UsageTracker::new(kind);
        for piece in stream.as_bytes().chunks(chunk) {
            tracker.feed(piece);
        }
        tracker.finish()
    }

    #[test]
    fn chat_usage_comes_from_the_final_chunk_whatever_the_chunking() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2},\"completion_tokens_details\":{\"reasoning_tokens\":1}}}\n\n\
                      data: [DONE]\n\n";
        for chunk in [1, 7, 1000] {
            let usage = track(ApiKind::OpenAiChat, stream, chunk).unwrap();
            assert_eq!(
                (usage.input_tokens, usage.output_tokens, usage.cached_read_tokens, usage.reasoning_tokens),
                (10, 4, 2, 1)
            );
        }
    }

    #[test]
    fn anthropic_combines_start_and_delta() {
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":3,\"output_tokens\":1}}}\n\n\
                      event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n";
        let usage = track(ApiKind::Anthropic, stream, 5).unwrap();
        assert_eq!((usage.input_tokens, usage.cached_read_tokens, usage.output_tokens), (8, 3, 9));
    }

    #[test]
    fn responses_usage_and_malformed_lines() {
        let stream = "data: {not json\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":2}}}";
        let mut tracker = UsageTracker::new(ApiKind::OpenAiResponses);
        tracker.feed(stream.as_bytes());
        assert_eq!(tracker.malformed_lines, 1);
        assert_eq!(tracker.finish().unwrap().output_tokens, 2);
        assert_eq!(track(ApiKind::OpenAiChat, "data: {\"choices\":[]}\n\n", 3), None);
    }
}
