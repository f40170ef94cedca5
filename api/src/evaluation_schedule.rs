//! The `EvaluationSchedule` custom resource (`lightsout.dev/v1alpha1`): a nightly regression.
//!
//! On its cron schedule (in its time zone), and whenever its model list changes (a new release
//! to evaluate), the controller creates an `EvaluationRun` from the template with the schedule's
//! models, labels it with the schedule, and, once the run is `Complete`, compares it with its
//! baseline (the last successful run of the schedule, or a pinned run) and records the verdict
//! in the schedule's status, on the run (label `lightsout.dev/verdict`) and as a metric.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{self, *};
use super::{EvaluationRunSpec, ModelRef};

/// Label on every run a schedule creates: the schedule's name.
pub const SCHEDULE_LABEL: &str = "lightsout.dev/schedule";
/// Label on a compared run: `Regressed`, `Improved` or `NoSignificantChange`.
pub const VERDICT_LABEL: &str = "lightsout.dev/verdict";
/// Annotation on a run a schedule creates: the time it was due (RFC 3339), or why it was made.
pub const SCHEDULED_AT_ANNOTATION: &str = "lightsout.dev/scheduled-at";
/// Annotation on a run a schedule creates: the hash of the model list it evaluates.
pub const MODELS_HASH_ANNOTATION: &str = "lightsout.dev/models-hash";

#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "lightsout.dev",
    version = "v1alpha1",
    kind = "EvaluationSchedule",
    plural = "evaluationschedules",
    shortname = "evalsched",
    category = "lightsout",
    namespaced,
    status = "EvaluationScheduleStatus",
    derive = "PartialEq",
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(name = "Last run", type_ = "string", json_path = ".status.lastRun"),
    printcolumn(name = "Verdict", type_ = "string", json_path = ".status.lastComparison.verdict"),
    printcolumn(name = "Baseline", type_ = "string", json_path = ".status.lastComparison.baseline"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(
    validation = Rule::new("self.baseline.policy != 'Pinned' || has(self.baseline.run)").message("baseline.policy Pinned needs baseline.run"),
    validation = Rule::new("self.models.all(m, m.provider in self.template.spec.providers)").message("every models[].provider must be declared in template.spec.providers"),
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::kubernetes_formats)]
pub struct EvaluationScheduleSpec {
    /// Cron schedule, five fields (minute hour day-of-month month day-of-week), e.g. `0 2 * * *`.
    #[x_kube(validation = Rule::new("self.split(' ').filter(f, f != '').size() == 5").message("schedule must have five cron fields: minute hour day-of-month month day-of-week"))]
    #[schemars(length(max = CRON_MAX))]
    pub schedule: String,
    /// IANA time zone the schedule is read in, e.g. `Europe/Berlin`; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = TIME_ZONE_MAX))]
    pub time_zone: Option<String>,
    /// The models to evaluate: each run's `matrix.models`. Changing the list (a new release)
    /// starts a run at once.
    #[schemars(length(min = 1, max = SCHEDULE_MODELS_MAX))]
    pub models: Vec<ModelRef>,
    /// The run each schedule tick creates (its `matrix.models` replaced by `models`).
    pub template: RunTemplate,
    /// What each finished run is compared with.
    #[serde(default)]
    pub baseline: BaselinePolicy,
    /// How a run is judged regressed or improved.
    #[serde(default)]
    pub comparison: ComparisonSpec,
    /// What to do when a run is due while the previous one is still running.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// Finished successful runs kept (older ones are deleted; their results stay in storage).
    /// The current baseline is always kept.
    #[serde(default = "default_successful_history")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 100").message("successfulRunsHistoryLimit must be between 1 and 100"))]
    pub successful_runs_history_limit: i32,
    /// Failed runs kept.
    #[serde(default = "default_failed_history")]
    #[x_kube(validation = Rule::new("self >= 0 && self <= 100").message("failedRunsHistoryLimit must be between 0 and 100"))]
    pub failed_runs_history_limit: i32,
    /// Stops new runs from being created; running ones finish.
    #[serde(default)]
    pub suspend: bool,
}

fn default_successful_history() -> i32 {
    3
}

fn default_failed_history() -> i32 {
    1
}

/// Metadata and spec of the runs a schedule creates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    pub spec: EvaluationRunSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(transform = schema::template_labels)]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(transform = schema::template_annotations)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselinePolicy {
    #[serde(default)]
    pub policy: BaselineKind,
    /// With `Pinned`: the run every run is compared with (in the schedule's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = NAME_MAX))]
    pub run: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BaselineKind {
    /// The schedule's last run that completed before this one.
    #[default]
    LastSuccessful,
    /// `baseline.run`.
    Pinned,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonSpec {
    /// The k of recall@k the verdict is taken on; the run's largest k when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<u32>,
    /// Significance level of McNemar's exact test on hit@k.
    #[serde(default = "default_alpha")]
    #[x_kube(validation = Rule::new("self > 0.0 && self < 1.0").message("comparison.alpha must be between 0 and 1"))]
    pub alpha: f64,
    /// The smallest change in recall@k that counts, as a fraction (0.02 = two points).
    #[serde(default)]
    #[x_kube(validation = Rule::new("self >= 0.0 && self <= 1.0").message("comparison.minDelta must be between 0 and 1"))]
    pub min_delta: f64,
}

fn default_alpha() -> f64 {
    0.05
}

impl Default for ComparisonSpec {
    fn default() -> Self {
        ComparisonSpec { k: None, alpha: default_alpha(), min_delta: 0.0 }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// A due run is skipped while the previous one is running.
    #[default]
    Forbid,
    /// The running one is deleted and the due one created.
    Replace,
}

/// Schedule condition types.
pub mod schedule_condition {
    /// The spec is valid (schedule, time zone, template).
    pub const READY: &str = "Ready";
    /// The last compared run did not regress (`False` with reason `Regressed` when it did).
    pub const NO_REGRESSION: &str = "NoRegression";
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::kubernetes_formats)]
pub struct EvaluationScheduleStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, NoRegression.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// When the last due run was created (or skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// The next time a run is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<Time>,
    /// The newest run this schedule created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// The hash of the model list the last run was created for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_hash: Option<String>,
    /// Runs of this schedule not yet complete.
    #[serde(default)]
    pub active_runs: i64,
    /// The newest finished run's comparison with its baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_comparison: Option<ScheduleComparison>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleComparison {
    pub candidate: String,
    /// Empty when there was no baseline yet (the schedule's first run).
    pub baseline: String,
    /// `Regressed`, `Improved`, `NoSignificantChange`, or `NoBaseline`.
    pub verdict: String,
    /// One line per compared variant: recall@k change and McNemar's p.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The candidate's HTML report with what changed and what it cost (`report.html` beside its
    /// results, next to `comparison.json`); empty when none was written.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub report: String,
    pub compared_at: Time,
}
