//! What a heading's (or a section label's) words say about its section: a finding, a group of
//! findings, a topic, a severity, or a section that is not a finding at all ([`Title`]).

use super::severity::{leading_severity, skip_decoration};
use super::{normalise_severity, Severity};

/// The title of a section label line, if the line is one (see `rules::split_sections`).
pub(super) fn section_label(raw: &str) -> Option<String> {
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
pub(super) struct Title {
    /// The heading text without its enumerator (`1.`, `(2)`, `#3`); decoration kept.
    pub(super) display: String,
    /// Lowercase words of `display`.
    pub(super) words: Vec<String>,
    /// Starts with an enumerator: `1.`, `1)`, `1:`, `(1)`, `#1`, `1.2`, `1 -`.
    pub(super) numbered: bool,
    /// Starts with `Finding 2`, `Issue #3`, `Bug 1`, `Problem 4`, `Concern 5` or `Comment 6`.
    pub(super) finding_label: bool,
    /// A severity marker at its start (see [`leading_severity`]).
    pub(super) marker: Option<Severity>,
    /// Every word is a generic category word (`Security`, `Critical issues`, `Nits`,
    /// `Error handling`, `Other suggestions`): the heading names a group, not a finding.
    pub(super) category: bool,
    /// A category heading naming findings or a severity (`Issues`, `Critical`, `Suggestions`).
    pub(super) group: bool,
    /// Names a topic (`Naming`, `Error handling`), not just a severity or a group.
    pub(super) topic: bool,
    /// The severity a category heading gives its findings (`Critical issues` → P0, `Nits` → P2).
    pub(super) group_severity: Option<Severity>,
    /// Summary/Overview/Conclusion/Strengths/What's good/Positive… (see [`NON_FINDING_TITLES`]),
    /// unless it mentions findings (`Summary of issues`).
    pub(super) non_finding: bool,
    /// Mentions issues, findings, bugs, problems, concerns or defects.
    pub(super) mentions_findings: bool,
}

impl Title {
    /// Looks like a per-finding heading by itself: `Finding 2`, or numbered or marked with a
    /// specific text.
    pub(super) fn finding_like(&self) -> bool {
        self.finding_label || ((self.numbered || self.marker.is_some()) && !self.category)
    }

    pub(super) fn analyse(text: &str) -> Title {
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
