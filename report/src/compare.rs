//! Run comparison: a candidate run against a baseline run, from what the results store holds —
//! `run.json` (the variants), `summary.json` (k, bootstrap, cost, latency) and every attempt's
//! `result.json` and `verdicts.json` ([`StoredRun`]) — never from a plan or a dataset.
//!
//! Rules:
//! - Variants are paired across the runs by name (`model[/effort]/harness@version/prompt`);
//!   a variant in one run only is listed as `added` (candidate only) or `removed` (baseline only)
//!   and not compared. No common variant is an error.
//! - Trials are paired by (task id, repeat) ([`lightsout_stats::pair_samples`]). A trial's final
//!   result and its verdicts are read exactly as `summary.json` reads them
//!   ([`lightsout_core::summary`]): agent failures, timeouts and exceeded trial budgets are scored as
//!   reviews with no finding, infrastructure failures and unjudged reviews are not scored.
//! - The cut-offs compared are the k of both runs' summaries; the headline k
//!   ([`CompareSettings::k`]) defaults to the largest of them.
//! - Per paired variant and k: McNemar's exact two-sided test on hit@k ([`lightsout_stats::mcnemar`])
//!   and the paired bootstrap of the recall@k difference, candidate − baseline
//!   ([`lightsout_stats::paired_bootstrap_columns`]: one set of task draws for every k).
//! - When both runs are SWE-PRBench: the paired difference of the composite weighted by
//!   ln(human comments + 1), as the summary weighs it, with its bootstrap interval
//!   ([`lightsout_stats::bootstrap_columns`] over the per-pair differences, resampling tasks).
//! - Cost per trial (agent USD), whole spend (agents and judges, per variant and per run) and
//!   latency p50/p95 deltas are candidate − baseline of the two `summary.json` files.
//! - Every bootstrap uses the candidate summary's configuration (seed, resamples, confidence),
//!   so the same stored runs always give the same comparison, bit for bit.
//!
//! Verdict of a paired variant, with Δ = recall@k(candidate) − recall@k(baseline) over the pairs
//! at the headline k, p = McNemar's p-value at that k, `alpha` and `min_delta` from
//! [`CompareSettings`]:
//! - **Regressed** when −Δ > `min_delta` and p < `alpha`;
//! - **Improved** when Δ > `min_delta` and p < `alpha`;
//! - **NoSignificantChange** otherwise.
//!
//! A variant with no recall@k pair at the headline k but a composite difference (composite-only)
//! is judged on the composite instead: Regressed when −Δcomposite > `min_delta` and the whole
//! interval of the difference is below 0; Improved when Δcomposite > `min_delta` and the whole
//! interval is above 0. A variant with nothing paired is NoSignificantChange (with a notice).
//!
//! Overall: Regressed when any variant regressed, else Improved when any variant improved, else
//! NoSignificantChange.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use lightsout_api::variant::Variant;
use lightsout_api::ScoringProtocol;
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::run_record::read_run_record;
use lightsout_core::scoring::Verdicts;
use lightsout_core::stored::StoredRun;
use lightsout_core::summary::{KComparison, RunSummary, VariantSummary};
use lightsout_core::trial::Outcome;
use lightsout_core::trial_record::TrialRecord;
use lightsout_stats::{self as stats, BootstrapConfig, Cluster, Interval, Sample};

pub const COMPARISON_SCHEMA: &str = "lightsout.dev/comparison/v1";

/// A stored comparison's name, in the candidate run's directory next to its `summary.json`
/// (written by a schedule's comparison and by `lightsout report --baseline`).
pub const COMPARISON_FILE: &str = "comparison.json";

/// When a change counts (see the module rules).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompareSettings {
    /// The headline k the verdict is taken at; the largest k of both runs when absent. In a
    /// [`RunComparison`] it is always the k applied.
    pub k: Option<u32>,
    /// Significance level of McNemar's test.
    pub alpha: f64,
    /// The smallest absolute change of recall@k (or of the composite) that counts.
    pub min_delta: f64,
}

impl Default for CompareSettings {
    fn default() -> Self {
        CompareSettings { k: None, alpha: 0.05, min_delta: 0.0 }
    }
}

impl CompareSettings {
    fn check(&self) -> anyhow::Result<()> {
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            bail!("alpha must be in (0, 1], got {}", self.alpha);
        }
        if !(self.min_delta.is_finite() && self.min_delta >= 0.0) {
            bail!("min-delta must be a finite number ≥ 0, got {}", self.min_delta);
        }
        if self.k == Some(0) {
            bail!("k must be at least 1");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Regressed,
    Improved,
    NoSignificantChange,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "Regressed",
            Verdict::Improved => "Improved",
            Verdict::NoSignificantChange => "NoSignificantChange",
        }
    }

    /// The overall verdict of several: Regressed wins, then Improved.
    pub fn overall(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let verdicts: Vec<Verdict> = verdicts.into_iter().collect();
        if verdicts.contains(&Verdict::Regressed) {
            Verdict::Regressed
        } else if verdicts.contains(&Verdict::Improved) {
            Verdict::Improved
        } else {
            Verdict::NoSignificantChange
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A candidate run against a baseline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    pub schema: String,
    pub baseline: RunRef,
    pub candidate: RunRef,
    /// As applied: `k` is the headline k.
    pub settings: CompareSettings,
    /// The cut-offs compared: those of both runs.
    pub k: Vec<u32>,
    /// The candidate summary's bootstrap configuration, used for every interval here.
    pub bootstrap: BootstrapConfig,
    /// Variants of both runs, in the baseline's order.
    pub variants: Vec<VariantComparison>,
    /// Variants of the candidate only (not compared).
    pub added: Vec<String>,
    /// Variants of the baseline only (not compared).
    pub removed: Vec<String>,
    pub verdict: Verdict,
    /// The runs' whole spend (agents and judges, USD), from the summaries: what each run cost.
    #[serde(default)]
    pub spend_usd: Delta,
    /// What a reader must know before quoting a number.
    pub notices: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRef {
    pub name: String,
    pub spec_hash: String,
    /// Where the run's results are.
    pub uri: String,
}

/// One variant of both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantComparison {
    /// The variant's name, the same in both runs.
    pub variant: String,
    pub baseline_id: String,
    pub candidate_id: String,
    /// Scored trials paired by (task, repeat), the tasks they cover, and the scored trials left
    /// without a partner on each side.
    pub pairs: u64,
    pub tasks: u64,
    pub unpaired_baseline: u64,
    pub unpaired_candidate: u64,
    /// By k: McNemar's exact test on hit@k and the recall@k difference (candidate − baseline)
    /// with its paired bootstrap interval.
    pub by_k: BTreeMap<String, KComparison>,
    /// SWE-PRBench (both runs): the weighted composite over the pairs and its difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite: Option<CompositeComparison>,
    /// Agent USD per finished, non-infrastructure trial, from the summaries.
    pub agent_usd_per_trial: Delta,
    /// The variant's whole spend (agents and judges, USD), from the summaries.
    #[serde(default)]
    pub spend_usd: Delta,
    /// Trial duration quantiles (ms), from the summaries.
    pub latency_p50_ms: Delta,
    pub latency_p95_ms: Delta,
    pub verdict: Verdict,
    /// Why the verdict, in words.
    pub reason: String,
}

/// The SWE-PRBench composite over paired trials, weighted by ln(human comments + 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompositeComparison {
    pub pairs: u64,
    pub tasks: u64,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate − baseline and its bootstrap interval (tasks resampled).
    pub difference: Option<Interval>,
}

