//! One trial attempt as Kubernetes objects: a batch/v1 Job and the ConfigMap holding its
//! [`PodJob`]. Pure builders; the reconciler creates what they return.
//!
//! **Names and idempotence.** The Job and its ConfigMap are both named [`job_name`]:
//! `<run>-<first 12 hex of the trial id>-a<attempt>`, at most 63 characters, a DNS-1123 label.
//! The name is a function of (run, trial, attempt) alone, so a controller that restarts and
//! creates the same attempt again gets `AlreadyExists` instead of a second Job. A run name that
//! does not fit (or holds a `.`) is shortened and suffixed with 6 hex digits of its SHA-256, so
//! two long run names that share a prefix never share Job names.
//!
//! **The Job.** `completions: 1`, `parallelism: 1`, `backoffLimit: 0` (attempts are the
//! controller's to count: a failed pod is a failed attempt), `restartPolicy: Never`, and
//! `activeDeadlineSeconds` = `spec.agent.timeout` + [`TrialSettings::setup_margin_seconds`]
//! (pulling images, the init containers, preparing the workspace; default 300 s) +
//! [`TrialSettings::upload_deadline_seconds`] (how long the worker may keep retrying the upload
//! of results; default 600 s, as the worker's own default). `ttlSecondsAfterFinished` is **not**
//! set at creation: the scheduler derives attempt numbers from the Jobs it observes, so a
//! finished Job must stay until its result is recorded; the controller then sets the TTL with
//! [`ttl_patch`]. When `spec.queueName` is set the Job carries `kueue.x-k8s.io/queue-name`;
//! `spec.suspend` is never set, so Kueue's webhook suspends and admits the Job as it decides.
//! Labels and annotations are [`crate::labels`]'; the Job is controlled by the EvaluationRun
//! ([`owner_reference`]). Only Job and Pod fields of Kubernetes 1.28 are used: in particular no
//! native sidecars (`restartPolicy` on an init container), no `podReplacementPolicy`, no
//! `managedBy`.
//!
//! **The job file.** The worker reads the PodJob from `/etc/lightsout/job.json` (volume `job`).
//! Up to [`MAX_INLINE_JOB_JSON_BYTES`] (most trials: the prompt and diff of one change) it
//! travels inside the Job itself, as the pod template's annotation [`JOB_ANNOTATION`] projected
//! into the file by a downward API volume: one trial costs one create and nothing to clean up.
//! Larger ones (annotations are limited to 256 KiB in all) go in a ConfigMap of the Job's name
//! holding `job.json`; building refuses a PodJob above [`MAX_JOB_JSON_BYTES`] (ConfigMaps are
//! limited to 1 MiB). That ConfigMap is created right after the Job, controlled by it
//! ([`config_map_for_job`]: the owner reference needs the Job's uid), so the Job's TTL deletes it
//! with the Job — ConfigMaps of thousands of trials must not pile up in etcd until the run is
//! deleted. The pod waits for the ConfigMap volume (the kubelet retries the mount), which exists
//! within milliseconds; after a controller crash between the two creates, the restarted
//! controller re-creates the ConfigMaps of the active Jobs. Owner references set
//! `blockOwnerDeletion`, so the controller's RBAC needs `update` on `evaluationruns/finalizers`
//! and `jobs/finalizers`. The job file holds no key and no ground truth, only what the agent is
//! given anyway.
//!
//! **The pod** follows the restricted Pod Security profile: `runAsNonRoot`, uid/gid/fsGroup
//! 65532, `seccompProfile: RuntimeDefault`, and in every container `allowPrivilegeEscalation:
//! false`, all capabilities dropped, and a read-only root filesystem except in the task
//! container (task images write where they like). It runs under a dedicated ServiceAccount
//! ([`TrialSettings::service_account`], default `lightsout-trial`) with no token mounted and no
//! service links. Topology spread: at most one trial pod of the run more on any node than on
//! another (`kubernetes.io/hostname`, `ScheduleAnyway`). Node selector and tolerations come
//! from `spec.placement`.
//!
//! Volumes: `lightsout` (emptyDir at `/opt/lightsout`: the worker binary and the harnesses),
//! `job` (the ConfigMap at `/etc/lightsout`) and `scratch` (emptyDir at `/tmp` of the task
//! container: the worker's spool and the agent's scratch directory).
//!
//! Init containers, which need no network (the NetworkPolicy allows no registry):
//! 1. `worker`: the controller's worker image ([`TrialSettings::worker_image`]) runs
//!    `/lightsout-worker copy-self /opt/lightsout/bin`.
//! 2. `harness`, for agentic harnesses only (single-shot is built into the worker): the image
//!    `<harness image repository>/<harness name>:<version>` holds the pinned harness, installed
//!    at build time by `lightsout-worker install-harness NAME VERSION --root /harness` (from a
//!    Dockerfile we ship; those images are Debian-based), and runs
//!    `cp -a /harness/. /opt/lightsout/harnesses/`. A `+` in a version (build metadata, not
//!    allowed in image tags) becomes `_` in the tag.
//!
//! Init containers get the task container's resources: a pod's effective request is the
//! larger of its biggest init container and the sum of its containers, so this costs nothing
//! and satisfies quotas that require limits on every container.
//!
//! The main container `trial` runs on the task's `image`; a task without one uses
//! [`TrialSettings::default_task_image`], and without that building fails naming the task. It
//! runs `/opt/lightsout/bin/lightsout-worker run --job /etc/lightsout/job.json` with
//! `spec.agent.resources`, and it alone gets the secrets: the provider key (the variant's
//! provider's `secretRef`) in the variable the PodJob names, and `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` from `spec.storage.s3.secretName`. The worker gives the key only to
//! its in-process metering proxy and makes itself non-dumpable, so the agent — same uid, same
//! container — cannot read it from `/proc`. `HOME` is `/tmp`: uid 65532 has no home directory
//! in most task images, and harnesses write their configuration there. Agentic harnesses
//! review the repository at [`TrialSettings::repo_path`] in the task image (default `/repo`).
//! Results must go to S3 (`s3://`): a `file://` store inside a pod would vanish with it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, DownwardAPIVolumeFile, DownwardAPIVolumeSource,
    EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector, PodSecurityContext, PodSpec,
    PodTemplateSpec, SeccompProfile, SecretKeySelector, SecurityContext, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use lightsout_api::variant::Variant;
use lightsout_api::{ContextConfig, EvaluationRun, HarnessName, HarnessRef};
use lightsout_core::dataset::Task;
use lightsout_core::pod_job::{PodJob, ProviderEndpoint};
use sha2::{Digest, Sha256};

