//! The CommonMark block structure of a review, read with pulldown-cmark: one classified line per
//! source line (as [`str::lines`] splits them), which is what the rules of [`super::rules`] walk.
//!
//! Block recognition is pulldown-cmark's (no extensions: tables, footnotes and the like are
//! paragraphs). What this module adds on top of its events:
//!
//! * Only blocks outside block quotes count: a quoted heading, list or fence is quoted text.
//! * Only headings outside list items split the review into sections; a heading inside an item
//!   is part of the item's text.
//! * Indented code blocks are not code for our rules (they are prose, as in a review they are
//!   usually over-indented paragraphs); fenced code blocks are.
//! * A fenced block opened inside a list item runs to its closing fence even through lines
//!   indented less than the item's text (models paste code unindented under an indented fence),
//!   or, with no closing fence, to the end of the review. CommonMark would end the item, and the
//!   fence with it, at the first such line. The fence is repaired by indenting those lines for
//!   the parser and parsing again, at most [`MAX_FENCE_REPAIRS`] times.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// At most this many under-indented fences in list items are repaired (each costs one more
/// parse of the review); past that, CommonMark's reading of the rest stands.
pub(super) const MAX_FENCE_REPAIRS: usize = 16;

/// Marker kinds of list items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    /// `1.`, `1)`, `(1)`, or a bold enumerator `**1. Title**`.
    Numbered,
    /// `-`, `*`, `+`.
    Bullet,
}

#[derive(Debug)]
pub(super) enum LineKind {
    Blank,
    /// A fence delimiter or a line inside a fenced block: never an item, heading or label.
    Code,
    Heading {
        level: usize,
        /// The heading's text as written (markdown kept, `#`s and closing `#`s dropped).
        text: String,
        /// The heading's last line (a setext heading's underline); the lines after the first
        /// are [`LineKind::Blank`].
        last: usize,
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

pub(super) struct MdLine<'a> {
    pub(super) raw: &'a str,
    /// Leading whitespace in columns (a tab advances to the next multiple of 4).
    pub(super) indent: usize,
    pub(super) kind: LineKind,
    /// The line is inside a block quote, an indented code block or an HTML block: text that no
    /// rule reads as a list item.
    pub(super) literal: bool,
}

/// A fenced code block: the opening line and the closing line (`None` when never closed).
pub(super) struct FenceBlock {
    pub(super) open: usize,
    pub(super) close: Option<usize>,
}

/// A review's lines, classified, and its fenced blocks in order.
pub(super) struct Blocks<'a> {
    pub(super) lines: Vec<MdLine<'a>>,
    pub(super) fences: Vec<FenceBlock>,
}

/// A fence in a list item that CommonMark ends early: the lines after it, from `from`, up to its
/// closing fence are indented to `col` for the next parse.
struct Repair {
    from: usize,
    col: usize,
    fence: (char, usize),
}

/// Classifies every line of `text` (see the module docs).
pub(super) fn scan(text: &str) -> Blocks<'_> {
    let raws: Vec<&str> = text.lines().collect();
    if raws.is_empty() {
        return Blocks { lines: Vec::new(), fences: Vec::new() };
    }
    let mut source: Vec<Cow<'_, str>> = Vec::new();
    let mut repairs = 0;
    loop {
        let joined;
        let current = if source.is_empty() {
            text
        } else {
            joined = source.join("\n");
            joined.as_str()
        };
        let (blocks, repair) = classify(current, &raws);
        let Some(repair) = repair.filter(|_| repairs < MAX_FENCE_REPAIRS) else {
            return blocks;
        };
        if source.is_empty() {
            source = raws.iter().map(|raw| Cow::Borrowed(*raw)).collect();
        }
        let (ch, len) = repair.fence;
        let close = (repair.from..raws.len()).find(|&index| is_fence_close(raws[index], ch, len));
        let indent = " ".repeat(repair.col);
        for (index, line) in
            source.iter_mut().enumerate().take(close.map_or(raws.len(), |close| close + 1)).skip(repair.from)
        {
            *line = if Some(index) == close {
                Cow::Owned(format!("{indent}{}", raws[index].trim()))
            } else {
                Cow::Owned(format!("{indent}{line}"))
            };
        }
        repairs += 1;
    }
}

