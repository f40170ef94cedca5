//! Parsing an agent's review into ranked findings.
//!
//! An agent answers a review task with either
//!
//! * **markdown** (`review.md`, the `default` prompt): a ranked list of findings, most severe
//!   first, in whatever shape the model likes: a numbered or bulleted list, one heading per
//!   finding, sections grouped by severity, usually with a closing "Summary"; or
//! * **JSON** (the `swe-prbench` prompt): an array of comment objects, possibly fenced or wrapped
//!   in prose, decoded with SWE-PRBench's published fallback order ([`parse_json_findings`]).
//!
//! [`parse_review`] detects which of the two it got and returns the findings in the agent's
//! order: `rank` 1 is the agent's first finding. Every markdown rule is documented beside the
//! code that implements it, and the tests at the bottom pin an example of each.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many JSON comments are kept (the first ones), as SWE-PRBench does.
pub const MAX_JSON_COMMENTS: usize = 30;

/// One finding of a review, in the agent's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// 1-based position in the agent's order: 1 is the first (most severe) finding.
    pub rank: u32,
    /// The finding's full text, markdown kept, trimmed. A markdown list item loses its list
    /// marker (`1.`, `-`) and a per-finding heading its `#`s and enumerator; everything else,
    /// severity markers included, stays.
    pub body: String,
    /// The first file the finding points at (`src/a.py`), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line in `file` the finding points at; the first line of a range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
    /// The agent's severity, normalised by [`normalise_severity`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
}

/// A finding's severity: `P0` is the most severe (and sorts first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Severity {
    P0,
    P1,
    P2,
}

impl Severity {
    /// `"P0"`, `"P1"` or `"P2"`, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::P0 => "P0",
            Severity::P1 => "P1",
            Severity::P2 => "P2",
        }
    }
}

/// Normalises an agent's severity label: `P0`/`P1`/`P2` in any case and with any surrounding
/// punctuation (`p0`, `[P1]`, `**P2**`); `critical`, `blocker`, `severe` → P0; `high`, `major`,
/// `important` → P1; `medium`, `moderate`, `minor`, `low`, `nit`, `nitpick`, `suggestion` → P2;
/// anything else (including `P3`, `info`, multi-word text) → `None`.
pub fn normalise_severity(text: &str) -> Option<Severity> {
    let word = text.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    match word.as_str() {
        "p0" | "critical" | "blocker" | "severe" => Some(Severity::P0),
        "p1" | "high" | "major" | "important" => Some(Severity::P1),
        "p2" | "medium" | "moderate" | "minor" | "low" | "nit" | "nitpick" | "suggestion" => Some(Severity::P2),
        _ => None,
    }
}

/// How a review was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewFormat {
    Markdown,
    Json,
    /// The review is blank (empty or whitespace only), or, for the SWE-PRBench prompt, an
    /// answer without comments (`[]`).
    Empty,
    /// A SWE-PRBench answer that does not parse ([`parse_swe_prbench_answer`]); the first
    /// warning says why.
    Unparseable,
}

/// A review parsed into findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedReview {
    /// The findings, in the agent's order (`rank` 1, 2, …).
    pub findings: Vec<Finding>,
    pub format: ReviewFormat,
    /// Whitespace-separated words of the whole review text.
    pub words: usize,
    /// What the parser skipped or guessed, for humans reading results.
    pub warnings: Vec<String>,
    /// The answer to the `swe-prbench` prompt as the reference harness keeps it, from which the
    /// SWE-PRBench scorer takes the agent's comments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swe_prbench: Option<SwePrBenchAnswer>,
}

/// The final answer of the harness's agent call sequence and, when it did not parse (or no
/// answer came), the harness's parse error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwePrBenchAnswer {
    pub raw_response: String,
    pub parse_error: Option<String>,
}

/// Why [`parse_json_findings`] could not read an answer (the reference harness's two parse
/// errors, with its messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JsonFindingsError {
    /// Nothing in the text decodes as a comment list or a comment object.
    #[error("Unable to parse agent JSON response: line 1 column 1 (char 0)")]
    NotJson,
    /// No comment could be taken from the answer, yet it looks structured (`"body":`, or a
    /// ```` ```json ```` fence).
    #[error("Agent response looked structured but no parseable comments were extracted.")]
    NoComments,
}

/// Why a JSON-looking review could not be read by [`parse_review`] (its own, forgiving reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum ReviewJsonError {
    /// The text has no `[` or `{` at all.
    #[error("no JSON found")]
    NotJson,
    /// The text looks structured (has `[` or `{`) but no comment with a non-empty string `body`
    /// could be decoded from it.
    #[error("no comment with a non-empty `body` could be decoded from the structured output")]
    NoComments,
}

/// Parses an agent's review (the text of `review.md`, or the agent's JSON answer).
///
/// * Blank text → [`ReviewFormat::Empty`], no findings.
/// * Text that starts like JSON (`{`, `[{`, `[]`, optionally inside a leading code fence) is
///   decoded with [`parse_json_findings`]; if that fails the text is parsed as markdown after
///   all, with a warning.
/// * Otherwise it is parsed as markdown, except that
///   * a JSON comment list with at least one comment outside every markdown finding (a fenced
///     block whose whole content it is, or else the last one embedded in the remaining prose)
///     makes the review JSON: prose, perhaps with a bulleted aside, around a JSON answer;
///   * a markdown review with no findings at all is tried as JSON ([`parse_json_findings`])
///     before settling for zero findings.
/// * "No issues found" / "LGTM" with no list is [`ReviewFormat::Markdown`] with no findings.
pub fn parse_review(text: &str) -> ParsedReview {
    let words = text.split_whitespace().count();
    if text.trim().is_empty() {
        return ParsedReview {
            findings: Vec::new(),
            format: ReviewFormat::Empty,
            words,
            warnings: Vec::new(),
            swe_prbench: None,
        };
    }
    let mut warnings = Vec::new();
    if starts_like_json(text) {
        match decode_json_review(text) {
            Ok(review) => return json_parsed(review, words, warnings),
            Err(err) => warnings.push(format!("the review starts like JSON but {err}; parsed it as markdown")),
        }
    }
    let markdown = parse_markdown(text);
    let stray_fence = markdown.stray_fences.iter().find_map(|fence| {
        let value = serde_json::from_str::<Value>(fence.trim()).ok()?;
        from_container(&value, false)
    });
    let stray_json = stray_fence.or_else(|| {
        let values = embedded_values(&markdown.stray_text);
        values.iter().rev().find_map(|value| from_container(value, false))
    });
    if let Some(review) = stray_json {
        return json_parsed(review, words, warnings);
    }
    if markdown.findings.is_empty() {
        if let Ok(review) = decode_json_review(text) {
            return json_parsed(review, words, warnings);
        }
    }
    warnings.extend(markdown.warnings);
    ParsedReview { findings: markdown.findings, format: ReviewFormat::Markdown, words, warnings, swe_prbench: None }
}

/// The review of an agent given the SWE-PRBench prompt: the one reading of its answer, used both
/// by the single-shot harness to decide whether to ask again and for `findings.json`. Comments
/// per [`parse_json_findings`]: some → [`ReviewFormat::Json`]; none → [`ReviewFormat::Empty`]; a
/// parse error → [`ReviewFormat::Unparseable`] with the error as the first warning.
pub fn parse_swe_prbench_answer(text: &str) -> ParsedReview {
    let words = text.split_whitespace().count();
    let mut review = match parse_json_findings(text) {
        Ok(findings) if findings.is_empty() => {
            ParsedReview { findings, format: ReviewFormat::Empty, words, warnings: Vec::new(), swe_prbench: None }
        }
        Ok(findings) => {
            ParsedReview { findings, format: ReviewFormat::Json, words, warnings: Vec::new(), swe_prbench: None }
        }
        Err(error) => ParsedReview {
            findings: Vec::new(),
            format: ReviewFormat::Unparseable,
            words,
            warnings: vec![error.to_string()],
            swe_prbench: None,
        },
    };
    let parse_error = (review.format == ReviewFormat::Unparseable).then(|| review.warnings[0].clone());
    review.swe_prbench = Some(SwePrBenchAnswer { raw_response: text.to_string(), parse_error });
    review
}

/// Decodes an agent's JSON answer for the SWE-PRBench protocol exactly as the benchmark's
/// reference harness does ([`crate::swe_prbench::harness::agent`]: `json.loads`, fences removed,
/// the last list among the values at each `[`/`{`, loose `body` objects; at most 30 comments;
/// severities `P0|P1|P2` only; `line` by Python `int()`). Ranks are 1.. in the kept order.
///
/// `Ok(vec![])` is a valid empty review (`[]`, blank text, prose without structure);
/// [`JsonFindingsError::NotJson`] when nothing decodes, [`JsonFindingsError::NoComments`] when the
/// answer yields no comment yet looks structured (`"body":` or a ```` ```json ```` fence): the
/// harness's two parse errors, which make it ask once more with its retry prompt.
///
/// CRBugBench's [`parse_review`] keeps its own, more forgiving reading of JSON-looking reviews.
pub fn parse_json_findings(text: &str) -> Result<Vec<Finding>, JsonFindingsError> {
    use crate::swe_prbench::harness::agent::{agent_comments, looks_structured, parse_agent_json};
    let parsed = parse_agent_json(text).map_err(|_| JsonFindingsError::NotJson)?;
    let comments = agent_comments(&parsed, "", "", &Default::default());
    if comments.is_empty() && looks_structured(text) {
        return Err(JsonFindingsError::NoComments);
    }
    Ok(comments
        .into_iter()
        .enumerate()
        .map(|(index, comment)| Finding {
            rank: rank_of(index),
            body: comment.body,
            file: comment.file_reference,
            line: comment.line_reference,
            severity: comment.severity_claim.as_deref().and_then(normalise_severity),
        })
        .collect())
}

fn json_parsed(review: JsonReview, words: usize, mut warnings: Vec<String>) -> ParsedReview {
    if review.skipped > 0 {
        warnings.push(format!("skipped {} JSON item(s) without a non-empty string `body`", review.skipped));
    }
    if review.dropped > 0 {
        warnings.push(format!(
            "kept the first {MAX_JSON_COMMENTS} of {} JSON comments",
            MAX_JSON_COMMENTS + review.dropped
        ));
    }
    ParsedReview { findings: review.findings, format: ReviewFormat::Json, words, warnings, swe_prbench: None }
}

/// Whether the review starts like a JSON answer: `{`, or `[` followed by `{` or `]` (so a
/// markdown line opening with `[P1]` or a `[1]` citation does not count), either at the very
/// start or as the content of a leading code fence.
fn starts_like_json(text: &str) -> bool {
    let mut start = text.trim_start();
    if start.starts_with("```") {
        start = start.split_once('\n').map_or("", |(_, rest)| rest).trim_start();
    }
    match start.strip_prefix('[') {
        Some(rest) => rest.trim_start().starts_with(['{', ']']),
        None => start.starts_with('{'),
    }
}

// ---------------------------------------------------------------------------------------------
// JSON (SWE-PRBench)
// ---------------------------------------------------------------------------------------------

/// The comments decoded from a JSON answer.
#[derive(Debug, Default)]
struct JsonReview {
    findings: Vec<Finding>,
    /// Items skipped for lacking a non-empty string `body`.
    skipped: usize,
    /// Comments beyond [`MAX_JSON_COMMENTS`], dropped.
    dropped: usize,
}

