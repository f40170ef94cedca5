//! What the results store holds for a run: every attempt's `result.json` and `verdicts.json`,
//! by trial. `lightsout run` and the controller both decide from it, so a run's progress is a
//! function of what is stored, never of a process's memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Context as _;
use futures::stream::{FuturesUnordered, StreamExt};

use crate::dataset::LoadedTask;
use crate::plan::PlannedTrial;
use crate::results::{ResultStore, RunLayout};
use crate::scoring::Verdicts;
use crate::summary::TrialRecord;
use crate::trial::{Outcome, TrialResult};

/// Reads of the store in flight at once while scanning.
const SCAN_CONCURRENCY: usize = 32;

/// What the results store holds for a run, by trial.
#[derive(Debug, Default)]
pub struct StoredRun {
    pub trials: HashMap<String, StoredTrial>,
}

#[derive(Debug, Default)]
pub struct StoredTrial {
    /// Finished attempts by number.
    /// Shared with the summary's records, so a 100,000-trial run holds each result once.
    pub results: BTreeMap<u32, Arc<TrialResult>>,
    pub verdicts: BTreeMap<u32, Arc<Verdicts>>,
}

impl StoredRun {
    /// The trial's final result: its last finished attempt, unless that one was an
    /// infrastructure failure with attempts left.
    pub fn final_result(&self, trial: &str, max_attempts: u32) -> Option<&TrialResult> {
        let (number, last) = self.trials.get(trial)?.results.last_key_value()?;
        let last = last.as_ref();
        (last.outcome != Outcome::InfraFailed || *number >= max_attempts).then_some(last)
    }

    pub fn is_final(&self, trial: &str, max_attempts: u32) -> bool {
        self.final_result(trial, max_attempts).is_some()
    }

    pub fn needs_judging(&self, trial: &str, max_attempts: u32) -> bool {
        self.final_result(trial, max_attempts)
            .is_some_and(|r| r.outcome == Outcome::Ok && !self.has_verdicts(trial, r.attempt))
    }

    pub fn has_verdicts(&self, trial: &str, attempt: u32) -> bool {
        self.verdicts(trial, attempt).is_some()
    }

    pub fn verdicts(&self, trial: &str, attempt: u32) -> Option<&Verdicts> {
        self.trials.get(trial)?.verdicts.get(&attempt).map(Arc::as_ref)
    }

    /// An attempt that never wrote `result.json` was interrupted; its number is reused.
    pub fn next_attempt(&self, trial: &str) -> u32 {
        self.trials.get(trial).and_then(|t| t.results.last_key_value()).map(|(n, _)| n + 1).unwrap_or(1)
    }

    /// Mean duration of the finished, non-infrastructure attempts per (variant id, task id).
    pub fn mean_durations(&self) -> HashMap<(String, String), u64> {
        let mut sums: HashMap<(String, String), (u64, u64)> = HashMap::new();
        for result in self.trials.values().flat_map(|t| t.results.values()) {
            if result.outcome.is_scored() {
                let entry = sums.entry((result.variant_id.clone(), result.task_id.clone())).or_default();
                entry.0 += result.duration_ms;
                entry.1 += 1;
            }
        }
        sums.into_iter().map(|(key, (sum, n))| (key, sum / n)).collect()
    }

    /// Spend recorded so far: every finished attempt, infrastructure failures included (their
    /// tokens were paid for), and every verdict.
    pub fn spent_usd(&self) -> f64 {
        self.trials
            .values()
            .map(|t| {
                t.results.values().filter_map(|r| r.cost_usd).sum::<f64>()
                    + t.verdicts.values().map(|v| v.spend().cost_usd).sum::<f64>()
            })
            .sum()
    }

    /// [`StoredRun::final_result`], shared.
    fn final_result_shared(&self, trial: &str, max_attempts: u32) -> Option<Arc<TrialResult>> {
        let (number, last) = self.trials.get(trial)?.results.last_key_value()?;
        (last.outcome != Outcome::InfraFailed || *number >= max_attempts).then(|| last.clone())
    }

    /// Drops from every held result what scheduling and the summary never read (the schema, run,
    /// model and provider names, the prompt hash, the harness versions, the trajectory summary,
    /// and the text of errors after their leading reason): a controller holds every result of a
    /// 100,000-trial run. The variant, trial and task ids and every figure the summary reads stay. The stored files are untouched; anything that needs a
    /// whole result reads it from the store.
    pub fn compact(&mut self) {
        for trial in self.trials.values_mut() {
            for result in trial.results.values_mut() {
                compact_result(Arc::make_mut(result));
            }
        }
    }

    /// Records an attempt's result (one just stored, or read back).
    pub fn insert_result(&mut self, result: TrialResult) {
        let trial = self.trials.entry(result.trial_id.clone()).or_default();
        trial.results.insert(result.attempt, Arc::new(result));
    }

    /// Records an attempt's verdicts.
    pub fn insert_verdicts(&mut self, trial: &str, attempt: u32, verdicts: Verdicts) {
        self.trials.entry(trial.to_string()).or_default().verdicts.insert(attempt, Arc::new(verdicts));
    }

    /// Whether the store holds a result for this attempt.
    pub fn has_result(&self, trial: &str, attempt: u32) -> bool {
        self.trials.get(trial).is_some_and(|t| t.results.contains_key(&attempt))
    }

