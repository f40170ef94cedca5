//! `lightsout-worker`: the in-pod side of a trial.
//!
//! - `install-harness NAME VERSION [--root DIR]`: installs a pinned harness (an init
//!   container's job), printing where it went and the version it reports.
//! - `run --job FILE`: runs one trial attempt (the main container's entrypoint): workspace,
//!   metering proxy, harness in its sandbox, upload, and a summary in the termination message.
//!   Exit status: 0 when the attempt's result is stored (whatever the agent did), 3 when an
//!   infrastructure failure ended it (the controller retries), 2 for a bad job.
//! - `sandbox …`: the agent sandbox's entry point, started by the worker itself.
//! - `resolve HOST:PORT`: prints the addresses the worker resolves a name to, for debugging a
//!   task image's DNS setup (the static worker brings its own resolver, reading the image's
//!   `/etc/hosts`, `/etc/resolv.conf` and `/etc/nsswitch.conf`).
//! - `copy-self DIR`: copies this executable to `DIR/lightsout-worker` (mode 0755, atomically:
//!   a temporary file in `DIR` renamed into place). The trial pod's `worker` init container runs
//!   it to put the static worker into the volume the task container runs it from.
//! - `--version`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use lightsout_api::{HarnessName, HarnessRef};
use lightsout_core::trial::{Outcome, TrialResult, TrialSummary};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{ModelClient, RateLimitPolicy, RetryPolicy};
use lightsout_s3::Results;
use lightsout_worker::interruption::{self, SpendSoFar};
use lightsout_worker::job::PodJob;
use lightsout_worker::trial::{run_trial, AgentSetup, SandboxLauncher, TrialJob};
use lightsout_worker::{harness, sandbox};

/// The worker's exit status when an infrastructure failure ended the attempt.
const EXIT_INFRA: u8 = 3;

/// Makes this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`).
///
/// The agent runs as the same uid as the worker in a restricted pod, and the worker holds the
/// provider key (from the environment, for its metering proxy). A dumpable process's
/// `/proc/<pid>/environ` and `/proc/<pid>/mem` are readable and ptrace-able by any process of
/// the same uid; a non-dumpable one's `/proc/<pid>` files are owned by root and ptrace attach is
/// refused, so the agent cannot read the key out of the worker. Children started by `execve`
/// become dumpable again, which is why the key is also never passed to the agent's environment.
fn make_non_dumpable() -> std::io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes one integer argument and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process is dumpable (`prctl(PR_GET_DUMPABLE)`).
#[cfg(test)]
fn is_dumpable() -> bool {
    // SAFETY: PR_GET_DUMPABLE takes no argument.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) != 0 }
}

