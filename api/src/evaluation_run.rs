//! The `EvaluationRun` custom resource (`lightsout.dev/v1alpha1`).
//!
//! The Rust types are the single source of truth: `lightsout crdgen` derives
//! `crds/evaluationrun.yaml` from them, and the CEL rules declared here are evaluated both by
//! the API server at apply time and by the CLI before a local run (see [`crate::validate`]).

use std::collections::BTreeMap;

use super::evaluation_run_status::EvaluationRunStatus;
use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{self, *};

/// Regex an exact harness version must match: digits-and-dots with an optional pre-release or
/// build suffix. Ranges (`^1.2`, `~1`, `1.x`, `*`) and tags (`latest`, `next`) do not match.
pub const PINNED_VERSION_PATTERN: &str = r"^v?[0-9]+(\.[0-9]+){0,3}([-+][0-9A-Za-z][0-9A-Za-z.-]*)?$";

/// The literal of [`AGENT_TIMEOUT_MAX`], for the CRD rule built with `concat!`.
macro_rules! agent_timeout_max {
    () => {
        "24h"
    };
}

/// The literal of [`DURATION_PATTERN`], for the CRD rule built with `concat!`. At most six digits
/// a part keeps every total far from overflowing (and lets CEL's `duration()` read it safely).
macro_rules! duration_pattern {
    () => {
        "^([0-9]{1,6}h)?([0-9]{1,6}m)?([0-9]{1,6}s)?$"
    };
}

/// Regex a duration field must match (`90s`, `30m`, `1h30m`).
pub const DURATION_PATTERN: &str = duration_pattern!();

/// The longest `agent.timeout`. The CRD's rule and `lightsout validate`
/// ([`crate::duration::parse_timeout`]) both refuse longer ones.
pub const AGENT_TIMEOUT_MAX: &str = agent_timeout_max!();

/// What to evaluate, on which tasks, with which models and judges, within which limits.
// Several `validation = …` entries in one x_kube attribute are how kube-derive lists CEL rules.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "lightsout.dev",
    version = "v1alpha1",
    kind = "EvaluationRun",
    plural = "evaluationruns",
    shortname = "evalrun",
    category = "lightsout",
    namespaced,
    status = "EvaluationRunStatus",
    derive = "PartialEq",
    printcolumn(name = "Complete", type_ = "string", json_path = ".status.conditions[?(@.type==\"Complete\")].status"),
    printcolumn(name = "Succeeded", type_ = "integer", json_path = ".status.trials.succeeded"),
    printcolumn(name = "Total", type_ = "integer", json_path = ".status.trials.total"),
    printcolumn(name = "Queued", type_ = "integer", priority = 1, json_path = ".status.trials.queued"),
    printcolumn(name = "Preempted", type_ = "integer", priority = 1, json_path = ".status.trials.preempted"),
    printcolumn(name = "Spend USD", type_ = "number", json_path = ".status.spend.totalUSD"),
    printcolumn(name = "Score", type_ = "string", json_path = ".status.headline"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = Rule::new("self.matrix.models.all(m, m.provider in self.providers)").message("every matrix.models[].provider must be declared in spec.providers"),
    validation = Rule::new("!has(self.judges) || !has(self.judges.panel) || self.judges.panel.all(j, j.provider in self.providers)").message("every judges.panel[].provider must be declared in spec.providers"),
    validation = Rule::new("has(self.agent.harness) || has(self.matrix.harnesses)").message("set agent.harness or matrix.harnesses"),
    validation = Rule::new("!has(self.judges) || !has(self.judges.protocol) || self.judges.protocol != 'swe-prbench' || self.dataset.format == 'swe-prbench'").message("judges.protocol swe-prbench scores against human review comments: it needs dataset.format swe-prbench"),
    validation = Rule::new("!has(self.judges) || !has(self.judges.swePrbench) || !has(self.judges.swePrbench.embeddings) || self.judges.swePrbench.embeddings.provider in self.providers").message("judges.swePrbench.embeddings.provider must be declared in spec.providers"),
    validation = Rule::new("!has(self.matrix.contextConfigs) || self.dataset.format == 'swe-prbench'").message("matrix.contextConfigs: context configurations are SWE-PRBench's (contexts/config_X/ beside the tasks): it needs dataset.format swe-prbench"),
    validation = Rule::new("!has(self.matrix.contextConfigs) || !has(self.agent.contextConfig)").message("set agent.contextConfig (one configuration for every trial) or matrix.contextConfigs (an axis), not both"),
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::kubernetes_formats)]
pub struct EvaluationRunSpec {
    /// The tasks to evaluate on.
    pub dataset: DatasetSpec,
    /// How each trial's agent runs; matrix axes override the matching field.
    pub agent: AgentSpec,
    /// The axes whose cross product forms the variants, and the repeats of each.
    pub matrix: MatrixSpec,
    /// The judge panel that votes on findings.
    #[serde(default)]
    pub judges: JudgesSpec,
    /// Model endpoints by name, referenced by `matrix.models[].provider` and `judges.panel[].provider`.
    #[serde(default)]
    #[schemars(extend("maxProperties" = PROVIDERS_MAX))]
    pub providers: BTreeMap<String, ProviderSpec>,
    /// Where results go.
    pub storage: StorageSpec,
    /// Trials running at once.
    #[serde(default = "default_parallelism")]
    #[x_kube(validation = Rule::new("self >= 1").message("parallelism must be at least 1"))]
    pub parallelism: i32,
    /// Attempts for infrastructure failures (image pull, eviction, storage outage, provider 5xx).
    /// Agent failures are a trial's result and are never retried.
    #[serde(default = "default_retries")]
    #[x_kube(validation = Rule::new("self >= 0 && self <= 20").message("retries must be between 0 and 20"))]
    pub retries: i32,
    /// Spending limits.
    #[serde(default)]
    pub budget: BudgetSpec,
    /// Stops new trials from starting; running trials finish.
    #[serde(default)]
    pub suspend: bool,
    /// Kueue LocalQueue to submit trial Jobs to (its name goes into a label: at most 63 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = LABEL_MAX))]
    pub queue_name: Option<String>,
    /// The PriorityClass of every trial pod: the scheduler's priority and, under Kueue, the
    /// priority of each trial's workload (who is admitted first, who may preempt whom).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = NAME_MAX))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')").message("priorityClassName must name a PriorityClass: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"))]
    pub priority_class_name: Option<String>,
    /// Where trial pods may be scheduled.
    #[serde(default)]
    pub placement: PlacementSpec,
}

