//! `lightsout run` with results in S3 (a real S3-compatible server, moto, on loopback): killed
//! in the middle of a run and started again, it leaves exactly one complete set of artifacts
//! per trial and a summary that counts each trial once.

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// moto's S3 server on a free loopback port, stopped on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let moto = Moto { child, port };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "moto did not start: install it with pip install 'moto[server]==5.2.5'"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs a Python snippet with a boto3 client `s3` for this server.
    fn python(&self, code: &str) -> String {
        let script = format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n{code}",
            self.endpoint()
        );
        let output = Command::new("python3").args(["-c", &script]).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn keys(&self) -> Vec<String> {
        let listing = self.python(
            "p = s3.get_paginator('list_objects_v2')\nfor page in p.paginate(Bucket='results'):\n    for o in page.get('Contents', []):\n        print(o['Key'])",
        );
        listing.lines().map(str::to_string).collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
