//! Kueue on the test control plane: its webhook suspends queued Jobs on creation, it admits no
//! more than a ClusterQueue's quota at once and every Job still completes; a Job's
//! `activeDeadlineSeconds` does not run while Kueue keeps it queued, and starts again when Kueue
//! evicts it and admits it anew.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use lightsout_testkit::kueue::{self, kueue_resource, Kueue};
use lightsout_testkit::{ControlPlane, Image};
use serde_json::json;

const SHELL_IMAGE: &str = "testkit.local/shell:1";
const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";

async fn namespace(control_plane: &ControlPlane, name: &str) -> Client {
    let client = control_plane.client().await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    for _ in 0..100 {
        let accounts = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), name);
        if accounts.get_opt("default").await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    control_plane.images.add(SHELL_IMAGE, Image::on_host_base());
    client
}

async fn wait_until<T>(what: &str, kueue: &Kueue, timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}; Kueue:\n{}", kueue.log_tail(30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Job queued on `queue` whose one pod asks for 1 CPU and runs `script`.
fn queued_job(name: &str, script: &str, active_deadline_seconds: Option<i64>) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "queue"}},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": active_deadline_seconds,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "main", "image": SHELL_IMAGE,
                        "command": ["/bin/sh", "-c", script],
                        "resources": {"requests": {"cpu": "1"}},
                    }],
                },
            },
        },
    }))
    .unwrap()
}

fn condition(job: &Job, kind: &str) -> Option<String> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == kind && c.status == "True").map(|c| c.reason.clone().unwrap_or_default())
}

fn finished(job: &Job) -> bool {
    condition(job, "Complete").is_some() || condition(job, "Failed").is_some()
}

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

#[tokio::test]
async fn kueue_admits_jobs_within_the_quota_and_all_complete() {
    let Some((control_plane, kueue)) = kueue::shared() else { return };
    let client = namespace(control_plane, "kueue-quota").await;
    kueue::create_queues(&client, "kueue-quota", "2").await;
    let jobs = Api::<Job>::namespaced(client.clone(), "kueue-quota");
    for index in 0..4 {
        let created =
            jobs.create(&PostParams::default(), &queued_job(&format!("trial-{index}"), "sleep 2", None)).await.unwrap();
        assert!(suspended(&created), "Kueue's webhook did not suspend trial-{index} on creation: {:?}", created.spec);
    }

    // Two Jobs of 1 CPU fit the quota of 2; a third is admitted only once one has finished.
    let mut most_admitted = 0;
    wait_until("all four Jobs to complete", kueue, Duration::from_secs(120), async || {
        let all = jobs.list(&Default::default()).await.unwrap().items;
        let admitted = all.iter().filter(|job| !suspended(job) && !finished(job)).count();
        assert!(admitted <= 2, "{admitted} Jobs run at once on a quota of 2 CPUs");
        most_admitted = most_admitted.max(admitted);
        let failed: Vec<_> = all.iter().filter(|job| condition(job, "Failed").is_some()).collect();
        assert!(failed.is_empty(), "a Job failed: {:?}", failed[0].status);
        (all.len() == 4 && all.iter().all(|job| condition(job, "Complete").is_some())).then_some(())
    })
    .await;
    assert_eq!(most_admitted, 2, "Kueue never used the whole quota of 2 CPUs");
}