/// A quantity in both runs and its change, candidate − baseline; absent where either is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    pub delta: Option<f64>,
}

impl Delta {
    pub fn of(baseline: Option<f64>, candidate: Option<f64>) -> Delta {
        Delta { baseline, candidate, delta: baseline.zip(candidate).map(|(b, c)| c - b) }
    }
}

/// A run's stored results as the comparison and the report read them: one scan of the store.
#[derive(Debug, Clone)]
pub struct ComparedRun {
    /// Where the run is, for messages and the report.
    pub uri: String,
    pub name: String,
    pub spec_hash: String,
    /// `run.json`'s variants; a record's `variant` indexes them.
    pub variants: Vec<Variant>,
    pub summary: RunSummary,
    /// One record per trial with a final result, ordered by trial id.
    pub records: Vec<TrialRecord>,
    /// `trials[i]` is the trial of `records[i]`.
    pub trials: Vec<StoredTrialRef>,
}

/// Which stored trial a record is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTrialRef {
    pub id: String,
    /// The attempt the record's result is from.
    pub attempt: u32,
    /// Attempts with a `result.json`.
    pub attempts: u32,
}

/// Reads the run `run` of `store`: `run.json`, `summary.json`, and every trial's final result
/// and verdicts with each trial's identity ([`StoredRun::scan_identified`]). Errors name the file.
pub async fn load_run<S: ResultStore>(store: &S, run: &str) -> anyhow::Result<ComparedRun> {
    let layout = RunLayout::new(run);
    let uri = store.uri(&layout.run_dir());
    let Some(file) = read_run_record(store, &layout).await? else {
        bail!("{uri}: no run.json there: not the results of a run (expected …/runs/<run>)");
    };
    let summary_key = layout.summary_json();
    let summary = store.get(&summary_key).await.with_context(|| format!("reading {}", store.uri(&summary_key)))?;
    let Some(summary) = summary else {
        bail!("{}: no summary.json: the run has not been summarised yet", uri);
    };
    let summary: RunSummary = serde_json::from_slice(&summary)
        .with_context(|| format!("{} is not a valid summary.json", store.uri(&summary_key)))?;
    let retries = file.spec.get("retries").and_then(serde_json::Value::as_i64).unwrap_or(2);
    let max_attempts = retries.clamp(0, 1000) as u32 + 1;

    let mut state = StoredRun::scan_identified(store, &layout).await?;
    // Only the first hit rank and the scores are read (a 100,000-trial run is held whole).
    state.compact();
    let identities = state.identities.as_ref().expect("scan_identified keeps identities");
    let variant_index: BTreeMap<&str, u32> =
        file.variants.iter().enumerate().map(|(i, v)| (v.id.as_str(), i as u32)).collect();
    let mut trial_ids: Vec<&String> = state.trials.keys().collect();
    trial_ids.sort();
    let (mut records, mut trials) = (Vec::new(), Vec::new());
    for trial_id in trial_ids {
        let Some(result) = state.final_result(trial_id, max_attempts) else { continue };
        let Some(identity) = identities.get(trial_id) else { continue };
        let Some(&variant) = variant_index.get(identity.variant_id.as_str()) else {
            bail!("{uri}: trial {trial_id} belongs to variant {}, which run.json does not list", identity.variant_id);
        };
        let trial = &state.trials[trial_id];
        let result = trial.results.get(&result.attempt).cloned();
        let verdicts = result.as_ref().and_then(|r| trial.verdicts.get(&r.attempt).cloned());
        let truth_items = verdicts.as_deref().and_then(human_comments).unwrap_or(0);
        trials.push(StoredTrialRef {
            id: trial_id.clone(),
            attempt: result.as_ref().map_or(0, |r| r.attempt),
            attempts: trial.results.len() as u32,
        });
        records.push(TrialRecord {
            earlier_attempts: state.earlier_spend(trial_id, result.as_ref().map(|r| r.attempt)),
            variant,
            task: identity.task_id.clone(),
            context_config: identity.context_config,
            repeat: identity.repeat,
            track: None,
            difficulty: None,
            language: None,
            truth_items,
            swe_prbench_input: None,
            result,
            verdicts,
        });
    }
    Ok(ComparedRun {
        uri,
        name: file.name,
        spec_hash: file.spec_hash,
        variants: file.variants,
        summary,
        records,
        trials,
    })
}

/// Stores `comparison` beside its candidate run's results (`comparison.json`); returns its URI.
pub async fn store_comparison<S: ResultStore>(store: &S, comparison: &RunComparison) -> anyhow::Result<String> {
    let key = format!("{}/{COMPARISON_FILE}", RunLayout::new(&comparison.candidate.name).run_dir());
    let json = serde_json::to_vec_pretty(comparison)?;
    store.put(&key, &json).await.with_context(|| format!("writing {}", store.uri(&key)))?;
    Ok(store.uri(&key))
}

