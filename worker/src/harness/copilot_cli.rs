//! `copilot-cli` (`@github/copilot` on npm): GitHub Copilot CLI, run non-interactively (the
//! prompt on standard input, `--allow-all-tools`).
//!
//! Installed with npm under the harness root. The npm package is a small Node.js launcher; the
//! agent itself is a native executable (a Node.js single-executable application) shipped in the
//! platform's optional dependency (`@github/copilot-linux-x64`), which is run directly. That
//! executable carries its JavaScript package as an embedded archive and unpacks it (about
//! 235 MB) into a package cache before its first run; the install does that once, into the
//! install directory, so trials start at once and the agent user only ever reads it.
//!
//! Its model traffic goes to the proxy as a custom provider ("bring your own key":
//! `COPILOT_PROVIDER_*`), holding only the trial's dummy key; with a custom provider Copilot
//! needs no GitHub sign-in. All three APIs are spoken: OpenAI Chat Completions
//! (`COPILOT_PROVIDER_WIRE_API=completions`), OpenAI Responses (`responses`) and Anthropic
//! Messages (`COPILOT_PROVIDER_TYPE=anthropic`, which appends `/v1/messages` to its base URL
//! itself). Everything else in it that would reach the network is switched off:
//!
//! - `COPILOT_OFFLINE=true`: offline mode, which skips GitHub authentication, telemetry, the web
//!   tools, the GitHub MCP server and update checks (it requires a custom provider);
//! - `COPILOT_AUTO_UPDATE=false` and `--no-auto-update`: no update downloads, and the package
//!   built into this executable runs, never a newer one from a cache;
//! - `--disable-builtin-mcps`, `--no-remote`, `--disable-client-telemetry`: the same, said again
//!   on the command line, so that a change of what offline mode covers does not open them;
//! - `COPILOT_PROVIDER_TRANSPORT=http`: plain HTTP streaming, which the proxy meters.
//!
//! Our sandbox isolates the agent, so Copilot's permission checks are lifted (`--allow-all-tools
//! --allow-all-paths`: the task's `pr/` lies beside the repository); URLs are not allowed
//! (nothing but the proxy is reachable anyway). `--no-ask-user` removes the tool that would wait
//! for an answer. Copilot has no turn limit of its own; the trial's time and budget limits bound
//! it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use lightsout_api::ApiKind;

use super::{file_name, find_files, AgentContext, InstallError, SessionFormat, SessionLog};
use crate::agent_process::LaunchSpec;

pub const PACKAGE: &str = "@github/copilot";

pub fn install_dir(root: &Path, version: &str) -> PathBuf {
    root.join("copilot-cli").join(version)
}

/// The platform package npm installs the native executable from, and the platform's name in
/// Copilot's package cache.
fn platform() -> (&'static str, &'static str) {
    if cfg!(target_arch = "aarch64") {
        ("copilot-linux-arm64", "linux-arm64")
    } else {
        ("copilot-linux-x64", "linux-x64")
    }
}

/// The native Copilot executable in an install (where the npm launcher would find it).
pub fn binary(dir: &Path) -> PathBuf {
    dir.join("node_modules/@github").join(platform().0).join("copilot")
}

/// The package cache the executable's JavaScript package is unpacked into
/// (`COPILOT_PKG_CACHE_HOME`).
fn package_cache(dir: &Path) -> PathBuf {
    dir.join("pkg-cache")
}

/// The unpacked package of `version`, as the executable looks for it.
fn unpacked(dir: &Path, version: &str) -> PathBuf {
    package_cache(dir).join("pkg").join(platform().1).join(version)
}

/// The environment that makes the executable use the install's unpacked package and nothing
/// else, offline.
fn package_env(dir: &Path) -> [(&'static str, String); 3] {
    [
        ("COPILOT_PKG_CACHE_HOME", package_cache(dir).display().to_string()),
        ("COPILOT_AUTO_UPDATE", "false".to_string()),
        ("COPILOT_OFFLINE", "true".to_string()),
    ]
}

/// Installs the exact version with npm and unpacks its package, once; a finished install is
/// marked so an interrupted one is redone rather than trusted.
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
                    "the native executable {} is missing: npm did not install the optional dependency @github/{}",
                    native.display(),
                    platform().0
                ),
            });
        }
        unpack(&staging, version).await?;
        Ok(())
    })
    .await
}

