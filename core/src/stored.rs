//! What the results store holds for a run: every attempt's `result.json` and `verdicts.json`,
//! and every interrupted run's record ([`crate::interruption`]), by trial. `lightsout run` and the controller both decide from it, so a run's progress is a
//! function of what is stored, never of a process's memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Context as _;
use futures::stream::{FuturesUnordered, StreamExt};

use crate::dataset::LoadedTask;
use crate::interruption::Interruption;
use crate::plan::PlannedTrial;
use crate::results::{ResultStore, RunLayout};
use crate::scoring::Verdicts;
use crate::trial::{Outcome, TrialResult};
use crate::trial_record::{swe_prbench_record_input, AttemptsSpend, HeldResult, TrialRecord};
use lightsout_model::Usage;

/// Reads of the store in flight at once while scanning.
const SCAN_CONCURRENCY: usize = 32;

/// What the results store holds for a run, by trial.
#[derive(Debug, Default)]
pub struct StoredRun {
    pub trials: HashMap<String, StoredTrial>,
    /// Duration sums and counts of finished, non-infrastructure attempts per (variant id,
    /// [`crate::plan::duration_key`]): the expected durations the next plan orders trials by.
    durations: HashMap<(String, String), (u64, u64)>,
    /// Each trial's (variant id, task id, context configuration, repeat), kept only by [`StoredRun::scan_identified`]:
    /// what pairs trials across runs without a plan (`lightsout compare`).
    pub identities: Option<HashMap<String, TrialIdentity>>,
    /// Interruption records that could not be read, each with why: their spend is missing from
    /// the totals (they are written by workers, never by agents).
    pub unreadable: Vec<String>,
}

/// Which variant, task, context configuration (of the `matrix.contextConfigs` axis) and repeat
/// a stored trial is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialIdentity {
    pub variant_id: String,
    pub task_id: String,
    pub context_config: Option<lightsout_api::ContextConfig>,
    pub repeat: u32,
}

#[derive(Debug, Default)]
pub struct StoredTrial {
    /// Finished attempts by number.
    /// Shared with the summary's records, so a 100,000-trial run holds each result once.
    pub results: BTreeMap<u32, Arc<HeldResult>>,
    pub verdicts: BTreeMap<u32, Arc<Verdicts>>,
    /// Runs of its attempts stopped before they finished, by (attempt, run start in Unix ms):
    /// read once however often they are seen, and summed in one order.
    pub interruptions: BTreeMap<(u32, i64), HeldInterruption>,
}

/// What the summary reads of an [`Interruption`].
#[derive(Debug, Clone, PartialEq)]
pub struct HeldInterruption {
    pub attempt: u32,
    pub usage: Usage,
    pub cost_usd: f64,
    pub unpriced_calls: u32,
}

impl StoredTrial {
    /// How many of its runs were preempted (stopped, then the same attempt ran again): see
    /// [`crate::interruption::preempted_runs`].
    pub fn preempted_runs(&self) -> u32 {
        let mut by_attempt: BTreeMap<u32, u32> = BTreeMap::new();
        for interruption in self.interruptions.values() {
            *by_attempt.entry(interruption.attempt).or_default() += 1;
        }
        by_attempt
            .into_iter()
            .map(|(attempt, interruptions)| {
                let ended_by_eviction = self
                    .results
                    .get(&attempt)
                    .is_some_and(|r| r.outcome == Outcome::InfraFailed && r.error.as_deref() == Some(EVICTED_PREFIX));
                crate::interruption::preempted_runs(interruptions, ended_by_eviction)
            })
            .sum()
    }
}

/// How the controller's record of an evicted attempt's error starts (its `InfraReason`).
const EVICTED_PREFIX: &str = "Evicted:";

impl StoredRun {
    /// The trial's final result: its last finished attempt, unless that one was an
    /// infrastructure failure with attempts left.
    pub fn final_result(&self, trial: &str, max_attempts: u32) -> Option<&HeldResult> {
        let (number, last) = self.trials.get(trial)?.results.last_key_value()?;
        let last = last.as_ref();
        (last.outcome != Outcome::InfraFailed || *number >= max_attempts).then_some(last)
    }

