//! The EvaluationSchedule reconciler against a stateful fake API server (kube-fake-client):
//! runs on time in the schedule's time zone, at once on a model-list change, one per due time
//! however often it reconciles, concurrency policies, comparison verdicts recorded on the run, in
//! status and in metrics, and history limits. The comparison itself is the shared library's
//! (tested in core and by `lightsout compare`); here it is mostly a stand-in that answers by run
//! name. The last two tests use the real one over real results: runs made by `lightsout run`'s
//! code, and runs the schedule creates and the run controller runs (`common`'s cluster).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use kube_fake_client::ClientBuilder;
use lightsout_api::{EvaluationRun, EvaluationSchedule, ModelRef, SCHEDULE_LABEL, VERDICT_LABEL};
use lightsout_controller::context::{ClusterView, Context, ControllerSettings};
use lightsout_controller::evaluation_schedule::{reconcile, ComparisonOutcome, ScheduleContext};
use lightsout_controller::job::TrialSettings;
use lightsout_controller::metrics::Metrics;
use lightsout_controller::status::from_time;
use lightsout_model::pricing::PricingTable;
use lightsout_model::{ModelClient, RetryPolicy};

const NAMESPACE: &str = "evals";

fn schedule_yaml(policy: &str) -> String {
    format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationSchedule
metadata: {{name: nightly, namespace: {NAMESPACE}, uid: 5c4ed000-0000-4000-8000-000000000001, generation: 1,
  creationTimestamp: "2026-12-01T00:00:00Z"}}
spec:
  schedule: "0 2 * * *"
  timeZone: Europe/Berlin
  models: [{{name: gpt-5-mini, provider: openai}}]
  concurrencyPolicy: {policy}
  successfulRunsHistoryLimit: 2
  template:
    metadata: {{labels: {{team: review}}}}
    spec:
      dataset: {{format: crbugbench, source: "s3://datasets/crbugbench.jsonl"}}
      agent: {{harness: {{name: single-shot, version: "1.0.0"}}, prompt: {{preset: default}}, timeout: 30m}}
      matrix: {{models: [{{name: placeholder, provider: openai}}], repeats: 1}}
      providers: {{openai: {{baseUrl: "http://models.evals.svc:8000/v1", apiKind: openai-chat, secretRef: {{name: key, key: k}}}}}}
      storage: {{results: "s3://results/lightsout"}}
status: {{}}
"#
    )
}

struct Harness {
    client: Client,
    clock: Arc<Mutex<DateTime<Utc>>>,
    metrics: Arc<Metrics>,
    sctx: Arc<ScheduleContext>,
    /// What the stand-in comparison answers, by candidate run name (default NoSignificantChange),
    /// and the (baseline, candidate) pairs it was asked about.
    verdicts: Arc<Mutex<BTreeMap<String, String>>>,
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

impl Harness {
    async fn start(policy: &str) -> Harness {
        let schedule: EvaluationSchedule = serde_yaml::from_str(&schedule_yaml(policy)).unwrap();
        // A run with a status elsewhere: the fake API then gives runs a status subresource.
        let mut other: EvaluationRun = serde_json::from_value(serde_json::json!({
            "apiVersion": "lightsout.dev/v1alpha1", "kind": "EvaluationRun",
            "metadata": {"name": "other", "namespace": "elsewhere"},
            "spec": serde_json::to_value(&schedule.spec.template.spec).unwrap(),
        }))
        .unwrap();
        other.status = Some(Default::default());
        let client = ClientBuilder::new()
            .with_resource::<EvaluationSchedule>()
            .with_resource::<EvaluationRun>()
            .with_object(schedule)
            .with_object(other)
            .build()
            .await
            .unwrap();
        let clock = Arc::new(Mutex::new(at("2026-12-01T00:30:00Z")));
        let metrics = Arc::new(Metrics::new());
        let now = clock.clone();
        let ctx = Arc::new(Context::new(
            client.clone(),
            ControllerSettings::new(TrialSettings::new("worker:test", "harness")),
            ClusterView::Listed,
            metrics.clone(),
            ModelClient::new(Duration::from_secs(5), RetryPolicy::default()),
            PricingTable::default(),
            Arc::new(move || *now.lock().unwrap()),
        ));
        let verdicts: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let asked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let (answers, questions) = (verdicts.clone(), asked.clone());
        let compare: lightsout_controller::evaluation_schedule::Compare =
            Arc::new(move |baseline: EvaluationRun, candidate: EvaluationRun, _settings| {
                let verdict = answers
                    .lock()
                    .unwrap()
                    .get(&candidate.name_any())
                    .cloned()
                    .unwrap_or_else(|| "NoSignificantChange".into());
                questions.lock().unwrap().push((baseline.name_any(), candidate.name_any()));
                Box::pin(async move {
                    Ok(ComparisonOutcome { message: format!("recall@5 {verdict}"), verdict, report: String::new() })
                })
            });
        Harness { client, clock, metrics, sctx: Arc::new(ScheduleContext { ctx, compare }), verdicts, asked }
    }

