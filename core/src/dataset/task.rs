//! The dataset-independent model of a task and of its ground truth.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use lightsout_api::{ContextConfig, Track};
use lightsout_swe_prbench::harness::python;

/// What an agent may see of a task: the change under review and its context. Never the ground
/// truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    /// `owner/name` of the repository the change belongs to.
    pub repo: String,
    /// Container image the trial runs in (CRBugBench tasks carry one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// SWE-PRBench difficulty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<String>,
    /// CRBugBench track.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<Track>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_number: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_type: Option<String>,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// The change as a unified diff.
    pub diff: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// The reviewed commit (CRBugBench) or the PR head (SWE-PRBench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_commit: Option<String>,
    /// SWE-PRBench: the context files by configuration, when the dataset ships them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub contexts: BTreeMap<ContextConfig, ReviewContext>,
}

/// A SWE-PRBench context file, as the reference harness reads it (`loader.py`): what the agent
/// is shown in one configuration, and the members that name the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewContext {
    /// The agent's user message, unchanged.
    pub rendered: String,
    /// The file's own `config_name`, else the full name of the configuration it was found for:
    /// agent comment ids and the adjacency rule use it.
    pub config_name: String,
    /// The context's `repo` / `pr_number` when given, else the PR record's.
    pub repo: String,
    pub pr_number: i64,
    pub total_tokens: i64,
    pub pipeline_version: String,
}

/// A task and the answers it is judged against, held apart.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedTask {
    pub task: Task,
    pub truth: GroundTruth,
}

/// The answers a review is judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GroundTruth {
    /// CRBugBench: the bugs the change introduced.
    Bugs { bugs: Vec<Bug> },
    /// SWE-PRBench: the annotation's ground-truth comments as the file has them (the
    /// `substantive_comment_ids`, else the initiating comments; see
    /// [`lightsout_swe_prbench::harness::layout::ground_truth`]), and whether any has a severity.
    ReviewComments { comments: Vec<serde_json::Map<String, serde_json::Value>>, has_severity_annotations: bool },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bug {
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// How the bug became known: `review-comment` or `fix-issue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One thing a review should find, in a form every protocol can judge against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TruthItem {
    /// `b0`, `b1`… for bugs; `c<comment_id>` for human comments.
    pub id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
}

impl GroundTruth {
    /// The items a review is expected to find.
    pub fn items(&self) -> Vec<TruthItem> {
        match self {
            GroundTruth::Bugs { bugs } => bugs
                .iter()
                .enumerate()
                .map(|(i, bug)| TruthItem {
                    id: format!("b{i}"),
                    text: bug.description.clone(),
                    file: bug.file.clone(),
                    line: bug.line.map(|l| l as i64),
                })
                .collect(),
            GroundTruth::ReviewComments { comments, .. } => comments
                .iter()
                .map(|c| {
                    let member = |key: &str| c.get(key).filter(|v| !v.is_null()).map(python::str_of);
                    TruthItem {
                        id: format!("c{}", member("comment_id").unwrap_or_default()),
                        text: member("body").unwrap_or_default(),
                        file: member("file"),
                        line: c.get("line").and_then(python::int_of),
                    }
                })
                .collect(),
        }
    }
}

impl Task {
    /// A cheap proxy for how long a trial on this task takes, used before any duration is
    /// known: bigger diffs take agents longer to read and review.
    pub fn expected_effort(&self) -> u64 {
        self.diff.len() as u64 + self.description.len() as u64 / 4
    }
}
