//! The scripted answers and ground truth, embedded at compile time so the server needs no files
//! at run time (the quickstart runs from any directory).

use std::sync::OnceLock;

use serde::Deserialize;

use super::det::normalize_ws;

const SCRIPTED_JSON: &str = include_str!("../../datasets/sample/scripted.json");
const CRBUGBENCH_JSONL: &str = include_str!("../../datasets/sample/crbugbench.jsonl");
const SWE_PRBENCH_JSONL: &str = include_str!("../../datasets/sample/swe-prbench/tasks.jsonl");

/// `datasets/sample/scripted.json`: what the scripted agent may say about each task.
#[derive(Debug, Deserialize)]
pub(crate) struct ScriptedFile {
    #[allow(dead_code)] // Checked by a test so a schema bump is noticed.
    pub version: u32,
    pub tasks: Vec<ScriptedTask>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ScriptedTask {
    pub task_id: String,
    pub title: String,
    #[serde(default)]
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Finding {
    pub id: String,
    pub body: String,
    pub file: String,
    #[serde(default)]
    pub line: Option<u64>,
    pub severity: String,
    /// crbugbench bug ids (`b<index>`) this finding correctly identifies.
    #[serde(default)]
    pub identifies: Vec<String>,
    /// swe-prbench human review comment ids this finding matches.
    #[serde(default)]
    pub matches_comments: Vec<i64>,
    #[serde(default)]
    pub fabricated: bool,
    /// `body` whitespace-normalised, computed once at load: the judge matches on it.
    #[serde(skip)]
    pub normalized_body: String,
}

impl Finding {
    /// Whether the finding is a real hit on some ground truth (earns the ranking bonus).
    pub fn is_true_positive(&self) -> bool {
        !self.identifies.is_empty() || !self.matches_comments.is_empty()
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct CrBugTask {
    pub task_id: String,
    #[allow(dead_code)] // Part of the schema; titles are matched via scripted.json.
    pub title: String,
    #[serde(default)]
    pub bugs: Vec<CrBug>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CrBug {
    pub description: String,
    #[serde(skip)]
    pub normalized: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PrTask {
    pub task_id: String,
    #[allow(dead_code)] // Part of the schema; titles are matched via scripted.json.
    pub title: String,
    #[serde(default)]
    pub human_review_comments: Vec<HumanComment>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct HumanComment {
    pub id: i64,
    pub body: String,
    #[serde(skip)]
    pub normalized: String,
}

/// All embedded fixtures, parsed.
#[derive(Debug, Default)]
pub(crate) struct Fixtures {
    pub scripted: Vec<ScriptedTask>,
    pub crbugbench: Vec<CrBugTask>,
    pub swe_prbench: Vec<PrTask>,
}

/// One ground-truth item a judge prompt can quote.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Truth<'a> {
    /// crbugbench bug `b<index>` of `task_id`.
    Bug { task_id: &'a str, index: usize, bug: &'a CrBug },
    /// swe-prbench human review comment.
    Comment { task_id: &'a str, id: i64, comment: &'a HumanComment },
}

impl<'a> Truth<'a> {
    pub fn task_id(&self) -> &'a str {
        match self {
            Truth::Bug { task_id, .. } | Truth::Comment { task_id, .. } => task_id,
        }
    }

    pub fn text(&self) -> &'a str {
        match self {
            Truth::Bug { bug, .. } => &bug.description,
            Truth::Comment { comment, .. } => &comment.body,
        }
    }

    /// [`Truth::text`] whitespace-normalised.
    pub fn normalized(&self) -> &'a str {
        match self {
            Truth::Bug { bug, .. } => &bug.normalized,
            Truth::Comment { comment, .. } => &comment.normalized,
        }
    }
}

impl Fixtures {
    fn parse() -> Result<Fixtures, String> {
        let scripted: ScriptedFile =
            serde_json::from_str(SCRIPTED_JSON).map_err(|e| format!("datasets/sample/scripted.json: {e}"))?;
        let mut fixtures = Fixtures {
            scripted: scripted.tasks,
            crbugbench: parse_jsonl(CRBUGBENCH_JSONL, "datasets/sample/crbugbench.jsonl")?,
            swe_prbench: parse_jsonl(SWE_PRBENCH_JSONL, "datasets/sample/swe-prbench/tasks.jsonl")?,
        };
        for finding in fixtures.scripted.iter_mut().flat_map(|t| t.findings.iter_mut()) {
            finding.normalized_body = normalize_ws(&finding.body);
        }
        for bug in fixtures.crbugbench.iter_mut().flat_map(|t| t.bugs.iter_mut()) {
            bug.normalized = normalize_ws(&bug.description);
        }
        for comment in fixtures.swe_prbench.iter_mut().flat_map(|t| t.human_review_comments.iter_mut()) {
            comment.normalized = normalize_ws(&comment.body);
        }
        Ok(fixtures)
    }

    /// Every ground-truth item, in file order.
    pub fn truths(&self) -> impl Iterator<Item = Truth<'_>> {
        let bugs = self.crbugbench.iter().flat_map(|task| {
            task.bugs.iter().enumerate().map(move |(index, bug)| Truth::Bug { task_id: &task.task_id, index, bug })
        });
        let comments = self.swe_prbench.iter().flat_map(|task| {
            task.human_review_comments.iter().map(move |comment| Truth::Comment {
                task_id: &task.task_id,
                id: comment.id,
                comment,
            })
        });
        bugs.chain(comments)
    }
}

fn parse_jsonl<T: serde::de::DeserializeOwned>(text: &str, name: &str) -> Result<Vec<T>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("{name}:{}: {e}", i + 1)))
        .collect()
}

static FIXTURES: OnceLock<Result<Fixtures, String>> = OnceLock::new();

/// The parsed fixtures, or why they do not parse (a build-time data bug, reported by
/// `ScriptedServer::start` rather than by a panic inside a request handler).
pub(crate) fn load() -> Result<&'static Fixtures, &'static str> {
    FIXTURES.get_or_init(Fixtures::parse).as_ref().map_err(String::as_str)
}

/// The fixtures, or none at all if they are broken: answers degrade to the generic paths.
pub(crate) fn get() -> &'static Fixtures {
    static EMPTY: Fixtures = Fixtures { scripted: Vec::new(), crbugbench: Vec::new(), swe_prbench: Vec::new() };
    load().unwrap_or(&EMPTY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_fixtures_parse_and_cross_reference() {
        let fixtures = load().expect("fixtures parse");
        assert!(!fixtures.scripted.is_empty());
        for task in &fixtures.scripted {
            for finding in &task.findings {
                assert!(matches!(finding.severity.as_str(), "P0" | "P1" | "P2"), "{}", finding.id);
                for bug in &finding.identifies {
                    let index: usize = bug.strip_prefix('b').and_then(|i| i.parse().ok()).expect("b<i>");
                    let task = fixtures.crbugbench.iter().find(|t| t.task_id == task.task_id);
                    assert!(task.is_some_and(|t| index < t.bugs.len()), "{}/{bug}", finding.id);
                }
                for id in &finding.matches_comments {
                    let task = fixtures.swe_prbench.iter().find(|t| t.task_id == task.task_id);
                    assert!(task.is_some_and(|t| t.human_review_comments.iter().any(|c| c.id == *id)));
                }
            }
        }
    }
}
