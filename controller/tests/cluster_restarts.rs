//! Restart safety on a real API server: the controller SIGKILLed at ten random moments of the
//! quickstart and restarted each time finishes with the same results as an undisturbed run, one
//! Job per (trial, attempt) and nothing counted twice; and of two replicas, one leads and the
//! other takes over when the leader is killed.

mod cluster;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cluster::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use lightsout_core::results::ResultStore;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const MINUTE: Duration = Duration::from_secs(60);

/// The attempts stored for each trial: `(variant, trial) → attempts`.
async fn stored_attempts(moto: &moto::Moto, run: &str) -> Vec<(String, String)> {
    let keys = store(moto).list(&format!("runs/{run}/")).await.unwrap();
    keys.iter()
        .filter(|k| k.ends_with("/result.json"))
        .map(|k| {
            let parts: Vec<&str> = k.split('/').collect();
            (format!("{}/{}", parts[2], parts[3]), parts[4].to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_ten_times_loses_nothing_and_counts_nothing_twice() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "restarts").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let spec = quickstart_run("quickstart", &models, &moto, "");
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());

    // Ten SIGKILLs at seeded random moments; each time the container restarts in its pod (same
    // identity, so it takes its Lease back at once).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
    let mut peak_rss_kib = 0;
    let mut kills = 0;
    let mut controller = Controller::start(control_plane, &config, "restarted");
    while kills < 10 {
        let wait = Duration::from_millis(rng.random_range(500..4000));
        tokio::time::sleep(wait).await;
        peak_rss_kib = peak_rss_kib.max(controller.process.peak_rss_kib().unwrap_or(0));
        controller.process.kill();
        kills += 1;
        controller = Controller::start(control_plane, &config, "restarted");
    }
    let context = || format!("{}\n{}", controller.process.log_tail(40), diagnose(control_plane, &ns.name));
    let run = wait_condition(&ns, "quickstart", "Complete", "True", 5 * MINUTE, context).await;
    peak_rss_kib = peak_rss_kib.max(controller.process.peak_rss_kib().unwrap_or(0));
    eprintln!("10 SIGKILLs; controller peak RSS {:.1} MiB", peak_rss_kib as f64 / 1024.0);

    // One Job per (trial, attempt): 40 trials, each run once (no infrastructure failure here).
    let jobs = jobs_of(&ns, "quickstart").await;
    let names: BTreeSet<String> = jobs.iter().filter_map(|j| j.metadata.name.clone()).collect();
    assert_eq!(names.len(), 40, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with("-a1")), "a trial ran twice: {names:?}");
    let attempts = stored_attempts(&moto, "quickstart").await;
    assert_eq!(attempts.len(), 40, "{attempts:?}");
    assert_eq!(attempts.iter().map(|(trial, _)| trial).collect::<BTreeSet<_>>().len(), 40);

    // Nothing counted twice: the status and summary.json hold exactly 40 trials, and the
    // summary's scores equal an undisturbed run's (lightsout run on the same spec).
    let status = run.status.unwrap();
    assert_eq!((status.trials.total, status.trials.succeeded), (40, 40), "{:?}", status.trials);
    let summary: Value =
        serde_json::from_slice(&store(&moto).get("runs/quickstart/summary.json").await.unwrap().unwrap()).unwrap();
    assert_eq!(summary["trials"]["ok"], 40);
    let spend = summary["spend"]["total_usd"].as_f64().unwrap();
    assert!((status.spend.total_usd - spend).abs() < 1e-9, "status {} against summary {spend}", status.spend.total_usd);
    let local = local_summary(control_plane, &spec, &models);
    for variant in 0..4 {
        for field in ["recall", "recall_interval", "scored", "trials", "judge_agreement", "findings_per_review"] {
            assert_eq!(
                summary["variants"][variant][field], local["variants"][variant][field],
                "variant {variant} {field} differs from an undisturbed run's"
            );
        }
    }
    assert_eq!(summary["tokens"]["agent"]["input_tokens"], local["tokens"]["agent"]["input_tokens"]);
    assert_eq!(
        summary["tokens"]["judge"]["input_tokens"], local["tokens"]["judge"]["input_tokens"],
        "judge calls counted twice?"
    );
    assert_eq!(summary["tokens"]["judge"]["output_tokens"], local["tokens"]["judge"]["output_tokens"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_takes_over_when_the_leader_is_killed() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "leader").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let mut first = Controller::start(control_plane, &config, "replica-a");
    let mut second = Controller::start(control_plane, &config, "replica-b");
    let leases = Api::<Lease>::namespaced(control_plane.client().await, SYSTEM_NAMESPACE);
    let holder = async || leases.get_opt(&config.lease_name).await.ok()??.spec?.holder_identity;
    let leader = eventually("a leader", MINUTE, async || holder().await, String::new).await;
    // Exactly one leads: the other reports lightsout_leader 0.
    let (leading, standby) = if leader == "replica-a" { (&mut first, &mut second) } else { (&mut second, &mut first) };
    assert!(leading.metrics().await.contains("lightsout_leader 1"));
    assert!(standby.metrics().await.contains("lightsout_leader 0"));

    let spec = run_spec("handover", &models.base_url(), &moto, |s| {
        s["spec"]["matrix"]["models"] = serde_json::json!([{"name": "gpt-5-mini", "provider": "openai"}]);
        s["spec"]["matrix"]["reasoningEfforts"] = serde_json::json!(["low"]);
        s["spec"]["parallelism"] = serde_json::json!(2);
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    tokio::time::sleep(Duration::from_secs(3)).await;
    leading.process.kill();
    let killed = Instant::now();
    let standby_identity = standby.identity.clone();
    eventually(
        "the standby to take the Lease",
        MINUTE,
        async || (holder().await? == standby_identity).then_some(()),
        String::new,
    )
    .await;
    let took = killed.elapsed();
    eprintln!("the standby took over {:.1} s after the leader was killed", took.as_secs_f64());
    // The Lease lasts 15 s and is renewed every 5 s; the standby looks every 5 s.
    assert!(took <= Duration::from_secs(20), "takeover took {took:?}");
    let context = || format!("{}\n{}", standby.process.log_tail(40), diagnose(control_plane, &ns.name));
    let run = wait_condition(&ns, "handover", "Complete", "True", 3 * MINUTE, context).await;
    assert_eq!(run.status.unwrap().trials.succeeded, 10);
    let names: BTreeSet<String> =
        jobs_of(&ns, "handover").await.iter().filter_map(|j| j.metadata.name.clone()).collect();
    assert_eq!(names.len(), 10, "{names:?}");
}
