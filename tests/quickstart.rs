//! The quickstart as a new user runs it: offline, scripted models, a table and summary.json;
//! then run again, resumed, with nothing counted twice.

mod common;

use serde_json::Value;

#[test]
fn quickstart_runs_offline_and_resumes_without_recounting() {
    let dir = tempfile::tempdir().unwrap();
    let results = format!("file://{}", dir.path().display());
    let output = common::lightsout(&["run", "-f", "manifests/examples/quickstart.yaml", "--results", &results]);
    let (out, err) = (common::stdout(&output), common::stderr(&output));
    assert!(output.status.success(), "stdout:\n{out}\nstderr:\n{err}");

    // The user is told plainly that the models are scripted.
    assert!(err.contains("SCRIPTED model server"), "{err}");
    assert!(out.contains("SCRIPTED MODELS"), "{out}");
    // A row per variant, with recall@k columns.
    assert!(out.contains("R@1") && out.contains("R@5"), "{out}");
    for variant in ["gpt-5-mini/low", "gpt-5-mini/high", "claude-sonnet-4-5/low", "claude-sonnet-4-5/high"] {
        assert!(out.contains(variant), "{variant} missing from\n{out}");
    }

    let summary_path = dir.path().join("runs/quickstart/summary.json");
    let summary: Value = serde_json::from_slice(&std::fs::read(&summary_path).unwrap()).unwrap();
    assert_eq!(summary["schema"], "lightsout.dev/summary/v1");
    assert_eq!(summary["scripted_models"], true);
    assert_eq!(summary["trials"]["planned"], 40);
    assert_eq!(summary["trials"]["ok"], 40);
    assert_eq!(summary["dataset"]["tasks"], 10);
    let variants = summary["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 4);
    for v in variants {
        assert_eq!(v["scored"], 10, "{v}");
        let r1 = v["recall"]["1"].as_f64().unwrap();
        let r5 = v["recall"]["5"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&r1) && r1 <= r5, "recall@k must grow with k: {v}");
        assert!(v["recall_by_track"]["pre-merge"]["5"].is_number(), "{v}");
        assert!(v["spend"]["agent_usd"].as_f64().unwrap() > 0.0);
        assert!(v["spend"]["judge_usd"].as_f64().unwrap() > 0.0);
    }

    // Every trial has exactly one finished attempt with a result and verdicts.
    let files = common::files_under(dir.path());
    let results: Vec<&String> = files.iter().filter(|f| f.ends_with("/result.json")).collect();
    assert_eq!(results.len(), 40);
    assert!(results.iter().all(|f| f.contains("/attempt-1/")));
    assert_eq!(files.iter().filter(|f| f.ends_with("/verdicts.json")).count(), 40);

    // Simulate an interruption: three trials lose their result (the agent was running), one
    // loses only its verdicts (the judges were running).
    let mut removed = Vec::new();
    for f in results.iter().take(3) {
        std::fs::remove_file(dir.path().join(f)).unwrap();
        std::fs::remove_file(dir.path().join(f.replace("result.json", "verdicts.json"))).unwrap();
        removed.push(f.to_string());
    }
    let unjudged = results[3].replace("result.json", "verdicts.json");
    std::fs::remove_file(dir.path().join(&unjudged)).unwrap();
    let untouched = dir.path().join(results[10].as_str());
    let untouched_before = std::fs::read(&untouched).unwrap();

    let again =
        common::lightsout(&["run", "-f", "manifests/examples/quickstart.yaml", "--results", &results_uri(&dir)]);
    assert!(again.status.success(), "{}", common::stderr(&again));
    assert!(common::stderr(&again).contains("37 already finished, 3 to run"), "{}", common::stderr(&again));
    assert_eq!(std::fs::read(&untouched).unwrap(), untouched_before, "a finished trial was run again");
    for f in &removed {
        assert!(dir.path().join(f).exists(), "{f} was not re-run");
    }
    assert!(dir.path().join(&unjudged).exists(), "{unjudged} was not re-judged");

    let files = common::files_under(dir.path());
    assert_eq!(files.iter().filter(|f| f.ends_with("/result.json")).count(), 40);
    assert!(files.iter().all(|f| !f.contains("attempt-2")), "an interrupted attempt must be redone in place");
    let resumed: Value = serde_json::from_slice(&std::fs::read(&summary_path).unwrap()).unwrap();
    assert_eq!(resumed["trials"], summary["trials"]);
    // The scripted models are deterministic, so the resumed run scores exactly the same.
    for (a, b) in summary["variants"].as_array().unwrap().iter().zip(resumed["variants"].as_array().unwrap()) {
        assert_eq!(a["recall"], b["recall"]);
        assert_eq!(a["trials"], b["trials"]);
    }
}

fn results_uri(dir: &tempfile::TempDir) -> String {
    format!("file://{}", dir.path().display())
}

#[test]
fn the_swe_prbench_example_runs_with_json_findings_and_context() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        common::lightsout(&["run", "-f", "manifests/examples/swe-prbench.yaml", "--results", &results_uri(&dir)]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let run_dir = dir.path().join("runs/swe-prbench-sample");
    let summary: Value = serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["dataset"]["format"], "swe-prbench");
    assert_eq!(summary["trials"]["planned"], 40, "2 models × 10 tasks × 2 repeats");
    assert_eq!(summary["trials"]["ok"], 40);
    for v in summary["variants"].as_array().unwrap() {
        assert_eq!(v["scored"], 20, "{v}");
        assert!(v["recall"]["5"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["recall_by_track"].as_object().unwrap().is_empty(), "SWE-PRBench tasks have no track");
    }
    // The agent was given the config_B render (the changed files' full content), asked for JSON,
    // and its JSON answer was parsed as such.
    let files = common::files_under(&run_dir);
    let prompt = files.iter().find(|f| f.ends_with("prompt.txt")).unwrap();
    let prompt = std::fs::read_to_string(run_dir.join(prompt)).unwrap();
    assert!(prompt.contains("Return a JSON array"), "{prompt}");
    assert!(prompt.contains("## Changed files, after this PR"), "config_B context missing:\n{prompt}");
    let findings = files.iter().find(|f| f.ends_with("findings.json")).unwrap();
    let findings: Value = serde_json::from_slice(&std::fs::read(run_dir.join(findings)).unwrap()).unwrap();
    assert_eq!(findings["format"], "json");
    assert!(findings["findings"][0]["severity"].is_string(), "{findings}");
}
