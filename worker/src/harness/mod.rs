//! Agent harnesses: installing each at its pinned version, and launching it on a trial.
//!
//! Every harness reaches models only through the trial's metering proxy: it is given the
//! proxy's base URL and a per-trial dummy key, never a provider key. A harness that cannot be
//! routed through the proxy is refused.

mod claude_code;
mod codex;
mod copilot_cli;
mod mini_swe_agent;
mod single_shot;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use lightsout_api::{ApiKind, HarnessName, HarnessRef, ReasoningEffort};
pub use lightsout_trajectory::SessionFormat;

pub use single_shot::{SingleShot, VERSION as SINGLE_SHOT_VERSION};

use crate::agent_process::LaunchSpec;

/// Harnesses this build can run through the proxy.
pub fn is_available(name: HarnessName) -> bool {
    matches!(
        name,
        HarnessName::SingleShot
            | HarnessName::MiniSweAgent
            | HarnessName::Codex
            | HarnessName::ClaudeCode
            | HarnessName::CopilotCli
    )
}

/// Why a harness cannot run here, for the error that refuses it.
pub fn unavailable_reason(name: HarnessName) -> String {
    format!(
        "harness {} is not available in this build: its adapter (routing it through the metering proxy) is not written yet; \
         available: single-shot, mini-swe-agent, codex, claude-code, copilot-cli",
        name.as_str()
    )
}

/// Checks that this build can run the harness at the pinned version.
pub fn check(harness: &HarnessRef) -> Result<(), String> {
    if !is_available(harness.name) {
        return Err(unavailable_reason(harness.name));
    }
    if harness.name == HarnessName::SingleShot && harness.version.trim_start_matches('v') != single_shot::VERSION {
        return Err(format!(
            "harness single-shot is pinned to {} but this build has single-shot {}",
            harness.version,
            single_shot::VERSION
        ));
    }
    Ok(())
}

/// Checks that the harness can speak the API of the variant's provider.
pub fn check_api(harness: &HarnessRef, api: ApiKind) -> Result<(), String> {
    if harness.name == HarnessName::Codex && api != ApiKind::OpenAiResponses {
        return Err(format!(
            "harness codex speaks only the OpenAI Responses API, but its provider's apiKind is {}; use apiKind: openai-responses",
            api.as_str()
        ));
    }
    if harness.name == HarnessName::ClaudeCode && api != ApiKind::Anthropic {
        return Err(format!(
            "harness claude-code speaks only the Anthropic Messages API, but its provider's apiKind is {}; use apiKind: anthropic",
            api.as_str()
        ));
    }
    Ok(())
}

/// Where harnesses are installed: `$LIGHTSOUT_HARNESS_DIR`, else a cache directory the
/// unprivileged agent user can read (not under root's home, which it cannot enter).
pub fn default_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("LIGHTSOUT_HARNESS_DIR") {
        return PathBuf::from(dir);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/lightsout/harnesses");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache/lightsout/harnesses")
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("installing failed: `{command}` exited with {status}: {stderr}")]
    Command { command: String, status: String, stderr: String },
}

impl InstallError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError {
        let path = path.display().to_string();
        move |source| InstallError::Io { path, source }
    }
}

/// Installs a harness into `dir` once. `fill` populates a fresh staging directory beside it
/// (`<dir>.partial`, created empty); the staging directory is then marked `.installed` (holding
/// `requirement`) and renamed into place, so an interrupted install leaves no marker and is
/// redone rather than trusted. Installers of the same `dir` (trials of one run, tests, several
/// workers sharing a cache) take turns on an exclusive lock of `<dir>.lock`: two at once would
/// share the staging directory, and one could rename it into place while the other's package
/// manager still writes a binary there (which then fails to exec, "Text file busy").
async fn install_once<F, Fut>(dir: PathBuf, requirement: &str, fill: F) -> Result<PathBuf, InstallError>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<(), InstallError>>,
{
    if dir.join(".installed").exists() {
        return Ok(dir);
    }
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(parent) = dir.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(InstallError::io(parent))?;
    }
    let lock_path = dir.with_file_name(format!("{name}.lock"));
    let lock = {
        let path = lock_path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| InstallError::Io { path: lock_path.display().to_string(), source: std::io::Error::other(e) })?
        .map_err(InstallError::io(&lock_path))?
    };
    // Another installer may have finished while this one waited.
    if dir.join(".installed").exists() {
        return Ok(dir);
    }
    let staging = dir.with_file_name(format!("{name}.partial"));
    let _ = tokio::fs::remove_dir_all(&staging).await;
    tokio::fs::create_dir_all(&staging).await.map_err(InstallError::io(&staging))?;
    fill(staging.clone()).await?;
    tokio::fs::write(staging.join(".installed"), requirement).await.map_err(InstallError::io(&staging))?;
    let _ = tokio::fs::remove_dir_all(&dir).await;
    tokio::fs::rename(&staging, &dir).await.map_err(InstallError::io(&dir))?;
    // Released when dropped too; explicitly, once the install is in place.
    drop(lock);
    Ok(dir)
}

