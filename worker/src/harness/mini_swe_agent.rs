//! `mini-swe-agent` (PyPI): a small tool-calling agent driven by litellm.
//!
//! Installed into its own virtualenv under the harness root. Its model traffic is routed
//! through the proxy by litellm's base-URL variables; it holds only the trial's dummy key.

use std::path::{Path, PathBuf};

use lightsout_api::ApiKind;

use super::{find_files, AgentContext, InstallError, SessionFormat, SessionLog};
use crate::agent_process::LaunchSpec;

pub const PACKAGE: &str = "mini-swe-agent";

pub fn install_dir(root: &Path, version: &str) -> PathBuf {
    root.join(PACKAGE).join(version)
}

/// Creates the virtualenv and installs the exact version, once; a finished install is marked
/// so an interrupted one is redone rather than trusted.
pub async fn install(root: &Path, version: &str) -> Result<PathBuf, InstallError> {
    let requirement = format!("{PACKAGE}=={version}");
    // A virtualenv records its own path; it is created in the staging directory and renamed into
    // place, which is why scripts are run through the venv's python, not their shebangs.
    super::install_once(install_dir(root, version), &requirement.clone(), |staging| async move {
        // The system interpreter, not a per-user one (pyenv under /root): the venv links to it, and
        // the unprivileged agent user must be able to run it.
        let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        super::run_installer(python, &["-m".as_ref(), "venv".as_ref(), staging.as_os_str()]).await?;
        let pip = staging.join("bin/pip");
        super::run_installer(
            pip.as_os_str(),
            &["install".as_ref(), "--quiet".as_ref(), "--disable-pip-version-check".as_ref(), requirement.as_ref()],
        )
        .await
    })
    .await
}

/// The version the installed package reports about itself.
pub async fn reported_version(dir: &Path) -> Option<String> {
    let output = tokio::process::Command::new(dir.join("bin/python"))
        .args(["-c", "import minisweagent; print(minisweagent.__version__)"])
        .env_clear()
        .env("MSWEA_SILENT_STARTUP", "1")
        .output()
        .await
        .ok()?;
    // Importing the package may print a banner first; the version is the last line.
    let stdout = String::from_utf8_lossy(&output.stdout);
    output.status.success().then(|| stdout.lines().last().unwrap_or_default().trim().to_string())
}

/// `mini -m PROVIDER/MODEL -t TASK -y --exit-immediately`, in the repository, with litellm
/// pointed at the proxy.
pub fn launch(dir: &Path, ctx: &AgentContext) -> LaunchSpec {
    let (prefix, base_var, key_var) = match ctx.api_kind {
        ApiKind::Anthropic => ("anthropic", "ANTHROPIC_API_BASE", "ANTHROPIC_API_KEY"),
        ApiKind::OpenAiChat | ApiKind::OpenAiResponses => ("openai", "OPENAI_API_BASE", "OPENAI_API_KEY"),
    };
    let mut args: Vec<std::ffi::OsString> = vec![
        "-m".into(),
        "minisweagent.run.mini".into(),
        "-m".into(),
        format!("{prefix}/{}", ctx.model).into(),
        "-t".into(),
        ctx.task_prompt.clone().into(),
        "-y".into(),
        "--exit-immediately".into(),
        "-o".into(),
        trajectory_path(ctx).into(),
        "-c".into(),
        "mini.yaml".into(),
        // Cost is metered by the proxy; litellm's own table does not know every model.
        "-c".into(),
        "model.cost_tracking=ignore_errors".into(),
        "-c".into(),
        "agent.cost_limit=0".into(),
    ];
    if let Some(effort) = ctx.reasoning_effort {
        args.push("-c".into());
        args.push(format!("model.model_kwargs.reasoning_effort={}", effort.as_str()).into());
    }
    if let Some(turns) = ctx.max_turns {
        args.push("-c".into());
        args.push(format!("agent.step_limit={turns}").into());
    }
    let mut env = ctx.base_env();
    env.extend([
        (key_var.to_string(), ctx.agent_key.clone()),
        (base_var.to_string(), ctx.proxy_base_url.clone()),
        // Also the newer OpenAI SDK variable, which litellm reads too.
        ("OPENAI_BASE_URL".to_string(), ctx.proxy_base_url.clone()),
        ("MSWEA_CONFIGURED".to_string(), "true".to_string()),
        ("MSWEA_SILENT_STARTUP".to_string(), "1".to_string()),
        ("MSWEA_COST_TRACKING".to_string(), "ignore_errors".to_string()),
        ("MSWEA_GLOBAL_CONFIG_DIR".to_string(), ctx.home.join(".config/mini-swe-agent").display().to_string()),
        // litellm would otherwise fetch its model price list from the internet at import.
        ("LITELLM_LOCAL_MODEL_COST_MAP".to_string(), "True".to_string()),
    ]);
    LaunchSpec { program: dir.join("bin/python"), args, env, cwd: ctx.repo.clone() }
}

/// Where the run's trajectory is written (`-o`).
fn trajectory_path(ctx: &AgentContext) -> PathBuf {
    ctx.harness_log_dir.join(TRAJECTORY_FILE)
}

const TRAJECTORY_FILE: &str = "mini-swe-agent-trajectory.json";

/// mini-swe-agent's trajectory of the run, written with `-o`.
pub fn session_log(ctx: &AgentContext) -> SessionLog {
    let location = trajectory_path(ctx);
    let files = find_files(&ctx.harness_log_dir, 1, &|path: &Path| path == location);
    SessionLog { format: SessionFormat::MiniSweAgent, location, files }
}