    fn set_clock(&self, time: &str) {
        *self.clock.lock().unwrap() = at(time);
    }

    async fn reconcile(&self) {
        let schedule = self.schedules().get("nightly").await.unwrap();
        reconcile(Arc::new(schedule), self.sctx.clone()).await.expect("reconcile");
    }

    fn schedules(&self) -> Api<EvaluationSchedule> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    fn runs_api(&self) -> Api<EvaluationRun> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    async fn runs(&self) -> Vec<EvaluationRun> {
        let mut runs = self.runs_api().list(&ListParams::default()).await.unwrap().items;
        runs.sort_by_key(|r| r.name_any());
        runs
    }

    async fn run_names(&self) -> Vec<String> {
        self.runs().await.iter().map(|r| r.name_any()).collect()
    }

    /// Marks a run Complete (or Failed), as the run controller would.
    async fn finish(&self, name: &str, complete: bool) {
        let condition = Condition {
            type_: if complete { "Complete" } else { "Failed" }.into(),
            status: "True".into(),
            reason: "Test".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: lightsout_controller::status::to_time(*self.clock.lock().unwrap()),
        };
        let patch = serde_json::json!({"status": {"conditions": [condition]}});
        self.runs_api().patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        // Runs are listed in creation order; the fake API stamps creation times itself.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn at(time: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(time).unwrap().to_utc()
}

#[tokio::test]
async fn runs_are_created_on_time_in_the_schedules_time_zone_and_once_per_due_time() {
    let h = Harness::start("Forbid").await;
    h.reconcile().await;
    assert!(h.run_names().await.is_empty(), "nothing is due before 02:00 Berlin");
    let status = h.schedules().get("nightly").await.unwrap().status.unwrap();
    // 02:00 in Berlin (CET, UTC+1) is 01:00 UTC.
    assert_eq!(from_time(&status.next_schedule_time.unwrap()), at("2026-12-01T01:00:00Z"));
    assert_eq!(status.conditions.iter().find(|c| c.type_ == "Ready").unwrap().status, "True");

    h.set_clock("2026-12-01T01:00:30Z");
    h.reconcile().await;
    h.reconcile().await;
    let runs = h.runs().await;
    assert_eq!(runs.iter().map(|r| r.name_any()).collect::<Vec<_>>(), ["nightly-20261201-0100"]);
    let run = &runs[0];
    assert_eq!(run.labels()[SCHEDULE_LABEL], "nightly");
    assert_eq!(run.labels()["team"], "review");
    assert_eq!(run.spec.matrix.models, [ModelRef { name: "gpt-5-mini".into(), provider: "openai".into() }]);
    let owner = &run.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("EvaluationSchedule", "nightly", Some(true))
    );
    let status = h.schedules().get("nightly").await.unwrap().status.unwrap();
    assert_eq!(status.last_run.as_deref(), Some("nightly-20261201-0100"));
    assert_eq!(status.active_runs, 1);
    assert_eq!(from_time(&status.next_schedule_time.unwrap()), at("2026-12-02T01:00:00Z"));

