//! An agentic harness's attempt: scratch space, workspace, metering proxy, sandbox, time limit,
//! and what the agent left, read with checks.

use super::*;

/// The port the agent reaches the proxy on inside its sandbox (its own network namespace, so any
/// port is free).
const SANDBOX_PROXY_PORT: u16 = 4000;

/// Runs an agentic harness: workspace, proxy, sandbox, time limit; then reads `review.md`.
pub(super) async fn run_agentic(job: &TrialJob, setup: &AgentSetup, pricing: &PricingTable) -> AgentOutcome {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let scratch = &setup.scratch;
    let mut isolation = Isolation::default();
    // Not as root (in a pod), the volume's own limit applies; a root that may not mount (a
    // container without CAP_SYS_ADMIN) goes on without one, and says so.
    let mounted = match root.then(|| scratch::mount(scratch, setup.scratch_mib)) {
        Some(Ok(())) => {
            isolation.applied.push(format!("scratch: a tmpfs of {} MiB of its own", setup.scratch_mib));
            true
        }
        Some(Err(e)) => {
            isolation.missing.push(format!("scratch size limit: mounting a tmpfs at {}: {e}", scratch.display()));
            false
        }
        None => {
            isolation.missing.push("scratch size limit: needs root (in a pod, the volume's own limit applies)".into());
            false
        }
    };
    if !mounted {
        let _ = std::fs::remove_dir_all(scratch);
    }
    let outcome = run_agentic_in_scratch(job, setup, pricing, root, &mut isolation).await;
    scratch::remove(scratch, mounted);
    let (run, artifacts, version, trajectory) = outcome;
    (run, artifacts, version, trajectory, Some(isolation))
}

