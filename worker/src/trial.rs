//! Running one trial attempt: give the agent its prompt, enforce the time and budget limits,
//! keep what it wrote, and record the result. The ground truth is not an input here: judging
//! happens after the agent has exited, elsewhere (invariant 2).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lightsout_core::api::{ContextConfig, HarnessName, PromptPreset};
use lightsout_core::compress::{compress, EXCHANGES_ARTIFACT, TRAJECTORY_ARTIFACT};
use lightsout_core::dataset::Task;
use lightsout_core::findings::{parse_review, parse_swe_prbench_answer, ParsedReview, SwePrBenchAnswer};
use lightsout_core::hash::sha256_hex;
use lightsout_core::model::{CallError, ChatRequest, DeadlineError, Endpoint, ModelClient, Usage};
use lightsout_core::plan::Variant;
use lightsout_core::pricing::PricingTable;
use lightsout_core::prompts::{swe_prbench_retry, system_prompt};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::trial::{Isolation, Outcome, TrajectorySummary, TrialResult, RESULT_SCHEMA};
use lightsout_s3::{Artifact, Uploader};

use crate::agent_files::{self, AgentFiles, Refusal};
use crate::agent_process::{self, AgentExit, Limits};
use crate::harness::{AgentContext, Installed, SingleShot, SINGLE_SHOT_VERSION};
use crate::interruption::SpendSoFar;
use crate::proxy::{MeteringProxy, ProxyConfig};
use crate::sandbox::SandboxArgs;
use crate::sandbox_init::Report;
use crate::scratch;
use crate::session_log::{merge_session_log, summarise, MAX_LOG_FILES_PER_CAP};
use crate::uid_lease::{default_lock_dir, UidLease, AGENT_UIDS, FIRST_AGENT_UID};

/// Everything one attempt needs, and nothing the agent must not see.
#[derive(Debug, Clone)]
pub struct TrialJob {
    pub run: String,
    pub variant: Variant,
    pub task: Task,
    pub trial_id: String,
    /// The trial's configuration of the `matrix.contextConfigs` axis (recorded in its result;
    /// the prompt already shows the task in it).
    pub context_config: Option<ContextConfig>,
    pub repeat: u32,
    pub attempt: u32,
    /// The full review prompt (see `lightsout_core::prompts`).
    pub prompt: String,
    /// The variant's model endpoint, reached by trusted code only.
    pub endpoint: Endpoint,
    pub timeout: Duration,
    pub max_tokens: Option<u64>,
    pub max_usd: Option<f64>,
    /// How to run an agentic harness (everything but single-shot).
    pub agent: Option<AgentSetup>,
    /// Kept up to date with every finished model call, for the record a stopped worker writes
    /// ([`crate::interruption`]).
    pub spend: SpendSoFar,
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
    /// The sandbox the agent runs in (root: namespaces, own uid, filter; otherwise the filter and
    /// what else the environment allows, see [`crate::sandbox`]); `None` runs the agent without
    /// one, and the record says so.
    pub sandbox: Option<SandboxLauncher>,
    pub max_turns: Option<u32>,
    /// The most bytes of one file the agent leaves that is read (see `agent_files`).
    pub max_file_bytes: u64,
    /// Between SIGTERM and SIGKILL at the time limit.
    pub grace: Duration,
    /// The size of the scratch tmpfs and of each of the sandbox's private tmpfs, in MiB (see
    /// [`crate::scratch`]).
    pub scratch_mib: u64,
    /// How long the provider may send nothing before the proxy fails the call (see
    /// [`ProxyConfig::stall_timeout`]): the setting the single-shot harness's client has too.
    pub provider_stall_timeout: Duration,
}

/// How to start the sandbox: a program (the worker or CLI binary itself) with the arguments that
/// select its sandbox entry point, and the directories to hide from the agent. As root it gives
/// the agent namespaces of its own; otherwise what the environment allows (see
/// [`crate::sandbox`]).
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

