//! SWE-PRBench on a real API server: the benchmark's own dataset layout (the PR list with its
//! `contexts/` and `annotations/` beside it) read from S3, configurations A, B and C as a matrix
//! axis, each trial's pod given the reference harness's prompt, and the run's summary.json — the
//! harness's records and `eval_report` cells per variant — equal to what `lightsout run` computes
//! for the same spec.

mod cluster;

use cluster::*;
use lightsout_core::results::ResultStore;
use serde_json::{json, Value};

/// Uploads the sample's SWE-PRBench dataset, every file under `datasets/sample/swe-prbench`, to
/// `s3://BUCKET/datasets/swe-prbench/`.
async fn upload_sample(moto: &moto::Moto) {
    let connection = lightsout_api::S3Connection {
        endpoint: Some(moto.endpoint()),
        region: Some("us-east-1".into()),
        secret_name: None,
        force_path_style: Some(true),
    };
    let store = lightsout_s3::Results::open(
        &format!("s3://{BUCKET}/datasets/swe-prbench"),
        Some(&connection),
        Some(lightsout_s3::S3Credentials::new("test", "test")),
    )
    .unwrap();
    let root = repo_root().join("datasets/sample/swe-prbench");
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let key = path.strip_prefix(&root).unwrap().display().to_string();
                store.put(&key, &std::fs::read(&path).unwrap()).await.unwrap();
            }
        }
    }
}

#[tokio::test]
async fn the_benchmark_layout_from_s3_runs_every_configuration_and_matches_lightsout_run() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "swe-prbench").await;
    let moto = start_moto();
    upload_sample(&moto).await;
    let models = ModelServer::start(control_plane);
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let controller = Controller::start(control_plane, &config, "only");
    let tasks = ["pyledger-001", "tinyq-003"];
    let spec = run_spec("swe", &models.base_url(), &moto, |run| {
        let spec = &mut run["spec"];
        spec["dataset"] = json!({
            "format": "swe-prbench",
            "source": format!("s3://{BUCKET}/datasets/swe-prbench/tasks.jsonl"),
            "filter": {"ids": tasks},
        });
        spec["agent"]["prompt"] = json!({"preset": "swe-prbench"});
        spec["matrix"] = json!({
            "models": [{"name": "gpt-5-mini", "provider": "openai"}],
            "contextConfigs": ["config_A", "config_B", "config_C"],
            "repeats": 1,
        });
        spec["judges"] = json!({"panel": [{"name": "gpt-5", "provider": "openai"}], "k": [1, 3, 5]});
    });
    let applied = kubectl_apply(control_plane, &ns.name, &spec);
    assert!(applied.status.success(), "kubectl apply: {}", stderr(&applied));
    let waited = control_plane
        .kubectl()
        .args(["wait", "--for=condition=Complete", "evalrun/swe", "-n", &ns.name, "--timeout=180s"])
        .output()
        .unwrap();
    assert!(
        waited.status.success(),
        "kubectl wait: {}\ncontroller:\n{}\n{}",
        stderr(&waited),
        controller.process.log_tail(60),
        diagnose(control_plane, &ns.name)
    );

    let store = store(&moto);
    let cluster: Value = serde_json::from_slice(&store.get("runs/swe/summary.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(cluster["protocol"], "swe-prbench");
    assert_eq!((cluster["trials"]["planned"].clone(), cluster["trials"]["ok"].clone()), (json!(6), json!(6)));
    let swe = &cluster["variants"][0]["swe_prbench"];
    assert_eq!(swe["records"], 6, "{swe}");
    assert_eq!(swe["similarity"], "lexical", "{swe}");
    assert_eq!(swe["report"]["total_prs"], 2, "{swe}");
    for config in ["config_A", "config_B", "config_C"] {
        assert_eq!(swe["report"]["by_config"][config]["n"], 2, "{config}: {swe}");
    }
    // A trial's verdicts hold the harness's record for its configuration.
    let verdicts: Vec<String> = store.list("runs/swe").await.unwrap();
    let verdicts: Vec<&String> = verdicts.iter().filter(|k| k.ends_with("verdicts.json")).collect();
    assert_eq!(verdicts.len(), 6, "{verdicts:?}");
    let one: Value = serde_json::from_slice(&store.get(verdicts[0]).await.unwrap().unwrap()).unwrap();
    assert_eq!(one["protocol"], "swe-prbench");
    assert!(one["result"]["overall_score"].is_number(), "{one}");

    // The same spec with `lightsout run`, the dataset from disk.
    let local_spec = spec.replace(
        &format!("s3://{BUCKET}/datasets/swe-prbench/tasks.jsonl"),
        &format!("file://{}", repo_root().join("datasets/sample/swe-prbench/tasks.jsonl").display()),
    );
    let local = local_summary(control_plane, &local_spec, &models);
    let comparable = |mut summary: Value| {
        summary.as_object_mut().unwrap().remove("run");
        summary["dataset"].as_object_mut().unwrap().remove("source");
        for variant in summary["variants"].as_array_mut().unwrap() {
            let variant = variant.as_object_mut().unwrap();
            variant.remove("latency_ms");
            // The scripted server's simulated prompt cache depends on arrival order.
            variant.remove("spend");
            variant.remove("agent_usd_per_trial");
            variant.remove("agent_tokens");
            variant.remove("judge_tokens");
        }
        for key in ["spend", "tokens"] {
            summary.as_object_mut().unwrap().remove(key);
        }
        summary
    };
    assert_eq!(comparable(cluster), comparable(local), "the cluster's summary against lightsout run's");
    drop(controller);
}