    // Two days missed while the first run is finished: one run, for the latest due time.
    h.finish("nightly-20261201-0100", true).await;
    h.set_clock("2026-12-03T09:00:00Z");
    h.reconcile().await;
    assert_eq!(h.run_names().await, ["nightly-20261201-0100", "nightly-20261203-0100"]);
}

#[tokio::test]
async fn a_changed_model_list_starts_a_run_at_once_and_forbid_holds_it_while_one_runs() {
    let h = Harness::start("Forbid").await;
    h.set_clock("2026-12-01T01:00:30Z");
    h.reconcile().await;
    assert_eq!(h.run_names().await, ["nightly-20261201-0100"]);

    // A new release: the model list changes while the nightly run is still running.
    let patch = serde_json::json!({"spec": {"models": [{"name": "gpt-5-mini", "provider": "openai"}, {"name": "gpt-5.2", "provider": "openai"}]}});
    h.schedules().patch("nightly", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    h.set_clock("2026-12-01T03:00:00Z");
    h.reconcile().await;
    assert_eq!(h.run_names().await.len(), 1, "Forbid: not while another run is running");

    h.finish("nightly-20261201-0100", true).await;
    h.reconcile().await;
    let names = h.run_names().await;
    assert_eq!(names.len(), 2, "{names:?}");
    let new = names.iter().find(|n| n.contains("-m")).expect("a model-change run");
    let run = h.runs_api().get(new).await.unwrap();
    assert_eq!(run.spec.matrix.models.len(), 2);
    h.reconcile().await;
    assert_eq!(h.run_names().await.len(), 2, "the change started exactly one run");
}

#[tokio::test]
async fn replace_deletes_the_running_run_for_the_due_one() {
    let h = Harness::start("Replace").await;
    h.set_clock("2026-12-01T01:00:30Z");
    h.reconcile().await;
    h.set_clock("2026-12-02T01:00:30Z");
    h.reconcile().await;
    assert_eq!(h.run_names().await, ["nightly-20261202-0100"]);
}

#[tokio::test]
async fn finished_runs_are_compared_with_the_previous_one_and_the_verdict_is_recorded() {
    let h = Harness::start("Forbid").await;
    h.verdicts.lock().unwrap().insert("nightly-20261203-0100".into(), "Regressed".into());
    for day in ["01", "02", "03"] {
        h.set_clock(&format!("2026-12-{day}T01:00:30Z"));
        h.reconcile().await;
        h.finish(&format!("nightly-202612{day}-0100"), true).await;
        h.reconcile().await;
    }
    assert_eq!(
        *h.asked.lock().unwrap(),
        [
            ("nightly-20261201-0100".to_string(), "nightly-20261202-0100".to_string()),
            ("nightly-20261202-0100".to_string(), "nightly-20261203-0100".to_string())
        ]
    );
    let runs = h.runs().await;
    let verdict = |name: &str| runs.iter().find(|r| r.name_any() == name).map(|r| r.labels()[VERDICT_LABEL].clone());
    // The first had no baseline; history keeps two complete runs (the oldest was deleted).
    assert_eq!(runs.len(), 2, "{:?}", runs.iter().map(|r| r.name_any()).collect::<Vec<_>>());
    assert_eq!(verdict("nightly-20261202-0100").as_deref(), Some("NoSignificantChange"));
    assert_eq!(verdict("nightly-20261203-0100").as_deref(), Some("Regressed"));

    let status = h.schedules().get("nightly").await.unwrap().status.unwrap();
    let last = status.last_comparison.unwrap();
    assert_eq!(
        (last.candidate.as_str(), last.baseline.as_str(), last.verdict.as_str()),
        ("nightly-20261203-0100", "nightly-20261202-0100", "Regressed")
    );
    let no_regression = status.conditions.iter().find(|c| c.type_ == "NoRegression").unwrap();
    assert_eq!((no_regression.status.as_str(), no_regression.reason.as_str()), ("False", "Regressed"));
    let metrics = h.metrics.encode();
    assert!(metrics.contains(r#"lightsout_schedule_regressed{namespace="evals",schedule="nightly"} 1"#), "{metrics}");
    assert!(
        metrics.contains(
            r#"lightsout_schedule_comparisons_total{namespace="evals",schedule="nightly",verdict="NoBaseline"} 1"#
        ),
        "{metrics}"
    );

    // Reconciling again compares nothing twice.
    h.reconcile().await;
    assert_eq!(h.asked.lock().unwrap().len(), 2);
}

/// The watch cache can lag behind the controller's own status write: a reconcile handed the copy
/// from before the comparison still keeps it (it reads the schedule fresh). Found on the real API
/// server, where the next cron tick's reconcile dropped `lastComparison`.
#[tokio::test]
async fn a_stale_copy_of_the_schedule_does_not_drop_the_recorded_comparison() {
    let h = Harness::start("Forbid").await;
    for day in ["01", "02"] {
        h.set_clock(&format!("2026-12-{day}T01:00:30Z"));
        h.reconcile().await;
        h.finish(&format!("nightly-202612{day}-0100"), true).await;
    }
    let stale = h.schedules().get("nightly").await.unwrap();
    h.reconcile().await;
    let compared = h.schedules().get("nightly").await.unwrap().status.unwrap().last_comparison;
    assert_eq!(compared.as_ref().map(|c| c.candidate.as_str()), Some("nightly-20261202-0100"));

    // The next day's tick, reconciled from the copy taken before the comparison was recorded.
    h.set_clock("2026-12-03T01:00:30Z");
    assert_ne!(stale.status.as_ref().and_then(|s| s.last_comparison.clone()), compared);
    reconcile(Arc::new(stale), h.sctx.clone()).await.expect("reconcile");
    let status = h.schedules().get("nightly").await.unwrap().status.unwrap();
    assert_eq!(status.last_comparison, compared);
    assert_eq!(status.last_run.as_deref(), Some("nightly-20261203-0100"));
    assert_eq!(h.asked.lock().unwrap().len(), 1, "compared once");
}

#[tokio::test]
async fn an_invalid_time_zone_is_a_condition_and_creates_nothing() {
    let h = Harness::start("Forbid").await;
    let patch = serde_json::json!({"spec": {"timeZone": "Mars/Olympus"}});
    h.schedules().patch("nightly", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    h.set_clock("2026-12-05T01:00:30Z");
    h.reconcile().await;
    assert!(h.run_names().await.is_empty());
    let status = h.schedules().get("nightly").await.unwrap().status.unwrap();
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "InvalidSpec"));
    assert!(ready.message.contains("spec.timeZone \"Mars/Olympus\""), "{}", ready.message);
}

/// The controller's own comparison (`comparison::from_results_stores`) over two real runs in a
/// results store: two identical scripted runs of the sample dataset, made by `lightsout run`'s
/// code, compare as NoSignificantChange, and the verdict lands on the run.
#[tokio::test]
async fn the_stores_comparison_compares_two_real_runs() {
    use lightsout_scripted::{ScriptedConfig, ScriptedServer};
    use lightsout_worker::local::{run_local, LocalRun};

    let results = tempfile::tempdir().unwrap();
    let scripted = ScriptedServer::start(ScriptedConfig::default()).await.unwrap();
    let dataset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/crbugbench.jsonl");
    let run_yaml = |name: &str| {
        format!(
            r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: {name}, namespace: {NAMESPACE}, labels: {{"{SCHEDULE_LABEL}": nightly}}}}
spec:
  dataset: {{format: crbugbench, source: "file://{}"}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, timeout: 30s}}
  matrix: {{models: [{{name: gpt-5-mini, provider: scripted}}]}}
  judges: {{panel: [{{name: judge-a, provider: scripted}}, {{name: judge-b, provider: scripted}}, {{name: judge-c, provider: scripted}}]}}
  providers: {{scripted: {{baseUrl: "{}", apiKind: openai-chat}}}}
  storage: {{results: "file://{}"}}
  parallelism: 4
"#,
            dataset.display(),
            scripted.base_url(),
            results.path().display()
        )
    };
    let h = Harness::start("Forbid").await;
    for name in ["nightly-20261201-0100", "nightly-20261202-0100"] {
        let run = lightsout_api::validate::parse_run(&run_yaml(name), "run.yaml").unwrap();
        run_local(
            LocalRun {
                run: run.clone(),
                results_uri: None,
                pricing: PricingTable::default(),
                env: Box::new(|_| None),
                retry_delay: Duration::from_millis(1),
                model_retry: RetryPolicy::default(),
                model_rate_limits: lightsout_model::RateLimitPolicy::default(),
                provider_stall_timeout: lightsout_model::DEFAULT_STALL_TIMEOUT,
                harness_root: results.path().join("harnesses"),
                sandbox: None,
                upload_deadline: Duration::from_secs(10),
                offline_models: Some(std::sync::Arc::new(lightsout_scripted::ScriptedModels::default())),
            },
            |_| {},
        )
        .await
        .unwrap();
        let mut object = run;
        object.status = None;
        h.runs_api().create(&Default::default(), &object).await.unwrap();
        h.finish(name, true).await;
    }
    let sctx = Arc::new(ScheduleContext {
        ctx: h.sctx.ctx.clone(),
        compare: lightsout_controller::comparison::from_results_stores(h.sctx.ctx.clone()),
    });
    h.set_clock("2026-12-02T05:00:00Z");
    let schedule = h.schedules().get("nightly").await.unwrap();
    reconcile(Arc::new(schedule), sctx).await.unwrap();

