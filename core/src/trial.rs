//! A trial's result record (`result.json`): what the worker reports, the controller reads from a
//! pod's termination message, and the summary aggregates.

use serde::{Deserialize, Serialize};

use lightsout_api::{HarnessRef, ReasoningEffort};
use lightsout_model::Usage;

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
    /// The trial's configuration of the `matrix.contextConfigs` axis, part of its identity
    /// (see [`crate::plan`]); absent without the axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_config: Option<lightsout_api::ContextConfig>,
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
    /// How the agent was isolated from other trials and the host (agentic harnesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
}

/// The protections an agent ran under, and those that could not be applied, with the reason
/// (e.g. a namespace that needs root, in a pod).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// The shape of an agent's work: turns, tool calls and what kind of action each was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrajectorySummary {
    pub turns: u32,
    pub tool_calls: u32,
    /// Tool calls by action (`read`, `probe`, `write`, `execute`, `git`, `other`).
    pub action_mix: std::collections::BTreeMap<String, u32>,
    /// Tool calls whose result (exit code or error flag) the harness's own session log records.
    #[serde(default)]
    pub confirmed_tool_calls: u32,
    /// Tool calls that failed (a non-zero exit code, or a result the harness marked an error),
    /// by the harness's session log.
    #[serde(default)]
    pub failed_tool_calls: u32,
    /// Tool calls only the harness's session log shows (not visible in the proxy log).
    #[serde(default)]
    pub harness_only_tool_calls: u32,
    /// What could not be read while building the trajectory: a missing or unreadable session
    /// log, skipped lines (the first few, each naming its file and line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The most a pod's termination message holds.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;

/// A trial attempt's result in brief: what the controller reads from a pod's termination
/// message. The full record is `result.json` in the results store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialSummary {
    pub trial_id: String,
    pub attempt: u32,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    pub model_calls: u32,
    pub findings: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_version: Option<String>,
}

impl TrialSummary {
    pub fn of(result: &TrialResult) -> TrialSummary {
        TrialSummary {
            trial_id: result.trial_id.clone(),
            attempt: result.attempt,
            outcome: result.outcome,
            error: result.error.clone(),
            usage: result.usage,
            cost_usd: result.cost_usd,
            duration_ms: result.duration_ms,
            model_calls: result.model_calls,
            findings: result.findings,
            harness_version: result.harness_version_reported.clone(),
        }
    }

    /// The summary as JSON within [`TERMINATION_MESSAGE_LIMIT`] bytes: the error message, the
    /// only unbounded field, is shortened (at a character boundary) until it fits.
    pub fn to_termination_message(&self) -> String {
        let mut summary = self.clone();
        loop {
            let json = serde_json::to_string(&summary).expect("a summary serialises");
            let Some(error) = summary.error.as_mut().filter(|_| json.len() > TERMINATION_MESSAGE_LIMIT) else {
                return json;
            };
            let keep = error.len().saturating_sub(json.len() - TERMINATION_MESSAGE_LIMIT + 16);
            let mut cut = keep.min(error.len());
            while !error.is_char_boundary(cut) {
                cut -= 1;
            }
            error.truncate(cut);
            error.push('…');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_trial_results_still_read() {
        let old = r#"{"turns": 3, "tool_calls": 2, "action_mix": {"write": 1, "git": 1}}"#;
        let summary: TrajectorySummary = serde_json::from_str(old).unwrap();
        assert_eq!((summary.turns, summary.confirmed_tool_calls, summary.failed_tool_calls), (3, 0, 0));
        assert!(summary.warnings.is_empty());
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["confirmed_tool_calls"], 0);
        assert!(json.get("warnings").is_none(), "no empty warnings: {json}");
    }

    #[test]
    fn the_termination_message_always_fits() {
        let summary = TrialSummary {
            trial_id: "0123456789abcdef".into(),
            attempt: 3,
            outcome: Outcome::AgentFailed,
            error: Some("é\"\\\n".repeat(5000)),
            usage: Usage { input_tokens: u64::MAX, output_tokens: u64::MAX, ..Default::default() },
            cost_usd: Some(1e300),
            duration_ms: u64::MAX,
            model_calls: u32::MAX,
            findings: u32::MAX,
            harness_version: Some("1.2.3".into()),
        };
        let message = summary.to_termination_message();
        assert!(message.len() <= TERMINATION_MESSAGE_LIMIT, "{}", message.len());
        let back: TrialSummary = serde_json::from_str(&message).unwrap();
        assert_eq!(back.outcome, Outcome::AgentFailed);
        assert!(back.error.unwrap().ends_with('…'));
        let short = TrialSummary { error: Some("boom".into()), ..summary };
        assert!(short.to_termination_message().contains("\"boom\""));
    }
}
