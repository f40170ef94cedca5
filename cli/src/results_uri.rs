//! A run's results named on the command line (`lightsout compare`, `lightsout report`): the
//! `…/runs/NAME` URI and the S3 flags that reach it.

use anyhow::{bail, Context as _};
use lightsout_api::S3Connection;
use lightsout_s3::{Results, S3Credentials};

/// How to reach S3 from the command line; credentials come from the environment.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct S3Flags {
    /// S3 endpoint URL for S3-compatible stores (AWS when absent). Credentials come from
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    #[arg(long = "s3-endpoint", value_name = "URL")]
    pub s3_endpoint: Option<String>,
    /// S3 region of the bucket.
    #[arg(long = "s3-region")]
    pub s3_region: Option<String>,
    /// Path-style S3 addressing even without --s3-endpoint (with one, path-style is the default).
    #[arg(long = "s3-force-path-style")]
    pub s3_force_path_style: bool,
}

impl S3Flags {
    /// The connection the flags describe; `None` when none is given (AWS defaults).
    pub fn connection(&self) -> Option<S3Connection> {
        (self.s3_endpoint.is_some() || self.s3_region.is_some() || self.s3_force_path_style).then(|| S3Connection {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            secret_name: None,
            force_path_style: self.s3_force_path_style.then_some(true),
        })
    }

    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, when both are set.
    pub fn credentials() -> Option<S3Credentials> {
        std::env::var("AWS_ACCESS_KEY_ID")
            .ok()
            .zip(std::env::var("AWS_SECRET_ACCESS_KEY").ok())
            .map(|(id, secret)| S3Credentials::new(id, secret))
    }
}

/// Opens the results store of the run at `uri` (`…/runs/NAME`): (its store, NAME).
pub fn open_run(uri: &str, s3: &S3Flags) -> anyhow::Result<(Results, String)> {
    let (root, name) = split_run_uri(uri)?;
    let store = Results::open(&root, s3.connection().as_ref(), S3Flags::credentials())
        .with_context(|| format!("results {root}"))?;
    Ok((store, name))
}

/// `…/runs/NAME` → (the results root, NAME).
pub fn split_run_uri(uri: &str) -> anyhow::Result<(String, String)> {
    let expected = "expected a run's results, file://DIR/runs/NAME or s3://BUCKET/PREFIX/runs/NAME";
    if !(uri.starts_with("file://") || uri.starts_with("s3://")) {
        bail!("{expected}");
    }
    let trimmed = uri.trim_end_matches('/');
    let Some((prefix, name)) = trimmed.rsplit_once('/') else { bail!("{expected}") };
    let Some(root) = prefix.strip_suffix("runs") else { bail!("{expected}") };
    let root = if root.ends_with("://") {
        root
    } else {
        let Some(root) = root.strip_suffix('/') else { bail!("{expected}") };
        root
    };
    if name.is_empty() || root.ends_with(':') {
        bail!("{expected}");
    }
    Ok((root.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_uris_split_into_root_and_name() {
        let split = |uri: &str| split_run_uri(uri).ok();
        let pair = |root: &str, name: &str| Some((root.to_string(), name.to_string()));
        assert_eq!(split("file:///tmp/r/runs/quickstart"), pair("file:///tmp/r", "quickstart"));
        assert_eq!(split("file:///tmp/r/runs/quickstart/"), pair("file:///tmp/r", "quickstart"));
        assert_eq!(split("file://lightsout-results/runs/q"), pair("file://lightsout-results", "q"));
        assert_eq!(split("file://rel/runs/q/"), pair("file://rel", "q"));
        assert_eq!(split("file://runs/q"), pair("file://", "q"));
        assert_eq!(split("s3://bucket/prefix/runs/q"), pair("s3://bucket/prefix", "q"));
        assert_eq!(split("s3://b/p/runs/q"), pair("s3://b/p", "q"));
        assert_eq!(split("s3://bucket/runs/q"), pair("s3://bucket", "q"));
        for bad in [
            "file:///tmp/r",
            "file:///tmp/r/runs/",
            "/tmp/r/runs/q",
            "s3://bucket/q",
            "file:///tmp/xruns/q",
            "file:///tmp/r/runs/q/x",
        ] {
            assert_eq!(split(bad), None, "{bad}");
        }
    }
}
