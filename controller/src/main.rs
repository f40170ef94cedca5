//! `lightsout-controller`: watches EvaluationRuns (and the Jobs and pods it creates for them)
//! and reconciles them into per-trial Jobs. Thin: the work is in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use chrono::TimeDelta;
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use lightsout_api::{EvaluationRun, EvaluationSchedule};
use lightsout_controller::backoff::Backoff;
use lightsout_controller::context::{self, ClusterView, Context, ControllerSettings};
use lightsout_controller::evaluation_schedule::{self, ScheduleContext};
use lightsout_controller::http::{self, Health};
use lightsout_controller::job::TrialSettings;
use lightsout_controller::leader::{LeaderLease, LeaseSettings};
use lightsout_controller::metrics::Metrics;
use lightsout_controller::network::NetworkSettings;
use lightsout_controller::observe::ObserveSettings;
use lightsout_controller::{comparison, labels, reconcile, shutdown};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{ModelClient, RetryPolicy};
use tokio::sync::watch;

#[derive(Parser, Debug)]
#[command(name = "lightsout-controller", version, about = "Reconciles Lightsout EvaluationRuns into per-trial Jobs")]
struct Args {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "LIGHTSOUT_NAMESPACE")]
    namespace: Option<String>,
    /// The image holding `/lightsout-worker` (the trial pods' `worker` init container).
    #[arg(long, env = "LIGHTSOUT_WORKER_IMAGE")]
    worker_image: String,
    /// Harness images are `<repository>/<harness>:<version>`.
    #[arg(long, env = "LIGHTSOUT_HARNESS_IMAGE_REPOSITORY", default_value = "ghcr.io/lightsout-dev/harness")]
    harness_image_repository: String,
    /// The ServiceAccount trial pods run as (it must exist in every namespace with runs).
    #[arg(long, default_value = "lightsout-trial")]
    trial_service_account: String,
    /// The image of tasks that name none.
    #[arg(long)]
    default_task_image: Option<String>,
    /// Where agentic harnesses find the task's repository in its image.
    #[arg(long, default_value = "/repo")]
    repo_path: PathBuf,
    /// Trial pods' egress beyond what run specs name: a YAML file with `services` (in-cluster
    /// Services by `<namespace>/<name>`: `podSelector`, `targetPort`), `providerCidrs` (provider
    /// name → CIDRs) and `s3Cidrs`.
    #[arg(long)]
    network_config: Option<PathBuf>,
    /// The model pricing table (YAML); the built-in table when absent.
    #[arg(long)]
    pricing: Option<PathBuf>,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_address: SocketAddr,
    /// The Lease that elects the one active replica.
    #[arg(long, env = "POD_NAMESPACE", default_value = "lightsout-system")]
    lease_namespace: String,
    #[arg(long, default_value = "lightsout-controller")]
    lease_name: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// How long after a trial's result is stored its finished Job (and pod) is kept.
    #[arg(long, default_value_t = 600)]
    finished_job_ttl_seconds: i32,
    /// Runs reconciled at once.
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
    /// How long a trial pod may keep failing to pull an image before the attempt is an
    /// infrastructure failure (e.g. 90s, 5m).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    image_pull_grace: Duration,
    /// How long a trial pod may stay unscheduled before the attempt is an infrastructure failure.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "15m")]
    unscheduled_grace: Duration,
    /// The delay before the next attempt after an infrastructure failure; it doubles with each
    /// failed attempt, up to --infra-retry-backoff-max.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    infra_retry_backoff: Duration,
    #[arg(long, value_parser = humantime::parse_duration, default_value = "6m")]
    infra_retry_backoff_max: Duration,
    /// On SIGTERM, how long reconciles in flight may finish before they are cancelled (and never
    /// past the point where the leader Lease, no longer renewed, could be taken over). Keep it
    /// under the pod's terminationGracePeriodSeconds.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "25s")]
    shutdown_timeout: Duration,
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Text,
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(args.log_format);
    lightsout_controller::install_crypto_provider();

    let client = Client::try_default().await.context("connecting to the Kubernetes API (kubeconfig or in-cluster)")?;
    let metrics = Arc::new(Metrics::new());
    let health = Health::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let listener = tokio::net::TcpListener::bind(args.metrics_address)
        .await
        .with_context(|| format!("binding {}", args.metrics_address))?;
    let server = tokio::spawn(http::serve(listener, metrics.clone(), health.clone(), stopped(stop_rx.clone())));
    {
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutting down");
            let _ = stop_tx.send(true);
        });
    }

    client.apiserver_version().await.context("the Kubernetes API does not answer")?;
    // A standby replica is ready too: it serves metrics and waits for the Lease.
    health.set_ready(true);

    let identity = args.identity.clone().unwrap_or_else(|| format!("lightsout-controller-{}", std::process::id()));
    let lease =
        LeaderLease::new(client.clone(), LeaseSettings::new(&args.lease_namespace, &args.lease_name, identity.clone()));
    tracing::info!(identity, lease = args.lease_name, "waiting for the leader Lease");
    loop {
        if *stop_rx.borrow() {
            server.await??;
            return Ok(());
        }
        match lease.try_acquire(chrono::Utc::now()).await {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not read the leader Lease"),
        }
        tokio::time::sleep(lease.settings().renew_every).await;
    }
    metrics.set_leader(true);
    tracing::info!(identity, "leading");
    let controllers = run_controller(&args, client, metrics.clone(), stopped(stop_rx.clone()));
    let result = shutdown::lead(&lease, controllers, &stop_tx, args.shutdown_timeout).await;
    metrics.set_leader(false);
    let _ = stop_tx.send(true);
    server.await??;
    // Abandoned at the deadline: an orderly stop all the same (the reconciles are restart-safe).
    result.unwrap_or(Ok(()))
}

