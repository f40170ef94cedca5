//! Dereference and validate a run's spec (step 2 of [`crate::reconcile`]) into the
//! [`PreparedRun`] and [`StoredRun`] kept in its [`crate::run_state::RunState`].
//!
//! **Dereference and validate** ([`prepare`]), in order, each failure naming what and where:
//! the spec's own rules ([`check_rules`], the CRD's CEL rules, for objects that bypassed them);
//! the dataset (`file://` read by the controller process, e.g. from a mounted volume;
//! `s3://` downloaded through the run's S3 connection), filtered and sampled; every selected task
//! has a container image (its own or the controller's default); the results store opens with the
//! credentials of `spec.storage.s3.secretName`; the judges' keys (their providers' `secretRef`)
//! exist; and the results location is either new or holds results of the same trials
//! (`runs/<run>/controller.json`, below).
//!
//! **The claim.** The fields that define a run's trials and their scores — dataset, agent,
//! matrix, judges, providers and storage — are hashed and written to
//! `runs/<run>/controller.json` on first use. A later generation whose hash differs is refused
//! (`Accepted=False`): its trials would be other trials, and mixing their results into one
//! summary would publish a number nobody ran. `parallelism`, `retries`, `budget`, `suspend`,
//! `queueName`, `priorityClassName` and `placement` may change at any time. Re-creating a run of the same name with
//! the same trials resumes it from the stored results. Beside the claim, `runs/<run>/run.json`
//! records the current spec as `lightsout run` does ([`record_run`]), for `lightsout compare` and
//! `lightsout report`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use lightsout_api::hash::sha256_hex;
use lightsout_api::validate::{check_rules, spec_hash};
use lightsout_api::{DatasetFormat, EvaluationRun, EvaluationRunSpec, S3Connection};
use lightsout_core::dataset::{self};
use lightsout_core::plan::{self};
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_core::run_record::{record_run, OtherSpec};
use lightsout_core::scoring::Scorer;
use lightsout_core::stored::StoredRun;
use lightsout_core::summary::ScoringSettings;
use lightsout_model::Endpoint;
use lightsout_s3::{Results, S3Credentials};
use serde::{Deserialize, Serialize};

use crate::context::{Context, LocalQueueLookup, SecretError, KUEUE_GROUP, KUEUE_VERSION};
use crate::error::Error;
use crate::run_state::PreparedRun;
use crate::status::{reason, Refusal};

/// Why a run could not be prepared.
#[derive(Debug)]
pub enum PrepareError {
    /// The run cannot be accepted (now): `Accepted=False` with the refusal's reason and message.
    Refused(Refusal),
    /// A transient failure (API, store): retried.
    Infra(Error),
}

impl PrepareError {
    /// The spec, or something it names, is wrong (`InvalidSpec`).
    pub fn invalid(message: String) -> PrepareError {
        PrepareError::Refused(Refusal::invalid(message))
    }
}

impl From<Error> for PrepareError {
    fn from(e: Error) -> Self {
        PrepareError::Infra(e)
    }
}

/// `runs/<run>/controller.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Claim {
    name: String,
    namespace: String,
    trials_hash: String,
}

/// The hash of the fields that define the run's trials and scores.
pub fn trials_hash(spec: &EvaluationRunSpec) -> String {
    let defining = serde_json::json!({
        "dataset": spec.dataset,
        "agent": spec.agent,
        "matrix": spec.matrix,
        "judges": spec.judges,
        "providers": spec.providers,
        "storage": spec.storage,
    });
    sha256_hex(&serde_json::to_vec(&defining).expect("the spec serialises"))
}

