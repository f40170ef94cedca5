//! `lightsout report` on the quickstart's results: one self-contained HTML file next to the
//! results, with the summary's numbers and a link to every trial's artifacts, that opens in
//! headless Chromium (Debian's `chromium`) with no console error and with its charts drawn.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Debian's Chromium; the test needs it (`apt-get install -y chromium`).
fn chromium() -> PathBuf {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(candidate).exists() {
            return candidate.into();
        }
    }
    panic!("this test needs Debian's chromium (apt-get install -y chromium)");
}

/// Runs headless Chromium on `page` with `args`; returns (stdout, stderr).
fn headless(page: &Path, profile: &Path, args: &[&str]) -> (String, String) {
    let output = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--enable-logging=stderr", "--v=0", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let (out, err) = (common::stdout(&output), common::stderr(&output));
    assert!(output.status.success(), "chromium failed\nstdout:\n{out}\nstderr:\n{err}");
    (out, err)
}

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
    let profile = tempfile::tempdir().unwrap();
    let (dom, dom_log) = headless(&report, profile.path(), &["--dump-dom"]);
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
    let screenshot = keep.join("report-screenshot.png");
    let _ = std::fs::remove_file(&screenshot);
    let (_, shot_log) = headless(
        &report,
        profile.path(),
        &[&format!("--screenshot={}", screenshot.display()), "--window-size=1400,2000"],
    );
    for log in [&dom_log, &shot_log] {
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
        assert!(console.is_empty(), "console messages in the browser:\n{}", console.join("\n"));
    }
    let png = std::fs::read(&screenshot).expect("chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());
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
}
