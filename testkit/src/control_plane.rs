//! A Kubernetes control plane on loopback: etcd, kube-apiserver (TLS, client certificates,
//! RBAC, the default admission plugins, Pod Security admission included),
//! kube-controller-manager (the Job, garbage-collector, TTL-after-finished, ServiceAccount,
//! namespace and node-lifecycle controllers, among the rest) and kube-scheduler, with fake nodes
//! whose pods a stand-in kubelet runs as local processes ([`crate::kubelet`]).
//!
//! Each test binary shares one control plane ([`shared`]); tests keep apart by namespace. Its
//! state lives under `$TMPDIR/lightsout-testkit/<pid>/`, which the next test binary removes
//! once this process is gone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;

use crate::binaries::{self, ControlPlaneBinaries};
use crate::images::Images;
use crate::kubeconfig::{self, Credentials};
use crate::kubelet::{Kubelet, KubeletHandle};
use crate::pki::{self, Authority};
use crate::process::{free_port, log_tail, Process};

/// The fake nodes every control plane registers.
pub const NODES: [&str; 2] = ["testkit-node-a", "testkit-node-b"];

/// The Service IP range; its first address is the `kubernetes` Service.
const SERVICE_CIDR: &str = "10.96.0.0/16";

/// A running control plane.
pub struct ControlPlane {
    pub binaries: ControlPlaneBinaries,
    /// This control plane's state: certificates, kubeconfigs, etcd's data, logs, pods.
    pub dir: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// A kubeconfig of a cluster administrator (group `system:masters`).
    pub admin_kubeconfig: PathBuf,
    pub authority: Authority,
    /// What the stand-in kubelet can run, by image reference.
    pub images: Images,
    pub kubelet: KubeletHandle,
    processes: Mutex<Vec<Process>>,
}

/// The control plane this test binary shares, started on first use; `None` (after printing why)
/// when its binaries are not built, or this is not root, and the tests do not run under CI.
/// Under CI either fails the test.
pub fn shared() -> Option<&'static ControlPlane> {
    static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    let started = SHARED.get_or_init(|| {
        let binaries = ControlPlaneBinaries::locate()?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "not root: the test kubelet runs pods in mount and PID namespaces of their own, which needs root"
                    .into(),
            );
        }
        // Started on a thread of its own: the caller may be inside a tokio runtime.
        std::thread::spawn(move || ControlPlane::start(binaries).map_err(|e| format!("{e:#}")))
            .join()
            .unwrap_or_else(|_| Err("starting the control plane panicked".into()))
    });
    match started {
        Ok(control_plane) => Some(control_plane),
        Err(reason)
            if (reason.starts_with("no Kubernetes") || reason.starts_with("not root")) && !binaries::under_ci() =>
        {
            eprintln!("skipped: {reason}");
            None
        }
        Err(reason) => panic!("the test control plane did not start: {reason}"),
    }
}

