//! The benchmark's own dataset layout, read as the reference harness's `loader.py` reads it:
//! a PR list (`prs.jsonl`, or a JSON document with `prs` / `items` or a bare list), context
//! files `contexts/…/{task_id}.json` in the eight path forms it accepts, and annotation files
//! `annotations/{task_id}_human.json` (or `{pr_number}_human.json`) whose ground truth is the
//! `substantive_comment_ids` or else the initiating comments. A PR with no ground truth is
//! kept (it scores with weight 0).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::python;

/// A problem with the dataset, naming the file or the task.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not JSON: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("PR record not found for task {task_id}")]
    NoRecord { task_id: String },
    #[error("PR record {task_id}: pr_number {value} is not an integer")]
    PrNumber { task_id: String, value: String },
    #[error("context file missing for task {task_id}, {config}; tried {tried:?}")]
    NoContext { task_id: String, config: String, tried: Vec<PathBuf> },
    #[error("annotation file missing for task {task_id}; tried {tried:?}")]
    NoAnnotation { task_id: String, tried: Vec<PathBuf> },
    #[error("{path}: {what}")]
    Shape { path: PathBuf, what: &'static str },
}

/// The three context configurations' full names, as file stems and ids use them.
pub const CONFIG_A: &str = "config_A_diff_only";
pub const CONFIG_B: &str = "config_B_with_file_content";
pub const CONFIG_C: &str = "config_C_full_context";

/// The full configuration name for an alias (`A`, `config_A`, …); other names unchanged.
pub fn full_config_name(name: &str) -> String {
    match name {
        "A" | "config_A" => CONFIG_A,
        "B" | "config_B" => CONFIG_B,
        "C" | "config_C" => CONFIG_C,
        other => other,
    }
    .to_string()
}

/// The short folder name (`config_A`, …) of a full configuration name; other names unchanged.
pub fn short_config_name(full: &str) -> &str {
    match full {
        CONFIG_A => "config_A",
        CONFIG_B => "config_B",
        CONFIG_C => "config_C",
        other => other,
    }
}

/// The root of the contexts: a `config_A|B|C` folder given in its place means its parent.
pub fn contexts_root(path: &Path) -> PathBuf {
    let is_config_folder =
        path.file_name().and_then(|n| n.to_str()).is_some_and(|n| matches!(n, "config_A" | "config_B" | "config_C"));
    match (is_config_folder, path.parent()) {
        (true, Some(parent)) => parent.to_path_buf(),
        _ => path.to_path_buf(),
    }
}

fn read_json(path: &Path) -> Result<Value, LayoutError> {
    let text = std::fs::read_to_string(path).map_err(|source| LayoutError::Read { path: path.into(), source })?;
    serde_json::from_str(&text).map_err(|source| LayoutError::Json { path: path.into(), source })
}

/// The PR records: `.jsonl` (any case) line by line, skipping blank, malformed and non-object
/// lines; otherwise one JSON document whose `prs` (else `items`) member, or itself, is a list of
/// which the objects are kept.
pub fn load_pr_records(path: &Path) -> Result<Vec<Map<String, Value>>, LayoutError> {
    let is_jsonl = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    if is_jsonl {
        let text = std::fs::read_to_string(path).map_err(|source| LayoutError::Read { path: path.into(), source })?;
        return Ok(text
            .lines()
            .filter_map(|line| match serde_json::from_str::<Value>(python::strip(line)) {
                Ok(Value::Object(record)) => Some(record),
                _ => None,
            })
            .collect());
    }
    Ok(pr_records_of_document(read_json(path)?))
}