    let second = h.runs_api().get("nightly-20261202-0100").await.unwrap();
    assert_eq!(second.labels().get(VERDICT_LABEL).map(String::as_str), Some("NoSignificantChange"));
    let last = h.schedules().get("nightly").await.unwrap().status.unwrap().last_comparison.unwrap();
    assert_eq!((last.baseline.as_str(), last.candidate.as_str()), ("nightly-20261201-0100", "nightly-20261202-0100"));
    assert!(last.message.contains("gpt-5-mini"), "{}", last.message);

    // The comparison and the candidate's report showing it are stored beside its results, and
    // the status says where the report is.
    let run_dir = results.path().join("runs/nightly-20261202-0100");
    let comparison: lightsout_report::compare::RunComparison =
        serde_json::from_slice(&std::fs::read(run_dir.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(comparison.verdict.as_str(), "NoSignificantChange");
    assert_eq!(comparison.baseline.name, "nightly-20261201-0100");
    let report_path = run_dir.join("report.html");
    assert!(last.report.ends_with("runs/nightly-20261202-0100/report.html"), "{}", last.report);
    let html = std::fs::read_to_string(&report_path).unwrap();
    assert!(
        html.contains("id=\"what-changed\"") && html.contains("id=\"chart-change\""),
        "no comparison in the report"
    );
    assert!(html.contains("<strong>NoSignificantChange</strong>"));
    assert!(html.contains("nightly-20261201-0100"));
    // The report reads back the stored comparison by itself (as `lightsout report` does).
    let store = lightsout_s3::Results::open(&format!("file://{}", results.path().display()), None, None).unwrap();
    let data = lightsout_report::load(&store, "nightly-20261202-0100").await.unwrap();
    assert_eq!(data.comparison.as_ref(), Some(&comparison));
    assert!(data.notices.is_empty(), "{:?}", data.notices);
}

/// A schedule whose runs the controller itself makes: the schedule creates each run from its
/// template, the run reconciler runs its trials (pods with the worker's own trial code against
/// the scripted model server, results in moto), and the schedule compares the second complete
/// run with the first through the controller's own comparison, reading both from S3 — the way
/// `lightsout compare` reads them, through `run.json`.
#[tokio::test]
async fn a_schedule_compares_runs_the_controller_made() {
    use common::{run_named_to_completion, Cluster};

    // The schedule's template is the test run's spec (dataset, scripted provider, moto).
    let template = std::cell::RefCell::new(None);
    let cluster = Cluster::start_full(
        |run| *template.borrow_mut() = Some(run.spec.clone()),
        |builder| {
            let spec = template.borrow_mut().take().expect("the run's spec");
            let schedule: EvaluationSchedule = serde_json::from_value(serde_json::json!({
                "apiVersion": "lightsout.dev/v1alpha1", "kind": "EvaluationSchedule",
                "metadata": {"name": "hourly", "namespace": NAMESPACE, "uid": "5c4ed000-0000-4000-8000-000000000002",
                             "generation": 1, "creationTimestamp": "2026-12-01T06:30:00Z"},
                "spec": {"schedule": "0 * * * *", "models": spec.matrix.models, "template": {"spec": spec}},
                "status": {},
            }))
            .unwrap();
            builder.with_resource::<EvaluationSchedule>().with_object(schedule)
        },
    )
    .await;
    let sctx = Arc::new(ScheduleContext {
        ctx: cluster.ctx.clone(),
        compare: lightsout_controller::comparison::from_results_stores(cluster.ctx.clone()),
    });
    let schedules: Api<EvaluationSchedule> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let reconcile_schedule = || async {
        let schedule = schedules.get("hourly").await.unwrap();
        reconcile(Arc::new(schedule), sctx.clone()).await.expect("schedule reconcile");
    };

    // 08:00: the 08:00 run is due; made by the schedule, run by the controller.
    reconcile_schedule().await;
    run_named_to_completion(&cluster, "hourly-20261201-0800", 10).await;
    // 09:00: the first is compared with nothing; the next is due.
    cluster.advance(3600);
    reconcile_schedule().await;
    run_named_to_completion(&cluster, "hourly-20261201-0900", 10).await;
    reconcile_schedule().await;

    let status = schedules.get("hourly").await.unwrap().status.unwrap();
    let last = status.last_comparison.expect("a comparison");
    assert_eq!(
        (last.baseline.as_str(), last.candidate.as_str(), last.verdict.as_str()),
        ("hourly-20261201-0800", "hourly-20261201-0900", "NoSignificantChange"),
        "{}",
        last.message
    );
    assert!(last.report.ends_with("runs/hourly-20261201-0900/report.html"), "{}", last.report);
    let runs = cluster.runs();
    let verdict = |run: EvaluationRun| run.labels().get(VERDICT_LABEL).cloned();
    assert_eq!(verdict(runs.get("hourly-20261201-0800").await.unwrap()).as_deref(), Some("NoBaseline"));
    assert_eq!(verdict(runs.get("hourly-20261201-0900").await.unwrap()).as_deref(), Some("NoSignificantChange"));
    let keys = cluster.keys();
    for key in ["runs/hourly-20261201-0900/comparison.json", "runs/hourly-20261201-0900/report.html"] {
        assert!(keys.iter().any(|k| k.ends_with(key)), "{key} in {keys:?}");
    }
}
