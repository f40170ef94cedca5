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
//! order: `rank` 1 is the agent's first finding.
//!
//! # Where each part lives
//!
//! * `markdown`: the CommonMark block structure (headings, list items, paragraphs, fenced
//!   code, thematic breaks), read with pulldown-cmark, as one classified line per source line.
//! * `rules`: what counts as a finding in that structure: sections, labels, list items,
//!   per-finding headings, placeholders. `titles` says what a heading's words mean.
//! * `severity`: severity markers; `location`: the file and line a finding points at.
//! * `structured`: the JSON readings, SWE-PRBench's (through
//!   [`lightsout_swe_prbench::harness::agent`]) and review.md's own, more forgiving one.
//!
//! # What counts as a finding (markdown)
//!
//! * A top-level list item (`1.`, `1)`, `-`, `*`, `+`, and two forms CommonMark does not know:
//!   `(1)` and a bold enumerator `**1. Title**` opening a line) of a section that is not a
//!   non-finding section (Summary, Overview, Strengths, What's good…). When a section's top
//!   level mixes numbered and bulleted items, the numbered ones are the findings. Nested items,
//!   continuation paragraphs and code are the item's details. See `rules::list_items`.
//! * A per-finding heading (`### 1. Off-by-one`, `## Finding 2: …`, `### [P1] Missing check`,
//!   or a plain heading under an `Issues`/`Critical`/`Suggestions` group with no list of its own)
//!   with everything up to the next heading of the same or a higher level. See
//!   `rules::is_finding_heading`.
//! * Failing both, two or more leaf headings that are neither non-finding nor category headings.
//! * Never: placeholders (`None`, `N/A`, `No issues found`), items under non-finding headings or
//!   labels (a warning counts them), anything inside a fenced code block or a block quote.
//!
//! A finding's `body` is its source text, markdown kept, trimmed: a list item without its marker
//! (continuation lines dedented to the item's text column), a heading without its `#`s and
//! enumerator followed by its section's lines.
//!
//! # Severity
//!
//! A marker at the start of the finding (`[P1]`, `**P0**`, `(high)`, `Critical:`,
//! `🔴 Critical —`, `Severity: major`; up to four bracketed tags and one leading location are
//! looked through), else a `Severity:`/`Priority:` line in its details, else the severity of the
//! group heading it is under (`### Nits` → P2). Words are normalised by [`normalise_severity`].
//! See `severity`.
//!
//! # Location
//!
//! The first strong path reference in the finding's prose (`src/a.py:42`, `` `src/utils` ``,
//! `src/a.py (lines 10-12)`), else a bare known-extension name (`utils.py`), else the same in its
//! code blocks; a standalone `line 42` supplies a missing line. See `location`.
//!
//! # Limits (the text is written by an untrusted agent)
//!
//! * JSON: at most [`MAX_JSON_COMMENTS`] comments are kept, the first ones.
//! * Markdown: at most one finding per line of the review, and no finding's body is longer than
//!   the review; list enumerators have at most 9 digits, heading enumerators at most 3, line
//!   numbers at most 9 digits; a bracketed severity tag is at most 40 bytes and at most four tags
//!   are looked through; at most `markdown::MAX_FENCE_REPAIRS` under-indented fences in list
//!   items are repaired (each is one more parse).
//! * Warnings: at most two, plus one per unclosed code fence.
//! * No recursion over the text's nesting: pulldown-cmark builds its tree iteratively, and the
//!   rules walk flat lists of lines and sections, so deeply nested quotes or lists, long runs of
//!   backticks and huge lines cost time and memory in proportion to the text.
//!
//! The tests (`tests.rs`) pin an example of each rule.

mod location;
mod markdown;
mod rules;
mod severity;
mod structured;
mod titles;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use structured::{parse_json_findings, parse_swe_prbench_answer};

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
    if structured::starts_like_json(text) {
        match structured::decode_json_review(text) {
            Ok(review) => return structured::json_parsed(review, words, warnings),
            Err(err) => warnings.push(format!("the review starts like JSON but {err}; parsed it as markdown")),
        }
    }
    let markdown = rules::parse_markdown(text);
    if let Some(review) = structured::stray_json(&markdown.stray_fences, &markdown.stray_text) {
        return structured::json_parsed(review, words, warnings);
    }
    if markdown.findings.is_empty() {
        if let Ok(review) = structured::decode_json_review(text) {
            return structured::json_parsed(review, words, warnings);
        }
    }
    warnings.extend(markdown.warnings);
    ParsedReview { findings: markdown.findings, format: ReviewFormat::Markdown, words, warnings, swe_prbench: None }
}

/// A 1-based rank from a 0-based position.
fn rank_of(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}
