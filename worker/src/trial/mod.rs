//! Running one trial attempt: give the agent its prompt, enforce the time and budget limits,
//! keep what it wrote, and record the result. The ground truth is not an input here: judging
//! happens after the agent has exited, elsewhere (invariant 2).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lightsout_api::hash::sha256_hex;
use lightsout_api::variant::Variant;
use lightsout_api::{ContextConfig, HarnessName, PromptPreset};
use lightsout_core::compress::{compress, EXCHANGES_ARTIFACT, TRAJECTORY_ARTIFACT};
use lightsout_core::dataset::Task;
use lightsout_core::findings::{parse_review, parse_swe_prbench_answer, ParsedReview, SwePrBenchAnswer};
use lightsout_core::prompts::{swe_prbench_retry, system_prompt};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::trial::{Isolation, Outcome, TrajectorySummary, TrialResult, RESULT_SCHEMA};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{CallError, ChatRequest, DeadlineError, Endpoint, ModelClient, Usage};
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
use lightsout_core::interruption::{Interruption, INTERRUPTION_SCHEMA};

mod agentic;
mod single_shot;

use agentic::run_agentic;
use single_shot::single_shot;

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

impl TrialJob {
    /// The record of this run of the attempt, stopped at `interrupted_at` by `signal`, with what
    /// its finished model calls cost so far.
    pub fn interruption(
        &self,
        started_at: chrono::DateTime<chrono::Utc>,
        interrupted_at: chrono::DateTime<chrono::Utc>,
        signal: &str,
    ) -> Interruption {
        let spent = self.spend.get();
        Interruption {
            schema: INTERRUPTION_SCHEMA.to_string(),
            run: self.run.clone(),
            variant_id: self.variant.id.clone(),
            trial_id: self.trial_id.clone(),
            attempt: self.attempt,
            started_at,
            interrupted_at,
            usage: spent.usage,
            cost_usd: spent.cost_usd,
            unpriced_calls: spent.unpriced_calls,
            model_calls: spent.calls,
            signal: signal.to_string(),
        }
    }
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
    let destination = lightsout_api::hash::short_hash_fields(&[&store.uri(""), run, trial, &attempt]);
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

#[cfg(test)]
mod tests {
    use super::agentic::tail;
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
