//! A run of an attempt that was stopped before it finished (`interrupted-<ms>.json` beside the
//! attempt's other artifacts): the worker got SIGTERM — its pod was stopped because Kueue
//! preempted the trial's Job (which Kueue suspends and admits again later: the same attempt runs
//! again), or because the pod was evicted or deleted — and wrote down what its model calls had
//! cost so far before it exited. Without it, calls paid for by a run that never wrote
//! `result.json` would be counted nowhere.
//!
//! What the summary and the controller read of them:
//! - **spend**: every interruption's tokens and cost are added to the trial's spend, beside its
//!   attempts' (an interruption's calls are in no `result.json`, so nothing is counted twice);
//! - **preempted**: an interruption after which the same attempt ran again — Kueue preemption —
//!   is a *preempted run*, counted apart from infrastructure failures and never spending the
//!   run's `retries` (the attempt number does not change). An interruption that ended its
//!   attempt — the pod evicted, recorded by the controller as an `Evicted` infrastructure failure
//!   — is that failure, not a preemption. See [`preempted_runs`].

use serde::{Deserialize, Serialize};

use lightsout_model::Usage;

pub const INTERRUPTION_SCHEMA: &str = "lightsout.dev/interruption/v1";

/// File names start with this (then the run's start in Unix milliseconds, then `.json`).
pub const INTERRUPTION_PREFIX: &str = "interrupted-";

/// What a stopped run of an attempt spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    pub schema: String,
    pub run: String,
    pub variant_id: String,
    pub trial_id: String,
    pub attempt: u32,
    /// When this run of the attempt started, and when it was told to stop.
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub interrupted_at: chrono::DateTime<chrono::Utc>,
    /// Model usage of the calls this run finished before it stopped.
    pub usage: Usage,
    /// Over the calls whose model has a price.
    pub cost_usd: f64,
    /// Calls whose model has no price: their cost is not in `cost_usd`.
    #[serde(default)]
    pub unpriced_calls: u32,
    pub model_calls: u32,
    /// What stopped it (`SIGTERM`).
    pub signal: String,
}

impl Interruption {
    /// `interrupted-<started_at in Unix ms>.json`: one file per run of the attempt, so a second
    /// preemption of the same attempt never overwrites the first.
    pub fn file_name(&self) -> String {
        format!("{INTERRUPTION_PREFIX}{}.json", self.started_at.timestamp_millis())
    }

    /// Whether a file name within an attempt's directory is an interruption record.
    pub fn is_file_name(name: &str) -> bool {
        name.strip_prefix(INTERRUPTION_PREFIX)
            .and_then(|rest| rest.strip_suffix(".json"))
            .is_some_and(|ms| !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// Reads the interruption record stored at a path of trial `trial`, attempt `attempt`: `Err`
/// says why it cannot be counted (it does not parse, or names another trial or attempt). Such a
/// record is reported, not fatal: the spend it held is missing from the totals, and the rest of
/// the run is read (records are written by workers, never by agents).
pub fn read_record(bytes: &[u8], trial: &str, attempt: u32) -> Result<Interruption, String> {
    match serde_json::from_slice::<Interruption>(bytes) {
        Ok(record) if record.trial_id == trial && record.attempt == attempt => Ok(record),
        Ok(_) => Err("names another trial or attempt".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// How many of an attempt's `interruptions` were preemptions: runs after which the attempt ran
/// again. `ended_by_eviction`: the attempt's result is the controller's `Evicted` infrastructure
/// failure, so its last interruption is that eviction (the pod was stopped and the attempt
/// failed with it) and not a preemption.
pub fn preempted_runs(interruptions: u32, ended_by_eviction: bool) -> u32 {
    interruptions.saturating_sub(u32::from(ended_by_eviction))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_per_run_and_recognised_exactly() {
        let at = chrono::DateTime::from_timestamp_millis(1_764_700_000_123).unwrap();
        let interruption = Interruption {
            schema: INTERRUPTION_SCHEMA.into(),
            run: "r".into(),
            variant_id: "v".into(),
            trial_id: "t".into(),
            attempt: 1,
            started_at: at,
            interrupted_at: at,
            usage: Usage::default(),
            cost_usd: 0.0,
            unpriced_calls: 0,
            model_calls: 0,
            signal: "SIGTERM".into(),
        };
        assert_eq!(interruption.file_name(), "interrupted-1764700000123.json");
        assert!(Interruption::is_file_name(&interruption.file_name()));
        for other in ["interrupted-.json", "interrupted-12.json.tmp", "interrupted-1a.json", "result.json"] {
            assert!(!Interruption::is_file_name(other), "{other}");
        }
    }

    #[test]
    fn an_eviction_that_ended_the_attempt_is_not_a_preemption() {
        assert_eq!(preempted_runs(2, false), 2);
        assert_eq!(preempted_runs(2, true), 1);
        assert_eq!(preempted_runs(0, true), 0);
    }
}
