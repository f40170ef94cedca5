//! Lightsout across clusters with MultiKueue (issue 18): two control planes on loopback, a
//! manager (where the run, the controller and Kueue's MultiKueue controller are) and a worker
//! cluster (Kueue, a LocalQueue of the same name, the run's Secrets and the kubelet that runs the
//! trial pods). The trial Jobs the controller creates on the manager carry Kueue's
//! `spec.managedBy: kueue.x-k8s.io/multikueue`: the manager's Job controller leaves them alone,
//! MultiKueue copies each to the worker cluster and syncs its status back. No trial pod — so no
//! termination message — ever exists on the manager: the controller reads each result from S3.
//!
//! Opt-in: MultiKueue dispatches Jobs through `spec.managedBy`, which Kubernetes has from 1.30
//! (on by default from 1.32); the suite's control plane is 1.28, the floor we support, and this
//! test returns early there. `scripts/test-multikueue.sh` builds 1.34.4 and runs it.

mod cluster;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cluster::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use lightsout_testkit::control_plane::ControlPlane;
use lightsout_testkit::kueue::{self, Kueue, KueueBinaries};
use serde_json::json;

/// The first Kubernetes minor whose Job controller honours `spec.managedBy` by default.
const MANAGED_BY_MINOR: u32 = 32;

#[tokio::test]
async fn a_sweep_dispatched_to_a_worker_cluster_completes_on_the_manager_from_its_stored_results() {
    let Some(manager) = control_plane() else { return };
    if manager.binaries.minor() < MANAGED_BY_MINOR {
        eprintln!(
            "skipped: MultiKueue needs Job spec.managedBy (Kubernetes 1.{MANAGED_BY_MINOR}+), this control plane is 1.{}; \
             run scripts/test-multikueue.sh",
            manager.binaries.minor()
        );
        return;
    }
    let Some((_, manager_kueue)) = kueue::shared() else { return };
    // The worker cluster: a control plane and a Kueue of its own, from the same builds.
    let binaries = manager.binaries.clone();
    let (worker, worker_kueue): (ControlPlane, Kueue) = tokio::task::spawn_blocking(move || {
        // A thread outside the runtime: both start their own.
        std::thread::spawn(move || {
            let worker = ControlPlane::start(binaries).expect("the worker cluster's control plane");
            let kueue =
                Kueue::start(&worker, KueueBinaries::locate().expect("Kueue")).expect("the worker cluster's Kueue");
            (worker, kueue)
        })
        .join()
        .unwrap()
    })
    .await
    .unwrap();
    add_trial_images(&worker);

    let ns = TestNamespace::create(manager, "multikueue").await;
    let worker_ns = TestNamespace::create_named(&worker, &ns.name).await;
    kueue::create_queues(&worker_ns.client, &ns.name, "2").await;
    kueue::create_multikueue_queues(&ns.client, &worker.admin_kubeconfig, &ns.name, "2").await;

    let moto = start_moto();
    let models = ModelServer::start(manager);
    let config = ControllerConfig::new(manager, &ns.name).await;
    let controller = Controller::start(manager, &config, "only");
    let spec = run_spec("across", &models.base_url(), &moto, |run| {
        let spec = &mut run["spec"];
        spec["dataset"]["filter"] = json!({"ids": sample_task_ids(2)});
        spec["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "openai"}]);
        spec["agent"]["resources"] = json!({"requests": {"cpu": "1"}});
        spec["queueName"] = json!("queue");
        spec["parallelism"] = json!(4);
    });
    assert!(kubectl_apply(manager, &ns.name, &spec).status.success());
    let context = || {
        format!(
            "controller:\n{}\nmanager's Kueue:\n{}\nworker's Kueue:\n{}\n{}",
            controller.process.log_tail(30),
            manager_kueue.log_tail(30),
            worker_kueue.log_tail(30),
            diagnose(&worker, &ns.name)
        )
    };
    // Until the run completes: trial pods appear on the worker cluster only, each in a Job that
    // MultiKueue made there from the manager's.
    let manager_pods = Api::<Pod>::namespaced(ns.client.clone(), &ns.name);
    let worker_pods = Api::<Pod>::namespaced(worker_ns.client.clone(), &ns.name);
    let worker_jobs = Api::<Job>::namespaced(worker_ns.client.clone(), &ns.name);
    let (mut pods_seen_on_worker, mut copies_seen) = (BTreeSet::new(), BTreeSet::new());
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(manager_pods.list(&Default::default()).await.unwrap().items.is_empty(), "a trial pod on the manager");
        for pod in worker_pods.list(&Default::default()).await.unwrap().items {
            pods_seen_on_worker.insert(pod.metadata.name.unwrap_or_default());
        }
        for job in worker_jobs.list(&Default::default()).await.unwrap().items {
            if job.metadata.labels.as_ref().is_some_and(|l| l.contains_key("kueue.x-k8s.io/multikueue-origin")) {
                copies_seen.insert(job.metadata.name.unwrap_or_default());
            }
        }
        let run = ns.run("across").await;
        if condition(&run, "Complete").is_some_and(|(status, _, _)| status == "True") {
            break;
        }
        assert!(Instant::now() < deadline, "the run did not complete: {:?}\n{}", run.status, context());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run = ns.run("across").await;
    let trials = run.status.clone().unwrap().trials;
    assert_eq!((trials.total, trials.succeeded, trials.infra_failed), (4, 4, 0), "{trials:?}\n{}", context());
    let manager_jobs = jobs_of(&ns, "across").await;
    let names: BTreeSet<String> = manager_jobs.iter().filter_map(|j| j.metadata.name.clone()).collect();
    assert_eq!(names.len(), 4);
    assert!(names.iter().all(|n| n.ends_with("-a1")), "one attempt each: {names:?}");
    for job in &manager_jobs {
        let managed_by = job.spec.as_ref().and_then(|s| s.managed_by.as_deref());
        assert_eq!(managed_by, Some("kueue.x-k8s.io/multikueue"), "{:?}", job.metadata.name);
    }
    assert_eq!(copies_seen, names, "each manager Job ran as MultiKueue's copy on the worker cluster");
    assert!(pods_seen_on_worker.len() >= 4, "{pods_seen_on_worker:?}");

    // Results reached S3 from the worker cluster; the scores on the manager are those of
    // `lightsout run` of the same spec.
    let attempts = attempt_outcomes(&moto, "across").await;
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    assert!(attempts.iter().all(|(_, result)| result["outcome"] == "ok"), "{attempts:?}");
    let summary = stored_summary(&moto, "across").await;
    let local = local_summary(manager, &spec, &models);
    for variant in 0..2 {
        for field in ["recall", "recall_interval", "scored", "trials", "judge_agreement", "findings_per_review"] {
            assert_eq!(
                summary["variants"][variant][field], local["variants"][variant][field],
                "variant {variant} {field} differs from lightsout run's"
            );
        }
    }
    drop(controller);
}