fn default_parallelism() -> i32 {
    4
}
fn default_retries() -> i32 {
    2
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub enum DatasetFormat {
    /// SWE-PRBench records: human review comments as ground truth.
    #[serde(rename = "swe-prbench")]
    SwePrBench,
    /// CRBugBench-style tasks: ground-truth bugs per reviewed change.
    #[serde(rename = "crbugbench")]
    CrBugBench,
    /// Lightsout's own task records, one JSON object per line.
    #[serde(rename = "jsonl")]
    Jsonl,
}

impl DatasetFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetFormat::SwePrBench => "swe-prbench",
            DatasetFormat::CrBugBench => "crbugbench",
            DatasetFormat::Jsonl => "jsonl",
        }
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DatasetSpec {
    pub format: DatasetFormat,
    /// `file://path` (relative paths are taken from the current directory) or `s3://bucket/key`.
    /// For `swe-prbench`, the path of `tasks.jsonl`; annotation and context files are looked up
    /// beside it (`annotations/<task_id>_human.json`, `contexts/config_X/<task_id>.json`).
    #[x_kube(validation = Rule::new("self.startsWith('file://') || self.startsWith('s3://')").message("dataset.source must start with file:// or s3://"))]
    #[schemars(length(max = URL_MAX))]
    pub source: String,
    /// The S3 endpoint and credentials for an `s3://` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Connection>,
    /// Keeps only the tasks that match every non-empty list.
    #[serde(default)]
    pub filter: TaskFilter,
    /// A seeded random sample of the filtered tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<SampleSpec>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskFilter {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = TASK_IDS_MAX), inner(length(max = NAME_MAX)))]
    pub ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = FILTER_VALUES_MAX), inner(length(max = WORD_MAX)))]
    pub languages: Vec<String>,
    /// SWE-PRBench difficulty (`Type1_Direct`, `Type2_Contextual`, `Type3_Latent_Candidate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = FILTER_VALUES_MAX), inner(length(max = WORD_MAX)))]
    pub difficulties: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = TRACKS_MAX))]
    pub tracks: Vec<Track>,
}

