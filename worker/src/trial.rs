//! Running one trial attempt: give the agent its prompt, enforce the time and budget limits,
//! keep what it wrote, and record the result. The ground truth is not an input here: judging
//! happens after the agent has exited, elsewhere (invariant 2).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lightsout_core::api::HarnessName;
use lightsout_core::compress::{compress, EXCHANGES_ARTIFACT, TRAJECTORY_ARTIFACT};
use lightsout_core::dataset::Task;
use lightsout_core::findings::parse_review;
use lightsout_core::hash::sha256_hex;
use lightsout_core::model::{CallError, ChatRequest, Endpoint, ModelClient, Usage};
use lightsout_core::plan::Variant;
use lightsout_core::pricing::PricingTable;
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::trial::{Outcome, TrajectorySummary, TrialResult, RESULT_SCHEMA};
use lightsout_s3::{Artifact, Uploader};

use crate::agent_process::{self, AgentExit, AgentUser, Limits};
use crate::harness::{AgentContext, Installed, SingleShot, SINGLE_SHOT_VERSION};
use crate::proxy::{MeteringProxy, ProxyConfig};
use crate::sandbox::SandboxArgs;

/// Everything one attempt needs, and nothing the agent must not see.
#[derive(Debug, Clone)]
pub struct TrialJob {
    pub run: String,
    pub variant: Variant,
    pub task: Task,
    pub trial_id: String,
    pub repeat: u32,
    pub attempt: u32,
    /// The full review prompt (see `lightsout_core::prompts`).
    pub prompt: String,
    /// The variant's model endpoint, reached by trusted code only.
    pub endpoint: Endpoint,
    pub timeout: Duration,
    pub max_tokens: Option<u64>,
    pub max_usd: Option<f64>,
    pub scripted_model: bool,
    /// How to run an agentic harness (everything but single-shot).
    pub agent: Option<AgentSetup>,
}

/// What an agentic harness needs besides the job: where it is installed, the repository to
/// review, a scratch directory, and the sandbox to run in.
#[derive(Debug, Clone)]
pub struct AgentSetup {
    pub installed: Installed,
    /// The task repository's base tree (see `lightsout_core::workspace`).
    pub base_tree: PathBuf,
    /// Scratch space for this attempt; removed afterwards.
    pub scratch: PathBuf,
    /// Local mode's network and filesystem sandbox; `None` runs the agent without one.
    pub sandbox: Option<SandboxLauncher>,
    pub max_turns: Option<u32>,
    /// Between SIGTERM and SIGKILL at the time limit.
    pub grace: Duration,
}

/// How to start the sandbox: a program (the worker or CLI binary itself) with the arguments that
/// select its sandbox entry point, and the directories to hide from the agent.
#[derive(Debug, Clone)]
pub struct SandboxLauncher {
    pub program: PathBuf,
    pub leading_args: Vec<OsString>,
    pub hide: Vec<PathBuf>,
}

/// Where attempts spool their artifacts before they are confirmed stored.
pub fn spool_root() -> PathBuf {
    std::env::temp_dir().join("lightsout-spool")
}

/// Stores an attempt's artifacts through a spool, `result.json` last and only once everything
/// else is confirmed: its presence means the set is complete. Keys are deterministic, so an
/// attempt redone after an interruption replaces its artifacts and never duplicates them. If the
/// store stays down past the deadline, the error ends the attempt as an infrastructure failure.
async fn publish<S: ResultStore + Clone>(
    store: &S,
    run: &str,
    trial: &str,
    attempt: u32,
    artifacts: Vec<Artifact>,
    deadline: Duration,
) -> std::io::Result<()> {
    // Keyed by the destination too: two runs of the same spec into different stores (or two
    // tests) must never share a spool.
    let destination = lightsout_core::hash::short_hash(store.uri("").as_bytes());
    let spool = spool_root().join(destination).join(run).join(trial).join(format!("attempt-{attempt}"));
    // A spool left by an interrupted process belongs to an attempt that is being redone now.
    let _ = tokio::fs::remove_dir_all(&spool).await;
    let uploader = Uploader::new(store.clone(), &spool)
        .with_deadline(deadline)
        .with_backoff(Duration::from_millis(200), Duration::from_secs(10));
    uploader.upload(artifacts).await.map(|_| ()).map_err(std::io::Error::from)
}

