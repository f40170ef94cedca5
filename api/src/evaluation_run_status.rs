//! An EvaluationRun's `.status`: conditions, trial counts, spend and per-variant figures, as the
//! controller writes them (`controller/src/status.rs` computes them).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;

/// Condition types of an EvaluationRun.
pub mod condition {
    pub const ACCEPTED: &str = "Accepted";
    pub const PROGRESSING: &str = "Progressing";
    pub const COMPLETE: &str = "Complete";
    pub const FAILED: &str = "Failed";
    pub const SUSPENDED: &str = "Suspended";
    pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";
    pub const ALL: [&str; 6] = [ACCEPTED, PROGRESSING, COMPLETE, FAILED, SUSPENDED, BUDGET_EXCEEDED];
}

/// Most variants listed in status; all of them are in `summary.json`.
pub const MAX_STATUS_VARIANTS: usize = 32;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::kubernetes_formats)]
pub struct EvaluationRunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Accepted, Progressing, Complete, Failed, Suspended, BudgetExceeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub trials: TrialCounts,
    #[serde(default)]
    pub spend: Spend,
    /// The best variant's headline score, e.g. `recall@5=0.62 gpt-5.1/high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    /// At most 32 variants, best first; `summary.json` has all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub variants: Vec<VariantStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// How the run's trial Jobs wait for their queue (`spec.queueName`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueStatus>,
}

/// Waiting for the queue (Kueue), apart from running: admissions the controller saw (each
/// counted once; one made while no controller ran is not seen), and since when the
/// longest-waiting trial Job has waited.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = schema::kubernetes_formats)]
pub struct QueueStatus {
    /// Trial Jobs admitted (a Job admitted again after a preemption counts again).
    pub admitted: i64,
    /// Their waits, from the Job's creation to its (latest) admission, in whole seconds: the
    /// sum, the mean and the longest.
    pub total_wait_seconds: i64,
    pub mean_wait_seconds: i64,
    pub longest_wait_seconds: i64,
    /// The creation time of the trial Job waiting longest now; absent when none waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_waiting_since: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialCounts {
    pub total: i64,
    /// Not started yet.
    pub pending: i64,
    /// With a Job that runs (admitted by its queue, when there is one).
    pub running: i64,
    /// With a Job that waits for its queue (Kueue) to admit it.
    #[serde(default)]
    pub queued: i64,
    pub succeeded: i64,
    /// Trials whose agent failed (timeout, crash, budget): a result, not retried.
    pub failed: i64,
    /// Trials that ran out of infrastructure retries; never scored.
    pub infra_failed: i64,
    /// Runs of trial attempts that their queue (Kueue) preempted and that ran again: not
    /// failures, and no retry spent; their spend is in `spend` (counted once each attempt ends).
    #[serde(default)]
    pub preempted: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    #[serde(rename = "agentUSD")]
    pub agent_usd: f64,
    #[serde(rename = "judgeUSD")]
    pub judge_usd: f64,
    #[serde(rename = "totalUSD")]
    pub total_usd: f64,
    /// Calls whose model has no price in the pricing table; their cost is not in the totals.
    #[serde(default)]
    pub unpriced_calls: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariantStatus {
    pub name: String,
    pub succeeded: i64,
    pub failed: i64,
    pub infra_failed: i64,
    /// recall@k by k, over all tracks, as a decimal string.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recall: BTreeMap<String, String>,
    #[serde(rename = "costUSD")]
    pub cost_usd: f64,
}
