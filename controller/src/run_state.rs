//! What the controller keeps per run between reconciles, all of it rebuildable: the run's spec
//! dereferenced ([`PreparedRun`]: dataset, plan, results store, judges) and what its results
//! store holds ([`StoredRun`]). A restarted controller starts with an empty [`RunState`] and
//! rebuilds both from the spec, the API and the store ([`crate::prepare`]), so nothing here is
//! a source of truth.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use lightsout_api::EvaluationRunSpec;
use lightsout_core::dataset::LoadedTask;
use lightsout_core::plan::Plan;
use lightsout_core::results::RunLayout;
use lightsout_core::scoring::Scorer;
use lightsout_core::stored::StoredRun;
use lightsout_core::summary::{RunSummary, ScoringSettings};
use lightsout_s3::Results;

/// The run's spec, dereferenced for one generation.
pub struct PreparedRun {
    pub generation: Option<i64>,
    pub tasks: Vec<LoadedTask>,
    pub skipped_lines: u32,
    pub plan: Plan,
    /// Trial id → index into `plan.trials`.
    pub trial_index: HashMap<String, usize>,
    pub store: Results,
    pub layout: RunLayout,
    /// `None` when the spec has no judges: reviews are collected, not scored.
    pub scorer: Option<Scorer>,
    pub scoring: ScoringSettings,
    /// The hash of the whole spec of this generation, as `run.json` and `summary.json` record it.
    pub spec_hash: String,
}

impl PreparedRun {
    pub fn max_attempts(&self, spec: &EvaluationRunSpec) -> u32 {
        spec.retries.max(0) as u32 + 1
    }
}

/// Per run, between reconciles.
#[derive(Default)]
pub struct RunState {
    pub prepared: Option<Arc<PreparedRun>>,
    /// The results store's content as last read, updated as the controller writes.
    pub stored: Option<StoredRun>,
    /// Trials (by [`counted_key`] of their id) whose final result has been counted in the
    /// metrics by this process: 8 bytes a trial rather than a copy of its id.
    pub counted: HashSet<u64>,
    pub summary: Option<RunSummary>,
    /// Results or verdicts changed since `summary` was computed.
    pub summary_dirty: bool,
    pub summary_computed_at: Option<Instant>,
    /// The generation whose NetworkPolicy was applied.
    pub network_generation: Option<i64>,
    /// After a (re)start, the ConfigMaps of already active Jobs are re-created once (a crash
    /// between creating a Job and its ConfigMap would leave its pod waiting for it).
    pub config_maps_checked: bool,
    /// When a trial last started or reached its final result (this process's first reconcile of
    /// the run counts as progress): the `lightsout_run_last_progress_timestamp_seconds` metric.
    pub last_progress: Option<chrono::DateTime<chrono::Utc>>,
    /// Queue admissions (Job name, admission time) already in the queue-wait histogram; `None`
    /// until this process's first look, which takes what it finds as seen (admitted before it
    /// started, or counted by the process before it).
    pub admissions_seen: Option<HashSet<(String, i64)>>,
    /// `status.queue`'s counts as this process last wrote them; `None` until its first look,
    /// which takes them from the status it finds.
    pub queue_counted: Option<crate::status::QueueCounts>,
}

/// The key of a trial id in [`RunState::counted`].
pub fn counted_key(trial_id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    trial_id.hash(&mut hasher);
    hasher.finish()
}