async fn run_installer(program: impl AsRef<OsStr>, args: &[&OsStr]) -> Result<(), InstallError> {
    let program = program.as_ref();
    let command = format!(
        "{} {}",
        program.to_string_lossy(),
        args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    );
    let output = tokio::process::Command::new(program).args(args).output().await.map_err(|e| {
        InstallError::Command { command: command.clone(), status: "no start".into(), stderr: e.to_string() }
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String =
            stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(InstallError::Command { command, status: output.status.to_string(), stderr: tail });
    }
    Ok(())
}

/// `npm install PACKAGE@VERSION` into `staging`, without install scripts: the npm harnesses
/// ship their native executable as a per-platform optional dependency and need none.
async fn npm_install(staging: &Path, requirement: &str) -> Result<(), InstallError> {
    let npm = if Path::new("/usr/bin/npm").exists() { "/usr/bin/npm" } else { "npm" };
    run_installer(
        npm,
        &[
            "install".as_ref(),
            "--prefix".as_ref(),
            staging.as_os_str(),
            "--no-audit".as_ref(),
            "--no-fund".as_ref(),
            "--no-update-notifier".as_ref(),
            "--ignore-scripts".as_ref(),
            requirement.as_ref(),
        ],
    )
    .await
}

/// An agentic harness installed at an exact version.
#[derive(Debug, Clone)]
pub struct Installed {
    pub harness: HarnessRef,
    pub dir: PathBuf,
}

/// Installs the harness (once) under `root`. The built-in single-shot needs nothing.
pub async fn install(harness: &HarnessRef, root: &Path) -> Result<Option<Installed>, InstallError> {
    let dir = match harness.name {
        HarnessName::MiniSweAgent => mini_swe_agent::install(root, &harness.version).await?,
        HarnessName::Codex => codex::install(root, &harness.version).await?,
        HarnessName::ClaudeCode => claude_code::install(root, &harness.version).await?,
        HarnessName::CopilotCli => copilot_cli::install(root, &harness.version).await?,
        _ => return Ok(None),
    };
    Ok(Some(Installed { harness: harness.clone(), dir }))
}

/// Whether the harness is already installed under `root` (the built-in one always is).
pub fn install_dir_exists(harness: &HarnessRef, root: &Path) -> bool {
    match harness.name {
        HarnessName::MiniSweAgent => mini_swe_agent::install_dir(root, &harness.version).join(".installed").exists(),
        HarnessName::Codex => codex::install_dir(root, &harness.version).join(".installed").exists(),
        HarnessName::ClaudeCode => claude_code::install_dir(root, &harness.version).join(".installed").exists(),
        HarnessName::CopilotCli => copilot_cli::install_dir(root, &harness.version).join(".installed").exists(),
        _ => true,
    }
}

/// What an agent is given for one trial.
#[derive(Debug, Clone)]
pub struct AgentContext {
    pub model: String,
    pub api_kind: ApiKind,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub max_turns: Option<u32>,
    /// The proxy as the agent reaches it.
    pub proxy_base_url: String,
    /// The trial's dummy key.
    pub agent_key: String,
    pub task_prompt: String,
    /// The repository, with the change applied: the agent's working directory.
    pub repo: PathBuf,
    pub home: PathBuf,
    /// Where the harness's own logs and session files go.
    pub harness_log_dir: PathBuf,
}

impl AgentContext {
    /// The environment every harness gets: a PATH, a HOME, a locale, and nothing else.
    fn base_env(&self) -> Vec<(String, String)> {
        vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME".into(), self.home.display().to_string()),
            ("LANG".into(), "C.UTF-8".into()),
            ("TERM".into(), "dumb".into()),
            ("NO_COLOR".into(), "1".into()),
        ]
    }
}

impl Installed {
    pub fn launch(&self, ctx: &AgentContext) -> LaunchSpec {
        match self.harness.name {
            HarnessName::MiniSweAgent => mini_swe_agent::launch(&self.dir, ctx),
            HarnessName::Codex => codex::launch(&self.dir, ctx),
            HarnessName::ClaudeCode => claude_code::launch(&self.dir, ctx),
            HarnessName::CopilotCli => copilot_cli::launch(&self.dir, ctx),
            other => unreachable!("{} has no installed form", other.as_str()),
        }
    }

    /// The version the harness reports about itself, recorded with the result.
    /// Asking a harness for its version starts it (a Python import for mini-swe-agent takes
    /// ~170 ms), so the answer is asked once per install and kept beside it.
    pub async fn reported_version(&self) -> Option<String> {
        let cache = self.dir.join(".reported-version");
        if let Ok(version) = tokio::fs::read_to_string(&cache).await {
            return Some(version.trim().to_string()).filter(|v| !v.is_empty());
        }
        let version = self.ask_version().await?;
        let _ = tokio::fs::write(&cache, &version).await;
        Some(version)
    }

