//! Server-sent events as the proxy recorded them, read leniently.

use lightsout_model::event_stream::{self, SseItem};
use serde_json::Value;

/// One event whose data is JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonEvent {
    /// The `event:` field, when there was one.
    pub name: Option<String>,
    pub data: Value,
}

impl JsonEvent {
    /// The event's type: the payload's `type`, else the `event:` field.
    pub fn kind(&self) -> &str {
        self.data.get("type").and_then(Value::as_str).or(self.name.as_deref()).unwrap_or("")
    }
}

/// Parses an event stream into its JSON events, up to `data: [DONE]`.
///
/// Comments, `id:` and `retry:` lines are ignored; other lines that are not `event:`/`data:`
/// fields, and data that is not JSON, are skipped with a warning. Data split over several `data:`
/// lines is joined; when the join is not JSON but each line is (events not separated by blank
/// lines), each line counts as one event.
pub(crate) fn json_events(text: &str, warnings: &mut Vec<String>) -> Vec<JsonEvent> {
    let mut events = Vec::new();
    for (name, data) in raw_events(text, warnings) {
        if data.trim() == "[DONE]" {
            break;
        }
        if let Ok(value) = serde_json::from_str::<Value>(&data) {
            events.push(JsonEvent { name, data: value });
            continue;
        }
        let lines: Vec<&str> = data.lines().collect();
        if lines.len() == 1 {
            warnings.push(format!("skipped SSE data that is not JSON: {}", snippet(&data)));
            continue;
        }
        let mut done = false;
        for line in lines {
            if line.trim() == "[DONE]" {
                done = true;
                break;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(value) => events.push(JsonEvent { name: name.clone(), data: value }),
                Err(_) if line.trim().is_empty() => {}
                Err(_) => warnings.push(format!("skipped SSE data that is not JSON: {}", snippet(line))),
            }
        }
        if done {
            break;
        }
    }
    events
}

/// How the proxy marks a stream that ended early (`worker/src/proxy`).
const PROXY_STREAM_END_NOTE: &str = "[lightsout proxy: stream ended early: ";
/// The cause the proxy gives when the agent closed the connection.
const AGENT_HUNG_UP: &str = "the agent closed the connection";

/// `(event name, data)` of each event in the stream (read by `lightsout_model::event_stream`),
/// with a warning for each line of an unknown field.
fn raw_events(text: &str, warnings: &mut Vec<String>) -> Vec<(Option<String>, String)> {
    let mut events = Vec::new();
    for item in event_stream::read_all(text) {
        match item {
            SseItem::Event(event) => events.push((event.name, event.data)),
            SseItem::Comment(_) => {}
            // The metering proxy's note that the stream ended before the provider finished it. An
            // agent that hangs up (many close right after the final event) saw everything
            // recorded; any other cause (the provider's stream failed) means the answer is cut
            // short.
            SseItem::Unknown(line) => match line.strip_prefix(PROXY_STREAM_END_NOTE) {
                Some(cause) if cause.starts_with(AGENT_HUNG_UP) => {}
                Some(cause) => {
                    warnings.push(format!("the stream ended early: {}", snippet(cause.trim_end_matches(']'))))
                }
                None => warnings.push(format!("skipped malformed SSE line: {}", snippet(&line))),
            },
        }
    }
    events
}

/// At most 80 characters of `text`, for warnings.
pub(crate) fn snippet(text: &str) -> String {
    const MAX: usize = 80;
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(MAX).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_proxys_end_note_is_no_malformed_line_and_warns_only_when_the_provider_cut_the_stream() {
        let stream = "data: {\"a\":1}\n\n[lightsout proxy: stream ended early: the agent closed the connection]\n";
        let mut warnings = Vec::new();
        assert_eq!(raw_events(stream, &mut warnings).len(), 1);
        assert!(warnings.is_empty(), "{warnings:?}");
        let cut = "data: {\"a\":1}\n\n[lightsout proxy: stream ended early: upstream read error: reset]\n";
        raw_events(cut, &mut warnings);
        assert_eq!(warnings, vec!["the stream ended early: upstream read error: reset".to_string()]);
    }

    use super::*;

    #[test]
    fn events_with_names_multiline_data_and_junk() {
        let text = ": comment\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\ngarbage line\ndata: {not json\n\nid: 7\ndata: {\"y\":2}\ndata: {\"z\":3}\n\ndata: [DONE]\n\ndata: {\"after\":1}\n";
        let mut warnings = Vec::new();
        let events = json_events(text, &mut warnings);
        assert_eq!(
            events,
            vec![
                JsonEvent { name: Some("a".into()), data: serde_json::json!({"x": 1}) },
                JsonEvent { name: None, data: serde_json::json!({"y": 2}) },
                JsonEvent { name: None, data: serde_json::json!({"z": 3}) },
            ]
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("garbage line"));
        assert!(warnings[1].contains("{not json"));
    }

    #[test]
    fn unterminated_last_event_counts() {
        let mut warnings = Vec::new();
        let events = json_events("data: {\"a\":1}", &mut warnings);
        assert_eq!(events.len(), 1);
        assert!(warnings.is_empty());
        assert_eq!(snippet(&"é".repeat(100)).chars().count(), 81);
    }
}
