//! The scripted SWE-PRBench judge, speaking the reference harness's protocol: it reads the user
//! message of [`lightsout_swe_prbench::harness::judge_message::judge_user_message`] (diff, ground
//! truth, agent comments) and answers in the schema
//! [`lightsout_swe_prbench::harness::verdict::judge_output`] reads.
//!
//! Labels by word overlap ([`jaccard`]) with the human comments: CONFIRMED naming the most
//! similar human comment (the first on ties) when the overlap is at least 0.25; else FABRICATED
//! when the comment names a file that is not among the diff's files; else PLAUSIBLE.
//! Actionability: 4 for P0, 3 for P1, 2 otherwise, one more for a body of 120+ characters. A
//! human comment is CAUGHT by the first agent comment CONFIRMED against it, else MISSED.

use serde::Serialize;

use super::det::normalize_ws;
use super::judge::{answers_prose, jaccard, PROSE_ANSWER};

/// Minimum word overlap ([`jaccard`]) for a CONFIRMED label.
pub(crate) const CONFIRM_THRESHOLD: f64 = 0.25;
/// Comments at least this long (in characters) are one actionability point more actionable.
pub(crate) const DETAILED_CHARS: usize = 120;

const DIFF_OPEN: &str = "## Diff\n```diff\n";
const HUMAN_HEADING: &str = "## Human Expert Review Comments (Ground Truth)\n";
const AGENT_HEADING: &str = "## AI Agent Review Comments (To Evaluate)\n";
/// What the harness prints for a comment with no file.
const NO_FILE: &str = "general";
const ENTRY_START: &str = "- comment_id: ";
/// Entries are separated by a blank line.
const ENTRY_SEPARATOR: &str = "\n\n";

/// One comment as the judge message lists it, every member as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ListedComment {
    id: String,
    file: String,
    severity: String,
    body: String,
}

/// The judge message taken apart.
#[derive(Debug, Default, PartialEq, Eq)]
struct JudgeMessage<'a> {
    diff: &'a str,
    human: Vec<ListedComment>,
    agent: Vec<ListedComment>,
}

#[derive(Debug, Serialize)]
struct Classification {
    comment_id: String,
    classification: &'static str,
    matched_human_comment_id: Option<String>,
    actionability_score: u8,
    reasoning: String,
}

#[derive(Debug, Serialize)]
struct HumanStatus {
    comment_id: String,
    status: &'static str,
    matched_agent_comment_id: Option<String>,
}

#[derive(Debug, Serialize)]
struct Answer {
    agent_classifications: Vec<Classification>,
    human_comment_statuses: Vec<HumanStatus>,
}

/// The judge's answer to the harness's judge user message `user`: the JSON object of the
/// harness's schema (see the module docs), or prose for `malformed`/`broken` models (see
/// [`answers_prose`]).
pub fn harness_judge_answer(model: &str, user: &str, first_attempt: bool) -> String {
    if answers_prose(model, first_attempt) {
        return PROSE_ANSWER.to_string();
    }
    let message = parse_message(user);
    let diff_files = diff_files(message.diff);
    let agent_classifications: Vec<Classification> =
        message.agent.iter().map(|comment| classify(comment, &message.human, &diff_files)).collect();
    let human_comment_statuses = message
        .human
        .iter()
        .map(|human| {
            let catcher = agent_classifications.iter().find(|c| {
                c.classification == "CONFIRMED" && c.matched_human_comment_id.as_deref() == Some(human.id.as_str())
            });
            HumanStatus {
                comment_id: human.id.clone(),
                status: if catcher.is_some() { "CAUGHT" } else { "MISSED" },
                matched_agent_comment_id: catcher.map(|c| c.comment_id.clone()),
            }
        })
        .collect();
    let answer = Answer { agent_classifications, human_comment_statuses };
    // Strings, integers and options always serialize; the fallback only keeps this panic-free.
    serde_json::to_string(&answer).unwrap_or_default()
}

