//! SWE-PRBench datasets in the benchmark's own layout, read as its reference harness reads them
//! ([`lightsout_swe_prbench::harness::layout`]): `spec.dataset.source` names the PR list (`prs.jsonl`,
//! or a JSON document with `prs` / `items` or a bare list) and beside it
//! - `annotations/{task_id}_human.json` (or `{pr_number}_human.json`): the ground truth, the
//!   comments of `substantive_comment_ids`, else the initiating ones; a PR with none is kept and
//!   scores with weight 0, as in the harness;
//! - `contexts/…/{task_id}.json` in any of the eight path forms the harness accepts, one per
//!   configuration (A, B, C): what the agent is shown.
//!
//! A task is split here into what the agent may see ([`Task`], with a [`ReviewContext`] per
//! configuration) and its ground truth; [`eval_input`] joins them again for scoring, after the
//! agent has exited. Where the harness aborts a whole run (a missing annotation) or silently
//! drops a line (malformed JSON), Lightsout skips that PR and reports it with the file, the line
//! and the reason.

use std::io::BufRead;
use std::path::Path;

use serde_json::{Map, Value};

use super::{Dataset, GroundTruth, LineError, LoadedTask, ReviewContext, Task};
use lightsout_api::ContextConfig;
use lightsout_swe_prbench::harness::layout::{self, full_config_name, BenchmarkLayout, EvalInput};
use lightsout_swe_prbench::harness::python;

/// The three configurations, in the harness's default order.
pub const CONFIGS: [ContextConfig; 3] = [ContextConfig::ConfigA, ContextConfig::ConfigB, ContextConfig::ConfigC];

/// The layout whose PR list is `path`, with `contexts/` and `annotations/` beside it.
pub fn layout_of(path: &Path) -> BenchmarkLayout {
    let dir = path.parent().unwrap_or(Path::new("."));
    BenchmarkLayout::new(path, dir.join("contexts"), dir.join("annotations"))
}

/// Reads the PR list `path` from `reader`: a `.jsonl` file line by line (a blank line skipped,
/// any other line that is not a JSON object reported), anything else as one JSON document.
pub(super) fn read(mut reader: impl BufRead, path: &Path) -> std::io::Result<Dataset> {
    let layout = layout_of(path);
    let is_jsonl = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    if is_jsonl {
        return super::lines::read_records(reader, path, |record: Map<String, Value>| convert(&record, &layout));
    }
    let mut text = String::new();
    reader.read_to_string(&mut text)?;
    let file = path.display().to_string();
    let mut dataset = Dataset::default();
    let records = match serde_json::from_str(&text) {
        Ok(document) => layout::pr_records_of_document(document),
        Err(e) => {
            dataset.skipped.push(LineError { file, line: e.line(), message: format!("not JSON: {e}") });
            return Ok(dataset);
        }
    };
    let mut seen = std::collections::HashSet::new();
    for (index, record) in records.iter().enumerate() {
        let error = |message: String| LineError { file: file.clone(), line: index + 1, message };
        match convert(record, &layout) {
            Ok(task) if !seen.insert(task.task.id.clone()) => {
                dataset.skipped.push(error(format!("PR record {}: duplicate task_id {:?}", index + 1, task.task.id)))
            }
            Ok(task) => dataset.tasks.push(task),
            Err(message) => dataset.skipped.push(error(format!("PR record {}: {message}", index + 1))),
        }
    }
    Ok(dataset)
}

/// One PR record with its context files and annotation.
fn convert(record: &Map<String, Value>, layout: &BenchmarkLayout) -> Result<LoadedTask, String> {
    let task_id = layout::task_id_of(record).map_err(|e| e.to_string())?;
    // Checked before it is joined into any path: the harness would read outside the dataset.
    lightsout_api::names::safe_path_component(&task_id).map_err(|e| format!("task_id {e}"))?;
    let mut contexts = std::collections::BTreeMap::new();
    let mut first: Option<EvalInput> = None;
    for config in CONFIGS {
        if !layout.has_context(record, &task_id, config.as_str()).map_err(|e| e.to_string())? {
            continue;
        }
        let input = layout.eval_input_of(record, &task_id, config.as_str()).map_err(|e| e.to_string())?;
        contexts.insert(
            config,
            ReviewContext {
                rendered: input.rendered_context.clone(),
                config_name: input.config_name.clone(),
                repo: input.repo.clone(),
                pr_number: input.pr_number,
                total_tokens: input.total_tokens,
                pipeline_version: input.pipeline_version.clone(),
            },
        );
        first.get_or_insert(input);
    }
    let Some(input) = first else {
        let tried = layout.eval_input_of(record, &task_id, ContextConfig::ConfigA.as_str()).err();
        return Err(format!(
            "task {task_id}: no context file for config_A, config_B or config_C ({})",
            tried.map_or_else(String::new, |e| e.to_string())
        ));
    };
    super::check_task_names("task_id", &task_id, &input.repo)?;
    let text = |key: &str| record.get(key).filter(|v| python::truthy(v)).map(python::str_of);
    Ok(LoadedTask {
        task: Task {
            id: task_id,
            repo: input.repo.clone(),
            image: None,
            language: Some(input.language.clone()).filter(|s| !s.is_empty()),
            difficulty: Some(input.difficulty.clone()).filter(|s| !s.is_empty()),
            track: None,
            pr_number: u64::try_from(input.pr_number).ok(),
            pr_type: Some(input.pr_type.clone()).filter(|s| !s.is_empty()),
            title: text("title").unwrap_or_default(),
            description: text("description").or_else(|| text("body")).unwrap_or_default(),
            diff: input.diff_patch.clone(),
            base_commit: text("base_commit"),
            head_commit: text("head_commit"),
            contexts,
        },
        truth: GroundTruth::ReviewComments {
            comments: input.human_comments,
            has_severity_annotations: input.has_severity_annotations,
        },
    })
}