    pub fn is_final(&self, trial: &str, max_attempts: u32) -> bool {
        self.final_result(trial, max_attempts).is_some()
    }

    /// Whether the trial's final result is a review not yet judged: no verdicts, or verdicts that
    /// missing judge votes leave incomplete.
    pub fn needs_judging(&self, trial: &str, max_attempts: u32) -> bool {
        self.final_result(trial, max_attempts)
            .is_some_and(|r| r.outcome == Outcome::Ok && !self.is_judged(trial, r.attempt))
    }

    pub fn has_verdicts(&self, trial: &str, attempt: u32) -> bool {
        self.verdicts(trial, attempt).is_some()
    }

    /// Whether the attempt's verdicts are stored and complete.
    pub fn is_judged(&self, trial: &str, attempt: u32) -> bool {
        self.verdicts(trial, attempt).is_some_and(Verdicts::is_complete)
    }

    pub fn verdicts(&self, trial: &str, attempt: u32) -> Option<&Verdicts> {
        self.trials.get(trial)?.verdicts.get(&attempt).map(Arc::as_ref)
    }

    /// An attempt that never wrote `result.json` was interrupted; its number is reused.
    pub fn next_attempt(&self, trial: &str) -> u32 {
        self.trials.get(trial).and_then(|t| t.results.last_key_value()).map(|(n, _)| n + 1).unwrap_or(1)
    }

    /// Mean duration of the finished, non-infrastructure attempts per (variant id,
    /// [`crate::plan::duration_key`]).
    pub fn mean_durations(&self) -> HashMap<(String, String), u64> {
        self.durations.iter().map(|(key, (sum, n))| (key.clone(), sum / n)).collect()
    }

    /// Spend recorded so far: every finished attempt, infrastructure failures included (their
    /// tokens were paid for), every interrupted run, and every verdict.
    pub fn spent_usd(&self) -> f64 {
        self.trials
            .values()
            .map(|t| {
                t.results.values().filter_map(|r| r.cost_usd).sum::<f64>()
                    + t.interruptions.values().map(|i| i.cost_usd).sum::<f64>()
                    + t.verdicts.values().map(|v| v.spend().cost_usd).sum::<f64>()
            })
            .sum()
    }

    /// Runs of the run's attempts that were preempted and run again
    /// ([`StoredTrial::preempted_runs`]).
    pub fn preempted_runs(&self) -> u32 {
        self.trials.values().map(StoredTrial::preempted_runs).sum()
    }

    /// Records a stopped run's spend (once: the same record seen again replaces itself).
    pub fn insert_interruption(&mut self, interruption: &Interruption) {
        let key = (interruption.attempt, interruption.started_at.timestamp_millis());
        self.trials.entry(interruption.trial_id.clone()).or_default().interruptions.insert(
            key,
            HeldInterruption {
                attempt: interruption.attempt,
                usage: interruption.usage,
                cost_usd: interruption.cost_usd,
                unpriced_calls: interruption.unpriced_calls,
            },
        );
    }

    /// [`StoredRun::final_result`], shared.
    fn final_result_shared(&self, trial: &str, max_attempts: u32) -> Option<Arc<HeldResult>> {
        let (number, last) = self.trials.get(trial)?.results.last_key_value()?;
        (last.outcome != Outcome::InfraFailed || *number >= max_attempts).then(|| last.clone())
    }

    /// Drops from every held verdict what the summary never reads (see [`compact_verdicts`]): a
    /// controller holds every verdict of a 100,000-trial run. The stored files are untouched.
    pub fn compact(&mut self) {
        for trial in self.trials.values_mut() {
            for verdicts in trial.verdicts.values_mut() {
                compact_verdicts(Arc::make_mut(verdicts));
            }
        }
    }

