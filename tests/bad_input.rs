//! Bad input gets a clear error naming the field or file (and line), a non-zero exit, and
//! nothing written half-way.

mod common;

use common::{lightsout, quickstart_with, stderr, write_run};

/// Runs `lightsout run` on a run file whose results go to a fresh directory, and returns the
/// error output after checking that it failed and wrote nothing.
fn refused(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = write_run(dir.path(), "run.yaml", text);
    let results = dir.path().join("results");
    let output = lightsout(&["run", "-f", &file, "--results", &format!("file://{}", results.display())]);
    let err = stderr(&output);
    assert!(!output.status.success(), "expected a refusal, got success:\n{err}");
    assert!(!results.exists(), "a refused run wrote results: {:?}", common::files_under(&results));
    err
}

#[test]
fn unknown_fields_are_named() {
    let err = refused(&quickstart_with(&[("  parallelism: 4", "  parallelism: 4\n  paralelism: 8")]));
    assert!(err.contains("spec.paralelism: unknown field"), "{err}");
}

#[test]
fn an_unpinned_harness_is_named() {
    let err = refused(&quickstart_with(&[("version: \"1.0.0\"", "version: latest")]));
    assert!(err.contains("spec.agent.harness.version") && err.contains("pinned"), "{err}");
}

#[test]
fn an_empty_matrix_axis_is_named() {
    let err = refused(&quickstart_with(&[("reasoningEfforts: [low, high]", "reasoningEfforts: []")]));
    assert!(err.contains("spec.matrix.reasoningEfforts"), "{err}");
}

#[test]
fn several_problems_are_reported_together() {
    let err = refused(&quickstart_with(&[("parallelism: 4", "parallelism: 0"), ("k: [1, 3, 5]", "k: [0]")]));
    assert!(err.contains("spec.parallelism") && err.contains("spec.judges.k"), "{err}");
}

#[test]
fn a_missing_dataset_names_the_file() {
    let err = refused(&quickstart_with(&[("datasets/sample/crbugbench.jsonl", "datasets/sample/nope.jsonl")]));
    assert!(err.contains("datasets/sample/nope.jsonl"), "{err}");
}

#[test]
fn a_dataset_with_no_valid_task_is_an_error_naming_its_lines() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("broken.jsonl");
    std::fs::write(&dataset, "{\"task_id\": \"x\"}\nnot json\n").unwrap();
    let err = refused(&quickstart_with(&[("datasets/sample/crbugbench.jsonl", dataset.to_str().unwrap())]));
    assert!(err.contains("broken.jsonl:1:") && err.contains("broken.jsonl:2:"), "{err}");
    assert!(err.contains("no valid task"), "{err}");
}

#[test]
fn a_built_in_harness_at_another_version_is_refused_before_anything_runs() {
    let err = refused(&quickstart_with(&[(
        "name: single-shot, version: \"1.0.0\"",
        "name: single-shot, version: \"2.0.0\"",
    )]));
    assert!(err.contains("single-shot is pinned to 2.0.0 but this build has single-shot 1.0.0"), "{err}");
}

#[test]
fn a_malformed_dataset_line_is_reported_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read_to_string(common::repo_root().join("datasets/sample/crbugbench.jsonl")).unwrap();
    let mut lines: Vec<&str> = sample.lines().take(2).collect();
    lines.insert(1, "{\"task_id\": \"broken\", \"repo\": \"r\", \"title\": \"t\", \"diff\": \"d\", \"track\": \"mid-merge\", \"bugs\": []}");
    let dataset = dir.path().join("two.jsonl");
    std::fs::write(&dataset, lines.join("\n")).unwrap();
    let file = write_run(
        dir.path(),
        "run.yaml",
        &quickstart_with(&[
            ("datasets/sample/crbugbench.jsonl", dataset.to_str().unwrap()),
            ("reasoningEfforts: [low, high]", "reasoningEfforts: [low]"),
        ]),
    );
    let results = format!("file://{}", dir.path().join("results").display());
    let output = lightsout(&["run", "-f", &file, "--results", &results]);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    assert!(err.contains("two.jsonl:2: field track"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results/runs/quickstart/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["dataset"]["tasks"], 2);
    assert_eq!(summary["dataset"]["skipped_lines"], 1);
}

