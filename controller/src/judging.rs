//! Judging (step 6 of [`crate::reconcile`]): the final reviews that still need verdicts are
//! handed to the [`crate::judge_queue`], which judges them off the reconcile path
//! ([`judge_one`]: votes asked, `verdicts.json` stored); the reconcile takes back what it judged
//! and meters every judge call once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;
use lightsout_api::EvaluationRun;
use lightsout_core::findings::ParsedReview;
use lightsout_core::judge::VoteValue;
use lightsout_core::results::ResultStore;
use lightsout_core::scoring::Verdicts;
use lightsout_core::stored::compact_verdicts;
use lightsout_core::trial::Outcome;
use lightsout_core::trial_record::HeldResult;

use crate::context::Context;
use crate::judge_queue::Rejudged;
use crate::metrics::{Role, RunKey};
use crate::run_state::{PreparedRun, RunState};

/// Trials whose final result is a review that still needs its verdicts (none, or incomplete:
/// missing judge votes leave a pair undecided).
fn needing_verdicts<'a>(
    prepared: &'a PreparedRun,
    state: &'a RunState,
    max_attempts: u32,
) -> impl Iterator<Item = (usize, &'a HeldResult)> + 'a {
    let stored = state.stored.as_ref().expect("stored");
    let judged = prepared.scorer.is_some();
    prepared.plan.trials.iter().enumerate().filter_map(move |(index, trial)| {
        let result = stored.final_result(&trial.id, max_attempts)?;
        (judged && result.outcome == Outcome::Ok && !stored.is_judged(&trial.id, result.attempt))
            .then_some((index, result))
    })
}

/// How many final reviews still wait for their verdicts.
pub(crate) fn awaiting_judges(prepared: &PreparedRun, state: &RunState, max_attempts: u32) -> usize {
    needing_verdicts(prepared, state, max_attempts).count()
}

/// Judging's part of a reconcile: stores the verdicts the judge queue finished, then hands it
/// the reviews still without (as many as it takes; one it took back unjudged waits for the
/// next pass); `true` when none is left waiting. Never waits on a model.
pub(crate) async fn judge_reviews(
    run: &EvaluationRun,
    ctx: &Context,
    prepared: &Arc<PreparedRun>,
    state: &mut RunState,
    key: &RunKey,
    uid: &str,
) -> bool {
    if prepared.scorer.is_none() {
        return true;
    }
    let mut failures = Vec::new();
    // A review taken back unjudged or incomplete is handed over again on the next pass, not
    // this one: a failing provider is not asked again the moment it failed.
    let mut taken_now = HashSet::new();
    for judged in ctx.judges.take_finished(uid) {
        // Trials are the same in every generation the run accepts (its claim).
        let Some(&index) = prepared.trial_index.get(&judged.trial_id) else { continue };
        let trial = &prepared.plan.trials[index];
        taken_now.insert((index, judged.attempt));
        match judged.outcome {
            Ok(Rejudged { mut verdicts, previous }) => {
                let variant = &prepared.plan.variants[trial.variant as usize];
                record_judge_metrics(ctx, key, &variant.name, &verdicts, previous.as_ref());
                compact_verdicts(&mut verdicts);
                state.stored.as_mut().expect("stored").insert_verdicts(&trial.id, judged.attempt, verdicts);
                state.summary_dirty = true;
            }
            Err(e) => {
                let task = &prepared.tasks[trial.task as usize].task.id;
                failures.push(format!("{task} (trial {}): {e}", trial.id));
            }
        }
    }
    if !failures.is_empty() {
        tracing::warn!(
            run = key.run,
            namespace = key.namespace,
            failures = failures.len(),
            "judging failed: {}",
            failures[0]
        );
        ctx.event(
            run,
            true,
            "JudgingFailed",
            format!("{} reviews could not be judged; first: {}", failures.len(), failures[0]),
        )
        .await;
    }

    let max_attempts = prepared.max_attempts(&run.spec);
    let handed: Vec<(usize, u32)> = needing_verdicts(prepared, state, max_attempts)
        .filter(|(index, result)| !taken_now.contains(&(*index, result.attempt)))
        .filter(|(index, result)| !ctx.judges.is_queued(uid, &prepared.plan.trials[*index].id, result.attempt))
        .take(ctx.judges.room(uid))
        .map(|(index, result)| (index, result.attempt))
        .collect();
    let object = ObjectRef::from_obj(run);
    for (index, attempt) in handed {
        let trial_id = &prepared.plan.trials[index].id;
        ctx.judges.submit(object.clone(), uid, trial_id, attempt, judge_one(prepared.clone(), index, attempt));
    }
    awaiting_judges(prepared, state, max_attempts) == 0
}

/// Judges the stored review of attempt `attempt` of planned trial `index` and stores its verdicts.
async fn judge_one(prepared: Arc<PreparedRun>, index: usize, attempt: u32) -> Result<Rejudged, String> {
    let Some(scorer) = prepared.scorer.as_ref() else { return Err("the run has no judges".into()) };
    let store = &prepared.store;
    let trial = &prepared.plan.trials[index];
    let task = &prepared.tasks[trial.task as usize];
    let variant = &prepared.plan.variants[trial.variant as usize];
    let variant_id = &variant.id;
    let findings_key = prepared.layout.artifact(variant_id, &trial.id, attempt, "findings.json");
    let verdicts_key = prepared.layout.artifact(variant_id, &trial.id, attempt, "verdicts.json");
    let bytes = store
        .get(&findings_key)
        .await
        .map_err(|e| format!("{}: {e}", store.uri(&findings_key)))?
        .ok_or_else(|| format!("{} is missing", store.uri(&findings_key)))?;
    let review: ParsedReview =
        serde_json::from_slice(&bytes).map_err(|e| format!("{} is not valid: {e}", store.uri(&findings_key)))?;
    // Incomplete verdicts keep their answered votes; only the missing ones are asked again.
    let previous: Option<Verdicts> = match store.get(&verdicts_key).await {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).ok(),
        Ok(None) => None,
        Err(e) => return Err(format!("{}: {e}", store.uri(&verdicts_key))),
    };
    let verdicts = scorer
        .score_in_context(task, trial.context, &review, previous.as_ref(), &variant.model.name)
        .await
        .map_err(|e| e.to_string())?;
    let bytes = serde_json::to_vec_pretty(&verdicts).expect("verdicts serialise");
    store.put(&verdicts_key, &bytes).await.map_err(|e| format!("{}: {e}", store.uri(&verdicts_key)))?;
    Ok(Rejudged { verdicts, previous })
}