/// Stores an attempt's artifacts, `result.json` last and only once everything else is stored:
/// its presence means the set is complete. A local directory is written in place, each artifact
/// once and durably (see `LocalStore::put`); a remote store through a spool, so that an outage
/// costs no result. Keys are deterministic, so an attempt redone after an interruption replaces
/// its artifacts and never duplicates them. If a remote store stays down past the deadline, the
/// error ends the attempt as an infrastructure failure.
async fn publish<S: ResultStore + Clone>(
    store: &S,
    run: &str,
    trial: &str,
    attempt: u32,
    artifacts: Vec<Artifact>,
    deadline: Duration,
) -> std::io::Result<()> {
    let (commits, others): (Vec<Artifact>, Vec<Artifact>) =
        artifacts.into_iter().partition(|a| a.key.rsplit('/').next() == Some(lightsout_s3::DEFAULT_COMMIT));
    if !store.needs_spool() {
        for artifact in others.iter().chain(&commits) {
            store.put(&artifact.key, &artifact.bytes).await?;
        }
        return Ok(());
    }
    let spool = spool_dir(store, run, trial, attempt);
    remove_abandoned_spools(&spool);
    let uploader = Uploader::new(store.clone(), &spool)
        .with_deadline(deadline)
        .with_backoff(Duration::from_millis(200), Duration::from_secs(10));
    uploader.upload(others.into_iter().chain(commits).collect()).await.map(|_| ()).map_err(std::io::Error::from)
}

/// One attempt's spool: a single directory right under the spool root (which the uploader
/// removes once everything is stored, leaving nothing behind), named by a hash of the
/// destination (so that runs of the same spec into different stores never share one), then by
/// this process's id and a number of its own: a spool belongs to one publication, and two
/// publications of the same attempt to the same bucket (two tests, each with its own S3 server on
/// another endpoint, in one process or two) must not remove each other's files.
fn spool_dir<S: ResultStore>(store: &S, run: &str, trial: &str, attempt: u32) -> PathBuf {
    static PUBLICATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let attempt = attempt.to_string();
    let destination = lightsout_core::hash::short_hash_fields(&[&store.uri(""), run, trial, &attempt]);
    let publication = PUBLICATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    spool_root().join(format!("{destination}-{}-{publication}", std::process::id()))
}

/// Removes the spools of the same attempt left by processes that no longer run: their attempt is
/// being redone now, by this process. A spool whose process is alive is left to it.
fn remove_abandoned_spools(spool: &Path) {
    let owner = |path: &Path| -> Option<(String, u32)> {
        let mut fields = path.file_name()?.to_str()?.splitn(3, '-');
        Some((fields.next()?.to_string(), fields.next()?.parse().ok()?))
    };
    let (Some(root), Some((destination, _))) = (spool.parent(), owner(spool)) else { return };
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some((entry_destination, pid)) = owner(&path) else { continue };
        let owner_alive = Path::new("/proc").join(pid.to_string()).exists();
        if entry_destination == destination && (path == spool || !owner_alive) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
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
    let (attempt, extra_artifacts, harness_version, trajectory, isolation) = attempt;
    for (name, bytes) in extra_artifacts {
        artifacts.push(Artifact::new(key(&name), bytes));
    }

    let (mut outcome, mut error, review, usage, model_calls, scripted_model, swe_prbench_answer) = match attempt {
        AgentRun::Reviewed { text, usage, calls, scripted, swe_prbench } => {
            (Outcome::Ok, None, Some(text), usage, calls, scripted, swe_prbench)
        }
        AgentRun::Failed { outcome, error, usage, calls, scripted } => {
            (outcome, Some(error), None, usage, calls, scripted, None)
        }
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

    // The SWE-PRBench prompt's answer has one reading, the reference harness's (the same the
    // single-shot retry check uses); every other review is read as review.md.
    let read_review: fn(&str) -> ParsedReview = if job.variant.prompt.preset == Some(PromptPreset::SwePrBench) {
        parse_swe_prbench_answer
    } else {
        parse_review
    };
    let mut parsed = review.as_deref().filter(|_| outcome == Outcome::Ok).map(read_review);
    // The single-shot call sequence knows more than its last answer (a blank generation, the
    // first answer's parse error): its reading stands.
    if let (Some(parsed), Some(answer)) = (parsed.as_mut(), swe_prbench_answer) {
        parsed.swe_prbench = Some(answer);
    }
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
        context_config: job.context_config,
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
        scripted_model,
        trajectory,
        isolation,
    };
    artifacts.push(Artifact::new(key("result.json"), serde_json::to_vec_pretty(&result)?));
    job.spend.set_publishing();
    publish(store, &job.run, &job.trial_id, job.attempt, artifacts, upload_deadline).await?;
    Ok(TrialArtifacts { result, review })
}

