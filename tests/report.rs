//! `lightsout report` on the quickstart's results: one self-contained HTML file next to the
//! results, with the summary's numbers and a link to every trial's artifacts, that opens in
//! headless Chromium (Debian's `chromium`) with no console error and with its charts drawn.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
fn the_report_of_the_quickstart_is_self_contained_and_opens_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let results = format!("file://{}", dir.path().display());
    let output = common::lightsout(&["run", "-f", "manifests/examples/quickstart.yaml", "--results", &results]);
    assert!(output.status.success(), "{}\n{}", common::stdout(&output), common::stderr(&output));

    let run_dir = dir.path().join("runs/quickstart");
    let output = common::lightsout(&["report", &format!("{results}/runs/quickstart")]);
    let (out, err) = (common::stdout(&output), common::stderr(&output));
    assert!(output.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    let report = run_dir.join("report.html");
    assert!(out.contains(&format!("report: file://{}", report.display())), "{out}");
    assert!(out.contains("SCRIPTED MODELS") && out.contains("R@1"), "{out}");

    let html = std::fs::read_to_string(&report).expect("report.html is written next to summary.json");
    let summary: Value = serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
    // The scripted-model banner, and every variant with the summary's own recall numbers.
    assert!(html.contains("id=\"scripted-models\""));
    let variants = summary["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 4);
    for v in variants {
        let name = v["name"].as_str().unwrap();
        assert!(html.contains(name), "{name} missing");
        assert!(out.contains(name), "{name} missing from the terminal table:\n{out}");
        for k in ["1", "3", "5"] {
            let (r, i) = (v["recall"][k].as_f64().unwrap(), &v["recall_interval"][k]);
            let cell = format!(
                "<b>{r:.2}</b><br><span class=\"ci\">[{:.2}, {:.2}]</span>",
                i["low"].as_f64().unwrap(),
                i["high"].as_f64().unwrap()
            );
            assert!(html.contains(&cell), "{name} recall@{k}: {cell} missing");
        }
        let kappa = v["judge_agreement"]["fleiss"]["kappa"].as_f64().unwrap();
        assert!(html.contains(&format!("<b>{kappa:.3}</b>")), "{name}: kappa {kappa}");
        // summary.json now carries recall by language (the sample's tasks are python and typescript).
        assert!(v["recall_by_language"]["python"]["5"].is_number(), "{v}");
        assert!(v["recall_by_language"]["typescript"]["1"].is_number(), "{v}");
    }
    // A summary.json written before these fields existed still parses.
    let mut old = summary.clone();
    for v in old["variants"].as_array_mut().unwrap() {
        let v = v.as_object_mut().unwrap();
        v.remove("recall_by_difficulty");
        v.remove("recall_by_language");
        v.remove("trajectory");
    }
    let old: lightsout_core::summary::RunSummary = serde_json::from_value(old).expect("an older summary parses");
    assert!(old.variants.iter().all(|v| v.recall_by_language.is_empty() && v.trajectory.is_none()));

    // Self-contained: no absolute URL, no script, no external stylesheet or image.
    for bad in ["http://", "https://", "<script", "<link", "<img", "@import", "url("] {
        assert!(!html.contains(bad), "the report must be self-contained, but it contains {bad:?}");
    }
    // A link to every trial's artifacts, relative to the run's directory, that resolves.
    let hrefs: Vec<&str> = html.split("href=\"").skip(1).map(|s| &s[..s.find('"').unwrap()]).collect();
    for artifact in ["review.md", "findings.json", "verdicts.json", "result.json"] {
        let links: Vec<&&str> = hrefs.iter().filter(|h| h.ends_with(&format!("/{artifact}"))).collect();
        assert_eq!(links.len(), 40, "{artifact}: one link per trial");
        for link in links {
            assert!(run_dir.join(link).is_file(), "{link} does not resolve from report.html");
        }
    }

    // -o writes elsewhere, with links that still resolve.
    let elsewhere = dir.path().join("elsewhere.html");
    let output =
        common::lightsout(&["report", &format!("{results}/runs/quickstart/"), "-o", elsewhere.to_str().unwrap()]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let other = std::fs::read_to_string(&elsewhere).unwrap();
    let first = other.split("href=\"").nth(1).map(|s| &s[..s.find('"').unwrap()]).unwrap();
    assert!(Path::new(first).is_file(), "{first}");

    // Not a run's results: a clear error.
    let output = common::lightsout(&["report", &results]);
    assert!(!output.status.success());
    assert!(common::stderr(&output).contains("runs/NAME"), "{}", common::stderr(&output));

    // Headless Chromium: the charts are in the DOM, no console error, and a screenshot is kept.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(keep).unwrap();
    let screenshot = keep.join("report-screenshot.png");
    let dom = common::browser::render(&report, &screenshot);
    for chart in [
        "id=\"chart-recall\"",
        "id=\"chart-pareto\"",
        "class=\"frontier\"",
        "id=\"variant-table\"",
        "id=\"trial-table\"",
    ] {
        assert!(dom.contains(chart), "{chart} missing from the rendered DOM");
    }
    assert!(dom.matches("<svg").count() >= 2 && dom.matches("<circle").count() >= 12 && dom.contains("<polyline"));
    std::fs::copy(&report, keep.join("report.html")).unwrap();
    println!("screenshot: {}", screenshot.display());
    println!("report: {}", keep.join("report.html").display());
}

/// With results in S3 (moto on loopback), the report is written next to them in S3.
#[test]
fn the_report_of_a_run_in_s3_is_written_next_to_its_results() {
    let moto = common::moto::Moto::start();
    moto.python("s3.create_bucket(Bucket='results')");
    let dir = tempfile::tempdir().unwrap();
    let run = common::quickstart_with(&[(
        "results: file://lightsout-results",
        &format!(
            "results: s3://results/lightsout\n    s3: {{endpoint: \"{}\", forcePathStyle: true}}",
            moto.endpoint()
        ),
    )]);
    let file = common::write_run(dir.path(), "run.yaml", &run);
    let with_credentials = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lightsout"))
            .args(args)
            .current_dir(common::repo_root())
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .output()
            .unwrap()
    };
    let output = with_credentials(&["run", "-f", &file]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let endpoint = moto.endpoint();
    let output = with_credentials(&[
        "report",
        "s3://results/lightsout/runs/quickstart",
        "--s3-endpoint",
        &endpoint,
        "--s3-force-path-style",
    ]);
    let (out, err) = (common::stdout(&output), common::stderr(&output));
    assert!(output.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("report: s3://results/lightsout/runs/quickstart/report.html"), "{out}");
    let html = moto.python(
        "print(s3.get_object(Bucket='results', Key='lightsout/runs/quickstart/report.html')['Body'].read().decode())",
    );
    assert!(html.contains("id=\"chart-recall\"") && html.contains("gpt-5-mini/low"));
    assert_eq!(html.matches("/review.md\"").count(), 40);

    // Comparison against S3: the run with itself changes nothing (exit 0), and `report
    // --baseline` stores comparison.json beside the run and shows it in report.html.
    let run_uri = "s3://results/lightsout/runs/quickstart";
    let s3_flags = ["--s3-endpoint", endpoint.as_str(), "--s3-force-path-style"];
    let compare: Vec<&str> = ["compare", run_uri, run_uri, "--json"].into_iter().chain(s3_flags).collect();
    let output = with_credentials(&compare);
    assert_eq!(output.status.code(), Some(0), "{}", common::stderr(&output));
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(comparison["verdict"], "NoSignificantChange");
    assert_eq!(comparison["baseline"]["uri"], run_uri);
    assert_eq!(comparison["variants"].as_array().unwrap().len(), 4);
    let report: Vec<&str> = ["report", run_uri, "--baseline", run_uri].into_iter().chain(s3_flags).collect();
    let output = with_credentials(&report);
    let out = common::stdout(&output);
    assert!(
        output.status.success(),
        "{out}
{}",
        common::stderr(&output)
    );
    assert!(
        out.contains("comparison: s3://results/lightsout/runs/quickstart/comparison.json (NoSignificantChange)"),
        "{out}"
    );
    let stored: Value = serde_json::from_str(&moto.python(
        "print(s3.get_object(Bucket='results', Key='lightsout/runs/quickstart/comparison.json')['Body'].read().decode())",
    ))
    .unwrap();
    assert_eq!(stored, comparison, "the stored comparison is lightsout compare's");
    let html = moto.python(
        "print(s3.get_object(Bucket='results', Key='lightsout/runs/quickstart/report.html')['Body'].read().decode())",
    );
    assert!(html.contains("id=\"what-changed\"") && html.contains("<strong>NoSignificantChange</strong>"));
}
