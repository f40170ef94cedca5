//! `codex` (`@openai/codex` on npm): OpenAI's Codex CLI, run non-interactively (`codex exec`).
//!
//! Installed with npm under the harness root. The npm package is a small Node.js launcher; the
//! agent itself is a static native binary shipped in the platform's optional dependency
//! (`@openai/codex-linux-x64`), which is run directly: the launcher only finds it and execs it,
//! so the agent needs no Node.js and no PATH entry of its own.
//!
//! Its model traffic goes to the proxy as a custom model provider (the OpenAI Responses API,
//! the only wire API this version speaks), holding only the trial's dummy key. Everything else
//! in it that would reach the network is switched off, and the configuration is checked
//! strictly, so a key this version does not know fails the run instead of being ignored:
//!
//! - `check_for_update_on_startup = false`: no release check (GitHub, Homebrew);
//! - `features.plugins = false`: no sync of the curated plugin marketplace at start-up (it runs
//!   `git ls-remote https://github.com/openai/plugins.git`, then falls back to api.github.com);
//! - `web_search = "disabled"`: no hosted web-search tool offered to the model;
//! - `analytics.enabled = false`, `feedback.enabled = false`, `otel.*exporter = "none"`: no
//!   usage analytics, feedback uploads or OpenTelemetry export;
//! - `supports_websockets = false` on the provider: plain HTTPS streaming, which the proxy
//!   meters;
//! - `features.enable_request_compression = false`: request bodies stay plain JSON, which the
//!   proxy reads to record each exchange.
//!
//! Our sandbox isolates the agent, so Codex's own (bubblewrap, seccomp) is bypassed and it
//! never asks for approval. Codex has no turn limit of its own; the trial's time and budget
//! limits bound it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{file_name, find_files, AgentContext, InstallError, SessionFormat, SessionLog};
use crate::agent_process::LaunchSpec;

pub const PACKAGE: &str = "@openai/codex";

/// The provider id Codex is configured with; any name but Codex's built-in ones would do.
const PROVIDER: &str = "lightsout";
/// The variable holding the trial's dummy key, named in the provider's `env_key`.
const KEY_VAR: &str = "LIGHTSOUT_AGENT_KEY";

pub fn install_dir(root: &Path, version: &str) -> PathBuf {
    root.join("codex").join(version)
}

/// The platform package npm installs the native binary from, and the binary's target triple.
fn platform() -> (&'static str, &'static str) {
    if cfg!(target_arch = "aarch64") {
        ("codex-linux-arm64", "aarch64-unknown-linux-musl")
    } else {
        ("codex-linux-x64", "x86_64-unknown-linux-musl")
    }
}

/// The native Codex binary in an install (where the npm launcher would find it).
pub fn binary(dir: &Path) -> PathBuf {
    let (package, triple) = platform();
    dir.join("node_modules/@openai").join(package).join("vendor").join(triple).join("bin/codex")
}

/// Installs the exact version with npm, once; a finished install is marked so an interrupted
/// one is redone rather than trusted.
pub async fn install(root: &Path, version: &str) -> Result<PathBuf, InstallError> {
    let requirement = format!("{PACKAGE}@{version}");
    super::install_once(install_dir(root, version), &requirement.clone(), |staging| async move {
        super::npm_install(&staging, &requirement).await?;
        // npm skips an optional dependency it cannot install without failing the install.
        let native = binary(&staging);
        if !native.exists() {
            return Err(InstallError::Command {
                command: format!("npm install {requirement}"),
                status: "incomplete".into(),
                stderr: format!(
                    "the native binary {} is missing: npm did not install the optional dependency @openai/{} \
                     (older releases, which ship the binary inside @openai/codex itself and predate the \
                     configuration this adapter relies on, are not supported)",
                    native.display(),
                    platform().0
                ),
            });
        }
        Ok(())
    })
    .await
}

