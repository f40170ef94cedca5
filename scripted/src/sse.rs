//! Server-sent events: framing, and the body that streams them.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Characters per streamed text delta: small enough that every answer arrives in several pieces,
/// so clients' reassembly is exercised.
const DELTA_CHARS: usize = 16;

/// The frame a malformed-stream fault injects before the real events.
pub(crate) const MALFORMED_FRAME: &str = "data: {not json\n\n";

/// An OpenAI Chat Completions frame: `data:` only.
pub(crate) fn data(payload: &Value) -> String {
    format!("data: {payload}\n\n")
}

/// A named event, as the Responses and Anthropic Messages APIs send them.
pub(crate) fn event(name: &str, payload: &Value) -> String {
    format!("event: {name}\ndata: {payload}\n\n")
}

/// Splits `text` into deltas on character boundaries.
pub(crate) fn deltas(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(DELTA_CHARS).map(|chunk| chunk.iter().collect()).collect()
}

/// A 200 `text/event-stream` response sending `frames` one by one (optionally after the
/// malformed frame).
pub(crate) fn response(frames: Vec<String>, malformed_first: bool) -> Response {
    let mut all = Vec::with_capacity(frames.len() + 1);
    if malformed_first {
        all.push(MALFORMED_FRAME.to_string());
    }
    all.extend(frames);
    let body = Body::from_stream(futures::stream::iter(all.into_iter().map(Ok::<_, Infallible>)));
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body)
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_reassemble() {
        let text = "é".repeat(40) + "tail";
        let parts = deltas(&text);
        assert!(parts.len() > 1);
        assert_eq!(parts.concat(), text);
        assert!(deltas("").is_empty());
    }
}
