//! A schedule's comparison of two finished runs, from their results stores, with the shared
//! comparison code (`lightsout_report::compare`, also behind `lightsout compare`): the same numbers
//! whoever asks. The comparison (`comparison.json`) and the candidate's HTML report showing it
//! (`report.html`, as `lightsout report` writes it) are stored beside the candidate's results.

use std::sync::Arc;

use kube::ResourceExt;
use lightsout_api::{ComparisonSpec, EvaluationRun};
use lightsout_report as report;
use lightsout_report::compare::{compare_runs, load_run, store_comparison, CompareSettings, ComparedRun};
use lightsout_s3::Results;

use crate::context::Context;
use crate::evaluation_schedule::{Compare, ComparisonOutcome};
use crate::prepare::{s3_credentials, PrepareError};

/// The longest message kept in a schedule's status (the full comparison is in `comparison.json`).
const MESSAGE_MAX: usize = 1024;

/// The schedule controller's comparison: each run's results are read from its own store.
pub fn from_results_stores(ctx: Arc<Context>) -> Compare {
    Arc::new(move |baseline, candidate, spec| {
        let ctx = ctx.clone();
        Box::pin(async move { compare(&ctx, &baseline, &candidate, &spec).await })
    })
}

/// The run's results store (opened with the run's own S3 credentials) and what it holds.
async fn load(ctx: &Context, run: &EvaluationRun) -> Result<(Results, ComparedRun), String> {
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let storage = &run.spec.storage;
    let credentials = s3_credentials(storage.s3.as_ref(), ctx, &namespace, "spec.storage.s3.secretName")
        .await
        .map_err(|e| match e {
            PrepareError::Refused(refusal) => format!("run {name}: {}", refusal.message),
            PrepareError::Infra(e) => format!("run {name}: {e}"),
        })?;
    let store = Results::open(&storage.results, storage.s3.as_ref(), credentials)
        .map_err(|e| format!("run {name}: spec.storage.results: {e}"))?;
    let loaded = load_run(&store, &name).await.map_err(|e| format!("run {name}: {e:#}"))?;
    Ok((store, loaded))
}

async fn compare(
    ctx: &Context,
    baseline: &EvaluationRun,
    candidate: &EvaluationRun,
    spec: &ComparisonSpec,
) -> Result<ComparisonOutcome, String> {
    let (_, baseline) = load(ctx, baseline).await?;
    let (store, candidate) = load(ctx, candidate).await?;
    let settings = CompareSettings { k: spec.k, alpha: spec.alpha, min_delta: spec.min_delta };
    let comparison = compare_runs(&baseline, &candidate, &settings).map_err(|e| format!("{e:#}"))?;
    let mut message: String =
        comparison.variants.iter().map(|v| format!("{}: {}", v.variant, v.reason)).collect::<Vec<_>>().join("; ");
    if message.len() > MESSAGE_MAX {
        let cut = (0..=MESSAGE_MAX).rev().find(|i| message.is_char_boundary(*i)).unwrap_or(0);
        message.truncate(cut);
        message.push('…');
    }
    let verdict = comparison.verdict.as_str().to_string();

    // Stored before the verdict is recorded: a failed write leaves the run unlabelled, so the
    // comparison is retried on the next reconcile.
    let failed = |e: anyhow::Error| format!("run {}: {e:#}", candidate.name);
    store_comparison(&store, &comparison).await.map_err(failed)?;
    let data = report::load_compared(&store, &candidate, comparison).await.map_err(failed)?;
    let report = report::store_report(&store, &candidate.name, &data).await.map_err(failed)?;
    Ok(ComparisonOutcome { verdict, message, report })
}