/// The version the installed binary reports (`codex --version` prints `codex-cli 0.171.0`).
pub async fn reported_version(dir: &Path) -> Option<String> {
    let output = tokio::process::Command::new(binary(dir)).arg("--version").env_clear().output().await.ok()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let version = stdout.lines().rev().find_map(|line| line.trim().strip_prefix("codex-cli "))?.trim().to_string();
    output.status.success().then_some(version)
}

/// A TOML string (a basic string with escapes), for a `-c key=value` override.
fn toml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The configuration, as `-c` overrides (see the module documentation for why each is set).
fn overrides(ctx: &AgentContext) -> Vec<String> {
    let provider = [
        ("name", toml_string("Lightsout metering proxy")),
        ("base_url", toml_string(&ctx.proxy_base_url)),
        ("env_key", toml_string(KEY_VAR)),
        ("wire_api", toml_string("responses")),
        ("supports_websockets", "false".to_string()),
    ];
    let provider: Vec<String> = provider.iter().map(|(key, value)| format!("{key}={value}")).collect();
    let mut config = vec![
        format!("model_provider={}", toml_string(PROVIDER)),
        format!("model_providers.{PROVIDER}={{{}}}", provider.join(", ")),
        "check_for_update_on_startup=false".into(),
        "web_search=\"disabled\"".into(),
        "features.plugins=false".into(),
        "features.enable_request_compression=false".into(),
        "analytics.enabled=false".into(),
        "feedback.enabled=false".into(),
        "otel.exporter=\"none\"".into(),
        "otel.trace_exporter=\"none\"".into(),
        "otel.metrics_exporter=\"none\"".into(),
    ];
    if let Some(effort) = ctx.reasoning_effort {
        config.push(format!("model_reasoning_effort={}", toml_string(effort.as_str())));
    }
    config
}

/// `codex exec --json … -` in the repository, reading the task prompt from standard input (a
/// review prompt with its diff can exceed the kernel's limit on one argument) with the proxy as
/// the model provider.
///
/// Codex refuses a `CODEX_HOME` that does not exist, so `<home>/.codex` is created here (before
/// the home is handed to the agent user), with the prompt file and a private temporary directory:
/// Codex puts its `apply_patch` helper on the PATH only when `CODEX_HOME` is outside the
/// temporary directory, and the trial's scratch space usually lies under `/tmp`.
pub fn launch(dir: &Path, ctx: &AgentContext) -> LaunchSpec {
    let codex_home = ctx.home.join(".codex");
    let tmp = ctx.home.join(".tmp");
    let prompt = ctx.home.join(".lightsout-prompt.md");
    // Failures surface when Codex starts (a missing CODEX_HOME or prompt is reported by it).
    for dir in [&codex_home, &tmp] {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&prompt, &ctx.task_prompt);

    let mut args: Vec<OsString> = vec![
        "-c".into(),
        // `$1` is the prompt file; the rest is the command, which replaces the shell.
        "prompt=$1; shift; exec \"$@\" < \"$prompt\"".into(),
        "sh".into(),
        prompt.into(),
        binary(dir).into(),
        "exec".into(),
        // Events as JSON lines on standard output: the harness's own log of the run.
        "--json".into(),
        "--color".into(),
        "never".into(),
        "--strict-config".into(),
        "--skip-git-repo-check".into(),
        "--dangerously-bypass-approvals-and-sandbox".into(),
        "--output-last-message".into(),
        ctx.harness_log_dir.join("codex-last-message.md").into(),
        "--model".into(),
        ctx.model.clone().into(),
    ];
    for value in overrides(ctx) {
        args.push("-c".into());
        args.push(value.into());
    }
    // The prompt comes from standard input.
    args.push("-".into());

    let mut env = ctx.base_env();
    env.extend([
        (KEY_VAR.to_string(), ctx.agent_key.clone()),
        ("CODEX_HOME".to_string(), codex_home.display().to_string()),
        ("TMPDIR".to_string(), tmp.display().to_string()),
        // The agent user's login shell is nologin; commands run in bash.
        ("SHELL".to_string(), "/bin/bash".to_string()),
        // What the npm launcher sets before it execs the binary.
        ("CODEX_MANAGED_BY_NPM".to_string(), "1".to_string()),
        ("CODEX_MANAGED_PACKAGE_ROOT".to_string(), dir.join("node_modules/@openai/codex").display().to_string()),
    ]);
    LaunchSpec { program: "/bin/sh".into(), args, env, cwd: ctx.repo.clone() }
}

