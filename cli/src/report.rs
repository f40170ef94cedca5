//! `lightsout report`: the run's HTML report, written next to its results, and a compact table.

use std::path::Path;

use anyhow::Context;
use lightsout_core::report::{self, REPORT_FILE};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_s3::Results;

use crate::results_uri::{split_run_uri, S3Flags};

pub fn report(uri: &str, out: Option<&Path>, s3: S3Flags) -> anyhow::Result<()> {
    let (root, run) = split_run_uri(uri)?;
    let store = Results::open(&root, s3.connection().as_ref(), S3Flags::credentials())
        .with_context(|| format!("results {root}"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut data = report::load(&store, &run).await?;
        let written = match out {
            Some(path) => {
                // Artifact links stay relative to the run's directory: absolute when the results
                // are local, so they still resolve from wherever the file is written.
                if let Some(local) = store.local_root() {
                    let dir = std::path::absolute(local.join(RunLayout::new(&run).run_dir()))?;
                    data.link_base = format!("{}/", dir.display());
                }
                let html = report::render_html(&data);
                std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))?;
                path.display().to_string()
            }
            None => {
                let key = format!("{}/{REPORT_FILE}", RunLayout::new(&run).run_dir());
                let html = report::render_html(&data);
                store.put(&key, html.as_bytes()).await.with_context(|| format!("writing {}", store.uri(&key)))?;
                store.uri(&key)
            }
        };
        print!("{}", report::terminal_table(&data.summary));
        println!("report: {written}");
        anyhow::Ok(())
    })
}
