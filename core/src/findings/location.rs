//! File and line references: the file and line a markdown finding points at ([`locate`]).

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
pub(super) fn locate(prose: &str, code: &str) -> (Option<String>, Option<i64>) {
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
