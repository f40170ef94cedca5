//! The one reader of server-sent events (`text/event-stream`) in Lightsout: the model client and
//! the metering proxy read streamed answers with it chunk by chunk ([`crate::StreamedAnswer`]),
//! the trajectory reads the streams the proxy recorded, and the scripted server's tests read what
//! it wrote.
//!
//! It follows the WHATWG rules for the stream's lines: a line ends at `\n`, `\r\n` or `\r`; a line
//! starting with `:` is a comment; `field: value` (one space after the colon dropped, a line
//! without a colon is a field with an empty value); `data` lines accumulate, joined by `\n`;
//! `event` names the event; a blank line dispatches it. `id` and `retry` are read and ignored
//! (nothing here reconnects). Unlike a browser it does not drop what it does not know silently:
//! a line of another field is handed back as [`SseItem::Unknown`], so that a reader of recorded
//! streams can warn about it (and see the proxy's own note of a stream that ended early).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when there was one.
    pub name: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// What the reader found in the stream, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    Event(SseEvent),
    /// A comment line, without its leading `:`.
    Comment(String),
    /// A line of a field other than `event`, `data`, `id` or `retry`, as it was.
    Unknown(String),
}

/// Reads an event stream as it arrives, in chunks split anywhere (inside a line, a `\r\n`, or a
/// UTF-8 character).
#[derive(Debug, Default)]
pub struct SseReader {
    /// Bytes of a line not yet complete.
    partial: Vec<u8>,
    /// The last byte fed was `\r`: a `\n` that follows ends no second line.
    after_cr: bool,
    name: Option<String>,
    data: Option<String>,
}

impl SseReader {
    pub fn new() -> Self {
        SseReader::default()
    }

    /// Reads the next chunk, handing each complete item to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl FnMut(SseItem)) {
        let mut start = 0;
        for (i, byte) in chunk.iter().enumerate() {
            match byte {
                b'\n' if self.after_cr && i == start && self.partial.is_empty() => {
                    // The `\n` of a `\r\n` split across chunks or lines.
                    self.after_cr = false;
                    start = i + 1;
                }
                b'\n' | b'\r' => {
                    self.partial.extend_from_slice(&chunk[start..i]);
                    let line = std::mem::take(&mut self.partial);
                    self.line(&line, out);
                    self.after_cr = *byte == b'\r';
                    start = i + 1;
                }
                _ => self.after_cr = false,
            }
        }
        self.partial.extend_from_slice(&chunk[start..]);
    }

    /// Ends the stream: an unterminated last line is read, and an event without its closing blank
    /// line is dispatched (a stream cut short still counts what it delivered).
    pub fn finish(mut self, out: &mut impl FnMut(SseItem)) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, out);
        }
        if let Some(data) = self.data.take() {
            out(SseItem::Event(SseEvent { name: self.name.take(), data }));
        }
    }

    fn line(&mut self, line: &[u8], out: &mut impl FnMut(SseItem)) {
        let line = String::from_utf8_lossy(line);
        if line.is_empty() {
            match self.data.take() {
                Some(data) => out(SseItem::Event(SseEvent { name: self.name.take(), data })),
                None => self.name = None,
            }
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            out(SseItem::Comment(comment.to_string()));
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (&*line, ""),
        };
        match field {
            "event" => self.name = Some(value.to_string()),
            "data" => match self.data.as_mut() {
                Some(existing) => {
                    existing.push('\n');
                    existing.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "id" | "retry" => {}
            _ => out(SseItem::Unknown(line.into_owned())),
        }
    }
}

/// Every item of a whole stream.
pub fn read_all(stream: &str) -> Vec<SseItem> {
    let mut items = Vec::new();
    let mut reader = SseReader::new();
    reader.feed(stream.as_bytes(), &mut |item| items.push(item));
    reader.finish(&mut |item| items.push(item));
    items
}

/// The events of a whole stream, without comments and unknown lines.
pub fn events(stream: &str) -> Vec<SseEvent> {
    read_all(stream)
        .into_iter()
        .filter_map(|item| match item {
            SseItem::Event(event) => Some(event),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> SseItem {
        SseItem::Event(SseEvent { name: name.map(str::to_string), data: data.to_string() })
    }

    const STREAM: &str =
        ": hello\nevent: a\ndata: {\"x\":\ndata: 1}\n\ndata:[DONE]\r\n\r\nid: 7\nretry: 10\nbogus line\n\ndata: tail";

    #[test]
    fn fields_comments_unknown_lines_and_an_unterminated_event() {
        assert_eq!(
            read_all(STREAM),
            vec![
                SseItem::Comment(" hello".into()),
                event(Some("a"), "{\"x\":\n1}"),
                event(None, "[DONE]"),
                SseItem::Unknown("bogus line".into()),
                event(None, "tail"),
            ]
        );
    }

    #[test]
    fn any_chunking_reads_the_same_items() {
        let whole = read_all(STREAM);
        let bytes = STREAM.as_bytes();
        for size in 1..bytes.len() {
            let mut items = Vec::new();
            let mut reader = SseReader::new();
            for chunk in bytes.chunks(size) {
                reader.feed(chunk, &mut |item| items.push(item));
            }
            reader.finish(&mut |item| items.push(item));
            assert_eq!(items, whole, "chunks of {size}");
        }
    }

    #[test]
    fn cr_lf_and_lone_cr_end_lines_and_a_split_character_survives() {
        assert_eq!(
            events("data: a\r\rdata: b\r\n\r\n"),
            vec![SseEvent { name: None, data: "a".into() }, SseEvent { name: None, data: "b".into() }]
        );
        let text = "data: é\n\n".as_bytes();
        let mut items = Vec::new();
        let mut reader = SseReader::new();
        reader.feed(&text[..7], &mut |item| items.push(item));
        reader.feed(&text[7..], &mut |item| items.push(item));
        assert_eq!(items, vec![event(None, "é")]);
    }

    #[test]
    fn a_blank_line_without_data_dispatches_nothing_and_forgets_the_name() {
        assert_eq!(events("event: ping\n\ndata: x\n\n"), vec![SseEvent { name: None, data: "x".into() }]);
    }
}