/// The PR records of a JSON document: its `prs` (else `items`) member, or itself, when a list;
/// the objects of that list.
pub fn pr_records_of_document(document: Value) -> Vec<Map<String, Value>> {
    let list = match document {
        Value::Object(mut map) => map.remove("prs").or_else(|| map.remove("items")).unwrap_or(Value::Null),
        other => other,
    };
    match list {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|item| match item {
                Value::Object(record) => Some(record),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `int(pr_number or number or 0)`.
fn pr_number(record: &Map<String, Value>, task_id: &str) -> Result<i64, LayoutError> {
    let value = [record.get("pr_number"), record.get("number")]
        .into_iter()
        .flatten()
        .find(|v| python::truthy(v))
        .cloned()
        .unwrap_or(Value::from(0));
    python::int_of(&value)
        .ok_or_else(|| LayoutError::PrNumber { task_id: task_id.to_string(), value: python::str_of(&value) })
}

/// A record's task id: its `task_id` if truthy, else `<repo's last segment>__<pr number>`.
pub fn task_id_of(record: &Map<String, Value>) -> Result<String, LayoutError> {
    if let Some(task_id) = record.get("task_id").filter(|v| python::truthy(v)) {
        return Ok(python::str_of(task_id));
    }
    let repo = python::text_or_empty(record, "repo");
    let tail = repo.rsplit('/').next().unwrap_or_default().to_string();
    let number = pr_number(record, &tail)?;
    Ok(format!("{tail}__{number}"))
}

/// A dataset in the benchmark's layout.
#[derive(Debug, Clone)]
pub struct BenchmarkLayout {
    pub prs: PathBuf,
    pub contexts: PathBuf,
    pub annotations: PathBuf,
}

/// One (task, configuration) as the harness evaluates it (`EvalInput`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalInput {
    pub task_id: String,
    pub pr_number: i64,
    pub repo: String,
    /// The context's own `config_name` if it has one, else the full requested name: ids, the
    /// adjacency rule and the per-config grouping use this.
    pub config_name: String,
    pub rendered_context: String,
    pub total_tokens: i64,
    pub pipeline_version: String,
    pub difficulty: String,
    pub pr_type: String,
    pub language: String,
    pub diff_patch: String,
    /// Ground-truth comments, as the annotation has them.
    pub human_comments: Vec<Map<String, Value>>,
    pub has_severity_annotations: bool,
}

impl BenchmarkLayout {
    /// The layout with `contexts` given as the root or one of its `config_X` folders.
    pub fn new(prs: impl Into<PathBuf>, contexts: impl AsRef<Path>, annotations: impl Into<PathBuf>) -> Self {
        BenchmarkLayout { prs: prs.into(), contexts: contexts_root(contexts.as_ref()), annotations: annotations.into() }
    }

    fn context_candidates(&self, task_id: &str, pr_number: i64, config: &str) -> Vec<PathBuf> {
        let full = full_config_name(config);
        let short = short_config_name(&full);
        let base = &self.contexts;
        let sub = base.join(short);
        vec![
            sub.join(format!("{task_id}.json")),
            sub.join(format!("{task_id}_{short}.json")),
            base.join(format!("{task_id}_{short}.json")),
            base.join(format!("{task_id}_{full}.json")),
            sub.join(format!("{pr_number}_{short}.json")),
            sub.join(format!("{pr_number}_{full}.json")),
            base.join(format!("{pr_number}_{short}.json")),
            base.join(format!("{pr_number}_{full}.json")),
        ]
    }

    fn context_path(&self, task_id: &str, pr_number: i64, config: &str) -> Result<PathBuf, LayoutError> {
        let tried = self.context_candidates(task_id, pr_number, config);
        tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| LayoutError::NoContext {
            task_id: task_id.to_string(),
            config: full_config_name(config),
            tried,
        })
    }

    /// The tasks of the PR list, in its order (duplicates kept), that have a context file for
    /// every one of `configs`.
    pub fn discover_task_ids(&self, configs: &[String]) -> Result<Vec<String>, LayoutError> {
        let mut out = Vec::new();
        for record in load_pr_records(&self.prs)? {
            let task_id = task_id_of(&record)?;
            let number = pr_number(&record, &task_id)?;
            if configs.iter().all(|config| self.context_path(&task_id, number, config).is_ok()) {
                out.push(task_id);
            }
        }
        Ok(out)
    }

    /// The evaluation input of `task_id` under `config` (an alias or a full name).
    pub fn load_eval_input(&self, task_id: &str, config: &str) -> Result<EvalInput, LayoutError> {
        let records = load_pr_records(&self.prs)?;
        let mut record = None;
        for candidate in records {
            if task_id_of(&candidate)? == task_id {
                record = Some(candidate);
                break;
            }
        }
        let record = record.ok_or_else(|| LayoutError::NoRecord { task_id: task_id.to_string() })?;
        self.eval_input_of(&record, task_id, config)
    }

    /// Whether the PR `record` (of `task_id`) has a context file for `config`.
    pub fn has_context(&self, record: &Map<String, Value>, task_id: &str, config: &str) -> Result<bool, LayoutError> {
        let number = pr_number(record, task_id)?;
        Ok(self.context_path(task_id, number, config).is_ok())
    }

    /// The evaluation input of the PR `record`, whose task id is `task_id`, under `config`.
    pub fn eval_input_of(
        &self,
        record: &Map<String, Value>,
        task_id: &str,
        config: &str,
    ) -> Result<EvalInput, LayoutError> {
        let number = pr_number(record, task_id)?;
        let full = full_config_name(config);
        let context_path = self.context_path(task_id, number, &full)?;
        let annotation_candidates = vec![
            self.annotations.join(format!("{task_id}_human.json")),
            self.annotations.join(format!("{number}_human.json")),
        ];
        let annotation_path = annotation_candidates
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .ok_or_else(|| LayoutError::NoAnnotation { task_id: task_id.to_string(), tried: annotation_candidates })?;
        let context = match read_json(&context_path)? {
            Value::Object(map) => map,
            _ => return Err(LayoutError::Shape { path: context_path, what: "a context file must be a JSON object" }),
        };
        let annotation = match read_json(&annotation_path)? {
            Value::Object(map) => map,
            _ => {
                return Err(LayoutError::Shape {
                    path: annotation_path,
                    what: "an annotation file must be a JSON object",
                })
            }
        };
        let human_comments = ground_truth(&annotation);
        let text = python::text_or_empty;
        let truthy_text = |key: &str| Some(text(&context, key)).filter(|s| !s.is_empty());
        let context_number = context.get("pr_number").filter(|v| python::truthy(v));
        let pr_number = match context_number {
            Some(value) => python::int_of(value)
                .ok_or_else(|| LayoutError::PrNumber { task_id: task_id.to_string(), value: python::str_of(value) })?,
            None => number,
        };
        let has_severity_annotations =
            human_comments.iter().any(|c| c.get("severity").is_some_and(|s| !s.is_null() && s.as_str() != Some("")));
        Ok(EvalInput {
            task_id: task_id.to_string(),
            pr_number,
            repo: truthy_text("repo").unwrap_or_else(|| text(record, "repo")),
            config_name: truthy_text("config_name").unwrap_or(full),
            rendered_context: text(&context, "rendered"),
            total_tokens: context
                .get("total_tokens")
                .filter(|v| python::truthy(v))
                .and_then(python::int_of)
                .unwrap_or(0),
            pipeline_version: text(&context, "pipeline_version"),
            difficulty: text(record, "difficulty"),
            pr_type: text(record, "pr_type"),
            language: text(record, "language"),
            diff_patch: text(record, "diff_patch"),
            human_comments,
            has_severity_annotations,
        })
    }

    /// The inputs of a whole run, task-major and in the order of `configs`, as the harness
    /// builds them before any model call.
    pub fn load_run(&self, configs: &[String]) -> Result<Vec<EvalInput>, LayoutError> {
        let mut inputs = Vec::new();
        for task_id in self.discover_task_ids(configs)? {
            for config in configs {
                inputs.push(self.load_eval_input(&task_id, config)?);
            }
        }
        Ok(inputs)
    }
}

/// The ground truth of an annotation: the comments whose raw `comment_id` is in a non-empty
/// `substantive_comment_ids` (Python equality: `"501"` is not `501`), else those with a truthy
/// `is_initiating_comment`; annotation order kept.
pub fn ground_truth(annotation: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let comments: Vec<Map<String, Value>> = match annotation.get("comments") {
        Some(Value::Array(items)) => items.iter().filter_map(|c| c.as_object().cloned()).collect(),
        _ => Vec::new(),
    };
    let substantive: &[Value] = match annotation.get("substantive_comment_ids") {
        Some(Value::Array(ids)) => ids,
        _ => &[],
    };
    if substantive.is_empty() {
        comments.into_iter().filter(|c| c.get("is_initiating_comment").is_some_and(python::truthy)).collect()
    } else {
        comments
            .into_iter()
            .filter(|c| {
                let id = c.get("comment_id").unwrap_or(&Value::Null);
                substantive.iter().any(|s| python::equal(s, id))
            })
            .collect()
    }
}
