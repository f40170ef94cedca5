//! `lightsout run`: an EvaluationRun on one machine, no cluster.
//!
//! Reconciles like the controller does, from what is stored: it plans every trial, looks at the
//! results store to see which trials have finished, runs the rest with bounded concurrency
//! (retrying infrastructure failures), judges finished reviews, and writes `summary.json` from
//! the stored artifacts alone. Interrupting it and running it again skips finished trials and
//! counts nothing twice, because a trial's identity and its result keys are deterministic.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _};
use futures::stream::{self, StreamExt};
use lightsout_api::validate::spec_hash;
use lightsout_api::{ContextConfig, EvaluationRun, ScoringProtocol};
use lightsout_core::dataset::{self, LineError, LoadedTask};
use lightsout_core::findings::ParsedReview;
use lightsout_core::plan;
use lightsout_core::prompts::{agentic_review_prompt, review_prompt};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::run_record::{record_run, OtherSpec};
use lightsout_core::scoring::{Scorer, Verdicts};
use lightsout_core::stored::StoredRun;
use lightsout_core::summary::{self, DatasetSummary, RunIdentity, RunSummary};
use lightsout_core::trial::{Isolation, Outcome};
use lightsout_core::workspace;
use lightsout_model::pricing::PricingTable;
use lightsout_model::{Endpoint, ModelClient, OfflineModels, OfflineServer, RateLimitPolicy, RetryPolicy};
use lightsout_s3::S3Credentials;

use crate::agent_files::DEFAULT_MAX_FILE_BYTES;
use crate::harness::Installed;
use crate::trial::spool_root;
use crate::trial::{run_trial, AgentSetup, SandboxLauncher, TrialJob};
use lightsout_s3::Results;

/// Looks up an environment variable.
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A local run's settings beyond the run file.
pub struct LocalRun {
    pub run: EvaluationRun,
    /// Overrides `spec.storage.results`.
    pub results_uri: Option<String>,
    pub pricing: PricingTable,
    /// Reads an API key from the environment; injected so tests control it.
    pub env: EnvLookup,
    /// Base delay between a trial's attempts after an infrastructure failure.
    pub retry_delay: Duration,
    /// Retries of single model calls (rate limits, 5xx) within an attempt.
    pub model_retry: RetryPolicy,
    /// How model calls share a provider's rate limit, and how many 429s one call accepts
    /// before it fails (`RateLimitPolicy::default()` outside tests).
    pub model_rate_limits: RateLimitPolicy,
    /// A provider that sends nothing for this long is hanging: the call fails and is retried (see
    /// `ModelClient::with_timeouts`; `DEFAULT_STALL_TIMEOUT` by default). The single-shot
    /// harness's model client and the agentic harnesses' metering proxy both use it.
    pub provider_stall_timeout: Duration,
    /// Where agentic harnesses are installed (see `harness::default_root`).
    pub harness_root: PathBuf,
    /// How to start the sandbox agentic harnesses run in; `None` runs them unsandboxed (tests of
    /// the harness alone; never the CLI's choice on Linux as root).
    pub sandbox: Option<SandboxCommand>,
    /// How long an attempt keeps retrying to store its artifacts before it ends as an
    /// infrastructure failure.
    pub upload_deadline: Duration,
    /// What answers for providers whose key is not set (the CLI's scripted model server); with
    /// `None`, a provider without a key is an error.
    pub offline_models: Option<Arc<dyn OfflineModels>>,
}

/// The program and leading arguments that start the sandbox entry point of this build.
#[derive(Debug, Clone)]
pub struct SandboxCommand {
    pub program: PathBuf,
    pub leading_args: Vec<std::ffi::OsString>,
}

/// What a local run reports while it goes.
#[derive(Debug, Clone)]
pub enum Event {
    /// Something the user must know (scripted models, skipped lines, budget).
    Notice(String),
    Planned {
        trials: usize,
        finished: usize,
        variants: usize,
        tasks: usize,
    },
    TrialFinished {
        variant: String,
        task: String,
        outcome: Outcome,
    },
    TrialRetried {
        variant: String,
        task: String,
        attempt: u32,
        error: String,
    },
    JudgingFailed {
        variant: String,
        task: String,
        error: String,
    },
}