/// One parse: the lines of `raws` classified by the events of `source` (the same lines, some
/// perhaps indented by a repair), and the first fence to repair, if any.
fn classify<'a>(source: &str, raws: &[&'a str]) -> (Blocks<'a>, Option<Repair>) {
    let starts: Vec<usize> = std::iter::once(0).chain(source.match_indices('\n').map(|(at, _)| at + 1)).collect();
    let last_line = raws.len() - 1;
    let line_of = |offset: usize| (starts.partition_point(|&start| start <= offset) - 1).min(last_line);

    let mut kinds: Vec<LineKind> =
        raws.iter().map(|raw| if raw.trim().is_empty() { LineKind::Blank } else { LineKind::Text }).collect();
    let mut literal = vec![false; raws.len()];
    let mut fences = Vec::new();
    let mut repair = None;
    let mut quotes = 0usize;
    let mut items = 0usize;
    let mut ordered: Vec<bool> = Vec::new();
    // An open heading: its level, its source range and the range of its content.
    let mut heading: Option<(usize, Range<usize>, Option<Range<usize>>)> = None;

    for (event, range) in Parser::new_ext(source, Options::empty()).into_offset_iter() {
        if let Some((_, _, content)) = heading.as_mut() {
            if !matches!(event, Event::End(TagEnd::Heading(_))) {
                *content = Some(match content.take() {
                    Some(content) => content.start.min(range.start)..content.end.max(range.end),
                    None => range.clone(),
                });
                continue;
            }
        }
        match event {
            Event::End(TagEnd::BlockQuote(_)) => quotes = quotes.saturating_sub(1),
            Event::Start(Tag::List(first)) => ordered.push(first.is_some()),
            Event::End(TagEnd::List(_)) => {
                ordered.pop();
            }
            Event::Start(Tag::Item) => {
                if quotes == 0 {
                    let line = line_of(range.start);
                    let numbered = ordered.last().copied().unwrap_or(false);
                    if !matches!(kinds[line], LineKind::Item { .. }) {
                        if let Some(item) = item_line(raws[line], numbered) {
                            kinds[line] = item;
                        }
                    }
                }
                items += 1;
            }
            Event::End(TagEnd::Item) => items = items.saturating_sub(1),
            Event::Start(Tag::BlockQuote(_) | Tag::CodeBlock(CodeBlockKind::Indented) | Tag::HtmlBlock) => {
                literal[line_of(range.start)..=line_of(range.end.saturating_sub(1).max(range.start))].fill(true);
                if matches!(event, Event::Start(Tag::BlockQuote(_))) {
                    quotes += 1;
                }
            }
            Event::Start(Tag::Heading { level, .. }) if quotes == 0 && items == 0 => {
                heading = Some((level as usize, range, None));
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, range, content)) = heading.take() {
                    let first = line_of(range.start);
                    let last = line_of(range.end.saturating_sub(1).max(range.start));
                    let text = content.map_or("", |content| &source[content]).trim().to_string();
                    kinds[first] = LineKind::Heading { level, text, last };
                    for kind in &mut kinds[first + 1..=last] {
                        *kind = LineKind::Blank;
                    }
                }
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) if quotes == 0 => {
                let open = line_of(range.start);
                let last = line_of(range.end.saturating_sub(1).max(range.start));
                for kind in &mut kinds[open..=last] {
                    if !matches!(kind, LineKind::Item { .. }) {
                        *kind = LineKind::Code;
                    }
                }
                let fence_at = range.start + leading_blank_bytes(&source[range.start..]);
                let delimiter = &source[fence_at..];
                let ch = delimiter.chars().next().unwrap_or('`');
                let len = delimiter.chars().take_while(|&c| c == ch).count();
                let closed = last > open && is_fence_close(raws[last], ch, len);
                fences.push(FenceBlock { open, close: closed.then_some(last) });
                if !closed && items > 0 && last < last_line && repair.is_none() {
                    let col = columns(&source[starts[open]..fence_at]);
                    repair = Some(Repair { from: last + 1, col, fence: (ch, len) });
                }
            }
            Event::Rule if quotes == 0 => {
                let line = line_of(range.start);
                if !matches!(kinds[line], LineKind::Item { .. }) {
                    kinds[line] = LineKind::Break;
                }
            }
            _ => {}
        }
    }
    let lines = raws
        .iter()
        .zip(kinds)
        .zip(literal)
        .map(|((raw, kind), literal)| MdLine { raw, indent: split_indent(raw).0, kind, literal })
        .collect();
    (Blocks { lines, fences }, repair)
}

/// The [`LineKind::Item`] of a line pulldown-cmark starts a list item on: the marker (`-`, `*`,
/// `+`, or digits and `.`/`)`) after the indent, then the item's text. The text starts one column
/// after the marker plus the spaces after it, or just one column when there are none or more
/// than four (the rest being an indented code block), as in CommonMark.
fn item_line(raw: &str, numbered: bool) -> Option<LineKind> {
    let (indent, rest) = split_indent(raw);
    let bytes = rest.as_bytes();
    let marker = if numbered {
        let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        (digits > 0 && matches!(bytes.get(digits), Some(b'.' | b')'))).then_some(digits + 1)?
    } else {
        matches!(bytes.first(), Some(b'-' | b'*' | b'+')).then_some(1)?
    };
    let content = &rest[marker..];
    let spaces = content.len() - content.trim_start_matches([' ', '\t']).len();
    let gap = if spaces == 0 || spaces > 4 { 1 } else { spaces };
    let kind = if numbered { ListKind::Numbered } else { ListKind::Bullet };
    Some(LineKind::Item { kind, content_col: indent + marker + gap, content: content.trim().to_string(), bold: false })
}

/// Whether a line closes a fence of `len` `ch`s: at least as many of them, at any indent, and
/// nothing else.
fn is_fence_close(raw: &str, ch: char, len: usize) -> bool {
    let rest = raw.trim();
    let run = rest.chars().take_while(|&c| c == ch).count();
    run >= len && rest[run * ch.len_utf8()..].trim().is_empty()
}

fn leading_blank_bytes(text: &str) -> usize {
    text.len() - text.trim_start_matches([' ', '\t']).len()
}

/// The width of `text` in columns (a tab advances to the next multiple of 4).
fn columns(text: &str) -> usize {
    text.chars().fold(0, |cols, c| if c == '\t' { (cols / 4 + 1) * 4 } else { cols + 1 })
}

/// Leading whitespace in columns, and the rest of the line.
pub(super) fn split_indent(raw: &str) -> (usize, &str) {
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
pub(super) fn dedent(raw: &str, cols: usize) -> &str {
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
