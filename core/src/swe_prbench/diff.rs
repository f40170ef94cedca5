//! The diff the judge is shown: at most [`DIFF_CAP_CHARS`] characters, non-test files first.
//!
//! Rules:
//! - The unified diff is split into one section per file: a section starts at a `diff --git `
//!   line; a diff without such lines (plain `diff -u` output) starts a section at each `--- `
//!   line directly followed by a `+++ ` line. Text before the first section (a patch's mail
//!   header) is a section of its own, with no path, counted as non-test.
//! - Sections are reordered: non-test files first, then test files ([`is_test_file`]), keeping
//!   the original order within each group.
//! - Whole sections are concatenated while the total stays within the cap; the first section
//!   that does not fit is cut at the cap and [`truncation_marker`] is appended after it. Later
//!   sections are left out. The cap counts characters (Unicode scalar values, as Python's
//!   `len`); the marker is not counted in it.

use serde::{Deserialize, Serialize};

/// The most characters of diff the judge is shown.
pub const DIFF_CAP_CHARS: usize = 12_000;

/// The diff as shown to the judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedDiff {
    /// The text shown, the truncation marker included when there is one.
    pub text: String,
    pub stats: DiffStats,
}

/// What of the diff the judge was shown (recorded in the verdict; the text itself is
/// `cap_diff(task.diff, DIFF_CAP_CHARS)` again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffStats {
    /// Characters of the whole diff.
    pub original_chars: usize,
    /// Characters of diff shown (the marker not counted); at most the cap.
    pub shown_chars: usize,
    pub truncated: bool,
    /// File sections shown whole.
    pub files_whole: usize,
    /// File sections in the diff.
    pub files_total: usize,
}

/// One file's part of a unified diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileSection<'a> {
    /// The file's path (the new path; the old one for deletions); `None` for a preamble.
    pub path: Option<String>,
    pub text: &'a str,
}

/// Whether `path` is a test file. Directory segments (case-insensitive) `test`, `tests`,
/// `__tests__`, `spec`, `specs`, `testdata`; or a file name that is `conftest.py`, starts with
/// `test_`, or whose stem (the name before its last `.`) ends with `_test`, `_spec`, `.test`,
/// `.spec` (all case-insensitive) or, case-sensitively, `Test` / `Tests`. Examples:
/// `tests/a.py`, `test_a.py`, `a_test.go`, `a.test.ts`, `a.spec.js`, `a_spec.rb`,
/// `FooTest.java`, `FooTests.cs`; not `contest.py`, `latest.go`, `src/testing_utils.py`.
pub fn is_test_file(path: &str) -> bool {
    const TEST_DIRS: [&str; 6] = ["test", "tests", "__tests__", "spec", "specs", "testdata"];
    let path = path.trim().trim_matches('"');
    let mut segments: Vec<&str> = path.split(['/', '\\']).filter(|s| !s.is_empty()).collect();
    let Some(name) = segments.pop() else { return false };
    if segments.iter().any(|dir| TEST_DIRS.iter().any(|t| dir.eq_ignore_ascii_case(t))) {
        return true;
    }
    let lower = name.to_ascii_lowercase();
    if lower == "conftest.py" || lower.starts_with("test_") {
        return true;
    }
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    let lower_stem = stem.to_ascii_lowercase();
    ["_test", "_spec", ".test", ".spec"].iter().any(|suffix| lower_stem.ends_with(suffix))
        || stem.ends_with("Test")
        || stem.ends_with("Tests")
}

/// Splits a unified diff into file sections (see the module rules); the sections concatenate
/// back to the input.
pub(crate) fn split_diff(diff: &str) -> Vec<FileSection<'_>> {
    let lines: Vec<(usize, &str)> = line_starts(diff);
    let git_starts: Vec<usize> =
        lines.iter().filter(|(_, line)| line.starts_with("diff --git ")).map(|(start, _)| *start).collect();
    let starts = if git_starts.is_empty() {
        lines
            .windows(2)
            .filter(|pair| pair[0].1.starts_with("--- ") && pair[1].1.starts_with("+++ "))
            .map(|pair| pair[0].0)
            .collect()
    } else {
        git_starts
    };
    let mut sections = Vec::new();
    let first = starts.first().copied().unwrap_or(diff.len());
    if first > 0 {
        sections.push(FileSection { path: None, text: &diff[..first] });
    }
    for (i, start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(diff.len());
        let text = &diff[*start..end];
        sections.push(FileSection { path: section_path(text), text });
    }
    sections
}

/// Each line's byte offset and text (without its line break).
fn line_starts(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        lines.push((at, line.trim_end_matches(['\n', '\r'])));
        at += line.len();
    }
    lines
}

/// A section's path: the `+++` line's (its `b/` prefix removed), or the `---` line's when the
/// file is deleted, or else the `diff --git` header's `b/` path.
fn section_path(section: &str) -> Option<String> {
    let header_path = |line: &str, prefix: &str| -> Option<String> {
        let raw = line.strip_prefix(prefix)?.split('\t').next()?.trim().trim_matches('"');
        if raw == "/dev/null" || raw.is_empty() {
            return None;
        }
        Some(raw.strip_prefix("b/").or_else(|| raw.strip_prefix("a/")).unwrap_or(raw).to_string())
    };
    let lines: Vec<&str> = section.lines().collect();
    lines
        .iter()
        .find_map(|line| header_path(line, "+++ "))
        .or_else(|| lines.iter().find_map(|line| header_path(line, "--- ")))
        .or_else(|| {
            let header = lines.first()?.strip_prefix("diff --git ")?;
            let (_, new) = header.rsplit_once(" b/")?;
            Some(new.trim().trim_matches('"').to_string())
        })
}

/// The note appended after a diff cut at the cap.
pub(crate) fn truncation_marker(cap: usize, chars_left_out: usize, files_left_out: usize) -> String {
    format!(
        "\n[… diff truncated at {cap} characters: {chars_left_out} more characters in {files_left_out} more \
         file section(s) not shown …]\n"
    )
}

/// The diff as the judge sees it, capped at `cap` characters (see the module rules).
pub fn cap_diff(diff: &str, cap: usize) -> CappedDiff {
    let sections = split_diff(diff);
    let files_total = sections.iter().filter(|s| s.path.is_some()).count();
    let (tests, others): (Vec<&FileSection>, Vec<&FileSection>) =
        sections.iter().partition(|s| s.path.as_deref().is_some_and(is_test_file));
    let original_chars = diff.chars().count();
    let mut text = String::new();
    let mut shown_chars = 0;
    let mut files_whole = 0;
    let ordered: Vec<&FileSection> = others.into_iter().chain(tests).collect();
    for (i, section) in ordered.iter().enumerate() {
        let chars = section.text.chars().count();
        if shown_chars + chars <= cap {
            text.push_str(section.text);
            shown_chars += chars;
            files_whole += usize::from(section.path.is_some());
            continue;
        }
        let room = cap - shown_chars;
        let cut = section.text.char_indices().nth(room).map_or(section.text.len(), |(at, _)| at);
        text.push_str(&section.text[..cut]);
        shown_chars += room;
        let files_left_out = ordered[i..].iter().filter(|s| s.path.is_some()).count();
        text.push_str(&truncation_marker(cap, original_chars - shown_chars, files_left_out));
        let stats = DiffStats { original_chars, shown_chars, truncated: true, files_whole, files_total };
        return CappedDiff { text, stats };
    }
    CappedDiff { text, stats: DiffStats { original_chars, shown_chars, truncated: false, files_whole, files_total } }
}
