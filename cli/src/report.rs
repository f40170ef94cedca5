//! `lightsout report`: the run's HTML report, written next to its results, and a compact table;
//! with `--baseline`, the run compared with that baseline run, whose `comparison.json` is
//! written beside the report.

use std::path::Path;

use anyhow::Context;
use lightsout_core::results::RunLayout;
use lightsout_report as report;
use lightsout_report::compare::{compare_runs, load_run, store_comparison};

use crate::compare::SettingsFlags;
use crate::results_uri::{open_run, S3Flags};

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The run's results: file://DIR/runs/NAME or s3://BUCKET/PREFIX/runs/NAME.
    results: String,
    /// Write the report to this file instead of next to the results (no comparison.json is
    /// written then).
    #[arg(short = 'o', long = "out")]
    out: Option<std::path::PathBuf>,
    /// Compare the run with this baseline run's results and show what changed (as `lightsout
    /// compare BASELINE RESULTS`). Without it, a comparison.json already beside the run (a
    /// schedule's) is shown.
    #[arg(long, value_name = "URI")]
    baseline: Option<String>,
    #[command(flatten)]
    settings: SettingsFlags,
    #[command(flatten)]
    s3: S3Flags,
}

pub fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let (store, run) = open_run(&args.results, &args.s3)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut data = match &args.baseline {
            None => report::load(&store, &run).await?,
            Some(baseline_uri) => {
                let (baseline_store, baseline_run) =
                    open_run(baseline_uri, &args.s3).with_context(|| format!("baseline {baseline_uri}"))?;
                let baseline = load_run(&baseline_store, &baseline_run).await.context("baseline run")?;
                let candidate = load_run(&store, &run).await?;
                let comparison = compare_runs(&baseline, &candidate, &args.settings.settings())?;
                if args.out.is_none() {
                    let stored = store_comparison(&store, &comparison).await?;
                    crate::output::print(format!("comparison: {stored} ({})\n", comparison.verdict))?;
                }
                report::load_compared(&store, &candidate, comparison).await?
            }
        };
        let written = match &args.out {
            Some(path) => {
                // Artifact links stay relative to the run's directory: absolute when the results
                // are local, so they still resolve from wherever the file is written.
                if let Some(local) = store.local_root() {
                    let dir = std::path::absolute(local.join(RunLayout::new(&run).run_dir()))?;
                    data.link_base = format!("{}/", dir.display());
                }
                write_file(path, &report::render_html(&data))?;
                path.display().to_string()
            }
            None => report::store_report(&store, &run, &data).await?,
        };
        crate::output::print(format!("{}report: {written}\n", report::terminal_table(&data.summary)))
    })
}

fn write_file(path: &Path, html: &str) -> anyhow::Result<()> {
    std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))
}
