//! `lightsout compare <baseline> <candidate>`: a candidate run against a baseline run, paired by
//! task, with a verdict (see `lightsout_report::compare` for the statistics and the rule).
//!
//! Exit codes, for CI pipelines: 0 NoSignificantChange or Improved, 1 Regressed, 2 an error
//! (a run that cannot be read, no common variant, bad settings, …). Nothing is written.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use lightsout_report::compare::{compare_runs, load_run, CompareSettings, Delta, RunComparison, Verdict};
use lightsout_report::terminal::aligned_table;

use crate::results_uri::{open_run, S3Flags};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline run's results: file://DIR/runs/NAME or s3://BUCKET/PREFIX/runs/NAME.
    baseline: String,
    /// The candidate run's results, as the baseline.
    candidate: String,
    #[command(flatten)]
    settings: SettingsFlags,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    s3: S3Flags,
}

/// When a change counts ([`CompareSettings`]): `lightsout compare`'s and `lightsout report
/// --baseline`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct SettingsFlags {
    /// The headline k the verdict is taken at (default: the largest k of both runs).
    #[arg(long)]
    k: Option<u32>,
    /// Significance level of McNemar's exact test.
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// The smallest absolute change of recall@k that counts (0.05 = five points).
    #[arg(long = "min-delta", default_value_t = 0.0)]
    min_delta: f64,
}

impl SettingsFlags {
    pub fn settings(&self) -> CompareSettings {
        CompareSettings { k: self.k, alpha: self.alpha, min_delta: self.min_delta }
    }
}

/// Runs the comparison and maps its verdict to the exit code.
pub fn main(args: CompareArgs) -> ExitCode {
    match compare(&args) {
        Ok(comparison) => {
            let text = if args.json {
                serde_json::to_string_pretty(&comparison).map(|json| json + "\n").map_err(anyhow::Error::from)
            } else {
                Ok(table(&comparison))
            };
            if let Err(e) = text.and_then(crate::output::print) {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
            match comparison.verdict {
                Verdict::Regressed => ExitCode::from(1),
                Verdict::Improved | Verdict::NoSignificantChange => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn compare(args: &CompareArgs) -> anyhow::Result<RunComparison> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut runs = Vec::new();
        for (what, uri) in [("baseline", &args.baseline), ("candidate", &args.candidate)] {
            let (store, name) = open_run(uri, &args.s3).with_context(|| format!("{what} {uri}"))?;
            // load_run's errors name the run's URI (or the file in it).
            runs.push(load_run(&store, &name).await.with_context(|| format!("{what} run"))?);
        }
        compare_runs(&runs[0], &runs[1], &args.settings.settings())
    })
}

fn delta(d: &Delta, format: impl Fn(f64) -> String) -> String {
    d.delta.map(format).unwrap_or_else(|| "-".into())
}

/// The terminal table: a row per variant, then added and removed variants, the notices and the
/// overall verdict.
fn table(c: &RunComparison) -> String {
    let mut out = String::new();
    let k = c.settings.k.unwrap_or_default();
    let key = k.to_string();
    let _ = writeln!(out, "{} ({}) → {} ({})", c.baseline.name, c.baseline.uri, c.candidate.name, c.candidate.uri);
    for notice in &c.notices {
        let _ = writeln!(out, "NOTE: {notice}");
    }
    let composite = c.variants.iter().any(|v| v.composite.is_some());
    let confidence = c.bootstrap.confidence * 100.0;
    let mut header = vec![
        "variant".to_string(),
        "pairs".into(),
        format!("R@{k} base → cand"),
        format!("Δ [{confidence:.0}% CI]"),
        "McNemar p".into(),
    ];
    if composite {
        header.push(format!("composite Δ [{confidence:.0}% CI]"));
    }
    header.extend(["USD/trial Δ".to_string(), "p50 Δ s".into(), "verdict".into()]);
    let mut rows = vec![header];
    for v in &c.variants {
        let at = v.by_k.get(&key);
        let d = at.map(|a| &a.recall_difference);
        let mut row = vec![v.variant.clone(), v.pairs.to_string()];
        row.push(match d.and_then(|d| d.baseline_mean.zip(d.candidate_mean)) {
            Some((b, c)) => format!("{b:.2} → {c:.2}"),
            None => "-".into(),
        });
        row.push(match d.and_then(|d| d.difference) {
            Some(i) => format!("{:+.2} [{:+.2},{:+.2}]", i.estimate, i.low, i.high),
            None => "-".into(),
        });
        row.push(at.map(|a| format_p(a.mcnemar.p_value)).unwrap_or_else(|| "-".into()));
        if composite {
            row.push(match v.composite.as_ref().and_then(|c| c.difference) {
                Some(i) => format!("{:+.3} [{:+.3},{:+.3}]", i.estimate, i.low, i.high),
                None => "-".into(),
            });
        }
        row.push(delta(&v.agent_usd_per_trial, |d| format!("{d:+.4}")));
        row.push(delta(&v.latency_p50_ms, |d| format!("{:+.1}", d / 1000.0)));
        row.push(v.verdict.to_string());
        rows.push(row);
    }
    out.push_str(&aligned_table(&rows));
    for name in &c.added {
        let _ = writeln!(out, "added (candidate only, not compared): {name}");
    }
    for name in &c.removed {
        let _ = writeln!(out, "removed (baseline only, not compared): {name}");
    }
    let _ = writeln!(
        out,
        "verdict: {} (recall@{k}; alpha {}, min-delta {}; paired by task and repeat)",
        c.verdict, c.settings.alpha, c.settings.min_delta
    );
    out
}

fn format_p(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}