/// [`run_agentic`] once the scratch space exists.
async fn run_agentic_in_scratch(
    job: &TrialJob,
    setup: &AgentSetup,
    pricing: &PricingTable,
    root: bool,
    isolation: &mut Isolation,
) -> (AgentRun, Vec<(String, Vec<u8>)>, Option<String>, Option<TrajectorySummary>) {
    let version = setup.installed.reported_version().await;
    let infra = |error: String| {
        (
            AgentRun::Failed {
                outcome: Outcome::InfraFailed,
                error,
                usage: Usage::default(),
                calls: 0,
                scripted: false,
            },
            Vec::new(),
            version.clone(),
            None,
        )
    };
    let scratch = &setup.scratch;
    // A uid of the agent's own, held until the trial ends (see `uid_lease`).
    let lease = match root.then(|| UidLease::acquire(&default_lock_dir(), FIRST_AGENT_UID, AGENT_UIDS)).transpose() {
        Ok(lease) => lease,
        Err(e) => return infra(format!("leasing an agent user id: {e}")),
    };
    let user = lease.as_ref().map(UidLease::user);
    // The proxy is reached through the sandbox's network namespace when one can be made here.
    let network = match &setup.sandbox {
        Some(sandbox) => crate::sandbox::network_namespace(&sandbox.program, &sandbox.leading_args).await,
        None => Err("no sandbox".into()),
    };
    let network_sandbox = network.is_ok();
    if let (Some(_), Err(why)) = (&setup.sandbox, &network) {
        isolation.missing.push(format!("network namespace (the agent shares the worker's network): {why}"));
    }
    let (home, logs, run_dir) = (scratch.join("home"), scratch.join("logs"), scratch.join("run"));
    for dir in [&home, &logs, &run_dir] {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return infra(format!("{}: {e}", dir.display()));
        }
    }
    let workspace = match lightsout_core::workspace::prepare(&job.task, &setup.base_tree, scratch) {
        Ok(workspace) => workspace,
        Err(e) => return infra(format!("preparing the workspace: {e}")),
    };
    let agent_key = format!(
        "lightsout-trial-{}-{}",
        job.trial_id,
        sha256_hex(format!("{}{:?}", job.trial_id, Instant::now()).as_bytes()).get(..16).unwrap_or_default()
    );
    let socket = run_dir.join("proxy.sock");
    let proxy = MeteringProxy::start(ProxyConfig {
        upstream: job.endpoint.clone(),
        agent_key: agent_key.clone(),
        pricing: pricing.clone(),
        max_tokens: job.max_tokens,
        max_usd: job.max_usd,
        log_path: Some(run_dir.join("exchanges.jsonl")),
        unix_socket: network_sandbox.then(|| socket.clone()),
        stall_timeout: setup.provider_stall_timeout,
    })
    .await;
    let proxy = match proxy {
        Ok(proxy) => proxy,
        Err(e) => return infra(format!("starting the metering proxy: {e}")),
    };
    proxy.report_spend_to(job.spend.clone());
    let proxy_base_url = match network_sandbox {
        true => format!("http://127.0.0.1:{SANDBOX_PROXY_PORT}/v1"),
        false => proxy.base_url(),
    };
    let context = AgentContext {
        model: job.variant.model.name.clone(),
        api_kind: job.endpoint.api_kind,
        reasoning_effort: job.variant.reasoning_effort,
        max_turns: setup.max_turns,
        proxy_base_url,
        agent_key,
        task_prompt: job.prompt.clone(),
        repo: workspace.repo.clone(),
        home: home.clone(),
        harness_log_dir: logs.clone(),
    };
    let mut launch = setup.installed.launch(&context);
    if let Err(e) = agent_process::hand_over(&[&workspace.repo, &home, &logs], user) {
        return infra(format!("handing the workspace to the agent user: {e}"));
    }
    let run_as = match &setup.sandbox {
        Some(sandbox) => {
            let args = SandboxArgs {
                proxy: network_sandbox.then(|| (socket.clone(), SANDBOX_PROXY_PORT)),
                hide: sandbox.hide.clone(),
                // The agent's own /tmp is empty; what it works on is bound back in.
                keep: vec![
                    workspace.repo.clone(),
                    workspace.pr.clone(),
                    home.clone(),
                    logs.clone(),
                    setup.installed.dir.clone(),
                ],
                tmpfs_mib: setup.scratch_mib,
                report_fd: Some(agent_process::REPORT_FD),
                user,
                program: launch.program.clone().into(),
                args: launch.args.clone(),
            };
            launch.program = sandbox.program.clone();
            launch.args = sandbox.leading_args.iter().cloned().chain(args.to_args()).collect();
            // The sandbox starts as the worker's user and drops to the agent user itself.
            None
        }
        None => user,
    };
    let limits = Limits { timeout: job.timeout, grace: setup.grace };
    let (stdout, stderr) = (run_dir.join("agent.stdout"), run_dir.join("agent.stderr"));
    let ran = match &setup.sandbox {
        Some(_) => {
            agent_process::run_reporting(&launch, run_as, limits, &stdout, &stderr).await.map(|(ran, report)| {
                let (applied, missing) = Report::parse(&report);
                isolation.applied.extend(applied);
                isolation.missing.extend(missing);
                ran
            })
        }
        None => {
            if let Some(user) = user {
                isolation.applied.push(format!("agent user {}:{} of its own", user.uid, user.gid));
            }
            isolation.missing.push("sandbox: not used in this run (no namespaces, no system-call filter)".into());
            agent_process::run(&launch, run_as, limits, &stdout, &stderr).await
        }
    };
    // Let streams that the agent's exit cut short be recorded before reading the totals.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let totals = proxy.totals();
    let exchanges = proxy.exchanges();
    proxy.shutdown().await;

    let mut artifacts: Vec<(String, Vec<u8>)> = Vec::new();
    let exchanges_jsonl: Vec<u8> = exchanges
        .iter()
        .filter_map(|e| serde_json::to_vec(e).ok())
        .flat_map(|mut line| {
            line.push(b'\n');
            line
        })
        .collect();
    match compress(&exchanges_jsonl) {
        Ok(packed) => artifacts.push((EXCHANGES_ARTIFACT.into(), packed)),
        Err(e) => return infra(format!("compressing the exchange log: {e}")),
    }
    // Everything the agent left is read through `agent_files`, as the agent's user; what is
    // refused fails the trial (below), and is never stored.
    let files = match AgentFiles::open(scratch, user, setup.max_file_bytes) {
        Ok(files) => files,
        Err(e) => return infra(format!("opening the trial's directory: {e}")),
    };
    let mut refused: Vec<Refusal> = Vec::new();
    let mut trajectory = lightsout_trajectory::build(&exchanges);
    let session_log = setup.installed.session_log(&context);
    if let Some(log) = &session_log {
        if let Err(refusal) = merge_session_log(log, &files, &mut trajectory, &mut artifacts) {
            refused.push(refusal);
        }
    }
    for warning in &trajectory.warnings {
        tracing::warn!(trial = %job.trial_id, "trajectory: {warning}");
    }
    let trajectory_summary = summarise(&trajectory);
    match compress(lightsout_trajectory::to_jsonl(&trajectory).as_bytes()) {
        Ok(packed) => artifacts.push((TRAJECTORY_ARTIFACT.into(), packed)),
        Err(e) => return infra(format!("compressing the trajectory: {e}")),
    }
    // The worker made these files, but the agent decides how big they get.
    for (name, path) in [("agent.stdout", run_dir.join("agent.stdout")), ("agent.stderr", run_dir.join("agent.stderr"))]
    {
        if let Ok(bytes) = agent_files::read_own_log(&path, setup.max_file_bytes) {
            artifacts.push((name.into(), bytes));
        }
    }
    if let Ok(entries) = std::fs::read_dir(&logs) {
        let mut stored = 0u64;
        let total_cap = setup.max_file_bytes.saturating_mul(MAX_LOG_FILES_PER_CAP);
        for entry in entries.flatten() {
            if stored >= total_cap {
                tracing::warn!(trial = %job.trial_id, "the harness's logs passed {total_cap} bytes in total; the rest are not stored");
                break;
            }
            // The session log is stored once, compressed, as its own artifact; a harness may
            // keep directories of its own here, which are not taken.
            if session_log.as_ref().is_some_and(|log| log.files.contains(&entry.path()))
                || entry.file_type().is_ok_and(|kind| kind.is_dir())
            {
                continue;
            }
            match files.read(&entry.path()) {
                Ok(bytes) => {
                    stored += bytes.len() as u64;
                    artifacts.push((format!("harness-{}", entry.file_name().to_string_lossy()), bytes))
                }
                Err(refusal) => refused.push(refusal),
            }
        }
    }
    let review = match files.read_if_present(&workspace.repo.join("review.md")) {
        Ok(review) => review.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).filter(|r| !r.trim().is_empty()),
        Err(refusal) => {
            refused.push(refusal);
            None
        }
    };
    // A failure of the worker's own is infrastructure; anything else refused is the agent's.
    let refusal = match refused.iter().find(|r| !r.is_agents_doing()) {
        Some(worker) => Some((Outcome::InfraFailed, format!("reading what the agent left: {worker}"))),
        None if !refused.is_empty() => Some((
            Outcome::AgentFailed,
            format!(
                "refused what the agent left: {}",
                refused.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            ),
        )),
        None => None,
    };
    let usage = totals.usage;
    let calls = totals.calls;
    let scripted = totals.scripted_answers > 0;
    // Every call failed on the provider's side (5xx, 429s past the agent's retries, unreachable):
    // an agent that gives up then is not at fault.
    let provider_failed = !exchanges.is_empty() && totals.provider_failures == totals.calls;
    let run = match ran {
        Err(e) => AgentRun::Failed {
            outcome: Outcome::InfraFailed,
            error: format!("starting the harness: {e}"),
            usage,
            calls,
            scripted,
        },
        Ok(ran) => match (&ran.exit, review, refusal) {
            (_, _, _) if totals.refused > 0 => AgentRun::Failed {
                outcome: Outcome::BudgetExceeded,
                error: format!("the trial's budget was spent after {calls} calls ({} tokens)", usage.total_tokens()),
                usage,
                calls,
                scripted,
            },
            // The provider was failing when the time ran out (the agent was waiting out its
            // 429s, 5xx or a stall): not the model's doing.
            (AgentExit::TimedOut { .. }, _, _) if totals.last_call_failed.is_some() => AgentRun::Failed {
                outcome: Outcome::InfraFailed,
                error: format!(
                    "the provider was failing when the {}s time limit ran out: {} of {calls} model calls failed, the last with {}",
                    job.timeout.as_secs(),
                    totals.provider_failures,
                    totals.last_call_failed.as_deref().unwrap_or_default()
                ),
                usage,
                calls,
                scripted,
            },
            (AgentExit::TimedOut { .. }, _, _) => AgentRun::Failed {
                outcome: Outcome::TimedOut,
                error: format!("the harness did not finish within {}s", job.timeout.as_secs()),
                usage,
                calls,
                scripted,
            },
            (_, _, Some((outcome, error))) => AgentRun::Failed { outcome, error, usage, calls, scripted },
            (_, Some(text), None) => AgentRun::Reviewed { text, usage, calls, scripted, swe_prbench: None },
            (AgentExit::Exited(status), None, None) if status.code() == Some(125) => AgentRun::Failed {
                outcome: Outcome::InfraFailed,
                error: format!("the sandbox could not start the agent: {}", tail(&run_dir.join("agent.stderr"))),
                usage,
                calls,
                scripted,
            },
            (AgentExit::Exited(_), None, None) if provider_failed => AgentRun::Failed {
                outcome: Outcome::InfraFailed,
                error: "every model call failed on the provider's side".into(),
                usage,
                calls,
                scripted,
            },
            (AgentExit::Exited(status), None, None) => AgentRun::Failed {
                outcome: Outcome::AgentFailed,
                error: format!(
                    "the harness exited ({status}) without writing review.md: {}",
                    tail(&run_dir.join("agent.stderr"))
                ),
                usage,
                calls,
                scripted,
            },
        },
    };
    drop(lease);
    (run, artifacts, version, Some(trajectory_summary))
}

/// The most of a log's end read for [`tail`]: the agent decides how big its logs get.
const TAIL_BYTES: u64 = 64 << 10;

/// The last lines of a log, for an error message.
pub(super) fn tail(path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let len = file.metadata().map_or(0, |meta| meta.len());
        if file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES))).is_ok() {
            let _ = file.take(TAIL_BYTES).read_to_end(&mut bytes);
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}