impl TaskFilter {
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.languages.is_empty() && self.difficulties.is_empty() && self.tracks.is_empty()
    }
}

/// When a CRBugBench bug was found: in review before merge, or by a later fix.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub enum Track {
    #[serde(rename = "pre-merge")]
    PreMerge,
    #[serde(rename = "post-merge")]
    PostMerge,
}

impl Track {
    pub fn as_str(self) -> &'static str {
        match self {
            Track::PreMerge => "pre-merge",
            Track::PostMerge => "post-merge",
        }
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampleSpec {
    /// The sample size: tasks to keep; all of them when fewer match. (Called `n` before: a bare
    /// `n` is the boolean false to YAML 1.1, which Kubernetes and kubectl read.)
    #[x_kube(validation = Rule::new("self >= 1").message("dataset.sample.size must be at least 1"))]
    pub size: i64,
    /// The same seed and dataset always give the same sample.
    #[serde(default)]
    pub seed: i64,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// The harness for every variant, unless `matrix.harnesses` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<HarnessRef>,
    /// The review prompt for every variant, unless `matrix.prompts` is set.
    #[serde(default = "PromptRef::default_preset")]
    pub prompt: PromptRef,
    /// The SWE-PRBench context configuration given to the agent in every trial, unless
    /// `matrix.contextConfigs` is set (not both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_config: Option<ContextConfig>,
    /// Wall-clock limit of one trial (`90s`, `30m`, `1h30m`).
    #[serde(default = "default_timeout")]
    #[x_kube(validation = Rule::new(concat!("self != '' && self.matches('", duration_pattern!(), "') && duration(self) > duration('0s') && duration(self) <= duration('", agent_timeout_max!(), "')")).message(concat!("agent.timeout must be a duration such as 90s, 30m or 1h30m, longer than zero and at most ", agent_timeout_max!())))]
    #[schemars(length(max = DURATION_MAX))]
    pub timeout: String,
    /// Model turns the harness may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1").message("agent.maxTurns must be at least 1"))]
    pub max_turns: Option<i32>,
    /// The most bytes of one file the agent leaves that is read (`review.md`, its harness's
    /// session log and log files); a bigger one fails the trial as `agent-failed`. Default
    /// 8388608 (8 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1024 && self <= 1073741824").message("agent.maxFileBytes must be between 1024 and 1073741824 (1 GiB)"))]
    pub max_file_bytes: Option<i64>,
    /// The size of a trial's scratch space (its workspace, home and logs), in MiB. Under a root
    /// worker (`lightsout run` as root) a tmpfs of that size; in a pod the `sizeLimit` of its
    /// `scratch` emptyDir, past which the kubelet evicts the pod and the trial ends
    /// `agent-failed` (the agent filled its own space; not retried). Default 4096.
    #[serde(default, rename = "scratchMiB", skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 64 && self <= 1048576").message("agent.scratchMiB must be between 64 and 1048576 (1 TiB)"))]
    pub scratch_mib: Option<i64>,
    /// CPU and memory of each trial's agent container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema::resources)]
    pub resources: Option<ResourceRequirements>,
}

/// A trial's scratch size when neither `spec.agent.scratchMiB` nor the worker's
/// `LIGHTSOUT_SCRATCH_MIB` sets one.
pub const DEFAULT_SCRATCH_MIB: u64 = 4096;

impl AgentSpec {
    /// `scratchMiB`, or [`DEFAULT_SCRATCH_MIB`].
    pub fn scratch_mib(&self) -> u64 {
        self.scratch_mib.map_or(DEFAULT_SCRATCH_MIB, |m| m.max(1) as u64)
    }
}

fn default_timeout() -> String {
    "30m".to_string()
}

/// A harness at an exact version.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct HarnessRef {
    pub name: HarnessName,
    /// An exact version (`0.63.0`), never a tag or range: the run must be reproducible.
    #[x_kube(validation = Rule::new("self.matches('^v?[0-9]+(\\\\.[0-9]+){0,3}([-+][0-9A-Za-z][0-9A-Za-z.-]*)?$')").message("harness version must be pinned to an exact version such as 1.2.3 (not latest, a tag or a range)"))]
    #[schemars(length(max = VERSION_MAX))]
    pub version: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub enum HarnessName {
    /// Built in: one model call over the task's context, as SWE-PRBench does.
    #[serde(rename = "single-shot")]
    SingleShot,
    /// `@openai/codex` from npm.
    #[serde(rename = "codex")]
    Codex,
    /// `@anthropic-ai/claude-code` from npm.
    #[serde(rename = "claude-code")]
    ClaudeCode,
    /// `@github/copilot` from npm.
    #[serde(rename = "copilot-cli")]
    CopilotCli,
    /// `mini-swe-agent` from PyPI.
    #[serde(rename = "mini-swe-agent")]
    MiniSweAgent,
}

impl HarnessName {
    pub fn as_str(self) -> &'static str {
        match self {
            HarnessName::SingleShot => "single-shot",
            HarnessName::Codex => "codex",
            HarnessName::ClaudeCode => "claude-code",
            HarnessName::CopilotCli => "copilot-cli",
            HarnessName::MiniSweAgent => "mini-swe-agent",
        }
    }
}

