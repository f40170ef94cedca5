//! The built-in `single-shot` harness: one model call over the task's context, or the SWE-PRBench
//! reference harness's call sequence; every finished call metered as it lands.

use super::*;

/// The built-in harness: one model call; under the `swe-prbench` prompt, the reference
/// harness's call sequence instead ([`swe_prbench_single_shot`]). The time limit covers every
/// call.
pub(super) async fn single_shot(job: &TrialJob, client: &ModelClient, pricing: &PricingTable) -> AgentRun {
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
fn meter(job: &TrialJob, pricing: &PricingTable, completion: &lightsout_model::Completion) {
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
    fn add(&mut self, completion: &lightsout_model::Completion) {
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
/// [`lightsout_swe_prbench::harness::agent`]): its system prompt, the context render as
/// the user message, up to 3 attempts while the answer is blank, then, when the answer does not
/// parse, the retry message (render + the harness's suffix) up to 2 attempts; `max_tokens` as
/// the harness sets it. A provider failure or the time limit ends the sequence as any trial's
/// call (the harness would count it as a failed attempt; here it is never the model's doing).
async fn swe_prbench_single_shot(job: &TrialJob, client: &ModelClient, pricing: &PricingTable) -> AgentRun {
    use lightsout_swe_prbench::harness::agent::{run_agent, AgentCallKind, DEFAULT_AGENT_MAX_TOKENS};
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

/// Who is answerable for a failed model call. Outages, rate limits that outlast the retries,
/// bad credentials and unknown models are not the model's doing (invariant 5); a request the
/// provider refuses for its content (e.g. a context too long for the model) is.
fn classify(error: &CallError) -> Outcome {
    match error {
        CallError::Status { status: 400 | 413 | 422, .. } => Outcome::AgentFailed,
        _ => Outcome::InfraFailed,
    }
}
