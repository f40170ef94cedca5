//! One pod's life on the stand-in kubelet: volumes, image pulls, init containers in order,
//! the main containers under the pod's restart policy, its status after every change, and its
//! end — finished, deleted (SIGTERM, the grace period, SIGKILL, then the final delete) or
//! evicted by the node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};

use super::env;
use super::runtime::{self, ContainerSpec, Mount};
use super::status::{ContainerStatus, PodState, State};
use super::volumes;
use crate::images::Images;

/// The largest termination message the kubelet keeps.
const MAX_TERMINATION_MESSAGE: usize = 4096;

/// What the kubelet knows of one run of a container.
#[derive(Debug, Clone)]
pub struct ContainerRecord {
    pub unshare_pid: u32,
    pub exit: Option<i32>,
    pub log: PathBuf,
    pub termination_log: PathBuf,
    pub started_at: chrono::DateTime<Utc>,
    pub init: bool,
}

/// A request from the test to the pod's kubelet.
#[derive(Debug)]
pub enum PodCommand {
    /// Evict the pod as a node under pressure does.
    Evict { message: String },
}

/// Everything one pod's task shares.
pub struct PodContext {
    pub client: Client,
    pub images: Images,
    pub dir: PathBuf,
    pub api_port: u16,
    pub pod_ip: String,
    pub containers: Arc<Mutex<BTreeMap<String, ContainerRecord>>>,
    pub state: Arc<tokio::sync::Mutex<PodState>>,
}

impl PodContext {
    /// Writes the pod's status.
    async fn publish(&self, pod: &Pod) {
        let status = self.state.lock().await.to_json();
        let api = Api::<Pod>::namespaced(self.client.clone(), pod.metadata.namespace.as_deref().unwrap_or_default());
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await
        {
            if !matches!(&e, kube::Error::Api(a) if a.code == 404) {
                eprintln!("testkit kubelet: status of pod {name}: {e}");
            }
        }
    }

