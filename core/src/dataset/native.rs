//! Lightsout's own task format (`jsonl`): a [`Task`] with its `ground_truth` beside it, one a line.
//! This is what `lightsout` writes when it converts or exports tasks.

use serde::Deserialize;

use super::{GroundTruth, LoadedTask, Task};

#[derive(Deserialize)]
pub(super) struct Record {
    #[serde(flatten)]
    task: Task,
    ground_truth: GroundTruth,
}

pub(super) fn convert(record: Record) -> Result<LoadedTask, String> {
    if record.task.id.trim().is_empty() {
        return Err("id is empty".into());
    }
    super::check_task_names("id", &record.task.id, &record.task.repo)?;
    if record.ground_truth.items().is_empty() {
        return Err(format!("task {}: ground_truth has no item", record.task.id));
    }
    Ok(LoadedTask { task: record.task, truth: record.ground_truth })
}
