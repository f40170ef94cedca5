//! The JSON readings of an answer: SWE-PRBench's, exactly as its reference harness reads it
//! ([`parse_json_findings`], [`parse_swe_prbench_answer`]), and review.md's own, more forgiving
//! one ([`decode_json_review`]), which [`super::parse_review`] uses for JSON-looking reviews and
//! for a JSON answer outside every markdown finding ([`stray_json`]).

use serde_json::Value;

use super::{
    normalise_severity, rank_of, Finding, JsonFindingsError, ParsedReview, ReviewFormat, SwePrBenchAnswer,
    MAX_JSON_COMMENTS,
};

/// Why a JSON-looking review could not be read by [`parse_review`](super::parse_review) (its own, forgiving reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum ReviewJsonError {
    /// The text has no `[` or `{` at all.
    #[error("no JSON found")]
    NotJson,
    /// The text looks structured (has `[` or `{`) but no comment with a non-empty string `body`
    /// could be decoded from it.
    #[error("no comment with a non-empty `body` could be decoded from the structured output")]
    NoComments,
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
/// reference harness does ([`lightsout_swe_prbench::harness::agent`]: `json.loads`, fences removed,
/// the last list among the values at each `[`/`{`, loose `body` objects; at most 30 comments;
/// severities `P0|P1|P2` only; `line` by Python `int()`). Ranks are 1.. in the kept order.
///
/// `Ok(vec![])` is a valid empty review (`[]`, blank text, prose without structure);
/// [`JsonFindingsError::NotJson`] when nothing decodes, [`JsonFindingsError::NoComments`] when the
/// answer yields no comment yet looks structured (`"body":` or a ```` ```json ```` fence): the
/// harness's two parse errors, which make it ask once more with its retry prompt.
///
/// CRBugBench's [`parse_review`](super::parse_review) keeps its own, more forgiving reading of JSON-looking reviews.
pub fn parse_json_findings(text: &str) -> Result<Vec<Finding>, JsonFindingsError> {
    use lightsout_swe_prbench::harness::agent::{agent_comments, looks_structured, parse_agent_json};
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

pub(super) fn json_parsed(review: JsonReview, words: usize, mut warnings: Vec<String>) -> ParsedReview {
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
pub(super) fn starts_like_json(text: &str) -> bool {
    let mut start = text.trim_start();
    if start.starts_with("```") {
        start = start.split_once('\n').map_or("", |(_, rest)| rest).trim_start();
    }
    match start.strip_prefix('[') {
        Some(rest) => rest.trim_start().starts_with(['{', ']']),
        None => start.starts_with('{'),
    }
}

/// The comments decoded from a JSON answer.
#[derive(Debug, Default)]
pub(super) struct JsonReview {
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
pub(super) fn decode_json_review(text: &str) -> Result<JsonReview, ReviewJsonError> {
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

/// review.md's JSON answer outside every markdown finding: the first fenced block (outside every
/// finding) whose whole content is a comment list with a comment, or else the last such list
/// embedded in the prose outside every finding.
pub(super) fn stray_json(stray_fences: &[String], stray_text: &str) -> Option<JsonReview> {
    let stray_fence = stray_fences.iter().find_map(|fence| {
        let value = serde_json::from_str::<Value>(fence.trim()).ok()?;
        from_container(&value, false)
    });
    stray_fence.or_else(|| embedded_values(stray_text).iter().rev().find_map(|value| from_container(value, false)))
}