pub struct LocalRunReport {
    pub summary: RunSummary,
    pub summary_uri: String,
    pub skipped_lines: Vec<LineError>,
    /// What this run left to do; running it again does it.
    pub unfinished: Unfinished,
}

/// Trials a run ended without finishing; `lightsout run` again finishes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unfinished {
    /// Not started (the run budget was reached, or the run is suspended) or interrupted.
    pub pending: u32,
    /// Failed on infrastructure on every attempt of this run; the next run retries them.
    pub infra_failed: u32,
    /// Reviews without complete verdicts (a judge outage); the next run asks the missing votes.
    pub unjudged: u32,
}

impl Unfinished {
    pub fn is_empty(&self) -> bool {
        *self == Unfinished::default()
    }

    /// e.g. `2 infra-failed, 3 unjudged`.
    pub fn describe(&self) -> String {
        let parts = [(self.pending, "pending"), (self.infra_failed, "infra-failed"), (self.unjudged, "unjudged")];
        parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect::<Vec<_>>().join(", ")
    }
}

pub async fn run_local(config: LocalRun, on_event: impl Fn(Event) + Send + Sync) -> anyhow::Result<LocalRunReport> {
    let run = &config.run;
    let spec = &run.spec;
    let name = run.metadata.name.clone().context("metadata.name is required")?;

    // Dereference: everything the run refers to must exist before anything is written.
    let loaded = dataset::load(&spec.dataset)?;
    for line in &loaded.skipped {
        on_event(Event::Notice(format!("skipped malformed dataset line {line}")));
    }
    let skipped_lines = loaded.skipped;
    let tasks = dataset::select_for_run(loaded.tasks, spec)?;
    let variants = lightsout_api::variant::variants(spec);
    for variant in &variants {
        crate::harness::check(&variant.harness)
            .map_err(|e| anyhow::anyhow!("spec.matrix: variant {}: {e}", variant.name))?;
    }
    let results_uri = config.results_uri.clone().unwrap_or_else(|| spec.storage.results.clone());
    let credentials = (config.env)("AWS_ACCESS_KEY_ID")
        .zip((config.env)("AWS_SECRET_ACCESS_KEY"))
        .map(|(id, secret)| S3Credentials::new(id, secret));
    let store = Results::open(&results_uri, spec.storage.s3.as_ref(), credentials)
        .with_context(|| format!("spec.storage.results: {results_uri}"))?;
    let timeout = lightsout_api::duration::parse_timeout(&spec.agent.timeout)
        .map_err(|e| anyhow::anyhow!("spec.agent.timeout: {e}"))?;
    let providers = Providers::resolve(run, &config.env, config.offline_models.as_deref()).await?;
    for variant in &variants {
        let api = spec.providers[&variant.model.provider].api_kind;
        crate::harness::check_api(&variant.harness, api)
            .map_err(|e| anyhow::anyhow!("spec.matrix: variant {}: {e}", variant.name))?;
    }
    let dataset_file = dataset::local_path(&spec.dataset.source)?;
    let mut installed: HashMap<String, Installed> = HashMap::new();
    for variant in &variants {
        if installed.contains_key(&variant.id) {
            continue;
        }
        let exists = crate::harness::install_dir_exists(&variant.harness, &config.harness_root);
        if !exists && variant.harness.name != lightsout_api::HarnessName::SingleShot {
            on_event(Event::Notice(format!(
                "installing harness {}@{} into {} (once)",
                variant.harness.name.as_str(),
                variant.harness.version,
                config.harness_root.display()
            )));
        }
        if let Some(harness) =
            crate::harness::install(&variant.harness, &config.harness_root).await.with_context(|| {
                format!("installing harness {}@{}", variant.harness.name.as_str(), variant.harness.version)
            })?
        {
            installed.insert(variant.id.clone(), harness);
        }
    }
    if !installed.is_empty() {
        for task in &tasks {
            let tree = workspace::local_base_tree(&dataset_file, &task.task.repo);
            if !tree.is_dir() {
                bail!(
                    "task {}: agentic harnesses review the repository itself, but its base tree is not at {} \
                     (a local dataset keeps repos/<name>/ beside the dataset file)",
                    task.task.id,
                    tree.display()
                );
            }
        }
        if config.sandbox.is_none() {
            on_event(Event::Notice("agentic harnesses run WITHOUT the network sandbox in this run".into()));
        }
    }
    for provider in &providers.scripted {
        let env = spec.providers[provider].api_key_env();
        on_event(Event::Notice(format!(
            "provider {provider:?}: {env} is not set, so its models are served by the built-in SCRIPTED model server \
             ({}). Its answers are canned: these numbers say nothing about real models. Set {env} to evaluate them.",
            providers.scripted_url()
        )));
    }

    let layout = RunLayout::new(&name);
    // run.json: a results directory holds one spec's results; a different spec never mixes in.
    record_run(&store, &layout, spec, OtherSpec::Refuse).await?;

    let client = ModelClient::with_timeouts(
        timeout + Duration::from_secs(5),
        Some(config.provider_stall_timeout),
        config.model_retry.clone(),
        config.model_rate_limits.clone(),
    );
    let scorer = Scorer::from_spec(spec, &providers.endpoints, &client, &config.pricing)?;
    if scorer.is_none() {
        on_event(Event::Notice("spec.judges.panel is empty: reviews are collected but not scored".into()));
    }
    let settings = summary::ScoringSettings::of(spec);
    if settings.protocol == ScoringProtocol::SwePrBench && spec.judges.panel.len() > 1 {
        on_event(Event::Notice(format!(
            "SWE-PRBench is a single-judge protocol: {} labels the comments; the other judges of the panel are not asked",
            spec.judges.panel[0].name
        )));
    }

    let state = StoredRun::scan(&store, &layout).await?;
    // Trials whose sibling repeats finished have a measured duration; the rest are estimated.
    let durations = state.mean_durations();
    let task_list: Vec<_> = tasks.iter().map(|t| t.task.clone()).collect();
    let plan =
        plan::plan(spec, &task_list, |variant, task| durations.get(&(variant.to_string(), task.to_string())).copied());
    let max_attempts = spec.retries.max(0) as u32 + 1;
    // An infrastructure failure is never final across runs: a trial whose attempts all failed on
    // infrastructure gets a new round of attempts each time the run is run again.
    let infra_final =
        |trial: &str| state.final_result(trial, max_attempts).is_some_and(|r| r.outcome == Outcome::InfraFailed);
    let finished = plan.trials.iter().filter(|t| state.is_final(&t.id, max_attempts) && !infra_final(&t.id)).count();
    on_event(Event::Planned { trials: plan.trials.len(), finished, variants: plan.variants.len(), tasks: tasks.len() });

    if spec.suspend {
        on_event(Event::Notice("spec.suspend is true: no trial starts; finished reviews are still judged".into()));
    }
    let spent = Arc::new(Mutex::new(state.spent_usd()));
    let budget_hit = Arc::new(Mutex::new(false));
    // The protections last said missing (see `isolation_notice`).
    let noted_missing: Mutex<Option<Vec<String>>> = Mutex::new(None);

    let work = plan.trials.iter().filter(|t| {
        !state.is_final(&t.id, max_attempts)
            || infra_final(&t.id)
            || state.needs_judging(&t.id, max_attempts) && scorer.is_some()
    });
    let on_event = &on_event;
    stream::iter(work)
        .for_each_concurrent(spec.parallelism.max(1) as usize, |planned| {
            let variant = &plan.variants[planned.variant as usize];
            let loaded: &LoadedTask = &tasks[planned.task as usize];
            let (spent, budget_hit, state, store, layout, client, providers, scorer, pricing) =
                (&spent, &budget_hit, &state, &store, &layout, &client, &providers, &scorer, &config.pricing);
            let (installed, dataset_file, sandbox) = (&installed, &dataset_file, &config.sandbox);
            let noted_missing = &noted_missing;
            // Progress names the configuration of a trial of the context axis with its task.
            let task_label = match planned.context {
                Some(context) => format!("{} {}", loaded.task.id, context.as_str()),
                None => loaded.task.id.clone(),
            };
            async move {
                // The final attempt's (outcome, number).
                let mut final_result = state
                    .final_result(&planned.id, max_attempts)
                    .filter(|r| r.outcome != Outcome::InfraFailed)
                    .map(|r| (r.outcome, r.attempt));
                if final_result.is_none() {
                    // Suspended runs start nothing new; finished reviews are still judged.
                    if spec.suspend {
                        return;
                    }
                    if let Some(limit) = spec.budget.max_usd {
                        let over = *spent.lock().expect("lock") >= limit;
                        if over {
                            let mut hit = budget_hit.lock().expect("lock");
                            if !*hit {
                                *hit = true;
                                on_event(Event::Notice(format!(
                                    "run budget of {limit} USD reached: no new trial starts"
                                )));
                            }
                            return;
                        }
                    }
                    let mut attempt = state.next_attempt(&planned.id);
                    // A fresh trial (or one interrupted mid-way) has the spec's attempts in all; one
                    // whose attempts all failed on infrastructure in an earlier run gets a new round.
                    let last_attempt = if infra_final(&planned.id) { attempt + max_attempts - 1 } else { max_attempts };
                    loop {
                        let job = TrialJob {
                            run: layout.run.clone(),
                            variant: variant.clone(),
                            task: loaded.task.clone(),
                            trial_id: planned.id.clone(),
                            context_config: planned.context,
                            repeat: planned.repeat,
                            attempt,
                            prompt: if installed.contains_key(&variant.id) {
                                agentic_review_prompt(&variant.prompt, &loaded.task, planned.context_config(spec))
                            } else {
                                review_prompt(&variant.prompt, &loaded.task, planned.context_config(spec))
                            },
                            endpoint: providers.endpoints[&variant.model.provider].clone(),
                            timeout,
                            max_tokens: spec.budget.max_trial_tokens.map(|t| t.max(0) as u64),
                            max_usd: spec.budget.max_trial_usd,
                            agent: installed.get(&variant.id).map(|harness| AgentSetup {
                                installed: harness.clone(),
                                base_tree: workspace::local_base_tree(dataset_file, &loaded.task.repo),
                                scratch: std::env::temp_dir()
                                    .join(format!("lightsout-{}-{}-{attempt}", layout.run, planned.id)),
                                sandbox: sandbox.as_ref().map(|sandbox| SandboxLauncher {
                                    program: sandbox.program.clone(),
                                    leading_args: sandbox.leading_args.clone(),
                                    // Ground truth and other trials' results stay out of sight.
                                    hide: hidden_dirs(dataset_file, store.local_root()),
                                }),
                                max_turns: spec.agent.max_turns.map(|t| t.max(1) as u32),
                                max_file_bytes: spec
                                    .agent
                                    .max_file_bytes
                                    .map_or(DEFAULT_MAX_FILE_BYTES, |b| b.max(0) as u64),
                                grace: Duration::from_secs(10),
                                scratch_mib: spec
                                    .agent
                                    .scratch_mib
                                    .map_or_else(crate::scratch::scratch_mib, |m| m.max(1) as u64),
                                provider_stall_timeout: config.provider_stall_timeout,
                            }),
                            // Under `lightsout run` a stopped process leaves its attempt
                            // unfinished, and the next run does it again from zero.
                            spend: Default::default(),
                        };
                        let artifacts = match run_trial(&job, client, pricing, store, config.upload_deadline).await {
                            Ok(artifacts) => artifacts,
                            Err(e) => {
                                // The store itself failed: leave the trial unfinished for the next run.
                                on_event(Event::TrialRetried {
                                    variant: variant.name.clone(),
                                    task: task_label.clone(),
                                    attempt,
                                    error: format!("results store: {e}"),
                                });
                                return;
                            }
                        };
                        *spent.lock().expect("lock") += artifacts.result.cost_usd.unwrap_or(0.0);
                        let result = artifacts.result;
                        if let Some(notice) = isolation_notice(result.isolation.as_ref(), noted_missing) {
                            on_event(Event::Notice(notice));
                        }
                        if result.outcome == Outcome::InfraFailed && attempt < last_attempt {
                            on_event(Event::TrialRetried {
                                variant: variant.name.clone(),
                                task: task_label.clone(),
                                attempt,
                                error: result.error.clone().unwrap_or_default(),
                            });
                            tokio::time::sleep(config.retry_delay.saturating_mul(1 << (attempt - 1).min(6))).await;
                            attempt += 1;
                            continue;
                        }
                        on_event(Event::TrialFinished {
                            variant: variant.name.clone(),
                            task: task_label.clone(),
                            outcome: result.outcome,
                        });
                        final_result = Some((result.outcome, result.attempt));
                        break;
                    }
                }
                let (Some((outcome, attempt)), Some(scorer)) = (final_result, scorer) else { return };
                if outcome != Outcome::Ok || state.is_judged(&planned.id, attempt) {
                    return;
                }
                let attempt_dir = (variant.id.as_str(), planned.id.as_str(), attempt);
                let previous = state.verdicts(&planned.id, attempt);
                match judge_trial(
                    store,
                    layout,
                    scorer,
                    attempt_dir,
                    (loaded, planned.context, &variant.model.name),
                    previous,
                )
                .await
                {
                    Ok(verdicts) => {
                        // Only this judging's calls are new spend; the previous verdicts' were
                        // counted when the run started.
                        let before = previous.map(|p| p.spend().cost_usd).unwrap_or_default();
                        *spent.lock().expect("lock") += verdicts.spend().cost_usd - before;
                        if let Verdicts::CrBugBench(panel) = &verdicts {
                            if !panel.is_complete() {
                                let first = panel.votes.iter().find(|v| !v.error.is_empty());
                                on_event(Event::JudgingFailed {
                                    variant: variant.name.clone(),
                                    task: task_label.clone(),
                                    error: format!(
                                        "{} judge votes missing, {} finding/bug pairs undecided; first: {}",
                                        panel.missing_votes,
                                        panel.undecided_pairs,
                                        first.map(|v| v.error.as_str()).unwrap_or("-")
                                    ),
                                });
                            }
                        }
                        if let Verdicts::SwePrBenchUnjudged(unjudged) = &verdicts {
                            on_event(Event::JudgingFailed {
                                variant: variant.name.clone(),
                                task: task_label.clone(),
                                error: unjudged.error.clone(),
                            });
                        }
                    }
                    Err(e) => on_event(Event::JudgingFailed {
                        variant: variant.name.clone(),
                        task: task_label.clone(),
                        error: e.to_string(),
                    }),
                }
            }
        })
        .await;

    // The summary is computed from the store alone, exactly as anyone re-reading it would.
    let state = StoredRun::scan(&store, &layout).await?;
    let records = state.trial_records(&plan.trials, &tasks, max_attempts, spec.agent.context_config);
    let summary = summary::summarise_run(
        RunIdentity { name: name.clone(), spec_hash: spec_hash(spec), generated_at: chrono::Utc::now() },
        DatasetSummary {
            format: spec.dataset.format.as_str().to_string(),
            source: spec.dataset.source.clone(),
            tasks: tasks.len() as u32,
            skipped_lines: skipped_lines.len() as u32,
        },
        &settings,
        &plan.variants,
        &records,
    );
    store.put(&layout.summary_json(), &serde_json::to_vec_pretty(&summary)?).await?;
    if let Some(server) = providers.server {
        server.shutdown().await;
    }
    let unfinished = Unfinished {
        pending: summary.trials.pending,
        infra_failed: summary.trials.infra_failed,
        // A run without judges collects reviews: none of them waits for a verdict.
        unjudged: if scorer.is_some() { summary.trials.unjudged } else { 0 },
    };
    Ok(LocalRunReport { summary_uri: store.uri(&layout.summary_json()), summary, skipped_lines, unfinished })
}