    /// Records an attempt's result (one just stored, or read back), held as a [`HeldResult`].
    pub fn insert_result(&mut self, result: &TrialResult) {
        if result.outcome.is_scored() {
            let key = crate::plan::duration_key(&result.task_id, result.context_config);
            let entry = self.durations.entry((result.variant_id.clone(), key.into_owned())).or_default();
            entry.0 += result.duration_ms;
            entry.1 += 1;
        }
        let trial = self.trials.entry(result.trial_id.clone()).or_default();
        trial.results.insert(result.attempt, Arc::new(HeldResult::from(result)));
    }

    /// Records an attempt's verdicts.
    pub fn insert_verdicts(&mut self, trial: &str, attempt: u32, verdicts: Verdicts) {
        self.trials.entry(trial.to_string()).or_default().verdicts.insert(attempt, Arc::new(verdicts));
    }

    /// Whether the store holds a result for this attempt.
    pub fn has_result(&self, trial: &str, attempt: u32) -> bool {
        self.trials.get(trial).is_some_and(|t| t.results.contains_key(&attempt))
    }

    /// What the trial's attempts other than `final_attempt` spent (all of them when it has no
    /// final result), and its interrupted runs; `None` when it has neither.
    pub fn earlier_spend(&self, trial: &str, final_attempt: Option<u32>) -> Option<Box<AttemptsSpend>> {
        let mut spend = AttemptsSpend::default();
        let mut any = false;
        let stored = self.trials.get(trial)?;
        for held in stored.results.values().filter(|r| Some(r.attempt) != final_attempt) {
            any = true;
            spend.usage += held.usage;
            match held.cost_usd {
                Some(cost) => spend.cost_usd += cost,
                None => spend.unpriced_calls += held.model_calls,
            }
        }
        // Interrupted runs are in no result, the final attempt's included.
        for interruption in stored.interruptions.values() {
            any = true;
            spend.usage += interruption.usage;
            spend.cost_usd += interruption.cost_usd;
            spend.unpriced_calls += interruption.unpriced_calls;
        }
        spend.preempted_runs = stored.preempted_runs();
        any.then(|| Box::new(spend))
    }

    /// One record per planned trial: its final result and that attempt's verdicts, if any.
    /// `run_context`: the run's `agent.contextConfig`, the configuration of trials without one
    /// of their own.
    pub fn trial_records(
        &self,
        trials: &[PlannedTrial],
        tasks: &[LoadedTask],
        max_attempts: u32,
        run_context: Option<lightsout_api::ContextConfig>,
    ) -> Vec<TrialRecord> {
        trials
            .iter()
            .map(|t| {
                let result = self.final_result_shared(&t.id, max_attempts);
                let verdicts = result.as_ref().and_then(|r| self.trials.get(&t.id)?.verdicts.get(&r.attempt).cloned());
                let earlier_attempts = self.earlier_spend(&t.id, result.as_ref().map(|r| r.attempt));
                let loaded = &tasks[t.task as usize];
                TrialRecord {
                    variant: t.variant,
                    task: loaded.task.id.clone(),
                    context_config: t.context,
                    repeat: t.repeat,
                    track: loaded.task.track,
                    difficulty: loaded.task.difficulty.clone(),
                    language: loaded.task.language.clone(),
                    truth_items: loaded.truth.items().len() as u32,
                    swe_prbench_input: crate::dataset::swe_prbench::eval_input(
                        &loaded.task,
                        crate::dataset::swe_prbench::config_or_default(t.context.or(run_context)),
                        &loaded.truth,
                    )
                    .map(swe_prbench_record_input),
                    result,
                    verdicts,
                    earlier_attempts,
                }
            })
            .collect()
    }

    /// Reads every `result.json` and `verdicts.json` of the run
    /// (`runs/<run>/<variant>/<trial>/attempt-<n>/<file>`), several at a time. A file that does
    /// not parse is an error naming it.
    pub async fn scan<S: ResultStore>(store: &S, layout: &RunLayout) -> anyhow::Result<StoredRun> {
        Self::scan_keeping(store, layout, false).await
    }

    /// [`StoredRun::scan`], also keeping every trial's identity ([`StoredRun::identities`]).
    pub async fn scan_identified<S: ResultStore>(store: &S, layout: &RunLayout) -> anyhow::Result<StoredRun> {
        Self::scan_keeping(store, layout, true).await
    }