/// SWE-PRBench: the PR's human comments (its weight's input).
fn human_comments(verdicts: &Verdicts) -> Option<u32> {
    match verdicts {
        Verdicts::SwePrBench(pr) => Some(pr.human_comments()),
        Verdicts::CrBugBench(_) | Verdicts::SwePrBenchUnjudged(_) => None,
    }
}

/// Compares `candidate` with `baseline` (see the module rules). Errors: settings out of range,
/// no common k, a headline k that is not a k of both runs, no common variant, no paired trial.
pub fn compare_runs(
    baseline: &ComparedRun,
    candidate: &ComparedRun,
    settings: &CompareSettings,
) -> anyhow::Result<RunComparison> {
    settings.check()?;
    let mut notices = Vec::new();
    let (base_ks, cand_ks): (BTreeSet<u32>, BTreeSet<u32>) =
        (baseline.summary.k.iter().copied().collect(), candidate.summary.k.iter().copied().collect());
    let ks: Vec<u32> = base_ks.intersection(&cand_ks).copied().collect();
    let Some(&largest) = ks.last() else {
        bail!(
            "the runs share no recall@k cut-off (baseline {} has k {:?}, candidate {} has k {:?})",
            baseline.uri,
            baseline.summary.k,
            candidate.uri,
            candidate.summary.k
        );
    };
    let k = settings.k.unwrap_or(largest);
    if !ks.contains(&k) {
        bail!("k={k} is not a recall@k cut-off of both runs (both have k {ks:?})");
    }
    for only in base_ks.symmetric_difference(&cand_ks) {
        notices.push(format!("recall@{only} is in one run only and is not compared"));
    }
    let bootstrap = candidate.summary.bootstrap;
    if baseline.summary.bootstrap != bootstrap {
        notices.push(format!(
            "the runs' bootstrap settings differ; the candidate's are used (seed {}, {} resamples)",
            bootstrap.seed, bootstrap.resamples
        ));
    }
    let composite = baseline.summary.protocol == ScoringProtocol::SwePrBench
        && candidate.summary.protocol == ScoringProtocol::SwePrBench;
    if baseline.summary.protocol != candidate.summary.protocol {
        notices.push(format!(
            "the runs were scored under different protocols ({} and {}): only recall@k is compared",
            baseline.summary.protocol.as_str(),
            candidate.summary.protocol.as_str()
        ));
    }
    if baseline.summary.scripted_models || candidate.summary.scripted_models {
        notices.push(
            "SCRIPTED MODELS: a run's answers came from the built-in scripted model server; these numbers say nothing about real models"
                .to_string(),
        );
    }
    for (run, what) in [(baseline, "baseline"), (candidate, "candidate")] {
        if run.summary.trials.pending > 0 {
            notices.push(format!("the {what} run has {} unfinished trials", run.summary.trials.pending));
        }
    }

    let names = |run: &ComparedRun| -> Vec<String> { run.variants.iter().map(|v| v.name.clone()).collect() };
    let (base_names, cand_names) = (names(baseline), names(candidate));
    let removed: Vec<String> = base_names.iter().filter(|n| !cand_names.contains(n)).cloned().collect();
    let added: Vec<String> = cand_names.iter().filter(|n| !base_names.contains(n)).cloned().collect();
    let common: Vec<(usize, usize)> = baseline
        .variants
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, candidate.variants.iter().position(|c| c.name == v.name)?)))
        .collect();
    if common.is_empty() {
        bail!(
            "no common variant: baseline {} has {}; candidate {} has {}",
            baseline.uri,
            list(&base_names),
            candidate.uri,
            list(&cand_names)
        );
    }

    // SWE-PRBench weights: a task's human comments, from any verdict of it in either run.
    let mut human: BTreeMap<&str, u32> = BTreeMap::new();
    for record in baseline.records.iter().chain(&candidate.records) {
        if let Some(h) = record.verdicts.as_deref().and_then(human_comments) {
            human.entry(record.task.as_str()).or_insert(h);
        }
    }
    let applied = CompareSettings { k: Some(k), ..*settings };
    let context = Context { ks: &ks, bootstrap: &bootstrap, settings: &applied, composite, human: &human };
    let variants: Vec<VariantComparison> =
        common.iter().map(|&(b, c)| compare_variant(&context, baseline, b, candidate, c, &mut notices)).collect();
    if variants.iter().all(|v| v.pairs == 0) {
        bail!(
            "no trial of {} pairs with a trial of {} by (task, repeat): nothing to compare",
            candidate.uri,
            baseline.uri
        );
    }
    Ok(RunComparison {
        schema: COMPARISON_SCHEMA.to_string(),
        baseline: run_ref(baseline),
        candidate: run_ref(candidate),
        settings: applied,
        k: ks,
        bootstrap,
        verdict: Verdict::overall(variants.iter().map(|v| v.verdict)),
        variants,
        added,
        removed,
        spend_usd: Delta::of(Some(baseline.summary.spend.total_usd), Some(candidate.summary.spend.total_usd)),
        notices,
    })
}

fn run_ref(run: &ComparedRun) -> RunRef {
    RunRef { name: run.name.clone(), spec_hash: run.spec_hash.clone(), uri: run.uri.clone() }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "no variant".to_string()
    } else {
        names.join(", ")
    }
}

struct Context<'a> {
    ks: &'a [u32],
    bootstrap: &'a BootstrapConfig,
    settings: &'a CompareSettings,
    composite: bool,
    human: &'a BTreeMap<&'a str, u32>,
}

/// One sample per scored trial: its hit@k for every k, exactly as the summary scores it.
fn hit_samples<'a>(records: &[&'a TrialRecord], ks: &[u32]) -> Vec<Sample<&'a str, Vec<f64>>> {
    records
        .iter()
        .filter_map(|r| {
            let result = r.result.as_ref().filter(|r| r.outcome.is_scored())?;
            let hits = match (result.outcome, &r.verdicts) {
                (Outcome::Ok, Some(v)) => ks.iter().map(|k| v.hit_at(*k)).collect(),
                (Outcome::Ok, None) => return None, // not judged yet
                _ => vec![false; ks.len()],
            };
            let value = hits.into_iter().map(|hit: bool| f64::from(u8::from(hit))).collect();
            Some(Sample { task: r.task.as_str(), repeat: r.pairing_index(), value })
        })
        .collect()
}