/// Unpacks the executable's embedded package into the install's package cache: what the
/// executable does itself before its first run, asked for alone (`COPILOT_SEA_EXTRACT_ONLY`).
async fn unpack(dir: &Path, version: &str) -> Result<(), InstallError> {
    let native = binary(dir);
    let command = format!("COPILOT_SEA_EXTRACT_ONLY=1 {} --binary-version", native.display());
    let output = tokio::process::Command::new(&native)
        .arg("--binary-version")
        .env_clear()
        .env("HOME", dir)
        .env("PATH", "/usr/bin:/bin")
        .env("COPILOT_SEA_EXTRACT_ONLY", "1")
        .envs(package_env(dir))
        .current_dir(dir)
        .output()
        .await
        .map_err(|e| InstallError::Command {
            command: command.clone(),
            status: "no start".into(),
            stderr: e.to_string(),
        })?;
    let marker = unpacked(dir, version).join(".extraction-complete");
    if !output.status.success() || !marker.exists() {
        return Err(InstallError::Command {
            command,
            status: output.status.to_string(),
            stderr: format!(
                "{} was not unpacked (is {version} the executable's own version?): {}",
                unpacked(dir, version).display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(())
}

/// The version the installed executable reports (`copilot --version` prints
/// `GitHub Copilot CLI 1.0.102.`), run as a trial runs it.
pub async fn reported_version(dir: &Path) -> Option<String> {
    let output = tokio::process::Command::new(binary(dir))
        .args(["--version", "--no-auto-update"])
        .env_clear()
        .env("HOME", dir)
        .envs(package_env(dir))
        .output()
        .await
        .ok()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let version = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("GitHub Copilot CLI "))?
        .trim()
        .trim_end_matches('.')
        .to_string();
    output.status.success().then_some(version)
}

/// The custom provider's settings for the trial's API: its type, its wire API, and its base
/// URL (Copilot's Anthropic client appends `/v1/messages` to the base URL itself).
fn provider(ctx: &AgentContext) -> Vec<(&'static str, String)> {
    match ctx.api_kind {
        ApiKind::Anthropic => {
            let base = ctx.proxy_base_url.trim_end_matches('/');
            let base = base.strip_suffix("/v1").unwrap_or(base);
            vec![("COPILOT_PROVIDER_TYPE", "anthropic".into()), ("COPILOT_PROVIDER_BASE_URL", base.into())]
        }
        ApiKind::OpenAiChat | ApiKind::OpenAiResponses => {
            let wire = if ctx.api_kind == ApiKind::OpenAiResponses { "responses" } else { "completions" };
            vec![
                ("COPILOT_PROVIDER_TYPE", "openai".into()),
                ("COPILOT_PROVIDER_WIRE_API", wire.into()),
                ("COPILOT_PROVIDER_BASE_URL", ctx.proxy_base_url.clone()),
            ]
        }
    }
}

/// `copilot --output-format json --allow-all-tools …` in the repository, reading the task
/// prompt from standard input (a review prompt with its diff can exceed the kernel's limit on
/// one argument) with the proxy as its model provider. Its events go to standard output as JSON
/// lines; its log and the session as markdown go to the harness log directory.
pub fn launch(dir: &Path, ctx: &AgentContext) -> LaunchSpec {
    let prompt = ctx.home.join(".lightsout-prompt.md");
    // A failure surfaces when Copilot starts (a missing prompt is reported by the shell).
    let _ = std::fs::write(&prompt, &ctx.task_prompt);

    let mut args: Vec<OsString> = vec![
        "-c".into(),
        // `$1` is the prompt file; the rest is the command, which replaces the shell.
        "prompt=$1; shift; exec \"$@\" < \"$prompt\"".into(),
        "sh".into(),
        prompt.into(),
        binary(dir).into(),
        "--output-format".into(),
        "json".into(),
        "--allow-all-tools".into(),
        "--allow-all-paths".into(),
        "--no-ask-user".into(),
        "--no-auto-update".into(),
        "--disable-builtin-mcps".into(),
        "--no-remote".into(),
        "--disable-client-telemetry".into(),
        "--no-color".into(),
        "--log-dir".into(),
        ctx.harness_log_dir.clone().into(),
        "--share".into(),
        ctx.harness_log_dir.join("copilot-session.md").into(),
        "--model".into(),
        ctx.model.clone().into(),
    ];
    if let Some(effort) = ctx.reasoning_effort {
        args.push("--reasoning-effort".into());
        args.push(effort.as_str().into());
    }

    let mut env = ctx.base_env();
    env.extend(package_env(dir).map(|(name, value)| (name.to_string(), value)));
    env.extend(provider(ctx).into_iter().map(|(name, value)| (name.to_string(), value)));
    env.extend([
        ("COPILOT_PROVIDER_API_KEY".to_string(), ctx.agent_key.clone()),
        ("COPILOT_PROVIDER_TRANSPORT".to_string(), "http".to_string()),
        ("COPILOT_MODEL".to_string(), ctx.model.clone()),
        ("COPILOT_HOME".to_string(), ctx.home.join(".copilot").display().to_string()),
        // The agent user's login shell is nologin; commands run in bash.
        ("SHELL".to_string(), "/bin/bash".to_string()),
    ]);
    LaunchSpec { program: "/bin/sh".into(), args, env, cwd: ctx.repo.clone() }
}

/// Copilot's session events: `$COPILOT_HOME/session-state/<session id>/events.jsonl`.
pub fn session_log(ctx: &AgentContext) -> SessionLog {
    let location = ctx.home.join(".copilot/session-state");
    let files = find_files(&location, 2, &|path: &Path| {
        file_name(path) == "events.jsonl" && path.parent().and_then(Path::parent) == Some(location.as_path())
    });
    SessionLog { format: SessionFormat::CopilotEvents, location, files }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use lightsout_api::ReasoningEffort;

    use super::*;

    fn context(home: &Path, api_kind: ApiKind) -> AgentContext {
        AgentContext {
            model: "gpt-5-mini".into(),
            api_kind,
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

    fn env_of(spec: &LaunchSpec) -> HashMap<String, String> {
        spec.env.iter().cloned().collect()
    }

    #[test]
    fn launches_the_native_executable_offline_against_the_proxy_only() {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(scratch.path().join("home")).unwrap();
        let ctx = context(scratch.path(), ApiKind::OpenAiChat);
        let dir = Path::new("/harnesses/copilot-cli/1.0.102");
        let spec = launch(dir, &ctx);
        let args: Vec<String> = spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(spec.program, Path::new("/bin/sh"));
        assert_eq!(args[4], binary(dir).display().to_string());
        if cfg!(target_arch = "x86_64") {
            assert!(args[4].ends_with("node_modules/@github/copilot-linux-x64/copilot"));
        }
        for flag in ["--allow-all-tools", "--no-auto-update", "--disable-builtin-mcps", "--no-remote", "--no-ask-user"]
        {
            assert!(args.iter().any(|a| a == flag), "{flag}");
        }
        assert!(!args.iter().any(|a| a == "-p" || a == "--allow-all-urls" || a == "--allow-all"), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--reasoning-effort", "high"]));
        assert!(args.windows(2).any(|w| w == ["--output-format", "json"]));
        assert_eq!(std::fs::read_to_string(&args[3]).unwrap(), ctx.task_prompt);

        let env = env_of(&spec);
        assert_eq!(env["COPILOT_OFFLINE"], "true");
        assert_eq!(env["COPILOT_AUTO_UPDATE"], "false");
        assert_eq!(env["COPILOT_PKG_CACHE_HOME"], "/harnesses/copilot-cli/1.0.102/pkg-cache");
        assert_eq!(env["COPILOT_PROVIDER_BASE_URL"], "http://127.0.0.1:4000/v1");
        assert_eq!(
            (env["COPILOT_PROVIDER_TYPE"].as_str(), env["COPILOT_PROVIDER_WIRE_API"].as_str()),
            ("openai", "completions")
        );
        assert_eq!(env["COPILOT_PROVIDER_API_KEY"], "lightsout-trial-t-0123");
        assert_eq!(env["COPILOT_MODEL"], "gpt-5-mini");
        assert!(!env.keys().any(|k| k.starts_with("GH_") || k.starts_with("GITHUB") || k == "COPILOT_GITHUB_TOKEN"));
        assert!(!env.keys().any(|k| k.starts_with("OPENAI") || k.starts_with("ANTHROPIC")), "{env:?}");
    }

    #[test]
    fn each_api_gets_its_provider_settings() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = Path::new("/h");
        let env = env_of(&launch(dir, &context(scratch.path(), ApiKind::OpenAiResponses)));
        assert_eq!(env["COPILOT_PROVIDER_WIRE_API"], "responses");
        let env = env_of(&launch(dir, &context(scratch.path(), ApiKind::Anthropic)));
        assert_eq!(env["COPILOT_PROVIDER_TYPE"], "anthropic");
        assert_eq!(env["COPILOT_PROVIDER_BASE_URL"], "http://127.0.0.1:4000", "Copilot appends /v1/messages");
        assert!(!env.contains_key("COPILOT_PROVIDER_WIRE_API"));
    }
}
