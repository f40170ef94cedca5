//! Our rules for what counts as a finding in a markdown review, over the lines that
//! [`super::markdown`] classified: sections split at headings and section labels, the top-level
//! list items of finding sections, per-finding headings, placeholders, and what is left over
//! (stray fences and prose, where a JSON answer may hide).

use std::ops::Range;

use super::location::locate;
use super::markdown::{dedent, scan, split_indent, LineKind, ListKind, MdLine};
use super::rank_of;
use super::severity::{labelled_severity, leading_severity};
use super::titles::{section_label, Title};
use super::{Finding, Severity};

/// The level given to label lines (`**Summary:**`): deeper than any heading, so a label's
/// section ends at the next label or heading.
const LABEL_LEVEL: usize = 7;

/// A heading (or label) and the lines up to the next one.
struct Section {
    /// 0 for the text before the first heading, 1–6 for headings, [`LABEL_LEVEL`] for labels.
    level: usize,
    /// The heading's (or label's) first line.
    head: Option<usize>,
    title: String,
    /// The lines after the heading (after a setext heading's underline) up to the next heading
    /// or label.
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
            LineKind::Heading { level, text, last } => Some((*level, text.clone(), *last, false)),
            LineKind::Text if line.indent == 0 && after_paragraph_break(lines, index) => {
                section_label(line.raw).map(|title| (LABEL_LEVEL, title, index, true))
            }
            _ => None,
        };
        if let Some((level, title, last, label)) = heading {
            if let Some(previous) = sections.last_mut() {
                previous.body.end = index;
            }
            sections.push(Section { level, head: Some(index), title, body: last + 1..last + 1, label });
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

/// What the markdown parser found.
pub(super) struct MarkdownReview {
    pub(super) findings: Vec<Finding>,
    pub(super) warnings: Vec<String>,
    /// Contents of fenced blocks outside every finding.
    pub(super) stray_fences: Vec<String>,
    /// The lines outside every finding and every fence.
    pub(super) stray_text: String,
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
///   see `titles::NON_FINDING_TITLES`) and every section nested under it yields nothing: its list
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
pub(super) fn parse_markdown(text: &str) -> MarkdownReview {
    let blocks = scan(text);
    let fences = blocks.fences;
    let mut lines = blocks.lines;
    mark_enumerators(&mut lines);
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
                section.body.start..span_end,
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
            let start = sections[*index].body.start;
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

/// Marks as numbered list items the text lines (outside block quotes, indented code and HTML)
/// that open with an enumerator CommonMark does not read as a list item there:
///
/// * `(1)`;
/// * a bold enumerator, `**1. Off-by-one**` (models often write their ranked list that way);
/// * `2.` or `2)` continuing a paragraph (CommonMark lets only a list starting at 1 interrupt
///   one), or indented four columns or more past a paragraph.
///
/// An enumerator has at most 9 digits and is followed by whitespace or the end of the line (a
/// space, for a bold one), so `1.5x` and `**1.**` are text.
fn mark_enumerators(lines: &mut [MdLine<'_>]) {
    for line in lines.iter_mut().filter(|line| !line.literal && matches!(line.kind, LineKind::Text)) {
        if let Some(item) = enumerator_item(line.raw) {
            line.kind = item;
        }
    }
}

fn enumerator_item(raw: &str) -> Option<LineKind> {
    let (indent, rest) = split_indent(raw);
    let rest = rest.trim_end();
    let bytes = rest.as_bytes();
    let digits_from = |at: usize| bytes[at.min(bytes.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
    let plain = digits_from(0);
    let (marker, content, bold) = if (1..=9).contains(&plain)
        && matches!(bytes.get(plain), Some(b'.' | b')'))
        && bytes.get(plain + 1).is_none_or(|b| matches!(b, b' ' | b'\t'))
    {
        (plain + 1, rest[plain + 1..].to_string(), false)
    } else if bytes.first() == Some(&b'(') {
        let digits = digits_from(1);
        let space_or_end = bytes.get(digits + 2).is_none_or(|b| matches!(b, b' ' | b'\t'));
        if !((1..=9).contains(&digits) && bytes.get(1 + digits) == Some(&b')') && space_or_end) {
            return None;
        }
        (digits + 2, rest[digits + 2..].to_string(), false)
    } else if rest.starts_with("**") {
        let digits = digits_from(2);
        if !((1..=9).contains(&digits)
            && matches!(bytes.get(2 + digits), Some(b'.' | b')'))
            && bytes.get(3 + digits).is_some_and(|b| *b == b' '))
        {
            return None;
        }
        (0, format!("**{}", rest[3 + digits..].trim_start()), true)
    } else {
        return None;
    };
    let spaces = content.len() - content.trim_start_matches([' ', '\t']).len();
    let gap = if spaces == 0 || spaces > 4 { 1 } else { spaces };
    Some(LineKind::Item {
        kind: ListKind::Numbered,
        content_col: indent + marker + gap,
        content: content.trim().to_string(),
        bold,
    })
}