use crate::labels::{self, AttemptIdentity};

/// The pod volume that holds the worker's spool and the agent's scratch space, limited to
/// `spec.agent.scratchMiB`.
pub const SCRATCH_VOLUME: &str = "scratch";

/// The ConfigMap key holding the PodJob.
pub const JOB_JSON_KEY: &str = "job.json";
/// Where the trial container reads the PodJob.
pub const JOB_JSON_PATH: &str = "/etc/lightsout/job.json";
/// The largest PodJob a ConfigMap carries (ConfigMaps are limited to 1 MiB including metadata).
pub const MAX_JOB_JSON_BYTES: usize = 1_000_000;
/// The pod template annotation that carries a job file up to [`MAX_INLINE_JOB_JSON_BYTES`].
pub const JOB_ANNOTATION: &str = "lightsout.dev/job";
/// The largest job file carried inline; half of the 256 KiB all annotations of an object may
/// take, leaving room for the others.
pub const MAX_INLINE_JOB_JSON_BYTES: usize = 128 * 1024;
/// The uid, gid and fsGroup trial pods run as.
pub const TRIAL_UID: i64 = 65532;
/// Where the `worker` init container puts the worker binary.
pub const WORKER_BIN_DIR: &str = "/opt/lightsout/bin";
/// Where the `harness` init container puts the harnesses.
pub const HARNESS_ROOT: &str = "/opt/lightsout/harnesses";
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The controller's settings for trial pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialSettings {
    /// The worker image, e.g. `ghcr.io/lightsout/worker:0.1.0`; holds `/lightsout-worker`.
    pub worker_image: String,
    /// Harness images are `<this>/<harness name>:<version>`, e.g. `ghcr.io/lightsout/harness`.
    pub harness_image_repository: String,
    /// The ServiceAccount of trial pods.
    pub service_account: String,
    /// The image of tasks whose record names none.
    pub default_task_image: Option<String>,
    /// Where task images hold the repository under review (agentic harnesses).
    pub repo_path: PathBuf,
    /// Time for image pulls, init containers and workspace set-up, on top of the agent timeout.
    pub setup_margin_seconds: u64,
    /// How long the worker may keep retrying the upload of results.
    pub upload_deadline_seconds: u64,
    /// Accepts `file://` results. Only for benchmarks of the controller on one machine: a trial
    /// pod cannot write to the controller's disk. Never set by `lightsout-controller`.
    pub allow_local_results: bool,
}

impl TrialSettings {
    /// The defaults: ServiceAccount `lightsout-trial`, no default task image, repository at
    /// `/repo`, 300 s of set-up margin and a 600 s upload deadline.
    pub fn new(worker_image: impl Into<String>, harness_image_repository: impl Into<String>) -> Self {
        TrialSettings {
            worker_image: worker_image.into(),
            harness_image_repository: harness_image_repository.into(),
            service_account: "lightsout-trial".into(),
            default_task_image: None,
            repo_path: PathBuf::from("/repo"),
            setup_margin_seconds: 300,
            upload_deadline_seconds: 600,
            allow_local_results: false,
        }
    }
}

/// Why a trial's objects cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    /// The EvaluationRun lacks `metadata.name`, `metadata.namespace` or `metadata.uid`.
    MissingMetadata(&'static str),
    UnknownProvider {
        provider: String,
    },
    /// A provider used in a cluster must give its key as a Secret.
    NoSecretRef {
        provider: String,
    },
    BadTimeout(String),
    /// Results in a cluster must go to S3.
    NotS3 {
        results: String,
    },
    NoImage {
        task: String,
    },
    TooLarge {
        task: String,
        bytes: usize,
    },
    Serialize(String),
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::MissingMetadata(field) => write!(f, "the EvaluationRun has no {field}"),
            JobError::UnknownProvider { provider } => write!(f, "provider {provider:?} is not declared in spec.providers"),
            JobError::NoSecretRef { provider } => write!(
                f,
                "spec.providers.{provider}.secretRef: a provider needs a Secret with its API key in a cluster"
            ),
            JobError::BadTimeout(e) => write!(f, "spec.agent.timeout: {e}"),
            JobError::NotS3 { results } => write!(
                f,
                "spec.storage.results: {results:?}: in a cluster results must go to s3:// (a pod's files vanish with it)"
            ),
            JobError::NoImage { task } => write!(
                f,
                "task {task:?} names no container image and the controller has no default task image"
            ),
            JobError::TooLarge { task, bytes } => write!(
                f,
                "task {task:?}: the trial's job.json is {bytes} bytes, over the {MAX_JOB_JSON_BYTES}-byte limit of a \
                 ConfigMap (the task's diff, description and contexts are too large)"
            ),
            JobError::Serialize(e) => write!(f, "serializing the job: {e}"),
        }
    }
}

impl std::error::Error for JobError {}

/// The controlling owner reference to `run`.
pub fn owner_reference(run: &EvaluationRun) -> Result<OwnerReference, JobError> {
    Ok(OwnerReference {
        api_version: "lightsout.dev/v1alpha1".into(),
        kind: "EvaluationRun".into(),
        name: run.metadata.name.clone().ok_or(JobError::MissingMetadata("metadata.name"))?,
        uid: run.metadata.uid.clone().ok_or(JobError::MissingMetadata("metadata.uid"))?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

fn short_sha(text: &str, digits: usize) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..digits].to_string()
}

/// The name of attempt `attempt` of trial `trial_id` of `run` (its Job and ConfigMap).
pub fn job_name(run: &str, trial_id: &str, attempt: u32) -> String {
    let trial: String =
        trial_id.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).take(12).collect();
    let suffix = format!("-{trial}-a{attempt}");
    let budget = 63 - suffix.len();
    let plain = !run.is_empty()
        && run.len() <= budget
        && run.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !run.starts_with('-')
        && !run.ends_with('-');
    let prefix = if plain {
        run.to_string()
    } else {
        // Shortened or rewritten: a hash of the full name keeps distinct runs apart.
        let cleaned: String = run
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' })
            .take(budget - 7)
            .collect();
        let cleaned = cleaned.trim_matches('-');
        if cleaned.is_empty() {
            format!("r{}", short_sha(run, 6))
        } else {
            format!("{cleaned}-{}", short_sha(run, 6))
        }
    };
    format!("{prefix}{suffix}")
}

