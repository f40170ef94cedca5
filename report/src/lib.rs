//! `lightsout report`: one self-contained HTML file (inline CSS and SVG, no script, no external
//! asset) and a compact terminal table for a run's results, and, when the run has been compared
//! with a baseline, what changed and what it cost.
//!
//! Every number shown comes from `summary.json` ([`RunSummary`]), from each trial's own
//! `result.json` and `verdicts.json` as stored (the per-trial table), or from the comparison
//! ([`RunComparison`], `comparison.json`): nothing is recomputed here (the one derived figure,
//! the Pareto frontier, only orders the summary's own numbers). The run is read once, by the
//! comparison's loader ([`load_run`]), so a report and a comparison of the same run see the same
//! trials. Links to a trial's artifacts are relative to the run's directory (`runs/<run>/`),
//! where `report.html` is written.

pub mod compare;
mod comparison;
mod html;
pub mod terminal;

use std::collections::{BTreeMap, HashMap};

use anyhow::Context as _;

use crate::compare::{load_run, ComparedRun, RunComparison, COMPARISON_FILE};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::scoring::Verdicts;
use lightsout_core::summary::RunSummary;
use lightsout_core::trial::Outcome;

pub use html::render_html;
pub use terminal::terminal_table;

/// The report's name, next to `summary.json`.
pub const REPORT_FILE: &str = "report.html";

/// Artifacts a trial's row links to, when stored.
pub const LINKED_ARTIFACTS: [&str; 5] =
    ["review.md", "findings.json", "verdicts.json", "result.json", "trajectory.jsonl.zst"];

/// The most trial rows the HTML lists: past a few thousand rows a page is slow to open and
/// nobody reads it; the artifacts of every trial stay in the store, and the summary counts them all.
pub const TRIAL_ROWS_SHOWN: usize = 2000;

/// What a report shows: the run's summary and its trials, and its comparison with a baseline.
#[derive(Debug, Clone)]
pub struct ReportData {
    pub summary: RunSummary,
    /// One row per trial with a final result, in variant order, then task, repeat.
    pub trials: Vec<TrialRow>,
    /// Prefix of every artifact link: empty when the report sits in the run's directory.
    pub link_base: String,
    /// The run (as candidate) against a baseline.
    pub comparison: Option<RunComparison>,
    /// What the reader must know about the report itself (e.g. a stored comparison not shown).
    pub notices: Vec<String>,
}

/// A trial's final attempt, from its `result.json` and `verdicts.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRow {
    pub variant_id: String,
    pub variant: String,
    pub trial_id: String,
    pub task_id: String,
    /// Its configuration of the `matrix.contextConfigs` axis.
    pub context_config: Option<lightsout_api::ContextConfig>,
    pub repeat: u32,
    pub attempt: u32,
    /// Attempts with a `result.json`.
    pub attempts: u32,
    pub outcome: Outcome,
    /// The error's leading reason (`Evicted:`, …); its whole text is in `result.json`.
    pub error: Option<String>,
    pub findings: u32,
    pub review_words: u32,
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    pub turns: Option<u32>,
    pub tool_calls: Option<u32>,
    /// Whether the attempt has verdicts, and the best rank of a finding that caught a
    /// ground-truth item.
    pub judged: bool,
    pub first_hit_rank: Option<u32>,
    /// SWE-PRBench: the PR's composite score.
    pub composite: Option<f64>,
    /// The attempt's artifacts among [`LINKED_ARTIFACTS`] that are stored.
    pub artifacts: Vec<String>,
}

impl TrialRow {
    /// The artifact's key relative to the run's directory.
    pub fn artifact_path(&self, name: &str) -> String {
        format!("{}/{}/attempt-{}/{name}", self.variant_id, self.trial_id, self.attempt)
    }
}

/// The linked artifacts each stored attempt has: (trial id, attempt) → names among
/// [`LINKED_ARTIFACTS`].
pub type ArtifactIndex = HashMap<(String, u32), Vec<&'static str>>;

