//! Datasets: reading tasks and their ground truth from the supported formats, and choosing the
//! tasks a run evaluates.
//!
//! A [`Task`] is what the agent may see; its [`GroundTruth`] is kept apart in [`LoadedTask`] so
//! that no code path that prepares an agent's workspace can reach it by accident (invariant 2).

mod crbugbench;
mod lines;
mod native;
mod select;
pub mod swe_prbench;
mod task;

use std::io::BufRead;
use std::path::{Path, PathBuf};

pub use lightsout_api::names::safe_path_component;
pub use lines::LineError;
pub use select::select_tasks;
pub use task::*;

use lightsout_api::{ContextConfig, DatasetFormat, DatasetSpec, EvaluationRunSpec};

/// The tasks of a dataset that parsed, and the lines that did not.
#[derive(Debug, Default)]
pub struct Dataset {
    pub tasks: Vec<LoadedTask>,
    /// Malformed lines, reported and skipped; the run goes on without them.
    pub skipped: Vec<LineError>,
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("dataset {path}: {source}")]
    Unreadable { path: String, source: std::io::Error },
    #[error("dataset {path}: no valid task{}", list_lines(skipped))]
    NoValidTask { path: String, skipped: Vec<LineError> },
    #[error("dataset source {0}: s3:// datasets are read by the worker's S3 store; on one machine use file://")]
    UnsupportedSource(String),
    #[error("dataset source {0}: must start with file:// or s3://")]
    BadSource(String),
    #[error("spec.dataset.filter: no task of {0} matches")]
    NothingSelected(String),
}

/// The first malformed lines, for an error message that must say what was wrong.
fn list_lines(skipped: &[LineError]) -> String {
    const SHOWN: usize = 10;
    let mut text: String = skipped.iter().take(SHOWN).map(|line| format!("\n  - {line}")).collect();
    if skipped.len() > SHOWN {
        text.push_str(&format!("\n  … and {} more malformed lines", skipped.len() - SHOWN));
    }
    text
}

/// Where a `file://` source points. Relative paths are taken from the current directory.
pub fn local_path(source: &str) -> Result<PathBuf, DatasetError> {
    if let Some(path) = source.strip_prefix("file://") {
        Ok(PathBuf::from(path))
    } else if source.starts_with("s3://") {
        Err(DatasetError::UnsupportedSource(source.to_string()))
    } else {
        Err(DatasetError::BadSource(source.to_string()))
    }
}

/// Reads every task of the dataset the spec names (before filtering and sampling).
pub fn load(spec: &DatasetSpec) -> Result<Dataset, DatasetError> {
    let path = local_path(&spec.source)?;
    load_file(spec.format, &path)
}

/// Reads a dataset file of the given format.
pub fn load_file(format: DatasetFormat, path: &Path) -> Result<Dataset, DatasetError> {
    let unreadable = |source| DatasetError::Unreadable { path: path.display().to_string(), source };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let dataset = read_lines(format, std::io::BufReader::new(file), path).map_err(unreadable)?;
    if dataset.tasks.is_empty() {
        return Err(DatasetError::NoValidTask { path: path.display().to_string(), skipped: dataset.skipped });
    }
    Ok(dataset)
}

/// The tasks a run evaluates ([`select_tasks`] with the spec's filter and sample); none is an
/// error, the same for `lightsout validate`, `lightsout run` and the controller. A SWE-PRBench
/// task is evaluated only when it has a context file for every configuration of the run, as
/// the reference harness discovers its tasks (before sampling, as its `--max-prs` comes after).
pub fn select_for_run(mut tasks: Vec<LoadedTask>, spec: &EvaluationRunSpec) -> Result<Vec<LoadedTask>, DatasetError> {
    let dataset = &spec.dataset;
    if dataset.format == DatasetFormat::SwePrBench {
        let configs: Vec<ContextConfig> = lightsout_api::variant::context_axis(spec)
            .into_iter()
            .map(|c| swe_prbench::config_or_default(c.or(spec.agent.context_config)))
            .collect();
        tasks.retain(|t| configs.iter().all(|c| t.task.contexts.contains_key(c)));
    }
    let tasks = select_tasks(tasks, &dataset.filter, dataset.sample.as_ref());
    if tasks.is_empty() {
        return Err(DatasetError::NothingSelected(dataset.source.clone()));
    }
    Ok(tasks)
}

/// Reads dataset lines of `format` from `reader`. `path` names the file in messages and, for
/// SWE-PRBench, is where the annotation and context files beside it are looked for. Only a read
/// error fails; malformed lines are in [`Dataset::skipped`].
pub fn read_lines(format: DatasetFormat, reader: impl BufRead, path: &Path) -> std::io::Result<Dataset> {
    match format {
        DatasetFormat::CrBugBench => lines::read_records(reader, path, crbugbench::convert),
        DatasetFormat::Jsonl => lines::read_records(reader, path, native::convert),
        DatasetFormat::SwePrBench => swe_prbench::read(reader, path),
    }
}

/// Checks the task id (`id_field` names it as the format does) and repository name a dataset
/// line gives before either is joined into a path.
fn check_task_names(id_field: &str, id: &str, repo: &str) -> Result<(), String> {
    lightsout_api::names::safe_path_component(id).map_err(|e| format!("{id_field} {e}"))?;
    lightsout_api::names::safe_repo_name(repo).map_err(|e| format!("task {id}: repo {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_format_round_trips_a_task_and_its_ground_truth() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.jsonl");
        let line = r#"{"id": "t1", "repo": "o/r", "title": "T", "diff": "+x", "track": "post-merge", "ground_truth": {"kind": "bugs", "bugs": [{"description": "d", "file": "a.py", "line": 3}]}}"#;
        let no_truth =
            r#"{"id": "t2", "repo": "o/r", "title": "T", "diff": "+x", "ground_truth": {"kind": "bugs", "bugs": []}}"#;
        std::fs::write(&path, format!("{line}\n\n{no_truth}\n")).unwrap();
        let dataset = load_file(DatasetFormat::Jsonl, &path).unwrap();
        assert_eq!(dataset.tasks.len(), 1);
        assert_eq!(dataset.tasks[0].task.track, Some(lightsout_api::Track::PostMerge));
        assert_eq!(dataset.tasks[0].truth.items()[0].line, Some(3));
        assert_eq!(dataset.skipped.len(), 1);
        assert_eq!(dataset.skipped[0].line, 3, "blank lines still count in line numbers");
        assert!(dataset.skipped[0].message.contains("ground_truth has no item"));
    }

    #[test]
    fn duplicates_and_bad_fields_are_named_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crb.jsonl");
        let good = r#"{"task_id": "a", "repo": "o/r", "title": "T", "diff": "+x", "track": "pre-merge", "bugs": [{"description": "d"}]}"#;
        let bad_line = r#"{"task_id": "b", "repo": "o/r", "title": "T", "diff": "+x", "track": "pre-merge", "bugs": [{"description": "d", "line": "ten"}]}"#;
        std::fs::write(&path, format!("{good}\n{good}\n{bad_line}\n")).unwrap();
        let dataset = load_file(DatasetFormat::CrBugBench, &path).unwrap();
        let messages: Vec<String> = dataset.skipped.iter().map(|e| e.to_string()).collect();
        assert_eq!(dataset.tasks.len(), 1);
        assert!(messages[0].ends_with(":2: duplicate task_id \"a\""), "{messages:?}");
        assert!(messages[1].contains(":3: field bugs[0].line"), "{messages:?}");
    }
}