/// Meters the judge calls made for `verdicts` and not already for `previous` (kept votes were
/// metered when they were asked): every call is counted once.
fn record_judge_metrics(ctx: &Context, key: &RunKey, variant: &str, verdicts: &Verdicts, previous: Option<&Verdicts>) {
    let spend = verdicts.spend_since(previous);
    let judge_model = match verdicts {
        Verdicts::CrBugBench(v) => v.judges.join(","),
        _ => "judge".to_string(),
    };
    let cost = (spend.unpriced_calls == 0).then_some(spend.cost_usd);
    ctx.metrics.usage(key, variant, &judge_model, Role::Judge, &spend.usage, cost, u64::from(spend.calls));
    match verdicts {
        Verdicts::CrBugBench(v) => {
            let mut by_judge: HashMap<&str, (u64, u64)> = HashMap::new();
            let previous = match previous {
                Some(Verdicts::CrBugBench(previous)) => Some(previous),
                _ => None,
            };
            for vote in v.votes_asked_since(previous) {
                let entry = by_judge.entry(vote.judge.as_str()).or_default();
                entry.0 += 1;
                // A missing vote (the call failed) is a failed judge call as much as an
                // unreadable answer is.
                entry.1 += u64::from(matches!(vote.value, VoteValue::Failed | VoteValue::Missing));
            }
            for (judge, (calls, failures)) in by_judge {
                ctx.metrics.judge_calls(key, judge, calls, failures);
            }
        }
        // The call that failed is a judge call too, and its failure.
        Verdicts::SwePrBenchUnjudged(_) => ctx.metrics.judge_calls(key, &judge_model, u64::from(spend.calls) + 1, 1),
        Verdicts::SwePrBench(_) => ctx.metrics.judge_calls(key, &judge_model, u64::from(spend.calls), 0),
    }
}
