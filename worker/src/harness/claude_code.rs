//! `claude-code` (`@anthropic-ai/claude-code` on npm): Anthropic's Claude Code, run
//! non-interactively (`claude -p`).
//!
//! Installed with npm under the harness root. The npm package is a stub; the agent itself is a
//! native executable (a self-contained Bun build, linked against glibc) shipped in the platform's
//! optional dependency (`@anthropic-ai/claude-code-linux-x64`), which is run directly: the
//! package's install script would only copy it over the stub, so it is not run, and the agent
//! needs no Node.js.
//!
//! Its model traffic goes to the proxy over the Anthropic Messages API (`ANTHROPIC_BASE_URL`,
//! to which Claude Code appends `/v1/messages` itself), holding only the trial's dummy key
//! (`ANTHROPIC_API_KEY`, sent as `x-api-key`; with it set, print mode neither logs in nor
//! onboards). Everything else in it that would reach the network is switched off:
//!
//! - `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`: no telemetry, error reports, feature flags,
//!   release checks or auto-updates, and no start-up connectivity check (`HEAD /api/hello`);
//! - `DISABLE_TELEMETRY`, `DISABLE_ERROR_REPORTING`, `DISABLE_AUTOUPDATER`, `DISABLE_BUG_COMMAND`,
//!   `DISABLE_GROWTHBOOK`: each of those again, by its own switch, in case the umbrella one
//!   changes meaning in another version;
//! - `CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL`: no install of the official plugin
//!   marketplace (a clone from GitHub);
//! - `--disallowedTools WebFetch,WebSearch`: no web tools offered to the model (web search runs
//!   on the provider's side, web fetches from the agent's).
//!
//! Our sandbox isolates the agent, so Claude Code's permission prompts are skipped
//! (`--dangerously-skip-permissions`, which it refuses as root: the agent runs as `nobody`).
//! `maxTurns` is passed on as `--max-turns`. The reasoning effort sets `--effort` (models with
//! the effort parameter) and the extended-thinking budget (`MAX_THINKING_TOKENS`, the others).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use lightsout_api::ReasoningEffort;

use super::{file_name, find_files, AgentContext, InstallError, SessionFormat, SessionLog};
use crate::agent_process::LaunchSpec;

pub const PACKAGE: &str = "@anthropic-ai/claude-code";

pub fn install_dir(root: &Path, version: &str) -> PathBuf {
    root.join("claude-code").join(version)
}

/// The platform packages npm may install the native executable from, glibc's first: npm picks
/// the one matching the system's C library.
fn platform_packages() -> [&'static str; 2] {
    if cfg!(target_arch = "aarch64") {
        ["claude-code-linux-arm64", "claude-code-linux-arm64-musl"]
    } else {
        ["claude-code-linux-x64", "claude-code-linux-x64-musl"]
    }
}

/// The native Claude Code executable in an install (the glibc build's path when none is there).
pub fn binary(dir: &Path) -> PathBuf {
    let scope = dir.join("node_modules/@anthropic-ai");
    let candidates = platform_packages().map(|package| scope.join(package).join("claude"));
    candidates.iter().find(|path| path.exists()).unwrap_or(&candidates[0]).clone()
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
                    "the native executable {} is missing: npm did not install the optional dependency \
                     @anthropic-ai/{} (older releases, which ship a JavaScript bundle run by Node.js \
                     instead, are not supported)",
                    native.display(),
                    platform_packages()[0]
                ),
            });
        }
        Ok(())
    })
    .await
}

/// The version the installed executable reports (`claude --version` prints
/// `2.1.332 (Claude Code)`).
pub async fn reported_version(dir: &Path) -> Option<String> {
    let output = tokio::process::Command::new(binary(dir)).arg("--version").env_clear().output().await.ok()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|line| line.contains("Claude Code"))?;
    let version = line.split_whitespace().next()?.to_string();
    output.status.success().then_some(version)
}

/// The proxy's base URL as Claude Code takes it: without the `/v1` it appends itself.
fn base_url(proxy_base_url: &str) -> &str {
    let url = proxy_base_url.trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url)
}

