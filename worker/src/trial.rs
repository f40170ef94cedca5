//! Running one trial attempt: give the agent its prompt, enforce the time and budget limits,
//! keep what it wrote, and record the result. The ground truth is not an input here: judging
//! happens after the agent has exited, elsewhere (invariant 2).

use std::time::{Duration, Instant};

use lightsout_core::api::HarnessName;
use lightsout_core::dataset::Task;
use lightsout_core::findings::parse_review;
use lightsout_core::hash::sha256_hex;
use lightsout_core::model::{CallError, ChatRequest, Endpoint, ModelClient, Usage};
use lightsout_core::plan::Variant;
use lightsout_core::pricing::PricingTable;
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::trial::{Outcome, TrialResult, RESULT_SCHEMA};

use crate::harness::{SingleShot, SINGLE_SHOT_VERSION};

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
}

/// What an attempt produced besides its result record.
#[derive(Debug, Clone)]
pub struct TrialArtifacts {
    pub result: TrialResult,
    pub review: Option<String>,
}

/// Runs one attempt and stores its artifacts; `result.json` is written last, so its presence
/// means the attempt finished and everything it refers to is stored.
pub async fn run_trial<S: ResultStore>(
    job: &TrialJob,
    client: &ModelClient,
    pricing: &PricingTable,
    store: &S,
) -> std::io::Result<TrialArtifacts> {
    let layout = RunLayout::new(&job.run);
    let key = |name: &str| layout.artifact(&job.variant.id, &job.trial_id, job.attempt, name);
    store.put(&key("prompt.txt"), job.prompt.as_bytes()).await?;

    let started_at = chrono::Utc::now();
    let clock = Instant::now();
    let attempt = run_agent(job, client).await;
    let duration_ms = clock.elapsed().as_millis() as u64;

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
        store.put(&key("review.md"), text.as_bytes()).await?;
    }
    if let Some(parsed) = &parsed {
        store.put(&key("findings.json"), &serde_json::to_vec_pretty(parsed)?).await?;
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
        harness_version_reported: Some(SINGLE_SHOT_VERSION.to_string()),
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
    };
    store.put(&key("result.json"), &serde_json::to_vec_pretty(&result)?).await?;
    Ok(TrialArtifacts { result, review })
}

enum AgentRun {
    Reviewed { text: String, usage: Usage, calls: u32 },
    Failed { outcome: Outcome, error: String, usage: Usage, calls: u32 },
}

async fn run_agent(job: &TrialJob, client: &ModelClient) -> AgentRun {
    match job.variant.harness.name {
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
    }
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