/// Reads a run's results ([`load_run`]), its artifact names, and the stored comparison with its
/// baseline when there is one (a comparison of an earlier run of the same name is not shown,
/// and a notice says so).
pub async fn load<S: ResultStore>(store: &S, run: &str) -> anyhow::Result<ReportData> {
    let loaded = load_run(store, run).await?;
    let artifacts = list_artifacts(store, run).await?;
    let mut data = build(&loaded, &artifacts);
    let key = format!("{}/{COMPARISON_FILE}", RunLayout::new(run).run_dir());
    if let Some(bytes) = store.get(&key).await.with_context(|| format!("reading {}", store.uri(&key)))? {
        let comparison: RunComparison =
            serde_json::from_slice(&bytes).with_context(|| format!("{} is not a valid comparison", store.uri(&key)))?;
        if comparison.candidate.spec_hash == loaded.spec_hash && comparison.candidate.name == loaded.name {
            data.comparison = Some(comparison);
        } else {
            data.notices.push(format!(
                "{} compares an earlier run named {} (spec {}), not this one: not shown",
                store.uri(&key),
                comparison.candidate.name,
                comparison.candidate.spec_hash
            ));
        }
    }
    Ok(data)
}

/// The report of `candidate` showing its comparison with a baseline.
pub async fn load_compared<S: ResultStore>(
    store: &S,
    candidate: &ComparedRun,
    comparison: RunComparison,
) -> anyhow::Result<ReportData> {
    let mut data = build(candidate, &list_artifacts(store, &candidate.name).await?);
    data.comparison = Some(comparison);
    Ok(data)
}

/// Writes the report beside the run's results (`report.html`); returns its URI.
pub async fn store_report<S: ResultStore>(store: &S, run: &str, data: &ReportData) -> anyhow::Result<String> {
    let key = format!("{}/{REPORT_FILE}", RunLayout::new(run).run_dir());
    store.put(&key, render_html(data).as_bytes()).await.with_context(|| format!("writing {}", store.uri(&key)))?;
    Ok(store.uri(&key))
}

/// Lists the run's stored files: which of [`LINKED_ARTIFACTS`] each attempt has.
pub async fn list_artifacts<S: ResultStore>(store: &S, run: &str) -> anyhow::Result<ArtifactIndex> {
    let dir = RunLayout::new(run).run_dir();
    let keys = store.list(&dir).await.with_context(|| format!("listing {}", store.uri(&dir)))?;
    let mut index = ArtifactIndex::new();
    for key in &keys {
        // runs/<run>/<variant>/<trial>/attempt-<n>/<file>
        let parts: Vec<&str> = key.split('/').collect();
        let [_, _, _, trial, attempt, file] = parts.as_slice() else { continue };
        let Some(number) = attempt.strip_prefix("attempt-").and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(name) = LINKED_ARTIFACTS.iter().find(|name| *name == file) else { continue };
        index.entry((trial.to_string(), number)).or_default().push(name);
    }
    Ok(index)
}

