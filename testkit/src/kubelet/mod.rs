//! A stand-in for the kubelet of the fake nodes: it watches the pods bound to them and runs
//! each pod's init containers and containers as local processes ([`runtime`]) in namespaces
//! of their own, with the pod's environment ([`env`]) and volumes ([`volumes`]), and reports
//! what really happened through the pod's status subresource ([`status`]): container states,
//! exit codes, termination messages, phase. So the Job controller, the garbage collector and
//! the TTL controller act on real outcomes, and a deleted pod's processes are killed.
//!
//! Not done here: probes (a running container is ready), resource limits, networking (pods
//! share the host's network; NetworkPolicies are stored but not enforced), image entrypoints
//! (containers must set `command`), `kubectl logs`/`exec` (read [`KubeletHandle::logs`]).

pub mod env;
pub mod node;
pub mod pod;
pub mod runtime;
pub mod status;
pub mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};

use crate::images::Images;
use crate::kubeconfig;
use pod::{ContainerRecord, PodCommand, PodContext};

struct PodEntry {
    namespace: String,
    name: String,
    updates: watch::Sender<Option<Pod>>,
    commands: mpsc::UnboundedSender<PodCommand>,
    containers: Arc<Mutex<BTreeMap<String, ContainerRecord>>>,
}

#[derive(Default)]
struct Pods {
    by_uid: HashMap<String, PodEntry>,
}

/// The test's handle on the kubelet: evict pods, find their processes, read their logs.
#[derive(Clone)]
pub struct KubeletHandle {
    pods: Arc<Mutex<Pods>>,
}

impl KubeletHandle {
    fn find<T>(&self, namespace: &str, name: &str, f: impl FnOnce(&PodEntry) -> T) -> Option<T> {
        let pods = self.pods.lock().unwrap();
        pods.by_uid.values().find(|e| e.namespace == namespace && e.name == name).map(f)
    }

    /// Evicts a running pod as a node under memory pressure does: its containers are killed,
    /// its phase becomes `Failed` with reason `Evicted` and a `DisruptionTarget` condition.
    /// False when the kubelet runs no such pod.
    pub fn evict(&self, namespace: &str, name: &str, message: &str) -> bool {
        self.find(namespace, name, |e| e.commands.send(PodCommand::Evict { message: message.into() }).is_ok())
            .unwrap_or(false)
    }

    /// The host pid of a running container's command.
    pub fn container_pid(&self, namespace: &str, name: &str, container: &str) -> Option<i32> {
        let record = self.find(namespace, name, |e| e.containers.lock().unwrap().get(container).cloned())??;
        if record.exit.is_some() {
            return None;
        }
        runtime::command_pid(record.unshare_pid)
    }

    /// The output of a container's latest run.
    pub fn logs(&self, namespace: &str, name: &str, container: &str) -> Option<String> {
        let record = self.find(namespace, name, |e| e.containers.lock().unwrap().get(container).cloned())??;
        std::fs::read_to_string(record.log).ok()
    }

    /// How many pods the kubelet is running or keeping.
    pub fn pod_count(&self) -> usize {
        self.pods.lock().unwrap().by_uid.len()
    }
}

/// Starts the kubelet of `nodes` on a thread of its own.
pub struct Kubelet;

impl Kubelet {
    pub fn start(
        kubeconfig_path: PathBuf,
        nodes: Vec<String>,
        pods_dir: PathBuf,
        images: Images,
        api_port: u16,
        kube_version: String,
    ) -> anyhow::Result<KubeletHandle> {
        std::fs::create_dir_all(&pods_dir)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&pods_dir, std::fs::Permissions::from_mode(0o755))?;
        }
        let pods = Arc::new(Mutex::new(Pods::default()));
        let handle = KubeletHandle { pods: pods.clone() };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
        std::thread::Builder::new().name("testkit-kubelet".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.into()));
                    return;
                }
            };
            runtime.block_on(async move {
                let client = match kubeconfig::client(&kubeconfig_path).await {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let kubelet_version = format!("v{kube_version}");
                for node in &nodes {
                    if let Err(e) = node::register(&client, node, &kubelet_version).await {
                        let _ = ready_tx.send(Err(e.context(format!("registering node {node}"))));
                        return;
                    }
                }
                let heartbeat = {
                    let client = client.clone();
                    let nodes = nodes.clone();
                    async move {
                        loop {
                            tokio::time::sleep(Duration::from_secs(10)).await;
                            for node in &nodes {
                                if let Err(e) = node::heartbeat(&client, node, &kubelet_version).await {
                                    eprintln!("testkit kubelet: heartbeat of {node}: {e}");
                                }
                            }
                        }
                    }
                };
                tokio::spawn(heartbeat);
                let _ = ready_tx.send(Ok(()));
                sync_pods(client, nodes, pods_dir, images, api_port, pods).await;
            });
        })?;
        ready_rx.recv().map_err(|_| anyhow::anyhow!("the kubelet thread ended"))??;
        Ok(handle)
    }
}

/// Watches pods and feeds each one bound to our nodes to its task.
async fn sync_pods(
    client: kube::Client,
    nodes: Vec<String>,
    pods_dir: PathBuf,
    images: Images,
    api_port: u16,
    pods: Arc<Mutex<Pods>>,
) {
    let mut next_ip: u32 = 0;
    let mut events = watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()).boxed();
    loop {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                eprintln!("testkit kubelet: watching pods: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            None => return,
        };
        let (pod, gone) = match event {
            watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => (pod, false),
            watcher::Event::Delete(pod) => (pod, true),
            watcher::Event::Init | watcher::Event::InitDone => continue,
        };
        let ours = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| nodes.contains(n));
        let Some(uid) = pod.metadata.uid.clone() else { continue };
        if !ours {
            continue;
        }
        let mut table = pods.lock().unwrap();
        if gone {
            if let Some(entry) = table.by_uid.remove(&uid) {
                let _ = entry.updates.send(None);
            }
            continue;
        }
        if let Some(entry) = table.by_uid.get(&uid) {
            let _ = entry.updates.send(Some(pod));
            continue;
        }
        next_ip += 1;
        let pod_ip = format!("10.244.{}.{}", next_ip / 250, next_ip % 250 + 2);
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let (updates, updates_rx) = watch::channel(Some(pod.clone()));
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let containers = Arc::new(Mutex::new(BTreeMap::new()));
        let ctx = PodContext {
            client: client.clone(),
            images: images.clone(),
            dir: pods_dir.join(format!("{namespace}_{name}_{uid}")),
            api_port,
            pod_ip: pod_ip.clone(),
            containers: containers.clone(),
            state: Arc::new(tokio::sync::Mutex::new(pod::initial_state(&pod, pod_ip))),
        };
        table.by_uid.insert(uid.clone(), PodEntry { namespace, name, updates, commands, containers });
        let pods = pods.clone();
        tokio::spawn(async move {
            pod::drive(ctx, updates_rx, commands_rx).await;
            pods.lock().unwrap().by_uid.remove(&uid);
        });
    }
}