/// Dereferences and validates `run` (see the module docs).
/// Returns the prepared run and the results store's content.
pub async fn prepare(run: &EvaluationRun, ctx: &Context) -> Result<(PreparedRun, StoredRun), PrepareError> {
    let invalid = PrepareError::invalid;
    let spec = &run.spec;
    let name = run.metadata.name.clone().ok_or(Error::Metadata("metadata.name is missing"))?;
    let namespace = run.metadata.namespace.clone().ok_or(Error::Metadata("metadata.namespace is missing"))?;

    let problems = check_rules(run);
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(invalid(list.join("; ")));
    }
    if let Some(queue) = &spec.queue_name {
        check_local_queue(ctx, &namespace, queue).await?;
    }
    if !spec.storage.results.starts_with("s3://") && !ctx.settings.trial.allow_local_results {
        return Err(invalid(format!(
            "spec.storage.results: {} — in a cluster, results must go to S3 (s3://): a file:// store inside a pod vanishes with it",
            spec.storage.results
        )));
    }

    let credentials = s3_credentials(spec.storage.s3.as_ref(), ctx, &namespace, "spec.storage.s3.secretName").await?;
    let store = Results::open(&spec.storage.results, spec.storage.s3.as_ref(), credentials.clone())
        .map_err(|e| invalid(format!("spec.storage.results: {e}")))?;

    // The dataset's own S3 connection, else the results store's.
    let dataset_credentials = match spec.dataset.s3.as_ref() {
        Some(connection) => s3_credentials(Some(connection), ctx, &namespace, "spec.dataset.s3.secretName").await?,
        None => credentials,
    };
    let loaded = load_dataset(spec, ctx, dataset_credentials).await?;
    let skipped_lines = loaded.skipped.len() as u32;
    let tasks = dataset::select_for_run(loaded.tasks, spec).map_err(|e| invalid(e.to_string()))?;
    if ctx.settings.trial.default_task_image.is_none() {
        let missing: Vec<&str> =
            tasks.iter().filter(|t| t.task.image.is_none()).map(|t| t.task.id.as_str()).take(5).collect();
        if !missing.is_empty() {
            return Err(invalid(format!(
                "dataset {}: tasks without a container image (and the controller has no --default-task-image): {}",
                spec.dataset.source,
                missing.join(", ")
            )));
        }
    }

    let layout = RunLayout::new(&name);
    let hash = trials_hash(spec);
    claim(&store, &layout, &name, &namespace, &hash).await?;
    // run.json, as `lightsout run` writes it, so `lightsout compare` and `lightsout report` (and
    // a schedule's comparisons) read the run: the claim has just established that the stored
    // results are of this spec's trials, so a record of an earlier generation is replaced (what
    // differs is `retries`, `parallelism`, `budget`, …). Written after the claim on every
    // preparation, so a controller that died in between writes it on its next start.
    record_run(&store, &layout, spec, OtherSpec::Replace).await.map_err(|e| Error::Store(format!("{e:#}")))?;

    let endpoints = judge_endpoints(run, ctx, &namespace).await?;
    let scorer = Scorer::from_spec(spec, &endpoints, &ctx.models, &ctx.pricing)
        .map_err(|e| invalid(format!("spec.judges: {e:#}")))?;

    // Durations measured in this run (sibling repeats) order the plan; estimates otherwise.
    let stored = StoredRun::scan(&store, &layout).await.map_err(|e| Error::store(store.uri(&layout.run_dir()), e))?;
    for unreadable in &stored.unreadable {
        tracing::warn!(record = unreadable.as_str(), "an interruption record cannot be read; its spend is not counted");
    }
    let durations = stored.mean_durations();
    let task_list: Vec<_> = tasks.iter().map(|t| t.task.clone()).collect();
    let plan =
        plan::plan(spec, &task_list, |variant, task| durations.get(&(variant.to_string(), task.to_string())).copied());
    let trial_index = plan.trials.iter().enumerate().map(|(i, t)| (t.id.clone(), i)).collect();
    let prepared = PreparedRun {
        generation: run.metadata.generation,
        tasks,
        skipped_lines,
        plan,
        trial_index,
        store,
        layout,
        scorer,
        scoring: ScoringSettings::of(spec),
        spec_hash: spec_hash(spec),
    };
    Ok((prepared, stored))
}

/// S3 credentials from the connection's `secretName` (`field` names it in errors); `None`
/// without one (the S3 client then uses the controller's own environment).
pub(crate) async fn s3_credentials(
    connection: Option<&S3Connection>,
    ctx: &Context,
    namespace: &str,
    field: &str,
) -> Result<Option<S3Credentials>, PrepareError> {
    let Some(secret) = connection.and_then(|s3| s3.secret_name.as_ref()) else { return Ok(None) };
    let id = secret_value(ctx, namespace, secret, "AWS_ACCESS_KEY_ID", field).await?;
    let key = secret_value(ctx, namespace, secret, "AWS_SECRET_ACCESS_KEY", field).await?;
    Ok(Some(S3Credentials::new(id, key)))
}

async fn secret_value(
    ctx: &Context,
    namespace: &str,
    name: &str,
    key: &str,
    field: &str,
) -> Result<String, PrepareError> {
    ctx.secret_value(namespace, name, key).await.map_err(|e| match e {
        SecretError::Missing(message) => PrepareError::invalid(format!("{field}: {message}")),
        SecretError::Api(message) => PrepareError::Infra(Error::Store(message)),
    })
}