async fn run_controller(
    args: &Args,
    client: Client,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let pricing = match &args.pricing {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            PricingTable::from_yaml(&text).with_context(|| format!("{}", path.display()))?
        }
        None => PricingTable::default(),
    };
    let network = match &args.network_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            serde_yaml::from_str::<NetworkSettings>(&text).with_context(|| format!("{}", path.display()))?
        }
        None => NetworkSettings::default(),
    };
    let mut trial = TrialSettings::new(&args.worker_image, &args.harness_image_repository);
    trial.service_account = args.trial_service_account.clone();
    trial.default_task_image = args.default_task_image.clone();
    trial.repo_path = args.repo_path.clone();
    let mut settings = ControllerSettings::new(trial);
    settings.network = network;
    settings.finished_job_ttl_seconds = args.finished_job_ttl_seconds;
    settings.observe = ObserveSettings {
        image_pull_grace: TimeDelta::from_std(args.image_pull_grace).unwrap_or(TimeDelta::MAX),
        unscheduled_grace: TimeDelta::from_std(args.unscheduled_grace).unwrap_or(TimeDelta::MAX),
    };
    settings.backoff = Backoff { base: args.infra_retry_backoff, cap: args.infra_retry_backoff_max };

    let (runs, jobs, pods): (Api<EvaluationRun>, Api<Job>, Api<Pod>) = match &args.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone()), Api::all(client.clone())),
    };
    let managed = format!("{}={}", labels::MANAGED_BY, labels::MANAGER);
    let (job_store, job_writer) = reflector::store();
    let job_stream = watcher(jobs, watcher::Config::default().labels(&managed))
        .default_backoff()
        .modify(context::trim_job)
        .reflect(job_writer)
        .touched_objects();
    let (pod_store, pod_writer) = reflector::store();
    let pod_stream = watcher(pods, watcher::Config::default().labels(&managed))
        .default_backoff()
        .modify(context::trim_pod)
        .reflect(pod_writer)
        .touched_objects();

    let models = ModelClient::new(Duration::from_secs(300), RetryPolicy::default());
    let ctx = Arc::new(Context::new(
        client,
        settings,
        ClusterView::Watched { jobs: job_store.clone(), pods: pod_store },
        metrics,
        models,
        pricing,
        Arc::new(chrono::Utc::now),
    ));

    // Schedules: their runs are owned by them, so a run's change wakes its schedule.
    let (schedules, schedule_runs): (Api<EvaluationSchedule>, Api<EvaluationRun>) = match &args.namespace {
        Some(ns) => (Api::namespaced(ctx.client.clone(), ns), Api::namespaced(ctx.client.clone(), ns)),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    let schedule_ctx =
        Arc::new(ScheduleContext { ctx: ctx.clone(), compare: comparison::from_results_stores(ctx.clone()) });
    let (shutdown_runs, shutdown_schedules) = {
        let shared = futures::FutureExt::shared(Box::pin(shutdown));
        (shared.clone(), shared)
    };
    let schedule_controller = Controller::new(schedules, watcher::Config::default())
        .owns(schedule_runs, watcher::Config::default().labels(lightsout_api::SCHEDULE_LABEL))
        .graceful_shutdown_on(shutdown_schedules)
        .run(evaluation_schedule::reconcile, evaluation_schedule::error_policy, schedule_ctx)
        .for_each(|result| async move {
            match result {
                Ok((schedule, _)) => tracing::debug!(schedule = %schedule, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "schedule reconcile error"),
            }
        });

    // A pod's run is its Job's owner (a pod's labels may carry a shortened run name).
    let jobs_for_pods = job_store.clone();
    let judges = ctx.judges.clone();
    let run_controller = Controller::new(runs, watcher::Config::default())
        .with_config(ControllerConfig::default().concurrency(args.concurrency))
        .owns_stream(job_stream)
        .watches_stream(pod_stream, move |pod: Pod| {
            let namespace = pod.namespace()?;
            let job_name = pod.labels().get(lightsout_controller::observe::JOB_NAME_LABEL)?.clone();
            let job = jobs_for_pods.get(&ObjectRef::new(&job_name).within(&namespace))?;
            let owner = job.owner_references().iter().find(|o| o.kind == "EvaluationRun")?.name.clone();
            Some(ObjectRef::<EvaluationRun>::new(&owner).within(&namespace))
        })
        .reconcile_on(ctx.judges.wakes())
        .graceful_shutdown_on(shutdown_runs)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((run, _)) => tracing::debug!(run = %run, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "reconcile error"),
            }
        });
    futures::join!(run_controller, schedule_controller);
    // The reviews being judged are stored with their calls (within the shutdown's deadline).
    judges.drain().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods_and_backoff_default_to_the_librarys_and_take_humantime_durations() {
        let args = Args::try_parse_from(["lightsout-controller", "--worker-image=w"]).unwrap();
        let observe = ObserveSettings::default();
        assert_eq!(TimeDelta::from_std(args.image_pull_grace).unwrap(), observe.image_pull_grace);
        assert_eq!(TimeDelta::from_std(args.unscheduled_grace).unwrap(), observe.unscheduled_grace);
        assert_eq!(Backoff { base: args.infra_retry_backoff, cap: args.infra_retry_backoff_max }, Backoff::default());
        assert_eq!(args.shutdown_timeout, Duration::from_secs(25));

        let args = Args::try_parse_from([
            "lightsout-controller",
            "--worker-image=w",
            "--image-pull-grace=30s",
            "--unscheduled-grace=1m 30s",
            "--infra-retry-backoff=500ms",
            "--infra-retry-backoff-max=2s",
            "--shutdown-timeout=10s",
        ])
        .unwrap();
        assert_eq!(
            (args.image_pull_grace, args.unscheduled_grace, args.infra_retry_backoff, args.infra_retry_backoff_max),
            (Duration::from_secs(30), Duration::from_secs(90), Duration::from_millis(500), Duration::from_secs(2))
        );
        assert_eq!(args.shutdown_timeout, Duration::from_secs(10));
        assert!(Args::try_parse_from(["lightsout-controller", "--worker-image=w", "--image-pull-grace=soon"]).is_err());
    }
}