/// How the agent's run ended. `scripted`: a model answer it got came from the scripted model
/// server (marked so by the server itself), which the result records.
enum AgentRun {
    /// `swe_prbench`: the `swe-prbench` prompt's final answer and parse error as the reference
    /// harness's call sequence left them.
    Reviewed {
        text: String,
        usage: Usage,
        calls: u32,
        scripted: bool,
        swe_prbench: Option<SwePrBenchAnswer>,
    },
    Failed {
        outcome: Outcome,
        error: String,
        usage: Usage,
        calls: u32,
        scripted: bool,
    },
}

/// The agent's run, the artifacts it left besides its review, the harness version it reported,
/// and the summary of its trajectory.
type AgentOutcome = (AgentRun, Vec<(String, Vec<u8>)>, Option<String>, Option<TrajectorySummary>, Option<Isolation>);

async fn run_agent(job: &TrialJob, client: &ModelClient, pricing: &PricingTable) -> AgentOutcome {
    if let Some(setup) = &job.agent {
        return run_agentic(job, setup, pricing).await;
    }
    let run = match job.variant.harness.name {
        HarnessName::SingleShot => single_shot(job, client, pricing).await,
        other => AgentRun::Failed {
            outcome: Outcome::InfraFailed,
            error: crate::harness::unavailable_reason(other),
            usage: Usage::default(),
            calls: 0,
            scripted: false,
        },
    };
    (run, Vec::new(), Some(SINGLE_SHOT_VERSION.to_string()), None, None)
}

/// The built-in harness: one model call; under the `swe-prbench` prompt, the reference
/// harness's call sequence instead ([`swe_prbench_single_shot`]). The time limit covers every
/// call.
async fn single_shot(job: &TrialJob, client: &ModelClient, pricing: &PricingTable) -> AgentRun {
    if job.variant.prompt.preset == Some(PromptPreset::SwePrBench) {
        return swe_prbench_single_shot(job, client, pricing).await;
    }
    let harness = SingleShot { client, endpoint: &job.endpoint };
    let deadline = tokio::time::Instant::now() + job.timeout;
    let request = ChatRequest {
        model: job.variant.model.name.clone(),
        system: None,
        user: job.prompt.clone(),
        reasoning_effort: job.variant.reasoning_effort,
        max_output_tokens: None,
    };
    let mut spent = CallsSpent::default();
    match harness.review(request, deadline).await {
        Ok(completion) => {
            spent.add(&completion);
            meter(job, pricing, &completion);
            AgentRun::Reviewed {
                text: completion.text,
                usage: spent.usage,
                calls: spent.calls,
                scripted: spent.scripted,
                swe_prbench: None,
            }
        }
        Err(error) => spent.failed(error, job.timeout),
    }
}

/// Adds a finished single-shot call to the attempt's [`SpendSoFar`].
fn meter(job: &TrialJob, pricing: &PricingTable, completion: &lightsout_core::model::Completion) {
    job.spend.add(completion.usage, pricing.cost(&job.variant.model.name, &completion.usage), completion.attempts);
}

/// Model calls made so far by the single-shot harness.
#[derive(Debug, Default, Clone, Copy)]
struct CallsSpent {
    usage: Usage,
    calls: u32,
    scripted: bool,
}

impl CallsSpent {
    fn add(&mut self, completion: &lightsout_core::model::Completion) {
        self.usage += completion.usage;
        self.calls += completion.attempts;
        self.scripted |= completion.scripted;
    }

    /// The run ended by a call that did not answer: a provider failing when the time ran out
    /// (5xx, 429s, stalls, nothing sent) is not the model's doing, so an infrastructure failure,
    /// retried; a model still answering at the limit timed out.
    fn failed(self, error: DeadlineError, timeout: Duration) -> AgentRun {
        let (outcome, error) = match error {
            failure @ DeadlineError::ProviderFailing { .. } => (
                Outcome::InfraFailed,
                format!("the provider was failing when the {}s time limit ran out: {failure}", timeout.as_secs()),
            ),
            DeadlineError::Answering => {
                (Outcome::TimedOut, format!("no review within the {}s time limit", timeout.as_secs()))
            }
            DeadlineError::Call(error) => (classify(&error), error.to_string()),
        };
        AgentRun::Failed { outcome, error, usage: self.usage, calls: self.calls + 1, scripted: self.scripted }
    }
}

