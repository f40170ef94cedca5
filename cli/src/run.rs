//! `lightsout run` and `lightsout validate`.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use lightsout_api::validate;
use lightsout_api::EvaluationRun;
use lightsout_core::{dataset, plan};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{RateLimitPolicy, RetryPolicy};
use lightsout_worker::local::{run_local, Event, LocalRun, SandboxCommand};

use crate::output;

fn read_run(file: &Path) -> anyhow::Result<EvaluationRun> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading run file {}", file.display()))?;
    Ok(validate::parse_run(&text, &file.display().to_string())?)
}

pub fn validate(file: &Path) -> anyhow::Result<()> {
    let run = read_run(file)?;
    let spec = &run.spec;
    let loaded = dataset::load(&spec.dataset)?;
    for line in &loaded.skipped {
        eprintln!("warning: skipped malformed dataset line {line}");
    }
    let tasks = dataset::select_for_run(loaded.tasks, spec)?;
    let tasks: Vec<_> = tasks.into_iter().map(|t| t.task).collect();
    let plan = plan::plan(spec, &tasks, |_, _| None);
    let contexts = match &spec.matrix.context_configs {
        Some(_) => format!(" × {} context configurations", lightsout_api::variant::context_axis(spec).len()),
        None => String::new(),
    };
    let mut text = format!(
        "{} is valid: {} variants × {} tasks{contexts} × {} repeats = {} trials\n",
        file.display(),
        plan.variants.len(),
        tasks.len(),
        spec.matrix.repeats,
        plan.trials.len()
    );
    for variant in &plan.variants {
        text.push_str(&format!("  {}  {}\n", variant.id, variant.name));
    }
    output::print(text)
}

/// How `lightsout run` ended, short of an error (exit code 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every trial is final and every review judged: exit code 0.
    Finished,
    /// Some trials are pending, failed on infrastructure on every attempt, or unjudged: exit code
    /// 3. Running the same command again finishes them.
    Unfinished,
}

/// The exit code of a run with trials left to finish.
pub const EXIT_UNFINISHED: u8 = 3;

impl RunEnd {
    pub fn exit_code(self) -> std::process::ExitCode {
        match self {
            RunEnd::Finished => std::process::ExitCode::SUCCESS,
            RunEnd::Unfinished => std::process::ExitCode::from(EXIT_UNFINISHED),
        }
    }
}

/// `provider_stall_timeout`: see `LocalRun::provider_stall_timeout` (`DEFAULT_STALL_TIMEOUT`
/// unless the command line says otherwise).
pub fn run(
    file: &Path,
    results: Option<String>,
    pricing: Option<&Path>,
    provider_stall_timeout: Duration,
) -> anyhow::Result<RunEnd> {
    make_non_dumpable()?;
    let run = read_run(file)?;
    let pricing = match pricing {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading pricing table {}", path.display()))?;
            PricingTable::from_yaml(&text).with_context(|| format!("pricing table {}", path.display()))?
        }
        None => PricingTable::default(),
    };
    let config = LocalRun {
        run,
        results_uri: results,
        pricing,
        env: Box::new(|name| std::env::var(name).ok()),
        retry_delay: Duration::from_secs(2),
        model_retry: RetryPolicy::default(),
        model_rate_limits: RateLimitPolicy::default(),
        provider_stall_timeout,
        harness_root: lightsout_worker::harness::default_root(),
        sandbox: sandbox_command(),
        upload_deadline: Duration::from_secs(600),
        offline_models: Some(std::sync::Arc::new(lightsout_scripted::ScriptedModels::default())),
    };
    let bar = ProgressBar::hidden();
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}")
            .expect("valid template"),
    );
    let on_event = |event: Event| match event {
        // suspend() prints whether or not the bar is drawn yet.
        Event::Notice(text) => bar.suspend(|| eprintln!("note: {text}")),
        Event::Planned { trials, finished, variants, tasks } => {
            bar.suspend(|| {
                eprintln!(
                    "{trials} trials ({variants} variants × {tasks} tasks × repeats); {finished} already finished, {} to run",
                    trials - finished
                )
            });
            bar.set_length(trials as u64);
            bar.set_position(finished as u64);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Event::TrialFinished { variant, task, outcome } => {
            bar.inc(1);
            bar.set_message(format!("{variant} {task}: {}", outcome.as_str()));
        }
        Event::TrialRetried { variant, task, attempt, error } => {
            bar.suspend(|| eprintln!("retrying {variant} {task} after attempt {attempt}: {error}"));
        }
        Event::JudgingFailed { variant, task, error } => {
            bar.suspend(|| eprintln!("judging {variant} {task} failed, will be retried on the next run: {error}"));
        }
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(run_local(config, on_event))?;
    bar.finish_and_clear();
    output::print(format!("{}summary: {}\n", output::summary_table(&report.summary), report.summary_uri))?;
    if report.unfinished.is_empty() {
        return Ok(RunEnd::Finished);
    }
    eprintln!(
        "unfinished: {}; run the same command again to finish them (exit code {EXIT_UNFINISHED})",
        report.unfinished.describe()
    );
    Ok(RunEnd::Unfinished)
}

pub fn scripted_server(api_key: Option<String>, listen: std::net::SocketAddr) -> anyhow::Result<()> {
    use lightsout_scripted::{ScriptedConfig, ScriptedServer};
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let config = ScriptedConfig { expected_api_key: api_key, ..Default::default() };
        // Listening for the signals before the banner: whoever reads the banner may signal at once.
        let stop = shutdown_signal()?;
        let server =
            ScriptedServer::start_on(listen, config).await.with_context(|| format!("listening on {listen}"))?;
        output::print(format!("scripted model server (canned answers, not a real model) at {}\n", server.base_url()))?;
        stop.await;
        server.shutdown().await;
        anyhow::Ok(())
    })
}

/// Ctrl-C (SIGINT) or, on Unix, SIGTERM (what a container runtime sends PID 1). The handlers are
/// installed when this returns, not when the future is first polled.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

/// Agents run in this binary's sandbox, as root or not: as root it makes every namespace and
/// gives each trial a user of its own; otherwise it applies what the kernel allows an
/// unprivileged user (see `lightsout_worker::sandbox`), and each trial's record says what is
/// missing.
fn sandbox_command() -> Option<SandboxCommand> {
    let program = std::env::current_exe().ok()?;
    cfg!(target_os = "linux").then(|| SandboxCommand { program, leading_args: vec!["__sandbox".into()] })
}

/// Makes this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`), so an agent running as the
/// same user (not as root) cannot read the provider keys out of `/proc/<pid>/environ` or its
/// memory, should it see this process at all (without a PID namespace of its own).
fn make_non_dumpable() -> anyhow::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes one integer argument and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("prctl(PR_SET_DUMPABLE, 0)");
    }
    Ok(())
}
