//! `lightsout-worker`: the in-pod side of a trial.
//!
//! - `install-harness NAME VERSION [--root DIR]`: installs a pinned harness (an init
//!   container's job), printing where it went and the version it reports.
//! - `sandbox …`: the agent sandbox's entry point, started by the worker itself.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use lightsout_core::api::{HarnessName, HarnessRef};
use lightsout_worker::{harness, sandbox};

fn usage() -> ExitCode {
    eprintln!("usage: lightsout-worker install-harness NAME VERSION [--root DIR]\n       lightsout-worker sandbox --socket S --port P [--hide DIR]... [--user UID:GID] -- PROGRAM [ARGS]...");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("sandbox") => match sandbox::SandboxArgs::parse(&args[1..]) {
            Ok(parsed) => ExitCode::from(sandbox::run(&parsed).clamp(0, 255) as u8),
            Err(e) => {
                eprintln!("lightsout-worker sandbox: {e}");
                usage()
            }
        },
        Some("install-harness") => install_harness(&args[1..]),
        _ => usage(),
    }
}

fn install_harness(args: &[OsString]) -> ExitCode {
    let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let (name, version) = match (text.first(), text.get(1)) {
        (Some(name), Some(version)) => (name, version),
        _ => return usage(),
    };
    let root = match text.iter().position(|a| a == "--root") {
        Some(i) => match text.get(i + 1) {
            Some(dir) => PathBuf::from(dir),
            None => return usage(),
        },
        None => harness::default_root(),
    };
    let name: HarnessName = match serde_json::from_value(serde_json::Value::String(name.clone())) {
        Ok(name) => name,
        Err(_) => {
            eprintln!("lightsout-worker: unknown harness {name:?}");
            return ExitCode::from(2);
        }
    };
    let harness = HarnessRef { name, version: version.clone() };
    if let Err(e) = harness::check(&harness) {
        eprintln!("lightsout-worker: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lightsout-worker: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match harness::install(&harness, &root).await {
            Ok(Some(installed)) => {
                let reported = installed.reported_version().await.unwrap_or_else(|| "unknown".into());
                println!(
                    "{}@{} installed in {} (reports version {reported})",
                    name.as_str(),
                    harness.version,
                    installed.dir.display()
                );
                ExitCode::SUCCESS
            }
            Ok(None) => {
                println!("{} is built in; nothing to install", name.as_str());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("lightsout-worker: installing {}@{}: {e}", name.as_str(), harness.version);
                ExitCode::FAILURE
            }
        }
    })
}