async fn judge_trial<S: ResultStore>(
    store: &S,
    layout: &RunLayout,
    scorer: &Scorer,
    (variant_id, trial_id, attempt): (&str, &str, u32),
    (task, context, agent_model): (&LoadedTask, Option<ContextConfig>, &str),
    previous: Option<&Verdicts>,
) -> anyhow::Result<Verdicts> {
    let findings_key = layout.artifact(variant_id, trial_id, attempt, "findings.json");
    let bytes = store.get(&findings_key).await?.with_context(|| format!("{findings_key} is missing"))?;
    let parsed: ParsedReview =
        serde_json::from_slice(&bytes).with_context(|| format!("{findings_key} is not valid"))?;
    let verdicts = scorer.score_in_context(task, context, &parsed, previous, agent_model).await?;
    let key = layout.artifact(variant_id, trial_id, attempt, "verdicts.json");
    store.put(&key, &serde_json::to_vec_pretty(&verdicts)?).await?;
    Ok(verdicts)
}

/// Model endpoints by provider name: real ones where a key is set, the offline (scripted) server
/// where not.
struct Providers {
    endpoints: BTreeMap<String, Endpoint>,
    scripted: BTreeSet<String>,
    server: Option<Box<dyn OfflineServer>>,
}

impl Providers {
    async fn resolve(
        run: &EvaluationRun,
        env: &EnvLookup,
        offline: Option<&dyn OfflineModels>,
    ) -> anyhow::Result<Self> {
        let mut providers = Providers { endpoints: BTreeMap::new(), scripted: BTreeSet::new(), server: None };
        for (name, spec) in &run.spec.providers {
            let key = env(spec.api_key_env()).filter(|k| !k.trim().is_empty());
            let (base_url, api_key) = match key {
                Some(key) => (spec.base_url.clone(), Some(key)),
                None => {
                    let Some(offline) = offline else {
                        bail!("provider {name:?}: {} is not set", spec.api_key_env());
                    };
                    if providers.server.is_none() {
                        let server = offline.start().await.context("starting the scripted model server")?;
                        providers.server = Some(server);
                    }
                    providers.scripted.insert(name.clone());
                    (providers.scripted_url(), Some("scripted-model-key".to_string()))
                }
            };
            providers
                .endpoints
                .insert(name.clone(), Endpoint { provider: name.clone(), base_url, api_kind: spec.api_kind, api_key });
        }
        Ok(providers)
    }