/// Codex's rollout of the run: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`
/// (a run that starts sub-agents writes one per thread).
pub fn session_log(ctx: &AgentContext) -> SessionLog {
    let location = ctx.home.join(".codex/sessions");
    let files = find_files(&location, 4, &|path: &Path| {
        file_name(path).starts_with("rollout-") && file_name(path).ends_with(".jsonl")
    });
    SessionLog { format: SessionFormat::CodexRollout, location, files }
}

#[cfg(test)]
mod tests {
    use lightsout_api::{ApiKind, ReasoningEffort};

    use super::*;

    fn context(home: &Path) -> AgentContext {
        AgentContext {
            model: "gpt-5-mini".into(),
            api_kind: ApiKind::OpenAiResponses,
            reasoning_effort: Some(ReasoningEffort::High),
            max_turns: Some(10),
            proxy_base_url: "http://127.0.0.1:4000/v1".into(),
            agent_key: "lightsout-trial-t-0123".into(),
            task_prompt: "Review \"this\".\n".into(),
            repo: home.join("repo"),
            home: home.join("home"),
            harness_log_dir: home.join("logs"),
        }
    }

    #[test]
    fn launches_the_native_binary_against_the_proxy_only() {
        let scratch = tempfile::tempdir().unwrap();
        let ctx = context(scratch.path());
        let dir = Path::new("/harnesses/codex/0.171.0");
        let spec = launch(dir, &ctx);
        let args: Vec<String> = spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(spec.program, Path::new("/bin/sh"));
        assert_eq!(args[4], binary(dir).display().to_string());
        if cfg!(target_arch = "x86_64") {
            assert!(
                args[4].ends_with("node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
            );
        }
        assert_eq!(&args[5..7], ["exec", "--json"]);
        assert_eq!(args.last().map(String::as_str), Some("-"));
        assert!(args.contains(&"--dangerously-bypass-approvals-and-sandbox".to_string()));
        let provider = args.iter().find(|a| a.starts_with("model_providers.lightsout=")).unwrap();
        assert!(
            provider.contains("base_url=\"http://127.0.0.1:4000/v1\"")
                && provider.contains("env_key=\"LIGHTSOUT_AGENT_KEY\"")
        );
        for off in ["check_for_update_on_startup=false", "features.plugins=false", "web_search=\"disabled\""] {
            assert!(args.iter().any(|a| a == off), "{off}");
        }
        assert!(args.iter().any(|a| a == "model_reasoning_effort=\"high\""));

        let env: std::collections::HashMap<_, _> = spec.env.iter().cloned().collect();
        assert_eq!(env["LIGHTSOUT_AGENT_KEY"], "lightsout-trial-t-0123");
        assert_eq!(env["CODEX_HOME"], ctx.home.join(".codex").display().to_string());
        assert!(!env.keys().any(|k| k.starts_with("OPENAI")), "no OpenAI variables: {env:?}");
        assert!(ctx.home.join(".codex").is_dir() && ctx.home.join(".tmp").is_dir());
        assert_eq!(std::fs::read_to_string(&args[3]).unwrap(), ctx.task_prompt);
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string(r#"a "b" \c"#), r#""a \"b\" \\c""#);
        assert_eq!(toml_string("x\ny"), "\"x\\u000Ay\"");
    }
}
