//! `lightsout compare`: the quickstart run twice offline (the scripted models are
//! deterministic) shows no change; a copy whose judges' answers are turned to "no" regressed;
//! a run that is not there is an error. Exit codes 0 / 1 / 2.

mod common;

use std::path::Path;

use lightsout_core::judge::parse_answer;
use lightsout_core::scoring::Verdicts;
use serde_json::Value;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The quickstart into `dir`.
fn quickstart(dir: &Path) {
    let results = format!("file://{}", dir.display());
    let output = common::lightsout(&["run", "-f", "manifests/examples/quickstart.yaml", "--results", &results]);
    assert!(output.status.success(), "stdout:\n{}\nstderr:\n{}", common::stdout(&output), common::stderr(&output));
}

fn run_uri(dir: &Path) -> String {
    format!("file://{}/runs/quickstart", dir.display())
}

/// Every judge's "yes" in the run's verdicts becomes a "no", and the verdicts are re-scored from
/// the answers as the judge panel scores them: every hit becomes a miss, consistently.
fn plant_regression(run_dir: &Path) -> usize {
    let mut flipped = 0;
    for file in common::files_under(run_dir).iter().filter(|f| f.ends_with("/verdicts.json")) {
        let path = run_dir.join(file);
        let Verdicts::CrBugBench(panel) = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap() else {
            panic!("{file}: the quickstart is a CRBugBench run");
        };
        let hit = panel.first_hit_rank.is_some();
        let mut panel = panel;
        for vote in &mut panel.votes {
            if parse_answer(&vote.answer).is_some_and(|(value, _)| value == lightsout_core::judge::VoteValue::Yes) {
                vote.answer = r#"{"verdict": "no", "reason": "planted regression"}"#.to_string();
            }
        }
        let panel = panel.rescored(panel.vote_rule);
        assert_eq!(panel.first_hit_rank, None, "{file}");
        flipped += usize::from(hit);
        std::fs::write(&path, serde_json::to_vec_pretty(&Verdicts::CrBugBench(panel)).unwrap()).unwrap();
    }
    flipped
}

