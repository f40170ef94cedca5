//! Agents that act through their text rather than tool calls (mini-swe-agent): each answer
//! carries a fenced shell block, ```` ```bash ````, which the harness runs. Older
//! mini-swe-agent versions also used ```` ```sh ```` and ```` ```mswea_bash_command ````.

/// Info strings of the fences whose content the harness runs.
const SHELL_FENCES: &[&str] = &["bash", "sh", "mswea_bash_command"];

/// The content of each fenced shell block in `text`, in order. Other fenced blocks are skipped
/// whole, so a fence inside them is not taken for a command; an unclosed block runs to the end.
pub(crate) fn shell_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(line_end) = after.find('\n') else { break };
        let info = after[..line_end].trim();
        let body = &after[line_end + 1..];
        // The closing fence starts a line.
        let (content, next) = match body.strip_prefix("```") {
            Some(next) => ("", next),
            None => match body.find("\n```") {
                Some(end) => (&body[..end], &body[end + 4..]),
                None => (body.strip_suffix('\n').unwrap_or(body), ""),
            },
        };
        if SHELL_FENCES.contains(&info) {
            let content = content.strip_suffix('\r').unwrap_or(content);
            if !content.trim().is_empty() {
                blocks.push(content.to_string());
            }
        }
        rest = next;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_shell_fences_only() {
        let text = "THOUGHT: look.\n\n```python\nprint('```bash')\n```\n\n```bash\nls -la\n```\n\n```sh\ncat a\n```\n```mswea_bash_command\nrg x\n```\n```\nplain\n```";
        assert_eq!(shell_blocks(text), vec!["ls -la", "cat a", "rg x"]);
        assert_eq!(shell_blocks("```bash\ncat <<'EOF' > r.md\n# R\nEOF\n```"), vec!["cat <<'EOF' > r.md\n# R\nEOF"]);
        assert_eq!(shell_blocks("```bash\nunclosed\n"), vec!["unclosed"]);
        assert!(shell_blocks("no blocks ``` here").is_empty());
    }
}