fn classify(comment: &ListedComment, human: &[ListedComment], diff_files: &[&str]) -> Classification {
    let best = human.iter().map(|h| (h, jaccard(&comment.body, &h.body))).fold(
        None,
        |best: Option<(&ListedComment, f64)>, (h, overlap)| match best {
            Some((_, top)) if top >= overlap => best,
            _ => Some((h, overlap)),
        },
    );
    let file = strip_git_prefix(&comment.file);
    let named_file = Some(file).filter(|f| !f.is_empty() && *f != NO_FILE);
    let (classification, matched, reasoning) = match (best, named_file) {
        (Some((h, overlap)), _) if overlap >= CONFIRM_THRESHOLD => {
            ("CONFIRMED", Some(h.id.clone()), format!("Word overlap with {} is {overlap:.2}.", h.id))
        }
        (_, Some(file)) if !diff_files.contains(&file) => ("FABRICATED", None, format!("{file} is not in the diff.")),
        _ => ("PLAUSIBLE", None, "No human comment raises this.".to_string()),
    };
    Classification {
        comment_id: comment.id.clone(),
        classification,
        matched_human_comment_id: matched,
        actionability_score: actionability(&comment.severity, &comment.body),
        reasoning,
    }
}

/// 4 for P0, 3 for P1, 2 otherwise; one more for a detailed body.
pub(crate) fn actionability(severity: &str, body: &str) -> u8 {
    let base = match severity.trim() {
        "P0" => 4,
        "P1" => 3,
        _ => 2,
    };
    base + u8::from(body.chars().count() >= DETAILED_CHARS)
}

/// Identifies one judging, for counting attempts: the same ground truth and agent comments are
/// the same judging whatever the model's earlier answer was.
pub(crate) fn harness_attempt_key(model: &str, user: &str) -> String {
    let (human, agent) = sections(user);
    format!("{model}\u{0}{}\u{0}{}", normalize_ws(human), normalize_ws(agent))
}

/// The diff, the ground-truth section's entries and the agent section's entries (each without
/// its heading); missing parts are empty.
fn sections(message: &str) -> (&str, &str) {
    let Some(human_start) = message.find(HUMAN_HEADING).map(|i| i + HUMAN_HEADING.len()) else {
        return ("", "");
    };
    let rest = &message[human_start..];
    // The sections are joined by a blank line, so the heading follows "\n\n".
    match rest.find(&format!("\n\n{AGENT_HEADING}")) {
        Some(end) => (&rest[..end], &rest[end + 2 + AGENT_HEADING.len()..]),
        None => (rest, ""),
    }
}

fn parse_message(message: &str) -> JudgeMessage<'_> {
    let diff = message
        .find(DIFF_OPEN)
        .map(|start| {
            let diff = &message[start + DIFF_OPEN.len()..];
            let end = diff.find(&format!("\n```\n\n{HUMAN_HEADING}")).unwrap_or(diff.len());
            &diff[..end]
        })
        .unwrap_or_default();
    let (human, agent) = sections(message);
    JudgeMessage { diff, human: entries(human, "severity"), agent: entries(agent, "severity_claimed") }
}

/// The entries of one section. An entry starts at the section's start or after a blank line,
/// with a well-formed header (`- comment_id:`, `file:`, `line:`, the severity line, `body:`);
/// its body runs to the next entry or the section's end, so bodies may span lines and hold
/// blank lines.
fn entries(section: &str, severity_key: &str) -> Vec<ListedComment> {
    let mut starts: Vec<(usize, Header<'_>)> = Vec::new();
    let mut at = 0;
    while let Some(offset) = section[at..].find(ENTRY_START) {
        let start = at + offset;
        if start == 0 || section[..start].ends_with(ENTRY_SEPARATOR) {
            if let Some(header) = header(&section[start..], severity_key) {
                starts.push((start, header));
            }
        }
        at = start + ENTRY_START.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, (start, header))| {
            let body_start = start + header.len;
            let body = match starts.get(i + 1) {
                Some((next, _)) => section[body_start..*next].strip_suffix(ENTRY_SEPARATOR).unwrap_or_default(),
                None => section[body_start..].trim_end_matches('\n'),
            };
            ListedComment {
                id: header.id.to_string(),
                file: header.file.to_string(),
                severity: header.severity.to_string(),
                body: body.to_string(),
            }
        })
        .collect()
}

/// An entry's header lines.
struct Header<'a> {
    id: &'a str,
    file: &'a str,
    severity: &'a str,
    /// Bytes from the entry's start to its body.
    len: usize,
}