/// The prompt of a trial that shows the task in context configuration `context` (see
/// [`lightsout_core::plan::PlannedTrial::context_config`]): the agentic prompt for agentic harnesses, the single-shot
/// one otherwise.
pub fn prompt_for(variant: &Variant, task: &Task, context: Option<ContextConfig>) -> String {
    if variant.harness.name == HarnessName::SingleShot {
        lightsout_core::prompts::review_prompt(&variant.prompt, task, context)
    } else {
        lightsout_core::prompts::agentic_review_prompt(&variant.prompt, task, context)
    }
}

/// The harness image of `harness`: `<repository>/<name>:<version>`, `+` written `_`.
pub fn harness_image(settings: &TrialSettings, harness: &HarnessRef) -> String {
    format!(
        "{}/{}:{}",
        settings.harness_image_repository.trim_end_matches('/'),
        harness.name.as_str(),
        harness.version.replace('+', "_")
    )
}

/// `activeDeadlineSeconds` of a trial Job whose agent may run `timeout_seconds`.
pub fn active_deadline_seconds(timeout_seconds: u64, settings: &TrialSettings) -> i64 {
    let total =
        timeout_seconds.saturating_add(settings.setup_margin_seconds).saturating_add(settings.upload_deadline_seconds);
    i64::try_from(total).unwrap_or(i64::MAX)
}

/// One trial attempt to build objects for.
#[derive(Debug, Clone)]
pub struct TrialInput<'a> {
    pub run: &'a EvaluationRun,
    pub variant: &'a Variant,
    pub task: &'a Task,
    pub trial_id: &'a str,
    /// The trial's configuration of the `matrix.contextConfigs` axis ([`lightsout_core::plan::PlannedTrial::context`]).
    pub context: Option<ContextConfig>,
    pub repeat: u32,
    /// 1-based, as [`crate::schedule::Start::attempt`].
    pub attempt: u32,
    /// The rendered prompt ([`prompt_for`]).
    pub prompt: &'a str,
}

fn is_agentic(harness: &HarnessRef) -> bool {
    harness.name != HarnessName::SingleShot
}

/// The PodJob the trial's worker reads.
pub fn pod_job(input: &TrialInput, settings: &TrialSettings) -> Result<PodJob, JobError> {
    let spec = &input.run.spec;
    let run = input.run.metadata.name.clone().ok_or(JobError::MissingMetadata("metadata.name"))?;
    let provider_name = &input.variant.model.provider;
    let provider = spec
        .providers
        .get(provider_name)
        .ok_or_else(|| JobError::UnknownProvider { provider: provider_name.clone() })?;
    if !spec.storage.results.starts_with("s3://") && !settings.allow_local_results {
        return Err(JobError::NotS3 { results: spec.storage.results.clone() });
    }
    let timeout = lightsout_api::duration::parse_timeout(&spec.agent.timeout).map_err(JobError::BadTimeout)?;
    let agentic = is_agentic(&input.variant.harness);
    Ok(PodJob {
        run,
        variant: input.variant.clone(),
        task: input.task.clone(),
        trial_id: input.trial_id.to_string(),
        context_config: input.context,
        repeat: input.repeat,
        attempt: input.attempt,
        prompt: input.prompt.to_string(),
        provider: ProviderEndpoint {
            name: provider_name.clone(),
            base_url: provider.base_url.clone(),
            api_kind: provider.api_kind,
            api_key_env: provider.api_key_env().to_string(),
        },
        timeout_seconds: timeout.as_secs(),
        max_tokens: spec.budget.max_trial_tokens.map(|t| t.max(0) as u64),
        max_usd: spec.budget.max_trial_usd,
        max_turns: spec.agent.max_turns.map(|t| t.max(1) as u32),
        max_file_bytes: spec.agent.max_file_bytes.map(|b| b.max(0) as u64),
        scratch_mib: Some(spec.agent.scratch_mib()),
        results: spec.storage.results.clone(),
        s3: spec.storage.s3.clone(),
        base_tree: agentic.then(|| settings.repo_path.clone()),
        harness_root: agentic.then(|| PathBuf::from(HARNESS_ROOT)),
        termination_log: PathBuf::from(TERMINATION_LOG),
        upload_deadline_seconds: settings.upload_deadline_seconds,
        provider_stall_timeout_seconds: None,
    })
}

/// A trial attempt's objects, to create in this order: the ConfigMap, then the Job.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialObjects {
    /// The ConfigMap holding a job file too large to travel inline; `None` when it is inline.
    pub config_map: Option<ConfigMap>,
    pub job: Job,
    pub pod_job: PodJob,
}

fn restricted_container_security(read_only_root: bool) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        read_only_root_filesystem: Some(read_only_root),
        run_as_non_root: Some(true),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
        ..SecurityContext::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector { name: secret.into(), key: key.into(), optional: Some(false) }),
            ..EnvVarSource::default()
        }),
    }
}

fn base_container(name: &str, image: &str, command: Vec<String>, read_only_root: bool) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        command: Some(command),
        security_context: Some(restricted_container_security(read_only_root)),
        termination_message_path: Some(TERMINATION_LOG.into()),
        termination_message_policy: Some("File".into()),
        ..Container::default()
    }
}

