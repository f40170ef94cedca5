//! The scripted code-review agent: ranks a task's fixture findings by a seeded score, so better
//! "models" (bigger, more effort) surface true positives more often, yet every answer is
//! reproducible from (model, effort, task).

use serde::Serialize;

use super::det::{hash_u64, unit};
use super::fixtures::{self, Finding, ScriptedTask};
use super::usage::Effort;
use lightsout_swe_prbench::harness::prompts::{AGENT_RETRY_SUFFIX, AGENT_SYSTEM_PROMPT};

/// Prompts asking for this get a JSON array instead of markdown.
const JSON_REQUEST_MARKER: &str = "Return ONLY a valid JSON array";
/// Weight of the true-positive bonus before effort and model factors.
const TRUE_POSITIVE_BONUS: f64 = 0.35;
/// Penalty on fabricated findings at high effort: more thinking, fewer hallucinations.
const FABRICATION_PENALTY: f64 = 0.3;
/// At most this many added lines are commented on when no fixture matches.
const GENERIC_MAX_COMMENTS: usize = 3;

/// One review comment as the agent emits it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewComment {
    pub body: String,
    pub file: String,
    pub line: Option<u64>,
    pub severity: String,
}

/// The agent's full answer to `prompt` (markdown, or a JSON array when the prompt says
/// `Return ONLY a valid JSON array`, as the SWE-PRBench harness's prompts do). `effort` is `None` when the request set none.
pub fn agent_answer(model: &str, effort: Option<Effort>, prompt: &str) -> String {
    // A `sloppy` model answers a JSON request in markdown until told off by the protocol's
    // stricter retry instruction, so that the retry can be tested.
    let told_off = prompt.contains(lightsout_swe_prbench::harness::prompts::AGENT_RETRY_SUFFIX.trim());
    let json = prompt.contains(JSON_REQUEST_MARKER) && (!model.contains("sloppy") || told_off);
    review(model, effort, prompt, json)
}

/// Whether a request's system prompt is the SWE-PRBench reference harness's agent prompt
/// ([`AGENT_SYSTEM_PROMPT`]), whose answer must be a JSON array.
pub(crate) fn is_harness_agent(instructions: &str) -> bool {
    instructions.trim() == AGENT_SYSTEM_PROMPT.trim()
}

/// The agent's answer to the harness's agent call, whose user message `user` is a rendered
/// context (or, for the parse retry, one followed by [`AGENT_RETRY_SUFFIX`]): the JSON array
/// of `{"body", "file", "line", "severity"}` for the fixture task whose title occurs in it, bare
/// or in a `json` fence. A `sloppy` model answers in markdown until the retry suffix tells it
/// off, so that the harness's retry can be tested.
pub fn harness_agent_answer(model: &str, effort: Option<Effort>, user: &str) -> String {
    let json = !model.contains("sloppy") || user.contains(AGENT_RETRY_SUFFIX.trim());
    review(model, effort, user, json)
}

/// The review of the fixture task named in `prompt` (else a shallow one of its diff), as a JSON
/// array or in markdown.
fn review(model: &str, effort: Option<Effort>, prompt: &str, json: bool) -> String {
    match find_task(prompt) {
        Some(task) => {
            let comments: Vec<ReviewComment> = rank_findings(model, effort, task).into_iter().map(to_comment).collect();
            let fenced = hash_u64(&format!("{model}{}", task.task_id)).is_multiple_of(2);
            render(&comments, json, fenced)
        }
        None => render(&generic_review(prompt), json, false),
    }
}

/// The fixture task whose exact title occurs in the prompt; the longest title wins so a title
/// that is a prefix of another cannot shadow it.
fn find_task(prompt: &str) -> Option<&'static ScriptedTask> {
    fixtures::get()
        .scripted
        .iter()
        .filter(|task| !task.title.is_empty() && prompt.contains(&task.title))
        .max_by_key(|task| task.title.len())
}

