//! A table of malformed inputs, each with the message it must get: run files (refused by both
//! `lightsout validate` and `lightsout run`, which write nothing), dataset lines (skipped with
//! their file and line), agent outputs and judge answers. The tables are the YAML files in
//! `tests/malformed/`; each file's header says what a case holds.

mod common;

use common::{lightsout, quickstart_with, stderr};
use lightsout_api::DatasetFormat;
use lightsout_core::{dataset, findings, judge};
use lightsout_swe_prbench as swe_prbench;
use serde::Deserialize;

fn table<T: serde::de::DeserializeOwned>(name: &str) -> Vec<T> {
    let path = common::repo_root().join("tests/malformed").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every fragment missing from `message`, for one failure listing all cases.
fn missing(case: &str, message: &str, expect: &[String]) -> Vec<String> {
    expect
        .iter()
        .filter(|fragment| !message.contains(fragment.as_str()))
        .map(|fragment| format!("{case}: {fragment:?} not in:\n{message}"))
        .collect()
}

#[derive(Deserialize)]
struct RunSpecCase {
    name: String,
    #[serde(default)]
    replace: Vec<(String, String)>,
    text: Option<String>,
    expect: Vec<String>,
}

#[test]
fn malformed_run_files_are_refused_by_validate_and_run_alike() {
    let cases: Vec<RunSpecCase> = table("run_specs.yaml");
    assert!(cases.len() >= 30, "{} run file cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let text = match &case.text {
            Some(text) => text.clone(),
            None => {
                let pairs: Vec<(&str, &str)> = case.replace.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
                quickstart_with(&pairs)
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let name = if text.trim_start().starts_with('{') { "run.json" } else { "run.yaml" };
        let file = common::write_run(dir.path(), name, &text);
        let results = dir.path().join("results");
        let validate = lightsout(&["validate", "-f", &file]);
        let run = lightsout(&["run", "-f", &file, "--results", &format!("file://{}", results.display())]);
        for (command, output) in [("validate", &validate), ("run", &run)] {
            let err = stderr(output);
            if output.status.success() {
                failures.push(format!("{}: `lightsout {command}` accepted it:\n{err}", case.name));
            }
            assert!(!err.contains("panicked"), "{}: lightsout {command} panicked:\n{err}", case.name);
            failures.extend(missing(&format!("{} (lightsout {command})", case.name), &err, &case.expect));
        }
        if results.exists() {
            failures.push(format!("{}: a refused run wrote {:?}", case.name, common::files_under(&results)));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

#[derive(Deserialize)]
struct DatasetLineCase {
    name: String,
    format: DatasetFormat,
    line: String,
    expect: Vec<String>,
}

/// A valid line 1 (task t1) in `format`.
fn valid_line(format: DatasetFormat) -> &'static str {
    match format {
        DatasetFormat::CrBugBench => {
            r#"{"task_id": "t1", "repo": "o/r", "title": "T", "diff": "+x", "track": "pre-merge", "bugs": [{"description": "d"}]}"#
        }
        DatasetFormat::SwePrBench => r#"{"task_id": "t1", "repo": "o/r", "pr_number": 1, "diff_patch": "+x"}"#,
        DatasetFormat::Jsonl => {
            r#"{"id": "t1", "repo": "o/r", "title": "T", "diff": "+x", "ground_truth": {"kind": "bugs", "bugs": [{"description": "d"}]}}"#
        }
    }
}

/// The benchmark layout's files beside a SWE-PRBench case's PR list: contexts for t1, t2 and t3,
/// annotations for t1, t2 and t4 (so t3 lacks its annotation and t4 its context).
fn swe_prbench_side_files(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("contexts/config_A")).unwrap();
    std::fs::create_dir_all(dir.join("annotations")).unwrap();
    for task in ["t1", "t2", "t3"] {
        std::fs::write(dir.join(format!("contexts/config_A/{task}.json")), r#"{"rendered": "R"}"#).unwrap();
    }
    for task in ["t1", "t2", "t4"] {
        let annotation = r#"{"comments": [{"comment_id": "c1", "body": "b", "is_initiating_comment": true}]}"#;
        std::fs::write(dir.join(format!("annotations/{task}_human.json")), annotation).unwrap();
    }
}

#[test]
fn malformed_dataset_lines_are_skipped_naming_file_and_line() {
    let cases: Vec<DatasetLineCase> = table("dataset_lines.yaml");
    assert!(cases.len() >= 20, "{} dataset line cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.jsonl");
        let mut bytes = format!("{}\n", valid_line(case.format)).into_bytes();
        let mut parts = case.line.split("<FF>");
        bytes.extend_from_slice(parts.next().unwrap_or_default().as_bytes());
        for part in parts {
            bytes.push(0xFF);
            bytes.extend_from_slice(part.as_bytes());
        }
        bytes.push(b'\n');
        std::fs::write(&path, bytes).unwrap();
        if case.format == DatasetFormat::SwePrBench {
            swe_prbench_side_files(dir.path());
        }
        let loaded = match dataset::load_file(case.format, &path) {
            Ok(loaded) => loaded,
            Err(e) => {
                failures.push(format!("{}: the whole dataset was refused: {e}", case.name));
                continue;
            }
        };
        let ids: Vec<&str> = loaded.tasks.iter().map(|t| t.task.id.as_str()).collect();
        if ids != ["t1"] {
            failures.push(format!("{}: tasks {ids:?}, expected only t1", case.name));
        }
        let [error] = loaded.skipped.as_slice() else {
            failures.push(format!("{}: skipped {:?}, expected line 2 alone", case.name, loaded.skipped));
            continue;
        };
        let message = error.to_string();
        let location = format!("{}:2: ", path.display());
        if !message.starts_with(&location) {
            failures.push(format!("{}: {message:?} does not start with {location:?}", case.name));
        }
        failures.extend(missing(&case.name, &message, &case.expect));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn a_dataset_with_a_bad_line_is_run_without_it_and_validate_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(common::repo_root().join("datasets/sample/crbugbench.jsonl")).unwrap();
    let mut bytes = b"{\"task_id\": \"caf\xff\"}\n".to_vec();
    bytes.extend_from_slice(&sample);
    let dataset = dir.path().join("tasks.jsonl");
    std::fs::write(&dataset, bytes).unwrap();
    let text = quickstart_with(&[("datasets/sample/crbugbench.jsonl", dataset.to_str().unwrap())]);
    let file = common::write_run(dir.path(), "run.yaml", &text);
    let output = lightsout(&["validate", "-f", &file]);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    let expected = format!(
        "warning: skipped malformed dataset line {}:1: not valid UTF-8 (byte 17 of the line)",
        dataset.display()
    );
    assert!(err.contains(&expected), "{err}");
}

#[derive(Deserialize)]
struct AgentOutputCase {
    name: String,
    kind: String,
    text: String,
    agents: Option<usize>,
    humans: Option<usize>,
    expect: Vec<String>,
}

#[test]
fn malformed_agent_outputs_and_judge_answers_are_read_as_documented() {
    let cases: Vec<AgentOutputCase> = table("agent_outputs.yaml");
    assert!(cases.len() >= 15, "{} agent output cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let outcome = match case.kind.as_str() {
            "review" => findings::parse_review(&case.text).warnings.join("\n"),
            "findings-json" => match findings::parse_json_findings(&case.text) {
                Ok(found) => format!("decoded {} finding(s)", found.len()),
                Err(e) => e.to_string(),
            },
            "judge-verdict" => match judge::parse_answer(&case.text) {
                Some((vote, reason)) => format!("vote {vote:?}: {reason}"),
                None => "unreadable: a failed vote".to_string(),
            },
            "judge-classifications" => {
                let agents = case.agents.expect("judge-classifications cases give agents");
                let humans = case.humans.expect("judge-classifications cases give humans");
                swe_prbench_judge_outcome(&case.text, agents, humans)
            }
            other => panic!("{}: unknown kind {other}", case.name),
        };
        failures.extend(missing(&case.name, &outcome, &case.expect));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

/// The reference harness's reading of a judge answer for `agents` agent and `humans` ground-truth
/// comments, one line.
fn swe_prbench_judge_outcome(text: &str, agents: usize, humans: usize) -> String {
    use swe_prbench::harness::{agent::AgentComment, judge_output, AgentOutput, Departures};
    let comments = (0..agents)
        .map(|i| AgentComment {
            comment_id: format!("a{i}"),
            body: format!("comment {i}"),
            file_reference: None,
            line_reference: None,
            severity_claim: None,
            is_outside_diff: false,
        })
        .collect();
    let agent = AgentOutput { raw_response: String::new(), comments, parse_success: true, parse_error: None };
    let humans: Vec<serde_json::Map<String, serde_json::Value>> = (0..humans)
        .map(|i| serde_json::json!({"comment_id": format!("h{i}"), "body": "b"}).as_object().unwrap().clone())
        .collect();
    let out = judge_output(Ok(text), &agent, &humans, &Departures::default());
    let entries: Vec<String> = out
        .agent_classifications
        .iter()
        .map(|c| {
            let reasoning = c.reasoning.as_deref().filter(|r| r.starts_with("fallback")).map(|r| format!(" ({r})"));
            format!(
                "{} {} {} {}{}",
                c.comment_id,
                c.classification,
                c.matched_human_comment_id.as_deref().unwrap_or("-"),
                c.actionability_score,
                reasoning.unwrap_or_default()
            )
        })
        .collect();
    format!("{}: {}", out.judge_prompt_version, entries.join("; "))
}

#[test]
fn validate_piped_into_a_reader_that_has_gone_exits_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    // The reader is gone before anything is written (as after `| head` has read its lines), so
    // every write meets a broken pipe, whatever the timing.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_lightsout"))
        .args(["validate", "-f", "manifests/examples/quickstart.yaml"])
        .current_dir(common::repo_root())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
}
