//! The sample dataset ships as data the tests can materialise: every task's change applies to
//! its repository's base tree, and the commits it records are the ones materialisation makes.

use std::path::{Path, PathBuf};

use lightsout_api::{ContextConfig, DatasetFormat};
use lightsout_core::dataset::{load_file, Dataset, GroundTruth};
use lightsout_core::workspace::{apply_change, commit_change, materialise_base};

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample")
}

fn ids(dataset: &Dataset) -> Vec<String> {
    dataset.tasks.iter().map(|t| t.task.id.clone()).collect()
}

#[test]
fn both_formats_load_every_task() {
    let crb = load_file(DatasetFormat::CrBugBench, &sample().join("crbugbench.jsonl")).unwrap();
    let swe = load_file(DatasetFormat::SwePrBench, &sample().join("swe-prbench/tasks.jsonl")).unwrap();
    assert!(crb.skipped.is_empty() && swe.skipped.is_empty(), "{:?} {:?}", crb.skipped, swe.skipped);
    assert!(crb.tasks.len() >= 8, "at least 8 tasks");
    assert_eq!(ids(&crb), ids(&swe));
    let repos: std::collections::BTreeSet<_> = crb.tasks.iter().map(|t| t.task.repo.clone()).collect();
    assert!(repos.len() >= 2, "at least 2 repositories");
    for task in &crb.tasks {
        assert!(task.task.track.is_some() && task.task.image.is_some(), "{}", task.task.id);
        assert!(!task.truth.items().is_empty(), "{}", task.task.id);
    }
    for task in &swe.tasks {
        assert_eq!(task.task.contexts.len(), 3, "{} has every context config", task.task.id);
        assert!(
            task.task.contexts[&ContextConfig::ConfigC].rendered.len()
                > task.task.contexts[&ContextConfig::ConfigA].rendered.len()
        );
        assert_eq!(task.task.contexts[&ContextConfig::ConfigB].config_name, "config_B_with_file_content");
        assert!(task.task.difficulty.is_some());
    }
}

#[test]
fn swe_prbench_ground_truth_follows_the_annotations() {
    let swe = load_file(DatasetFormat::SwePrBench, &sample().join("swe-prbench/tasks.jsonl")).unwrap();
    let truth = |id: &str| -> Vec<String> {
        match &swe.tasks.iter().find(|t| t.task.id == id).unwrap().truth {
            GroundTruth::ReviewComments { comments, .. } => {
                comments.iter().map(|c| c["comment_id"].as_str().unwrap().to_string()).collect()
            }
            other => panic!("{other:?}"),
        }
    };
    // The substantive list when it has ids; an empty one falls back to the initiating comments.
    assert_eq!(truth("pyledger-001"), ["1"]);
    assert_eq!(truth("pyledger-003"), ["1", "2"]);
    assert_eq!(truth("tinyq-004"), ["1", "2"]);
}

#[test]
fn every_change_applies_and_reproduces_its_recorded_commits() {
    let crb = load_file(DatasetFormat::CrBugBench, &sample().join("crbugbench.jsonl")).unwrap();
    for loaded in &crb.tasks {
        let task = &loaded.task;
        let name = task.repo.rsplit('/').next().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let base = materialise_base(&sample().join("repos").join(name), dir.path()).unwrap();
        assert_eq!(Some(&base), task.base_commit.as_ref(), "{}: base commit", task.id);
        apply_change(dir.path(), &task.diff).unwrap_or_else(|e| panic!("{}: {e}", task.id));
        let head = commit_change(dir.path(), &task.title).unwrap();
        assert_eq!(Some(&head), task.head_commit.as_ref(), "{}: reviewed commit", task.id);
    }
}