    async fn set_container(&self, pod: &Pod, init: bool, name: &str, update: impl FnOnce(&mut ContainerStatus)) {
        {
            let mut state = self.state.lock().await;
            update(state.container_mut(init, name));
            let now = Utc::now();
            if !init && state.phase == "Pending" && state.main.iter().all(|c| !matches!(c.state, State::Waiting { .. }))
            {
                state.phase = "Running";
            }
            state.refresh_conditions(now);
        }
        self.publish(pod).await;
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((500u64 << attempt.min(5)).min(10_000))
}

fn security(pod: &Pod, container: &Container) -> (u32, u32, bool, bool) {
    let pod_context = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let context = container.security_context.as_ref();
    let uid = context.and_then(|c| c.run_as_user).or(pod_context.and_then(|c| c.run_as_user)).unwrap_or(0);
    let gid = context.and_then(|c| c.run_as_group).or(pod_context.and_then(|c| c.run_as_group)).unwrap_or(0);
    let non_root =
        context.and_then(|c| c.run_as_non_root).or(pod_context.and_then(|c| c.run_as_non_root)).unwrap_or(false);
    let read_only = context.and_then(|c| c.read_only_root_filesystem).unwrap_or(false);
    (uid as u32, gid as u32, non_root, read_only)
}

/// Runs `container` once: pull, configure, start, wait. Returns its exit code.
async fn run_once(
    ctx: &PodContext,
    pod: &Pod,
    container: &Container,
    init: bool,
    volumes: &BTreeMap<String, PathBuf>,
) -> i32 {
    let name = container.name.as_str();
    let reference = container.image.clone().unwrap_or_default();
    let mut attempt = 0;
    let image = loop {
        match ctx.images.pull(&reference) {
            Ok(image) => break image,
            Err(message) => {
                let reason = if attempt == 0 { "ErrImagePull" } else { "ImagePullBackOff" };
                ctx.set_container(pod, init, name, |c| c.state = State::waiting(reason, Some(message))).await;
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
        }
    };
    let (uid, gid, non_root, read_only_root) = security(pod, container);
    let configured = loop {
        let result = match env::resolve(&ctx.client, pod, container, &ctx.pod_ip, ctx.api_port).await {
            Ok(env) => env::command_line(container, &env).map(|command| (env, command)),
            Err(e) => Err(e),
        };
        let result = result.and_then(|ok| {
            if non_root && uid == 0 {
                Err(env::ConfigError("container has runAsNonRoot and image will run as root".into()))
            } else {
                Ok(ok)
            }
        });
        match result {
            Ok(configured) => break configured,
            Err(e) => {
                ctx.set_container(pod, init, name, |c| {
                    c.state = State::waiting("CreateContainerConfigError", Some(e.0))
                })
                .await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let (env, command) = configured;
    let restarts = ctx.state.lock().await.container_mut(init, name).restart_count;
    let dir = ctx.dir.join("containers").join(format!("{name}-{restarts}"));
    let termination_log = dir.join("termination-log");
    let prepared = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        std::fs::write(&termination_log, b"")?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&termination_log, std::fs::Permissions::from_mode(0o666))
    })();
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let Some(host) = volumes.get(&mount.name) else { continue };
        let host = match mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) => host.join(sub),
            None => host.clone(),
        };
        mounts.push(Mount { host, target: mount.mount_path.clone(), read_only: mount.read_only.unwrap_or(false) });
    }
    let spec = ContainerSpec {
        dir: dir.clone(),
        image,
        mounts,
        termination_log: (
            termination_log.clone(),
            container.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into()),
        ),
        env,
        command,
        working_dir: container.working_dir.clone(),
        uid,
        gid,
        read_only_root,
        hostname: pod.metadata.name.clone().unwrap_or_default(),
    };
    let started = match prepared.map_err(anyhow::Error::from).and_then(|()| runtime::start(&spec)) {
        Ok(started) => started,
        Err(e) => {
            let now = Utc::now();
            ctx.set_container(pod, init, name, |c| {
                c.state = State::Terminated {
                    exit_code: 128,
                    reason: "StartError".into(),
                    message: Some(format!("{e:#}")),
                    started_at: now,
                    finished_at: now,
                }
            })
            .await;
            return 128;
        }
    };
    let started_at = Utc::now();
    let unshare_pid = started.child.id();
    ctx.containers.lock().unwrap().insert(
        name.to_string(),
        ContainerRecord {
            unshare_pid,
            exit: None,
            log: started.log.clone(),
            termination_log: termination_log.clone(),
            started_at,
            init,
        },
    );
    ctx.set_container(pod, init, name, |c| {
        c.state = State::Running { started_at };
        c.container_id = Some(format!("testkit://{unshare_pid}"));
    })
    .await;
    let code = wait_exit(ctx.containers.clone(), name.to_string(), started.child).await;
    let message = termination_message(&termination_log, &started.log, container, code);
    let finished_at = Utc::now();
    ctx.set_container(pod, init, name, |c| {
        c.state = State::Terminated {
            exit_code: code,
            reason: if code == 0 { "Completed".into() } else { "Error".into() },
            message,
            started_at,
            finished_at,
        }
    })
    .await;
    code
}

/// Waits for a container's `unshare` in a task that records the exit code whether or not the
/// waiter is still there (a deleted pod drops its waiters).
async fn wait_exit(
    containers: Arc<Mutex<BTreeMap<String, ContainerRecord>>>,
    name: String,
    mut child: std::process::Child,
) -> i32 {
    let (tx, rx) = oneshot::channel();
    let unshare_pid = child.id();
    tokio::task::spawn_blocking(move || {
        let code = child.wait().map(runtime::exit_code).unwrap_or(137);
        if let Some(record) = containers.lock().unwrap().get_mut(&name) {
            if record.unshare_pid == unshare_pid {
                record.exit = Some(code);
            }
        }
        let _ = tx.send(code);
    });
    rx.await.unwrap_or(137)
}

