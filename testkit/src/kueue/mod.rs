//! Kueue on the test control plane: its manager (built by `scripts/install-kueue.sh VERSION`
//! from its Go module) as a local process with an administrator's kubeconfig, its CRDs applied,
//! its admission webhooks served on loopback with a certificate of the control plane's CA and
//! registered with `url` client configs ([`webhooks`]). Kueue manages `batch/v1` Jobs that carry
//! `kueue.x-k8s.io/queue-name` and nothing else; the test makes its ResourceFlavors,
//! ClusterQueues and LocalQueues.

pub mod webhooks;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::binaries::{self, cache_root};
use crate::control_plane::{self, http_get_ok, ControlPlane};
use crate::process::{free_port, Process};

/// The Kueue the tests run unless `LIGHTSOUT_KUEUE_VERSION` says otherwise: the newest release
/// the Go module proxy serves that supports Kubernetes 1.28 (its README: "Requires Kubernetes
/// 1.25 or newer"; 0.14 and later require 1.29).
pub const DEFAULT_KUEUE_VERSION: &str = "0.11.9";

/// The namespace Kueue's configuration names (and leaves unmanaged).
pub const KUEUE_NAMESPACE: &str = "kueue-system";

/// Where Kueue 0.11 reads its metrics server's certificate when it does not manage certificates
/// itself; a fixed path in its `main.go`.
const METRICS_CERT_DIR: &str = "/etc/kueue/metrics/certs";

/// Kueue's build: `<cache>/v<VERSION>/bin/kueue`, its CRDs in `crd/`, its webhook manifests in
/// `webhook/manifests.yaml`.
#[derive(Debug, Clone)]
pub struct KueueBinaries {
    /// The Kueue version, without `v` (e.g. `0.11.9`).
    pub version: String,
    pub dir: PathBuf,
}

impl KueueBinaries {
    /// The build of `LIGHTSOUT_KUEUE_VERSION` (default [`DEFAULT_KUEUE_VERSION`]) in
    /// `LIGHTSOUT_KUEUE_DIR`, or else in the cache directory the install script uses. `Err` says
    /// what is missing and how to build it.
    pub fn locate() -> Result<KueueBinaries, String> {
        let version = std::env::var("LIGHTSOUT_KUEUE_VERSION").unwrap_or_else(|_| DEFAULT_KUEUE_VERSION.into());
        let version = version.trim_start_matches('v').to_string();
        let cache =
            std::env::var_os("LIGHTSOUT_KUEUE_DIR").map(PathBuf::from).unwrap_or_else(|| cache_root().join("kueue"));
        let found = KueueBinaries { dir: cache.join(format!("v{version}")), version };
        let missing: Vec<String> = [found.manager(), found.crd_dir(), found.webhook_manifests()]
            .into_iter()
            .filter(|path| !path.exists())
            .map(|path| path.display().to_string())
            .collect();
        if missing.is_empty() {
            Ok(found)
        } else {
            Err(format!(
                "no Kueue {} ({} missing): build it with `scripts/install-kueue.sh {}`",
                found.version,
                missing.join(", "),
                found.version
            ))
        }
    }

    pub fn manager(&self) -> PathBuf {
        self.dir.join("bin/kueue")
    }

    pub fn crd_dir(&self) -> PathBuf {
        self.dir.join("crd")
    }

    pub fn webhook_manifests(&self) -> PathBuf {
        self.dir.join("webhook/manifests.yaml")
    }
}

/// A running Kueue manager.
pub struct Kueue {
    pub binaries: KueueBinaries,
    /// Its configuration, certificates and log.
    pub dir: PathBuf,
    /// `https://127.0.0.1:<port>`, where the API server calls its webhooks.
    pub webhook_url: String,
    process: Mutex<Process>,
}

/// The control plane this test binary shares and the Kueue running on it, both started on first
/// use; `None` (after printing why) when either's binaries are not built, or this is not root,
/// and the tests do not run under CI. Under CI either fails the test.
pub fn shared() -> Option<(&'static ControlPlane, &'static Kueue)> {
    static SHARED: OnceLock<Result<Kueue, String>> = OnceLock::new();
    let control_plane = control_plane::shared()?;
    let started = SHARED.get_or_init(|| {
        let binaries = KueueBinaries::locate()?;
        // Started on a thread of its own: the caller may be inside a tokio runtime.
        std::thread::spawn(move || Kueue::start(control_plane, binaries).map_err(|e| format!("{e:#}")))
            .join()
            .unwrap_or_else(|_| Err("starting Kueue panicked".into()))
    });
    match started {
        Ok(kueue) => Some((control_plane, kueue)),
        Err(reason) if reason.starts_with("no Kueue") && !binaries::under_ci() => {
            eprintln!("skipped: {reason}");
            None
        }
        Err(reason) => panic!("Kueue did not start: {reason}"),
    }
}