/// Builds the ConfigMap and the Job of one trial attempt.
pub fn build_trial(input: &TrialInput, settings: &TrialSettings) -> Result<TrialObjects, JobError> {
    let run = input.run;
    let run_name = run.metadata.name.clone().ok_or(JobError::MissingMetadata("metadata.name"))?;
    let namespace = run.metadata.namespace.clone().ok_or(JobError::MissingMetadata("metadata.namespace"))?;
    let owner = owner_reference(run)?;
    let spec = &run.spec;
    let pod_job = pod_job(input, settings)?;
    let json = serde_json::to_string(&pod_job).map_err(|e| JobError::Serialize(e.to_string()))?;
    if json.len() > MAX_JOB_JSON_BYTES {
        return Err(JobError::TooLarge { task: input.task.id.clone(), bytes: json.len() });
    }
    let image = input
        .task
        .image
        .clone()
        .or_else(|| settings.default_task_image.clone())
        .ok_or_else(|| JobError::NoImage { task: input.task.id.clone() })?;
    let provider = &spec.providers[&input.variant.model.provider];
    let secret = provider
        .secret_ref
        .as_ref()
        .ok_or_else(|| JobError::NoSecretRef { provider: input.variant.model.provider.clone() })?;

    let name = job_name(&run_name, input.trial_id, input.attempt);
    let identity = AttemptIdentity {
        run: &run_name,
        variant_id: &input.variant.id,
        trial_id: input.trial_id,
        task_id: &input.task.id,
        context: input.context,
        attempt: input.attempt,
    };
    let trial_labels = labels::trial_labels(&identity);
    let annotations = labels::trial_annotations(&identity);

    let inline = json.len() <= MAX_INLINE_JOB_JSON_BYTES;
    let mut pod_annotations = annotations.clone();
    if inline {
        pod_annotations.insert(JOB_ANNOTATION.to_string(), json.clone());
    }
    let config_map = (!inline).then(|| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(trial_labels.clone()),
            annotations: Some(annotations.clone()),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(JOB_JSON_KEY.to_string(), json.clone())])),
        immutable: Some(true),
        ..ConfigMap::default()
    });

    let resources = spec.agent.resources.clone();
    let mut init_containers = vec![Container {
        volume_mounts: Some(vec![mount("lightsout", "/opt/lightsout", false)]),
        resources: resources.clone(),
        ..base_container(
            "worker",
            &settings.worker_image,
            vec!["/lightsout-worker".into(), "copy-self".into(), WORKER_BIN_DIR.into()],
            true,
        )
    }];
    if is_agentic(&input.variant.harness) {
        init_containers.push(Container {
            volume_mounts: Some(vec![mount("lightsout", "/opt/lightsout", false)]),
            resources: resources.clone(),
            ..base_container(
                "harness",
                &harness_image(settings, &input.variant.harness),
                vec!["cp".into(), "-a".into(), "/harness/.".into(), format!("{HARNESS_ROOT}/")],
                true,
            )
        });
    }

    let mut env = vec![
        secret_env(&pod_job.provider.api_key_env, &secret.name, &secret.key),
        EnvVar { name: "HOME".into(), value: Some("/tmp".into()), value_from: None },
    ];
    if let Some(s3_secret) = spec.storage.s3.as_ref().and_then(|s3| s3.secret_name.as_ref()) {
        env.push(secret_env("AWS_ACCESS_KEY_ID", s3_secret, "AWS_ACCESS_KEY_ID"));
        env.push(secret_env("AWS_SECRET_ACCESS_KEY", s3_secret, "AWS_SECRET_ACCESS_KEY"));
    }
    let trial = Container {
        env: Some(env),
        resources,
        volume_mounts: Some(vec![
            // Read-write: installing an already-present harness may still write its markers.
            mount("lightsout", "/opt/lightsout", false),
            mount("job", "/etc/lightsout", true),
            mount(SCRATCH_VOLUME, "/tmp", false),
        ]),
        ..base_container(
            "trial",
            &image,
            vec![format!("{WORKER_BIN_DIR}/lightsout-worker"), "run".into(), "--job".into(), JOB_JSON_PATH.into()],
            false,
        )
    };

    let placement = &spec.placement;
    let pod = PodSpec {
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        service_account_name: Some(settings.service_account.clone()),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(TRIAL_UID),
            run_as_group: Some(TRIAL_UID),
            fs_group: Some(TRIAL_UID),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
            ..PodSecurityContext::default()
        }),
        node_selector: (!placement.node_selector.is_empty()).then(|| placement.node_selector.clone()),
        tolerations: (!placement.tolerations.is_empty()).then(|| placement.tolerations.clone()),
        topology_spread_constraints: Some(vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "kubernetes.io/hostname".into(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            label_selector: Some(labels::run_selector(&run_name)),
            ..TopologySpreadConstraint::default()
        }]),
        volumes: Some(vec![
            Volume { name: "lightsout".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() },
            job_volume(inline, &name),
            // The kubelet evicts a pod whose scratch passes its limit; that eviction is the
            // agent's own failure (see `observe`), not the infrastructure's.
            Volume {
                name: SCRATCH_VOLUME.into(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(Quantity(format!("{}Mi", spec.agent.scratch_mib()))),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            },
        ]),
        init_containers: Some(init_containers),
        containers: vec![trial],
        // The scheduler's priority, and Kueue's for the trial's workload.
        priority_class_name: spec.priority_class_name.clone(),
        ..PodSpec::default()
    };

    let mut job_labels = trial_labels.clone();
    if let Some(queue) = &spec.queue_name {
        job_labels.insert(labels::KUEUE_QUEUE_NAME.to_string(), queue.clone());
    }
    let job = Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            labels: Some(job_labels),
            annotations: Some(annotations.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completions: Some(1),
            parallelism: Some(1),
            backoff_limit: Some(0),
            active_deadline_seconds: Some(active_deadline_seconds(pod_job.timeout_seconds, settings)),
            // Never set: Kueue's webhook suspends and admits queued Jobs.
            suspend: None,
            // Set by `ttl_patch` once the attempt's result is recorded.
            ttl_seconds_after_finished: None,
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(trial_labels),
                    annotations: Some(pod_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        status: None,
    };
    Ok(TrialObjects { config_map, job, pod_job })
}

/// The `job` volume: the pod's own annotation (inline) or the ConfigMap named `config_map`.
fn job_volume(inline: bool, config_map: &str) -> Volume {
    if inline {
        return Volume {
            name: "job".into(),
            downward_api: Some(DownwardAPIVolumeSource {
                items: Some(vec![DownwardAPIVolumeFile {
                    path: JOB_JSON_KEY.into(),
                    field_ref: Some(ObjectFieldSelector {
                        field_path: format!("metadata.annotations['{JOB_ANNOTATION}']"),
                        api_version: None,
                    }),
                    mode: None,
                    resource_field_ref: None,
                }]),
                default_mode: Some(0o444),
            }),
            ..Volume::default()
        };
    }
    Volume {
        name: "job".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.into(),
            items: Some(vec![KeyToPath { key: JOB_JSON_KEY.into(), path: JOB_JSON_KEY.into(), mode: None }]),
            default_mode: Some(0o444),
            optional: Some(false),
        }),
        ..Volume::default()
    }
}

/// The trial's ConfigMap, controlled by its created Job (which has a uid), so deleting the Job
/// deletes the ConfigMap.
pub fn config_map_for_job(mut config_map: ConfigMap, job: &Job) -> Result<ConfigMap, JobError> {
    let name = job.metadata.name.clone().ok_or(JobError::MissingMetadata("the Job's metadata.name"))?;
    let uid = job.metadata.uid.clone().ok_or(JobError::MissingMetadata("the Job's metadata.uid"))?;
    config_map.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    Ok(config_map)
}

