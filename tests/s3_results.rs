//! `lightsout run` with results in S3 (a real S3-compatible server, moto, on loopback): killed
//! in the middle of a run and started again, it leaves exactly one complete set of artifacts
//! per trial and a summary that counts each trial once.

mod common;

use common::moto::Moto;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn lightsout_run(file: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lightsout"));
    command
        .args(["run", "-f", file])
        .current_dir(common::repo_root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test");
    command
}

#[test]
fn a_run_killed_mid_upload_resumes_to_exactly_one_complete_set_per_trial() {
    let moto = Moto::start();
    moto.python("s3.create_bucket(Bucket='results')");
    let dir = tempfile::tempdir().unwrap();
    let run = common::quickstart_with(&[
        (
            "results: file://lightsout-results",
            &format!(
                "results: s3://results/lightsout\n    s3: {{endpoint: \"{}\", forcePathStyle: true}}",
                moto.endpoint()
            ),
        ),
        ("parallelism: 4", "parallelism: 2"),
    ]);
    let file = common::write_run(dir.path(), "run.yaml", &run);

    // Kill the run once a few trials are stored, while others are mid-flight.
    let mut child = lightsout_run(&file).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    loop {
        let stored = moto.keys().iter().filter(|k| k.ends_with("/result.json")).count();
        if stored >= 4 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        assert!(started.elapsed() < Duration::from_secs(120), "no result reached S3");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let partial = moto.keys().iter().filter(|k| k.ends_with("/result.json")).count();
    assert!(partial < 40, "the kill came too late to test anything ({partial} results)");

    let output = lightsout_run(&file).output().unwrap();
    assert!(output.status.success(), "{}", common::stderr(&output));
    assert!(common::stderr(&output).contains(&format!("{partial} already finished")), "{}", common::stderr(&output));

    let keys = moto.keys();
    let results: Vec<&String> = keys.iter().filter(|k| k.ends_with("/result.json")).collect();
    assert_eq!(results.len(), 40, "one result per trial");
    for result in results {
        assert!(result.contains("/attempt-1/"), "{result}: an interrupted attempt is redone in place");
        let attempt = result.trim_end_matches("result.json");
        let mut files: Vec<&str> =
            keys.iter().filter(|k| k.starts_with(attempt)).map(|k| &k[attempt.len()..]).collect();
        files.sort_unstable();
        assert_eq!(files, ["findings.json", "prompt.txt", "result.json", "review.md", "verdicts.json"], "{attempt}");
    }
    let summary = moto.python("import json\nprint(s3.get_object(Bucket='results', Key='lightsout/runs/quickstart/summary.json')['Body'].read().decode())");
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["trials"]["planned"], 40);
    assert_eq!(summary["trials"]["ok"], 40);
}