/// What an attempt produced besides its result record.
#[derive(Debug, Clone)]
pub struct TrialArtifacts {
    pub result: TrialResult,
    pub review: Option<String>,
}

/// Runs one attempt and stores its artifacts; `result.json` is written last, so its presence
/// means the attempt finished and everything it refers to is stored.
pub async fn run_trial<S: ResultStore + Clone>(
    job: &TrialJob,
    client: &ModelClient,
    pricing: &PricingTable,
    store: &S,
    upload_deadline: Duration,
) -> std::io::Result<TrialArtifacts> {
    let layout = RunLayout::new(&job.run);
    let key = |name: &str| layout.artifact(&job.variant.id, &job.trial_id, job.attempt, name);
    let mut artifacts = vec![Artifact::new(key("prompt.txt"), job.prompt.as_bytes().to_vec())];

    let started_at = chrono::Utc::now();
    let clock = Instant::now();
    let attempt = run_agent(job, client, pricing).await;
    let duration_ms = clock.elapsed().as_millis() as u64;
    let (attempt, extra_artifacts, harness_version, trajectory) = attempt;
    for (name, bytes) in extra_artifacts {
        artifacts.push(Artifact::new(key(&name), bytes));
    }

    let (mut outcome, mut error, review, usage, model_calls) = match attempt {
        AgentRun::Reviewed { text, usage, calls } => (Outcome::Ok, None, Some(text), usage, calls),
        AgentRun::Failed { outcome, error, usage, calls } => (outcome, Some(error), None, usage, calls),
    };
    let cost_usd = pricing.cost(&job.variant.model.name, &usage);
    // Limits are checked on what was spent: a single-shot call cannot be stopped half-way, so
    // a review that overran its budget is not scored as a success.
    if outcome == Outcome::Ok {
        if let Some(limit) = job.max_tokens.filter(|limit| usage.total_tokens() > *limit) {
            outcome = Outcome::BudgetExceeded;
            error = Some(format!("used {} tokens, over the trial limit of {limit}", usage.total_tokens()));
        } else if let (Some(limit), Some(cost)) = (job.max_usd, cost_usd) {
            if cost > limit {
                outcome = Outcome::BudgetExceeded;
                error = Some(format!("cost {cost:.4} USD, over the trial limit of {limit} USD"));
            }
        }
    }

    let parsed = review.as_deref().filter(|_| outcome == Outcome::Ok).map(parse_review);
    if let Some(text) = &review {
        artifacts.push(Artifact::new(key("review.md"), text.as_bytes().to_vec()));
    }
    if let Some(parsed) = &parsed {
        artifacts.push(Artifact::new(key("findings.json"), serde_json::to_vec_pretty(parsed)?));
    }
    let result = TrialResult {
        schema: RESULT_SCHEMA.to_string(),
        run: job.run.clone(),
        variant_id: job.variant.id.clone(),
        variant: job.variant.name.clone(),
        trial_id: job.trial_id.clone(),
        task_id: job.task.id.clone(),
        repeat: job.repeat,
        attempt: job.attempt,
        outcome,
        error,
        harness: job.variant.harness.clone(),
        harness_version_reported: harness_version,
        model: job.variant.model.name.clone(),
        provider: job.variant.model.provider.clone(),
        reasoning_effort: job.variant.reasoning_effort,
        prompt_sha256: sha256_hex(job.prompt.as_bytes()),
        started_at,
        finished_at: chrono::Utc::now(),
        duration_ms,
        usage,
        cost_usd,
        model_calls,
        findings: parsed.as_ref().map(|p| p.findings.len() as u32).unwrap_or(0),
        review_words: parsed.as_ref().map(|p| p.words as u32).unwrap_or(0),
        scripted_model: job.scripted_model,
        trajectory,
    };
    artifacts.push(Artifact::new(key("result.json"), serde_json::to_vec_pretty(&result)?));
    publish(store, &job.run, &job.trial_id, job.attempt, artifacts, upload_deadline).await?;
    Ok(TrialArtifacts { result, review })
}