impl Kueue {
    /// Applies Kueue's CRDs, starts its manager against `control_plane` and registers its
    /// webhooks; returns once the API server has reached them. Blocking; must not run inside a
    /// tokio runtime.
    pub fn start(control_plane: &ControlPlane, binaries: KueueBinaries) -> anyhow::Result<Kueue> {
        let started = Instant::now();
        let dir = control_plane.dir.join("kueue");
        let cert_dir = dir.join("certs");
        std::fs::create_dir_all(&cert_dir).with_context(|| format!("creating {}", cert_dir.display()))?;
        control_plane.authority.serving(&cert_dir, "tls", &["127.0.0.1", "localhost"])?;
        install_metrics_certificate(control_plane)?;

        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(apply_crds(control_plane, &binaries.crd_dir()))?;

        let webhook_port = free_port();
        let health_port = free_port();
        let config = json!({
            "apiVersion": "config.kueue.x-k8s.io/v1beta1",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "manageJobsWithoutQueueName": false,
            "leaderElection": {"leaderElect": false},
            "health": {"healthProbeBindAddress": format!("127.0.0.1:{health_port}")},
            "metrics": {"bindAddress": format!("127.0.0.1:{}", free_port())},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": cert_dir},
            "internalCertManagement": {"enable": false},
            "clientConnection": {"qps": 100, "burst": 200},
            "integrations": {"frameworks": ["batch/job"]},
            // Its aggregated API server would listen on the fixed port 8082, which concurrent
            // test binaries share.
            // MultiKueue dispatches batch/v1 Jobs through `spec.managedBy` (Kubernetes 1.30+;
            // alpha in Kueue 0.11): the Job here is left to Kueue, its copy runs on the worker
            // cluster, and its status is synced back while it runs. Without a MultiKueue
            // admission check on a ClusterQueue it changes nothing.
            "featureGates": {"VisibilityOnDemand": false, "MultiKueueBatchJobWithManagedBy": true},
        });
        let config_path = dir.join("config.yaml");
        std::fs::write(&config_path, serde_yaml::to_string(&config)?)
            .with_context(|| format!("writing {}", config_path.display()))?;

        let mut manager = Command::new(binaries.manager());
        manager.arg(format!("--config={}", config_path.display())).env("KUBECONFIG", &control_plane.admin_kubeconfig);
        let process = Process::start("kueue", manager, &dir.join("kueue.log"))?;
        let kueue = Kueue {
            binaries,
            dir,
            webhook_url: format!("https://127.0.0.1:{webhook_port}"),
            process: Mutex::new(process),
        };
        kueue.wait_for("Kueue's readiness probe", Duration::from_secs(60), || {
            http_get_ok(&format!("127.0.0.1:{health_port}"), "/readyz")
        })?;

        runtime.block_on(kueue.register_webhooks(control_plane, webhook_port))?;
        // A dry-run create passes the API server's admission chain, webhooks included.
        kueue.wait_for("the API server to reach Kueue's webhooks", Duration::from_secs(30), || {
            runtime.block_on(async {
                let flavors = Api::<DynamicObject>::all_with(control_plane.client().await, &resource_flavor());
                let flavor: DynamicObject =
                    serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "testkit-probe"}}))
                        .expect("a ResourceFlavor");
                flavors.create(&PostParams { dry_run: true, ..Default::default() }, &flavor).await.is_ok()
            })
        })?;
        eprintln!(
            "testkit: Kueue {} ready in {:.1} s (webhooks at {}, log {})",
            kueue.binaries.version,
            started.elapsed().as_secs_f64(),
            kueue.webhook_url,
            kueue.dir.join("kueue.log").display()
        );
        Ok(kueue)
    }

    /// The last `lines` lines of the manager's log, for a failing test's message.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.lock().unwrap().log_tail(lines)
    }

    async fn register_webhooks(&self, control_plane: &ControlPlane, port: u16) -> anyhow::Result<()> {
        let manifests = std::fs::read_to_string(self.binaries.webhook_manifests())
            .with_context(|| format!("reading {}", self.binaries.webhook_manifests().display()))?;
        let ca_pem = control_plane.authority.files.cert_pem()?;
        let client = control_plane.client().await;
        let apply = PatchParams::apply("lightsout-testkit").force();
        for (kind, configuration) in webhooks::loopback_configurations(&manifests, "kueue", port, &ca_pem)? {
            let name = configuration["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let applied = match kind.as_str() {
                "MutatingWebhookConfiguration" => Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .patch(&name, &apply, &Patch::Apply(&configuration))
                    .await
                    .map(drop),
                "ValidatingWebhookConfiguration" => Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .patch(&name, &apply, &Patch::Apply(&configuration))
                    .await
                    .map(drop),
                other => bail!("unexpected {other} in Kueue's webhook manifests"),
            };
            applied.with_context(|| format!("registering {kind} {name}"))?;
        }
        Ok(())
    }

    /// Polls `ready` every 100 ms until it holds, failing early when the manager has exited.
    fn wait_for(&self, what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready() {
                return Ok(());
            }
            if let Some(status) = self.process.lock().unwrap().try_status() {
                bail!("Kueue exited ({status}) while waiting for {what}:\n{}", self.log_tail(40));
            }
            if Instant::now() >= deadline {
                bail!("{what} did not happen within {timeout:?}; Kueue's log:\n{}", self.log_tail(40));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `kueue.x-k8s.io/v1beta1` ResourceFlavors, for a dynamic client.
pub fn resource_flavor() -> ApiResource {
    kueue_resource("ResourceFlavor", "resourceflavors")
}

/// A `kueue.x-k8s.io/v1beta1` resource, for a dynamic client (`ClusterQueue`/`clusterqueues`,
/// `LocalQueue`/`localqueues`, `Workload`/`workloads`, …).
pub fn kueue_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "kueue.x-k8s.io/v1beta1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Applies every CRD in `crd_dir` and the namespace Kueue's configuration names, and waits until
/// the CRDs are established.
async fn apply_crds(control_plane: &ControlPlane, crd_dir: &Path) -> anyhow::Result<()> {
    let client = control_plane.client().await;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let apply = PatchParams::apply("lightsout-testkit").force();
    let mut names = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(crd_dir)
        .with_context(|| format!("reading {}", crd_dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        // Kept as JSON, not as k8s-openapi's CRD type, so no schema field is lost on the way.
        let crd: serde_json::Value =
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        let name = crd["metadata"]["name"].as_str().with_context(|| format!("no name in {}", file.display()))?;
        crds.patch(name, &apply, &Patch::Apply(&crd)).await.with_context(|| format!("applying {}", file.display()))?;
        names.push(name.to_string());
    }
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}});
    Api::<Namespace>::all(client.clone())
        .patch(KUEUE_NAMESPACE, &apply, &Patch::Apply(&namespace))
        .await
        .with_context(|| format!("creating namespace {KUEUE_NAMESPACE}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        loop {
            let crd = crds.get(&name).await.with_context(|| format!("reading CRD {name}"))?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() >= deadline {
                bail!("CRD {name} was not established within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Kueue 0.11 refuses to start without a certificate in [`METRICS_CERT_DIR`] when it does not
/// manage certificates itself. Any valid pair will do (nothing here scrapes its metrics); an
/// existing one, maybe another test binary's, is left alone. Written to a temporary name and
/// renamed so a concurrent reader never sees half a file.
fn install_metrics_certificate(control_plane: &ControlPlane) -> anyhow::Result<()> {
    let target = Path::new(METRICS_CERT_DIR);
    if target.join("tls.crt").exists() && target.join("tls.key").exists() {
        return Ok(());
    }
    std::fs::create_dir_all(target).with_context(|| format!("creating {}", target.display()))?;
    let unique = format!("{}-{}", std::process::id(), control_plane::unique());
    let files = control_plane.authority.serving(target, &format!(".tls-{unique}"), &["127.0.0.1"])?;
    std::fs::rename(&files.key, target.join("tls.key"))
        .with_context(|| format!("installing {}", files.key.display()))?;
    std::fs::rename(&files.cert, target.join("tls.crt"))
        .with_context(|| format!("installing {}", files.cert.display()))?;
    Ok(())
}

/// A ResourceFlavor, a ClusterQueue with `cpu` CPUs of it for every namespace, and a LocalQueue
/// `queue` in `namespace`, all named after `namespace` (the LocalQueue `queue`).
pub async fn create_queues(client: &kube::Client, namespace: &str, cpu: &str) {
    create_queues_with(client, namespace, cpu, None).await;
}

/// As [`create_queues`], the ClusterQueue in the cohort `cohort` with a ResourceFlavor of that
/// name shared by the cohort's ClusterQueues (borrowing is per flavor): what one ClusterQueue
/// leaves unused, another of the cohort may borrow.
pub async fn create_cohort_queues(client: &kube::Client, namespace: &str, cpu: &str, cohort: &str) {
    create_queues_with(client, namespace, cpu, Some(cohort)).await;
}

async fn create_queues_with(client: &kube::Client, namespace: &str, cpu: &str, cohort: Option<&str>) {
    let create = async |kind: &str, plural: &str, namespaced: bool, object: serde_json::Value| {
        let resource = kueue_resource(kind, plural);
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let mut object = object;
        object["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
        object["kind"] = json!(kind);
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            // The cohort's flavor, made by its first ClusterQueue's caller.
            Err(kube::Error::Api(e)) if e.code == 409 && kind == "ResourceFlavor" => {}
            Err(e) => panic!("creating {kind}: {e}"),
        }
    };
    let flavor = cohort.unwrap_or(namespace);
    create("ResourceFlavor", "resourceflavors", false, json!({"metadata": {"name": flavor}})).await;
    let mut spec = json!({
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
        }],
    });
    if let Some(cohort) = cohort {
        spec["cohort"] = json!(cohort);
    }
    create("ClusterQueue", "clusterqueues", false, json!({"metadata": {"name": namespace}, "spec": spec})).await;
    create(
        "LocalQueue",
        "localqueues",
        true,
        json!({"metadata": {"name": "queue"}, "spec": {"clusterQueue": namespace}}),
    )
    .await;
}

/// MultiKueue on the manager cluster (`client`, whose Kueue is running): trial Jobs of
/// `namespace` queued in its LocalQueue `queue` are dispatched to the worker cluster that
/// `worker_kubeconfig` reaches (where Kueue runs too, with a LocalQueue `queue` in the same
/// namespace, see [`create_queues`]). Made: a Secret with the kubeconfig in [`KUEUE_NAMESPACE`],
/// a MultiKueueCluster, a MultiKueueConfig and an AdmissionCheck of the MultiKueue controller,
/// all named `mk-<namespace>`, and the ResourceFlavor, ClusterQueue (with that check, `cpu` CPUs)
/// and LocalQueue of [`create_queues`]. Returns once the AdmissionCheck is active (the worker
/// cluster reached).
pub async fn create_multikueue_queues(client: &kube::Client, worker_kubeconfig: &Path, namespace: &str, cpu: &str) {
    use k8s_openapi::api::core::v1::Secret;
    let name = format!("mk-{namespace}");
    let kubeconfig = std::fs::read_to_string(worker_kubeconfig).unwrap();
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": {"kubeconfig": kubeconfig}})).unwrap();
    Api::<Secret>::namespaced(client.clone(), KUEUE_NAMESPACE).create(&PostParams::default(), &secret).await.unwrap();
    let create = async |kind: &str, plural: &str, spec: serde_json::Value| {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": kind, "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        Api::<DynamicObject>::all_with(client.clone(), &kueue_resource(kind, plural))
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {kind}: {e}"));
    };
    create(
        "MultiKueueCluster",
        "multikueueclusters",
        json!({"kubeConfig": {"locationType": "Secret", "location": name}}),
    )
    .await;
    create("MultiKueueConfig", "multikueueconfigs", json!({"clusters": [name]})).await;
    create(
        "AdmissionCheck",
        "admissionchecks",
        json!({"controllerName": "kueue.x-k8s.io/multikueue",
               "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name}}),
    )
    .await;
    create_queues_with(client, namespace, cpu, None).await;
    let queues = Api::<DynamicObject>::all_with(client.clone(), &kueue_resource("ClusterQueue", "clusterqueues"));
    let checks = json!({"spec": {"admissionChecks": [name]}});
    queues.patch(namespace, &PatchParams::default(), &Patch::Merge(&checks)).await.unwrap();
    let admission_checks =
        Api::<DynamicObject>::all_with(client.clone(), &kueue_resource("AdmissionCheck", "admissionchecks"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let check = admission_checks.get(&name).await.unwrap();
        let active = check.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Active" && c["status"] == "True"));
        if active {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the MultiKueue AdmissionCheck {name} never became active: {:?}",
            check.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