#[tokio::test]
async fn a_queued_jobs_active_deadline_starts_when_kueue_admits_it() {
    let Some((control_plane, kueue)) = kueue::shared() else { return };
    let client = namespace(control_plane, "kueue-deadline").await;
    kueue::create_queues(&client, "kueue-deadline", "1").await;
    let jobs = Api::<Job>::namespaced(client.clone(), "kueue-deadline");
    // The blocker holds the only CPU for longer than the queued Job's deadline.
    jobs.create(&PostParams::default(), &queued_job("blocker", "sleep 12", None)).await.unwrap();
    wait_until("the blocker to be admitted", kueue, Duration::from_secs(60), async || {
        (!suspended(&jobs.get("blocker").await.unwrap())).then_some(())
    })
    .await;
    jobs.create(&PostParams::default(), &queued_job("queued", "sleep 1", Some(6))).await.unwrap();

    let queued = wait_until("the queued Job to finish", kueue, Duration::from_secs(120), async || {
        let queued = jobs.get("queued").await.unwrap();
        if suspended(&queued) {
            let status = queued.status.clone().unwrap_or_default();
            assert!(status.start_time.is_none(), "a suspended Job has a startTime: {status:?}");
        }
        finished(&queued).then_some(queued)
    })
    .await;
    let blocker = jobs.get("blocker").await.unwrap();
    assert!(condition(&blocker, "Complete").is_some(), "the blocker: {:?}", blocker.status);
    let blocker_done = blocker.status.and_then(|s| s.completion_time).unwrap().0.as_second();
    let created = queued.metadata.creation_timestamp.clone().unwrap().0.as_second();
    let status = queued.status.clone().unwrap();
    let started = status.start_time.clone().unwrap().0.as_second();
    assert!(
        blocker_done - created > 6,
        "the queued Job waited {} s, no longer than its deadline: the test proves nothing",
        blocker_done - created
    );
    assert!(started - created >= 6, "startTime was {} s after creation, not set on admission", started - created);
    assert!(
        condition(&queued, "Complete").is_some(),
        "a Job queued longer than its activeDeadlineSeconds failed: {status:?}"
    );
}

/// Sets `spec.active` of the Workload Kueue made for `job` (deactivating one evicts it).
async fn set_workload_active(client: &Client, namespace: &str, job: &str, active: bool) {
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &kueue_resource("Workload", "workloads"));
    let all = workloads.list(&Default::default()).await.unwrap().items;
    let workload = all
        .iter()
        .find(|w| w.metadata.owner_references.iter().flatten().any(|o| o.kind == "Job" && o.name == job))
        .unwrap_or_else(|| panic!("no Workload for Job {job} among {} in {namespace}", all.len()));
    let name = workload.metadata.name.clone().unwrap();
    let patch = json!({"spec": {"active": active}});
    workloads.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test]
async fn an_evicted_jobs_active_deadline_starts_again_when_kueue_readmits_it() {
    let Some((control_plane, kueue)) = kueue::shared() else { return };
    let namespace_name = "kueue-evict";
    let client = namespace(control_plane, namespace_name).await;
    kueue::create_queues(&client, namespace_name, "1").await;
    let jobs = Api::<Job>::namespaced(client.clone(), namespace_name);
    // Runs 5 s of an 8 s deadline, is evicted after its first start, waits until the deadline
    // counted from that start has passed, and is admitted again.
    jobs.create(&PostParams::default(), &queued_job("evicted", "sleep 5", Some(8))).await.unwrap();
    let first_start = wait_until("the Job to start", kueue, Duration::from_secs(60), async || {
        jobs.get("evicted").await.unwrap().status?.start_time.map(|t| t.0.as_second())
    })
    .await;
    set_workload_active(&client, namespace_name, "evicted", false).await;
    wait_until("Kueue to suspend the evicted Job", kueue, Duration::from_secs(60), async || {
        let job = jobs.get("evicted").await.unwrap();
        (suspended(&job) && job.status.and_then(|s| s.start_time).is_none()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    set_workload_active(&client, namespace_name, "evicted", true).await;

    let job = wait_until("the readmitted Job to finish", kueue, Duration::from_secs(120), async || {
        let job = jobs.get("evicted").await.unwrap();
        finished(&job).then_some(job)
    })
    .await;
    let status = job.status.clone().unwrap();
    assert!(
        condition(&job, "Complete").is_some(),
        "a readmitted Job failed on the deadline of its first start: {status:?}"
    );
    let second_start = status.start_time.clone().unwrap().0.as_second();
    assert!(second_start - first_start > 8, "startTime was not reset on readmission: {status:?}");
}