/// The SWE-PRBench reference harness's agent calls (`runner.py`, see
/// [`lightsout_core::swe_prbench::harness::agent`]): its system prompt, the context render as
/// the user message, up to 3 attempts while the answer is blank, then, when the answer does not
/// parse, the retry message (render + the harness's suffix) up to 2 attempts; `max_tokens` as
/// the harness sets it. A provider failure or the time limit ends the sequence as any trial's
/// call (the harness would count it as a failed attempt; here it is never the model's doing).
async fn swe_prbench_single_shot(job: &TrialJob, client: &ModelClient, pricing: &PricingTable) -> AgentRun {
    use lightsout_core::swe_prbench::harness::agent::{run_agent, AgentCallKind, DEFAULT_AGENT_MAX_TOKENS};
    let harness = SingleShot { client, endpoint: &job.endpoint };
    let deadline = tokio::time::Instant::now() + job.timeout;
    let config = lightsout_core::dataset::swe_prbench::config_or_default(job.context_config);
    let input = lightsout_core::dataset::swe_prbench::agent_input(&job.task, config).unwrap_or_default();
    let spent = std::cell::Cell::new(CallsSpent::default());
    let system = system_prompt(&job.variant.prompt).map(str::to_string);
    let output = run_agent(&input, DEFAULT_AGENT_MAX_TOKENS, |call| {
        let user = match call.kind {
            AgentCallKind::First => job.prompt.clone(),
            AgentCallKind::Retry => swe_prbench_retry(&job.prompt),
        };
        let request = ChatRequest {
            model: job.variant.model.name.clone(),
            system: system.clone(),
            user,
            reasoning_effort: job.variant.reasoning_effort,
            max_output_tokens: Some(call.max_tokens),
        };
        let spent = &spent;
        let harness = &harness;
        async move {
            match harness.review(request, deadline).await {
                Ok(completion) => {
                    let mut now = spent.get();
                    now.add(&completion);
                    spent.set(now);
                    meter(job, pricing, &completion);
                    Ok(Ok(completion.text))
                }
                Err(error) => Err(spent.get().failed(error, job.timeout)),
            }
        }
    })
    .await;
    let spent = spent.get();
    match output {
        Ok(output) => AgentRun::Reviewed {
            text: output.raw_response.clone(),
            usage: spent.usage,
            calls: spent.calls,
            scripted: spent.scripted,
            swe_prbench: Some(SwePrBenchAnswer { raw_response: output.raw_response, parse_error: output.parse_error }),
        },
        Err(failed) => failed,
    }
}

/// The port the agent reaches the proxy on inside its sandbox (its own network namespace, so any
/// port is free).
const SANDBOX_PROXY_PORT: u16 = 4000;