/// SWE-PRBench: one sample per scored trial, its composite (0 for a review that never came, as
/// the summary scores it).
fn composite_samples<'a>(records: &[&'a TrialRecord]) -> Vec<Sample<&'a str, f64>> {
    records
        .iter()
        .filter_map(|r| {
            let result = r.result.as_ref().filter(|r| r.outcome.is_scored())?;
            let composite = match (result.outcome, r.verdicts.as_deref()) {
                (Outcome::Ok, Some(Verdicts::SwePrBench(pr))) => pr.composite(),
                (Outcome::Ok, _) => return None,
                _ => 0.0,
            };
            Some(Sample { task: r.task.as_str(), repeat: r.pairing_index(), value: composite })
        })
        .collect()
}

/// The records of the run's variant `index`.
fn records_of(run: &ComparedRun, index: usize) -> Vec<&TrialRecord> {
    run.records.iter().filter(|r| r.variant as usize == index).collect()
}

/// Column `i` of hit samples, as hits.
fn hit_column<'a>(samples: &[Sample<&'a str, Vec<f64>>], i: usize) -> Vec<Sample<&'a str, bool>> {
    samples.iter().map(|s| Sample { task: s.task, repeat: s.repeat, value: s.value[i] > 0.5 }).collect()
}

fn compare_variant(
    context: &Context,
    baseline: &ComparedRun,
    base_index: usize,
    candidate: &ComparedRun,
    cand_index: usize,
    notices: &mut Vec<String>,
) -> VariantComparison {
    let name = baseline.variants[base_index].name.clone();
    let (base_records, cand_records) = (records_of(baseline, base_index), records_of(candidate, cand_index));
    let ks = context.ks;
    let (b, c) = (hit_samples(&base_records, ks), hit_samples(&cand_records, ks));
    let mut by_k = BTreeMap::new();
    let (mut pairs, mut tasks, mut unpaired_baseline, mut unpaired_candidate) = (0, 0, 0, 0);
    match stats::paired_bootstrap_columns(&b, &c, context.bootstrap) {
        Ok(differences) => {
            if let Some(first) = differences.first() {
                (pairs, tasks) = (first.pairs, first.tasks);
                (unpaired_baseline, unpaired_candidate) = (first.unpaired_baseline, first.unpaired_candidate);
            }
            for ((i, k), recall_difference) in ks.iter().enumerate().zip(differences) {
                match stats::mcnemar(&hit_column(&b, i), &hit_column(&c, i)) {
                    Ok(mcnemar) if mcnemar.pairs > 0 => {
                        by_k.insert(k.to_string(), KComparison { mcnemar, recall_difference });
                    }
                    Ok(_) => {}
                    Err(e) => notices.push(format!("variant {name} at k={k}: {e}")),
                }
            }
        }
        Err(e) => notices.push(format!("variant {name}: no recall@k comparison: {e}")),
    }
    if pairs == 0 {
        notices.push(format!("variant {name}: no scored trial of the candidate pairs with one of the baseline"));
    }
    let composite = context
        .composite
        .then(|| compare_composite(&name, &base_records, &cand_records, context.human, context.bootstrap, notices));

    let summary_of = |run: &ComparedRun, index: usize| -> Option<VariantSummary> {
        let id = &run.variants[index].id;
        run.summary.variants.iter().find(|v| &v.id == id).cloned()
    };
    let (base_summary, cand_summary) = (summary_of(baseline, base_index), summary_of(candidate, cand_index));
    for (summary, run) in [(&base_summary, baseline), (&cand_summary, candidate)] {
        if summary.is_none() {
            notices.push(format!("variant {name}: not in {}'s summary.json: no cost or latency", run.uri));
        }
    }
    let cost = |s: &Option<VariantSummary>| s.as_ref().and_then(|s| s.agent_usd_per_trial);
    let spend = |s: &Option<VariantSummary>| s.as_ref().map(|s| s.spend.total_usd);
    let latency = |s: &Option<VariantSummary>, p95: bool| {
        s.as_ref().and_then(|s| s.latency_ms).map(|l| if p95 { l.p95 as f64 } else { l.p50 as f64 })
    };
    let (verdict, reason) = variant_verdict(context.settings, &by_k, composite.as_ref());
    VariantComparison {
        variant: name,
        baseline_id: baseline.variants[base_index].id.clone(),
        candidate_id: candidate.variants[cand_index].id.clone(),
        pairs,
        tasks,
        unpaired_baseline,
        unpaired_candidate,
        by_k,
        composite,
        agent_usd_per_trial: Delta::of(cost(&base_summary), cost(&cand_summary)),
        spend_usd: Delta::of(spend(&base_summary), spend(&cand_summary)),
        latency_p50_ms: Delta::of(latency(&base_summary, false), latency(&cand_summary, false)),
        latency_p95_ms: Delta::of(latency(&base_summary, true), latency(&cand_summary, true)),
        verdict,
        reason,
    }
}

