//! `lightsout report`: the run's HTML report, written next to its results, and a compact table.

use std::path::Path;

use anyhow::Context;
use lightsout_core::api::S3Connection;
use lightsout_core::report::{self, REPORT_FILE};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_s3::{Results, S3Credentials};

/// Where to reach S3, from the command line.
pub struct S3Flags {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub force_path_style: bool,
}

/// Splits `file://DIR/runs/NAME` or `s3://bucket/prefix/runs/NAME` into the results root's URI
/// and the run's name.
fn split_run_uri(uri: &str) -> anyhow::Result<(String, String)> {
    let trimmed = uri.trim_end_matches('/');
    if !(trimmed.starts_with("file://") || trimmed.starts_with("s3://")) {
        anyhow::bail!("{uri}: a run's results must be file://DIR/runs/NAME or s3://BUCKET/PREFIX/runs/NAME");
    }
    let (root, run) = match trimmed.rsplit_once("/runs/") {
        Some((root, run)) if !run.is_empty() && !run.contains('/') => (root, run),
        _ => anyhow::bail!("{uri}: expected a run's results, …/runs/NAME (the directory holding summary.json)"),
    };
    let root = if root == "file:/" || root == "file:" { "file://." } else { root };
    Ok((root.to_string(), run.to_string()))
}

pub fn report(uri: &str, out: Option<&Path>, s3: S3Flags) -> anyhow::Result<()> {
    let (root, run) = split_run_uri(uri)?;
    let connection = S3Connection {
        endpoint: s3.endpoint,
        region: s3.region,
        secret_name: None,
        force_path_style: s3.force_path_style,
    };
    let credentials = std::env::var("AWS_ACCESS_KEY_ID")
        .ok()
        .zip(std::env::var("AWS_SECRET_ACCESS_KEY").ok())
        .map(|(id, secret)| S3Credentials::new(id, secret));
    let store = Results::open(&root, Some(&connection), credentials).with_context(|| format!("results {root}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_uris_split_into_root_and_run() {
        let split = |u: &str| split_run_uri(u).unwrap();
        assert_eq!(split("file:///tmp/r/runs/quickstart"), ("file:///tmp/r".into(), "quickstart".into()));
        assert_eq!(split("file://rel/runs/q/"), ("file://rel".into(), "q".into()));
        assert_eq!(split("s3://b/p/runs/q"), ("s3://b/p".into(), "q".into()));
        assert!(split_run_uri("file:///tmp/r").is_err());
        assert!(split_run_uri("/tmp/r/runs/q").is_err());
        assert!(split_run_uri("file:///tmp/r/runs/q/x").is_err());
    }
}