enum AgentRun {
    Reviewed { text: String, usage: Usage, calls: u32 },
    Failed { outcome: Outcome, error: String, usage: Usage, calls: u32 },
}

/// The agent's run, the artifacts it left besides its review, the harness version it reported,
/// and the summary of its trajectory.
type AgentOutcome = (AgentRun, Vec<(String, Vec<u8>)>, Option<String>, Option<TrajectorySummary>);

async fn run_agent(job: &TrialJob, client: &ModelClient, pricing: &PricingTable) -> AgentOutcome {
    if let Some(setup) = &job.agent {
        return run_agentic(job, setup, pricing).await;
    }
    let run = match job.variant.harness.name {
        HarnessName::SingleShot => {
            let harness = SingleShot { client, endpoint: &job.endpoint };
            let request = ChatRequest {
                model: job.variant.model.name.clone(),
                system: None,
                user: job.prompt.clone(),
                reasoning_effort: job.variant.reasoning_effort,
                max_output_tokens: None,
            };
            match tokio::time::timeout(job.timeout, harness.review(request)).await {
                Err(_) => AgentRun::Failed {
                    outcome: Outcome::TimedOut,
                    error: format!("no review within the {}s time limit", job.timeout.as_secs()),
                    usage: Usage::default(),
                    calls: 1,
                },
                Ok(Ok(completion)) => {
                    AgentRun::Reviewed { text: completion.text, usage: completion.usage, calls: completion.attempts }
                }
                Ok(Err(error)) => AgentRun::Failed {
                    outcome: classify(&error),
                    error: error.to_string(),
                    usage: Usage::default(),
                    calls: 1,
                },
            }
        }
        other => AgentRun::Failed {
            outcome: Outcome::InfraFailed,
            error: crate::harness::unavailable_reason(other),
            usage: Usage::default(),
            calls: 0,
        },
    };
    (run, Vec::new(), Some(SINGLE_SHOT_VERSION.to_string()), None)
}

/// The port the agent reaches the proxy on inside its sandbox (its own network namespace, so any
/// port is free).
const SANDBOX_PROXY_PORT: u16 = 4000;