fn header<'a>(entry: &'a str, severity_key: &str) -> Option<Header<'a>> {
    let mut rest = entry;
    let mut field = |prefix: &str| -> Option<&'a str> {
        let after = rest.strip_prefix(prefix)?;
        let end = after.find('\n')?;
        rest = &after[end + 1..];
        Some(&after[..end])
    };
    let id = field(ENTRY_START)?;
    let file = field("  file: ")?;
    field("  line: ")?;
    let severity = field(&format!("  {severity_key}: "))?;
    let body = rest.strip_prefix("  body: ")?;
    Some(Header { id, file, severity, len: entry.len() - body.len() })
}

/// The files a unified diff touches, from its `diff --git`, `---` and `+++` lines.
pub(crate) fn diff_files(diff: &str) -> Vec<&str> {
    let mut files = Vec::new();
    for line in diff.lines() {
        let paths: Vec<&str> = if let Some(header) = line.strip_prefix("diff --git ") {
            header.split_whitespace().collect()
        } else if let Some(path) = line.strip_prefix("--- ").or_else(|| line.strip_prefix("+++ ")) {
            path.split('\t').next().into_iter().collect()
        } else {
            continue;
        };
        files.extend(paths.into_iter().map(strip_git_prefix).filter(|p| !p.is_empty() && *p != "/dev/null"));
    }
    files
}