/// `--effort` and `MAX_THINKING_TOKENS` for a reasoning effort. Claude Code accepts the levels
/// low, medium, high, xhigh and max, and sends the nearest one the model supports (models
/// without the effort parameter ignore it). Their extended-thinking budget is otherwise the
/// largest the model's output limit allows, so high and xhigh leave it so; lower levels get
/// Claude Code's own "think" (4,000) and "think hard" (10,000) budgets, minimal the API's least
/// (1,024), and none switches thinking off.
fn effort_settings(effort: ReasoningEffort) -> (&'static str, Option<u32>) {
    match effort {
        ReasoningEffort::None => ("low", Some(0)),
        ReasoningEffort::Minimal => ("low", Some(1024)),
        ReasoningEffort::Low => ("low", Some(4000)),
        ReasoningEffort::Medium => ("medium", Some(10_000)),
        ReasoningEffort::High => ("high", None),
        ReasoningEffort::Xhigh => ("xhigh", None),
    }
}

/// The environment switches that keep Claude Code off the network but for the model (see the
/// module documentation).
const OFFLINE: [&str; 7] = [
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "DISABLE_AUTOUPDATER",
    "DISABLE_BUG_COMMAND",
    "DISABLE_GROWTHBOOK",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
];

/// `claude -p --output-format stream-json --verbose …` in the repository, reading the task
/// prompt from standard input (a review prompt with its diff can exceed the kernel's limit on
/// one argument), with the proxy as its API. Its events, one JSON object a line, go to standard
/// output: the harness's own log of the run.
///
/// Its configuration and session files go to `<home>/.claude` and `<home>/.claude.json`; its
/// temporary files (and the socket of its messaging server) to a private temporary directory in
/// the home, which is created here with the prompt file, before the home is handed to the agent
/// user.
pub fn launch(dir: &Path, ctx: &AgentContext) -> LaunchSpec {
    let tmp = ctx.home.join(".tmp");
    let prompt = ctx.home.join(".lightsout-prompt.md");
    // Failures surface when Claude Code starts (a missing prompt is reported by the shell).
    let _ = std::fs::create_dir_all(&tmp);
    let _ = std::fs::write(&prompt, &ctx.task_prompt);

    let mut args: Vec<OsString> = vec![
        "-c".into(),
        // `$1` is the prompt file; the rest is the command, which replaces the shell.
        "prompt=$1; shift; exec \"$@\" < \"$prompt\"".into(),
        "sh".into(),
        prompt.into(),
        binary(dir).into(),
        "--print".into(),
        "--output-format".into(),
        "stream-json".into(),
        // Print mode streams every message only with --verbose; otherwise just the result.
        "--verbose".into(),
        "--model".into(),
        ctx.model.clone().into(),
        "--dangerously-skip-permissions".into(),
        // One argument: the option takes a variable number of values.
        "--disallowedTools=WebFetch,WebSearch".into(),
    ];
    if let Some(turns) = ctx.max_turns {
        args.push("--max-turns".into());
        args.push(turns.to_string().into());
    }
    let thinking_budget = ctx.reasoning_effort.and_then(|effort| {
        let (level, budget) = effort_settings(effort);
        args.push("--effort".into());
        args.push(level.into());
        budget
    });

    let mut env = ctx.base_env();
    env.extend([
        ("ANTHROPIC_BASE_URL".to_string(), base_url(&ctx.proxy_base_url).to_string()),
        ("ANTHROPIC_API_KEY".to_string(), ctx.agent_key.clone()),
        ("TMPDIR".to_string(), tmp.display().to_string()),
        // The agent user's login shell is nologin; commands run in bash.
        ("SHELL".to_string(), "/bin/bash".to_string()),
    ]);
    env.extend(OFFLINE.iter().map(|name| (name.to_string(), "1".to_string())));
    if let Some(budget) = thinking_budget {
        env.push(("MAX_THINKING_TOKENS".to_string(), budget.to_string()));
    }
    LaunchSpec { program: "/bin/sh".into(), args, env, cwd: ctx.repo.clone() }
}