/// `copy-self DIR`: copies the running executable to `DIR/lightsout-worker`, mode 0755, through a
/// temporary file in `DIR` renamed into place, so a reader never sees a half-written binary.
fn copy_self(dir: &std::path::Path) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let source = std::env::current_exe()?;
    std::fs::create_dir_all(dir)?;
    let target = dir.join("lightsout-worker");
    let temp = dir.join(format!(".lightsout-worker.tmp-{}", std::process::id()));
    let result = (|| {
        let mut input = std::fs::File::open(&source)?;
        let mut output = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o755).open(&temp)?;
        std::io::copy(&mut input, &mut output)?;
        output.flush()?;
        // The mode given to open is masked by the umask; set it exactly.
        output.set_permissions(std::fs::Permissions::from_mode(0o755))?;
        output.sync_all()?;
        drop(output);
        std::fs::rename(&temp, &target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map(|()| target)
}

fn run_job(file: &std::path::Path) -> ExitCode {
    // First, before the key is read: see make_non_dumpable.
    if let Err(e) = make_non_dumpable() {
        eprintln!("lightsout-worker: prctl(PR_SET_DUMPABLE, 0): {e}");
        return ExitCode::from(EXIT_INFRA);
    }
    let job = match std::fs::read_to_string(file).map_err(|e| e.to_string()).and_then(|text| PodJob::parse(&text)) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("lightsout-worker: job {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let Some(api_key) = std::env::var(&job.provider.api_key_env).ok().filter(|k| !k.is_empty()) else {
        eprintln!(
            "lightsout-worker: job {}: the provider key variable {} is not set",
            file.display(),
            job.provider.api_key_env
        );
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lightsout-worker: {e}");
            return ExitCode::from(EXIT_INFRA);
        }
    };
    runtime.block_on(async move {
        // Before anything is spent: a stopped pod's worker records what it spent (see
        // `interruption`), instead of the default action (in a container the worker is PID 1,
        // which ignores SIGTERM until the kubelet's SIGKILL).
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(e) => {
                eprintln!("lightsout-worker: handling SIGTERM: {e}");
                return ExitCode::from(EXIT_INFRA);
            }
        };
        let store = match Results::open(&job.results, job.s3.as_ref(), None) {
            Ok(store) => store,
            Err(e) => {
                eprintln!("lightsout-worker: results {}: {e}", job.results);
                return ExitCode::from(2);
            }
        };
        // A Job its queue admitted again after its pod had stored the attempt's result (Kueue
        // preempted it while it was exiting): the attempt is done; running it again would
        // replace its result, and the calls that result counts would be counted nowhere.
        if let Some(stored) = stored_result(&store, &job).await {
            let message = TrialSummary::of(&stored).to_termination_message();
            if let Err(e) = std::fs::write(&job.termination_log, &message) {
                eprintln!("lightsout-worker: writing {}: {e}", job.termination_log.display());
            }
            println!("{message}");
            eprintln!(
                "lightsout-worker: attempt {} of trial {} is already stored; not run again",
                job.attempt, job.trial_id
            );
            return if stored.outcome == Outcome::InfraFailed { ExitCode::from(EXIT_INFRA) } else { ExitCode::SUCCESS };
        }
        let harness_root = job.harness_root.clone().unwrap_or_else(harness::default_root);
        let installed = match harness::install(&job.variant.harness, &harness_root).await {
            Ok(installed) => installed,
            Err(e) => {
                eprintln!("lightsout-worker: harness {}: {e}", job.variant.harness.name.as_str());
                return ExitCode::from(EXIT_INFRA);
            }
        };
        let agent = match (installed, &job.base_tree) {
            (Some(installed), Some(base_tree)) => Some(AgentSetup {
                installed,
                base_tree: base_tree.clone(),
                scratch: std::env::temp_dir().join(format!("lightsout-{}-{}", job.trial_id, job.attempt)),
                // Root or not: without root (the restricted pod) the sandbox applies what works
                // unprivileged and records what it could not.
                sandbox: std::env::current_exe().ok().map(|program| SandboxLauncher {
                    program,
                    leading_args: vec!["sandbox".into()],
                    hide: vec![lightsout_worker::trial::spool_root()],
                }),
                max_turns: job.max_turns,
                max_file_bytes: job.max_file_bytes.unwrap_or(lightsout_worker::agent_files::DEFAULT_MAX_FILE_BYTES),
                grace: std::time::Duration::from_secs(10),
                scratch_mib: job.scratch_mib.unwrap_or_else(lightsout_worker::scratch::scratch_mib),
                provider_stall_timeout: job.provider_stall_timeout(),
            }),
            (Some(_), None) => {
                eprintln!("lightsout-worker: job {}: an agentic harness needs baseTree", file.display());
                return ExitCode::from(2);
            }
            (None, _) => None,
        };
        let trial = TrialJob {
            run: job.run.clone(),
            variant: job.variant.clone(),
            task: job.task.clone(),
            trial_id: job.trial_id.clone(),
            context_config: job.context_config,
            repeat: job.repeat,
            attempt: job.attempt,
            prompt: job.prompt.clone(),
            endpoint: job.endpoint(api_key),
            timeout: job.timeout(),
            max_tokens: job.max_tokens,
            max_usd: job.max_usd,
            agent,
            spend: SpendSoFar::default(),
        };
        // The request timeout outlasts the time limit, which `single-shot` enforces itself and
        // classifies (a provider failing when it runs out is an infrastructure failure).
        let client = ModelClient::with_timeouts(
            job.timeout() + std::time::Duration::from_secs(5),
            Some(job.provider_stall_timeout()),
            RetryPolicy::default(),
            RateLimitPolicy::default(),
        );
        let deadline = std::time::Duration::from_secs(job.upload_deadline_seconds);
        let started_at = chrono::Utc::now();
        let pricing = PricingTable::default();
        let mut attempt = Box::pin(run_trial(&trial, &client, &pricing, &store, deadline));
        let finished = tokio::select! {
            finished = &mut attempt => finished,
            _ = terminate.recv() => {
                if trial.spend.publishing() {
                    // Its calls are over and in the result being stored: finish storing it
                    // (within the grace period), or the record would count them a second time.
                    attempt.await
                } else {
                    // Dropping the attempt kills the agent's sandbox (and everything in it) and
                    // stops the metering proxy: no call is made after the spend is read.
                    drop(attempt);
                    if let Some(agent) = &trial.agent {
                        lightsout_worker::scratch::remove(&agent.scratch, true);
                    }
                    return stopped(&trial, &store, started_at).await;
                }
            }
        };
        match finished {
            Ok(artifacts) => {
                let message = TrialSummary::of(&artifacts.result).to_termination_message();
                if let Err(e) = std::fs::write(&job.termination_log, &message) {
                    eprintln!("lightsout-worker: writing {}: {e}", job.termination_log.display());
                }
                println!("{message}");
                if artifacts.result.outcome == Outcome::InfraFailed {
                    ExitCode::from(EXIT_INFRA)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(e) => {
                eprintln!("lightsout-worker: storing the attempt's results failed: {e}");
                ExitCode::from(EXIT_INFRA)
            }
        }
    })
}

/// The attempt's `result.json`, when the store already holds it (for this trial and attempt).
/// A store that cannot be read now is not a reason to stop: the attempt runs, and its upload
/// waits out the outage.
async fn stored_result(store: &Results, job: &PodJob) -> Option<TrialResult> {
    use lightsout_core::results::{ResultStore, RunLayout};
    let key = RunLayout::new(&job.run).artifact(&job.variant.id, &job.trial_id, job.attempt, "result.json");
    let bytes = store.get(&key).await.ok()??;
    let result: TrialResult = serde_json::from_slice(&bytes).ok()?;
    (result.trial_id == job.trial_id && result.attempt == job.attempt).then_some(result)
}

/// SIGTERM before the attempt's calls were over: records what they spent, and ends the attempt
/// as an infrastructure failure (the pod is going away; its next run does the attempt again).
async fn stopped(trial: &TrialJob, store: &Results, started_at: chrono::DateTime<chrono::Utc>) -> ExitCode {
    let record = trial.interruption(started_at, chrono::Utc::now(), "SIGTERM");
    match interruption::record(store, &record).await {
        Ok(()) => eprintln!(
            "lightsout-worker: stopped (SIGTERM) after {} finished model calls; their spend is stored in {}",
            record.model_calls,
            record.file_name()
        ),
        Err(e) => eprintln!(
            "lightsout-worker: stopped (SIGTERM) after {} finished model calls; storing their spend failed: {e}",
            record.model_calls
        ),
    }
    ExitCode::from(EXIT_INFRA)
}

fn usage() -> ExitCode {
    eprintln!("usage: lightsout-worker run --job FILE\n       lightsout-worker install-harness NAME VERSION [--root DIR]\n       lightsout-worker resolve HOST:PORT\n       lightsout-worker copy-self DIR\n       lightsout-worker --version\n       lightsout-worker sandbox [--socket S --port P] [--hide DIR]... [--keep DIR]... [--tmpfs-mib N] [--report-fd N] [--user UID:GID] -- PROGRAM [ARGS]...");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("sandbox") => match sandbox::main(&args[1..]) {
            Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
            Err(e) => {
                eprintln!("lightsout-worker sandbox: {e}");
                usage()
            }
        },
        Some("install-harness") => install_harness(&args[1..]),
        Some("--version") => {
            println!("lightsout-worker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("resolve") => match args.get(1).and_then(|a| a.to_str()) {
            Some(target) => resolve(target),
            None => usage(),
        },
        Some("copy-self") => match args.get(1) {
            Some(dir) if args.len() == 2 => match copy_self(std::path::Path::new(dir)) {
                Ok(target) => {
                    println!("copied to {}", target.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("lightsout-worker: copy-self {}: {e}", PathBuf::from(dir).display());
                    ExitCode::FAILURE
                }
            },
            _ => usage(),
        },
        Some("run") => match (args.get(1).and_then(|a| a.to_str()), args.get(2)) {
            (Some("--job"), Some(file)) => run_job(&PathBuf::from(file)),
            _ => usage(),
        },
        _ => usage(),
    }
}

fn resolve(target: &str) -> ExitCode {
    use std::net::ToSocketAddrs;
    match target.to_socket_addrs() {
        Ok(addresses) => {
            let list: Vec<String> = addresses.map(|a| a.to_string()).collect();
            println!("{}", list.join(" "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lightsout-worker: cannot resolve {target}: {e}");
            ExitCode::FAILURE
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_non_dumpable_clears_the_dumpable_flag() {
        // The test binary starts dumpable (same uid, no setuid): the assertion can fail.
        assert!(is_dumpable());
        make_non_dumpable().unwrap();
        assert!(!is_dumpable());
    }
}