fn termination_message(
    file: &std::path::Path,
    log: &std::path::Path,
    container: &Container,
    code: i32,
) -> Option<String> {
    let read_tail = |path: &std::path::Path| -> String {
        let bytes = std::fs::read(path).unwrap_or_default();
        let start = bytes.len().saturating_sub(MAX_TERMINATION_MESSAGE);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    };
    let message = read_tail(file);
    if !message.is_empty() {
        return Some(message);
    }
    let fallback = container.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
    if fallback && code != 0 {
        let log = read_tail(log);
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(80)..].join("\n");
        return Some(tail.chars().rev().take(2048).collect::<Vec<_>>().into_iter().rev().collect());
    }
    None
}

/// The pod from volumes to its last container.
async fn lifecycle(ctx: &PodContext, pod: &Pod) {
    let spec = pod.spec.clone().unwrap_or_default();
    let restart_policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let volumes = loop {
        match volumes::prepare(&ctx.client, pod, &ctx.dir.join("volumes"), &ctx.pod_ip).await {
            Ok(volumes) => break volumes,
            Err(e) => {
                {
                    let mut state = ctx.state.lock().await;
                    state.message = Some(format!("MountVolume.SetUp failed: {}", e.0));
                }
                ctx.publish(pod).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    ctx.state.lock().await.message = None;
    for container in spec.init_containers.iter().flatten() {
        let mut attempt = 0;
        loop {
            let code = run_once(ctx, pod, container, true, &volumes).await;
            if code == 0 {
                break;
            }
            if restart_policy == "Never" {
                {
                    let mut state = ctx.state.lock().await;
                    state.phase = "Failed";
                    state.refresh_conditions(Utc::now());
                }
                ctx.publish(pod).await;
                return;
            }
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
            let mut state = ctx.state.lock().await;
            let status = state.container_mut(true, &container.name);
            status.last_state = Some(status.state.clone());
            status.restart_count += 1;
        }
    }
    let runs = spec.containers.iter().map(|container| {
        let restart_policy = restart_policy.clone();
        let volumes = &volumes;
        async move {
            let mut attempt = 0;
            loop {
                let code = run_once(ctx, pod, container, false, volumes).await;
                let again = match restart_policy.as_str() {
                    "Always" => true,
                    "OnFailure" => code != 0,
                    _ => false,
                };
                if !again {
                    return code;
                }
                {
                    let mut state = ctx.state.lock().await;
                    let status = state.container_mut(false, &container.name);
                    status.last_state = Some(status.state.clone());
                    status.restart_count += 1;
                    if code != 0 {
                        status.state = State::waiting(
                            "CrashLoopBackOff",
                            Some(format!("back-off restarting failed container {}", container.name)),
                        );
                    }
                }
                ctx.publish(pod).await;
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
        }
    });
    let codes = futures::future::join_all(runs).await;
    {
        let mut state = ctx.state.lock().await;
        state.phase = if codes.iter().all(|c| *c == 0) { "Succeeded" } else { "Failed" };
        state.refresh_conditions(Utc::now());
    }
    ctx.publish(pod).await;
}

/// Stops every running container of the pod (SIGTERM, `grace`, SIGKILL), waits for their exit
/// and records them as terminated; the phase becomes terminal.
async fn stop_all(ctx: &PodContext, grace: Duration, phase: Option<&'static str>) {
    let running: Vec<(String, ContainerRecord)> = ctx
        .containers
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r.exit.is_none())
        .map(|(n, r)| (n.clone(), r.clone()))
        .collect();
    futures::future::join_all(running.iter().map(|(_, record)| runtime::stop(record.unshare_pid, grace))).await;
    // The waiters record each exit code.
    for _ in 0..200 {
        if ctx.containers.lock().unwrap().values().all(|r| r.exit.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let records = ctx.containers.lock().unwrap().clone();
    let mut state = ctx.state.lock().await;
    let now = Utc::now();
    for (name, record) in records {
        let status = state.container_mut(record.init, &name);
        if !status.state.is_terminated() {
            let code = record.exit.unwrap_or(137);
            status.state = State::Terminated {
                exit_code: code,
                reason: if code == 0 { "Completed".into() } else { "Error".into() },
                message: std::fs::read_to_string(&record.termination_log).ok().filter(|m| !m.is_empty()),
                started_at: record.started_at,
                finished_at: now,
            };
        }
    }
    let all_ok = state.main.iter().all(|c| matches!(c.state, State::Terminated { exit_code: 0, .. }));
    state.phase = phase.unwrap_or(if all_ok { "Succeeded" } else { "Failed" });
    state.refresh_conditions(now);
}

/// Drives one pod until its object is gone.
pub async fn drive(
    ctx: PodContext,
    mut updates: watch::Receiver<Option<Pod>>,
    mut commands: mpsc::UnboundedReceiver<PodCommand>,
) {
    let Some(pod) = updates.borrow().clone() else { return };
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    if phase != "Succeeded" && phase != "Failed" {
        ctx.publish(&pod).await;
        let life = lifecycle(&ctx, &pod);
        tokio::pin!(life);
        loop {
            tokio::select! {
                () = &mut life => break,
                changed = updates.changed() => {
                    let current = updates.borrow().clone();
                    match current {
                        _ if changed.is_err() => { stop_all(&ctx, Duration::ZERO, None).await; return; }
                        None => { stop_all(&ctx, Duration::ZERO, None).await; return; }
                        Some(p) if p.metadata.deletion_timestamp.is_some() => {
                            let grace = p.metadata.deletion_grace_period_seconds
                                .or(p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                                .unwrap_or(30)
                                .max(0) as u64;
                            stop_all(&ctx, Duration::from_secs(grace), None).await;
                            ctx.publish(&pod).await;
                            break;
                        }
                        Some(_) => {}
                    }
                }
                Some(command) = commands.recv() => match command {
                    PodCommand::Evict { message } => {
                        stop_all(&ctx, Duration::ZERO, Some("Failed")).await;
                        {
                            let mut state = ctx.state.lock().await;
                            state.reason = Some("Evicted".into());
                            state.message = Some(message.clone());
                            state.set_condition("DisruptionTarget", true, Some("TerminationByKubelet"), Some(&message), Utc::now());
                        }
                        ctx.publish(&pod).await;
                        break;
                    }
                },
            }
        }
    }
    // Finished: wait for the deletion, then remove the object as the kubelet does once the
    // containers are gone.
    loop {
        let current = updates.borrow().clone();
        match current {
            None => break,
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                let api =
                    Api::<Pod>::namespaced(ctx.client.clone(), p.metadata.namespace.as_deref().unwrap_or_default());
                let params = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions { uid: p.metadata.uid.clone(), resource_version: None }),
                    ..Default::default()
                };
                let _ = api.delete(p.metadata.name.as_deref().unwrap_or_default(), &params).await;
            }
            Some(_) => {}
        }
        if updates.changed().await.is_err() {
            break;
        }
    }
    // LIGHTSOUT_TESTKIT_KEEP_PODS=1 keeps deleted pods' directories (their containers' logs) for
    // debugging a test.
    if std::env::var_os("LIGHTSOUT_TESTKIT_KEEP_PODS").is_none() {
        let _ = std::fs::remove_dir_all(&ctx.dir);
    }
}

/// The initial state of a pod's containers.
pub fn initial_state(pod: &Pod, pod_ip: String) -> PodState {
    let spec = pod.spec.clone().unwrap_or_default();
    let statuses = |containers: &[Container]| -> Vec<ContainerStatus> {
        containers.iter().map(|c| ContainerStatus::new(&c.name, c.image.as_deref().unwrap_or_default())).collect()
    };
    let mut state = PodState::new(
        pod_ip,
        statuses(spec.init_containers.as_deref().unwrap_or_default()),
        statuses(&spec.containers),
        Utc::now(),
    );
    state.refresh_conditions(Utc::now());
    state
}
