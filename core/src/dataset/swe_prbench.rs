//! SWE-PRBench records, with their optional annotation and context files.
//!
//! `tasks.jsonl`: one PR a line: `task_id, repo, pr_number, language, difficulty, pr_type, title,
//! description, diff_patch, base_commit, head_commit, human_review_comments: [{id?, author, body,
//! path, line, diffHunk}]`. A comment without `id` gets its index in the list.
//!
//! Beside it, optionally: `annotations/<task_id>_human.json`
//! (`{substantive_comment_ids: [..], comments: [{id, is_initiating_comment, is_in_diff, severity}]}`)
//! and `contexts/config_{A,B,C}/<task_id>.json` (`{rendered: "..."}`).
//!
//! Ground truth, as the benchmark defines it: the comments listed in `substantive_comment_ids`;
//! when that list is absent or empty, the initiating comments. Without an annotation file, a
//! comment initiates when it is the first one on its (path, diff hunk) thread.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::Deserialize;

use super::{CommentSelection, GroundTruth, HumanComment, LoadedTask, Task};
use crate::api::ContextConfig;

#[derive(Deserialize)]
pub(super) struct Record {
    task_id: String,
    repo: String,
    #[serde(default)]
    pr_number: Option<u64>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    difficulty: Option<String>,
    #[serde(default)]
    pr_type: Option<String>,
    title: String,
    #[serde(default)]
    description: Option<String>,
    diff_patch: String,
    #[serde(default)]
    base_commit: Option<String>,
    #[serde(default)]
    head_commit: Option<String>,
    human_review_comments: Vec<RawComment>,
}

#[derive(Deserialize)]
struct RawComment {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    author: String,
    body: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<i64>,
    #[serde(default, rename = "diffHunk")]
    diff_hunk: Option<String>,
}

#[derive(Deserialize)]
struct Annotation {
    #[serde(default)]
    substantive_comment_ids: Vec<i64>,
    #[serde(default)]
    comments: Vec<CommentAnnotation>,
}

#[derive(Deserialize)]
struct CommentAnnotation {
    id: i64,
    #[serde(default)]
    is_initiating_comment: Option<bool>,
    #[serde(default)]
    severity: Option<String>,
}

#[derive(Deserialize)]
struct ContextFile {
    rendered: String,
}

pub(super) fn convert(record: Record, dir: &Path) -> Result<LoadedTask, String> {
    let id = record.task_id;
    if id.trim().is_empty() {
        return Err("task_id is empty".into());
    }
    super::check_task_names("task_id", &id, &record.repo)?;
    if record.diff_patch.trim().is_empty() {
        return Err(format!("task {id}: diff_patch is empty"));
    }
    let comments: Vec<HumanComment> = record
        .human_review_comments
        .into_iter()
        .enumerate()
        .map(|(index, c)| HumanComment {
            id: c.id.unwrap_or(index as i64),
            author: c.author,
            body: c.body,
            path: c.path,
            line: c.line,
            diff_hunk: c.diff_hunk,
            severity: None,
        })
        .collect();
    let annotation = read_json::<Annotation>(&dir.join("annotations").join(format!("{id}_human.json")))?;
    let (truth_comments, selection) = select_truth(comments, annotation.as_ref());
    if truth_comments.is_empty() {
        return Err(format!("task {id}: no ground-truth review comment (none substantive, none initiating)"));
    }
    let mut contexts = BTreeMap::new();
    for config in [ContextConfig::ConfigA, ContextConfig::ConfigB, ContextConfig::ConfigC] {
        let path = dir.join("contexts").join(config.as_str()).join(format!("{id}.json"));
        if let Some(context) = read_json::<ContextFile>(&path)? {
            contexts.insert(config, context.rendered);
        }
    }
    Ok(LoadedTask {
        task: Task {
            id,
            repo: record.repo,
            image: None,
            language: record.language,
            difficulty: record.difficulty,
            track: None,
            pr_number: record.pr_number,
            pr_type: record.pr_type,
            title: record.title,
            description: record.description.unwrap_or_default(),
            diff: record.diff_patch,
            base_commit: record.base_commit,
            head_commit: record.head_commit,
            contexts,
        },
        truth: GroundTruth::ReviewComments { comments: truth_comments, selection },
    })
}

/// The benchmark's ground-truth rule (see the module comment).
fn select_truth(comments: Vec<HumanComment>, annotation: Option<&Annotation>) -> (Vec<HumanComment>, CommentSelection) {
    let annotated = |id: i64| annotation.and_then(|a| a.comments.iter().find(|c| c.id == id));
    let with_severity = |mut c: HumanComment| {
        c.severity = annotated(c.id).and_then(|a| a.severity.clone());
        c
    };
    if let Some(a) = annotation.filter(|a| !a.substantive_comment_ids.is_empty()) {
        let keep: HashSet<i64> = a.substantive_comment_ids.iter().copied().collect();
        let chosen = comments.into_iter().filter(|c| keep.contains(&c.id)).map(with_severity).collect();
        return (chosen, CommentSelection::Substantive);
    }
    let mut threads_seen = HashSet::new();
    let chosen = comments
        .into_iter()
        .filter(|c| match annotated(c.id).and_then(|a| a.is_initiating_comment) {
            Some(initiating) => initiating,
            None => threads_seen.insert((c.path.clone(), c.diff_hunk.clone())),
        })
        .map(with_severity)
        .collect();
    (chosen, CommentSelection::Initiating)
}

/// Reads an optional JSON side file: absent is `None`, present but malformed is an error.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut json = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut json)
        .map(Some)
        .map_err(|e| format!("{}: field {}: {}", path.display(), e.path(), e.inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: i64, path: &str, hunk: &str) -> HumanComment {
        HumanComment {
            id,
            author: "a".into(),
            body: format!("comment {id}"),
            path: Some(path.into()),
            line: Some(1),
            diff_hunk: Some(hunk.into()),
            severity: None,
        }
    }

    fn ids(comments: &[HumanComment]) -> Vec<i64> {
        comments.iter().map(|c| c.id).collect()
    }

    #[test]
    fn substantive_ids_win() {
        let annotation = Annotation { substantive_comment_ids: vec![2], comments: vec![] };
        let (chosen, why) = select_truth(vec![comment(1, "a", "h"), comment(2, "a", "h")], Some(&annotation));
        assert_eq!((ids(&chosen), why), (vec![2], CommentSelection::Substantive));
    }

    #[test]
    fn empty_substantive_list_falls_back_to_annotated_initiating_comments() {
        let annotation = Annotation {
            substantive_comment_ids: vec![],
            comments: vec![
                CommentAnnotation { id: 1, is_initiating_comment: Some(false), severity: None },
                CommentAnnotation { id: 2, is_initiating_comment: Some(true), severity: Some("P1".into()) },
            ],
        };
        let (chosen, why) = select_truth(vec![comment(1, "a", "h"), comment(2, "b", "h")], Some(&annotation));
        assert_eq!((ids(&chosen), why), (vec![2], CommentSelection::Initiating));
        assert_eq!(chosen[0].severity.as_deref(), Some("P1"));
    }

    #[test]
    fn without_annotation_the_first_comment_of_each_thread_initiates() {
        let comments = vec![comment(1, "a", "h1"), comment(2, "a", "h1"), comment(3, "a", "h2")];
        let (chosen, _) = select_truth(comments, None);
        assert_eq!(ids(&chosen), vec![1, 3]);
    }
}