/// Runs an agentic harness: workspace, proxy, sandbox, time limit; then reads `review.md`.
async fn run_agentic(job: &TrialJob, setup: &AgentSetup, pricing: &PricingTable) -> AgentOutcome {
    let version = setup.installed.reported_version().await;
    let infra = |error: String| {
        (
            AgentRun::Failed { outcome: Outcome::InfraFailed, error, usage: Usage::default(), calls: 0 },
            Vec::new(),
            version.clone(),
            None,
        )
    };
    let scratch = &setup.scratch;
    let _ = std::fs::remove_dir_all(scratch);
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
        unix_socket: setup.sandbox.as_ref().map(|_| socket.clone()),
    })
    .await;
    let proxy = match proxy {
        Ok(proxy) => proxy,
        Err(e) => return infra(format!("starting the metering proxy: {e}")),
    };
    let proxy_base_url = match &setup.sandbox {
        Some(_) => format!("http://127.0.0.1:{SANDBOX_PROXY_PORT}/v1"),
        None => proxy.base_url(),
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
    let user = AgentUser::for_this_process();
    if let Err(e) = agent_process::hand_over(&[&workspace.repo, &home, &logs], user) {
        return infra(format!("handing the workspace to the agent user: {e}"));
    }
    let run_as = match &setup.sandbox {
        Some(sandbox) => {
            let args = SandboxArgs {
                socket: socket.clone(),
                port: SANDBOX_PROXY_PORT,
                hide: sandbox.hide.clone(),
                user,
                program: launch.program.clone().into(),
                args: launch.args.clone(),
            };
            launch.program = sandbox.program.clone();
            launch.args = sandbox.leading_args.iter().cloned().chain(args.to_args()).collect();
            // The sandbox starts as root and drops to the agent user itself.
            None
        }
        None => user,
    };
    let limits = Limits { timeout: job.timeout, grace: setup.grace };
    let ran =
        agent_process::run(&launch, run_as, limits, &run_dir.join("agent.stdout"), &run_dir.join("agent.stderr")).await;
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
    let trajectory = lightsout_core::trajectory::build(&exchanges);
    let trajectory_summary = TrajectorySummary {
        turns: trajectory.turns,
        tool_calls: trajectory.tool_calls,
        action_mix: trajectory.action_mix.iter().map(|(action, n)| (action.as_str().to_string(), *n)).collect(),
    };
    match compress(lightsout_core::trajectory::to_jsonl(&trajectory).as_bytes()) {
        Ok(packed) => artifacts.push((TRAJECTORY_ARTIFACT.into(), packed)),
        Err(e) => return infra(format!("compressing the trajectory: {e}")),
    }
    for (name, path) in [("agent.stdout", run_dir.join("agent.stdout")), ("agent.stderr", run_dir.join("agent.stderr"))]
    {
        if let Ok(bytes) = std::fs::read(&path) {
            artifacts.push((name.into(), bytes));
        }
    }
    if let Ok(entries) = std::fs::read_dir(&logs) {
        for entry in entries.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                artifacts.push((format!("harness-{}", entry.file_name().to_string_lossy()), bytes));
            }
        }
    }
    let review = std::fs::read_to_string(workspace.repo.join("review.md")).ok().filter(|r| !r.trim().is_empty());
    let usage = totals.usage;
    let calls = totals.calls;
    let provider_failed = exchanges.iter().any(|e| e.status >= 500) && !exchanges.iter().any(|e| e.status < 400);
    let run = match ran {
        Err(e) => AgentRun::Failed {
            outcome: Outcome::InfraFailed,
            error: format!("starting the harness: {e}"),
            usage,
            calls,
        },
        Ok(ran) => match (&ran.exit, review) {
            (_, _) if totals.refused > 0 => AgentRun::Failed {
                outcome: Outcome::BudgetExceeded,
                error: format!("the trial's budget was spent after {calls} calls ({} tokens)", usage.total_tokens()),
                usage,
                calls,
            },
            (AgentExit::TimedOut { .. }, _) => AgentRun::Failed {
                outcome: Outcome::TimedOut,
                error: format!("the harness did not finish within {}s", job.timeout.as_secs()),
                usage,
                calls,
            },
            (_, Some(text)) => AgentRun::Reviewed { text, usage, calls },
            (AgentExit::Exited(status), None) if status.code() == Some(125) => AgentRun::Failed {
                outcome: Outcome::InfraFailed,
                error: format!("the sandbox could not start the agent: {}", tail(&run_dir.join("agent.stderr"))),
                usage,
                calls,
            },
            (AgentExit::Exited(_), None) if provider_failed => AgentRun::Failed {
                outcome: Outcome::InfraFailed,
                error: "every model call failed on the provider's side".into(),
                usage,
                calls,
            },
            (AgentExit::Exited(status), None) => AgentRun::Failed {
                outcome: Outcome::AgentFailed,
                error: format!(
                    "the harness exited ({status}) without writing review.md: {}",
                    tail(&run_dir.join("agent.stderr"))
                ),
                usage,
                calls,
            },
        },
    };
    let _ = std::fs::remove_dir_all(scratch);
    (run, artifacts, version, Some(trajectory_summary))
}

/// The last lines of a log, for an error message.
fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Who is answerable for a failed model call. Outages, rate limits that outlast the retries,
/// bad credentials and unknown models are not the model's doing (invariant 5); a request the
/// provider refuses for its content (e.g. a context too long for the model) is.
fn classify(error: &CallError) -> Outcome {
    match error {
        CallError::Status { status: 400 | 413 | 422, .. } => Outcome::AgentFailed,
        _ => Outcome::InfraFailed,
    }
}
