//! CRBugBench-style tasks: a reviewed change and the bugs it introduced.
//!
//! One JSON object a line:
//! `task_id, repo, image, language?, base_commit, reviewed_commit, title, description, diff,
//! track (pre-merge | post-merge), bugs: [{description, file?, line?, source?}]`.

use serde::Deserialize;

use super::{Bug, GroundTruth, LoadedTask, Task};
use lightsout_api::Track;

#[derive(Deserialize)]
pub(super) struct Record {
    task_id: String,
    repo: String,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    base_commit: Option<String>,
    #[serde(default)]
    reviewed_commit: Option<String>,
    title: String,
    #[serde(default)]
    description: String,
    diff: String,
    track: Track,
    bugs: Vec<Bug>,
}

pub(super) fn convert(record: Record) -> Result<LoadedTask, String> {
    if record.task_id.trim().is_empty() {
        return Err("task_id is empty".into());
    }
    super::check_task_names("task_id", &record.task_id, &record.repo)?;
    if record.diff.trim().is_empty() {
        return Err(format!("task {}: diff is empty", record.task_id));
    }
    if record.bugs.is_empty() {
        return Err(format!("task {}: bugs is empty; a task needs at least one ground-truth bug", record.task_id));
    }
    if let Some(i) = record.bugs.iter().position(|b| b.description.trim().is_empty()) {
        return Err(format!("task {}: bugs[{i}].description is empty", record.task_id));
    }
    Ok(LoadedTask {
        task: Task {
            id: record.task_id,
            repo: record.repo,
            image: record.image,
            language: record.language,
            difficulty: None,
            track: Some(record.track),
            pr_number: None,
            pr_type: None,
            title: record.title,
            description: record.description,
            diff: record.diff,
            base_commit: record.base_commit,
            head_commit: record.reviewed_commit,
            contexts: Default::default(),
        },
        truth: GroundTruth::Bugs { bugs: record.bugs },
    })
}