#[test]
fn a_changed_spec_is_not_mixed_into_existing_results() {
    let dir = tempfile::tempdir().unwrap();
    let results = format!("file://{}", dir.path().join("results").display());
    let small = quickstart_with(&[
        ("reasoningEfforts: [low, high]", "reasoningEfforts: [low]"),
        ("repeats: 1", "repeats: 1\n    "),
    ]);
    let file = write_run(dir.path(), "a.yaml", &small);
    assert!(lightsout(&["run", "-f", &file, "--results", &results]).status.success());
    let changed =
        write_run(dir.path(), "b.yaml", &small.replace("reasoningEfforts: [low]", "reasoningEfforts: [high]"));
    let output = lightsout(&["run", "-f", &changed, "--results", &results]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("made with a different spec"), "{}", stderr(&output));
}

#[test]
fn validate_shows_the_plan_without_running() {
    let output = lightsout(&["validate", "-f", "manifests/examples/quickstart.yaml"]);
    let out = common::stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(out.contains("4 variants × 10 tasks × 1 repeats = 40 trials"), "{out}");
}

#[test]
fn codex_needs_a_responses_provider() {
    let err =
        refused(&quickstart_with(&[("name: single-shot, version: \"1.0.0\"", "name: codex, version: \"0.171.0\"")]));
    assert!(err.contains("speaks only the OpenAI Responses API"), "{err}");
}

#[test]
fn scoring_settings_that_cannot_work_are_named() {
    let err = refused(&quickstart_with(&[(
        "k: [1, 3, 5]",
        "k: [1, 3, 5]\n    protocol: swe-prbench\n    swePrbench: {embeddings: {name: text-embedding-3-small, provider: nowhere}}\n    bootstrap: {resamples: 5}",
    )]));
    assert!(err.contains("judges.protocol swe-prbench") && err.contains("dataset.format swe-prbench"), "{err}");
    assert!(err.contains("judges.swePrbench.embeddings.provider must be declared"), "{err}");
    assert!(err.contains("spec.judges.bootstrap.resamples"), "{err}");
}

#[test]
fn the_old_sample_n_is_named_with_its_new_name_and_why() {
    let old = "source: file://datasets/sample/crbugbench.jsonl\n    sample: {n: 5, seed: 1}";
    let err = refused(&quickstart_with(&[("source: file://datasets/sample/crbugbench.jsonl", old)]));
    assert!(err.contains("spec.dataset.sample.n: unknown field: dataset.sample.n is now dataset.sample.size"), "{err}");
    assert!(err.contains("YAML 1.1, where a bare n is the boolean false"), "{err}");
    // With the new name, the sample is planned.
    let dir = tempfile::tempdir().unwrap();
    let new = "source: file://datasets/sample/crbugbench.jsonl\n    sample: {size: 5, seed: 1}";
    let file = write_run(
        dir.path(),
        "run.yaml",
        &quickstart_with(&[("source: file://datasets/sample/crbugbench.jsonl", new)]),
    );
    let output = lightsout(&["validate", "-f", &file]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        common::stdout(&output).contains("4 variants × 5 tasks × 1 repeats = 20 trials"),
        "{}",
        common::stdout(&output)
    );
}

#[test]
fn a_value_over_its_schema_bound_is_named() {
    let long = format!("version: \"1.0.0-{}\"", "a".repeat(70));
    let err = refused(&quickstart_with(&[("version: \"1.0.0\"", &long)]));
    assert!(err.contains("spec.agent.harness.version: Too long: may not be longer than 64"), "{err}");
}