/// A JSON merge patch that lets Kubernetes delete a finished trial Job (and its pod and
/// ConfigMap) `seconds` after it finished; applied once the attempt's result is recorded.
pub fn ttl_patch(seconds: i32) -> serde_json::Value {
    serde_json::json!({ "spec": { "ttlSecondsAfterFinished": seconds.max(0) } })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lightsout_api::variant::variants;
    use serde_yaml::Value;

    const RUN: &str = r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {name: demo, namespace: evals, uid: 5f0c1e2a-0000-4000-8000-000000000001}
spec:
  dataset: {format: crbugbench, source: "s3://datasets/crbugbench/tasks.jsonl"}
  agent:
    timeout: 30m
    maxTurns: 40
    resources: {requests: {cpu: "2", memory: 4Gi}, limits: {memory: 8Gi}}
  matrix:
    models:
      - {name: gpt-5.1, provider: openai}
      - {name: qwen, provider: local}
      - {name: llama, provider: lab}
    harnesses: [{name: single-shot, version: "1.0.0"}, {name: codex, version: "0.63.0"}]
  providers:
    openai: {baseUrl: "https://api.openai.com/v1", apiKind: openai-responses, secretRef: {name: openai-key, key: api-key}}
    local: {baseUrl: "http://vllm.models.svc/v1", apiKind: openai-chat, secretRef: {name: local-key, key: token}, apiKeyEnv: LOCAL_KEY}
    lab: {baseUrl: "http://10.1.2.3:9000/v1", apiKind: openai-chat}
  storage:
    results: "s3://results/lightsout"
    s3: {endpoint: "http://10.9.9.9:9000", secretName: s3-creds, forcePathStyle: true}
  budget: {maxTrialTokens: 500000, maxTrialUSD: 2.5}
  placement:
    nodeSelector: {pool: evals}
    tolerations: [{key: dedicated, operator: Equal, value: evals, effect: NoSchedule}]
"#;

    pub(crate) fn test_run() -> EvaluationRun {
        lightsout_api::validate::parse_run(RUN, "test").unwrap()
    }

    fn task(id: &str, image: Option<&str>) -> Task {
        Task {
            id: id.into(),
            repo: "acme/widgets".into(),
            image: image.map(String::from),
            language: None,
            difficulty: None,
            track: None,
            pr_number: None,
            pr_type: None,
            title: "Fix the widget".into(),
            description: String::new(),
            diff: "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n".into(),
            base_commit: None,
            head_commit: None,
            contexts: Default::default(),
        }
    }

    fn settings() -> TrialSettings {
        TrialSettings::new("ghcr.io/lightsout/worker:0.1.0", "ghcr.io/lightsout/harness")
    }

    /// Builds attempt `attempt` of (`model`, `harness`) on `task` and returns it as YAML too.
    fn build(run: &EvaluationRun, model: &str, harness: HarnessName, task: &Task) -> (TrialObjects, Value) {
        let variant = variants(&run.spec)
            .into_iter()
            .find(|v| v.model.name == model && v.harness.name == harness)
            .expect("variant");
        let prompt = prompt_for(&variant, task, run.spec.agent.context_config);
        let trial_id = lightsout_core::plan::trial_id(&variant.id, &task.id, 0);
        let input = TrialInput {
            run,
            variant: &variant,
            task,
            trial_id: &trial_id,
            context: None,
            repeat: 0,
            attempt: 2,
            prompt: &prompt,
        };
        let objects = build_trial(&input, &settings()).unwrap();
        let yaml = serde_yaml::from_str(&serde_yaml::to_string(&objects.job).unwrap()).unwrap();
        (objects, yaml)
    }

    fn seq(v: &Value) -> &Vec<Value> {
        v.as_sequence().unwrap_or_else(|| panic!("not a sequence: {v:?}"))
    }

    fn all_containers(pod: &Value) -> Vec<&Value> {
        seq(&pod["initContainers"]).iter().chain(seq(&pod["containers"])).collect()
    }

    #[test]
    fn job_names_are_deterministic_dns_labels_within_63_characters() {
        assert_eq!(job_name("demo", "0123456789abcdef", 1), "demo-0123456789ab-a1");
        assert_eq!(job_name("demo", "0123456789abcdef", 1), job_name("demo", "0123456789abcdef", 1));
        assert_ne!(job_name("demo", "0123456789abcdef", 1), job_name("demo", "0123456789abcdef", 2));
        let long_a = format!("{}-a", "experiment".repeat(8));
        let long_b = format!("{}-b", "experiment".repeat(8));
        for run in
            [long_a.as_str(), long_b.as_str(), "a.b", "x", &"r".repeat(253), "run-with-exactly-forty-chars-1234567890"]
        {
            for attempt in [1, 21, u32::MAX] {
                let name = job_name(run, "fedcba9876543210", attempt);
                assert!(name.len() <= 63, "{name} is {} long", name.len());
                assert!(labels::is_valid_label_value(&name), "{name}");
                assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{name}");
                assert!(name.ends_with(&format!("-fedcba987654-a{attempt}")), "{name}");
            }
        }
        // Long names sharing a prefix, and names that differ only in '.' vs '-', stay apart.
        assert_ne!(job_name(&long_a, "fedcba9876543210", 1), job_name(&long_b, "fedcba9876543210", 1));
        assert_ne!(job_name("a.b", "fedcba9876543210", 1), job_name("a-b", "fedcba9876543210", 1));
    }

    #[test]
    fn the_job_runs_one_pod_once_with_no_ttl_and_a_deadline() {
        let run = test_run();
        let (objects, job) = build(&run, "gpt-5.1", HarnessName::SingleShot, &task("crb-1", Some("acme/widgets:1")));
        let name = objects.job.metadata.name.clone().unwrap();
        assert_eq!(job["apiVersion"], "batch/v1");
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["metadata"]["namespace"], "evals");
        assert!(name.starts_with("demo-") && name.ends_with("-a2"));
        let spec = &job["spec"];
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["parallelism"], 1);
        assert_eq!(spec["backoffLimit"], 0);
        assert_eq!(spec["activeDeadlineSeconds"], 30 * 60 + 300 + 600);
        assert!(spec.get("ttlSecondsAfterFinished").is_none());
        assert!(spec.get("suspend").is_none());
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(ttl_patch(3600), serde_json::json!({"spec": {"ttlSecondsAfterFinished": 3600}}));
        let owner = &job["metadata"]["ownerReferences"][0];
        assert_eq!(owner["apiVersion"], "lightsout.dev/v1alpha1");
        assert_eq!(owner["kind"], "EvaluationRun");
        assert_eq!(owner["name"], "demo");
        assert_eq!(owner["uid"], "5f0c1e2a-0000-4000-8000-000000000001");
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["blockOwnerDeletion"], true);
    }

    #[test]
    fn job_and_pod_carry_the_trial_labels_and_the_task_id_annotation() {
        let run = test_run();
        let task = task("acme/widgets#42", Some("acme/widgets:1"));
        let (objects, job) = build(&run, "gpt-5.1", HarnessName::SingleShot, &task);
        for meta in [&job["metadata"], &job["spec"]["template"]["metadata"]] {
            let l = &meta["labels"];
            assert_eq!(l["lightsout.dev/run"], "demo");
            assert_eq!(l["lightsout.dev/variant"], objects.pod_job.variant.id.as_str());
            assert_eq!(l["lightsout.dev/trial"], objects.pod_job.trial_id.as_str());
            assert_eq!(l["lightsout.dev/task"], labels::label_value("acme/widgets#42").as_str());
            assert!(l["lightsout.dev/task"].as_str().unwrap().starts_with("h-"));
            assert_eq!(l["lightsout.dev/attempt"], "2");
            assert_eq!(l["app.kubernetes.io/managed-by"], "lightsout");
            assert_eq!(l["app.kubernetes.io/component"], "trial");
            assert_eq!(meta["annotations"]["lightsout.dev/task-id"], "acme/widgets#42");
        }
        // The run selector finds the Job.
        let job_labels = objects.job.metadata.labels.as_ref().unwrap();
        assert!(labels::run_match_labels("demo").iter().all(|(k, v)| job_labels.get(k) == Some(v)));
    }

    #[test]
    fn kueue_gets_the_queue_label_and_the_run_s_priority_and_suspend_is_never_set() {
        let mut run = test_run();
        let t = task("crb-1", Some("acme/widgets:1"));
        let (_, without) = build(&run, "gpt-5.1", HarnessName::SingleShot, &t);
        assert!(without["metadata"]["labels"].get("kueue.x-k8s.io/queue-name").is_none());
        assert!(without["spec"].get("suspend").is_none());
        run.spec.queue_name = Some("team-evals".into());
        run.spec.priority_class_name = Some("nightly-low".into());
        let (_, with) = build(&run, "gpt-5.1", HarnessName::SingleShot, &t);
        assert_eq!(with["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-evals");
        assert!(with["spec"].get("suspend").is_none());
        assert!(without["spec"]["template"]["spec"].get("priorityClassName").is_none());
        assert_eq!(with["spec"]["template"]["spec"]["priorityClassName"], "nightly-low");
    }

    #[test]
    fn the_pod_is_restricted_with_no_token_and_a_dedicated_service_account() {
        let run = test_run();
        let (_, job) = build(&run, "gpt-5.1", HarnessName::Codex, &task("crb-1", Some("acme/widgets:1")));
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(pod["serviceAccountName"], "lightsout-trial");
        assert_eq!(pod["enableServiceLinks"], false);
        let sc = &pod["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["runAsUser"], 65532);
        assert_eq!(sc["runAsGroup"], 65532);
        assert_eq!(sc["fsGroup"], 65532);
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        let containers = all_containers(pod);
        assert_eq!(containers.len(), 3);
        for c in containers {
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{}", c["name"].as_str().unwrap());
            assert_eq!(sc["capabilities"]["drop"], serde_yaml::from_str::<Value>("[ALL]").unwrap());
            assert!(sc["capabilities"].get("add").is_none());
            assert!(sc.get("privileged").is_none_or(|p| *p == false));
            assert_eq!(sc["runAsNonRoot"], true);
            assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
            assert_eq!(sc["readOnlyRootFilesystem"], c["name"] != "trial");
            assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
            assert_eq!(c["terminationMessagePolicy"], "File");
            // Kubernetes 1.28: no native sidecars (restartPolicy on a container).
            assert!(c.get("restartPolicy").is_none());
        }
        // No host namespaces or host paths.
        for field in ["hostNetwork", "hostPID", "hostIPC"] {
            assert!(pod.get(field).is_none(), "{field}");
        }
        assert!(seq(&pod["volumes"]).iter().all(|v| v.get("hostPath").is_none()));
    }

    #[test]
    fn only_kubernetes_1_28_job_and_pod_fields_are_used() {
        let run = test_run();
        let (_, job) = build(&run, "gpt-5.1", HarnessName::Codex, &task("crb-1", Some("acme/widgets:1")));
        let keys = |v: &Value| -> Vec<String> {
            v.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_string()).collect()
        };
        // Job fields added after 1.28 (podReplacementPolicy, backoffLimitPerIndex, managedBy,
        // successPolicy…) are not in these lists.
        let job_fields = ["completions", "parallelism", "backoffLimit", "activeDeadlineSeconds", "template"];
        for key in keys(&job["spec"]) {
            assert!(job_fields.contains(&key.as_str()), "Job spec field {key}");
        }
        let pod = &job["spec"]["template"]["spec"];
        let pod_fields = [
            "restartPolicy",
            "automountServiceAccountToken",
            "serviceAccountName",
            "enableServiceLinks",
            "securityContext",
            "nodeSelector",
            "tolerations",
            "topologySpreadConstraints",
            "volumes",
            "initContainers",
            "containers",
        ];
        for key in keys(pod) {
            assert!(pod_fields.contains(&key.as_str()), "pod spec field {key}");
        }
        let container_fields = [
            "name",
            "image",
            "command",
            "env",
            "resources",
            "volumeMounts",
            "securityContext",
            "terminationMessagePath",
            "terminationMessagePolicy",
        ];
        for c in all_containers(pod) {
            // Notably no restartPolicy: native sidecar containers need Kubernetes 1.29.
            for key in keys(c) {
                assert!(container_fields.contains(&key.as_str()), "container field {key}");
            }
        }
    }

    #[test]
    fn init_containers_install_the_worker_and_the_pinned_harness_from_images() {
        let run = test_run();
        let (objects, job) = build(&run, "gpt-5.1", HarnessName::Codex, &task("crb-1", Some("acme/widgets:1")));
        let pod = &job["spec"]["template"]["spec"];
        let init = seq(&pod["initContainers"]);
        assert_eq!(init[0]["name"], "worker");
        assert_eq!(init[0]["image"], "ghcr.io/lightsout/worker:0.1.0");
        assert_eq!(
            init[0]["command"],
            serde_yaml::from_str::<Value>(r#"["/lightsout-worker", "copy-self", "/opt/lightsout/bin"]"#).unwrap()
        );
        assert_eq!(init[1]["name"], "harness");
        assert_eq!(init[1]["image"], "ghcr.io/lightsout/harness/codex:0.63.0");
        assert_eq!(
            init[1]["command"],
            serde_yaml::from_str::<Value>(r#"["cp", "-a", "/harness/.", "/opt/lightsout/harnesses/"]"#).unwrap()
        );
        for c in init {
            assert_eq!(c["volumeMounts"][0]["name"], "lightsout");
            assert_eq!(c["volumeMounts"][0]["mountPath"], "/opt/lightsout");
        }
        assert_eq!(objects.pod_job.harness_root.as_deref(), Some(std::path::Path::new("/opt/lightsout/harnesses")));
        assert_eq!(objects.pod_job.base_tree.as_deref(), Some(std::path::Path::new("/repo")));
        // Single-shot is built into the worker: no harness container, no harness root.
        let (single, single_yaml) = build(&run, "gpt-5.1", HarnessName::SingleShot, &task("crb-1", Some("i:1")));
        let init = seq(&single_yaml["spec"]["template"]["spec"]["initContainers"]);
        assert_eq!(init.len(), 1);
        assert_eq!(init[0]["name"], "worker");
        assert!(single.pod_job.harness_root.is_none() && single.pod_job.base_tree.is_none());
        let build_metadata = HarnessRef { name: HarnessName::Codex, version: "1.2.3+build.5".into() };
        assert_eq!(harness_image(&settings(), &build_metadata), "ghcr.io/lightsout/harness/codex:1.2.3_build.5");
    }

    #[test]
    fn the_trial_container_runs_the_worker_on_the_task_image_with_volumes_and_resources() {
        let run = test_run();
        let (objects, job) = build(&run, "gpt-5.1", HarnessName::Codex, &task("crb-1", Some("acme/widgets:1")));
        let pod = &job["spec"]["template"]["spec"];
        let trial = &seq(&pod["containers"])[0];
        assert_eq!(seq(&pod["containers"]).len(), 1);
        assert_eq!(trial["name"], "trial");
        assert_eq!(trial["image"], "acme/widgets:1");
        assert_eq!(
            trial["command"],
            serde_yaml::from_str::<Value>(
                r#"["/opt/lightsout/bin/lightsout-worker", "run", "--job", "/etc/lightsout/job.json"]"#
            )
            .unwrap()
        );
        assert_eq!(trial["resources"]["requests"]["cpu"], "2");
        assert_eq!(trial["resources"]["requests"]["memory"], "4Gi");
        assert_eq!(trial["resources"]["limits"]["memory"], "8Gi");
        let mounts: BTreeMap<String, (String, bool)> = seq(&trial["volumeMounts"])
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    (m["mountPath"].as_str().unwrap().to_string(), m["readOnly"] == true),
                )
            })
            .collect();
        assert_eq!(mounts["job"], ("/etc/lightsout".to_string(), true));
        assert_eq!(mounts["scratch"], ("/tmp".to_string(), false));
        assert_eq!(mounts["lightsout"].0, "/opt/lightsout");
        let volumes = seq(&pod["volumes"]);
        let names: Vec<&str> = volumes.iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["lightsout", "job", "scratch"]);
        assert_eq!(volumes[2]["emptyDir"]["sizeLimit"], "4096Mi", "the default scratch size");
        assert!(volumes[0].get("emptyDir").is_some() && volumes[2].get("emptyDir").is_some());
        // A small job file: projected from the pod's own annotation.
        let projected = &volumes[1]["downwardAPI"];
        assert_eq!(projected["items"][0]["path"], "job.json");
        assert_eq!(projected["items"][0]["fieldRef"]["fieldPath"], "metadata.annotations['lightsout.dev/job']");
        // Placement.
        assert_eq!(pod["nodeSelector"]["pool"], "evals");
        assert_eq!(pod["tolerations"][0]["key"], "dedicated");
        assert_eq!(pod["tolerations"][0]["effect"], "NoSchedule");
        let spread = &pod["topologySpreadConstraints"][0];
        assert_eq!(spread["maxSkew"], 1);
        assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
        assert_eq!(spread["whenUnsatisfiable"], "ScheduleAnyway");
        assert_eq!(spread["labelSelector"]["matchLabels"]["lightsout.dev/run"], "demo");
        assert_eq!(objects.pod_job.timeout_seconds, 1800);
        assert_eq!(objects.pod_job.max_turns, Some(40));
        assert_eq!(objects.pod_job.max_tokens, Some(500_000));
        assert_eq!(objects.pod_job.max_usd, Some(2.5));
        assert_eq!(objects.pod_job.attempt, 2);
        assert_eq!(objects.pod_job.results, "s3://results/lightsout");
    }

    #[test]
    fn only_the_trial_container_gets_the_provider_key_and_s3_credentials() {
        let run = test_run();
        let (objects, job) = build(&run, "qwen", HarnessName::Codex, &task("crb-1", Some("acme/widgets:1")));
        assert_eq!(objects.pod_job.provider.api_key_env, "LOCAL_KEY");
        let pod = &job["spec"]["template"]["spec"];
        for c in all_containers(pod) {
            if c["name"] != "trial" {
                assert!(c.get("env").is_none() && c.get("envFrom").is_none(), "{:?}", c["name"]);
                continue;
            }
            assert!(c.get("envFrom").is_none());
            let env: BTreeMap<&str, &Value> = seq(&c["env"]).iter().map(|e| (e["name"].as_str().unwrap(), e)).collect();
            let key = &env["LOCAL_KEY"]["valueFrom"]["secretKeyRef"];
            assert_eq!(key["name"], "local-key");
            assert_eq!(key["key"], "token");
            for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
                let s3 = &env[var]["valueFrom"]["secretKeyRef"];
                assert_eq!(s3["name"], "s3-creds");
                assert_eq!(s3["key"], var);
            }
            assert_eq!(env["HOME"]["value"], "/tmp");
            // No secret value is ever inlined.
            assert!(env.values().all(|e| e.get("value").is_none() || e["name"] == "HOME"));
        }
    }

    #[test]
    fn a_small_job_file_travels_inline_as_an_annotation_projected_into_the_pod() {
        let run = test_run();
        let t = task("crb-1", Some("acme/widgets:1"));
        let (objects, _) = build(&run, "gpt-5.1", HarnessName::Codex, &t);
        assert!(objects.config_map.is_none(), "no ConfigMap for an inline job file");
        let template = objects.job.spec.as_ref().unwrap().template.clone();
        let text = &template.metadata.unwrap().annotations.unwrap()[JOB_ANNOTATION];
        let parsed = PodJob::parse(text).unwrap();
        assert_eq!(parsed, objects.pod_job);
        assert_eq!(parsed.task, t);
        assert_eq!(parsed.provider.api_key_env, "OPENAI_API_KEY");
        assert_eq!(parsed.s3.as_ref().unwrap().secret_name.as_deref(), Some("s3-creds"));
        let variant = variants(&run.spec).into_iter().find(|v| v.id == parsed.variant.id).unwrap();
        assert_eq!(parsed.prompt, prompt_for(&variant, &t, run.spec.agent.context_config));
        // The Job's own metadata does not repeat it.
        assert!(!objects.job.metadata.annotations.as_ref().unwrap().contains_key(JOB_ANNOTATION));
        let volume = template.spec.unwrap().volumes.unwrap().into_iter().find(|v| v.name == "job").unwrap();
        let file = &volume.downward_api.unwrap().items.unwrap()[0];
        assert_eq!(file.path, "job.json");
        assert_eq!(file.field_ref.as_ref().unwrap().field_path, "metadata.annotations['lightsout.dev/job']");
    }

    #[test]
    fn a_large_job_file_goes_in_a_config_map_owned_by_the_job() {
        let run = test_run();
        let mut t = task("crb-1", Some("acme/widgets:1"));
        t.diff = "+x\n".repeat(MAX_INLINE_JOB_JSON_BYTES / 3);
        let (objects, _) = build(&run, "gpt-5.1", HarnessName::Codex, &t);
        let config_map = objects.config_map.clone().expect("a ConfigMap over the inline limit");
        let cm: Value = serde_yaml::from_str(&serde_yaml::to_string(&config_map).unwrap()).unwrap();
        assert_eq!(cm["kind"], "ConfigMap");
        assert_eq!(cm["metadata"]["name"], objects.job.metadata.name.clone().unwrap().as_str());
        assert_eq!(cm["metadata"]["namespace"], "evals");
        assert_eq!(cm["metadata"]["labels"]["lightsout.dev/attempt"], "2");
        assert_eq!(cm["immutable"], true);
        assert_eq!(PodJob::parse(cm["data"]["job.json"].as_str().unwrap()).unwrap(), objects.pod_job);
        let template = objects.job.spec.as_ref().unwrap().template.clone();
        assert!(!template.metadata.unwrap().annotations.unwrap().contains_key(JOB_ANNOTATION));
        let volume = template.spec.unwrap().volumes.unwrap().into_iter().find(|v| v.name == "job").unwrap();
        assert_eq!(volume.config_map.unwrap().name, objects.job.metadata.name.clone().unwrap());
        // Handing the ConfigMap to the Job needs the Job's uid.
        assert!(config_map_for_job(config_map.clone(), &objects.job).is_err());
        let mut created = objects.job.clone();
        created.metadata.uid = Some("job-uid".into());
        let owned = serde_json::to_value(config_map_for_job(config_map, &created).unwrap()).unwrap();
        let owners = owned["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0]["kind"], "Job");
        assert_eq!(owners[0]["apiVersion"], "batch/v1");
        assert_eq!(owners[0]["uid"], "job-uid");
        assert_eq!(owners[0]["controller"], true);
        assert_eq!(owners[0]["name"], created.metadata.name.clone().unwrap().as_str());
    }

    #[test]
    fn a_job_json_over_one_megabyte_is_refused_naming_the_task_and_size() {
        let run = test_run();
        let variant = variants(&run.spec).into_iter().find(|v| v.harness.name == HarnessName::SingleShot).unwrap();
        let mut big = task("huge-task", Some("i:1"));
        big.diff = "x".repeat(MAX_JOB_JSON_BYTES);
        let input = TrialInput {
            run: &run,
            variant: &variant,
            task: &big,
            trial_id: "0123456789abcdef",
            context: None,
            repeat: 0,
            attempt: 1,
            prompt: "review",
        };
        let err = build_trial(&input, &settings()).unwrap_err();
        let JobError::TooLarge { task, bytes } = &err else { panic!("{err:?}") };
        assert_eq!(task, "huge-task");
        assert!(*bytes > MAX_JOB_JSON_BYTES);
        let text = err.to_string();
        assert!(text.contains("huge-task") && text.contains(&bytes.to_string()), "{text}");
        // Just under the limit is accepted.
        let size = serde_json::to_string(&pod_job(&input, &settings()).unwrap()).unwrap().len();
        let mut fits = big.clone();
        fits.diff.truncate(big.diff.len() - (size - MAX_JOB_JSON_BYTES));
        let input = TrialInput { task: &fits, ..input };
        let objects = build_trial(&input, &settings()).unwrap();
        assert_eq!(objects.config_map.unwrap().data.unwrap()["job.json"].len(), MAX_JOB_JSON_BYTES);
    }

    #[test]
    fn missing_image_secret_or_s3_store_are_errors_that_say_what_to_fix() {
        let run = test_run();
        let variant = variants(&run.spec).into_iter().find(|v| v.model.provider == "openai").unwrap();
        let no_image = task("no-image", None);
        let input = TrialInput {
            run: &run,
            variant: &variant,
            task: &no_image,
            trial_id: "0123456789abcdef",
            context: None,
            repeat: 0,
            attempt: 1,
            prompt: "review",
        };
        assert_eq!(build_trial(&input, &settings()).unwrap_err(), JobError::NoImage { task: "no-image".into() });
        let with_default = TrialSettings { default_task_image: Some("debian:bookworm".into()), ..settings() };
        let objects = build_trial(&input, &with_default).unwrap();
        assert_eq!(
            objects.job.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref(),
            Some("debian:bookworm")
        );

        let lab = variants(&run.spec).into_iter().find(|v| v.model.provider == "lab").unwrap();
        let with_image = task("t", Some("i:1"));
        let input = TrialInput { variant: &lab, task: &with_image, ..input };
        let err = build_trial(&input, &settings()).unwrap_err();
        assert_eq!(err, JobError::NoSecretRef { provider: "lab".into() });
        assert!(err.to_string().contains("spec.providers.lab.secretRef"));

        let mut file_run = test_run();
        file_run.spec.storage.results = "file://results".into();
        let input = TrialInput { run: &file_run, variant: &variant, ..input };
        assert!(matches!(build_trial(&input, &settings()), Err(JobError::NotS3 { .. })));

        let mut no_uid = test_run();
        no_uid.metadata.uid = None;
        let input = TrialInput { run: &no_uid, ..input };
        assert_eq!(build_trial(&input, &settings()).unwrap_err(), JobError::MissingMetadata("metadata.uid"));
    }
}
