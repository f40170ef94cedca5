//! Helpers for the end-to-end tests of the `lightsout` binary.
#![allow(dead_code)]

pub mod browser;
pub mod moto;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root: run files name the sample dataset relative to it.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ has a parent").to_path_buf()
}

/// `lightsout` run from the repository root, with no provider key in its environment so that
/// every provider is the scripted server.
pub fn lightsout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lightsout"))
        .args(args)
        .current_dir(repo_root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .expect("lightsout runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes a run file into `dir` and returns its path as a string.
pub fn write_run(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write run file");
    path.display().to_string()
}

/// The quickstart, with results under `results` and the given replacements applied.
pub fn quickstart_with(replacements: &[(&str, &str)]) -> String {
    let mut text =
        std::fs::read_to_string(repo_root().join("manifests/examples/quickstart.yaml")).expect("quickstart exists");
    for (from, to) in replacements {
        assert!(text.contains(from), "quickstart has no {from:?}");
        text = text.replace(from, to);
    }
    text
}

/// Every file under `dir`, relative, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}
