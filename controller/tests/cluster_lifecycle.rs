//! A run's life on a real API server, beyond the happy path: suspend and resume, a budget that
//! stops new trials and a raised one that resumes them, delete (the run's Jobs, ConfigMaps and
//! NetworkPolicy go, its results stay), a pod the node evicts and a pod that never starts (both
//! retried as infrastructure failures, never scored), and a job file too large to travel in its
//! Job (a ConfigMap the Job owns, collected with it).

mod cluster;

use std::time::Duration;

use cluster::*;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams, Patch, PatchParams};
use lightsout_core::results::ResultStore;
use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use serde_json::{json, Value};

const MINUTE: Duration = Duration::from_secs(60);

/// One model at one effort over the sample's first `tasks` tasks, `parallelism` at a time.
fn small(spec: &mut Value, tasks: usize, parallelism: u32) {
    spec["spec"]["dataset"]["filter"] = json!({"ids": sample_task_ids(tasks)});
    spec["spec"]["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "openai"}]);
    spec["spec"]["matrix"]["reasoningEfforts"] = json!(["low"]);
    spec["spec"]["parallelism"] = json!(parallelism);
}

async fn patch_spec(ns: &TestNamespace, run: &str, spec: Value) {
    ns.runs().patch(run, &PatchParams::default(), &Patch::Merge(json!({"spec": spec}))).await.unwrap();
}

/// A scripted model server in this process that answers each model call after `delay`, so a
/// trial stays in flight long enough to be evicted or deleted.
async fn slow_models(delay: Duration) -> ScriptedServer {
    let config = ScriptedConfig {
        faults: Faults { delay_ms: delay.as_millis() as u64, ..Default::default() },
        ..Default::default()
    };
    ScriptedServer::start(config).await.unwrap()
}

/// This control plane has no Kueue: a run that names a queue is refused saying so, not left
/// waiting on Jobs nobody will admit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_name_without_kueue_in_the_cluster_is_refused_saying_so() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "no-kueue").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    let spec = run_spec("queued", &models.base_url(), &moto, |s| s["spec"]["queueName"] = json!("evals"));
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let run = wait_condition(&ns, "queued", "Accepted", "False", MINUTE, || controller.process.log_tail(30)).await;
    let (_, reason, message) = condition(&run, "Accepted").unwrap();
    assert_eq!(reason, "KueueNotInstalled", "{message}");
    assert!(message.contains("install Kueue or remove spec.queueName"), "{message}");
    assert!(jobs_of(&ns, "queued").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_starts_nothing_until_resumed() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "suspend").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    let spec = run_spec("paused", &models.base_url(), &moto, |s| {
        small(s, 2, 2);
        s["spec"]["suspend"] = json!(true);
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    wait_condition(&ns, "paused", "Suspended", "True", MINUTE, context).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(jobs_of(&ns, "paused").await.is_empty(), "a suspended run created Jobs");

    patch_spec(&ns, "paused", json!({"suspend": false})).await;
    let run = wait_condition(&ns, "paused", "Complete", "True", 3 * MINUTE, context).await;
    assert_eq!(run.status.unwrap().trials.succeeded, 2);
    assert_eq!(condition(&ns.run("paused").await, "Suspended").unwrap().0, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_stops_new_trials_and_a_raised_one_resumes_them() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "budget").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    // A trial costs about $0.001 and its judging $0.003 here. The first trial starts (its
    // expected cost, maxTrialUSD before any has finished, fits); after it, the next does not.
    let spec = run_spec("capped", &models.base_url(), &moto, |s| {
        small(s, 4, 1);
        s["spec"]["budget"] = json!({"maxUSD": 0.005, "maxTrialUSD": 0.002});
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    let run = wait_condition(&ns, "capped", "BudgetExceeded", "True", 2 * MINUTE, context).await;
    let status = run.status.unwrap();
    assert!(status.trials.pending > 0, "the budget stopped nothing: {:?}", status.trials);
    // The trials started before the budget ran out finish; then nothing new starts.
    let created = eventually(
        "the trials in flight to finish",
        2 * MINUTE,
        async || {
            let jobs = jobs_of(&ns, "capped").await;
            jobs.iter().all(|j| job_outcome(j).is_some()).then_some(jobs.len())
        },
        context,
    )
    .await;
    assert!(created < 4, "{created} Jobs for 4 trials over budget");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(jobs_of(&ns, "capped").await.len(), created, "a Job was created over budget");
    assert_eq!(condition(&ns.run("capped").await, "Complete").unwrap().0, "False");

    patch_spec(&ns, "capped", json!({"budget": {"maxUSD": 5.0}})).await;
    let run = wait_condition(&ns, "capped", "Complete", "True", 3 * MINUTE, context).await;
    assert_eq!(run.status.as_ref().unwrap().trials.succeeded, 4);
    assert_eq!(condition(&run, "BudgetExceeded").unwrap().0, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_run_takes_its_objects_and_leaves_its_results() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "delete").await;
    let moto = start_moto();
    let models = slow_models(Duration::from_secs(2)).await;
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    let spec = run_spec("doomed", &models.base_url(), &moto, |s| small(s, 4, 1));
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    // Delete once one trial has finished and the next is in flight.
    eventually(
        "a finished trial and one in flight",
        3 * MINUTE,
        async || {
            let jobs = jobs_of(&ns, "doomed").await;
            (jobs.iter().any(|j| job_outcome(j).is_some()) && jobs.iter().any(|j| job_outcome(j).is_none()))
                .then_some(())
        },
        context,
    )
    .await;
    let stored_before = attempt_outcomes(&moto, "doomed").await.len();
    assert!(stored_before >= 1);
    run_ok(control_plane.kubectl().args(["delete", "evalrun", "doomed", "-n", &ns.name, "--timeout=120s"]));

    // The finalizer removed the run's objects; the garbage collector the pods.
    eventually(
        "the run's Jobs, ConfigMaps and NetworkPolicy to go",
        2 * MINUTE,
        async || {
            let jobs = jobs_of(&ns, "doomed").await;
            let selector = "lightsout.dev/run=doomed";
            let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
                .list(&ListParams::default().labels(selector))
                .await
                .unwrap();
            let policies = Api::<NetworkPolicy>::namespaced(ns.client.clone(), &ns.name)
                .list(&ListParams::default())
                .await
                .unwrap();
            (jobs.is_empty() && config_maps.items.is_empty() && policies.items.is_empty()).then_some(())
        },
        context,
    )
    .await;
    let stored_after = attempt_outcomes(&moto, "doomed").await.len();
    assert!(stored_after >= stored_before, "results were deleted with the run");
    assert!(store(&moto).get("runs/doomed/run.json").await.unwrap().is_some(), "run.json was deleted with the run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_trial_is_retried_and_never_scored() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "evict").await;
    let moto = start_moto();
    let models = slow_models(Duration::from_secs(3)).await;
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    let spec = run_spec("evicted", &models.base_url(), &moto, |s| small(s, 1, 1));
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    let pod = eventually(
        "the first attempt's worker to run",
        2 * MINUTE,
        async || {
            let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(ns.client.clone(), &ns.name);
            let pod = pods
                .list(&ListParams::default().labels("lightsout.dev/run=evicted"))
                .await
                .ok()?
                .items
                .into_iter()
                .next()?;
            let name = pod.metadata.name?;
            control_plane.kubelet.container_pid(&ns.name, &name, "trial").map(|_| name)
        },
        context,
    )
    .await;
    assert!(control_plane.kubelet.evict(&ns.name, &pod, "The node was low on resource: memory."));
    let run = wait_condition(&ns, "evicted", "Complete", "True", 3 * MINUTE, context).await;
    let trials = run.status.unwrap().trials;
    assert_eq!((trials.succeeded, trials.infra_failed, trials.failed), (1, 0, 0), "{trials:?}");
    let outcomes = attempt_outcomes(&moto, "evicted").await;
    let described: Vec<String> =
        outcomes.iter().map(|(k, r)| format!("{k}: {} {}", r["outcome"], r["error"])).collect();
    assert_eq!(outcomes.len(), 2, "{described:?}");
    assert!(outcomes[0].0.contains("/attempt-1/") && outcomes[0].1["outcome"] == "infra-failed", "{described:?}");
    assert!(outcomes[1].0.contains("/attempt-2/") && outcomes[1].1["outcome"] == "ok", "{described:?}");
    let summary: Value =
        serde_json::from_slice(&store(&moto).get("runs/evicted/summary.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(summary["trials"]["ok"], 1, "{}", summary["trials"]);
    assert_eq!(summary["variants"][0]["scored"], 1, "the eviction was scored: {}", summary["variants"][0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_whose_image_never_pulls_is_retried_and_never_scored() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "pull").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    // A dataset of one task whose image the registry cannot serve for now.
    let image = format!("testkit.local/flaky/{}:1", ns.name);
    control_plane.images.add(&image, lightsout_testkit::Image::on_host_base());
    control_plane.images.fail_pulls(&image, u32::MAX);
    let dataset = one_task_dataset(control_plane, |task| task["image"] = json!(image));
    let mut config = ControllerConfig::new(control_plane, &ns.name).await;
    config.extra_args = vec!["--image-pull-grace".into(), "10s".into()];
    let controller = Controller::start(control_plane, &config, "only");
    let spec = run_spec("pulls", &models.base_url(), &moto, |s| {
        small(s, 1, 1);
        s["spec"]["dataset"]["source"] = json!(dataset);
        s["spec"]["dataset"]["filter"] = json!({});
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    // The first attempt is given up as an image-pull failure and stored as such.
    eventually(
        "the first attempt to be recorded as an infrastructure failure",
        2 * MINUTE,
        async || {
            let outcomes = attempt_outcomes(&moto, "pulls").await;
            outcomes.iter().any(|(k, r)| k.contains("/attempt-1/") && r["outcome"] == "infra-failed").then_some(())
        },
        context,
    )
    .await;
    // The registry recovers; the retry runs.
    control_plane.images.fail_pulls(&image, 0);
    let run = wait_condition(&ns, "pulls", "Complete", "True", 3 * MINUTE, context).await;
    let trials = run.status.unwrap().trials;
    assert_eq!((trials.succeeded, trials.infra_failed), (1, 0), "{trials:?}");
    let outcomes = attempt_outcomes(&moto, "pulls").await;
    let first = &outcomes.iter().find(|(k, _)| k.contains("/attempt-1/")).unwrap().1;
    assert!(first["error"].to_string().to_lowercase().contains("image"), "{first}");
    let summary: Value =
        serde_json::from_slice(&store(&moto).get("runs/pulls/summary.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(summary["variants"][0]["scored"], 1, "{}", summary["variants"][0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_job_file_travels_in_a_config_map_collected_with_its_job() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "large").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let padding: String = (0..6000).map(|i| format!("+# padding line {i} of a large generated change\n")).collect();
    let dataset = one_task_dataset(control_plane, |task| {
        task["diff"] = json!(format!("{}{padding}", task["diff"].as_str().unwrap()))
    });
    let mut config = ControllerConfig::new(control_plane, &ns.name).await;
    config.extra_args = vec!["--finished-job-ttl-seconds".into(), "3".into()];
    let controller = Controller::start(control_plane, &config, "only");
    let spec = run_spec("large", &models.base_url(), &moto, |s| {
        small(s, 1, 1);
        s["spec"]["dataset"]["source"] = json!(dataset);
        s["spec"]["dataset"]["filter"] = json!({});
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let owned = eventually(
        "the trial's job ConfigMap",
        2 * MINUTE,
        async || {
            let list = config_maps.list(&ListParams::default().labels("lightsout.dev/run=large")).await.ok()?;
            list.items.into_iter().next()
        },
        context,
    )
    .await;
    let owner = &owned.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "Job", "the ConfigMap belongs to its Job");
    wait_condition(&ns, "large", "Complete", "True", 3 * MINUTE, context).await;
    // The finished Job's TTL deletes it, and the garbage collector its pod and ConfigMap.
    eventually(
        "the Job and its ConfigMap to be collected",
        2 * MINUTE,
        async || {
            let left = config_maps.list(&ListParams::default().labels("lightsout.dev/run=large")).await.ok()?;
            (jobs_of(&ns, "large").await.is_empty() && left.items.is_empty()).then_some(())
        },
        context,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dataset_in_a_missing_bucket_is_named_on_the_run_and_in_an_event() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "nobucket").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    let uri = "s3://no-such-bucket/crbugbench.jsonl";
    let spec = run_spec("lost", &models.base_url(), &moto, |s| {
        small(s, 1, 1);
        s["spec"]["dataset"]["filter"] = json!({});
        s["spec"]["dataset"]["source"] = json!(uri);
        s["spec"]["dataset"]["s3"] = s["spec"]["storage"]["s3"].clone();
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    let run = wait_condition(&ns, "lost", "Accepted", "False", 2 * MINUTE, context).await;
    let (_, reason, message) = condition(&run, "Accepted").unwrap();
    assert_eq!(reason, "DatasetNotFound", "{message}");
    assert!(message.contains(uri), "{message}");
    assert!(jobs_of(&ns, "lost").await.is_empty());
    let warnings = run_ok(control_plane.kubectl().args([
        "get",
        "events",
        "-n",
        &ns.name,
        "--field-selector",
        "involvedObject.name=lost,type=Warning",
        "-o",
        "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
    ]));
    assert!(warnings.lines().any(|l| l.contains(uri)), "no Warning Event naming {uri}:\n{warnings}");
    // One line per error in the controller's log: no SDK debug dump.
    let log = controller.process.log_tail(400);
    assert!(
        log.lines().all(|l| l.len() < 2000),
        "a log line of {} bytes",
        log.lines().map(str::len).max().unwrap_or(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_in_an_s3_store_named_by_host_name_are_addressed_path_style() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "pathstyle").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    // A host name, as a Service's is, not an address: virtual-hosted style would ask for
    // `results.localhost`, which does not resolve. Its egress is allowed by CIDR.
    let endpoint = moto.endpoint().replace("127.0.0.1", "localhost");
    let network = control_plane.scratch_dir("network").join("network.yaml");
    std::fs::write(&network, "s3Cidrs: [127.0.0.1/32]\n").unwrap();
    let mut config = ControllerConfig::new(control_plane, &ns.name).await;
    config.extra_args = vec!["--network-config".into(), network.display().to_string()];
    let controller = Controller::start(control_plane, &config, "only");
    let spec = run_spec("named", &models.base_url(), &moto, |s| {
        small(s, 2, 2);
        s["spec"]["storage"]["s3"] = json!({"endpoint": endpoint, "region": "us-east-1", "secretName": "s3-creds"});
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    let run = wait_condition(&ns, "named", "Complete", "True", 3 * MINUTE, context).await;
    assert_eq!(run.status.unwrap().trials.succeeded, 2);
    assert!(store(&moto).get("runs/named/summary.json").await.unwrap().is_some());
}