    /// One record per planned trial: its final result and that attempt's verdicts, if any.
    pub fn trial_records(&self, trials: &[PlannedTrial], tasks: &[LoadedTask], max_attempts: u32) -> Vec<TrialRecord> {
        trials
            .iter()
            .map(|t| {
                let result = self.final_result_shared(&t.id, max_attempts);
                let verdicts = result.as_ref().and_then(|r| self.trials.get(&t.id)?.verdicts.get(&r.attempt).cloned());
                let loaded = &tasks[t.task as usize];
                TrialRecord {
                    variant: t.variant,
                    task: loaded.task.id.clone(),
                    repeat: t.repeat,
                    track: loaded.task.track,
                    difficulty: loaded.task.difficulty.clone(),
                    truth_items: loaded.truth.items().len() as u32,
                    result,
                    verdicts,
                }
            })
            .collect()
    }

    /// Reads every `result.json` and `verdicts.json` of the run
    /// (`runs/<run>/<variant>/<trial>/attempt-<n>/<file>`), several at a time. A file that does
    /// not parse is an error naming it.
    pub async fn scan<S: ResultStore>(store: &S, layout: &RunLayout) -> anyhow::Result<StoredRun> {
        let keys = store.list(&layout.run_dir()).await?;
        let wanted = keys.into_iter().filter_map(|key| {
            let parts: Vec<&str> = key.split('/').collect();
            let [_, _, _, trial, attempt, file] = parts.as_slice() else { return None };
            let number = attempt.strip_prefix("attempt-").and_then(|n| n.parse::<u32>().ok())?;
            let is_result = match *file {
                "result.json" => true,
                "verdicts.json" => false,
                _ => return None,
            };
            Some((trial.to_string(), number, is_result, key))
        });
        // A FuturesUnordered filled by hand rather than a stream of closures: closures borrowing
        // `store` make the caller's future fail rustc's `Send` inference (a known limitation).
        let mut wanted = wanted.collect::<Vec<_>>().into_iter();
        let mut reading = FuturesUnordered::new();
        let mut files = Vec::new();
        loop {
            while reading.len() < SCAN_CONCURRENCY {
                let Some(item) = wanted.next() else { break };
                reading.push(read_stored(store, item));
            }
            match reading.next().await {
                Some(file) => files.push(file?),
                None => break,
            }
        }
        let mut state = StoredRun::default();
        for (trial, number, is_result, key, bytes) in files {
            let entry = state.trials.entry(trial).or_default();
            if is_result {
                let result: TrialResult = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a valid trial result", store.uri(&key)))?;
                entry.results.insert(number, Arc::new(result));
            } else {
                let verdicts: Verdicts = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a valid verdicts file", store.uri(&key)))?;
                entry.verdicts.insert(number, Arc::new(verdicts));
            }
        }
        Ok(state)
    }
}

/// One stored file: (trial, attempt, whether it is `result.json`, key, bytes).
type StoredFile = (String, u32, bool, String, Vec<u8>);

async fn read_stored<S: ResultStore>(
    store: &S,
    (trial, number, is_result, key): (String, u32, bool, String),
) -> anyhow::Result<StoredFile> {
    let bytes = store.get(&key).await?.with_context(|| format!("{key} vanished"))?;
    Ok((trial, number, is_result, key, bytes))
}

/// See [`StoredRun::compact`].
pub fn compact_result(result: &mut TrialResult) {
    result.schema = String::new();
    result.run = String::new();
    result.model = String::new();
    result.provider = String::new();
    result.harness.version = String::new();
    result.prompt_sha256 = String::new();
    result.harness_version_reported = None;
    result.trajectory = None;
    if let Some(error) = result.error.as_mut() {
        // Keep the reason an infrastructure failure starts with (`Evicted: …` → `Evicted:`).
        let keep = error.find(':').map_or(0, |i| i + 1).min(error.len());
        error.truncate(keep);
        error.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacting_keeps_what_scheduling_and_the_summary_read() {
        let json = serde_json::json!({
            "schema": "lightsout.dev/trial-result/v1", "run": "r", "variant_id": "v1", "variant": "m/low",
            "trial_id": "t1", "task_id": "task", "repeat": 0, "attempt": 2, "outcome": "infra-failed",
            "error": "Evicted: The node was low on resource: memory.",
            "harness": {"name": "single-shot", "version": "1.0.0"}, "harness_version_reported": "1.0.0",
            "model": "m", "provider": "p", "prompt_sha256": "ab".repeat(32),
            "started_at": "2026-12-01T08:00:00Z", "finished_at": "2026-12-01T08:10:00Z", "duration_ms": 600000,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
            "cost_usd": 0.5, "model_calls": 3, "findings": 4, "review_words": 50,
        });
        let full: TrialResult = serde_json::from_value(json).unwrap();
        let mut compact = full.clone();
        compact_result(&mut compact);
        assert_eq!(compact.error.as_deref(), Some("Evicted:"));
        assert!(compact.schema.is_empty() && compact.run.is_empty() && compact.prompt_sha256.is_empty());
        let kept = |r: &TrialResult| {
            (r.variant_id.clone(), r.variant.clone(), r.trial_id.clone(), r.task_id.clone(), r.attempt, r.outcome)
        };
        assert_eq!(kept(&compact), kept(&full));
        assert_eq!(
            (compact.usage, compact.cost_usd, compact.duration_ms),
            (full.usage, full.cost_usd, full.duration_ms)
        );
        assert_eq!(
            (compact.findings, compact.review_words, compact.model_calls),
            (full.findings, full.review_words, full.model_calls)
        );
        assert_eq!(compact.finished_at, full.finished_at);
    }
}