/// The weighted composite over pairs: three columns on one set of task draws — the baseline's,
/// the candidate's, and the per-pair difference — each task weighted by ln(human comments + 1).
fn compare_composite(
    name: &str,
    base_records: &[&TrialRecord],
    cand_records: &[&TrialRecord],
    human: &BTreeMap<&str, u32>,
    bootstrap: &BootstrapConfig,
    notices: &mut Vec<String>,
) -> CompositeComparison {
    let (b, c) = (composite_samples(base_records), composite_samples(cand_records));
    let mut comparison = CompositeComparison { pairs: 0, tasks: 0, baseline: None, candidate: None, difference: None };
    let pairing = match stats::pair_samples(&b, &c) {
        Ok(pairing) => pairing,
        Err(e) => {
            notices.push(format!("variant {name}: no composite comparison: {e}"));
            return comparison;
        }
    };
    let mut columns: [Vec<Cluster<&str>>; 3] = Default::default();
    let mut unweighted = 0;
    for (task, pairs) in &pairing.tasks {
        let Some(h) = human.get(**task) else {
            unweighted += pairs.len();
            continue;
        };
        let weight = (f64::from(*h) + 1.0).ln();
        columns[0].push(Cluster::weighted(**task, weight, pairs.iter().map(|p| p.0).collect()));
        columns[1].push(Cluster::weighted(**task, weight, pairs.iter().map(|p| p.1).collect()));
        columns[2].push(Cluster::weighted(**task, weight, pairs.iter().map(|p| p.1 - p.0).collect()));
        comparison.pairs += pairs.len() as u64;
        comparison.tasks += 1;
    }
    if unweighted > 0 {
        notices.push(format!(
            "variant {name}: {unweighted} composite pairs left out: their tasks have no verdict in either run, so their \
             weight (human comments) is unknown"
        ));
    }
    match stats::bootstrap_columns(&columns, bootstrap) {
        Ok(intervals) => {
            let [base, cand, difference]: [Option<Interval>; 3] = intervals.try_into().unwrap_or([None, None, None]);
            comparison.baseline = base.map(|i| i.estimate);
            comparison.candidate = cand.map(|i| i.estimate);
            comparison.difference = difference;
        }
        Err(e) => notices.push(format!("variant {name}: no composite interval: {e}")),
    }
    comparison
}