pub(crate) fn strip_git_prefix(path: &str) -> &str {
    let path = path.trim();
    path.strip_prefix("a/").or_else(|| path.strip_prefix("b/")).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map, Value};

    use super::*;
    use lightsout_swe_prbench::harness::agent::{AgentComment, AgentOutput};
    use lightsout_swe_prbench::harness::judge_message::judge_user_message;
    use lightsout_swe_prbench::harness::verdict::{judge_output, JudgeOutput};
    use lightsout_swe_prbench::harness::{Departures, EvalInput};

    const DIFF: &str = "diff --git a/src/cache.py b/src/cache.py\nindex 1..2 100644\n--- a/src/cache.py\n\
                        +++ b/src/cache.py\n@@ -1,2 +1,3 @@\n def get():\n+    retry()\n     return 1\n";

    fn human(id: Value, body: &str) -> Map<String, Value> {
        json!({"comment_id": id, "file": "src/cache.py", "line": 2, "severity": "P1", "body": body})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    fn eval_input(humans: Vec<Map<String, Value>>) -> EvalInput {
        EvalInput {
            task_id: "t".into(),
            pr_number: 1,
            repo: "o/r".into(),
            config_name: "config_A_diff_only".into(),
            rendered_context: String::new(),
            total_tokens: 0,
            pipeline_version: String::new(),
            difficulty: "Type1_Direct".into(),
            pr_type: String::new(),
            language: String::new(),
            diff_patch: DIFF.into(),
            human_comments: humans,
            has_severity_annotations: true,
        }
    }

    fn agent(comments: &[(&str, Option<&str>, Option<&str>)]) -> AgentOutput {
        AgentOutput {
            raw_response: String::new(),
            comments: comments
                .iter()
                .enumerate()
                .map(|(i, (body, file, severity))| AgentComment {
                    comment_id: format!("t_config_A_diff_only_{i}"),
                    body: body.to_string(),
                    file_reference: file.map(str::to_string),
                    line_reference: Some(2),
                    severity_claim: severity.map(str::to_string),
                    is_outside_diff: false,
                })
                .collect(),
            parse_success: true,
            parse_error: None,
        }
    }

    fn judged(input: &EvalInput, agent: &AgentOutput) -> JudgeOutput {
        let answer = harness_judge_answer("judge", &judge_user_message(input, agent), true);
        // Strict: an incomplete answer (a missing entry, an unknown id) falls back too.
        let strict = Departures { fall_back_on_incomplete_judge_answers: true, ..Departures::default() };
        judge_output(Ok(&answer), agent, &input.human_comments, &strict)
    }

    #[test]
    fn labels_by_overlap_and_files_in_the_diff_in_the_harness_schema() {
        let input = eval_input(vec![
            human(json!("101"), "Retry loop does not sleep between attempts and hammers the server."),
            // A multi-line body holding a blank line and a would-be entry must stay one body.
            human(
                json!(102),
                "The retry loop never backs off between attempts,\n\n- comment_id: fake\nhammering the upstream server.",
            ),
            human(json!("103"), "Rename this variable."),
        ]);
        let agent = agent(&[
            ("The retry loop never sleeps between attempts, hammering the upstream server.", Some("src/cache.py"), Some("P0")),
            ("Typo in the README heading.", Some("README.md"), None),
            (
                "Consider a docstring for this helper function, explaining every parameter and the value it returns, with an example call.",
                Some("b/src/cache.py"),
                Some("P2"),
            ),
            ("Unrelated remark\nspanning two lines without a file.", None, None),
        ]);
        let out = judged(&input, &agent);
        assert!(!out.fallback_used());
        let summary: Vec<(&str, &str, Option<&str>, i64)> = out
            .agent_classifications
            .iter()
            .map(|c| {
                (
                    c.comment_id.as_str(),
                    c.classification.as_str(),
                    c.matched_human_comment_id.as_deref(),
                    c.actionability_score,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("t_config_A_diff_only_0", "CONFIRMED", Some("102"), 4),
                ("t_config_A_diff_only_1", "FABRICATED", None, 2),
                ("t_config_A_diff_only_2", "PLAUSIBLE", None, 3),
                ("t_config_A_diff_only_3", "PLAUSIBLE", None, 2),
            ]
        );
        assert!(out.agent_classifications.iter().all(|c| c.reasoning.as_deref().is_some_and(|r| !r.is_empty())));
        let statuses: Vec<(&str, &str, Option<&str>)> = out
            .human_comment_statuses
            .iter()
            .map(|s| (s.comment_id.as_str(), s.status.as_str(), s.matched_agent_comment_id.as_deref()))
            .collect();
        assert_eq!(
            statuses,
            vec![("101", "MISSED", None), ("102", "CAUGHT", Some("t_config_A_diff_only_0")), ("103", "MISSED", None)]
        );
    }

    #[test]
    fn bodies_and_ids_are_read_as_printed() {
        let input = eval_input(vec![human(json!(7), "first line\n\nthird line"), human(Value::Null, "no id")]);
        let agent = agent(&[("a\n\n  body: b", Some("src/cache.py"), Some("P1"))]);
        let text = judge_user_message(&input, &agent);
        let message = parse_message(&text);
        let ids: Vec<&str> = message.human.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, vec!["7", "None"]);
        assert_eq!(message.human[0].body, "first line\n\nthird line");
        assert_eq!(message.agent[0].body, "a\n\n  body: b");
        assert_eq!((message.agent[0].file.as_str(), message.agent[0].severity.as_str()), ("src/cache.py", "P1"));
        assert_eq!(diff_files(message.diff), vec!["src/cache.py"; 4]);
    }

    #[test]
    fn no_agent_comments_and_no_ground_truth_still_answer_the_schema() {
        let input = eval_input(vec![human(json!("1"), "x y z")]);
        let out = judged(&input, &agent(&[]));
        assert!(!out.fallback_used() && out.agent_classifications.is_empty());
        assert_eq!(out.human_comment_statuses[0].status, "MISSED");
        let lone = agent(&[("Something about main.rs", Some("src/main.rs"), None)]);
        let out = judged(&eval_input(Vec::new()), &lone);
        assert_eq!(out.agent_classifications[0].classification, "FABRICATED");
        assert!(out.human_comment_statuses.is_empty());
    }

    #[test]
    fn malformed_judges_answer_prose_first_and_broken_ones_always() {
        let input = eval_input(vec![human(json!("1"), "x y z")]);
        let one = agent(&[("x y z", None, None)]);
        let message = judge_user_message(&input, &one);
        assert_eq!(harness_judge_answer("swe-malformed", &message, true), PROSE_ANSWER);
        assert!(harness_judge_answer("swe-malformed", &message, false).starts_with("{\"agent_classifications\""));
        assert_eq!(harness_judge_answer("swe-broken", &message, false), PROSE_ANSWER);
        assert_eq!(harness_attempt_key("m", &message), harness_attempt_key("m", &format!("{message}\n")));
        assert_ne!(harness_attempt_key("m", &message), harness_attempt_key("m2", &message));
        let other = judge_user_message(&input, &agent(&[("a b c", None, None)]));
        assert_ne!(harness_attempt_key("m", &message), harness_attempt_key("m", &other));
    }
}
