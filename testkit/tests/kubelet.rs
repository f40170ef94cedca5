//! The test kit's own tests against the real control plane: its kubelet runs a Job's pod to
//! completion with the pod's environment and volumes and reports the termination message; the
//! Job controller and TTL controller act on it; a deleted pod's processes die; an evicted pod
//! fails as `Evicted`; an unknown image stays in `ImagePullBackOff`.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use lightsout_testkit::{shared, ControlPlane, Image};
use serde_json::json;

const SHELL_IMAGE: &str = "testkit.local/shell:1";

async fn namespace(control_plane: &ControlPlane, name: &str) -> Client {
    let client = control_plane.client().await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    // The ServiceAccount controller makes `default` shortly after.
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

async fn wait_until<T>(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn job(name: &str, script: &str, ttl: Option<i32>) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": ttl,
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"greeting": "hello from the downward API"}},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": true},
                    "automountServiceAccountToken": false,
                    "initContainers": [{
                        "name": "prepare", "image": SHELL_IMAGE,
                        "command": ["/bin/sh", "-c", "echo prepared > /work/prepared"],
                        "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                    }],
                    "containers": [{
                        "name": "main", "image": SHELL_IMAGE,
                        "command": ["/bin/sh", "-c", script],
                        "env": [
                            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "GREETING", "value": "pod $(POD)"},
                        ],
                        "volumeMounts": [
                            {"name": "work", "mountPath": "/work"},
                            {"name": "info", "mountPath": "/etc/info"},
                        ],
                    }],
                    "volumes": [
                        {"name": "work", "emptyDir": {}},
                        {"name": "info", "downwardAPI": {"items": [{"path": "greeting", "fieldRef": {"fieldPath": "metadata.annotations['greeting']"}}]}},
                    ],
                },
            },
        },
    }))
    .unwrap()
}

async fn secret(client: &Client, namespace: &str) {
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}})).unwrap();
    Api::namespaced(client.clone(), namespace).create(&PostParams::default(), &secret).await.unwrap();
}

async fn job_pod(client: &Client, namespace: &str, job: &str) -> Option<Pod> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    pods.list(&ListParams::default().labels(&format!("job-name={job}"))).await.unwrap().items.into_iter().next()
}

#[tokio::test]
async fn a_job_runs_to_completion_with_its_environment_volumes_and_termination_message() {
    let Some(control_plane) = shared() else { return };
    let client = namespace(control_plane, "kit-complete").await;
    secret(&client, "kit-complete").await;
    let script = "test \"$(cat /work/prepared)\" = prepared && test \"$(id -u)\" = 65532 \
                  && printf '%s|%s|%s' \"$SECRET\" \"$GREETING\" \"$(cat /etc/info/greeting)\" > /dev/termination-log";
    let jobs = Api::<Job>::namespaced(client.clone(), "kit-complete");
    jobs.create(&PostParams::default(), &job("done", script, Some(2))).await.unwrap();
    let pod = wait_until("the pod to succeed", Duration::from_secs(60), async || {
        job_pod(&client, "kit-complete", "done")
            .await
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
    })
    .await;
    let terminated = pod.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
    assert_eq!(terminated.exit_code, 0);
    let pod_name = pod.metadata.name.unwrap();
    assert_eq!(
        terminated.message.as_deref(),
        Some(format!("s3cr3t|pod {pod_name}|hello from the downward API").as_str())
    );
    // The Job controller saw it succeed; the TTL controller deletes the Job and, through the
    // garbage collector, its pod.
    wait_until("the Job to be deleted by its TTL", Duration::from_secs(60), async || {
        jobs.get_opt("done").await.unwrap().is_none().then_some(())
    })
    .await;
    wait_until("the pod to be collected", Duration::from_secs(60), async || {
        job_pod(&client, "kit-complete", "done").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_failing_container_fails_the_job_and_a_deleted_pod_dies() {
    let Some(control_plane) = shared() else { return };
    let client = namespace(control_plane, "kit-fail").await;
    secret(&client, "kit-fail").await;
    let jobs = Api::<Job>::namespaced(client.clone(), "kit-fail");
    jobs.create(&PostParams::default(), &job("fails", "echo broken >&2; exit 7", None)).await.unwrap();
    let pod = wait_until("the pod to fail", Duration::from_secs(60), async || {
        job_pod(&client, "kit-fail", "fails")
            .await
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
    })
    .await;
    let terminated = pod.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (7, Some("Error")));
    wait_until("the Job to fail", Duration::from_secs(60), async || {
        let job = jobs.get("fails").await.unwrap();
        job.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True")
            .then_some(())
    })
    .await;

    // A long-running pod (with a child that tries to outlive it) is killed when deleted.
    jobs.create(&PostParams::default(), &job("sleeps", "(setsid sleep 600 &) ; sleep 600", None)).await.unwrap();
    let pid = wait_until("the container to run", Duration::from_secs(60), async || {
        let pod = job_pod(&client, "kit-fail", "sleeps").await?;
        control_plane.kubelet.container_pid("kit-fail", pod.metadata.name.as_deref()?, "main")
    })
    .await;
    let pod = job_pod(&client, "kit-fail", "sleeps").await.unwrap();
    let name = pod.metadata.name.unwrap();
    Api::<Pod>::namespaced(client.clone(), "kit-fail")
        .delete(&name, &DeleteParams { grace_period_seconds: Some(1), ..Default::default() })
        .await
        .unwrap();
    wait_until("the container's processes to end", Duration::from_secs(30), async || {
        (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_evicted_pod_fails_as_evicted_and_an_unknown_image_backs_off() {
    let Some(control_plane) = shared() else { return };
    let client = namespace(control_plane, "kit-evict").await;
    secret(&client, "kit-evict").await;
    let jobs = Api::<Job>::namespaced(client.clone(), "kit-evict");
    jobs.create(&PostParams::default(), &job("evicted", "sleep 600", None)).await.unwrap();
    let name = wait_until("the container to run", Duration::from_secs(60), async || {
        let pod = job_pod(&client, "kit-evict", "evicted").await?;
        let name = pod.metadata.name?;
        control_plane.kubelet.container_pid("kit-evict", &name, "main").map(|_| name)
    })
    .await;
    assert!(control_plane.kubelet.evict("kit-evict", &name, "The node was low on resource: memory."));
    let pod = wait_until("the pod to be evicted", Duration::from_secs(30), async || {
        job_pod(&client, "kit-evict", "evicted")
            .await
            .filter(|p| p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted"))
    })
    .await;
    let status = pod.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert!(status.conditions.unwrap().iter().any(|c| c.type_ == "DisruptionTarget" && c.status == "True"));

    let mut unknown = job("unpullable", "true", None);
    unknown.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].image =
        Some("testkit.local/absent:1".into());
    jobs.create(&PostParams::default(), &unknown).await.unwrap();
    wait_until("ImagePullBackOff", Duration::from_secs(60), async || {
        let pod = job_pod(&client, "kit-evict", "unpullable").await?;
        let waiting = pod.status?.container_statuses?.first()?.state.clone()?.waiting?;
        (waiting.reason.as_deref() == Some("ImagePullBackOff")).then_some(())
    })
    .await;
}
