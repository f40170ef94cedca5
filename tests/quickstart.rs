//! The quickstart as a new user runs it: offline, scripted models, a table and summary.json;
//! then run again, resumed, with nothing counted twice.

mod common;

use std::collections::BTreeMap;

use lightsout_core::scoring::Verdicts;
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
        // Every recall@k comes with its bootstrap interval, which brackets it.
        for k in ["1", "3", "5"] {
            let (r, i) = (v["recall"][k].as_f64().unwrap(), &v["recall_interval"][k]);
            let (low, high) = (i["low"].as_f64().unwrap(), i["high"].as_f64().unwrap());
            assert!(0.0 <= low && low <= r && r <= high && high <= 1.0, "k={k}: {i}");
            assert_eq!(i["resamples"], 10_000, "{i}");
        }
        // Three judges: Fleiss' kappa and three pairs.
        let agreement = &v["judge_agreement"];
        assert!(agreement["fleiss"]["kappa"].as_f64().is_some_and(|k| k > 0.0 && k <= 1.0), "{agreement}");
        assert_eq!(agreement["pairs"].as_array().unwrap().len(), 3, "{agreement}");
        assert!(v["latency_ms"]["p95"].is_number() && v["agent_usd_per_trial"].as_f64().unwrap() > 0.0, "{v}");
    }
    assert_eq!(summary["protocol"], "crbugbench");
    assert!(summary["tokens"]["judge"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(summary["tokens"]["agent"]["input_tokens"].as_u64().unwrap() > 0);
    // Every variant is compared with the first, paired by task.
    let comparisons = summary["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 3);
    for c in comparisons {
        let k1 = &c["by_k"]["1"];
        assert_eq!(k1["mcnemar"]["pairs"], 10, "{c}");
        let p = k1["mcnemar"]["p_value"].as_f64().unwrap();
        assert!(p > 0.0 && p <= 1.0, "{c}");
        assert!(k1["recall_difference"]["difference"]["estimate"].is_number(), "{c}");
    }

    // Every trial has exactly one finished attempt with a result and verdicts.
    let files = common::files_under(dir.path());
    let results: Vec<&String> = files.iter().filter(|f| f.ends_with("/result.json")).collect();
    assert_eq!(results.len(), 40);
    assert!(results.iter().all(|f| f.contains("/attempt-1/")));
    assert_eq!(files.iter().filter(|f| f.ends_with("/verdicts.json")).count(), 40);
    // Re-scoring from the judges' recorded answers, without a judge call, gives the same verdicts.
    for f in files.iter().filter(|f| f.ends_with("/verdicts.json")) {
        let stored: Verdicts = serde_json::from_slice(&std::fs::read(dir.path().join(f)).unwrap()).unwrap();
        let Verdicts::CrBugBench(panel) = &stored else { panic!("{f}: quickstart is a CRBugBench run") };
        assert_eq!(&panel.rescored(panel.vote_rule), panel, "{f}");
    }

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
        // Same verdicts and seed: the same intervals, bit for bit.
        assert_eq!(a["recall_interval"], b["recall_interval"]);
        assert_eq!(a["judge_agreement"], b["judge_agreement"]);
    }
    assert_eq!(resumed["comparisons"], summary["comparisons"]);
}

fn results_uri(dir: &tempfile::TempDir) -> String {
    format!("file://{}", dir.path().display())
}

#[test]
fn the_swe_prbench_example_runs_every_context_configuration_with_json_findings() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        common::lightsout(&["run", "-f", "manifests/examples/swe-prbench.yaml", "--results", &results_uri(&dir)]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let run_dir = dir.path().join("runs/swe-prbench-sample");
    let summary: Value = serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["dataset"]["format"], "swe-prbench");
    assert_eq!(summary["trials"]["planned"], 120, "2 models × 10 tasks × 3 context configurations × 2 repeats");
    assert_eq!(summary["trials"]["ok"], 120);
    assert_eq!(summary["variants"].as_array().unwrap().len(), 2, "a configuration is not a variant");
    for v in summary["variants"].as_array().unwrap() {
        assert_eq!(v["scored"], 60, "{v}");
        assert!(v["recall"]["5"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["recall_by_track"].as_object().unwrap().is_empty(), "SWE-PRBench tasks have no track");
    }
    // Each trial's agent was given its configuration's render, asked for JSON, and its JSON answer
    // was parsed as such; its result and its verdicts name the configuration.
    let files = common::files_under(&run_dir);
    let mut prompts_by_context: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for result in files.iter().filter(|f| f.ends_with("result.json")) {
        let result: Value = serde_json::from_slice(&std::fs::read(run_dir.join(result)).unwrap()).unwrap();
        let context = result["context_config"].as_str().unwrap_or_else(|| panic!("no context_config: {result}"));
        let attempt_dir = run_dir.join(format!(
            "{}/{}/attempt-{}",
            result["variant_id"].as_str().unwrap(),
            result["trial_id"].as_str().unwrap(),
            result["attempt"]
        ));
        let prompt = std::fs::read_to_string(attempt_dir.join("prompt.txt")).unwrap();
        let verdicts: Value =
            serde_json::from_slice(&std::fs::read(attempt_dir.join("verdicts.json")).unwrap()).unwrap();
        assert_eq!(verdicts["context_config"], context, "{verdicts}");
        // The harness's user message: the context file's render, unchanged.
        let task = result["task_id"].as_str().unwrap();
        let context_file =
            common::repo_root().join(format!("datasets/sample/swe-prbench/contexts/{context}/{task}.json"));
        let context_file: Value = serde_json::from_slice(&std::fs::read(context_file).unwrap()).unwrap();
        assert_eq!(prompt, context_file["rendered"].as_str().unwrap(), "{task} {context}");
        prompts_by_context.entry(context.to_string()).or_default().push(prompt);
    }
    assert_eq!(prompts_by_context.keys().collect::<Vec<_>>(), ["config_A", "config_B", "config_C"]);
    for (context, prompts) in &prompts_by_context {
        assert_eq!(prompts.len(), 40, "{context}");
        for prompt in prompts {
            let changed = prompt.contains("## Changed files, after this PR");
            let related = prompt.contains("## Related files (unchanged)");
            assert_eq!((changed, related), (context != "config_A", context == "config_C"), "{context}:\n{prompt}");
        }
    }
    let findings = files.iter().find(|f| f.ends_with("findings.json")).unwrap();
    let findings: Value = serde_json::from_slice(&std::fs::read(run_dir.join(findings)).unwrap()).unwrap();
    assert_eq!(findings["format"], "json");
    assert!(findings["findings"][0]["severity"].is_string(), "{findings}");

    // Scored as the reference harness scores: its record per trial and its report per variant.
    assert_eq!(summary["protocol"], "swe-prbench");
    assert!(summary["notices"].as_array().unwrap().is_empty(), "embeddings are configured: {summary}");
    for v in summary["variants"].as_array().unwrap() {
        let swe = &v["swe_prbench"];
        assert_eq!(swe["records"], 60, "{swe}");
        assert_eq!(swe["similarity"], "embeddings", "{swe}");
        let composite = swe["composite"].as_f64().unwrap();
        assert!(composite > 0.0 && composite <= 1.0, "{swe}");
        let interval = &swe["composite_interval"];
        assert!(interval["low"].as_f64().unwrap() <= composite && composite <= interval["high"].as_f64().unwrap());
        // The benchmark's per-configuration table: every PR in each configuration.
        let report = &swe["report"];
        assert_eq!(report["total_eval_records"], 60, "{swe}");
        assert_eq!(report["total_prs"], 10, "distinct PR numbers: {swe}");
        let by_config = report["by_config"].as_object().unwrap();
        assert_eq!(by_config.keys().collect::<Vec<_>>(), ["config_A", "config_B", "config_C"], "{swe}");
        for (context, scores) in by_config {
            assert_eq!(scores["n"], 20, "{context}: 10 PRs × 2 repeats: {swe}");
            assert!(scores["overall_score_weighted"].as_f64().is_some(), "{context}: {swe}");
        }
        assert!(report["by_difficulty"].as_object().unwrap().len() >= 2, "{swe}");
        assert!(v.get("judge_agreement").is_none(), "one judge, no agreement: {v}");
    }
    let verdicts = files.iter().find(|f| f.ends_with("verdicts.json")).unwrap();
    let verdicts: Value = serde_json::from_slice(&std::fs::read(run_dir.join(verdicts)).unwrap()).unwrap();
    assert_eq!(verdicts["protocol"], "swe-prbench");
    assert!(verdicts["judge_prompt_version"].as_str().unwrap().starts_with("v1.0"), "{verdicts}");
    assert!(verdicts["result"]["overall_score"].is_number(), "the harness's EvalResult: {verdicts}");
    assert!(verdicts["judge_answer"].is_string(), "the judge's raw answer is kept: {verdicts}");
}

/// Without an embeddings endpoint the lexical similarity is used, and the table and summary say
/// so before anything else.
#[test]
fn swe_prbench_without_embeddings_says_lexical_prominently() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(common::repo_root().join("manifests/examples/swe-prbench.yaml")).unwrap();
    let embeddings = manifest.lines().find(|l| l.contains("embeddings:")).unwrap();
    let lexical = manifest.replace(embeddings, "").replace("repeats: 2", "repeats: 1");
    let file = dir.path().join("lexical.yaml");
    std::fs::write(&file, lexical).unwrap();
    let output = common::lightsout(&["run", "-f", file.to_str().unwrap(), "--results", &results_uri(&dir)]);
    let out = common::stdout(&output);
    assert!(output.status.success(), "{}", common::stderr(&output));
    assert!(out.lines().nth(1).is_some_and(|l| l.starts_with("NOTE: SWE-PRBench similarity is LEXICAL")), "{out}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("runs/swe-prbench-sample/summary.json")).unwrap())
            .unwrap();
    assert!(summary["notices"][0].as_str().unwrap().contains("LEXICAL"), "{summary}");
    assert_eq!(summary["variants"][0]["swe_prbench"]["similarity"], "lexical");
}

/// A provider outage: `lightsout run` says what it left unfinished and exits 3; once the
/// provider is back (here: no key, so the scripted server answers), the same command finishes
/// the infra-failed trials and the missing judge votes, and exits 0.
#[test]
fn a_run_with_unfinished_trials_exits_3_and_a_rerun_finishes_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::write_run(
        dir.path(),
        "outage.yaml",
        &common::quickstart_with(&[
            // Nothing listens on port 9 of loopback: every call is refused at once.
            ("baseUrl: https://api.openai.com/v1", "baseUrl: http://127.0.0.1:9/v1"),
            (
                "source: file://datasets/sample/crbugbench.jsonl",
                "source: file://datasets/sample/crbugbench.jsonl\n    filter: {ids: [pyledger-001]}",
            ),
            ("retries: 2", "retries: 0"),
        ]),
    );
    let results = format!("file://{}", dir.path().join("results").display());
    let outage = std::process::Command::new(env!("CARGO_BIN_EXE_lightsout"))
        .args(["run", "-f", &run, "--results", &results])
        .current_dir(common::repo_root())
        .env("OPENAI_API_KEY", "sk-unreachable")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    let (out, err) = (common::stdout(&outage), common::stderr(&outage));
    assert_eq!(outage.status.code(), Some(3), "stdout:\n{out}\nstderr:\n{err}");
    // The OpenAI trials failed on infrastructure; the Anthropic ones reviewed, but two of their
    // three judges are at OpenAI: their votes are missing and every pair undecided.
    assert!(out.contains("trials: 4 planned, 0 pending, 2 infra-failed, 2 unjudged"), "{out}");
    assert!(err.contains("unfinished: 2 infra-failed, 2 unjudged; run the same command again"), "{err}");
    assert!(err.contains("judge votes missing"), "{err}");

    let again = common::lightsout(&["run", "-f", &run, "--results", &results]);
    let (out, err) = (common::stdout(&again), common::stderr(&again));
    assert!(again.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("2 already finished, 2 to run"), "infra-failed trials are run again: {err}");
    assert!(out.contains("trials: 4 planned, 0 pending, 0 infra-failed, 0 unjudged"), "{out}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results/runs/quickstart/summary.json")).unwrap())
            .unwrap();
    assert_eq!((summary["trials"]["ok"].as_u64(), summary["trials"]["unjudged"].as_u64()), (Some(4), Some(0)));
    for v in summary["variants"].as_array().unwrap() {
        assert_eq!(v["scored"], 1, "{v}");
    }
}
