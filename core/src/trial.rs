//! A trial's result record (`result.json`): what the worker reports, the controller reads from a
//! pod's termination message, and the summary aggregates.

use serde::{Deserialize, Serialize};

use crate::api::{HarnessRef, ReasoningEffort};
use crate::model::Usage;

/// How a trial attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The agent produced a review.
    Ok,
    /// The agent (harness or model) failed: a result, scored as no finding, never retried.
    AgentFailed,
    /// The agent ran out of time: a result, scored as no finding, never retried.
    TimedOut,
    /// The trial's token or USD limit stopped the agent: a result, scored as no finding.
    BudgetExceeded,
    /// Something outside the agent failed (provider 5xx, storage, eviction): retried, and
    /// never scored.
    InfraFailed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::AgentFailed => "agent-failed",
            Outcome::TimedOut => "timed-out",
            Outcome::BudgetExceeded => "budget-exceeded",
            Outcome::InfraFailed => "infra-failed",
        }
    }

    /// Whether the trial counts in scores: every outcome the agent is answerable for.
    pub fn is_scored(self) -> bool {
        self != Outcome::InfraFailed
    }
}

pub const RESULT_SCHEMA: &str = "lightsout.dev/trial-result/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub schema: String,
    pub run: String,
    pub variant_id: String,
    pub variant: String,
    pub trial_id: String,
    pub task_id: String,
    pub repeat: u32,
    pub attempt: u32,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The harness as configured, and the version it reported when it ran.
    pub harness: HarnessRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_version_reported: Option<String>,
    pub model: String,
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// SHA-256 of the exact prompt given to the agent.
    pub prompt_sha256: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub finished_at: chrono::DateTime<chrono::Utc>,
    pub duration_ms: u64,
    /// The agent's model usage over all its calls, retries included.
    pub usage: Usage,
    /// `None` when the model has no price.
    pub cost_usd: Option<f64>,
    pub model_calls: u32,
    pub findings: u32,
    pub review_words: u32,
    /// Whether the model was the built-in scripted server rather than a real provider.
    #[serde(default)]
    pub scripted_model: bool,
    /// What the agent did, from its trajectory (agentic harnesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<TrajectorySummary>,
}

/// The shape of an agent's work: turns, tool calls and what kind of action each was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrajectorySummary {
    pub turns: u32,
    pub tool_calls: u32,
    /// Tool calls by action (`read`, `probe`, `write`, `execute`, `git`, `other`).
    pub action_mix: std::collections::BTreeMap<String, u32>,
}