    async fn scan_keeping<S: ResultStore>(
        store: &S,
        layout: &RunLayout,
        identities: bool,
    ) -> anyhow::Result<StoredRun> {
        let keys = store.list(&layout.run_dir()).await?;
        let wanted = keys.into_iter().filter_map(|key| {
            let parts: Vec<&str> = key.split('/').collect();
            let [_, _, _, trial, attempt, file] = parts.as_slice() else { return None };
            let number = attempt.strip_prefix("attempt-").and_then(|n| n.parse::<u32>().ok())?;
            let kind = match *file {
                "result.json" => StoredKind::Result,
                "verdicts.json" => StoredKind::Verdicts,
                name if Interruption::is_file_name(name) => StoredKind::Interruption,
                _ => return None,
            };
            Some((trial.to_string(), number, kind, key))
        });
        // A FuturesUnordered filled by hand rather than a stream of closures: closures borrowing
        // `store` make the caller's future fail rustc's `Send` inference (a known limitation).
        let mut wanted = wanted.collect::<Vec<_>>().into_iter();
        let mut reading = FuturesUnordered::new();
        let mut state = StoredRun { identities: identities.then(HashMap::new), ..StoredRun::default() };
        loop {
            while reading.len() < SCAN_CONCURRENCY {
                let Some(item) = wanted.next() else { break };
                reading.push(read_stored(store, item));
            }
            // Each file is parsed and reduced as it arrives: a big run's files are never all in
            // memory at once.
            let Some(file) = reading.next().await else { break };
            let (trial, number, kind, key, bytes) = file?;
            if kind == StoredKind::Interruption {
                match crate::interruption::read_record(&bytes, &trial, number) {
                    Ok(record) => state.insert_interruption(&record),
                    Err(why) => state.unreadable.push(format!("{}: {why}", store.uri(&key))),
                }
            } else if kind == StoredKind::Result {
                let result: TrialResult = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a valid trial result", store.uri(&key)))?;
                if result.trial_id != trial || result.attempt != number {
                    anyhow::bail!(
                        "{} holds trial {} attempt {}, not the trial and attempt of its path",
                        store.uri(&key),
                        result.trial_id,
                        result.attempt
                    );
                }
                if let Some(identities) = state.identities.as_mut() {
                    identities.entry(result.trial_id.clone()).or_insert_with(|| TrialIdentity {
                        variant_id: result.variant_id.clone(),
                        task_id: result.task_id.clone(),
                        context_config: result.context_config,
                        repeat: result.repeat,
                    });
                }
                state.insert_result(&result);
            } else {
                let verdicts: Verdicts = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a valid verdicts file", store.uri(&key)))?;
                state.trials.entry(trial).or_default().verdicts.insert(number, Arc::new(verdicts));
            }
        }
        Ok(state)
    }
}

/// Which of an attempt's files a stored file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoredKind {
    Result,
    Verdicts,
    Interruption,
}

/// One stored file: (trial, attempt, kind, key, bytes).
type StoredFile = (String, u32, StoredKind, String, Vec<u8>);

async fn read_stored<S: ResultStore>(
    store: &S,
    (trial, number, kind, key): (String, u32, StoredKind, String),
) -> anyhow::Result<StoredFile> {
    let bytes = store.get(&key).await?.with_context(|| format!("{key} vanished"))?;
    Ok((trial, number, kind, key, bytes))
}