/// Runs an agentic harness: workspace, proxy, sandbox, time limit; then reads `review.md`.
async fn run_agentic(job: &TrialJob, setup: &AgentSetup, pricing: &PricingTable) -> AgentOutcome {
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
    let mut trajectory = lightsout_core::trajectory::build(&exchanges);
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
    match compress(lightsout_core::trajectory::to_jsonl(&trajectory).as_bytes()) {
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
fn tail(path: &std::path::Path) -> String {
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

/// Who is answerable for a failed model call. Outages, rate limits that outlast the retries,
/// bad credentials and unknown models are not the model's doing (invariant 5); a request the
/// provider refuses for its content (e.g. a context too long for the model) is.
fn classify(error: &CallError) -> Outcome {
    match error {
        CallError::Status { status: 400 | 413 | 422, .. } => Outcome::AgentFailed,
        _ => Outcome::InfraFailed,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A store across a network, in memory: it records the order of its writes.
    #[derive(Clone, Default)]
    struct Remote {
        puts: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        /// At each put, how many spools of this process's attempt-1 of trial `watched` exist.
        watched: Option<&'static str>,
        spools_at_puts: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
    }

    impl ResultStore for Remote {
        async fn put(&self, key: &str, _bytes: &[u8]) -> std::io::Result<()> {
            self.puts.lock().unwrap().push(key.to_string());
            if let Some(trial) = self.watched {
                self.spools_at_puts.lock().unwrap().push(spools_of(&Remote::default(), "r", trial).len());
            }
            Ok(())
        }
        async fn get(&self, _key: &str) -> std::io::Result<Option<Vec<u8>>> {
            Ok(None)
        }
        async fn list(&self, _prefix: &str) -> std::io::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn uri(&self, key: &str) -> String {
            format!("memory://{key}")
        }
    }

    fn attempt_artifacts() -> Vec<Artifact> {
        let key = |name: &str| RunLayout::new("r").artifact("v", "t", 1, name);
        vec![
            Artifact::new(key("result.json"), b"{}".to_vec()),
            Artifact::new(key("agent.stdout"), b"out".to_vec()),
            Artifact::new(key("agent.stderr"), b"err".to_vec()),
        ]
    }

    #[tokio::test]
    async fn a_local_store_is_written_in_place_with_no_spool_or_temporary_file_left() {
        let root = tempfile::tempdir().unwrap();
        let store = lightsout_core::results::LocalStore::new(root.path());
        publish(&store, "r", "t", 1, attempt_artifacts(), Duration::from_secs(5)).await.unwrap();
        let attempt = root.path().join(RunLayout::new("r").attempt_dir("v", "t", 1));
        let mut names: Vec<String> =
            std::fs::read_dir(&attempt).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["agent.stderr", "agent.stdout", "result.json"]);
        assert_eq!(std::fs::read(attempt.join("agent.stderr")).unwrap(), b"err");
        assert_eq!(spools_of(&store, "r", "t"), Vec::<PathBuf>::new(), "a local store is not spooled");
    }

    /// This process's spools of attempt 1 of `trial` in `store`.
    fn spools_of<S: ResultStore>(store: &S, run: &str, trial: &str) -> Vec<PathBuf> {
        let example = spool_dir(store, run, trial, 1);
        let name = example.file_name().unwrap().to_str().unwrap();
        let prefix = &name[..name.rfind('-').unwrap() + 1];
        let Ok(entries) = std::fs::read_dir(spool_root()) else { return Vec::new() };
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
            .collect()
    }

    #[tokio::test]
    async fn a_remote_store_is_spooled_commit_last_and_the_spool_removed() {
        let store = Remote { watched: Some("spooled"), ..Remote::default() };
        let spool = spool_dir(&store, "r", "spooled", 1);
        assert_eq!(spool.parent(), Some(spool_root().as_path()), "one directory right under the root");
        assert_ne!(spool_dir(&store, "r", "spooled", 1), spool, "each publication has its own");
        publish(&store, "r", "spooled", 1, attempt_artifacts(), Duration::from_secs(5)).await.unwrap();
        let puts = store.puts.lock().unwrap().clone();
        assert_eq!(puts.len(), 3);
        assert!(puts[2].ends_with("/result.json"), "{puts:?}");
        assert_eq!(*store.spools_at_puts.lock().unwrap(), [1, 1, 1], "spooled while uploading, in one spool");
        assert_eq!(spools_of(&store, "r", "spooled"), Vec::<PathBuf>::new(), "the spool is removed once stored");
    }

    #[tokio::test]
    async fn a_spool_of_a_live_process_is_left_alone_and_one_of_a_dead_process_removed() {
        let store = Remote::default();
        let own = spool_dir(&store, "r", "live-and-dead", 1);
        let destination = own.file_name().unwrap().to_str().unwrap().split('-').next().unwrap().to_string();
        // pid 1 always runs; a pid past the kernel's limit never does.
        let live = spool_root().join(format!("{destination}-1-0"));
        let dead = spool_root().join(format!("{destination}-4294967295-0"));
        for dir in [&live, &dead] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("agent.stdout"), b"x").unwrap();
        }
        publish(&store, "r", "live-and-dead", 1, attempt_artifacts(), Duration::from_secs(5)).await.unwrap();
        assert!(live.join("agent.stdout").exists(), "another running process's spool is its own");
        assert!(!dead.exists(), "a spool whose process has gone is removed");
        std::fs::remove_dir_all(&live).unwrap();
    }

    #[test]
    fn the_tail_of_a_huge_log_reads_only_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.stderr");
        let file = std::fs::File::create(&log).unwrap();
        file.set_len(1 << 30).unwrap();
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut file, b"\none\ntwo\nthree\nfour\nfive\nsix\n").unwrap();
        assert_eq!(tail(&log), "two | three | four | five | six");
        assert_eq!(tail(&dir.path().join("missing")), "");
    }
}