/// A review prompt: a named preset or inline text, exactly one of them.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.preset) != has(self.inline)").message("a prompt sets exactly one of preset and inline"))]
pub struct PromptRef {
    /// `default` (ranked findings in review.md) or `swe-prbench` (a JSON array of findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<PromptPreset>,
    /// The prompt's full text (at most 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = PROMPT_MAX))]
    pub inline: Option<String>,
}

impl PromptRef {
    pub fn default_preset() -> Self {
        PromptRef { preset: Some(PromptPreset::Default), inline: None }
    }
    /// A short, stable label for variant names.
    pub fn label(&self) -> String {
        match (&self.preset, &self.inline) {
            (Some(p), _) => p.as_str().to_string(),
            (None, Some(text)) => format!("inline-{}", &crate::hash::short_hash(text.as_bytes())[..8]),
            (None, None) => "default".to_string(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub enum PromptPreset {
    #[serde(rename = "default")]
    Default,
    #[serde(rename = "swe-prbench")]
    SwePrBench,
}

impl ScoringProtocol {
    /// As the spec, `verdicts.json` and `summary.json` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoringProtocol::CrBugBench => "crbugbench",
            ScoringProtocol::SwePrBench => "swe-prbench",
        }
    }
}

impl PromptPreset {
    pub fn as_str(self) -> &'static str {
        match self {
            PromptPreset::Default => "default",
            PromptPreset::SwePrBench => "swe-prbench",
        }
    }
}

/// SWE-PRBench context configurations: A = the diff, B = plus changed files, C = plus related files.
// The length bound lets the API server price CEL rules over these values (the uniqueness rule of
// `matrix.contextConfigs` is over budget without it).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[schemars(extend("maxLength" = 8))]
pub enum ContextConfig {
    #[serde(rename = "config_A")]
    ConfigA,
    #[serde(rename = "config_B")]
    ConfigB,
    #[serde(rename = "config_C")]
    ConfigC,
}

impl ContextConfig {
    pub fn as_str(self) -> &'static str {
        match self {
            ContextConfig::ConfigA => "config_A",
            ContextConfig::ConfigB => "config_B",
            ContextConfig::ConfigC => "config_C",
        }
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MatrixSpec {
    /// Models under evaluation.
    #[x_kube(validation = Rule::new("size(self) >= 1").message("matrix.models must list at least one model"))]
    #[schemars(length(max = MODELS_MAX))]
    pub models: Vec<ModelRef>,
    /// Reasoning efforts; when absent, each model's provider default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) >= 1").message("matrix.reasoningEfforts, when set, must not be empty"))]
    #[schemars(length(max = EFFORTS_MAX))]
    pub reasoning_efforts: Option<Vec<ReasoningEffort>>,
    /// Prompts; when absent, `agent.prompt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) >= 1").message("matrix.prompts, when set, must not be empty"))]
    #[schemars(length(max = AXIS_MAX))]
    pub prompts: Option<Vec<PromptRef>>,
    /// Harnesses; when absent, `agent.harness`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) >= 1").message("matrix.harnesses, when set, must not be empty"))]
    #[schemars(length(max = AXIS_MAX))]
    pub harnesses: Option<Vec<HarnessRef>>,
    /// SWE-PRBench context configurations, each given to the agent in its own trials of every
    /// (variant, task): one run gives the benchmark's per-configuration table (each variant's
    /// `swe_prbench.report.by_config`). Only with `dataset.format: swe-prbench`; instead of
    /// `agent.contextConfig`. The configuration is part of a trial's identity, not of its variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new("size(self) >= 1").message("matrix.contextConfigs, when set, must not be empty"),
        validation = Rule::new("self.all(c, self.exists_one(d, d == c))").message("matrix.contextConfigs must not list a configuration twice"),
    )]
    #[schemars(length(max = CONTEXT_CONFIGS_MAX))]
    pub context_configs: Option<Vec<ContextConfig>>,
    /// Trials per (variant, task[, context configuration]).
    #[serde(default = "default_repeats")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 100").message("matrix.repeats must be between 1 and 100"))]
    pub repeats: i32,
}