/// The harness's evaluation input of `task` in `config`, joined with its ground truth: what the
/// judge and the scores read. `None` when the task has no context for `config` or its ground
/// truth is not a SWE-PRBench one.
pub fn eval_input(task: &Task, config: ContextConfig, truth: &GroundTruth) -> Option<EvalInput> {
    let GroundTruth::ReviewComments { comments, has_severity_annotations } = truth else {
        return None;
    };
    let mut input = agent_input(task, config)?;
    input.human_comments = comments.clone();
    input.has_severity_annotations = *has_severity_annotations;
    Some(input)
}

/// The evaluation input as the agent side may know it: no ground truth (what the harness's
/// agent call sequence and comment extraction read: the render, the ids, the diff).
pub fn agent_input(task: &Task, config: ContextConfig) -> Option<EvalInput> {
    let context = task.contexts.get(&config)?;
    let or_empty = |value: &Option<String>| value.clone().unwrap_or_default();
    Some(EvalInput {
        task_id: task.id.clone(),
        pr_number: context.pr_number,
        repo: context.repo.clone(),
        config_name: context.config_name.clone(),
        rendered_context: context.rendered.clone(),
        total_tokens: context.total_tokens,
        pipeline_version: context.pipeline_version.clone(),
        difficulty: or_empty(&task.difficulty),
        pr_type: or_empty(&task.pr_type),
        language: or_empty(&task.language),
        diff_patch: task.diff.clone(),
        human_comments: Vec::new(),
        has_severity_annotations: false,
    })
}

/// The configuration a trial without one is given: config A, the first of the harness's
/// default `A B C`.
pub fn config_or_default(config: Option<ContextConfig>) -> ContextConfig {
    config.unwrap_or(ContextConfig::ConfigA)
}

/// The full name of a configuration (`config_A_diff_only`, …), as ids and reports use it.
pub fn full_name(config: ContextConfig) -> String {
    full_config_name(config.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/swe-prbench/inputs/dataset")
    }

    /// Every task of the golden kit loads as the harness loads it: splitting into task and
    /// truth and joining again gives the harness's own evaluation input, per configuration.
    #[test]
    fn the_golden_layout_splits_and_joins_to_the_harness_s_inputs() {
        for list in ["prs.jsonl", "prs.json"] {
            let path = golden().join(list);
            let file = std::fs::File::open(&path).unwrap();
            let dataset = read(std::io::BufReader::new(file), &path).unwrap();
            assert!(dataset.tasks.len() >= 13, "{list}: {} tasks, skipped {:?}", dataset.tasks.len(), dataset.skipped);
            let layout = layout_of(&path);
            for loaded in &dataset.tasks {
                for config in loaded.task.contexts.keys() {
                    let ours = eval_input(&loaded.task, *config, &loaded.truth).unwrap();
                    let theirs = layout.load_eval_input(&loaded.task.id, config.as_str()).unwrap();
                    assert_eq!(ours, theirs, "{list} {} {config:?}", loaded.task.id);
                }
            }
        }
    }

    #[test]
    fn a_pr_without_an_annotation_or_any_context_is_reported_and_the_rest_load() {
        let dir = tempfile::tempdir().unwrap();
        let prs = dir.path().join("prs.jsonl");
        let pr = |id: &str| format!(r#"{{"task_id": "{id}", "repo": "o/r", "pr_number": 1, "diff_patch": "+x"}}"#);
        std::fs::write(&prs, format!("{}\n[1]\n{}\n{}\n", pr("good"), pr("no-annotation"), pr("no-context"))).unwrap();
        std::fs::create_dir_all(dir.path().join("contexts/config_A")).unwrap();
        std::fs::create_dir_all(dir.path().join("annotations")).unwrap();
        for id in ["good", "no-annotation"] {
            std::fs::write(dir.path().join(format!("contexts/config_A/{id}.json")), r#"{"rendered": "R"}"#).unwrap();
        }
        for id in ["good", "no-context"] {
            std::fs::write(dir.path().join(format!("annotations/{id}_human.json")), r#"{"comments": []}"#).unwrap();
        }
        let file = std::fs::File::open(&prs).unwrap();
        let dataset = read(std::io::BufReader::new(file), &prs).unwrap();
        assert_eq!(dataset.tasks.iter().map(|t| t.task.id.as_str()).collect::<Vec<_>>(), ["good"]);
        let messages: Vec<String> = dataset.skipped.iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].contains("prs.jsonl:2: "), "{messages:?}");
        assert!(messages[1].contains(":3: annotation file missing for task no-annotation"), "{messages:?}");
        assert!(messages[2].contains(":4: task no-context: no context file"), "{messages:?}");
        let good = &dataset.tasks[0];
        assert_eq!(good.task.contexts[&ContextConfig::ConfigA].config_name, "config_A_diff_only");
        assert_eq!(good.truth, GroundTruth::ReviewComments { comments: vec![], has_severity_annotations: false });
    }
}