    /// Where the harness kept its own session log of a run, looked for after the agent exited
    /// (`None` for a harness that keeps none). The files are the agent's: they are listed without
    /// following symbolic links, and must be read as untrusted.
    pub fn session_log(&self, ctx: &AgentContext) -> Option<SessionLog> {
        match self.harness.name {
            HarnessName::MiniSweAgent => Some(mini_swe_agent::session_log(ctx)),
            HarnessName::Codex => Some(codex::session_log(ctx)),
            HarnessName::ClaudeCode => Some(claude_code::session_log(ctx)),
            HarnessName::CopilotCli => Some(copilot_cli::session_log(ctx)),
            _ => None,
        }
    }

    async fn ask_version(&self) -> Option<String> {
        match self.harness.name {
            HarnessName::MiniSweAgent => mini_swe_agent::reported_version(&self.dir).await,
            HarnessName::Codex => codex::reported_version(&self.dir).await,
            HarnessName::ClaudeCode => claude_code::reported_version(&self.dir).await,
            HarnessName::CopilotCli => copilot_cli::reported_version(&self.dir).await,
            _ => None,
        }
    }
}

/// A harness's own session log of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLog {
    pub format: SessionFormat,
    /// Where the log was looked for.
    pub location: PathBuf,
    /// Its files, oldest first; none when the harness wrote no log.
    pub files: Vec<PathBuf>,
}

/// The entries under `dir` that are not directories, at most `depth` levels down (1: its own
/// files), whose path `wanted` accepts, oldest first. The directory is the agent's: symbolic
/// links are not followed, but a link (or FIFO, or socket) where a log file is looked for is
/// listed, so that reading it is refused by name ([`crate::agent_files`]) instead of skipped
/// silently.
fn find_files(dir: &Path, depth: usize, wanted: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, wanted: &dyn Fn(&Path) -> bool, out: &mut Vec<(std::time::SystemTime, PathBuf)>) {
        if depth == 0 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            if meta.is_dir() {
                walk(&path, depth - 1, wanted, out);
            } else if wanted(&path) {
                out.push((meta.modified().unwrap_or(std::time::UNIX_EPOCH), path));
            }
        }
    }
    let mut found = Vec::new();
    // The directory itself must not be a link either.
    if std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir()) {
        walk(dir, depth, wanted, &mut found);
    }
    found.sort();
    found.into_iter().map(|(_, path)| path).collect()
}

/// The file name of a path, as text.
fn file_name(path: &Path) -> &str {
    path.file_name().and_then(OsStr::to_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight installers of one harness at once: one fills the staging directory, the others wait
    /// and then find it installed; nobody sees a half-written install.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_installs_take_turns_and_fill_once() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("harnesses/h/1.0.0");
        let fills = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let installs = (0..8).map(|_| {
            let (dir, fills) = (dir.clone(), fills.clone());
            tokio::spawn(async move {
                let installed = install_once(dir, "h==1.0.0", |staging| async move {
                    fills.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    // A slow package manager writing a binary in several pieces.
                    for part in 0..5 {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        let mut f =
                            std::fs::OpenOptions::new().create(true).append(true).open(staging.join("bin")).unwrap();
                        std::io::Write::write_all(&mut f, format!("{part}").as_bytes()).unwrap();
                    }
                    Ok(())
                })
                .await
                .unwrap();
                std::fs::read_to_string(installed.join("bin")).unwrap()
            })
        });
        for contents in futures::future::join_all(installs).await {
            assert_eq!(contents.unwrap(), "01234");
        }
        assert_eq!(fills.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn finding_session_files_lists_links_without_following_them_and_keeps_to_depth() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions/2026/12/01");
        std::fs::create_dir_all(&sessions).unwrap();
        std::fs::write(sessions.join("rollout-a.jsonl"), "{}\n").unwrap();
        std::fs::write(sessions.join("notes.txt"), "").unwrap();
        let secret = dir.path().join("secret.jsonl");
        std::fs::write(&secret, "ground truth").unwrap();
        std::os::unix::fs::symlink(&secret, sessions.join("rollout-link.jsonl")).unwrap();
        std::os::unix::fs::symlink(dir.path(), sessions.join("loop")).unwrap();
        let rollouts = |depth| {
            find_files(&dir.path().join("sessions"), depth, &|p: &Path| {
                file_name(p).starts_with("rollout-") && file_name(p).ends_with(".jsonl")
            })
        };
        let mut found = rollouts(4);
        found.sort();
        // The link is listed (its read is then refused by name); the linked directory `loop` is
        // not walked into, or `rollout-a.jsonl` would be found again through it.
        assert_eq!(found, [sessions.join("rollout-a.jsonl"), sessions.join("rollout-link.jsonl")]);
        assert!(rollouts(3).is_empty(), "too deep");
        assert!(find_files(&dir.path().join("missing"), 4, &|_: &Path| true).is_empty());
    }
}