/// Endpoints, with keys, of the providers the judges (and SWE-PRBench's embeddings) use. A
/// provider without a `secretRef` is called without a key (in-cluster model servers).
async fn judge_endpoints(
    run: &EvaluationRun,
    ctx: &Context,
    namespace: &str,
) -> Result<BTreeMap<String, Endpoint>, PrepareError> {
    let spec = &run.spec;
    let mut used: Vec<&str> = spec.judges.panel.iter().map(|j| j.provider.as_str()).collect();
    if let Some(embeddings) = &spec.judges.swe_prbench.embeddings {
        used.push(&embeddings.provider);
    }
    let mut endpoints = BTreeMap::new();
    for name in used {
        if endpoints.contains_key(name) {
            continue;
        }
        let Some(provider) = spec.providers.get(name) else {
            return Err(PrepareError::invalid(format!("spec.judges: provider {name:?} is not in spec.providers")));
        };
        let api_key = match &provider.secret_ref {
            Some(secret) => Some(
                secret_value(ctx, namespace, &secret.name, &secret.key, &format!("spec.providers.{name}.secretRef"))
                    .await?,
            ),
            None => None,
        };
        endpoints.insert(
            name.to_string(),
            Endpoint {
                provider: name.to_string(),
                base_url: provider.base_url.clone(),
                api_kind: provider.api_kind,
                api_key,
            },
        );
    }
    Ok(endpoints)
}

/// Writes the claim, or checks that the stored one is for the same trials.
async fn claim(
    store: &Results,
    layout: &RunLayout,
    name: &str,
    namespace: &str,
    hash: &str,
) -> Result<(), PrepareError> {
    let key = format!("{}/controller.json", layout.run_dir());
    // The first read of the results store: a bucket that does not exist, or credentials it
    // refuses, are the spec's to fix, not a fault to retry every few seconds.
    let existing = store.get(&key).await.map_err(|e| match is_spec_problem(&e) {
        true => PrepareError::invalid(format!("spec.storage.results: {e}")),
        false => PrepareError::Infra(Error::store(store.uri(&key), e)),
    })?;
    if let Some(bytes) = existing {
        let claim: Claim = serde_json::from_slice(&bytes)
            .map_err(|e| PrepareError::invalid(format!("{} is not a valid claim: {e}", store.uri(&key))))?;
        if claim.trials_hash != hash {
            return Err(PrepareError::invalid(format!(
                "{} holds results of other trials (run {}/{}, trials hash {} ≠ {}): dataset, agent, matrix, judges, \
                 providers and storage cannot change once a run has started; create a run with a new name",
                store.uri(&layout.run_dir()),
                claim.namespace,
                claim.name,
                &claim.trials_hash[..12],
                &hash[..12]
            )));
        }
        return Ok(());
    }
    let claim = Claim { name: name.into(), namespace: namespace.into(), trials_hash: hash.into() };
    let bytes = serde_json::to_vec_pretty(&claim).expect("a claim serialises");
    store.put(&key, &bytes).await.map_err(|e| Error::store(store.uri(&key), e))?;
    Ok(())
}

/// Reads the dataset: `file://` from the controller's filesystem, `s3://` downloaded first (a
/// SWE-PRBench dataset with the files beside it).
async fn load_dataset(
    spec: &EvaluationRunSpec,
    ctx: &Context,
    credentials: Option<S3Credentials>,
) -> Result<dataset::Dataset, PrepareError> {
    let source = &spec.dataset.source;
    let path = if let Some(s3) = source.strip_prefix("s3://") {
        let (dir, file) = match s3.rsplit_once('/') {
            Some((dir, file)) if dir.contains('/') || !dir.is_empty() => (format!("s3://{dir}"), file.to_string()),
            _ => {
                return Err(PrepareError::invalid(format!(
                    "spec.dataset.source {source}: name an object, s3://bucket/path/file"
                )))
            }
        };
        let connection = spec.dataset.s3.as_ref().or(spec.storage.s3.as_ref());
        let store = Results::open(&dir, connection, credentials)
            .map_err(|e| PrepareError::invalid(format!("spec.dataset.source {source}: {e}")))?;
        let local = ctx.settings.dataset_cache.join(sha256_hex(source.as_bytes()));
        download_dataset(&store, &file, spec.dataset.format, &local).await.map_err(|e| match e {
            DownloadError::Missing => PrepareError::Refused(Refusal {
                reason: reason::DATASET_NOT_FOUND,
                message: format!("spec.dataset.source: {source} does not exist"),
                transient: false,
            }),
            DownloadError::Store(error) => PrepareError::Refused(dataset_refusal(source, &error)),
            DownloadError::Cache(error) => PrepareError::Infra(Error::Dataset(format!(
                "{source}: writing it to {}: {error}",
                ctx.settings.dataset_cache.display()
            ))),
        })?
    } else {
        dataset::local_path(source).map_err(|e| PrepareError::invalid(format!("spec.dataset.source: {e}")))?
    };
    let format = spec.dataset.format;
    tokio::task::spawn_blocking(move || dataset::load_file(format, &path))
        .await
        .map_err(|e| PrepareError::Infra(Error::Store(format!("reading the dataset: {e}"))))?
        .map_err(|e| PrepareError::invalid(format!("spec.dataset.source: {e}")))
}

