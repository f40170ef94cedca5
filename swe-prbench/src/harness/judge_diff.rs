//! The diff the reference harness shows its judge (`judge.py:_build_structured_diff_snippet`):
//! the patch cut into per-file chunks at `diff --git ` lines (anything before the first is
//! dropped), non-test files first, then by changed lines + 3 × logic markers, descending (ties
//! keep diff order); chunks are taken greedily while the total stays within 12,000 characters,
//! a chunk that does not fit is skipped and the next one tried; taken chunks are joined by a
//! blank line. With nothing taken, the patch's first 12,000 characters. Lengths are in
//! characters (Unicode scalar values), as Python counts them.

use super::python;

/// The judge's diff budget, in characters.
pub const JUDGE_DIFF_MAX_CHARS: usize = 12_000;
const LOGIC_MARKERS: [&str; 9] =
    ["if ", "switch ", "case ", "return ", "error", "panic", "parse", "timeout", "duration"];
const TEST_PATH_MARKERS: [&str; 6] = ["test/", "tests/", "_test.", ".test.", ".spec.", "__tests__/"];

struct Chunk {
    raw: String,
    chars: usize,
    is_test: bool,
    weight: usize,
}

/// The text after the first ` b/` that has something after it (`diff --git a/x b/x` → `x`).
fn chunk_path(header: &str) -> &str {
    header.match_indices(" b/").map(|(at, tag)| &header[at + tag.len()..]).find(|rest| !rest.is_empty()).unwrap_or("")
}

fn chunk(path: &str, lines: &[&str]) -> Chunk {
    let raw = lines.join("\n");
    let changed = python::splitlines(&raw)
        .iter()
        .filter(|l| (l.starts_with('+') || l.starts_with('-')) && !l.starts_with("+++") && !l.starts_with("---"))
        .count();
    let lowered = raw.to_lowercase();
    let markers = LOGIC_MARKERS.iter().filter(|m| lowered.contains(*m)).count();
    let path = path.to_lowercase();
    Chunk {
        chars: raw.chars().count(),
        raw,
        is_test: TEST_PATH_MARKERS.iter().any(|m| path.contains(m)),
        weight: changed + 3 * markers,
    }
}

fn chunks(diff_patch: &str) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut path = "";
    let mut lines: Vec<&str> = Vec::new();
    for line in python::splitlines(diff_patch) {
        if line.starts_with("diff --git ") {
            if !lines.is_empty() {
                out.push(chunk(path, &lines));
            }
            path = chunk_path(line);
            lines = vec![line];
        } else if !lines.is_empty() {
            lines.push(line);
        }
    }
    if !lines.is_empty() {
        out.push(chunk(path, &lines));
    }
    out
}

/// The diff snippet of `diff_patch` within `max_chars` (see the module docs).
pub fn judge_diff_snippet(diff_patch: &str, max_chars: usize) -> String {
    let mut chunks = chunks(diff_patch);
    chunks.sort_by(|a, b| a.is_test.cmp(&b.is_test).then(b.weight.cmp(&a.weight)));
    let mut taken: Vec<&str> = Vec::new();
    let mut used = 0;
    for chunk in chunks.iter().filter(|c| !c.raw.is_empty()) {
        let projected = used + chunk.chars + if taken.is_empty() { 0 } else { 2 };
        if projected > max_chars {
            continue;
        }
        taken.push(&chunk.raw);
        used = projected;
    }
    if taken.is_empty() {
        return diff_patch.chars().take(max_chars).collect();
    }
    taken.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_go_last_and_oversized_chunks_are_skipped() {
        let diff = "preamble\ndiff --git a/tests/t.py b/tests/t.py\n+x\ndiff --git a/big.py b/big.py\n+".to_string()
            + &"y".repeat(50)
            + "\ndiff --git a/a.py b/a.py\n+if x: return 1\n";
        let snippet = judge_diff_snippet(&diff, 60);
        assert_eq!(snippet, "diff --git a/a.py b/a.py\n+if x: return 1");
        let roomy = judge_diff_snippet(&diff, 1000);
        let big = format!("diff --git a/big.py b/big.py\n+{}", "y".repeat(50));
        let expected =
            format!("diff --git a/a.py b/a.py\n+if x: return 1\n\n{big}\n\ndiff --git a/tests/t.py b/tests/t.py\n+x");
        assert_eq!(roomy, expected);
        assert_eq!(judge_diff_snippet("no header at all", 5), "no h".to_string() + "e");
    }
}
