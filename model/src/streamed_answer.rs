//! Streamed answers of the three APIs (server-sent events), read chunk by chunk as they arrive:
//! the usage reported so far (what the worker's metering proxy and the chaos layer meter, also
//! of a stream that broke off) and, once the stream is complete, the answer as the API sends it
//! unstreamed, so that [`crate::wire::response`] reads text and usage the same way either way.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::event_stream::{SseItem, SseReader};
use crate::{anthropic_usage, openai_chat_usage, openai_responses_usage, Usage};
use lightsout_api::ApiKind;

/// Follows one streamed answer.
#[derive(Debug)]
pub struct StreamedAnswer {
    kind: ApiKind,
    /// The event stream, read as it arrives.
    reader: SseReader,
    /// The latest usage reported, in the API's own shape. Anthropic reports input in
    /// `message_start` and cumulative counts in `message_delta`, overlaid on it.
    usage: Option<Map<String, Value>>,
    /// The answer's text: Chat Completions' one choice (at 0, absent until its content
    /// arrives), Anthropic's text blocks by index. Responses' is in its final response.
    text: BTreeMap<u64, String>,
    /// Responses: the finished response object (`response.completed` or `response.incomplete`).
    response: Option<Value>,
    /// The stream's own end marker arrived: `data: [DONE]`, `message_stop`, or the final response.
    complete: bool,
    /// An error event in the stream.
    error: Option<String>,
    pub malformed_lines: u32,
}

impl StreamedAnswer {
    pub fn new(kind: ApiKind) -> Self {
        StreamedAnswer {
            kind,
            reader: SseReader::new(),
            usage: None,
            text: BTreeMap::new(),
            response: None,
            complete: false,
            error: None,
            malformed_lines: 0,
        }
    }