/// The findings the agent reports for `task`, best first.
pub(crate) fn rank_findings<'a>(model: &str, effort: Option<Effort>, task: &'a ScriptedTask) -> Vec<&'a Finding> {
    let effort_key = effort.map_or("", Effort::as_str);
    let bonus = TRUE_POSITIVE_BONUS * effort_factor(effort) * model_factor(model);
    let penalize_fabrication = matches!(effort, Some(Effort::High | Effort::XHigh));
    let mut scored: Vec<(f64, &Finding)> = task
        .findings
        .iter()
        .map(|finding| {
            let mut score = unit(&format!("{model}|{effort_key}|{}|{}", task.task_id, finding.id));
            if finding.is_true_positive() {
                score += bonus;
            }
            if finding.fabricated && penalize_fabrication {
                score -= FABRICATION_PENALTY;
            }
            (score, finding)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    let count = 3 + (hash_u64(&format!("{model}{}", task.task_id)) % 3) as usize;
    scored.into_iter().take(count).map(|(_, finding)| finding).collect()
}

fn effort_factor(effort: Option<Effort>) -> f64 {
    match effort {
        Some(Effort::None | Effort::Minimal) => 0.4,
        Some(Effort::Low) => 0.7,
        None | Some(Effort::Medium) => 1.0,
        Some(Effort::High) => 1.3,
        Some(Effort::XHigh) => 1.5,
    }
}

/// Small models find fewer real bugs.
fn model_factor(model: &str) -> f64 {
    let model = model.to_lowercase();
    if ["mini", "haiku", "nano", "small"].iter().any(|tag| model.contains(tag)) {
        0.6
    } else {
        1.0
    }
}

fn to_comment(finding: &Finding) -> ReviewComment {
    ReviewComment {
        body: finding.body.clone(),
        file: finding.file.clone(),
        line: finding.line,
        severity: finding.severity.clone(),
    }
}

fn render(comments: &[ReviewComment], json: bool, fenced: bool) -> String {
    if json {
        // Serializing plain strings and integers cannot fail; the fallback keeps this panic-free.
        let array = serde_json::to_string_pretty(comments).unwrap_or_else(|_| "[]".to_string());
        return if fenced { format!("```json\n{array}\n```") } else { array };
    }
    if comments.is_empty() {
        return "No issues found.".to_string();
    }
    let mut out = String::from("# Review\n\n");
    for (i, c) in comments.iter().enumerate() {
        let location = match c.line {
            Some(line) => format!("{}:{line}", c.file),
            None => c.file.clone(),
        };
        out.push_str(&format!("{}. **[{}] {location}** — {}\n", i + 1, c.severity, c.body));
    }
    out
}

/// A shallow review of an unknown change: comments on the first added lines of the diff in the
/// prompt, locating each by the hunk headers.
pub(crate) fn generic_review(prompt: &str) -> Vec<ReviewComment> {
    let mut comments = Vec::new();
    let mut file = String::new();
    let mut next_line: Option<u64> = None;
    for raw in prompt.lines() {
        if let Some(path) = raw.strip_prefix("+++ ") {
            let path = path.trim();
            file = path.strip_prefix("b/").unwrap_or(path).to_string();
            next_line = None;
        } else if raw.starts_with("--- ") && next_line.is_none() {
            // Old-file header; the new-file header follows.
        } else if let Some(header) = raw.strip_prefix("@@ ") {
            next_line = hunk_new_start(header);
        } else if let Some(line) = next_line {
            if let Some(added) = raw.strip_prefix('+') {
                if !added.trim().is_empty() && comments.len() < GENERIC_MAX_COMMENTS {
                    comments.push(ReviewComment {
                        body: format!("Check this change: {}", added.trim()),
                        file: file.clone(),
                        line: Some(line),
                        severity: "P2".to_string(),
                    });
                }
                next_line = Some(line + 1);
            } else if raw.starts_with(' ') || raw.is_empty() {
                next_line = Some(line + 1);
            } else if !raw.starts_with('-') && !raw.starts_with('\\') {
                // Anything else ends the hunk (e.g. prose after the diff).
                next_line = None;
            }
        }
    }
    comments
}

/// The new-file start line of a hunk header body (`-a,b +c,d @@ ...` → c).
fn hunk_new_start(header: &str) -> Option<u64> {
    let new = header.split_whitespace().find_map(|part| part.strip_prefix('+'))?;
    new.split(',').next()?.parse().ok()
}

/// The marker mini-swe-agent waits for to end a run.
pub const SUBMIT_COMMAND: &str = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

/// The steps of the scripted tool-calling agent before it submits: looking at the change, and
/// writing the review.
pub(crate) const WORK_STEPS: u32 = 2;

/// A line of a task (e.g. in its description) that starts with this makes the scripted
/// tool-calling agent run the rest of the line instead of writing its review: how tests make a
/// real harness do what a hostile agent would (`ln -s /proc/self/environ review.md`).
pub const SCRIPTED_COMMAND_MARKER: &str = "lightsout-scripted-agent-command:";

/// The command a task's [`SCRIPTED_COMMAND_MARKER`] line asks for, if any.
fn scripted_command(prompt: &str) -> Option<String> {
    prompt
        .lines()
        .find_map(|line| line.trim_start().strip_prefix(SCRIPTED_COMMAND_MARKER))
        .map(|command| command.trim().to_string())
        .filter(|command| !command.is_empty())
}

/// One step of the scripted tool-calling agent: look at the change, write the review to
/// `review.md` (the same review the single-shot answer would give; or run the command the task's
/// [`SCRIPTED_COMMAND_MARKER`] line gives), then submit (from step [`WORK_STEPS`] on). Returns
/// the assistant's text and the bash command to run; an agent that ends its run with an answer
/// instead (Codex) is given the text alone at the submit step.
pub fn agentic_step(model: &str, effort: Option<Effort>, prompt: &str, step: u32) -> (String, String) {
    match step {
        0 => ("I'll look at the change under review first.".into(), "git status --short && git diff --stat".into()),
        1 => match scripted_command(prompt) {
            Some(command) => ("Doing what the task says.".into(), command),
            None => {
                let review = agent_answer(model, effort, prompt);
                (
                    "I've read the change; writing my findings to review.md.".into(),
                    format!("cat > review.md <<'LIGHTSOUT_REVIEW'\n{review}\nLIGHTSOUT_REVIEW"),
                )
            }
        },
        _ => ("The review is written.".into(), SUBMIT_COMMAND.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "Review this.\n```diff\ndiff --git a/src/q.ts b/src/q.ts\n--- a/src/q.ts\n+++ b/src/q.ts\n@@ -10,3 +10,5 @@ class Q {\n   keep();\n-  old();\n+  fresh();\n   keep2();\n+  another();\n+\n+  third();\n+  fourth();\n```\n";

    #[test]
    fn a_task_can_script_the_agents_command() {
        let prompt = format!("Title: t\nDescription:\n  {SCRIPTED_COMMAND_MARKER} ln -s /etc/shadow review.md \nmore");
        assert_eq!(agentic_step("m", None, &prompt, 1).1, "ln -s /etc/shadow review.md");
        assert_eq!(agentic_step("m", None, &prompt, 0).1, agentic_step("m", None, "", 0).1);
        assert_eq!(agentic_step("m", None, &prompt, 2).1, SUBMIT_COMMAND);
        let blank = format!("{SCRIPTED_COMMAND_MARKER}   \n{DIFF}");
        assert!(agentic_step("m", None, &blank, 1).1.starts_with("cat > review.md <<'LIGHTSOUT_REVIEW'\n"));
    }

    #[test]
    fn generic_review_tracks_hunk_lines() {
        let comments = generic_review(DIFF);
        let located: Vec<_> = comments.iter().map(|c| (c.file.as_str(), c.line, c.body.as_str())).collect();
        assert_eq!(
            located,
            vec![
                ("src/q.ts", Some(11), "Check this change: fresh();"),
                ("src/q.ts", Some(13), "Check this change: another();"),
                ("src/q.ts", Some(15), "Check this change: third();"),
            ]
        );
        let markdown = agent_answer("m", None, DIFF);
        assert!(
            markdown.starts_with("# Review\n\n1. **[P2] src/q.ts:11** — Check this change: fresh();"),
            "{markdown}"
        );
        assert_eq!(agent_answer("m", None, "no diff here"), "No issues found.");
        assert_eq!(agent_answer("m", None, "Return ONLY a valid JSON array. nothing"), "[]");
    }

    #[test]
    fn fixture_task_ranking_is_deterministic_and_sized() {
        let fixtures = fixtures::get();
        let task = &fixtures.scripted[0];
        let prompt = format!("Title: {}\nReview the diff.", task.title);
        let answer = agent_answer("gpt-test", Some(Effort::High), &prompt);
        assert_eq!(answer, agent_answer("gpt-test", Some(Effort::High), &prompt));
        let ranked = rank_findings("gpt-test", Some(Effort::High), task);
        let expected = (3 + hash_u64(&format!("gpt-test{}", task.task_id)) % 3) as usize;
        assert_eq!(ranked.len(), expected.min(task.findings.len()));
        assert!(answer.starts_with("# Review\n\n1. "));
        assert!(answer.contains(&ranked[0].body));
    }

    #[test]
    fn json_mode_parses_fenced_or_bare() {
        let task = &fixtures::get().scripted[0];
        let prompt = format!("Title: {}\nReturn ONLY a valid JSON array of findings.", task.title);
        let mut saw = (false, false);
        for model in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            let answer = agent_answer(model, None, &prompt);
            let fenced = answer.starts_with("```json\n");
            if fenced {
                saw.0 = true
            } else {
                saw.1 = true
            }
            let body = answer.trim_start_matches("```json\n").trim_end_matches("\n```");
            let parsed: Vec<serde_json::Value> = serde_json::from_str(body).expect("json array");
            assert_eq!(parsed.len(), rank_findings(model, None, task).len());
            assert!(parsed[0]["body"].is_string() && parsed[0]["severity"].is_string());
        }
        assert!(saw.0 && saw.1, "both renderings occur across models");
    }

    #[test]
    fn effort_and_size_raise_true_positive_rate() {
        // Averaged over many model names, the strong configuration ranks more true positives.
        let fixtures = fixtures::get();
        let hits = |suffix: &str, effort| {
            let mut hits = 0;
            for i in 0..40 {
                for task in &fixtures.scripted {
                    let model = format!("m{i}{suffix}");
                    hits += rank_findings(&model, effort, task).iter().filter(|f| f.is_true_positive()).count();
                }
            }
            hits
        };
        assert!(hits("-large", Some(Effort::XHigh)) > hits("-mini", Some(Effort::Minimal)));
    }
}