/// The verdict rule of the module documentation.
fn variant_verdict(
    settings: &CompareSettings,
    by_k: &BTreeMap<String, KComparison>,
    composite: Option<&CompositeComparison>,
) -> (Verdict, String) {
    let k = settings.k.unwrap_or_default();
    let (alpha, min_delta) = (settings.alpha, settings.min_delta);
    let recall = by_k.get(&k.to_string()).and_then(|c| {
        let d = &c.recall_difference;
        Some((d.candidate_mean? - d.baseline_mean?, c.mcnemar.p_value))
    });
    if let Some((delta, p)) = recall {
        let significant = p < alpha;
        let verdict = if -delta > min_delta && significant {
            Verdict::Regressed
        } else if delta > min_delta && significant {
            Verdict::Improved
        } else {
            Verdict::NoSignificantChange
        };
        let reason = format!(
            "recall@{k} Δ {delta:+.4} ({} min-delta {min_delta}), McNemar p = {p:.4} ({} alpha {alpha})",
            if delta.abs() > min_delta { "beyond" } else { "within" },
            if significant { "<" } else { "≥" }
        );
        return (verdict, reason);
    }
    if let Some(interval) = composite.and_then(|c| c.difference) {
        let delta = interval.estimate;
        let verdict = if -delta > min_delta && interval.high < 0.0 {
            Verdict::Regressed
        } else if delta > min_delta && interval.low > 0.0 {
            Verdict::Improved
        } else {
            Verdict::NoSignificantChange
        };
        let reason = format!(
            "no recall@{k} pair; composite Δ {delta:+.4}, {:.0}% interval [{:+.4}, {:+.4}]",
            interval.confidence * 100.0,
            interval.low,
            interval.high
        );
        return (verdict, reason);
    }
    (Verdict::NoSignificantChange, format!("nothing paired at recall@{k}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use lightsout_api::{HarnessName, HarnessRef, ModelRef, PromptRef};
    use lightsout_core::results::LocalStore;
    use lightsout_core::summary::{summarise_run, DatasetSummary, RunIdentity, ScoringSettings};
    use lightsout_core::trial_record::HeldResult;
    use lightsout_swe_prbench::{ProtocolReading, SimilarityKind};

    const KS: [u32; 3] = [1, 3, 5];

    fn variant(model: &str) -> Variant {
        let harness = HarnessRef { name: HarnessName::SingleShot, version: "1.0.0".into() };
        Variant {
            id: format!("id-{model}"),
            name: format!("{model}/single-shot@1.0.0/default"),
            model: ModelRef { name: model.into(), provider: "openai".into() },
            reasoning_effort: None,
            harness,
            prompt: PromptRef::default_preset(),
        }
    }

    fn verdicts(first_hit_rank: Option<u32>) -> Verdicts {
        serde_json::from_value(serde_json::json!({
            "protocol": "crbugbench", "prompt_version": "v1", "vote_rule": "majority", "judges": [],
            "judged_findings": 5, "truth_items": 1, "votes": [], "decisions": [], "caught": {},
            "first_hit_rank": first_hit_rank,
            "usage": {"input_tokens": 0, "output_tokens": 0, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
            "cost_usd": 0.001, "unpriced_calls": 0, "calls": 1,
        }))
        .unwrap()
    }

    /// A trial: its outcome and, when ok, the rank of its first hit (if any).
    #[derive(Clone, Copy)]
    enum T {
        Hit(u32),
        Miss,
        Failed,
        Infra,
    }

    fn held(outcome: Outcome, duration_ms: u64) -> Arc<HeldResult> {
        Arc::new(HeldResult {
            attempt: 1,
            outcome,
            error: None,
            finished_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            duration_ms,
            usage: Default::default(),
            cost_usd: Some(0.01),
            model_calls: 1,
            findings: 3,
            review_words: 100,
            scripted_model: false,
            trajectory: None,
        })
    }

    /// A run of `variants` (model names), each with one trial per task (`task-00`, …) per
    /// repeat, as `trials[variant][repeat][task]`; its summary computed by the summary's own code.
    fn run(name: &str, variants: &[(&str, Vec<Vec<T>>)], seed: u64) -> ComparedRun {
        let plan_variants: Vec<Variant> = variants.iter().map(|(model, _)| variant(model)).collect();
        let (mut records, mut trial_refs) = (Vec::new(), Vec::new());
        for (v, (_, repeats)) in variants.iter().enumerate() {
            for (repeat, trials) in repeats.iter().enumerate() {
                for (task, trial) in trials.iter().enumerate() {
                    let (result, verdict) = match *trial {
                        T::Hit(rank) => (held(Outcome::Ok, 1000 + task as u64), Some(verdicts(Some(rank)))),
                        T::Miss => (held(Outcome::Ok, 1000 + task as u64), Some(verdicts(None))),
                        T::Failed => (held(Outcome::AgentFailed, 500), None),
                        T::Infra => (held(Outcome::InfraFailed, 10), None),
                    };
                    trial_refs.push(StoredTrialRef {
                        id: format!("trial-{v}-{repeat}-{task}"),
                        attempt: 1,
                        attempts: 1,
                    });
                    records.push(TrialRecord {
                        earlier_attempts: None,
                        variant: v as u32,
                        task: format!("task-{task:02}"),
                        context_config: None,
                        repeat: repeat as u32,
                        track: None,
                        difficulty: None,
                        language: None,
                        truth_items: 1,
                        swe_prbench_input: None,
                        result: Some(result),
                        verdicts: verdict.map(Arc::new),
                    });
                }
            }
        }
        let settings = ScoringSettings {
            protocol: ScoringProtocol::CrBugBench,
            ks: KS.to_vec(),
            bootstrap: BootstrapConfig { resamples: 2000, ..BootstrapConfig::with_seed(seed) },
            context_config: None,
            reading: ProtocolReading::default(),
            similarity: SimilarityKind::Lexical,
            judge_model: String::new(),
            departures: Default::default(),
        };
        let identity = RunIdentity {
            name: name.into(),
            spec_hash: format!("hash-{name}"),
            generated_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
        };
        let dataset =
            DatasetSummary { format: "crbugbench".into(), source: "file://x".into(), tasks: 50, skipped_lines: 0 };
        let summary = summarise_run(identity, dataset, &settings, &plan_variants, &records);
        ComparedRun {
            uri: format!("file:///results/runs/{name}"),
            name: name.into(),
            spec_hash: format!("hash-{name}"),
            variants: plan_variants,
            summary,
            records,
            trials: trial_refs,
        }
    }

    /// 50 tasks, one repeat: a hit at rank 1 on the tasks in `hits`, a miss elsewhere.
    fn hits_on(hits: impl Fn(usize) -> bool) -> Vec<Vec<T>> {
        vec![(0..50).map(|t| if hits(t) { T::Hit(1) } else { T::Miss }).collect()]
    }

    /// The two-sided exact McNemar p-value, by hand: 2·P(X ≤ min(b, c)), X ~ Bin(b + c, ½),
    /// in exact integers.
    fn mcnemar_by_hand(b: u64, c: u64) -> f64 {
        let (n, m) = (b + c, b.min(c));
        let mut choose: u128 = 1;
        let mut tail: u128 = 0;
        for k in 0..=m {
            if k > 0 {
                choose = choose * u128::from(n - k + 1) / u128::from(k);
            }
            tail += choose;
        }
        (2.0 * tail as f64 / 2f64.powi(n as i32)).min(1.0)
    }

    #[test]
    fn identical_runs_show_no_significant_change() {
        let trials = hits_on(|t| t % 5 != 0);
        let baseline = run("base", &[("m1", trials.clone()), ("m2", hits_on(|t| t < 10))], 7);
        let candidate = run("cand", &[("m1", trials), ("m2", hits_on(|t| t < 10))], 7);
        let comparison = compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap();
        assert_eq!(comparison.verdict, Verdict::NoSignificantChange);
        assert_eq!(comparison.settings.k, Some(5), "the headline k defaults to the largest");
        assert_eq!(comparison.k, KS.to_vec());
        assert!(comparison.added.is_empty() && comparison.removed.is_empty());
        assert_eq!(comparison.variants.len(), 2);
        for v in &comparison.variants {
            assert_eq!(v.verdict, Verdict::NoSignificantChange, "{v:?}");
            assert_eq!((v.pairs, v.tasks, v.unpaired_baseline, v.unpaired_candidate), (50, 50, 0, 0));
            for k in KS {
                let at = &v.by_k[&k.to_string()];
                assert_eq!(at.mcnemar.p_value, 1.0);
                assert_eq!((at.mcnemar.baseline_only, at.mcnemar.candidate_only), (0, 0));
                let d = at.recall_difference.difference.unwrap();
                assert_eq!((d.estimate, d.low, d.high), (0.0, 0.0, 0.0));
            }
            assert_eq!(v.agent_usd_per_trial.delta, Some(0.0));
            assert_eq!(v.latency_p50_ms.delta, Some(0.0));
            assert_eq!(v.latency_p95_ms.delta, Some(0.0));
            assert!(v.composite.is_none());
        }
    }

    #[test]
    fn a_planted_drop_is_regressed_with_the_exact_mcnemar_p_value() {
        // Baseline hits tasks 0–39 (40 of 50); the candidate hits 0–14 and 40–44 (20 of 50):
        // both hit 15, baseline only b = 25, candidate only c = 5.
        let baseline = run("base", &[("m1", hits_on(|t| t < 40))], 7);
        let candidate = run("cand", &[("m1", hits_on(|t| t < 15 || (40..45).contains(&t)))], 7);
        let comparison = compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap();
        assert_eq!(comparison.verdict, Verdict::Regressed);
        let v = &comparison.variants[0];
        assert_eq!(v.verdict, Verdict::Regressed, "{}", v.reason);
        for k in KS {
            let at = &v.by_k[&k.to_string()];
            let m = &at.mcnemar;
            assert_eq!((m.pairs, m.both_hit, m.both_miss, m.baseline_only, m.candidate_only), (50, 15, 5, 25, 5));
            // 2·(C(30,0) + … + C(30,5))/2³⁰ = 2·174437/2³⁰
            let expected = mcnemar_by_hand(25, 5);
            assert_eq!(expected, 2.0 * 174_437.0 / 1_073_741_824.0);
            assert!((m.p_value - expected).abs() <= 1e-12 * expected, "{} vs {expected}", m.p_value);
            let d = &at.recall_difference;
            assert_eq!((d.baseline_mean, d.candidate_mean), (Some(0.8), Some(0.4)));
            let interval = d.difference.unwrap();
            assert!((interval.estimate + 0.4).abs() < 1e-12);
            assert!(interval.low <= interval.estimate && interval.high < 0.0, "{interval:?}");
        }
        // The paired means are the summary's recall@k when every trial pairs.
        let summary_recall = |run: &ComparedRun| run.summary.variants[0].recall["5"];
        assert_eq!((summary_recall(&baseline), summary_recall(&candidate)), (0.8, 0.4));

        // The threshold: a drop of 0.4 is not more than a minimum of 0.4, and p ≈ 3.2e-4 is not
        // below an alpha of 1e-4.
        for settings in [
            CompareSettings { min_delta: 0.4, ..Default::default() },
            CompareSettings { alpha: 1e-4, ..Default::default() },
        ] {
            let comparison = compare_runs(&baseline, &candidate, &settings).unwrap();
            assert_eq!(comparison.verdict, Verdict::NoSignificantChange, "{settings:?}");
        }
        assert_eq!(
            compare_runs(&baseline, &candidate, &CompareSettings { min_delta: 0.39, ..Default::default() })
                .unwrap()
                .verdict,
            Verdict::Regressed
        );
    }

    #[test]
    fn an_improvement_is_improved_and_a_small_drop_is_not_significant() {
        let baseline = run("base", &[("m1", hits_on(|t| t < 20))], 3);
        let candidate = run("cand", &[("m1", hits_on(|t| t < 40))], 3);
        let comparison = compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap();
        assert_eq!(comparison.verdict, Verdict::Improved);
        let m = &comparison.variants[0].by_k["5"].mcnemar;
        assert_eq!((m.baseline_only, m.candidate_only), (0, 20));
        assert_eq!(m.p_value, mcnemar_by_hand(0, 20));

        // Two discordant pairs, both against the candidate: p = 2·(½)² = 0.5.
        let candidate = run("cand", &[("m1", hits_on(|t| t < 18))], 3);
        let comparison = compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap();
        assert_eq!(comparison.verdict, Verdict::NoSignificantChange);
        assert_eq!(comparison.variants[0].by_k["5"].mcnemar.p_value, 0.5);
    }

    #[test]
    fn the_headline_k_decides() {
        // The candidate's hits move from rank 1 to rank 4: recall@1 drops, recall@5 does not.
        let baseline = run("base", &[("m1", hits_on(|t| t < 30))], 3);
        let moved = vec![(0..50).map(|t| if t < 30 { T::Hit(4) } else { T::Miss }).collect()];
        let candidate = run("cand", &[("m1", moved)], 3);
        let at = |k| compare_runs(&baseline, &candidate, &CompareSettings { k: Some(k), ..Default::default() });
        assert_eq!(at(5).unwrap().verdict, Verdict::NoSignificantChange);
        assert_eq!(at(1).unwrap().verdict, Verdict::Regressed);
        let error = at(2).unwrap_err().to_string();
        assert!(error.contains("k=2") && error.contains("[1, 3, 5]"), "{error}");
    }

    #[test]
    fn variants_in_one_run_only_are_added_or_removed() {
        let trials = hits_on(|t| t < 25);
        let baseline = run("base", &[("m1", trials.clone()), ("old", trials.clone())], 1);
        let candidate = run("cand", &[("new", trials.clone()), ("m1", trials.clone())], 1);
        let comparison = compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap();
        assert_eq!(comparison.removed, vec!["old/single-shot@1.0.0/default".to_string()]);
        assert_eq!(comparison.added, vec!["new/single-shot@1.0.0/default".to_string()]);
        assert_eq!(comparison.variants.len(), 1);
        assert_eq!(comparison.variants[0].variant, "m1/single-shot@1.0.0/default");
        assert_eq!(comparison.variants[0].pairs, 50);

        let other = run("other", &[("new", trials)], 1);
        let error = compare_runs(&baseline, &other, &CompareSettings::default()).unwrap_err().to_string();
        assert!(error.contains("no common variant") && error.contains("old/single-shot@1.0.0/default"), "{error}");
    }

    #[test]
    fn trials_are_scored_as_the_summary_scores_them_and_paired_by_task_and_repeat() {
        // Two repeats. The candidate's agent failures count as misses; its infrastructure
        // failures are not scored and leave their baseline partners unpaired.
        let mut baseline_trials = hits_on(|t| t < 30);
        baseline_trials.push(hits_on(|t| t < 30).remove(0));
        let mut candidate_trials = baseline_trials.clone();
        for trial in &mut candidate_trials[0][..10] {
            *trial = T::Failed;
        }
        candidate_trials[1][45] = T::Infra;
        candidate_trials[1][0] = T::Hit(6); // beyond every k: a miss
        let baseline = run("base", &[("m1", baseline_trials)], 11);
        let candidate = run("cand", &[("m1", candidate_trials)], 11);
        let comparison = compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap();
        let v = &comparison.variants[0];
        assert_eq!((v.pairs, v.tasks, v.unpaired_baseline, v.unpaired_candidate), (99, 50, 1, 0));
        let m = &v.by_k["5"].mcnemar;
        assert_eq!((m.baseline_only, m.candidate_only), (11, 0));
        assert_eq!(m.p_value, mcnemar_by_hand(11, 0));
        assert_eq!(v.verdict, Verdict::Regressed);
        // The candidate's paired mean is its summary recall (the unpaired trial is an
        // infrastructure failure, not scored there either).
        let d = &v.by_k["5"].recall_difference;
        assert_eq!(d.candidate_mean, Some(candidate.summary.variants[0].recall["5"]));
    }

    #[test]
    fn the_same_runs_give_the_same_comparison_bit_for_bit() {
        let baseline = run("base", &[("m1", hits_on(|t| t % 3 == 0)), ("m2", hits_on(|t| t % 2 == 0))], 5);
        let candidate = run("cand", &[("m1", hits_on(|t| t % 4 == 0)), ("m2", hits_on(|t| t % 2 == 1))], 5);
        let once =
            serde_json::to_string(&compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap()).unwrap();
        let again =
            serde_json::to_string(&compare_runs(&baseline, &candidate, &CompareSettings::default()).unwrap()).unwrap();
        assert_eq!(once, again);
        // The order the store listed the trials in does not matter.
        let mut shuffled = candidate.clone();
        shuffled.records.reverse();
        let reordered =
            serde_json::to_string(&compare_runs(&baseline, &shuffled, &CompareSettings::default()).unwrap()).unwrap();
        assert_eq!(once, reordered);
        let parsed: RunComparison = serde_json::from_str(&once).unwrap();
        assert_eq!(parsed.variants.len(), 2);
        assert!(once.contains("\"verdict\":\"Regressed\"") || once.contains("\"verdict\":\"NoSignificantChange\""));
    }

    #[test]
    fn a_composite_only_variant_is_judged_on_the_composite_interval() {
        let settings = CompareSettings { k: Some(5), ..Default::default() };
        let composite = |estimate: f64, low: f64, high: f64| CompositeComparison {
            pairs: 20,
            tasks: 20,
            baseline: Some(0.5),
            candidate: Some(0.5 + estimate),
            difference: Some(Interval { estimate, low, high, confidence: 0.95, resamples: 100, seed: 0 }),
        };
        let verdict = |c: CompositeComparison| variant_verdict(&settings, &BTreeMap::new(), Some(&c)).0;
        assert_eq!(verdict(composite(-0.2, -0.3, -0.1)), Verdict::Regressed);
        assert_eq!(verdict(composite(-0.2, -0.3, 0.01)), Verdict::NoSignificantChange);
        assert_eq!(verdict(composite(0.2, 0.1, 0.3)), Verdict::Improved);
        assert_eq!(variant_verdict(&settings, &BTreeMap::new(), None).0, Verdict::NoSignificantChange);
        assert_eq!(Verdict::overall([Verdict::Improved, Verdict::Regressed]), Verdict::Regressed);
        assert_eq!(Verdict::overall([Verdict::NoSignificantChange, Verdict::Improved]), Verdict::Improved);
        assert_eq!(Verdict::overall([]), Verdict::NoSignificantChange);
    }

    #[test]
    fn bad_settings_are_refused() {
        let baseline = run("base", &[("m1", hits_on(|t| t < 20))], 3);
        for settings in [
            CompareSettings { alpha: 0.0, ..Default::default() },
            CompareSettings { min_delta: -0.1, ..Default::default() },
            CompareSettings { k: Some(0), ..Default::default() },
        ] {
            assert!(compare_runs(&baseline, &baseline, &settings).is_err(), "{settings:?}");
        }
    }

    #[tokio::test]
    async fn a_run_is_read_from_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let missing = load_run(&store, "nope").await.unwrap_err().to_string();
        assert!(missing.contains("runs/nope") && missing.contains("no run.json"), "{missing}");

        let v = variant("m1");
        let run_json = serde_json::json!({"name": "r", "spec_hash": "h", "spec": {"retries": 1}, "variants": [v]});
        store.put("runs/r/run.json", &serde_json::to_vec(&run_json).unwrap()).await.unwrap();
        let no_summary = load_run(&store, "r").await.unwrap_err().to_string();
        assert!(no_summary.contains("no summary.json"), "{no_summary}");
        let base = run("r", &[("m1", hits_on(|t| t < 1))], 1);
        store.put("runs/r/summary.json", &serde_json::to_vec(&base.summary).unwrap()).await.unwrap();

        let result = |trial: &str, task: &str, attempt: u32, outcome: &str| {
            serde_json::json!({
                "schema": "lightsout.dev/trial-result/v1", "run": "r", "variant_id": v.id, "variant": v.name,
                "trial_id": trial, "task_id": task, "repeat": 0, "attempt": attempt, "outcome": outcome,
                "harness": {"name": "single-shot", "version": "1.0.0"}, "model": "m1", "provider": "openai",
                "prompt_sha256": "ab".repeat(32), "started_at": "2026-12-01T08:00:00Z",
                "finished_at": "2026-12-01T08:10:00Z", "duration_ms": 1000,
                "usage": {"input_tokens": 10, "output_tokens": 2, "cached_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0},
                "cost_usd": 0.5, "model_calls": 1, "findings": 1, "review_words": 50,
            })
        };
        let put = |key: String, value: serde_json::Value| {
            let store = store.clone();
            async move { store.put(&key, &serde_json::to_vec(&value).unwrap()).await.unwrap() }
        };
        // t1: an infrastructure failure, then ok and judged; t2: infrastructure failures only,
        // attempts left (not final); t3: ok, unjudged.
        put(format!("runs/r/{}/t1/attempt-1/result.json", v.id), result("t1", "a", 1, "infra-failed")).await;
        put(format!("runs/r/{}/t1/attempt-2/result.json", v.id), result("t1", "a", 2, "ok")).await;
        put(format!("runs/r/{}/t1/attempt-2/verdicts.json", v.id), serde_json::to_value(verdicts(Some(2))).unwrap())
            .await;
        put(format!("runs/r/{}/t2/attempt-1/result.json", v.id), result("t2", "b", 1, "infra-failed")).await;
        put(format!("runs/r/{}/t3/attempt-1/result.json", v.id), result("t3", "c", 1, "ok")).await;
        // t4: task a again, in a configuration of the context axis: a trial of its own.
        let mut in_context = result("t4", "a", 1, "ok");
        in_context["context_config"] = "config_B".into();
        put(format!("runs/r/{}/t4/attempt-1/result.json", v.id), in_context).await;
        let loaded = load_run(&store, "r").await.unwrap();
        let of_task_a: Vec<_> = loaded.records.iter().filter(|r| r.task == "a").collect();
        assert_eq!(of_task_a.len(), 2);
        let contexts: std::collections::BTreeSet<_> = of_task_a.iter().map(|r| r.context_config).collect();
        assert_eq!(contexts, [None, Some(lightsout_api::ContextConfig::ConfigB)].into());
        assert_ne!(of_task_a[0].pairing_index(), of_task_a[1].pairing_index(), "the two never pair as one");
        assert_eq!((loaded.name.as_str(), loaded.spec_hash.as_str()), ("r", "h"));
        assert_eq!(loaded.uri, format!("file://{}/runs/r", dir.path().display()));
        let mut records: Vec<(String, u32, Option<u32>)> = loaded
            .records
            .iter()
            .map(|r| {
                (
                    r.task.clone(),
                    r.result.as_ref().unwrap().attempt,
                    r.verdicts.as_ref().and_then(|v| v.first_hit_rank()),
                )
            })
            .collect();
        records.sort();
        assert_eq!(
            records,
            vec![("a".to_string(), 1, None), ("a".to_string(), 2, Some(2)), ("c".to_string(), 1, None)]
        );
    }
}