    fn scripted_url(&self) -> String {
        self.server.as_ref().map(|s| s.base_url()).unwrap_or_default()
    }
}

/// One line naming the protections a trial ran without, when they differ from those last noted
/// (so a run says it once, not per trial); the trial's record says why for each.
fn isolation_notice(isolation: Option<&Isolation>, noted: &Mutex<Option<Vec<String>>>) -> Option<String> {
    let missing: Vec<String> =
        isolation?.missing.iter().map(|m| m.split([':', '(']).next().unwrap_or(m).trim().to_string()).collect();
    let mut noted = noted.lock().expect("lock");
    if missing.is_empty() || noted.as_ref() == Some(&missing) {
        return None;
    }
    *noted = Some(missing.clone());
    Some(format!(
        "agents run with partial isolation, without: {} (each trial's isolation.missing says why; see README, \
         Isolation between trials)",
        missing.join(", ")
    ))
}

/// The directories a sandboxed agent must not see: the dataset's (ground truth) and the results
/// root (other trials' reviews and verdicts), as absolute paths.
fn hidden_dirs(dataset_file: &Path, results_root: Option<&Path>) -> Vec<PathBuf> {
    let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let dataset_dir = dataset_file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut dirs = vec![absolute(dataset_dir), spool_root()];
    dirs.extend(results_root.map(absolute));
    dirs.sort();
    dirs.dedup();
    dirs
}