/// The report of a loaded run, with no comparison: rows in the summary's variant order, then
/// task and repeat, artifacts in [`LINKED_ARTIFACTS`]' order.
pub fn build(run: &ComparedRun, artifacts: &ArtifactIndex) -> ReportData {
    let order: BTreeMap<&str, usize> =
        run.summary.variants.iter().enumerate().map(|(i, v)| (v.id.as_str(), i)).collect();
    let mut rows: Vec<TrialRow> = run
        .records
        .iter()
        .zip(&run.trials)
        .filter_map(|(record, trial)| {
            let result = record.result.as_deref()?;
            let variant = &run.variants[record.variant as usize];
            let stored = artifacts.get(&(trial.id.clone(), trial.attempt));
            let verdicts = record.verdicts.as_deref();
            Some(TrialRow {
                variant_id: variant.id.clone(),
                variant: variant.name.clone(),
                trial_id: trial.id.clone(),
                task_id: record.task.clone(),
                context_config: record.context_config,
                repeat: record.repeat,
                attempt: trial.attempt,
                attempts: trial.attempts,
                outcome: result.outcome,
                error: result.error.as_deref().map(str::to_string),
                findings: result.findings,
                review_words: result.review_words,
                cost_usd: result.cost_usd,
                duration_ms: result.duration_ms,
                turns: result.trajectory.as_ref().map(|t| t.turns),
                tool_calls: result.trajectory.as_ref().map(|t| t.tool_calls),
                judged: verdicts.is_some(),
                first_hit_rank: verdicts.and_then(Verdicts::first_hit_rank),
                composite: match verdicts {
                    Some(Verdicts::SwePrBench(pr)) => Some(pr.composite()),
                    _ => None,
                },
                artifacts: LINKED_ARTIFACTS
                    .iter()
                    .filter(|name| stored.is_some_and(|s| s.contains(name)))
                    .map(|s| s.to_string())
                    .collect(),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        let rank = |r: &TrialRow| order.get(r.variant_id.as_str()).copied().unwrap_or(usize::MAX);
        (rank(a), &a.variant_id, &a.task_id, a.context_config, a.repeat).cmp(&(
            rank(b),
            &b.variant_id,
            &b.task_id,
            b.context_config,
            b.repeat,
        ))
    });
    ReportData {
        summary: run.summary.clone(),
        trials: rows,
        link_base: String::new(),
        comparison: None,
        notices: Vec::new(),
    }
}

/// `text` safe inside HTML text and attribute values (quoted with `"` or `'`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A relative path percent-encoded for an `href` (every byte but unreserved characters and `/`).
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The points on the cost–quality Pareto frontier (lower cost and higher quality are better):
/// the indices of the points no other point dominates (no more costly and no worse, and better
/// in one), ordered by cost. Points with a non-finite coordinate are left out; of identical
/// points, the first is kept.
pub fn pareto_frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let finite: Vec<usize> =
        (0..points.len()).filter(|&i| points[i].0.is_finite() && points[i].1.is_finite()).collect();
    let mut frontier: Vec<usize> = finite
        .iter()
        .copied()
        .filter(|&i| {
            let (cost, quality) = points[i];
            !finite.iter().any(|&j| {
                let (c, q) = points[j];
                j != i && c <= cost && q >= quality && (c < cost || q > quality || j < i)
            })
        })
        .collect();
    frontier.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0).then(a.cmp(&b)));
    frontier
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(escape("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
        assert_eq!(escape("a & \"b\""), "a &amp; &quot;b&quot;");
        assert_eq!(escape("gpt-5-mini/low"), "gpt-5-mini/low");
        assert_eq!(encode_path("v1/t<1>/attempt-1/review.md"), "v1/t%3C1%3E/attempt-1/review.md");
        assert_eq!(encode_path("a b\"c"), "a%20b%22c");
    }

    #[test]
    fn the_pareto_frontier_keeps_the_undominated_points_by_cost() {
        // (cost, quality)
        let points = [(0.10, 0.50), (0.05, 0.40), (0.20, 0.45), (0.30, 0.90), (0.05, 0.30), (f64::NAN, 1.0)];
        // 2 is dominated by 0 (cheaper and better), 4 by 1 (same cost, better); 5 has no cost.
        assert_eq!(pareto_frontier(&points), vec![1, 0, 3]);
        assert_eq!(pareto_frontier(&[]), Vec::<usize>::new());
        // Identical points: the first stands for both.
        assert_eq!(pareto_frontier(&[(0.1, 0.5), (0.1, 0.5)]), vec![0]);
        // One point dominating all.
        assert_eq!(pareto_frontier(&[(0.2, 0.1), (0.1, 0.9), (0.3, 0.8)]), vec![1]);
    }
}