    /// Feeds the next chunk of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut events = Vec::new();
        self.reader.feed(chunk, &mut |item| {
            if let SseItem::Event(event) = item {
                events.push(event.data);
            }
        });
        for data in events {
            self.event(&data);
        }
    }

    /// The usage reported so far; `None` if the stream reported none.
    pub fn usage(&self) -> Option<Usage> {
        let usage = Value::Object(self.usage.clone()?);
        Some(match self.kind {
            ApiKind::OpenAiChat => openai_chat_usage(&usage),
            ApiKind::OpenAiResponses => openai_responses_usage(&usage),
            ApiKind::Anthropic => anthropic_usage(&usage),
        })
    }

    /// Ends the stream (an unterminated last line counts) and gives the usage it reported.
    pub fn finish_usage(mut self) -> Option<Usage> {
        self.flush();
        self.usage()
    }

    /// Ends the stream and gives the answer as the API sends it unstreamed, or why there is
    /// none: the stream reported an error, or ended before its end marker (it broke off).
    pub fn into_answer(mut self) -> Result<Value, String> {
        self.flush();
        if let Some(error) = self.error {
            return Err(format!("the provider reported an error in its stream: {error}"));
        }
        if !self.complete {
            return Err("the stream ended before the answer was complete".into());
        }
        let usage = self.usage.map(Value::Object);
        let mut answer = match self.kind {
            ApiKind::OpenAiChat => {
                let content = self.text.remove(&0).map_or(Value::Null, Value::String);
                json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
            }
            ApiKind::OpenAiResponses => return Ok(self.response.unwrap_or(Value::Null)),
            ApiKind::Anthropic => {
                let blocks: Vec<Value> =
                    self.text.into_values().map(|text| json!({"type": "text", "text": text})).collect();
                json!({"type": "message", "role": "assistant", "content": blocks})
            }
        };
        if let Some(usage) = usage {
            answer["usage"] = usage;
        }
        Ok(answer)
    }

    fn flush(&mut self) {
        let mut events = Vec::new();
        std::mem::take(&mut self.reader).finish(&mut |item| {
            if let SseItem::Event(event) = item {
                events.push(event.data);
            }
        });
        for data in events {
            self.event(&data);
        }
    }

    /// One event's data is one JSON value; a stream that leaves out the blank lines between
    /// events gives several `data:` lines in one event, each its own value.
    fn event(&mut self, data: &str) {
        match serde_json::from_str::<Value>(data.trim()) {
            Ok(event) => self.json_event(&event),
            Err(_) => data.split('\n').for_each(|line| self.data_line(line)),
        }
    }

    fn data_line(&mut self, data: &str) {
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.complete |= self.kind == ApiKind::OpenAiChat;
            return;
        }
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            self.malformed_lines += 1;
            return;
        };
        self.json_event(&event);
    }

    fn json_event(&mut self, event: &Value) {
        match self.kind {
            ApiKind::OpenAiChat => self.chat_event(event),
            ApiKind::OpenAiResponses => self.responses_event(event),
            ApiKind::Anthropic => self.anthropic_event(event),
        }
    }

    fn chat_event(&mut self, event: &Value) {
        if let Some(usage) = event.get("usage").and_then(Value::as_object) {
            self.usage = Some(usage.clone());
        }
        if let Some(error) = event.get("error").filter(|e| !e.is_null()) {
            self.error.get_or_insert_with(|| error.to_string());
        }
        let choice = event
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        if let Some(content) = choice.and_then(|c| c.pointer("/delta/content")).and_then(Value::as_str) {
            self.text.entry(0).or_default().push_str(content);
        }
    }

    fn responses_event(&mut self, event: &Value) {
        if let Some(usage) = event.pointer("/response/usage").and_then(Value::as_object) {
            self.usage = Some(usage.clone());
        }
        match event.get("type").and_then(Value::as_str) {
            Some("response.completed" | "response.incomplete") => {
                self.response = event.get("response").cloned();
                self.complete = true;
            }
            Some("response.failed" | "error") => {
                let error = event.pointer("/response/error").or_else(|| event.get("error")).unwrap_or(event);
                self.error.get_or_insert_with(|| error.to_string());
            }
            _ => {}
        }
    }

    fn anthropic_event(&mut self, event: &Value) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(usage) = event.pointer("/message/usage").and_then(Value::as_object) {
                    self.usage = Some(usage.clone());
                }
            }
            Some("message_delta") => {
                // Its counts are cumulative; what it leaves out stays as `message_start` had it.
                if let Some(delta) = event.get("usage").and_then(Value::as_object) {
                    let usage = self.usage.get_or_insert_with(Map::new);
                    for (name, value) in delta.iter().filter(|(_, value)| !value.is_null()) {
                        usage.insert(name.clone(), value.clone());
                    }
                }
            }
            Some("content_block_start") => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                if block.get("type").and_then(Value::as_str) == Some("text") {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or_default();
                    self.text.insert(index, text.to_string());
                }
            }
            Some("content_block_delta") => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                if delta.get("type").and_then(Value::as_str) == Some("text_delta") {
                    let text = delta.get("text").and_then(Value::as_str).unwrap_or_default();
                    self.text.entry(index).or_default().push_str(text);
                }
            }
            Some("message_stop") => self.complete = true,
            Some("error") => {
                let error = event.get("error").unwrap_or(event);
                self.error.get_or_insert_with(|| error.to_string());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(kind: ApiKind, stream: &str, chunk: usize) -> StreamedAnswer {
        let mut answer = StreamedAnswer::new(kind);
        for piece in stream.as_bytes().chunks(chunk) {
            answer.feed(piece);
        }
        answer
    }

    #[test]
    fn chat_usage_comes_from_the_final_chunk_whatever_the_chunking() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":2},\"completion_tokens_details\":{\"reasoning_tokens\":1}}}\n\n\
                      data: [DONE]\n\n";
        for chunk in [1, 7, 1000] {
            let answer = chunked(ApiKind::OpenAiChat, stream, chunk);
            let usage = answer.usage().unwrap();
            assert_eq!(
                (usage.input_tokens, usage.output_tokens, usage.cached_read_tokens, usage.reasoning_tokens),
                (10, 4, 2, 1)
            );
            let answer = answer.into_answer().unwrap();
            assert_eq!(answer["choices"][0]["message"]["content"], "hi");
        }
    }

    #[test]
    fn anthropic_overlays_the_deltas_cumulative_counts_on_the_start() {
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":3,\"output_tokens\":1}}}\n\n\
                      event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
                      event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n\
                      event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                      event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"No \"}}\n\n\
                      event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"bugs.\"}}\n\n\
                      event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9,\"input_tokens\":null}}\n\n\
                      event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let answer = chunked(ApiKind::Anthropic, stream, 5);
        let usage = answer.usage().unwrap();
        assert_eq!((usage.input_tokens, usage.cached_read_tokens, usage.output_tokens), (8, 3, 9));
        assert_eq!(answer.into_answer().unwrap()["content"], json!([{"type": "text", "text": "No bugs."}]));
    }

    #[test]
    fn responses_answer_is_the_final_response_and_malformed_lines_are_counted() {
        let stream = "data: {not json\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":2}}}";
        let mut answer = StreamedAnswer::new(ApiKind::OpenAiResponses);
        answer.feed(stream.as_bytes());
        assert_eq!(answer.malformed_lines, 1);
        assert_eq!(
            answer.into_answer().unwrap(),
            json!({"output": [], "usage": {"input_tokens": 3, "output_tokens": 2}})
        );
        assert_eq!(chunked(ApiKind::OpenAiChat, "data: {\"choices\":[]}\n\n", 3).finish_usage(), None);
    }

    #[test]
    fn a_stream_without_its_end_marker_or_with_an_error_is_no_answer_but_keeps_its_usage() {
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"Re\"}}],\"usage\":{\"prompt_tokens\":4}}\n\n";
        let error = chunked(ApiKind::OpenAiChat, cut, 4).into_answer().unwrap_err();
        assert!(error.contains("ended before the answer was complete"), "{error}");
        assert_eq!(chunked(ApiKind::OpenAiChat, cut, 4).finish_usage().unwrap().input_tokens, 4);
        let failed = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n\
                      event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let error = chunked(ApiKind::Anthropic, failed, 9).into_answer().unwrap_err();
        assert!(error.contains("overloaded_error"), "{error}");
    }
}