/// Reduces verdicts to what the summary reads: CRBugBench votes become their rating matrix
/// (one byte a vote, [`crate::judge::PanelRatings`], which also knows the panel's size), and the
/// pair decisions, the caught items, the judges' names and the prompt version go (the first hit
/// rank and the spend stay); SWE-PRBench verdicts lose the judge's raw answer and the lists of
/// missed and fabricated comments (every score, and the matched pairs, which give the first hit
/// rank, stay). Everything dropped is in `verdicts.json`, for audits and
/// re-scoring; a verdict's votes and comments are most of its bytes.
pub fn compact_verdicts(verdicts: &mut Verdicts) {
    match verdicts {
        Verdicts::CrBugBench(panel) => {
            panel.held_ratings = Some(Box::new(panel.ratings()));
            panel.votes = Vec::new();
            panel.decisions = Vec::new();
            panel.caught = BTreeMap::new();
            panel.judges = Vec::new();
            panel.prompt_version = String::new();
        }
        Verdicts::SwePrBench(pr) => {
            pr.judge_answer = None;
            pr.result.missed_comments = Vec::new();
            pr.result.fabricated_comments = Vec::new();
        }
        Verdicts::SwePrBenchUnjudged(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_result_keeps_what_scheduling_and_the_summary_read() {
        let json = serde_json::json!({
            "schema": "lightsout.dev/trial-result/v1", "run": "r", "variant_id": "v1", "variant": "m/low",
            "trial_id": "t1", "task_id": "task", "repeat": 0, "attempt": 2, "outcome": "infra-failed",
            "error": "Evicted: The node was low on resource: memory.",
            "harness": {"name": "single-shot", "version": "1.0.0"}, "harness_version_reported": "1.0.0",
            "model": "m", "provider": "p", "prompt_sha256": "ab".repeat(32),
            "started_at": "2026-12-01T08:00:00Z", "finished_at": "2026-12-01T08:10:00Z", "duration_ms": 600000,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
            "cost_usd": 0.5, "model_calls": 3, "findings": 4, "review_words": 50, "scripted_model": true,
        });
        let full: TrialResult = serde_json::from_value(json).unwrap();
        let held = HeldResult::from(&full);
        assert_eq!(held.error.as_deref(), Some("Evicted:"));
        assert_eq!((held.attempt, held.outcome, held.finished_at), (full.attempt, full.outcome, full.finished_at));
        assert_eq!((held.usage, held.cost_usd, held.duration_ms), (full.usage, full.cost_usd, full.duration_ms));
        assert_eq!(
            (held.findings, held.review_words, held.model_calls, held.scripted_model),
            (full.findings, full.review_words, full.model_calls, full.scripted_model)
        );
        assert!(std::mem::size_of::<HeldResult>() * 4 <= std::mem::size_of::<TrialResult>());

        // The run keeps the attempt under its trial, and its duration only when it counts.
        let mut run = StoredRun::default();
        run.insert_result(&full);
        assert!(run.has_result("t1", 2) && run.mean_durations().is_empty());
        let ok = TrialResult { attempt: 3, outcome: Outcome::Ok, error: None, ..full };
        run.insert_result(&ok);
        assert_eq!(run.final_result("t1", 3).map(|r| r.attempt), Some(3));
        assert_eq!(run.mean_durations()[&("v1".to_string(), "task".to_string())], 600_000);

        // The infrastructure failure's paid calls are the trial's earlier spend, not lost.
        let earlier = run.earlier_spend("t1", Some(3)).expect("attempt 2 is earlier");
        assert_eq!((earlier.usage, earlier.cost_usd, earlier.unpriced_calls), (full.usage, 0.5, 0));
        assert_eq!(run.earlier_spend("t1", None).unwrap().usage, full.usage + full.usage, "no final: every attempt");
        assert!(run.earlier_spend("t1", Some(2)).is_some() && run.earlier_spend("none", None).is_none());
        let unpriced = TrialResult { attempt: 4, cost_usd: None, ..ok };
        run.insert_result(&unpriced);
        assert_eq!(run.earlier_spend("t1", Some(2)).unwrap().unpriced_calls, 3);
    }

    fn interruption(attempt: u32, started_ms: i64, cost_usd: f64) -> Interruption {
        let at = chrono::DateTime::from_timestamp_millis(started_ms).unwrap();
        Interruption {
            schema: crate::interruption::INTERRUPTION_SCHEMA.into(),
            run: "r".into(),
            variant_id: "v1".into(),
            trial_id: "t1".into(),
            attempt,
            started_at: at,
            interrupted_at: at,
            usage: Usage { input_tokens: 100, output_tokens: 10, ..Usage::default() },
            cost_usd,
            unpriced_calls: 0,
            model_calls: 1,
            signal: "SIGTERM".into(),
        }
    }

    fn result(attempt: u32, outcome: Outcome, error: Option<&str>) -> TrialResult {
        serde_json::from_value(serde_json::json!({
            "schema": "lightsout.dev/trial-result/v1", "run": "r", "variant_id": "v1", "variant": "m/low",
            "trial_id": "t1", "task_id": "task", "repeat": 0, "attempt": attempt, "outcome": outcome,
            "error": error, "harness": {"name": "single-shot", "version": "1.0.0"},
            "model": "m", "provider": "p", "prompt_sha256": "ab".repeat(32),
            "started_at": "2026-12-01T08:00:00Z", "finished_at": "2026-12-01T08:10:00Z", "duration_ms": 1,
            "usage": {"input_tokens": 1, "output_tokens": 1, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
            "cost_usd": 1.0, "model_calls": 1, "findings": 0, "review_words": 0,
        }))
        .unwrap()
    }

    #[test]
    fn interrupted_runs_add_their_spend_once_and_count_as_preempted_unless_an_eviction_ended_the_attempt() {
        let mut run = StoredRun::default();
        // Attempt 1: stopped twice by its queue, then evicted (the controller's record).
        run.insert_interruption(&interruption(1, 1_000, 0.25));
        run.insert_interruption(&interruption(1, 2_000, 0.5));
        run.insert_interruption(&interruption(1, 2_000, 0.5)); // read again after the scan
        run.insert_interruption(&interruption(1, 3_000, 0.125));
        run.insert_result(&result(1, Outcome::InfraFailed, Some("Evicted: the node was drained")));
        // Attempt 2: stopped once, then it ran to its review.
        run.insert_interruption(&interruption(2, 4_000, 1.0));
        run.insert_result(&result(2, Outcome::Ok, None));
        assert_eq!(run.trials["t1"].preempted_runs(), 2 + 1, "the eviction is attempt 1's failure, not a preemption");
        assert_eq!(run.preempted_runs(), 3);
        let spend = run.earlier_spend("t1", Some(2)).unwrap();
        // Attempt 1's result (1.0) and every interruption, the final attempt's included, once each.
        assert_eq!(spend.cost_usd, 1.0 + 0.25 + 0.5 + 0.125 + 1.0);
        assert_eq!(spend.usage.input_tokens, 1 + 4 * 100);
        assert_eq!(spend.preempted_runs, 3);
        assert_eq!(run.spent_usd(), 2.0 + 0.25 + 0.5 + 0.125 + 1.0);
        // A worker's own infrastructure failure is not an eviction: the stopped run before it was
        // preempted.
        let mut run = StoredRun::default();
        run.insert_interruption(&interruption(1, 1_000, 0.0));
        run.insert_result(&result(1, Outcome::InfraFailed, Some("the provider answered 503")));
        assert_eq!(run.preempted_runs(), 1);
    }

    #[tokio::test]
    async fn the_scan_reads_interruption_records_and_names_those_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::results::LocalStore::new(dir.path());
        let layout = RunLayout::new("r");
        let record = interruption(1, 1_000, 0.5);
        store
            .put(&layout.artifact("v1", "t1", 1, &record.file_name()), &serde_json::to_vec(&record).unwrap())
            .await
            .unwrap();
        store.put(&layout.artifact("v1", "t1", 1, "interrupted-2000.json"), b"{not json").await.unwrap();
        let elsewhere = interruption(2, 3_000, 0.5);
        store
            .put(&layout.artifact("v1", "t1", 1, "interrupted-3000.json"), &serde_json::to_vec(&elsewhere).unwrap())
            .await
            .unwrap();
        let scanned = StoredRun::scan(&store, &layout).await.unwrap();
        assert_eq!(scanned.spent_usd(), 0.5);
        assert_eq!(scanned.unreadable.len(), 2, "{:?}", scanned.unreadable);
        assert!(scanned.unreadable.iter().any(|u| u.contains("interrupted-2000.json")), "{:?}", scanned.unreadable);
        assert!(
            scanned.unreadable.iter().any(|u| u.contains("names another trial or attempt")),
            "{:?}",
            scanned.unreadable
        );
    }

    #[test]
    fn compacting_verdicts_keeps_ratings_hits_and_spend() {
        let vote = |rank: u32, judge: &str, value: &str| {
            serde_json::json!({"rank": rank, "truth_id": "b1", "judge": judge, "value": value,
                "reason": "the finding names the same off-by-one", "answer": format!("{{\"verdict\": \"{value}\"}}").repeat(20),
                "attempts": 1})
        };
        let json = serde_json::json!({
            "protocol": "crbugbench", "prompt_version": "v1", "vote_rule": "majority", "judges": ["a", "b", "c"],
            "judged_findings": 2, "truth_items": 1,
            "votes": [vote(1, "a", "no"), vote(1, "b", "no"), vote(1, "c", "yes"), vote(2, "a", "yes"), vote(2, "b", "yes"), vote(2, "c", "failed")],
            "decisions": [
                {"rank": 1, "truth_id": "b1", "yes": 1, "no": 2, "failed": 0, "matched": false},
                {"rank": 2, "truth_id": "b1", "yes": 2, "no": 0, "failed": 1, "matched": true}],
            "caught": {"b1": 2}, "first_hit_rank": 2,
            "usage": {"input_tokens": 900, "output_tokens": 60, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
            "cost_usd": 0.002, "unpriced_calls": 0, "calls": 6,
        });
        let full: Verdicts = serde_json::from_value(json).unwrap();
        let mut compact = full.clone();
        compact_verdicts(&mut compact);
        let (Verdicts::CrBugBench(before), Verdicts::CrBugBench(after)) = (&full, &compact) else { unreachable!() };
        assert!(after.votes.is_empty() && after.decisions.is_empty());
        assert_eq!(after.ratings(), before.ratings());
        let rows: Vec<_> = after.ratings().rows(4).collect();
        assert_eq!(rows, [vec![Some(0), Some(0), Some(1), None], vec![Some(1), Some(1), None, None]]);
        assert_eq!(after.first_hit_rank, before.first_hit_rank);
        assert_eq!([1, 2, 3].map(|k| compact.hit_at(k)), [false, true, true]);
        assert_eq!(compact.spend(), full.spend());
    }

    /// The summary of compacted verdicts is the summary of the full ones, bit for bit: recall@k
    /// with intervals, judge agreement, comparisons, spend, latency.
    #[test]
    fn a_summary_of_compacted_records_equals_the_summary_of_full_ones() {
        use crate::summary::{summarise_run, DatasetSummary, RunIdentity, ScoringSettings};
        let variants: Vec<lightsout_api::variant::Variant> = ["low", "high"]
            .iter()
            .map(|effort| {
                serde_json::from_value(serde_json::json!({
                    "id": format!("v-{effort}"), "name": format!("m/{effort}/single-shot@1.0.0/default"),
                    "model": {"name": "m", "provider": "p"}, "reasoning_effort": effort,
                    "harness": {"name": "single-shot", "version": "1.0.0"}, "prompt": {"preset": "default"},
                }))
                .unwrap()
            })
            .collect();
        let judges = ["a", "b", "c"];
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut records = Vec::new();
        for (v, variant) in variants.iter().enumerate() {
            for task in 0..8 {
                for repeat in 0..2u32 {
                    let outcome = match next(10) {
                        0 => "agent-failed",
                        1 => "infra-failed",
                        _ => "ok",
                    };
                    let result: TrialResult = serde_json::from_value(serde_json::json!({
                        "schema": "lightsout.dev/trial-result/v1", "run": "r", "variant_id": variant.id, "variant": variant.name,
                        "trial_id": format!("t{v}-{task}-{repeat}"), "task_id": format!("task-{task}"), "repeat": repeat,
                        "attempt": 1, "outcome": outcome, "error": (outcome != "ok").then_some("Evicted: gone"),
                        "harness": {"name": "single-shot", "version": "1.0.0"}, "model": "m", "provider": "p",
                        "prompt_sha256": "ab", "started_at": "2026-12-01T08:00:00Z", "finished_at": "2026-12-01T08:10:00Z",
                        "duration_ms": 60_000 + next(600_000),
                        "usage": {"input_tokens": 1000 + next(500), "output_tokens": 50, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 7},
                        "cost_usd": 0.01, "model_calls": 2, "findings": 3, "review_words": 120,
                    }))
                    .unwrap();
                    let mut votes = Vec::new();
                    let mut caught = serde_json::Map::new();
                    for rank in 1..=3u32 {
                        for item in ["b1", "b2"] {
                            let mut yes = 0;
                            for judge in judges {
                                let value = ["yes", "no", "no", "failed"][next(4) as usize];
                                yes += u32::from(value == "yes");
                                votes.push(serde_json::json!({"rank": rank, "truth_id": item, "judge": judge, "value": value,
                                    "reason": "because", "answer": format!("{{\"verdict\":\"{value}\"}}"), "attempts": 1}));
                            }
                            if yes >= 2 && !caught.contains_key(item) {
                                caught.insert(item.into(), rank.into());
                            }
                        }
                    }
                    let first = caught.values().filter_map(|r| r.as_u64()).min();
                    let verdicts: Verdicts = serde_json::from_value(serde_json::json!({
                        "protocol": "crbugbench", "prompt_version": "v1", "vote_rule": "majority", "judges": judges,
                        "judged_findings": 3, "truth_items": 2, "votes": votes, "decisions": [], "caught": caught,
                        "first_hit_rank": first,
                        "usage": {"input_tokens": 900, "output_tokens": 60, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
                        "cost_usd": 0.002, "unpriced_calls": 0, "calls": 18,
                    }))
                    .unwrap();
                    records.push(TrialRecord {
                        earlier_attempts: None,
                        variant: v as u32,
                        task: format!("task-{task}"),
                        context_config: None,
                        repeat,
                        track: None,
                        difficulty: None,
                        language: None,
                        truth_items: 2,
                        swe_prbench_input: None,
                        verdicts: (outcome == "ok").then(|| Arc::new(verdicts)),
                        result: Some(Arc::new(HeldResult::from(&result))),
                    });
                }
            }
        }
        let compacted: Vec<TrialRecord> = records
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.verdicts = r.verdicts.map(|x| {
                    let mut x = (*x).clone();
                    compact_verdicts(&mut x);
                    Arc::new(x)
                });
                r
            })
            .collect();
        let settings = ScoringSettings {
            protocol: lightsout_api::ScoringProtocol::CrBugBench,
            ks: vec![1, 3],
            bootstrap: lightsout_stats::BootstrapConfig {
                resamples: 500,
                ..lightsout_stats::BootstrapConfig::with_seed(7)
            },
            context_config: None,
            reading: lightsout_api::protocol::ProtocolReading::Harness,
            similarity: lightsout_swe_prbench::SimilarityKind::Lexical,
            judge_model: String::new(),
            departures: Default::default(),
        };
        let summary = |records: &[TrialRecord]| {
            let identity =
                RunIdentity { name: "r".into(), spec_hash: "h".into(), generated_at: chrono::DateTime::UNIX_EPOCH };
            let dataset =
                DatasetSummary { format: "crbugbench".into(), source: "s".into(), tasks: 8, skipped_lines: 0 };
            serde_json::to_value(summarise_run(identity, dataset, &settings, &variants, records)).unwrap()
        };
        let (full, compact) = (summary(&records), summary(&compacted));
        assert!(full["variants"][0]["judge_agreement"]["fleiss"]["kappa"].is_number(), "{full:#}");
        assert_eq!(compact, full);

        // scripted_models follows from the results: none was the scripted server's here…
        assert_eq!(full["scripted_models"], false);
        // …and one final result answered by it marks the run.
        let mut marked = records.clone();
        let mut held = (*marked[5].result.clone().unwrap()).clone();
        held.scripted_model = true;
        marked[5].result = Some(Arc::new(held));
        assert_eq!(summary(&marked)["scripted_models"], true);
    }
}
