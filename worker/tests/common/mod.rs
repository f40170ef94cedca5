//! What the harness end-to-end tests share: the run settings (sandboxed when root, as in CI)
//! and reading their results back.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use lightsout_core::model::RetryPolicy;
use lightsout_core::pricing::PricingTable;
use lightsout_core::validate::parse_run;
use lightsout_worker::local::{LocalRun, SandboxCommand};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A local run of `yaml` into `results`, with the provider key `real-key` in `E2E_KEY`, the
/// harnesses in their default directory, and this build's sandbox when `sandboxed`.
pub fn e2e_config(yaml: &str, origin: &str, results: &Path, sandboxed: bool) -> LocalRun {
    LocalRun {
        run: parse_run(yaml, origin).unwrap(),
        results_uri: Some(format!("file://{}", results.display())),
        pricing: PricingTable::default(),
        env: Box::new(|name| (name == "E2E_KEY").then(|| "real-key".to_string())),
        retry_delay: Duration::from_millis(10),
        model_retry: RetryPolicy::default(),
        harness_root: lightsout_worker::harness::default_root(),
        sandbox: sandboxed.then(|| SandboxCommand {
            program: env!("CARGO_BIN_EXE_lightsout-worker").into(),
            leading_args: vec!["sandbox".into()],
        }),
        upload_deadline: Duration::from_secs(30),
    }
}

/// Every file called `name` under `dir`.
pub fn walk(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path, name));
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
    out
}