/// `spec.queueName` must name a LocalQueue of the run's namespace: otherwise Kueue keeps every
/// trial Job suspended and the run would wait forever, silently. Looked at again with the spec
/// (every minute while refused: the queue may be created).
async fn check_local_queue(ctx: &Context, namespace: &str, queue: &str) -> Result<(), PrepareError> {
    let refused = |reason, message| PrepareError::Refused(Refusal { reason, message, transient: false });
    match ctx.local_queue(namespace, queue).await.map_err(PrepareError::Infra)? {
        LocalQueueLookup::Found => Ok(()),
        LocalQueueLookup::Missing => Err(refused(
            reason::LOCAL_QUEUE_NOT_FOUND,
            format!(
                "spec.queueName: there is no Kueue LocalQueue {queue:?} in namespace {namespace}: Kueue would keep every \
                 trial Job suspended"
            ),
        )),
        LocalQueueLookup::NoKueue => Err(refused(
            reason::KUEUE_NOT_INSTALLED,
            format!(
                "spec.queueName is {queue:?}, but the cluster serves no Kueue LocalQueues ({KUEUE_GROUP}/{KUEUE_VERSION}): \
                 install Kueue or remove spec.queueName"
            ),
        )),
    }
}

enum DownloadError {
    /// The dataset file is not in its bucket.
    Missing,
    /// Reading the store failed.
    Store(std::io::Error),
    /// Writing the controller's local copy failed.
    Cache(std::io::Error),
}

/// Whether a store error is the spec's to fix — the bucket or object named does not exist, the
/// credentials may not read it, the request is malformed — rather than a fault that may pass
/// (5xx, throttling, a timeout, a refused connection). The S3 store gives 404s `NotFound`,
/// 401/403 `PermissionDenied` and other 4xx `InvalidInput`, each already retried where it could
/// be transient.
fn is_spec_problem(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(error.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied | ErrorKind::InvalidInput)
}

/// The refusal for a dataset that could not be read from its store: a missing bucket or key and
/// access denied are spec problems with their own reasons; anything else is `DatasetUnavailable`,
/// retried. Messages are the store's one-line errors, which name the object's URI.
fn dataset_refusal(source: &str, error: &std::io::Error) -> Refusal {
    use std::io::ErrorKind;
    let refused = |reason, message| Refusal { reason, message, transient: false };
    match error.kind() {
        ErrorKind::NotFound => refused(reason::DATASET_NOT_FOUND, format!("spec.dataset.source {source}: {error}")),
        ErrorKind::PermissionDenied => {
            refused(reason::DATASET_ACCESS_DENIED, format!("spec.dataset.source {source}: {error}"))
        }
        _ if is_spec_problem(error) => refused(reason::INVALID_SPEC, format!("spec.dataset.source {source}: {error}")),
        _ => Refusal {
            reason: reason::DATASET_UNAVAILABLE,
            message: format!("spec.dataset.source {source} is unavailable (retrying): {error}"),
            transient: true,
        },
    }
}

/// Downloads `file` (and for SWE-PRBench every object beside it) into `dir`; returns the
/// dataset file's local path.
async fn download_dataset(
    store: &Results,
    file: &str,
    format: DatasetFormat,
    dir: &std::path::Path,
) -> Result<PathBuf, DownloadError> {
    let keys = if format == DatasetFormat::SwePrBench {
        store.list("").await.map_err(DownloadError::Store)?
    } else {
        vec![file.to_string()]
    };
    for key in keys {
        let bytes = store.get(&key).await.map_err(DownloadError::Store)?;
        let Some(bytes) = bytes else {
            if key == file {
                return Err(DownloadError::Missing);
            }
            continue;
        };
        if key.split('/').any(|part| part == ".." || part.is_empty()) {
            continue;
        }
        let path = dir.join(&key);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(DownloadError::Cache)?;
        }
        tokio::fs::write(&path, bytes).await.map_err(DownloadError::Cache)?;
    }
    let path = dir.join(file);
    if !path.exists() {
        return Err(DownloadError::Missing);
    }
    Ok(path)
}