#[test]
fn identical_runs_pass_a_planted_regression_fails_and_a_missing_run_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    std::thread::scope(|scope| {
        scope.spawn(|| quickstart(&a));
        scope.spawn(|| quickstart(&b));
    });

    // Two identical scripted runs: no change, exit 0.
    let same = common::lightsout(&["compare", &run_uri(&a), &run_uri(&b)]);
    let (out, err) = (common::stdout(&same), common::stderr(&same));
    assert_eq!(same.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.lines().last().is_some_and(|l| l.starts_with("verdict: NoSignificantChange")), "{out}");
    for variant in ["gpt-5-mini/low", "gpt-5-mini/high", "claude-sonnet-4-5/low", "claude-sonnet-4-5/high"] {
        assert!(out.contains(variant), "{variant} missing from\n{out}");
    }
    assert!(out.contains("R@5 base → cand") && out.contains("McNemar p"), "{out}");

    let json = common::lightsout(&["compare", &run_uri(&a), &run_uri(&b), "--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", common::stderr(&json));
    let comparison: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(comparison["verdict"], "NoSignificantChange");
    assert_eq!(comparison["settings"]["k"], 5);
    assert_eq!(comparison["k"], serde_json::json!([1, 3, 5]));
    assert_eq!(comparison["variants"].as_array().unwrap().len(), 4);
    for v in comparison["variants"].as_array().unwrap() {
        assert_eq!(v["pairs"], 10, "{v}");
        for k in ["1", "3", "5"] {
            assert_eq!(v["by_k"][k]["mcnemar"]["p_value"], 1.0, "{v}");
            assert_eq!(v["by_k"][k]["recall_difference"]["difference"]["estimate"], 0.0, "{v}");
        }
        assert_eq!(v["verdict"], "NoSignificantChange");
    }

    // The same comparison, run again: the same bytes.
    let again = common::lightsout(&["compare", &run_uri(&a), &run_uri(&b), "--json"]);
    assert_eq!(again.stdout, json.stdout);

    // A planted regression: every hit of the candidate becomes a miss. Its summary.json is
    // recomputed by `lightsout run` (nothing is left to run or judge), so the comparison's
    // numbers can be checked against it.
    copy_dir(&b, &c);
    let flipped = plant_regression(&c.join("runs/quickstart"));
    assert!(flipped > 0);
    quickstart(&c);
    let summary: Value =
        serde_json::from_slice(&std::fs::read(c.join("runs/quickstart/summary.json")).unwrap()).unwrap();
    assert!(summary["variants"].as_array().unwrap().iter().all(|v| v["recall"]["5"] == 0.0), "{summary}");

    let regressed = common::lightsout(&["compare", &run_uri(&a), &run_uri(&c)]);
    let out = common::stdout(&regressed);
    assert_eq!(regressed.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{}", common::stderr(&regressed));
    assert!(out.contains("Regressed"), "{out}");
    assert!(out.lines().last().is_some_and(|l| l.starts_with("verdict: Regressed")), "{out}");

    let json = common::lightsout(&["compare", &run_uri(&a), &run_uri(&c), "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let comparison: Value = serde_json::from_slice(&json.stdout).unwrap();
    let baseline: Value =
        serde_json::from_slice(&std::fs::read(a.join("runs/quickstart/summary.json")).unwrap()).unwrap();
    for v in comparison["variants"].as_array().unwrap() {
        let at = &v["by_k"]["5"];
        let b = at["mcnemar"]["baseline_only"].as_u64().unwrap();
        assert_eq!(at["mcnemar"]["candidate_only"], 0, "{v}");
        // Every hit lost: p = 2·(½)^b, and the paired means are the two summaries' recall@5.
        let expected = (2.0 * 0.5f64.powi(b as i32)).min(1.0);
        assert!((at["mcnemar"]["p_value"].as_f64().unwrap() - expected).abs() < 1e-12, "{v}");
        let base = baseline["variants"].as_array().unwrap().iter().find(|s| s["name"] == v["variant"]).unwrap();
        assert_eq!(at["recall_difference"]["baseline_mean"], base["recall"]["5"], "{v}");
        assert_eq!(at["recall_difference"]["candidate_mean"], 0.0, "{v}");
        let verdict = if expected < 0.05 { "Regressed" } else { "NoSignificantChange" };
        assert_eq!(v["verdict"], verdict, "{v}");
    }
    // Raising the bar: a drop must exceed 100 points to count, so nothing regressed.
    let lenient = common::lightsout(&["compare", &run_uri(&a), &run_uri(&c), "--min-delta", "1"]);
    assert_eq!(lenient.status.code(), Some(0), "{}", common::stdout(&lenient));
    // The reverse direction improved.
    let improved = common::lightsout(&["compare", &run_uri(&c), &run_uri(&a)]);
    assert_eq!(improved.status.code(), Some(0));
    assert!(common::stdout(&improved).lines().last().unwrap().starts_with("verdict: Improved"));

    // The candidate's report with the baseline: what changed and what it cost, from the same
    // comparison (stored as comparison.json beside the run), opened in headless Chromium.
    let report = common::lightsout(&["report", &run_uri(&c), "--baseline", &run_uri(&a)]);
    let out = common::stdout(&report);
    assert!(report.status.success(), "stdout:\n{out}\nstderr:\n{}", common::stderr(&report));
    let run_dir = c.join("runs/quickstart");
    assert!(out.contains(&format!("comparison: file://{}/comparison.json (Regressed)", run_dir.display())), "{out}");
    let stored: Value = serde_json::from_slice(&std::fs::read(run_dir.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(stored, comparison, "report --baseline stores lightsout compare's comparison");
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.contains("<strong>Regressed</strong>") && html.contains("id=\"change-table\""), "no comparison shown");
    for v in comparison["variants"].as_array().unwrap() {
        let at = &v["by_k"]["5"];
        let (b, p) =
            (at["recall_difference"]["baseline_mean"].as_f64().unwrap(), at["mcnemar"]["p_value"].as_f64().unwrap());
        let d = &at["recall_difference"]["difference"];
        let cell = format!(
            "{b:.2} → 0.00<br><b>{:+.2}</b> <span class=\"ci\">[{:+.2}, {:+.2}]</span>",
            d["estimate"].as_f64().unwrap(),
            d["low"].as_f64().unwrap(),
            d["high"].as_f64().unwrap()
        );
        assert!(html.contains(&cell), "{}: recall@5 cell {cell} missing", v["variant"]);
        let p = if p < 0.001 { format!("{p:.1e}") } else { format!("{p:.3}") };
        assert!(
            html.contains(&format!(
                "{cell}<br><span class=\"ci\">p {p} · {} / 0</span></td>",
                at["mcnemar"]["baseline_only"]
            )),
            "{p}"
        );
        assert!(html.contains(&format!("<span class=\"badge b-{}\">", v["verdict"].as_str().unwrap())));
    }
    // Without --baseline, the stored comparison is shown again.
    let again = common::lightsout(&["report", &run_uri(&c)]);
    assert!(again.status.success(), "{}", common::stderr(&again));
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.contains("<strong>Regressed</strong>"));
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(keep).unwrap();
    let screenshot = keep.join("report-comparison-screenshot.png");
    let dom = common::browser::render(&run_dir.join("report.html"), &screenshot);
    assert!(
        dom.contains("id=\"chart-change\"") && dom.contains("id=\"verdict\""),
        "the comparison chart is not in the DOM"
    );
    assert_eq!(dom.matches("<g class=\"change\">").count(), 4, "one interval per variant");
    std::fs::copy(run_dir.join("report.html"), keep.join("report-comparison.html")).unwrap();
    println!("screenshot: {}", screenshot.display());

    // Bad input: exit 2, with what and where.
    let missing = format!("file://{}/runs/missing", a.display());
    let error = common::lightsout(&["compare", &run_uri(&a), &missing]);
    let err = common::stderr(&error);
    assert_eq!(error.status.code(), Some(2), "{err}");
    assert!(err.contains("candidate") && err.contains(&missing) && err.contains("no run.json"), "{err}");
    let error = common::lightsout(&["compare", a.to_str().unwrap(), &run_uri(&b)]);
    let err = common::stderr(&error);
    assert_eq!(error.status.code(), Some(2), "{err}");
    assert!(err.contains("baseline") && err.contains("file://DIR/runs/NAME"), "{err}");
    let error = common::lightsout(&["compare", &run_uri(&a), &run_uri(&b), "--k", "2"]);
    assert_eq!(error.status.code(), Some(2));
    assert!(common::stderr(&error).contains("k=2"), "{}", common::stderr(&error));
}