/// SWE-PRBench's parse order. Each step is tried only when the previous ones found nothing:
///
/// 1. `serde_json` parse of the whole trimmed text.
/// 2. The content of each markdown code fence (```` ```json … ``` ````, any or no language tag,
///    anywhere in the text), in order, parsed whole.
/// 3. The last JSON array embedded in the text (or object with a `comments` array) that yields
///    comments.
/// 4. Every single JSON object in the text with a non-empty string `body`, in order (a truncated
///    array still yields its complete objects).
///
/// In steps 1–3 a decoded value counts when it is a *comment list*: an array of items or an
/// object with a `comments` array. A comment list counts when it yields at least one comment;
/// an empty one (`[]`) counts in steps 1–2 only, where it is the agent's whole answer; an empty
/// array inside prose (`returns []`, a `- [ ]` checkbox) is too ambiguous to mean "no findings".
/// A non-empty list without a single usable item (`["a", "b"]`) does not stop the search.
///
/// With nothing found: [`ReviewJsonError::NoComments`] when the text contains `[` or `{`,
/// [`ReviewJsonError::NotJson`] otherwise.
fn decode_json_review(text: &str) -> Result<JsonReview, ReviewJsonError> {
    // Step 1: the whole text is JSON.
    if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
        if let Some(review) = from_container(&value, true) {
            return Ok(review);
        }
    }
    // Step 2: a fenced block's content is JSON.
    for content in fenced_contents(text) {
        if let Ok(value) = serde_json::from_str::<Value>(content.trim()) {
            if let Some(review) = from_container(&value, true) {
                return Ok(review);
            }
        }
    }
    // Step 3: the last embedded comment list wins (an agent that drafts and then corrects
    // itself means the correction).
    if let Some(review) = embedded_values(text).iter().rev().find_map(|value| from_container(value, false)) {
        return Ok(review);
    }
    // Step 4: loose comment objects.
    let review = collect_comments(&body_objects(text));
    if !review.findings.is_empty() {
        return Ok(review);
    }
    if text.contains(['[', '{']) {
        Err(ReviewJsonError::NoComments)
    } else {
        Err(ReviewJsonError::NotJson)
    }
}

/// The items of a comment list: an array, or an object's `comments` array.
fn comment_items(value: &Value) -> Option<&[Value]> {
    match value {
        Value::Array(items) => Some(items),
        Value::Object(map) => match map.get("comments") {
            Some(Value::Array(items)) => Some(items),
            _ => None,
        },
        _ => None,
    }
}

/// The comments of `value` when it is a comment list that counts (see `decode_json_review`).
fn from_container(value: &Value, allow_empty: bool) -> Option<JsonReview> {
    let items = comment_items(value)?;
    if items.is_empty() {
        return allow_empty.then(JsonReview::default);
    }
    let review = collect_comments(items);
    (!review.findings.is_empty()).then_some(review)
}

/// Turns items into findings: items that are not objects with a non-empty string `body` are
/// skipped; of the rest, the first [`MAX_JSON_COMMENTS`] are kept (the cap applies after
/// skipping, so junk items do not crowd out real comments), ranked 1.. in order.
fn collect_comments(items: &[Value]) -> JsonReview {
    let mut review = JsonReview::default();
    for item in items {
        match json_comment(item) {
            None => review.skipped += 1,
            Some(mut finding) if review.findings.len() < MAX_JSON_COMMENTS => {
                finding.rank = rank_of(review.findings.len());
                review.findings.push(finding);
            }
            Some(_) => review.dropped += 1,
        }
    }
    review
}

/// One comment object: `body` (a string, non-empty after trimming; trimmed), `file` (or
/// `path`), `line` (a number or numeric string; or `start_line`) and `severity` (normalised;
/// `None` when unknown). Blank or mistyped optional fields are `None`, never a reason to skip.
fn json_comment(item: &Value) -> Option<Finding> {
    let object = item.as_object()?;
    let body = object.get("body")?.as_str()?.trim();
    if body.is_empty() {
        return None;
    }
    let file = ["file", "path"]
        .iter()
        .find_map(|key| object.get(*key)?.as_str().map(str::trim).filter(|file| !file.is_empty()))
        .map(str::to_string);
    let line = ["line", "start_line"].iter().find_map(|key| json_line(object.get(*key)?));
    let severity = object.get("severity").and_then(Value::as_str).and_then(normalise_severity);
    Some(Finding { rank: 0, body: body.to_string(), file, line, severity })
}

/// A line number: an integer, a whole float (`42.0`) or a numeric string (`"42"`).
fn json_line(value: &Value) -> Option<i64> {
    match value {
        Value::Number(number) => number.as_i64().or_else(|| {
            let float = number.as_f64()?;
            (float.fract() == 0.0 && float.abs() < 1e15).then_some(float as i64)
        }),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// The contents of the text's ```` ``` ```` fences, in order: after the opening backticks an
/// info word (`json`) is skipped; the content runs to the next ```` ``` ```` (or the end of an
/// unclosed, e.g. truncated, fence). One-line fences (```` ```json [..]``` ````) work too.
fn fenced_contents(text: &str) -> Vec<&str> {
    let mut contents = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = rest[open..].trim_start_matches('`');
        let info = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '.')))
            .unwrap_or(after.len());
        let content = &after[info..];
        match content.find("```") {
            Some(close) => {
                contents.push(&content[..close]);
                rest = content[close..].trim_start_matches('`');
            }
            None => {
                contents.push(content);
                break;
            }
        }
    }
    contents
}

/// The JSON values embedded in prose, in order: at each `[` or `{` a value is decoded; a
/// decoded value is skipped over whole, so arrays and objects nested inside it (a comment's
/// `tags`, a `[0]` inside a `body` string) are never mistaken for the comment list. This is the
/// "last decodable array" scan of step 3 made immune to nested arrays.
fn embedded_values(text: &str) -> Vec<Value> {
    let mut values = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find(['[', '{']) {
        let start = at + offset;
        match decode_prefix(&text[start..]) {
            Some((value, len)) => {
                values.push(value);
                at = start + len;
            }
            None => at = start + 1,
        }
    }
    values
}

/// Step 4's objects: at each `{` an object is decoded; those with a non-empty string `body` are
/// kept and skipped over whole (their nested objects are theirs), others are looked into.
fn body_objects(text: &str) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find('{') {
        let start = at + offset;
        match decode_prefix(&text[start..]) {
            Some((value, len)) if json_comment(&value).is_some() => {
                objects.push(value);
                at = start + len;
            }
            _ => at = start + 1,
        }
    }
    objects
}

/// Decodes one JSON value at the start of `text`, ignoring whatever follows it; returns the
/// value and its length in bytes.
fn decode_prefix(text: &str) -> Option<(Value, usize)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value)) => Some((value, stream.byte_offset())),
        _ => None,
    }
}

fn rank_of(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

// ---------------------------------------------------------------------------------------------
// Markdown: lines
// ---------------------------------------------------------------------------------------------

/// Marker kinds of list items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    /// `1.`, `1)`, `(1)`, or a bold enumerator `**1. Title**`.
    Numbered,
    /// `-`, `*`, `+`.
    Bullet,
}

#[derive(Debug)]
enum LineKind {
    Blank,
    /// A fence delimiter or a line inside a fence: never an item, heading or label.
    Code,
    Heading {
        level: usize,
        text: String,
    },
    Item {
        kind: ListKind,
        /// The column where the item's text starts; continuation lines are dedented by it.
        content_col: usize,
        /// The item's first line without its marker.
        content: String,
        /// A `**1. Title**` pseudo-item, whose continuation is typically unindented.
        bold: bool,
    },
    /// A thematic break (`---`, `***`, `___`).
    Break,
    Text,
}

struct MdLine<'a> {
    raw: &'a str,
    /// Leading whitespace in columns (a tab advances to the next multiple of 4).
    indent: usize,
    kind: LineKind,
}

/// A fenced code block: the opening line and the closing line (`None` when never closed).
struct FenceBlock {
    open: usize,
    close: Option<usize>,
}

/// Classifies every line.
///
/// * Fences open with three or more backticks or tildes (at any indent, so fences inside list
///   items count) and close with at least as many of the same character; everything in between,
///   a `1.` or `# ` included, is code. An unclosed fence runs to the end of the text.
/// * Headings are ATX (`#` to `######` then a space, at most 3 columns of indent; closing `#`s
///   dropped) or setext (a one-line paragraph underlined with `===` or `---`).
/// * `---`, `***`, `___` (spaces allowed) are thematic breaks, not empty bullets.
/// * List items are described at [`list_marker`].
fn scan_lines(text: &str) -> (Vec<MdLine<'_>>, Vec<FenceBlock>) {
    let mut lines: Vec<MdLine<'_>> = Vec::new();
    let mut fences = Vec::new();
    let mut open_fence: Option<(char, usize, usize)> = None;
    for (index, raw) in text.lines().enumerate() {
        let (indent, rest) = split_indent(raw);
        let rest = rest.trim_end();
        let kind = if let Some((ch, len, open)) = open_fence {
            if is_fence_close(rest, ch, len) {
                fences.push(FenceBlock { open, close: Some(index) });
                open_fence = None;
            }
            LineKind::Code
        } else if let Some((ch, len)) = fence_open(rest) {
            open_fence = Some((ch, len, index));
            LineKind::Code
        } else if rest.is_empty() {
            LineKind::Blank
        } else if let Some((level, text)) = atx_heading(rest).filter(|_| indent <= 3) {
            LineKind::Heading { level, text }
        } else if let Some(level) = setext_underline(rest).filter(|_| indent <= 3 && setext_text_before(&lines)) {
            if let Some(previous) = lines.last_mut() {
                previous.kind = LineKind::Heading { level, text: previous.raw.trim().to_string() };
            }
            LineKind::Blank
        } else if indent <= 3 && is_thematic_break(rest) {
            LineKind::Break
        } else if let Some((kind, marker_cols, content, bold)) = list_marker(rest) {
            let spaces = content.len() - content.trim_start_matches([' ', '\t']).len();
            let gap = if spaces == 0 || spaces > 4 { 1 } else { spaces };
            LineKind::Item { kind, content_col: indent + marker_cols + gap, content: content.trim().to_string(), bold }
        } else {
            LineKind::Text
        };
        lines.push(MdLine { raw, indent, kind });
    }
    if let Some((_, _, open)) = open_fence {
        fences.push(FenceBlock { open, close: None });
    }
    (lines, fences)
}

/// Leading whitespace in columns, and the rest of the line.
fn split_indent(raw: &str) -> (usize, &str) {
    let mut cols = 0;
    for (index, c) in raw.char_indices() {
        match c {
            ' ' => cols += 1,
            '\t' => cols = (cols / 4 + 1) * 4,
            _ => return (cols, &raw[index..]),
        }
    }
    (cols, "")
}

/// `raw` without up to `cols` columns of leading whitespace.
fn dedent(raw: &str, cols: usize) -> &str {
    let mut col = 0;
    for (index, c) in raw.char_indices() {
        if col >= cols {
            return &raw[index..];
        }
        match c {
            ' ' => col += 1,
            '\t' => col = (col / 4 + 1) * 4,
            _ => return &raw[index..],
        }
    }
    ""
}

fn fence_open(rest: &str) -> Option<(char, usize)> {
    let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = rest.chars().take_while(|&c| c == ch).count();
    // A backtick fence's info string cannot contain backticks (that is inline code).
    (len >= 3 && !(ch == '`' && rest[len..].contains('`'))).then_some((ch, len))
}

fn is_fence_close(rest: &str, ch: char, len: usize) -> bool {
    let run = rest.chars().take_while(|&c| c == ch).count();
    run >= len && rest[run * ch.len_utf8()..].trim().is_empty()
}

fn atx_heading(rest: &str) -> Option<(usize, String)> {
    let level = rest.chars().take_while(|&c| c == '#').count();
    let after = &rest[level..];
    if !(1..=6).contains(&level) || !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let text = after.trim();
    let closed = text.trim_end_matches('#');
    let text = if closed.is_empty() || closed.ends_with([' ', '\t']) { closed.trim_end() } else { text };
    Some((level, text.to_string()))
}

fn setext_underline(rest: &str) -> Option<usize> {
    if rest.len() < 3 {
        return None;
    }
    if rest.chars().all(|c| c == '=') {
        Some(1)
    } else if rest.chars().all(|c| c == '-') {
        Some(2)
    } else {
        None
    }
}