fn default_repeats() -> i32 {
    1
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    /// The provider's model name, e.g. `gpt-5.1` or `claude-sonnet-4-5`.
    #[x_kube(validation = Rule::new("self != ''").message("a model name must not be empty"))]
    #[schemars(length(max = MODEL_NAME_MAX))]
    pub name: String,
    /// A key of `spec.providers`.
    #[schemars(length(max = LABEL_MAX))]
    pub provider: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::Xhigh => "xhigh",
        }
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JudgesSpec {
    /// The judges; best from different model families.
    #[serde(default)]
    #[schemars(length(max = PANEL_MAX))]
    pub panel: Vec<ModelRef>,
    /// How the panel's votes decide a match.
    #[serde(default)]
    pub vote: VoteRule,
    /// The cut-offs of recall@k.
    #[serde(default = "default_k")]
    #[x_kube(validation = Rule::new("size(self) >= 1 && self.all(k, k >= 1)").message("judges.k must list cut-offs of at least 1"))]
    #[schemars(length(max = CUTOFFS_MAX))]
    pub k: Vec<i32>,
    /// Which protocol scores the reviews; by default the dataset format's own (SWE-PRBench
    /// datasets: `swe-prbench`, all others: `crbugbench`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ScoringProtocol>,
    /// Settings of the SWE-PRBench protocol.
    #[serde(default)]
    pub swe_prbench: SwePrBenchSpec,
    /// Bootstrap confidence intervals of every headline score.
    #[serde(default)]
    pub bootstrap: BootstrapSpec,
}

impl Default for JudgesSpec {
    fn default() -> Self {
        JudgesSpec {
            panel: Vec::new(),
            vote: VoteRule::default(),
            k: default_k(),
            protocol: None,
            swe_prbench: SwePrBenchSpec::default(),
            bootstrap: BootstrapSpec::default(),
        }
    }
}

