//! What the summary reads of one planned trial ([`TrialRecord`]) and of each stored attempt
//! ([`HeldResult`]): the scan of the store (`stored.rs`) fills them, the summary (`summary.rs`)
//! and the controller's scheduling read them. Kept small, since a controller holds one per
//! attempt of a 100,000-trial run.

use std::sync::Arc;

use lightsout_api::{ContextConfig, Track};
use lightsout_model::Usage;
use lightsout_swe_prbench::harness::EvalInput;

use crate::scoring::Verdicts;
use crate::trial::{Outcome, TrajectorySummary, TrialResult};

/// One planned trial as the summary sees it.
#[derive(Debug, Clone)]
pub struct TrialRecord {
    pub variant: u32,
    pub task: String,
    /// The trial's configuration of the `matrix.contextConfigs` axis; `None` without the axis
    /// (then [`crate::summary::ScoringSettings::context_config`] is every trial's).
    pub context_config: Option<ContextConfig>,
    pub repeat: u32,
    pub track: Option<Track>,
    pub difficulty: Option<String>,
    /// The task's language, as the dataset gives it.
    pub language: Option<String>,
    /// Ground-truth items of the task (SWE-PRBench: human comments, the PR's weight).
    pub truth_items: u32,
    /// SWE-PRBench: the trial's evaluation input without the context render and the diff (what
    /// the record of a trial without an answer needs; see [`swe_prbench_record_input`]).
    pub swe_prbench_input: Option<Box<EvalInput>>,
    /// The final attempt's result, if the trial has finished (shared with the stored run's).
    pub result: Option<Arc<HeldResult>>,
    pub verdicts: Option<Arc<Verdicts>>,
    /// What the trial's other attempts (infrastructure failures) spent: their successful model
    /// calls were paid for too. Boxed: most trials have none.
    pub earlier_attempts: Option<Box<AttemptsSpend>>,
}

/// The evaluation input a [`TrialRecord`] keeps: the full input without the two texts a record
/// without an answer never reads (the agent's context render and the diff), so that a run's
/// records stay small.
pub fn swe_prbench_record_input(mut input: EvalInput) -> Box<EvalInput> {
    input.rendered_context = String::new();
    input.diff_patch = String::new();
    Box::new(input)
}

/// Apart in [`TrialRecord::pairing_index`]: past any repeat index (`matrix.repeats` is at most 100).
const PAIRING_CONTEXT_STRIDE: u32 = 1 << 24;

impl TrialRecord {
    /// What tells this trial from the other trials of its task and variant when trials are paired
    /// by (task, index): its repeat, and its configuration of the context axis. The trials of a
    /// task in all its configurations stay one bootstrap cluster — the PR is the unit resampled —
    /// and each pairs with the same configuration only.
    pub fn pairing_index(&self) -> u32 {
        let context = match self.context_config {
            None => 0,
            Some(ContextConfig::ConfigA) => 1,
            Some(ContextConfig::ConfigB) => 2,
            Some(ContextConfig::ConfigC) => 3,
        };
        context * PAIRING_CONTEXT_STRIDE + self.repeat
    }
}

/// Model usage and cost over some attempts of a trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptsSpend {
    pub usage: Usage,
    pub cost_usd: f64,
    /// Model calls of attempts whose cost is unknown (no price).
    pub unpriced_calls: u32,
    /// Runs of the trial's attempts that were preempted and run again
    /// ([`crate::interruption`]).
    pub preempted_runs: u32,
}

/// What scheduling and the summary read of an attempt's `result.json`, held in memory for every
/// attempt of a run (a controller holds 100,000 of them): about a fifth of a [`TrialResult`].
/// The ids it leaves out are the planned trial's; anything else is read from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldResult {
    pub attempt: u32,
    pub outcome: Outcome,
    /// An error's leading reason with its colon (`Evicted:` of `Evicted: the node …`), which
    /// tells an infrastructure failure's kind; the rest of the text is in the store.
    pub error: Option<Box<str>>,
    pub finished_at: chrono::DateTime<chrono::Utc>,
    pub duration_ms: u64,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub model_calls: u32,
    pub findings: u32,
    pub review_words: u32,
    pub scripted_model: bool,
    /// The trajectory in brief (agentic harnesses); boxed, so a result without one costs a
    /// pointer.
    pub trajectory: Option<Box<HeldTrajectory>>,
}

/// What the summary reads of a result's [`TrajectorySummary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldTrajectory {
    pub turns: u32,
    pub tool_calls: u32,
    /// Tool calls by action kind, in [`lightsout_trajectory::Action::ALL`]'s order; a kind this
    /// version does not know counts as `other`.
    pub action_mix: [u32; 6],
}

impl From<&TrajectorySummary> for HeldTrajectory {
    fn from(summary: &TrajectorySummary) -> HeldTrajectory {
        use lightsout_trajectory::Action;
        let mut action_mix = [0u32; 6];
        for (kind, calls) in &summary.action_mix {
            let i = Action::ALL.iter().position(|a| a.as_str() == kind).unwrap_or(Action::ALL.len() - 1);
            action_mix[i] = action_mix[i].saturating_add(*calls);
        }
        HeldTrajectory { turns: summary.turns, tool_calls: summary.tool_calls, action_mix }
    }
}

impl From<&TrialResult> for HeldResult {
    fn from(result: &TrialResult) -> HeldResult {
        HeldResult {
            attempt: result.attempt,
            outcome: result.outcome,
            error: result.error.as_deref().map(|error| {
                let keep = error.find(':').map_or(0, |i| i + 1);
                Box::from(&error[..keep])
            }),
            finished_at: result.finished_at,
            duration_ms: result.duration_ms,
            usage: result.usage,
            cost_usd: result.cost_usd,
            model_calls: result.model_calls,
            findings: result.findings,
            review_words: result.review_words,
            scripted_model: result.scripted_model,
            trajectory: result.trajectory.as_ref().map(|t| Box::new(HeldTrajectory::from(t))),
        }
    }
}
