//! Request and response shapes of the three APIs, reduced to what Lightsout sends and reads.

use serde_json::{json, Value};

use super::{anthropic_usage, openai_chat_usage, openai_responses_usage, ChatRequest, Usage};
use lightsout_api::{ApiKind, ReasoningEffort};

/// The path under the base URL and the JSON body of a request.
pub(super) fn request(kind: ApiKind, req: &ChatRequest) -> (&'static str, Value) {
    match kind {
        ApiKind::OpenAiChat => {
            let mut messages = Vec::new();
            if let Some(system) = &req.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": req.user}));
            let mut body = json!({"model": req.model, "messages": messages});
            if let Some(effort) = req.reasoning_effort {
                body["reasoning_effort"] = json!(effort.as_str());
            }
            if let Some(max) = req.max_output_tokens {
                body["max_completion_tokens"] = json!(max);
            }
            ("/chat/completions", body)
        }
        ApiKind::OpenAiResponses => {
            let mut body = json!({"model": req.model, "input": req.user});
            if let Some(system) = &req.system {
                body["instructions"] = json!(system);
            }
            if let Some(effort) = req.reasoning_effort {
                body["reasoning"] = json!({"effort": effort.as_str()});
            }
            if let Some(max) = req.max_output_tokens {
                body["max_output_tokens"] = json!(max);
            }
            ("/responses", body)
        }
        ApiKind::Anthropic => {
            let max_tokens = req.max_output_tokens.unwrap_or(8192);
            let mut body = json!({
                "model": req.model,
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": req.user}],
            });
            if let Some(system) = &req.system {
                body["system"] = json!(system);
            }
            if let Some(budget) = req.reasoning_effort.and_then(anthropic_thinking_budget) {
                body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
                body["max_tokens"] = json!(max_tokens.max(budget + 4096));
            }
            ("/messages", body)
        }
    }
}

/// [`request`] asking for the answer as a stream of server-sent events (see [`super::sse`]); a
/// Chat Completions stream reports usage only when asked to.
pub(super) fn streamed_request(kind: ApiKind, req: &ChatRequest) -> (&'static str, Value) {
    let (path, mut body) = request(kind, req);
    body["stream"] = json!(true);
    if kind == ApiKind::OpenAiChat {
        body["stream_options"] = json!({"include_usage": true});
    }
    (path, body)
}

/// Anthropic has no effort knob; extended thinking's token budget plays its part.
fn anthropic_thinking_budget(effort: ReasoningEffort) -> Option<u32> {
    match effort {
        ReasoningEffort::None | ReasoningEffort::Minimal => None,
        ReasoningEffort::Low => Some(2048),
        ReasoningEffort::Medium => Some(8192),
        ReasoningEffort::High => Some(16384),
        ReasoningEffort::Xhigh => Some(32768),
    }
}

/// The answer's text and usage, or a description of what is missing.
pub(super) fn response(kind: ApiKind, body: &Value) -> Result<(String, Usage), String> {
    match kind {
        ApiKind::OpenAiChat => {
            let text = body
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .ok_or("no choices[0].message.content")?;
            let usage = body.get("usage").ok_or("no usage")?;
            Ok((text.to_string(), openai_chat_usage(usage)))
        }
        ApiKind::OpenAiResponses => {
            let mut text = String::new();
            for item in body.get("output").and_then(Value::as_array).ok_or("no output")? {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    if part.get("type").and_then(Value::as_str) == Some("output_text") {
                        text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default());
                    }
                }
            }
            let usage = body.get("usage").ok_or("no usage")?;
            Ok((text, openai_responses_usage(usage)))
        }
        ApiKind::Anthropic => {
            let mut text = String::new();
            for part in body.get("content").and_then(Value::as_array).ok_or("no content")? {
                if part.get("type").and_then(Value::as_str) == Some("text") {
                    text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default());
                }
            }
            let usage = body.get("usage").ok_or("no usage")?;
            Ok((text, anthropic_usage(usage)))
        }
    }
}