impl ControlPlane {
    /// Starts etcd, the API server, the controller manager and the scheduler, registers
    /// [`NODES`] and starts their kubelet. Blocking; must not run inside a tokio runtime.
    pub fn start(binaries: ControlPlaneBinaries) -> anyhow::Result<ControlPlane> {
        let started = Instant::now();
        let dir = state_dir()?;
        let pki_dir = dir.join("pki");
        std::fs::create_dir_all(&pki_dir)?;
        let authority = Authority::create(&pki_dir)?;
        let api_port = free_port();
        let server = format!("https://127.0.0.1:{api_port}");
        let serving = authority.serving(
            &pki_dir,
            "apiserver",
            &[
                "127.0.0.1",
                "localhost",
                "10.96.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )?;
        let (sa_private, sa_public) = pki::service_account_key(&pki_dir)?;
        let ca_pem = authority.files.cert_pem()?;
        let user_kubeconfig = |name: &str, user: &str| -> anyhow::Result<PathBuf> {
            let files = authority.client(&pki_dir, name, user, Some("system:masters"))?;
            let path = dir.join(format!("{name}.kubeconfig"));
            let (cert_pem, key_pem) = (files.cert_pem()?, files.key_pem()?);
            kubeconfig::write(
                &path,
                &server,
                &ca_pem,
                Credentials::Certificate { cert_pem: &cert_pem, key_pem: &key_pem },
                "default",
            )?;
            Ok(path)
        };
        let admin_kubeconfig = user_kubeconfig("admin", "lightsout-testkit-admin")?;
        let manager_kubeconfig = user_kubeconfig("controller-manager", "system:kube-controller-manager")?;
        let scheduler_kubeconfig = user_kubeconfig("scheduler", "system:kube-scheduler")?;
        let kubelet_kubeconfig = user_kubeconfig("kubelet", "lightsout-testkit-kubelet")?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let mut processes = Vec::new();

        let etcd_port = free_port();
        let peer_port = free_port();
        let mut etcd = Command::new(binaries.program("etcd"));
        etcd.args([
            "--name=testkit".to_string(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=testkit=http://127.0.0.1:{peer_port}"),
            // A test cluster's data need not survive a power cut.
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ]);
        processes.push(Process::start("etcd", etcd, &logs.join("etcd.log"))?);
        wait_for("etcd", &mut processes, Duration::from_secs(30), || {
            http_get_ok(&format!("127.0.0.1:{etcd_port}"), "/health")
        })?;

        let mut apiserver = Command::new(binaries.program("kube-apiserver"));
        apiserver.args([
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", dir.join("apiserver-certs").display()),
            format!("--tls-cert-file={}", serving.cert.display()),
            format!("--tls-private-key-file={}", serving.key.display()),
            format!("--client-ca-file={}", authority.files.cert.display()),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", sa_public.display()),
            format!("--service-account-signing-key-file={}", sa_private.display()),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--authorization-mode=Node,RBAC".into(),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
            // The `kubernetes` Service cannot point at a loopback address; nothing here needs it.
            "--endpoint-reconciler-type=none".into(),
        ]);
        processes.push(Process::start("kube-apiserver", apiserver, &logs.join("kube-apiserver.log"))?);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        wait_for("kube-apiserver", &mut processes, Duration::from_secs(90), || {
            runtime.block_on(async {
                let Ok(client) = kubeconfig::client(&admin_kubeconfig).await else { return false };
                let request = http::Request::get("/readyz").body(Vec::new()).unwrap();
                matches!(client.request_text(request).await.as_deref(), Ok("ok"))
            })
        })?;

        let mut manager = Command::new(binaries.program("kube-controller-manager"));
        manager.args([
            format!("--kubeconfig={}", manager_kubeconfig.display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
            "--leader-elect=false".into(),
            format!("--root-ca-file={}", authority.files.cert.display()),
            format!("--service-account-private-key-file={}", sa_private.display()),
            "--use-service-account-credentials=false".into(),
            "--cluster-name=testkit".into(),
            "--kube-api-qps=200".into(),
            "--kube-api-burst=400".into(),
        ]);
        processes.push(Process::start("kube-controller-manager", manager, &logs.join("kube-controller-manager.log"))?);
        let mut scheduler = Command::new(binaries.program("kube-scheduler"));
        scheduler.args([
            format!("--kubeconfig={}", scheduler_kubeconfig.display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
            "--leader-elect=false".into(),
        ]);
        processes.push(Process::start("kube-scheduler", scheduler, &logs.join("kube-scheduler.log"))?);

        // The ServiceAccount controller made `default` in `default`: the controller manager runs.
        wait_for("kube-controller-manager", &mut processes, Duration::from_secs(60), || {
            runtime.block_on(async {
                let Ok(client) = kubeconfig::client(&admin_kubeconfig).await else { return false };
                matches!(Api::<ServiceAccount>::namespaced(client, "default").get_opt("default").await, Ok(Some(_)))
            })
        })?;
        drop(runtime);

        let images = Images::default();
        let kubelet = Kubelet::start(
            kubelet_kubeconfig,
            NODES.iter().map(|n| n.to_string()).collect(),
            dir.join("pods"),
            images.clone(),
            api_port,
            binaries.version.clone(),
        )?;
        eprintln!(
            "testkit: Kubernetes {} control plane at {server} ready in {:.1} s (state in {})",
            binaries.version,
            started.elapsed().as_secs_f64(),
            dir.display()
        );
        Ok(ControlPlane {
            binaries,
            dir,
            server,
            admin_kubeconfig,
            authority,
            images,
            kubelet,
            processes: Mutex::new(processes),
        })
    }

    /// A client with the administrator's rights, for this test's runtime.
    pub async fn client(&self) -> kube::Client {
        kubeconfig::client(&self.admin_kubeconfig).await.expect("a client of the test control plane")
    }

    /// `kubectl` as the administrator.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new("kubectl");
        command.env("KUBECONFIG", &self.admin_kubeconfig);
        command
    }

    /// `helm` as the administrator, with its caches inside the control plane's directory.
    pub fn helm(&self) -> Command {
        let mut command = Command::new("helm");
        let home = self.dir.join("helm");
        command
            .env("KUBECONFIG", &self.admin_kubeconfig)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"));
        command
    }

    /// A kubeconfig that authenticates as `namespace/service_account` with a fresh bound token
    /// (TokenRequest, one hour), so a controller started with it has exactly that account's RBAC.
    pub async fn service_account_kubeconfig(&self, namespace: &str, service_account: &str) -> anyhow::Result<PathBuf> {
        let client = self.client().await;
        let request = k8s_openapi::api::authentication::v1::TokenRequest {
            spec: k8s_openapi::api::authentication::v1::TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let token = Api::<ServiceAccount>::namespaced(client, namespace)
            .create_token_request(service_account, &Default::default(), &request)
            .await
            .with_context(|| format!("a token of ServiceAccount {namespace}/{service_account}"))?
            .status
            .context("a TokenRequest without status")?
            .token;
        let path = self.dir.join(format!("sa-{namespace}-{service_account}-{}.kubeconfig", unique()));
        kubeconfig::write(
            &path,
            &self.server,
            &self.authority.files.cert_pem()?,
            Credentials::Token(&token),
            namespace,
        )?;
        Ok(path)
    }

    /// A new directory for a test's files inside the control plane's directory.
    pub fn scratch_dir(&self, name: &str) -> PathBuf {
        let dir = self.dir.join("scratch").join(format!("{name}-{}", unique()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    }

    /// The control plane's logs (API server, controller manager, scheduler, etcd), last lines
    /// of each, for a failing test's message.
    pub fn logs_tail(&self, lines: usize) -> String {
        self.processes
            .lock()
            .unwrap()
            .iter()
            .map(|p| format!("--- {} ---\n{}", p.name, p.log_tail(lines)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A number unique within this process.
pub fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `$TMPDIR/lightsout-testkit/<pid>-<n>`, after removing the directories of processes that are gone.
fn state_dir() -> anyhow::Result<PathBuf> {
    let root = std::env::temp_dir().join("lightsout-testkit");
    std::fs::create_dir_all(&root)?;
    for entry in std::fs::read_dir(&root)?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = root.join(format!("{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir)?;
    // Trial pods run as unprivileged users and must reach their volumes below.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// Polls `ready` every 100 ms until it holds, failing early when a process has exited.
fn wait_for(
    what: &str,
    processes: &mut [Process],
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        for process in processes.iter_mut() {
            if let Some(status) = process.try_status() {
                bail!("{} exited ({status}) while waiting for {what}:\n{}", process.name, log_tail(&process.log, 40));
            }
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> =
                processes.iter().map(|p| format!("--- {} ---\n{}", p.name, p.log_tail(20))).collect();
            bail!("{what} was not ready within {timeout:?}:\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A plain HTTP GET answering 200 (etcd's health).
pub(crate) fn http_get_ok(address: &str, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
}
