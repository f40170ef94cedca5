//! Fake nodes: registered as a kubelet registers itself, kept `Ready` by heartbeats (the node's
//! status every 10 s and its Lease in `kube-node-lease`), so the node-lifecycle controller
//! treats them as live nodes and the scheduler places pods on them.

use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

pub const CPU_CAPACITY: &str = "16";
pub const MEMORY_CAPACITY: &str = "64Gi";

fn status(kubelet_version: &str) -> serde_json::Value {
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let capacity = json!({"cpu": CPU_CAPACITY, "memory": MEMORY_CAPACITY, "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "the testkit's kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "testkit", "systemUUID": "testkit", "bootID": "testkit",
            "kernelVersion": "testkit", "osImage": "testkit", "containerRuntimeVersion": "testkit://unshare",
            "kubeletVersion": kubelet_version, "kubeProxyVersion": kubelet_version,
            "operatingSystem": "linux", "architecture": "amd64",
        },
    })
}

/// Creates the Node (or finds it) and posts its status.
pub async fn register(client: &Client, name: &str, kubelet_version: &str) -> anyhow::Result<()> {
    let nodes = Api::<Node>::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "testkit",
        }},
        "status": status(kubelet_version),
    }))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    heartbeat(client, name, kubelet_version).await
}

/// One heartbeat: the node's status and its Lease.
pub async fn heartbeat(client: &Client, name: &str, kubelet_version: &str) -> anyhow::Result<()> {
    Api::<Node>::all(client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": status(kubelet_version)})))
        .await?;
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now},
    });
    leases.patch(name, &PatchParams::apply("testkit-kubelet").force(), &Patch::Apply(lease)).await?;
    Ok(())
}