/// Whether the last line is a one-line paragraph a setext underline can turn into a heading.
fn setext_text_before(lines: &[MdLine<'_>]) -> bool {
    let Some((last, before)) = lines.split_last() else {
        return false;
    };
    matches!(last.kind, LineKind::Text)
        && last.indent <= 3
        && before
            .last()
            .is_none_or(|line| matches!(line.kind, LineKind::Blank | LineKind::Heading { .. } | LineKind::Break))
}

fn is_thematic_break(rest: &str) -> bool {
    let marks: Vec<char> = rest.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && matches!(marks[0], '-' | '*' | '_') && marks.iter().all(|&c| c == marks[0])
}

/// A list item's marker: a bullet (`-`, `*`, `+`) or an enumerator (`1.`, `1)`, `(1)`, at most 9
/// digits) followed by whitespace or the end of the line, so `**bold**`, `-1`, `1.5x` and `+1`
/// are text. A line opening with a bold enumerator (`**1. Off-by-one**`) is a numbered item too:
/// models often write their ranked list that way. Returns the kind, the marker's width in
/// columns, the text after the marker and whether it was a bold enumerator.
fn list_marker(rest: &str) -> Option<(ListKind, usize, String, bool)> {
    let bytes = rest.as_bytes();
    let space_or_end = |at: usize| bytes.get(at).is_none_or(|b| matches!(b, b' ' | b'\t'));
    if matches!(bytes.first(), Some(b'-' | b'*' | b'+')) && space_or_end(1) {
        return Some((ListKind::Bullet, 1, rest[1..].to_string(), false));
    }
    let digits_from = |at: usize| bytes[at.min(bytes.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    let digits = digits_from(0);
    if (1..=9).contains(&digits) && matches!(bytes.get(digits), Some(b'.' | b')')) && space_or_end(digits + 1) {
        return Some((ListKind::Numbered, digits + 1, rest[digits + 1..].to_string(), false));
    }
    if bytes.first() == Some(&b'(') {
        let digits = digits_from(1);
        if (1..=9).contains(&digits) && bytes.get(1 + digits) == Some(&b')') && space_or_end(digits + 2) {
            return Some((ListKind::Numbered, digits + 2, rest[digits + 2..].to_string(), false));
        }
    }
    if rest.starts_with("**") {
        let digits = digits_from(2);
        if (1..=9).contains(&digits)
            && matches!(bytes.get(2 + digits), Some(b'.' | b')'))
            && bytes.get(3 + digits).is_some_and(|b| *b == b' ')
        {
            let content = format!("**{}", rest[3 + digits..].trim_start());
            return Some((ListKind::Numbered, 0, content, true));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Markdown: sections
// ---------------------------------------------------------------------------------------------

/// The level given to label lines (`**Summary:**`): deeper than any heading, so a label's
/// section ends at the next label or heading.
const LABEL_LEVEL: usize = 7;

/// A heading (or label) and the lines up to the next one.
struct Section {
    /// 0 for the text before the first heading, 1–6 for headings, [`LABEL_LEVEL`] for labels.
    level: usize,
    /// The heading's (or label's) line.
    head: Option<usize>,
    title: String,
    /// The lines after the heading up to the next heading or label.
    body: Range<usize>,
    label: bool,
}

/// Splits the text at headings and at section labels.
///
/// A *section label* is a line that is not a heading but names a section the way a heading
/// would: a whole line in bold (`**Summary**`, `**Nits:**`) or a short plain line ending with a
/// colon (`Positive notes:`), unindented, after a blank line (or a heading, a break, or the
/// start), whose text is a non-finding title (see [`Title::non_finding`]) or a severity or
/// findings group (`Critical issues`, `Nits`, `Suggestions`). Labels matter when reviews put a
/// summary or a severity group under a bold line instead of a heading; other bold lines
/// (`**Fix:**`) are ordinary text.
fn split_sections(lines: &[MdLine<'_>]) -> Vec<Section> {
    let mut sections = vec![Section { level: 0, head: None, title: String::new(), body: 0..0, label: false }];
    for (index, line) in lines.iter().enumerate() {
        let heading = match &line.kind {
            LineKind::Heading { level, text } => Some((*level, text.clone(), false)),
            LineKind::Text if line.indent == 0 && after_paragraph_break(lines, index) => {
                section_label(line.raw).map(|title| (LABEL_LEVEL, title, true))
            }
            _ => None,
        };
        if let Some((level, title, label)) = heading {
            if let Some(previous) = sections.last_mut() {
                previous.body.end = index;
            }
            sections.push(Section { level, head: Some(index), title, body: index + 1..index + 1, label });
        }
    }
    if let Some(last) = sections.last_mut() {
        last.body.end = lines.len();
    }
    sections
}

fn after_paragraph_break(lines: &[MdLine<'_>], index: usize) -> bool {
    index == 0 || matches!(lines[index - 1].kind, LineKind::Blank | LineKind::Heading { .. } | LineKind::Break)
}

/// The title of a section label line, if the line is one (see [`split_sections`]).
fn section_label(raw: &str) -> Option<String> {
    let line = raw.trim();
    let unbolded = line.strip_suffix(':').unwrap_or(line);
    let inner = ["**", "__"]
        .iter()
        .find_map(|mark| unbolded.strip_prefix(mark)?.strip_suffix(mark))
        .filter(|inner| !inner.contains("**") && !inner.is_empty());
    let title = match inner {
        Some(inner) => inner.trim().trim_end_matches(':').trim(),
        None if line.ends_with(':') && unbolded.split_whitespace().count() <= 4 => unbolded.trim(),
        None => return None,
    };
    let analysed = Title::analyse(title);
    let group = !analysed.words.is_empty()
        && analysed.words.iter().all(|w| LABEL_GROUP_WORDS.contains(&w.as_str()) || CONNECTIVES.contains(&w.as_str()))
        && analysed.words.iter().any(|w| LABEL_GROUP_WORDS.contains(&w.as_str()));
    (analysed.non_finding || group).then(|| title.to_string())
}

/// What a heading says about its section.
#[derive(Debug)]
struct Title {
    /// The heading text without its enumerator (`1.`, `(2)`, `#3`); decoration kept.
    display: String,
    /// Lowercase words of `display`.
    words: Vec<String>,
    /// Starts with an enumerator: `1.`, `1)`, `1:`, `(1)`, `#1`, `1.2`, `1 -`.
    numbered: bool,
    /// Starts with `Finding 2`, `Issue #3`, `Bug 1`, `Problem 4`, `Concern 5` or `Comment 6`.
    finding_label: bool,
    /// A severity marker at its start (see [`leading_severity`]).
    marker: Option<Severity>,
    /// Every word is a generic category word (`Security`, `Critical issues`, `Nits`,
    /// `Error handling`, `Other suggestions`): the heading names a group, not a finding.
    category: bool,
    /// A category heading naming findings or a severity (`Issues`, `Critical`, `Suggestions`).
    group: bool,
    /// Names a topic (`Naming`, `Error handling`), not just a severity or a group.
    topic: bool,
    /// The severity a category heading gives its findings (`Critical issues` → P0, `Nits` → P2).
    group_severity: Option<Severity>,
    /// Summary/Overview/Conclusion/Strengths/What's good/Positive… (see [`NON_FINDING_TITLES`]),
    /// unless it mentions findings (`Summary of issues`).
    non_finding: bool,
    /// Mentions issues, findings, bugs, problems, concerns or defects.
    mentions_findings: bool,
}

impl Title {
    /// Looks like a per-finding heading by itself: `Finding 2`, or numbered or marked with a
    /// specific text.
    fn finding_like(&self) -> bool {
        self.finding_label || ((self.numbered || self.marker.is_some()) && !self.category)
    }

    fn analyse(text: &str) -> Title {
        let text = text.trim();
        let rest = skip_decoration(text);
        let prefix = &text[..text.len() - rest.len()];
        let (numbered, rest) = match strip_enumerator(rest) {
            Some(after) => (true, after),
            None => (false, rest),
        };
        let display = format!("{prefix}{rest}").trim().to_string();
        let words = lowercase_words(&display);
        let category = words.iter().all(|w| is_category_word(w));
        let mentions_findings = words.iter().any(|w| FINDING_WORDS.contains(&w.as_str()));
        let group_severity = if category { words.iter().find_map(|w| word_severity(w)) } else { None };
        let topic = words.iter().any(|w| TOPIC_WORDS.contains(&w.as_str()));
        let group = category && words.iter().any(|w| GROUP_WORDS.contains(&w.as_str()) || word_severity(w).is_some());
        let non_finding = !mentions_findings
            && NON_FINDING_TITLES
                .iter()
                .any(|phrase| words.len() >= phrase.len() && words.iter().zip(phrase.iter()).all(|(w, p)| w == p));
        Title {
            marker: leading_severity(&display),
            finding_label: has_finding_label(rest),
            display,
            words,
            numbered,
            category,
            group,
            topic,
            group_severity,
            non_finding,
            mentions_findings,
        }
    }
}

/// Strips a heading's enumerator: `1.`, `1)`, `1:`, `1.2`, `(1)`, `#1`, or `1 -`/`1 —`; a bare
/// number followed by a word (`3 issues found`) is text, not an enumerator.
fn strip_enumerator(text: &str) -> Option<&str> {
    let (parenthesised, hashed, body) = match (text.strip_prefix('('), text.strip_prefix('#')) {
        (Some(body), _) => (true, false, body),
        (_, Some(body)) => (false, true, body),
        _ => (false, false, text),
    };
    let bytes = body.as_bytes();
    let mut at = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=3).contains(&at) {
        return None;
    }
    let first_group = at;
    while bytes.get(at) == Some(&b'.') && bytes.get(at + 1).is_some_and(u8::is_ascii_digit) {
        at += 1 + bytes[at + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
    }
    let punctuated = if parenthesised {
        if bytes.get(at) != Some(&b')') {
            return None;
        }
        at += 1;
        true
    } else if matches!(bytes.get(at), Some(b'.' | b')' | b':')) {
        at += 1;
        true
    } else {
        at > first_group // "1.2 Foo"
    };
    let rest = &body[at..];
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    let rest = rest.trim_start();
    let dashed = rest.strip_prefix(['-', '–', '—', ':']).map(str::trim_start);
    match dashed {
        Some(after) => Some(after),
        None if punctuated || hashed || rest.is_empty() => Some(rest),
        None => None,
    }
}

fn has_finding_label(text: &str) -> bool {
    let len = text.find(|c: char| !c.is_alphanumeric()).unwrap_or(text.len());
    let word = text[..len].to_lowercase();
    if !["finding", "issue", "bug", "problem", "concern", "comment"].contains(&word.as_str()) {
        return false;
    }
    let after = text[len..].trim_start();
    let after = after.strip_prefix('#').unwrap_or(after);
    after.starts_with(|c: char| c.is_ascii_digit())
}

fn lowercase_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// A word's severity, plurals included (`nits` → P2, `blockers` → P0).
fn word_severity(word: &str) -> Option<Severity> {
    normalise_severity(word).or_else(|| word.strip_suffix('s').and_then(normalise_severity))
}

fn is_category_word(word: &str) -> bool {
    GROUP_NAME_WORDS.contains(&word)
        || TOPIC_WORDS.contains(&word)
        || CONNECTIVES.contains(&word)
        || word_severity(word).is_some()
}

/// Titles of sections that are not findings, matched as leading words (after emoji, emphasis
/// and enumerators are dropped): "Summary", "Overview", "Conclusion", "Strengths",
/// "What's good", "Positive notes", "Praise", "Verdict", "TL;DR", "Final thoughts", "Overall"…
#[rustfmt::skip]
const NON_FINDING_TITLES: &[&[&str]] = &[
    &["summary"], &["overview"], &["conclusion"], &["conclusions"], &["strengths"], &["strength"],
    &["what", "s", "good"], &["whats", "good"], &["what", "is", "good"],
    &["what", "looks", "good"], &["what", "s", "working"], &["what", "works"],
    &["what", "went", "well"], &["what", "s", "done", "well"], &["done", "well"],
    &["positive"], &["positives"], &["praise"], &["highlights"], &["tl", "dr"], &["tldr"],
    &["verdict"], &["final", "thoughts"], &["overall"], &["looks", "good"], &["lgtm"],
];

/// Words that name a group of findings (`Issues`, `Other suggestions`, `Must fix`); with
/// severity words, [`TOPIC_WORDS`] and connectives they make a heading a category heading.
#[rustfmt::skip]
const GROUP_NAME_WORDS: &[&str] = &[
    "issue", "issues", "finding", "findings", "bug", "bugs", "problem", "problems", "concern",
    "concerns", "defect", "defects", "comment", "comments", "feedback", "recommendation",
    "recommendations", "improvement", "improvements", "observation", "observations", "note",
    "notes", "remark", "remarks", "question", "questions", "risk", "risks", "fix", "fixes",
    "change", "changes", "requested", "required", "review", "code", "things", "items", "details",
    "detailed", "consider", "considerations", "priority", "severity", "urgent", "blocking",
    "non", "must", "should", "could", "nice", "have", "optional", "potential", "possible",
    "other", "additional", "general", "misc", "miscellaneous", "key", "main", "p3",
];

/// Words that name what a group of findings is about (`Security`, `Error handling`).
#[rustfmt::skip]
const TOPIC_WORDS: &[&str] = &[
    "security", "performance", "correctness", "logic", "functionality", "functional", "style",
    "styling", "formatting", "naming", "readability", "maintainability", "quality", "testing",
    "tests", "test", "coverage", "documentation", "docs", "design", "architecture", "api",
    "error", "errors", "handling", "edge", "cases", "case", "concurrency", "thread", "safety",
    "reliability", "robustness", "compatibility", "usability", "accessibility", "validation",
    "input", "types", "typing", "type", "memory", "resource", "resources", "leaks",
    "dependencies", "configuration", "config", "build", "ci", "best", "practices",
    "refactoring", "cleanup", "complexity", "efficiency", "scalability", "data", "integrity",
    "context", "background", "description", "scope", "approach", "files", "reviewed",
];

/// Words joining category words (`Bugs and risks`, `Issues to fix`).
const CONNECTIVES: &[&str] = &["and", "or", "of", "the", "a", "for", "with", "in", "to", "found"];

/// Category words that make a heading a group of findings (a heading under one of them with
/// no list of its own is a finding).
#[rustfmt::skip]
const GROUP_WORDS: &[&str] = &[
    "issue", "issues", "finding", "findings", "bug", "bugs", "problem", "problems", "concern",
    "concerns", "defect", "defects", "comment", "comments", "feedback", "recommendation",
    "recommendations", "improvement", "improvements", "suggestions", "nits", "nitpicks",
];

/// Words that mention findings; a title with one is never a non-finding section.
#[rustfmt::skip]
const FINDING_WORDS: &[&str] = &[
    "issue", "issues", "finding", "findings", "bug", "bugs", "problem", "problems", "concern",
    "concerns", "defect", "defects",
];

/// Words a section label may consist of to be a findings group (plural group words and
/// severities; not `suggestion` or `important`, which often label a paragraph inside a finding).
#[rustfmt::skip]
const LABEL_GROUP_WORDS: &[&str] = &[
    "issues", "findings", "bugs", "problems", "concerns", "suggestions", "recommendations",
    "improvements", "nits", "nitpicks", "critical", "blocker", "blockers", "severe", "high",
    "major", "medium", "moderate", "minor", "low", "nit", "p0", "p1", "p2", "priority", "severity",
];

// ---------------------------------------------------------------------------------------------
// Markdown: findings
// ---------------------------------------------------------------------------------------------

/// What the markdown parser found.
struct MarkdownReview {
    findings: Vec<Finding>,
    warnings: Vec<String>,
    /// Contents of fenced blocks outside every finding.
    stray_fences: Vec<String>,
    /// The lines outside every finding and every fence.
    stray_text: String,
}

/// What a heading's section passes on to the sections nested under it.
#[derive(Debug, Clone, Copy)]
struct Context {
    level: usize,
    excluded: bool,
    severity: Option<Severity>,
    group: bool,
}

/// Parses a markdown review. Sections are walked in document order:
///
/// * The text before the first heading: its top-level list items are findings.
/// * A non-finding section (Summary, Overview, Conclusion, Strengths, What's good, Positive…,
///   see [`NON_FINDING_TITLES`]) and every section nested under it yields nothing: its list
///   items are not findings (a warning counts them). A nested heading that mentions findings or
///   names a group (`### Issues found` or `## Critical` under `# Summary`) is a finding section
///   again.
/// * A per-finding heading (see [`is_finding_heading`]) is one finding: the heading text plus
///   everything up to the next heading of the same or a higher level; its list items, code and
///   sub-headings are the finding's details.
/// * Any other section (a plain or a group heading such as `## Issues` or `### Critical`): its
///   top-level list items are findings (see [`list_items`]).
///
/// So with several lists (one under "Issues", one under "Summary") the items of the finding
/// sections are used, in document order.
///
/// Fallback: when nothing was found and the review has at least two leaf headings (level 2 or
/// deeper, no sub-headings, no list of their own) that are neither non-finding nor category
/// headings, each is a finding: a review of unnumbered per-finding headings without an "Issues"
/// parent.
fn parse_markdown(text: &str) -> MarkdownReview {
    let (lines, fences) = scan_lines(text);
    let sections = split_sections(&lines);
    let mut findings: Vec<Finding> = Vec::new();
    let mut covered = vec![false; lines.len()];
    let mut warnings = Vec::new();
    let mut ignored_items = 0;
    let mut ignored_titles: Vec<String> = Vec::new();
    let mut fallback: Vec<(usize, Title)> = Vec::new();
    let mut stack: Vec<Context> = Vec::new();
    let mut index = 0;
    while index < sections.len() {
        let section = &sections[index];
        while stack.last().is_some_and(|context| context.level >= section.level) {
            stack.pop();
        }
        let parent = stack.last().copied();
        let items = list_items(&lines, section.body.clone());
        let Some(head) = section.head else {
            push_items(&lines, &items, None, &mut findings, &mut covered);
            index += 1;
            continue;
        };
        let title = Title::analyse(&section.title);
        let end = section_end(&sections, index);
        let span_end = sections.get(end).and_then(|next| next.head).unwrap_or(lines.len());
        let leaf = sections[index + 1..end].iter().all(|nested| nested.label);
        let finding_children =
            sections[index + 1..end].iter().any(|nested| !nested.label && Title::analyse(&nested.title).finding_like());
        let excluded = if title.mentions_findings || title.group {
            false
        } else {
            title.non_finding || parent.is_some_and(|context| context.excluded)
        };
        let severity = title.group_severity.or(parent.and_then(|context| context.severity));
        if !excluded && !section.label && is_finding_heading(&title, parent, !items.is_empty(), leaf, finding_children)
        {
            push_heading(
                &lines,
                &title,
                head + 1..span_end,
                parent.and_then(|context| context.severity),
                &mut findings,
            );
            covered[head..span_end].fill(true);
            index = end;
            continue;
        }
        // A group's unprefixed sub-headings can be findings (see `is_finding_heading`).
        let group = title.group || parent.is_some_and(|context| context.group);
        if excluded {
            ignored_items += items.len();
            if !items.is_empty() {
                ignored_titles.push(section.title.clone());
            }
        } else {
            push_items(&lines, &items, severity, &mut findings, &mut covered);
            if !section.label && section.level >= 2 && leaf && items.is_empty() && !title.category {
                fallback.push((index, title));
            }
        }
        stack.push(Context { level: section.level, excluded, severity, group });
        index += 1;
    }
    if findings.is_empty() && fallback.len() >= 2 {
        for (index, title) in &fallback {
            let end = section_end(&sections, *index);
            let start = sections[*index].head.map_or(0, |head| head + 1);
            let span = start..sections.get(end).and_then(|next| next.head).unwrap_or(lines.len());
            covered[span.clone()].fill(true);
            push_heading(&lines, title, span, None, &mut findings);
        }
    }
    for (index, finding) in findings.iter_mut().enumerate() {
        finding.rank = rank_of(index);
    }
    if ignored_items > 0 {
        warnings.push(format!(
            "ignored {ignored_items} list item(s) under non-finding heading(s): {}",
            ignored_titles.join(", ")
        ));
    }
    let mut stray_fences = Vec::new();
    for fence in &fences {
        if fence.close.is_none() {
            warnings.push(format!(
                "the code fence opened on line {} is never closed; the rest of the review is code",
                fence.open + 1
            ));
        }
        if !covered[fence.open] {
            let end = fence.close.unwrap_or(lines.len());
            let content: Vec<&str> = lines[fence.open + 1..end].iter().map(|line| line.raw).collect();
            stray_fences.push(content.join("\n"));
        }
    }
    let stray: Vec<&str> = lines
        .iter()
        .zip(&covered)
        .filter(|(line, covered)| !**covered && !matches!(line.kind, LineKind::Code))
        .map(|(line, _)| line.raw)
        .collect();
    MarkdownReview { findings, warnings, stray_fences, stray_text: stray.join("\n") }
}

/// The index of the first section after `index` that is not nested in it (a heading of the
/// same or a higher level; labels are always nested).
fn section_end(sections: &[Section], index: usize) -> usize {
    let level = sections[index].level;
    sections[index + 1..]
        .iter()
        .position(|next| !next.label && next.level <= level)
        .map_or(sections.len(), |offset| index + 1 + offset)
}

/// Whether a heading is one finding (its section being that finding's text):
///
/// * `Finding 2: …`, `Issue #3 …` and the like, always;
/// * no other heading with finding-like sub-headings (numbered or marked, with a specific text:
///   `## 1. Cache layer` over `### 1.1 Stale entry`, `### 1.2 Race`): it is their group;
/// * a numbered heading (`### 1. Off-by-one in paginate`, `### 2) …`) or one starting with a
///   severity marker (`### [P1] Missing check`, `### 🔴 Critical: …`) whose text is specific;
///   list items under it are the finding's details, not separate findings;
/// * a numbered heading with a generic text (`## 3. Performance`), or a marked one naming a
///   topic (`### [P2] Naming`), only when it has neither a list nor sub-headings of its own:
///   with a list it is a category whose items are the findings; a marked heading naming only a
///   severity or a group (`### 🔴 Critical`, `### P1 issues`) is always a group;
/// * an unnumbered, specific heading (`### Off-by-one in paginate`) directly or indirectly under
///   a group heading (`## Issues`, `## Critical`, `## Suggestions`) with neither a list nor
///   sub-headings of its own.
fn is_finding_heading(
    title: &Title,
    parent: Option<Context>,
    has_items: bool,
    leaf: bool,
    finding_children: bool,
) -> bool {
    if title.finding_label {
        return true;
    }
    if finding_children {
        return false;
    }
    if title.numbered {
        return !title.category || (!has_items && leaf);
    }
    if title.marker.is_some() {
        return !title.category || (title.topic && !has_items && leaf);
    }
    !title.category && !has_items && leaf && parent.is_some_and(|context| context.group)
}

/// A top-level list item: its first line and the end of its lines (exclusive).
struct ItemSpan {
    first: usize,
    end: usize,
}

/// The top-level list items of a section body. Rules:
///
/// * Items at the smallest indent are the top level. An item is nested (part of the item above
///   it) when it is indented to that item's text column or further, as in CommonMark; a slightly
///   indented sibling (` 9.` above `10.`) is still top level.
/// * When the top level mixes numbered and bulleted items, the numbered ones are the findings
///   (an explicit ranking): bullets between them are details of the item above, and bullets
///   before the first numbered item are a preamble and are ignored.
/// * An item runs until the next top-level item: nested items, continuation paragraphs
///   (indented or not), fenced code (indented or not) and thematic breaks are part of it.
/// * The last item of a section also ends at a thematic break or at an unindented paragraph or
///   list after a blank line (closing prose such as "Overall this looks good."), unless the
///   author visibly writes unindented continuation paragraphs (an earlier item has one, or the
///   items are bold enumerators `**1. Title**`).
/// * Trailing blank lines and thematic breaks are not part of an item.
fn list_items(lines: &[MdLine<'_>], range: Range<usize>) -> Vec<ItemSpan> {
    let candidates: Vec<(usize, ListKind, usize, bool)> = range
        .clone()
        .filter_map(|index| match &lines[index].kind {
            LineKind::Item { kind, content_col, bold, .. } => Some((index, *kind, *content_col, *bold)),
            _ => None,
        })
        .collect();
    let Some(top) = candidates.iter().map(|&(index, ..)| lines[index].indent).min() else {
        return Vec::new();
    };
    let chosen = if candidates.iter().any(|&(index, kind, ..)| kind == ListKind::Numbered && lines[index].indent == top)
    {
        ListKind::Numbered
    } else {
        ListKind::Bullet
    };
    let mut starts: Vec<(usize, usize, bool)> = Vec::new();
    for &(index, kind, content_col, bold) in &candidates {
        let indent = lines[index].indent;
        if kind != chosen || indent > top + 3 {
            continue;
        }
        if starts.last().is_none_or(|&(_, col, _)| indent < col) {
            starts.push((index, content_col, bold));
        }
    }
    let mut spans = Vec::new();
    let mut loose = false;
    for (position, &(first, _, bold)) in starts.iter().enumerate() {
        let mut end = starts.get(position + 1).map_or(range.end, |next| next.0);
        let paragraph = (first + 1..end).find(|&index| closing_paragraph(lines, index, top));
        if position + 1 < starts.len() {
            loose |= paragraph.is_some();
        } else {
            let thematic_break = (first + 1..end).find(|&index| matches!(lines[index].kind, LineKind::Break));
            let paragraph = paragraph.filter(|_| !loose && !bold);
            end = thematic_break.into_iter().chain(paragraph).min().unwrap_or(end);
        }
        while end > first + 1 && matches!(lines[end - 1].kind, LineKind::Blank | LineKind::Break) {
            end -= 1;
        }
        spans.push(ItemSpan { first, end });
    }
    spans
}

/// Whether a line starts a paragraph or list that would end a last list item: unindented (at
/// most the list's own indent) and after a blank line.
fn closing_paragraph(lines: &[MdLine<'_>], index: usize, top: usize) -> bool {
    matches!(lines[index].kind, LineKind::Text | LineKind::Item { .. })
        && lines[index].indent <= top
        && matches!(lines[index - 1].kind, LineKind::Blank)
}

/// Appends the findings of list items, skipping placeholders (see [`is_placeholder`]).
fn push_items(
    lines: &[MdLine<'_>],
    items: &[ItemSpan],
    fallback_severity: Option<Severity>,
    findings: &mut Vec<Finding>,
    covered: &mut [bool],
) {
    for item in items {
        covered[item.first..item.end].fill(true);
        let LineKind::Item { content, content_col, .. } = &lines[item.first].kind else {
            continue;
        };
        let rest = &lines[item.first + 1..item.end];
        let mut body = vec![content.as_str()];
        let mut prose = vec![content.as_str()];
        let mut code = Vec::new();
        for line in rest {
            let text = dedent(line.raw, *content_col).trim_end();
            body.push(text);
            if matches!(line.kind, LineKind::Code) {
                code.push(text)
            } else {
                prose.push(text)
            }
        }
        let body = body.join("\n").trim().to_string();
        if body.is_empty() || is_placeholder(&body) {
            continue;
        }
        let severity = leading_severity(content).or_else(|| labelled_severity(rest)).or(fallback_severity);
        let (file, line) = locate(&prose.join("\n"), &code.join("\n"));
        findings.push(Finding { rank: 0, body, file, line, severity });
    }
}

/// Appends the finding of a per-finding heading: its text (without `#`s and enumerator) and the
/// lines of its section, sub-headings included, markdown kept. A generic heading (see
/// [`Title::category`]) whose section is empty or a placeholder (`None.`) yields nothing.
fn push_heading(
    lines: &[MdLine<'_>],
    title: &Title,
    span: Range<usize>,
    fallback_severity: Option<Severity>,
    findings: &mut Vec<Finding>,
) {
    let mut end = span.end;
    while end > span.start && matches!(lines[end - 1].kind, LineKind::Blank | LineKind::Break) {
        end -= 1;
    }
    let rest = &lines[span.start..end];
    let mut body = vec![title.display.as_str()];
    let mut prose = vec![title.display.as_str()];
    let mut code = Vec::new();
    for line in rest {
        let text = line.raw.trim_end();
        body.push(text);
        if matches!(line.kind, LineKind::Code) {
            code.push(text)
        } else {
            prose.push(text)
        }
    }
    // A generic heading over nothing (`### 2. Security` / `None.`) is an empty group.
    let details = body[1..].join("\n");
    if title.category && (details.trim().is_empty() || is_placeholder(&details)) {
        return;
    }
    let body = body.join("\n").trim().to_string();
    let severity = title.marker.or_else(|| labelled_severity(rest)).or(fallback_severity);
    let (file, line) = locate(&prose.join("\n"), &code.join("\n"));
    findings.push(Finding { rank: 0, body, file, line, severity });
}

/// Items that say there is nothing (`None`, `N/A`, `No issues found`), as templated reviews
/// write under empty severity groups, are not findings.
fn is_placeholder(body: &str) -> bool {
    let text = body.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    matches!(
        text.as_str(),
        "none"
            | "n/a"
            | "na"
            | "nothing"
            | "nothing found"
            | "nothing to report"
            | "none found"
            | "none identified"
            | "no issues"
            | "no issues found"
    )
}

// ---------------------------------------------------------------------------------------------
// Severity markers
// ---------------------------------------------------------------------------------------------

/// Emphasis characters skipped around markers.
const EMPHASIS: [char; 3] = ['*', '_', '`'];

/// Words that may follow a severity word inside a marker: `High severity:`, `[Critical bug]`.
const QUALIFIERS: &[&str] = &["severity", "priority", "risk", "impact", "issue", "bug", "problem", "concern"];

/// Leading whitespace, emphasis, quote and table characters, emoji and other non-ASCII symbols.
fn skip_decoration(text: &str) -> &str {
    text.trim_start_matches(|c: char| {
        c.is_whitespace() || matches!(c, '*' | '_' | '`' | '~' | '>' | '|') || (!c.is_ascii() && !c.is_alphanumeric())
    })
}

/// The severity marker at the start of an item or heading. Emphasis and emoji are skipped, and
/// up to four bracketed tags are looked through (`[Bug] [P1]`), as is one leading location
/// (`**src/a.py:42** (high): …`). Recognised markers:
///
/// * a bracketed tag: `[P1]`, `(high)`, `[High severity]`, `[Severity: major]`;
/// * a bare `P0`/`P1`/`P2`: `P1 Missing check`, `**P0**`;
/// * a severity word ended by punctuation: `Critical:`, `**Critical**:`, `🔴 Critical —`,
///   `High severity:`, `Critical issue:`; a severity word starting a sentence (`High memory
///   use in …`, `Minor typo in …`, `High-level design`) is not a marker;
/// * a label: `Severity: major`, `**Priority:** P1`.
fn leading_severity(text: &str) -> Option<Severity> {
    let mut rest = text;
    let mut skipped_location = false;
    for _ in 0..4 {
        rest = skip_decoration(rest);
        let close = match rest.chars().next()? {
            '[' => ']',
            '(' => ')',
            '{' => '}',
            _ => {
                if let Some(severity) = word_marker(rest) {
                    return Some(severity);
                }
                let token_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let token = rest[..token_len].trim_end_matches(|c: char| !c.is_alphanumeric());
                if skipped_location || !token.contains(['/', '.']) {
                    return None;
                }
                skipped_location = true;
                rest = &rest[token_len..];
                continue;
            }
        };
        let end = rest[1..].find(close)? + 1;
        if let Some(severity) = tag_severity(&rest[1..end]) {
            return Some(severity);
        }
        rest = &rest[end + 1..];
    }
    None
}

/// A severity from a word at the start of `text` (see [`leading_severity`]).
fn word_marker(text: &str) -> Option<Severity> {
    let len = text.find(|c: char| !c.is_alphanumeric()).unwrap_or(text.len());
    let (word, after) = text.split_at(len);
    if is_severity_label(word) {
        return label_value(after);
    }
    let severity = normalise_severity(word)?;
    (is_p_level(word) || ends_marker(after)).then_some(severity)
}

/// Whether the text after a severity word ends a marker: nothing, or punctuation (`:`, ` - `,
/// `—`, `|`, `)`), possibly after closing emphasis and a qualifier (`High severity:`).
fn ends_marker(after: &str) -> bool {
    let mut after = after.trim_start_matches(EMPHASIS);
    let joined = after.trim_start_matches([' ', '-']);
    let len = joined.find(|c: char| !c.is_alphanumeric()).unwrap_or(joined.len());
    if len > 0 && QUALIFIERS.contains(&joined[..len].to_lowercase().as_str()) {
        after = joined[len..].trim_start_matches(EMPHASIS);
    }
    if after.starts_with('-') && after[1..].starts_with(char::is_alphanumeric) {
        return false; // A compound word: "High-level".
    }
    let after = after.trim_start();
    after.is_empty() || after.starts_with([':', '-', '–', '—', '|', ')', ']', '/', ','])
}

/// The severity of a bracketed tag's text: `P1`, `high`, `High severity`, `Severity: major`,
/// `P1 - bug`.
fn tag_severity(inner: &str) -> Option<Severity> {
    if inner.len() > 40 {
        return None;
    }
    if let Some(severity) = normalise_severity(inner) {
        return Some(severity);
    }
    let words: Vec<&str> = inner.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let (first, rest) = words.split_first()?;
    if is_severity_label(first) {
        return rest.first().and_then(|word| normalise_severity(word));
    }
    let severity = normalise_severity(first)?;
    let qualified = rest.iter().all(|word| QUALIFIERS.contains(&word.to_lowercase().as_str()));
    (is_p_level(first) || qualified).then_some(severity)
}

fn is_p_level(word: &str) -> bool {
    matches!(word, "P0" | "P1" | "P2" | "p0" | "p1" | "p2")
}

fn is_severity_label(word: &str) -> bool {
    word.eq_ignore_ascii_case("severity") || word.eq_ignore_ascii_case("priority")
}

/// The value after a severity label: `: High`, `**: P1`, `= major` (a colon or `=` is required,
/// so "Priority queue …" is no label).
fn label_value(after: &str) -> Option<Severity> {
    let after = after.trim_start_matches(|c: char| c.is_whitespace() || EMPHASIS.contains(&c));
    let value = after.strip_prefix([':', '='])?;
    let value = value.trim_start_matches(|c: char| !c.is_alphanumeric());
    let len = value.find(|c: char| !c.is_alphanumeric()).unwrap_or(value.len());
    normalise_severity(&value[..len])
}

/// A `Severity: …` / `Priority: …` field at the start of any line of a finding's details
/// (`- **Severity:** High`), used when the finding has no leading marker. Code is ignored.
fn labelled_severity(lines: &[MdLine<'_>]) -> Option<Severity> {
    lines.iter().find_map(|line| {
        let text = match &line.kind {
            LineKind::Code => return None,
            LineKind::Item { content, .. } => content.as_str(),
            _ => line.raw,
        };
        let text = skip_decoration(text);
        let len = text.find(|c: char| !c.is_alphanumeric()).unwrap_or(text.len());
        if is_severity_label(&text[..len]) {
            label_value(&text[len..])
        } else {
            None
        }
    })
}

// ---------------------------------------------------------------------------------------------
// File and line references
// ---------------------------------------------------------------------------------------------

/// Extensions that make a bare name (no slash, no line) a file: `utils.py`, `Cargo.toml`.
#[rustfmt::skip]
const KNOWN_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "java", "kt", "kts", "scala",
    "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "fs", "rb", "php", "swift", "m", "mm", "sh",
    "bash", "zsh", "ps1", "pl", "pm", "lua", "r", "dart", "ex", "exs", "erl", "hrl", "hs", "ml",
    "mli", "clj", "cljs", "elm", "vue", "svelte", "sql", "graphql", "gql", "proto", "thrift",
    "yaml", "yml", "json", "jsonc", "toml", "ini", "cfg", "conf", "env", "xml", "html", "htm",
    "css", "scss", "sass", "less", "md", "mdx", "rst", "txt", "csv", "tsv", "lock", "gradle",
    "properties", "tf", "tfvars", "hcl", "nix", "zig", "nim", "jl", "sol", "ipynb", "cmake", "mk",
    "dockerfile", "bzl", "bazel", "gemspec", "plist", "cabal", "sbt", "groovy", "vb", "asm", "s",
];

/// A path mentioned in a finding.
struct PathRef {
    path: String,
    line: Option<i64>,
    /// Has a line, a slash, or stands alone in backticks: surely meant as a file.
    strong: bool,
}

/// The file and line a finding points at.
///
/// * The finding's prose is searched first, its code blocks only when the prose names no file.
/// * The first *strong* reference wins (a path with a line, a path with a slash, or a name in
///   backticks); a bare name such as `utils.py` in running text only when there is no strong
///   one, so "Node.js" does not shadow a later `src/app.js:12`.
/// * When the chosen path has no line attached, the first standalone `line 42` / `Line: 42` /
///   `lines 10-12` of the prose supplies it. A line without any file is not reported.
fn locate(prose: &str, code: &str) -> (Option<String>, Option<i64>) {
    let Some(found) = best_ref(prose).or_else(|| best_ref(code)) else {
        return (None, None);
    };
    let line = found.line.or_else(|| standalone_line(prose));
    (Some(found.path), line)
}

fn best_ref(text: &str) -> Option<PathRef> {
    let mut refs = path_refs(text);
    let chosen = refs.iter().position(|found| found.strong).or(if refs.is_empty() { None } else { Some(0) })?;
    Some(refs.swap_remove(chosen))
}

fn is_path_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b'/' | b'@')
}

/// Path-like tokens of the text, in order. A path is a run of letters, digits and `_-./@`
/// (trailing `.`/`-` dropped, as sentence punctuation) with a letter in it that either
///
/// * ends in a dot-extension (`.py`, a letter then up to 9 letters or digits) that is a known
///   source extension, or comes with a slash or a line (`notes.weird:3`), or
/// * has a slash between two names and is in backticks or has a line (`` `src/utils` ``); an
///   unquoted `and/or` is prose.
///
/// URLs (`//host/…` after a scheme) are skipped, as are versions (`1.2.3`) and abbreviations
/// (`e.g.`), which have no letter-led extension. See [`attached_line`] for the line forms.
fn path_refs(text: &str) -> Vec<PathRef> {
    let bytes = text.as_bytes();
    let mut refs = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !is_path_byte(bytes[at]) {
            at += 1;
            continue;
        }
        let mut start = at;
        while at < bytes.len() && is_path_byte(bytes[at]) {
            at += 1;
        }
        let mut end = at;
        while end > start && matches!(bytes[end - 1], b'.' | b'-') {
            end -= 1;
        }
        while start < end && bytes[start] == b'-' {
            start += 1;
        }
        if let Some(found) = path_ref(text, start, end) {
            refs.push(found);
        }
    }
    refs
}

fn path_ref(text: &str, start: usize, end: usize) -> Option<PathRef> {
    let token = &text[start..end];
    if !token.bytes().any(|b| b.is_ascii_alphabetic()) || token.starts_with("//") {
        return None;
    }
    let names = token.split('/').filter(|name| name.bytes().any(|b| b.is_ascii_alphanumeric())).count();
    let has_slash = token.contains('/') && names >= 2;
    let last = token.rsplit('/').next().unwrap_or(token);
    let extension = last.rfind('.').map(|dot| &last[dot + 1..]).filter(|ext| {
        (1..=10).contains(&ext.len())
            && ext.starts_with(|c: char| c.is_ascii_alphabetic())
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    let line = attached_line(&text[end..]);
    let quoted = start > 0 && text.as_bytes()[start - 1] == b'`' && text[end..].starts_with('`');
    let valid = match extension {
        Some(ext) => KNOWN_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()) || has_slash || line.is_some(),
        None => has_slash && (quoted || line.is_some()),
    };
    valid.then(|| PathRef { path: token.to_string(), line, strong: line.is_some() || quoted || has_slash })
}

/// The line attached to a path, from the text right after it:
///
/// * `path:42`, `path:L42`, `path:42:7`, `path:10-12` (→ 10), `path#L42`;
/// * after closing emphasis/backticks/quotes and separators (`,`, `:`, `(`, dashes, newlines)
///   and the words at/on/near/around/in: `L42`, `line 42`, `Line: 42`, `lines 10-12`:
///   `` `src/a.py` L42 ``, `src/a.py (lines 10-12)`, `**src/a.py**, line 42`,
///   `` `src/a.py` on line 42 ``, `**File:** `a.py`\n**Line:** 42`.
fn attached_line(after: &str) -> Option<i64> {
    if let Some(rest) = after.strip_prefix(':') {
        if let Some(line) = leading_number(rest.strip_prefix(['L', 'l']).unwrap_or(rest)) {
            return Some(line);
        }
    }
    if let Some(rest) = after.strip_prefix("#L") {
        return leading_number(rest);
    }
    let mut rest = after;
    for _ in 0..4 {
        rest = rest.trim_start_matches(|c: char| {
            c.is_whitespace()
                || matches!(c, '`' | '*' | '_' | '"' | '\'' | ')' | ']' | '(' | ',' | ':' | '-' | '–' | '—')
        });
        let len = rest.find(|c: char| !c.is_alphanumeric()).unwrap_or(rest.len());
        if matches!(rest[..len].to_lowercase().as_str(), "at" | "on" | "near" | "around" | "in") {
            rest = &rest[len..];
        } else {
            break;
        }
    }
    keyword_line(rest, true)
}

/// `line 42`, `lines 10-12`, `Line: **42**`, and (when `bare_l`) `L42` at the start of `text`.
fn keyword_line(text: &str, bare_l: bool) -> Option<i64> {
    for keyword in ["lines", "line"] {
        let Some(head) = text.get(..keyword.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(keyword) {
            continue;
        }
        let rest = &text[keyword.len()..];
        if rest.starts_with(char::is_alphanumeric) {
            continue; // "linear", "liners"
        }
        let rest = rest
            .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ':' | '.' | '#' | '=' | '*' | '_' | '`'));
        return leading_number(rest.strip_prefix(['L', 'l']).unwrap_or(rest));
    }
    if bare_l {
        return text.strip_prefix('L').and_then(leading_number);
    }
    None
}

/// The first standalone `line 42` / `Line: 42` / `lines 10-12` of the text (not a bare `L2`,
/// which is as likely a cache level as a line).
fn standalone_line(text: &str) -> Option<i64> {
    let mut previous: Option<char> = None;
    for (index, c) in text.char_indices() {
        if matches!(c, 'l' | 'L') && !previous.is_some_and(char::is_alphanumeric) {
            if let Some(line) = keyword_line(&text[index..], false) {
                return Some(line);
            }
        }
        previous = Some(c);
    }
    None
}

/// The decimal number (at most 9 digits) at the start of the text.
fn leading_number(text: &str) -> Option<i64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        text[..digits].parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(review: &ParsedReview) -> Vec<&str> {
        review.findings.iter().map(|finding| finding.body.as_str()).collect()
    }

    fn ranks(review: &ParsedReview) -> Vec<u32> {
        review.findings.iter().map(|finding| finding.rank).collect()
    }

    fn severities(review: &ParsedReview) -> Vec<Option<Severity>> {
        review.findings.iter().map(|finding| finding.severity).collect()
    }

    fn locations(review: &ParsedReview) -> Vec<(Option<&str>, Option<i64>)> {
        review.findings.iter().map(|finding| (finding.file.as_deref(), finding.line)).collect()
    }

    #[test]
    fn numbered_list_with_nested_bullets_and_code() {
        let review = parse_review(
            "# Review\n\
             \n\
             Here is what I found, most severe first.\n\
             \n\
             1. **[P1] `src/page.py:42`** — off-by-one in `paginate`:\n\
             \x20  - the loop uses `<=`\n\
             \x20  - so the last page repeats\n\
             \n\
             \x20  ```python\n\
             1. not an item\n\
             # not a heading\n\
             for i in range(0, n + 1):\n\
             \x20  ```\n\
             \n\
             \x20  Continuation paragraph.\n\
             2. Missing null check in `lib/util.ts` line 7.\n\
             3. Typo in README.md\n",
        );
        assert_eq!(review.format, ReviewFormat::Markdown);
        assert_eq!(ranks(&review), vec![1, 2, 3]);
        assert_eq!(
            review.findings[0].body,
            "**[P1] `src/page.py:42`** — off-by-one in `paginate`:\n\
             - the loop uses `<=`\n\
             - so the last page repeats\n\
             \n\
             ```python\n\
             1. not an item\n\
             # not a heading\n\
             for i in range(0, n + 1):\n\
             ```\n\
             \n\
             Continuation paragraph."
        );
        assert_eq!(review.findings[1].body, "Missing null check in `lib/util.ts` line 7.");
        assert_eq!(
            locations(&review),
            vec![(Some("src/page.py"), Some(42)), (Some("lib/util.ts"), Some(7)), (Some("README.md"), None)]
        );
        assert_eq!(severities(&review), vec![Some(Severity::P1), None, None]);
        assert!(review.warnings.is_empty(), "{:?}", review.warnings);
    }

    #[test]
    fn unindented_fence_and_paragraph_between_items_belong_to_the_item_above() {
        let review = parse_review(
            "1. First issue\n\
             ```\n\
             2. still code\n\
             ```\n\
             \n\
             More about the first issue.\n\
             \n\
             2. Second issue\n\
             \n\
             Overall the change looks fine.\n",
        );
        assert_eq!(
            bodies(&review),
            vec![
                "First issue\n```\n2. still code\n```\n\nMore about the first issue.",
                // This author writes unindented continuation paragraphs, so the paragraph after
                // the last item is taken as its continuation too.
                "Second issue\n\nOverall the change looks fine."
            ]
        );
    }

    #[test]
    fn bulleted_list() {
        let review = parse_review(
            "Findings:\n\n\
             - Race in `cache.get` when two writers race\n\
             \x20 - nested detail\n\
             * Leaks a file handle in src/io/reader.rs:88\n\
             + Magic number in config.yaml\n",
        );
        assert_eq!(
            bodies(&review),
            vec![
                "Race in `cache.get` when two writers race\n- nested detail",
                "Leaks a file handle in src/io/reader.rs:88",
                "Magic number in config.yaml",
            ]
        );
        assert_eq!(locations(&review)[1], (Some("src/io/reader.rs"), Some(88)));
    }

    #[test]
    fn paren_enumerators() {
        let review = parse_review("1) First\n2) Second\n   continued\n3) Third\n");
        assert_eq!(bodies(&review), vec!["First", "Second\ncontinued", "Third"]);
        let review = parse_review("(1) First\n(2) Second\n");
        assert_eq!(bodies(&review), vec!["First", "Second"]);
    }

    #[test]
    fn bold_enumerators_are_items() {
        let review = parse_review(
            "**1. Off-by-one in paginate** (`src/page.py:42`)\n\n\
             The loop runs once too often.\n\n\
             **2. Missing test**\n\n\
             Nothing covers the empty page.\n",
        );
        assert_eq!(
            bodies(&review),
            vec![
                "**Off-by-one in paginate** (`src/page.py:42`)\n\nThe loop runs once too often.",
                "**Missing test**\n\nNothing covers the empty page.",
            ]
        );
        assert_eq!(locations(&review)[0], (Some("src/page.py"), Some(42)));
    }

    #[test]
    fn numbered_items_win_over_bullets_at_the_same_indent() {
        let review = parse_review(
            "Files reviewed:\n\
             - src/a.py\n\
             - src/b.py\n\
             \n\
             1. Bug in a\n\
             - detail of a\n\
             2. Bug in b\n",
        );
        assert_eq!(bodies(&review), vec!["Bug in a\n- detail of a", "Bug in b"]);
    }

    #[test]
    fn right_aligned_enumerators_are_siblings() {
        let text: String = (1..=10).map(|i| format!("{i:>2}. Finding {i}\n")).collect();
        let review = parse_review(&text);
        assert_eq!(review.findings.len(), 10);
        assert_eq!(review.findings[9].body, "Finding 10");
    }

    #[test]
    fn closing_prose_and_breaks_end_the_last_item() {
        let review = parse_review("- one\n- two\n\nOverall fine.\n");
        assert_eq!(bodies(&review), vec!["one", "two"]);
        let review = parse_review("1. one\n\n---\n\n2. two\n\n---\n\nThanks!\n");
        assert_eq!(bodies(&review), vec!["one", "two"]);
        // An author who writes unindented continuation paragraphs keeps them on the last item.
        let review = parse_review("1. one\n\nmore on one\n\n2. two\n\nmore on two\n");
        assert_eq!(bodies(&review), vec!["one\n\nmore on one", "two\n\nmore on two"]);
    }

    #[test]
    fn heading_per_finding() {
        let review = parse_review(
            "# Code review\n\
             \n\
             ## Issues\n\
             \n\
             ### 1. Off-by-one in paginate\n\
             **File:** `src/page.py`\n\
             **Line:** 42\n\
             \n\
             - The loop uses `<=`.\n\
             - Fix: use `<`.\n\
             \n\
             #### Suggested fix\n\
             ```python\n\
             # 2. not a heading\n\
             ```\n\
             \n\
             ## Finding 2: Unchecked error in `load()`\n\
             - **Severity:** High\n\
             - `lib/load.go:17` ignores `err`.\n\
             \n\
             ## [P2] Naming\n\
             `tmp` says nothing.\n\
             \n\
             ## Summary\n\
             - Two real bugs.\n",
        );
        assert_eq!(ranks(&review), vec![1, 2, 3]);
        assert_eq!(
            review.findings[0].body,
            "Off-by-one in paginate\n**File:** `src/page.py`\n**Line:** 42\n\n- The loop uses `<=`.\n\
             - Fix: use `<`.\n\n#### Suggested fix\n```python\n# 2. not a heading\n```"
        );
        assert!(review.findings[1].body.starts_with("Finding 2: Unchecked error in `load()`\n- **Severity:** High"));
        assert_eq!(review.findings[2].body, "[P2] Naming\n`tmp` says nothing.");
        assert_eq!(severities(&review), vec![None, Some(Severity::P1), Some(Severity::P2)]);
        assert_eq!(
            locations(&review),
            vec![(Some("src/page.py"), Some(42)), (Some("lib/load.go"), Some(17)), (None, None)]
        );
        assert_eq!(review.warnings, vec!["ignored 1 list item(s) under non-finding heading(s): Summary"]);
    }

    #[test]
    fn headings_over_finding_headings_are_groups() {
        let review = parse_review(
            "## 1. Cache layer\n\
             Intro to the cache problems.\n\
             ### 1.1 Stale entry served\n\
             Details.\n\
             ### 1.2 Race on refill\n\
             More details.\n\
             ## 2. Off-by-one in paginate\n\
             ### Why\n\
             Because.\n",
        );
        assert_eq!(
            bodies(&review),
            vec![
                "Stale entry served\nDetails.",
                "Race on refill\nMore details.",
                "Off-by-one in paginate\n### Why\nBecause.",
            ]
        );
    }

    #[test]
    fn plain_headings_under_an_issues_heading_are_findings() {
        let review = parse_review(
            "## Issues\n\n### Off-by-one in paginate\nThe loop overruns.\n\n\
             ### Missing null check\n`user` may be null.\n\n## Conclusion\nFine otherwise.\n",
        );
        assert_eq!(
            bodies(&review),
            vec!["Off-by-one in paginate\nThe loop overruns.", "Missing null check\n`user` may be null."]
        );
    }

    #[test]
    fn unnumbered_heading_per_finding_fallback() {
        let review = parse_review(
            "# Review\n\n## Off-by-one in paginate\nThe loop overruns.\n\n\
             ## Missing null check\n`user` may be null.\n\n## Summary\nTwo issues.\n",
        );
        assert_eq!(
            bodies(&review),
            vec!["Off-by-one in paginate\nThe loop overruns.", "Missing null check\n`user` may be null."]
        );
        // A single such heading is a title, not a finding.
        let review = parse_review("# Add pagination\n\n## Looks fine to me\nNo issues.\n");
        assert!(review.findings.is_empty());
    }

    #[test]
    fn numbered_category_headings_group_their_items() {
        let review = parse_review(
            "## 1. Security\n- SQL built by string concatenation\n- Token logged\n\n\
             ## 2. Performance\nThe loop in `src/a.rs:9` is quadratic.\n",
        );
        assert_eq!(
            bodies(&review),
            vec![
                "SQL built by string concatenation",
                "Token logged",
                "Performance\nThe loop in `src/a.rs:9` is quadratic.",
            ]
        );
    }

    #[test]
    fn severity_group_headings_set_severity() {
        let review = parse_review(
            "## Issues\n\
             ### 🔴 Critical\n\
             - Data loss on retry\n\
             ### Major issues\n\
             - [P0] Marker beats the group\n\
             - Unbounded cache\n\
             ### Nits\n\
             - Rename `x`\n\
             - None\n\
             ### Testing\n\
             - No tests for retry\n",
        );
        assert_eq!(
            severities(&review),
            vec![Some(Severity::P0), Some(Severity::P0), Some(Severity::P1), Some(Severity::P2), None]
        );
        assert_eq!(review.findings.len(), 5, "the `None` placeholder is not a finding");
    }

    #[test]
    fn non_finding_sections_are_excluded() {
        let review = parse_review(
            "## Summary\n\
             - Adds pagination\n\
             - Refactors the cache\n\
             \n\
             ## ✅ What's good\n\
             - Clear naming\n\
             \n\
             ## Issues\n\
             1. Off-by-one\n\
             2. Leak\n\
             \n\
             ## Positive notes\n\
             - Good tests\n\
             \n\
             ## Strengths\n\
             ### Tests\n\
             - Thorough\n\
             \n\
             ## Summary of issues\n\
             - Third issue listed only here\n",
        );
        assert_eq!(bodies(&review), vec!["Off-by-one", "Leak", "Third issue listed only here"]);
        assert_eq!(
            review.warnings,
            vec!["ignored 5 list item(s) under non-finding heading(s): Summary, ✅ What's good, Positive notes, Tests"]
        );
    }

    #[test]
    fn bold_section_labels_split_lists() {
        let review = parse_review(
            "- Off-by-one in paginate\n\
             - Leaked handle\n\
             \n\
             **Nits:**\n\
             - Rename `tmp`\n\
             \n\
             **Summary**\n\
             - Solid change overall\n",
        );
        assert_eq!(bodies(&review), vec!["Off-by-one in paginate", "Leaked handle", "Rename `tmp`"]);
        assert_eq!(severities(&review), vec![None, None, Some(Severity::P2)]);
    }

    #[test]
    fn setext_headings_split_sections() {
        let review = parse_review("Issues\n======\n\n- Bug\n\nSummary\n-------\n\n- Fine\n");
        assert_eq!(bodies(&review), vec!["Bug"]);
    }

    #[test]
    fn severity_markers_of_each_style() {
        let review = parse_review(
            "1. [P1] bracketed\n\
             2. **P0** bold level\n\
             3. (high) parenthesised word\n\
             4. Severity: major — labelled\n\
             5. 🔴 Critical: emoji and word\n\
             6. **Critical**: bold word\n\
             7. p2 lowercase level\n\
             8. `[Nit]` code tag\n\
             9. [Bug] [Low] second tag\n\
             10. **src/a.py:3** (medium): after a location\n\
             11. High memory use in the loop\n\
             12. High-level design is unclear\n\
             13. Blocker - release stopper\n\
             14. Some text\n\
             \x20   - **Priority:** P1\n\
             15. [High severity] qualified tag\n\
             16. Priority queue is unbounded\n",
        );
        use Severity::*;
        assert_eq!(
            severities(&review),
            vec![
                Some(P1),
                Some(P0),
                Some(P1),
                Some(P1),
                Some(P0),
                Some(P0),
                Some(P2),
                Some(P2),
                Some(P2),
                Some(P2),
                None,
                None,
                Some(P0),
                Some(P1),
                Some(P1),
                None,
            ]
        );
        // The marker stays in the body.
        assert_eq!(review.findings[0].body, "[P1] bracketed");
        assert_eq!(review.findings[4].body, "🔴 Critical: emoji and word");
    }

    #[test]
    fn normalise_severity_table() {
        use Severity::*;
        for (text, expected) in [
            ("P0", Some(P0)),
            ("p1", Some(P1)),
            ("[P2]", Some(P2)),
            ("**P1**", Some(P1)),
            ("Critical", Some(P0)),
            ("blocker", Some(P0)),
            ("SEVERE", Some(P0)),
            ("high", Some(P1)),
            ("Major", Some(P1)),
            ("important", Some(P1)),
            ("medium", Some(P2)),
            ("moderate", Some(P2)),
            ("minor", Some(P2)),
            ("low", Some(P2)),
            ("nit", Some(P2)),
            ("nitpick", Some(P2)),
            ("suggestion", Some(P2)),
            ("P3", None),
            ("info", None),
            ("very high", None),
            ("", None),
        ] {
            assert_eq!(normalise_severity(text), expected, "{text:?}");
        }
    }

    #[test]
    fn file_and_line_variants() {
        let review = parse_review(
            "- plain src/a.py:42 ref\n\
             - in backticks `src/a.py:43`\n\
             - bold **src/a.py:44**\n\
             - L form `src/a.py` L45\n\
             - word form src/a.py line 46\n\
             - range src/a.py (lines 47-49)\n\
             - GitHub anchor [link](src/a.py#L50)\n\
             - colon range `src/a.py:51-60`\n\
             - bare name utils.py without a line\n\
             - unknown extension self.items is not a file\n\
             - slash prose and/or w/o a path\n\
             - url https://github.com/o/r/blob/main/x.py#L3 is skipped\n\
             - versions 1.2.3 and e.g. abbreviations are not files\n\
             - weak Node.js loses to `web/app.js:12`\n\
             - file then standalone: in `lib/x.rb`, around the loop, see line 52\n\
             - directory in backticks `src/utils` on line 53\n\
             - Windows-free `tests/test_a.py`: line 54\n\
             - line 55 alone has no file\n",
        );
        assert_eq!(
            locations(&review),
            vec![
                (Some("src/a.py"), Some(42)),
                (Some("src/a.py"), Some(43)),
                (Some("src/a.py"), Some(44)),
                (Some("src/a.py"), Some(45)),
                (Some("src/a.py"), Some(46)),
                (Some("src/a.py"), Some(47)),
                (Some("src/a.py"), Some(50)),
                (Some("src/a.py"), Some(51)),
                (Some("utils.py"), None),
                (None, None),
                (None, None),
                (None, None),
                (None, None),
                (Some("web/app.js"), Some(12)),
                (Some("lib/x.rb"), Some(52)),
                (Some("src/utils"), Some(53)),
                (Some("tests/test_a.py"), Some(54)),
                (None, None),
            ]
        );
    }

    #[test]
    fn code_blocks_are_searched_for_a_file_only_when_the_prose_names_none() {
        let review = parse_review(
            "1. The retry loop never ends:\n\
             \x20  ```diff\n\
             \x20  +++ b/src/retry.py\n\
             \x20  ```\n\
             2. Wrong default in `conf/app.toml`:\n\
             \x20  ```\n\
             \x20  see other/file.rs:9\n\
             \x20  ```\n",
        );
        assert_eq!(locations(&review), vec![(Some("b/src/retry.py"), None), (Some("conf/app.toml"), None)]);
    }

    #[test]
    fn words_blank_and_no_issue_reviews() {
        let review = parse_review("  \n\t\n");
        assert_eq!(review.format, ReviewFormat::Empty);
        assert_eq!(review.words, 0);
        assert!(review.findings.is_empty());

        let review = parse_review("LGTM. No issues found.\n");
        assert_eq!(review.format, ReviewFormat::Markdown);
        assert!(review.findings.is_empty());
        assert_eq!(review.words, 4);

        let review = parse_review("1. one two\n   three\n\n- four `five`\n");
        assert_eq!(review.words, 7);
    }

    #[test]
    fn unclosed_fence_is_reported() {
        let review = parse_review("1. Bug\n   ```\n   2. code\n");
        assert_eq!(bodies(&review), vec!["Bug\n```\n2. code"]);
        assert_eq!(
            review.warnings,
            vec!["the code fence opened on line 2 is never closed; the rest of the review is code"]
        );
    }

    #[test]
    fn scripted_agent_markdown_parses() {
        let review = parse_review(
            "# Review\n\n1. **[P1] src/cache.py:12** — Stale entry served after expiry.\n\
             2. **[P2] src/cache.py** — Docstring out of date.\n",
        );
        assert_eq!(severities(&review), vec![Some(Severity::P1), Some(Severity::P2)]);
        assert_eq!(locations(&review), vec![(Some("src/cache.py"), Some(12)), (Some("src/cache.py"), None)]);
    }

    // --- JSON ---

    #[test]
    fn json_plain_array() {
        let text = r#"[
            {"body": " Off-by-one ", "file": "src/a.py", "line": 42, "severity": "high"},
            {"body": "Leak", "path": "src/b.py", "line": "7", "severity": "P0"},
            {"body": "Nit", "file": "", "start_line": 3.0, "severity": "whatever"}
        ]"#;
        // The harness reads `file`, `line` and `P0|P1|P2` only.
        let harness = vec![
            Finding {
                rank: 1,
                body: "Off-by-one".into(),
                file: Some("src/a.py".into()),
                line: Some(42),
                severity: None,
            },
            Finding { rank: 2, body: "Leak".into(), file: None, line: Some(7), severity: Some(Severity::P0) },
            Finding { rank: 3, body: "Nit".into(), file: None, line: None, severity: None },
        ];
        assert_eq!(parse_json_findings(text).unwrap(), harness);
        // review.md's forgiving reading also takes `path`, `start_line` and severity words.
        let findings = vec![
            Finding {
                rank: 1,
                body: "Off-by-one".into(),
                file: Some("src/a.py".into()),
                line: Some(42),
                severity: Some(Severity::P1),
            },
            Finding {
                rank: 2,
                body: "Leak".into(),
                file: Some("src/b.py".into()),
                line: Some(7),
                severity: Some(Severity::P0),
            },
            Finding { rank: 3, body: "Nit".into(), file: None, line: Some(3), severity: None },
        ];
        let review = parse_review(text);
        assert_eq!(review.format, ReviewFormat::Json);
        assert_eq!(review.findings, findings);
        assert_eq!(review.words, text.split_whitespace().count());
    }

    #[test]
    fn json_fenced() {
        let text = "Here is my review:\n\n```json\n[{\"body\": \"Leak\", \"file\": \"a.rs\", \"line\": 3}]\n```\n\n\
                    Key points:\n- one leak\n";
        let findings = parse_json_findings(text).unwrap();
        assert_eq!(bodies_of(&findings), vec!["Leak"]);
        let review = parse_review(text);
        assert_eq!(review.format, ReviewFormat::Json);
        assert_eq!(review.findings, findings);
        // A fence at the very start counts as starting like JSON.
        let review = parse_review("```json\n[]\n```");
        assert_eq!(review.format, ReviewFormat::Json);
        assert!(review.findings.is_empty());
        // One-line fence.
        assert_eq!(bodies_of(&parse_json_findings("```json [{\"body\": \"x\"}]```").unwrap()), vec!["x"]);
    }

    fn bodies_of(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|finding| finding.body.as_str()).collect()
    }

    #[test]
    fn json_prose_with_arrays_last_wins() {
        let text = "Draft: [{\"body\": \"first draft\"}]\n\
                    Final answer: [{\"body\": \"use arr[0] safely\", \"tags\": [\"x\"]}, {\"body\": \"second\"}]\nDone.";
        // The harness takes the last list among the values at *every* `[`: the nested `["x"]`,
        // which holds no comment, and the answer looks structured.
        assert_eq!(parse_json_findings(text), Err(JsonFindingsError::NoComments));
        let review = parse_review(text);
        assert_eq!(review.format, ReviewFormat::Json);
        assert_eq!(bodies_of(&review.findings), vec!["use arr[0] safely", "second"]);
        assert_eq!(ranks_of(&review.findings), vec![1, 2]);
    }

    fn ranks_of(findings: &[Finding]) -> Vec<u32> {
        findings.iter().map(|finding| finding.rank).collect()
    }

    #[test]
    fn json_object_with_comments() {
        let text = r#"{"summary": "ok", "comments": [{"body": "a", "line": 1}, {"body": "b"}]}"#;
        assert_eq!(bodies_of(&parse_json_findings(text).unwrap()), vec!["a", "b"]);
        let prose = format!("Result:\n{text}\nthanks");
        assert_eq!(bodies_of(&parse_json_findings(&prose).unwrap()), vec!["a", "b"]);
        assert_eq!(parse_json_findings(r#"{"comments": []}"#), Ok(vec![]));
    }

    #[test]
    fn json_single_objects() {
        let text = "First: {\"body\": \"a\", \"file\": \"x.py\", \"meta\": {\"body\": \"nested\"}}\n\
                    Then {\"note\": {\"body\": \"inner\"}} and a truncated list [{\"body\": \"b\"}, {\"body\": \"c";
        let findings = parse_json_findings(text).unwrap();
        // Every object with a string body, nested ones included (the harness's last resort).
        assert_eq!(bodies_of(&findings), vec!["a", "nested", "inner", "b"]);
        assert_eq!(bodies_of(&parse_review(text).findings), vec!["a", "inner", "b"]);
        assert_eq!(findings[0].file.as_deref(), Some("x.py"));
        // A single object as the whole answer is JSON, but not a list: no comment, and it looks
        // structured.
        assert_eq!(parse_json_findings(r#"{"body": "only"}"#), Err(JsonFindingsError::NoComments));
        assert_eq!(bodies_of(&parse_review(r#"{"body": "only"}"#).findings), vec!["only"]);
    }

    #[test]
    fn json_keeps_the_first_thirty() {
        let items: Vec<String> = (1..=35).map(|i| format!("{{\"body\": \"c{i}\"}}")).collect();
        let text = format!("[{}]", items.join(","));
        let findings = parse_json_findings(&text).unwrap();
        assert_eq!(findings.len(), MAX_JSON_COMMENTS);
        assert_eq!(findings[29].body, "c30");
        assert_eq!(findings[29].rank, 30);
        let review = parse_review(&text);
        assert_eq!(review.warnings, vec!["kept the first 30 of 35 JSON comments"]);
    }

    #[test]
    fn json_items_without_body_are_skipped() {
        let text = r#"[{"file": "a.py"}, "text", {"body": "  "}, {"body": 3}, {"body": "real"}]"#;
        // The harness takes `str(body)` of a number.
        let findings = parse_json_findings(text).unwrap();
        assert_eq!(bodies_of(&findings), vec!["3", "real"]);
        assert_eq!(findings[0].rank, 1);
        let review = parse_review(text);
        assert_eq!(bodies_of(&review.findings), vec!["real"]);
        assert_eq!(review.warnings, vec!["skipped 4 JSON item(s) without a non-empty string `body`"]);
    }

    #[test]
    fn json_errors_follow_the_harness() {
        // No comment and nothing that looks structured: an empty review.
        assert_eq!(parse_json_findings(r#"[{"file": "a.py"}]"#), Ok(vec![]));
        assert_eq!(parse_json_findings("Nothing: []"), Ok(vec![]));
        assert_eq!(parse_json_findings(""), Ok(vec![]));
        // No comment from an answer with `"body":` or a json fence.
        assert_eq!(parse_json_findings(r#"{"issues": [{"body": "x"}]}"#), Err(JsonFindingsError::NoComments));
        assert_eq!(parse_json_findings("```json\n{\"ok\": true}\n```"), Err(JsonFindingsError::NoComments));
        // Nothing decodes.
        assert_eq!(parse_json_findings("Findings: [ {\"body\": "), Err(JsonFindingsError::NotJson));
        assert_eq!(parse_json_findings("No issues found."), Err(JsonFindingsError::NotJson));
    }

    #[test]
    fn swe_prbench_answers_have_one_reading() {
        assert_eq!(parse_swe_prbench_answer("[{\"body\": \"x\"}]").format, ReviewFormat::Json);
        assert_eq!(parse_swe_prbench_answer("[]").format, ReviewFormat::Empty);
        assert_eq!(parse_swe_prbench_answer("  ").format, ReviewFormat::Empty);
        let markdown = parse_swe_prbench_answer("1. **[P1]** `a.py:3` — the loop never ends.");
        assert_eq!(markdown.format, ReviewFormat::Unparseable);
        assert_eq!(markdown.warnings, vec![JsonFindingsError::NotJson.to_string()]);
        // review.md's reading would have found a markdown finding here.
        assert_eq!(parse_review("1. **[P1]** `a.py:3` — the loop never ends.").findings.len(), 1);
    }

    #[test]
    fn json_empty_array_is_no_findings() {
        assert_eq!(parse_json_findings("[]"), Ok(vec![]));
        assert_eq!(parse_json_findings("  [ ]\n"), Ok(vec![]));
        let review = parse_review("[]");
        assert_eq!(review.format, ReviewFormat::Json);
        assert!(review.findings.is_empty());
        assert_eq!(review.words, 1);
    }

    #[test]
    fn broken_json_falls_back_to_markdown() {
        let review = parse_review("[{\"body\": \"oops\"\n\n- a markdown finding\n");
        assert_eq!(review.format, ReviewFormat::Markdown);
        assert_eq!(bodies(&review), vec!["a markdown finding"]);
        assert_eq!(
            review.warnings,
            vec![
                "the review starts like JSON but no comment with a non-empty `body` could be decoded from the \
                 structured output; parsed it as markdown"
            ]
        );
        // A markdown review that merely opens with a tag is not JSON.
        let review = parse_review("[P1] The only finding, as a paragraph.\n\n- [P2] a listed one\n");
        assert!(review.warnings.is_empty());
        assert_eq!(bodies(&review), vec!["[P2] a listed one"]);
    }

    #[test]
    fn json_answer_with_a_bulleted_aside() {
        let text = "Summary of the change:\n- adds a cache\n- adds a flag\n\n\
                    [\n  {\"body\": \"Race on refill\", \"file\": \"src/cache.py\", \"line\": 12}\n]\n";
        let review = parse_review(text);
        assert_eq!(review.format, ReviewFormat::Json);
        assert_eq!(bodies(&review), vec!["Race on refill"]);
    }

    #[test]
    fn group_headings_under_a_summary_title_are_findings() {
        let review = parse_review(
            "# Summary of the review\n\n- adds a cache\n\n## Critical\n- Data loss\n\n### Tests\n- Thorough\n",
        );
        assert_eq!(bodies(&review), vec!["Data loss", "Thorough"]);
        assert_eq!(severities(&review), vec![Some(Severity::P0), Some(Severity::P0)]);
    }

    #[test]
    fn markdown_findings_with_json_snippets_stay_markdown() {
        let review =
            parse_review("1. The payload drops `body`:\n   ```json\n   [{\"body\": \"x\"}]\n   ```\n2. Second\n");
        assert_eq!(review.format, ReviewFormat::Markdown);
        assert_eq!(review.findings.len(), 2);
    }

    #[test]
    fn serde_shapes() {
        assert_eq!(serde_json::to_string(&ReviewFormat::Markdown).unwrap(), "\"markdown\"");
        assert_eq!(serde_json::to_string(&ReviewFormat::Json).unwrap(), "\"json\"");
        assert_eq!(serde_json::to_string(&ReviewFormat::Empty).unwrap(), "\"empty\"");
        let finding = Finding { rank: 1, body: "b".into(), file: None, line: None, severity: Some(Severity::P0) };
        let json = serde_json::to_string(&finding).unwrap();
        assert_eq!(json, r#"{"rank":1,"body":"b","severity":"P0"}"#);
        assert_eq!(serde_json::from_str::<Finding>(r#"{"rank":1,"body":"b"}"#).unwrap().severity, None);
        let review = parse_review("- one");
        let round: ParsedReview = serde_json::from_str(&serde_json::to_string(&review).unwrap()).unwrap();
        assert_eq!(round, review);
    }
}
