//! Severity markers: where a markdown finding says how severe it is (see [`leading_severity`]
//! and [`labelled_severity`]).

use super::markdown::{LineKind, MdLine};
use super::{normalise_severity, Severity};

/// Emphasis characters skipped around markers.
const EMPHASIS: [char; 3] = ['*', '_', '`'];

/// Words that may follow a severity word inside a marker: `High severity:`, `[Critical bug]`.
const QUALIFIERS: &[&str] = &["severity", "priority", "risk", "impact", "issue", "bug", "problem", "concern"];

/// Leading whitespace, emphasis, quote and table characters, emoji and other non-ASCII symbols.
pub(super) fn skip_decoration(text: &str) -> &str {
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
pub(super) fn leading_severity(text: &str) -> Option<Severity> {
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
pub(super) fn labelled_severity(lines: &[MdLine<'_>]) -> Option<Severity> {
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