/// Claude Code's session log: `<home>/.claude/projects/<cwd slug>/<session id>.jsonl` (the
/// slug is the working directory with every other character than letters and digits made
/// `-`; the home is the trial's, so every project there is this run's).
pub fn session_log(ctx: &AgentContext) -> SessionLog {
    let location = ctx.home.join(".claude/projects");
    let files = find_files(&location, 2, &|path: &Path| {
        file_name(path).ends_with(".jsonl") && path.parent().and_then(Path::parent) == Some(location.as_path())
    });
    SessionLog { format: SessionFormat::ClaudeCode, location, files }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use lightsout_api::ApiKind;

    use super::*;

    fn context(home: &Path, effort: Option<ReasoningEffort>) -> AgentContext {
        AgentContext {
            model: "claude-sonnet-4-5".into(),
            api_kind: ApiKind::Anthropic,
            reasoning_effort: effort,
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
    fn launches_the_native_executable_against_the_proxy_only() {
        let scratch = tempfile::tempdir().unwrap();
        let ctx = context(scratch.path(), Some(ReasoningEffort::Medium));
        let dir = Path::new("/harnesses/claude-code/2.1.332");
        let spec = launch(dir, &ctx);
        let args: Vec<String> = spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(spec.program, Path::new("/bin/sh"));
        assert_eq!(spec.cwd, ctx.repo);
        assert_eq!(args[4], binary(dir).display().to_string());
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                args[4],
                "/harnesses/claude-code/2.1.332/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
            );
        }
        assert_eq!(&args[5..9], ["--print", "--output-format", "stream-json", "--verbose"]);
        for pair in [["--model", "claude-sonnet-4-5"], ["--max-turns", "10"], ["--effort", "medium"]] {
            assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
        }
        assert!(args.contains(&"--dangerously-skip-permissions".to_string()));
        assert!(args.contains(&"--disallowedTools=WebFetch,WebSearch".to_string()));
        assert_eq!(std::fs::read_to_string(&args[3]).unwrap(), ctx.task_prompt);

        let env: HashMap<_, _> = spec.env.iter().cloned().collect();
        assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:4000", "Claude Code appends /v1/messages");
        assert_eq!(env["ANTHROPIC_API_KEY"], "lightsout-trial-t-0123");
        assert_eq!(env["HOME"], ctx.home.display().to_string());
        assert_eq!(env["TMPDIR"], ctx.home.join(".tmp").display().to_string());
        assert_eq!(env["MAX_THINKING_TOKENS"], "10000");
        for name in OFFLINE {
            assert_eq!(env[name], "1", "{name}");
        }
        assert!(!env.keys().any(|k| k.starts_with("OPENAI")), "no OpenAI variables: {env:?}");
        assert!(ctx.home.join(".tmp").is_dir());
    }

    #[test]
    fn effort_sets_the_level_and_the_thinking_budget() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = Path::new("/harnesses/claude-code/2.1.332");
        let settings = |effort| {
            let spec = launch(dir, &context(scratch.path(), effort));
            let args: Vec<String> = spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
            let level = args.iter().position(|a| a == "--effort").map(|i| args[i + 1].clone());
            let budget = spec.env.iter().find(|(k, _)| k == "MAX_THINKING_TOKENS").map(|(_, v)| v.clone());
            (level, budget)
        };
        assert_eq!(settings(None), (None, None), "Claude Code's defaults");
        assert_eq!(settings(Some(ReasoningEffort::None)), (Some("low".into()), Some("0".into())));
        assert_eq!(settings(Some(ReasoningEffort::Low)), (Some("low".into()), Some("4000".into())));
        assert_eq!(settings(Some(ReasoningEffort::High)), (Some("high".into()), None));
        assert_eq!(settings(Some(ReasoningEffort::Xhigh)), (Some("xhigh".into()), None));
    }

    #[test]
    fn only_anthropic_providers_are_accepted() {
        use lightsout_api::{HarnessName, HarnessRef};
        let harness = HarnessRef { name: HarnessName::ClaudeCode, version: "2.1.332".into() };
        assert!(super::super::is_available(HarnessName::ClaudeCode));
        assert!(super::super::check(&harness).is_ok());
        assert!(super::super::check_api(&harness, ApiKind::Anthropic).is_ok());
        for api in [ApiKind::OpenAiChat, ApiKind::OpenAiResponses] {
            let refused = super::super::check_api(&harness, api).unwrap_err();
            assert!(refused.contains("use apiKind: anthropic"), "{refused}");
        }
    }

    #[test]
    fn the_base_url_loses_its_v1() {
        assert_eq!(base_url("http://127.0.0.1:4000/v1"), "http://127.0.0.1:4000");
        assert_eq!(base_url("http://127.0.0.1:4000/v1/"), "http://127.0.0.1:4000");
        assert_eq!(base_url("http://127.0.0.1:4000"), "http://127.0.0.1:4000");
    }
}