impl JudgesSpec {
    /// The protocol in force for a dataset of `format`.
    pub fn protocol_for(&self, format: DatasetFormat) -> ScoringProtocol {
        self.protocol.unwrap_or(match format {
            DatasetFormat::SwePrBench => ScoringProtocol::SwePrBench,
            _ => ScoringProtocol::CrBugBench,
        })
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ScoringProtocol {
    /// Ranked findings; the panel votes per (finding, bug); recall@k.
    #[serde(rename = "crbugbench")]
    CrBugBench,
    /// Labelled comments (CONFIRMED/PLAUSIBLE/FABRICATED), one-to-one matching, composite score.
    #[serde(rename = "swe-prbench")]
    SwePrBench,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SwePrBenchSpec {
    /// Where the paper's text and its released harness differ, which one to follow. `harness`
    /// keeps numbers comparable with the published leaderboard.
    #[serde(default)]
    pub reading: crate::protocol::ProtocolReading,
    /// An OpenAI-compatible embeddings model for comment similarity. Without one a lexical
    /// similarity is used, and every report says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<ModelRef>,
    /// Lightsout's departures from the reference harness, each off by default (README:
    /// "SWE-PRBench: where Lightsout departs").
    #[serde(default)]
    pub departures: crate::protocol::Departures,
}

impl SwePrBenchSpec {
    /// The departures in force: those set, and the paper's stage 2 under `reading: paper`.
    pub fn departures_in_force(&self) -> crate::protocol::Departures {
        let mut departures = self.departures;
        departures.paper_stage_two |= self.reading == crate::protocol::ProtocolReading::Paper;
        departures
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapSpec {
    /// Resamples of tasks (repeats of a task stay together).
    #[serde(default = "default_resamples")]
    #[x_kube(validation = Rule::new("self >= 100 && self <= 1000000").message("judges.bootstrap.resamples must be between 100 and 1000000"))]
    pub resamples: i32,
    /// The resampling seed: same results and seed, bit-for-bit the same intervals.
    #[serde(default)]
    pub seed: i64,
}

impl Default for BootstrapSpec {
    fn default() -> Self {
        BootstrapSpec { resamples: default_resamples(), seed: 0 }
    }
}

fn default_resamples() -> i32 {
    10_000
}

fn default_k() -> Vec<i32> {
    vec![1, 3, 5]
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VoteRule {
    /// More than half of the valid votes; a tie is not a match.
    #[default]
    Majority,
    /// Every valid vote.
    Unanimous,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// The API's base URL, e.g. `https://api.openai.com/v1`.
    #[x_kube(validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')").message("providers[].baseUrl must be an http:// or https:// URL"))]
    #[schemars(length(max = URL_MAX))]
    pub base_url: String,
    pub api_kind: ApiKind,
    /// The Secret key that holds the API key (in the cluster). Only the worker's metering proxy
    /// reads it; the agent never sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
    /// The environment variable that holds the API key for `lightsout run` on one machine.
    /// Defaults to `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` by API kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = NAME_MAX))]
    pub api_key_env: Option<String>,
}

impl ProviderSpec {
    pub fn api_key_env(&self) -> &str {
        match &self.api_key_env {
            Some(name) => name,
            None => self.api_kind.default_key_env(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ApiKind {
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "anthropic")]
    Anthropic,
}

impl ApiKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKind::OpenAiChat => "openai-chat",
            ApiKind::OpenAiResponses => "openai-responses",
            ApiKind::Anthropic => "anthropic",
        }
    }
    pub fn default_key_env(self) -> &'static str {
        match self {
            ApiKind::OpenAiChat | ApiKind::OpenAiResponses => "OPENAI_API_KEY",
            ApiKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

/// A key of a Secret in the run's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(max = NAME_MAX))]
    pub name: String,
    #[schemars(length(max = NAME_MAX))]
    pub key: String,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// `s3://bucket/prefix`, or `file://path` for runs on one machine.
    #[x_kube(validation = Rule::new("self.startsWith('file://') || self.startsWith('s3://')").message("storage.results must start with file:// or s3://"))]
    #[schemars(length(max = URL_MAX))]
    pub results: String,
    /// The S3 endpoint and credentials for an `s3://` results URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Connection>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Connection {
    /// Endpoint URL for S3-compatible stores; AWS when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = URL_MAX))]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = LABEL_MAX))]
    pub region: Option<String>,
    /// A Secret with `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = NAME_MAX))]
    pub secret_name: Option<String>,
    /// Path-style addressing (`ENDPOINT/BUCKET/KEY`) rather than virtual-hosted
    /// (`BUCKET.HOST/KEY`). Unset: path-style when `endpoint` is set (S3-compatible servers and
    /// in-cluster Service names need it), virtual-hosted on AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSpec {
    /// Stop starting trials when the run's spend (agents and judges) reaches this.
    #[serde(default, rename = "maxUSD", skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0.0").message("budget.maxUSD must be positive"))]
    pub max_usd: Option<f64>,
    /// Per-trial token limit; the metering proxy refuses further calls past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1").message("budget.maxTrialTokens must be at least 1"))]
    pub max_trial_tokens: Option<i64>,
    /// Per-trial USD limit; the metering proxy refuses further calls past it.
    #[serde(default, rename = "maxTrialUSD", skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0.0").message("budget.maxTrialUSD must be positive"))]
    pub max_trial_usd: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(transform = schema::node_selector)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema::tolerations)]
    pub tolerations: Vec<Toleration>,
}
