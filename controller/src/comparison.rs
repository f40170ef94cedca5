//! A schedule's comparison of two finished runs, from their results stores, with the shared
//! comparison code (`lightsout_core::compare`, also behind `lightsout compare`): the same numbers
//! whoever asks.

use std::sync::Arc;

use kube::ResourceExt;
use lightsout_core::api::{ComparisonSpec, EvaluationRun};
use lightsout_core::compare::{compare_runs, load_run, CompareSettings, ComparedRun};
use lightsout_s3::Results;

use crate::context::Context;
use crate::evaluation_schedule::{Compare, ComparisonOutcome};
use crate::run_state::{s3_credentials, PrepareError};

/// The longest message kept in a schedule's status (the full comparison is for `lightsout compare`).
const MESSAGE_MAX: usize = 1024;

/// The schedule controller's comparison: each run's results are read from its own store.
pub fn from_results_stores(ctx: Arc<Context>) -> Compare {
    Arc::new(move |baseline, candidate, spec| {
        let ctx = ctx.clone();
        Box::pin(async move { compare(&ctx, &baseline, &candidate, &spec).await })
    })
}

async fn load(ctx: &Context, run: &EvaluationRun) -> Result<ComparedRun, String> {
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let storage = &run.spec.storage;
    let credentials = s3_credentials(storage.s3.as_ref(), ctx, &namespace, "spec.storage.s3.secretName")
        .await
        .map_err(|e| match e {
            PrepareError::Invalid(message) => format!("run {name}: {message}"),
            PrepareError::Infra(e) => format!("run {name}: {e}"),
        })?;
    let store = Results::open(&storage.results, storage.s3.as_ref(), credentials)
        .map_err(|e| format!("run {name}: spec.storage.results: {e}"))?;
    load_run(&store, &name).await.map_err(|e| format!("run {name}: {e:#}"))
}

async fn compare(
    ctx: &Context,
    baseline: &EvaluationRun,
    candidate: &EvaluationRun,
    spec: &ComparisonSpec,
) -> Result<ComparisonOutcome, String> {
    let (baseline, candidate) = (load(ctx, baseline).await?, load(ctx, candidate).await?);
    let settings = CompareSettings { k: spec.k, alpha: spec.alpha, min_delta: spec.min_delta };
    let comparison = compare_runs(&baseline, &candidate, &settings).map_err(|e| format!("{e:#}"))?;
    let mut message: String =
        comparison.variants.iter().map(|v| format!("{}: {}", v.variant, v.reason)).collect::<Vec<_>>().join("; ");
    if message.len() > MESSAGE_MAX {
        let cut = (0..=MESSAGE_MAX).rev().find(|i| message.is_char_boundary(*i)).unwrap_or(0);
        message.truncate(cut);
        message.push('…');
    }
    Ok(ComparisonOutcome { verdict: comparison.verdict.as_str().to_string(), message })
}
