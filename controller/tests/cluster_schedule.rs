//! A nightly regression on a real API server: an EvaluationSchedule creates its run when the
//! cron time comes, the run (made and run by the controller) completes, and the controller
//! compares it with its baseline — a run the controller made too — and records the verdict on
//! the run, in the schedule's status, condition and metric, with comparison.json and
//! report.html beside the candidate's results.

mod cluster;

use std::time::Duration;

use cluster::*;
use kube::api::Api;
use kube::ResourceExt;
use lightsout_api::{EvaluationRun, EvaluationSchedule};
use lightsout_core::results::ResultStore;
use serde_json::{json, Value};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_runs_on_time_and_records_its_verdict_against_the_baseline() {
    let Some(control_plane) = control_plane() else { return };
    let ns = TestNamespace::create(control_plane, "schedule").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let controller = Controller::start(control_plane, &ControllerConfig::new(control_plane, &ns.name).await, "only");
    let context = || format!("{}\n{}", controller.process.log_tail(60), diagnose(control_plane, &ns.name));

    // The baseline: the template's spec run by hand once.
    let run = run_spec("baseline", &models.base_url(), &moto, |s| {
        s["spec"]["dataset"]["filter"] = json!({"ids": sample_task_ids(3)});
        s["spec"]["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "openai"}]);
        s["spec"]["matrix"]["reasoningEfforts"] = json!(["low"]);
    });
    assert!(kubectl_apply(control_plane, &ns.name, &run).status.success());
    let mut template: Value = serde_yaml::from_str(&run).unwrap();
    let template_spec = template["spec"].take();

    // Every minute, compared with the pinned baseline.
    let schedule = json!({
        "apiVersion": "lightsout.dev/v1alpha1",
        "kind": "EvaluationSchedule",
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "* * * * *",
            "models": [{"name": "gpt-5-mini", "provider": "openai"}],
            "baseline": {"policy": "Pinned", "run": "baseline"},
            "comparison": {"k": 1, "alpha": 0.05, "minDelta": 0.0},
            "template": {"spec": template_spec},
        },
    });
    let applied = kubectl_apply(control_plane, &ns.name, &serde_yaml::to_string(&schedule).unwrap());
    assert!(applied.status.success(), "{}", stderr(&applied));
    wait_condition(&ns, "baseline", "Complete", "True", 3 * MINUTE, context).await;

    let schedules = Api::<EvaluationSchedule>::namespaced(ns.client.clone(), &ns.name);
    let compared = eventually(
        "the schedule's run to be compared with the baseline",
        4 * MINUTE,
        async || {
            let schedule = schedules.get("nightly").await.ok()?;
            let comparison = schedule.status.as_ref()?.last_comparison.clone()?;
            (comparison.baseline == "baseline").then_some((schedule, comparison))
        },
        context,
    )
    .await;
    let (schedule, comparison) = compared;
    // The same models against the same scripted answers: no significant change.
    assert_eq!(comparison.verdict, "NoSignificantChange", "{comparison:?}");
    assert!(!comparison.report.is_empty(), "no report URI: {comparison:?}");
    let status = schedule.status.unwrap();
    let no_regression = status.conditions.iter().find(|c| c.type_ == "NoRegression").unwrap();
    assert_eq!(no_regression.status, "True", "{no_regression:?}");
    assert_eq!(no_regression.observed_generation, schedule.metadata.generation);

    // The candidate run carries its verdict; its comparison and report are beside its results.
    let candidate =
        Api::<EvaluationRun>::namespaced(ns.client.clone(), &ns.name).get(&comparison.candidate).await.unwrap();
    assert_eq!(candidate.labels().get("lightsout.dev/verdict").map(String::as_str), Some("NoSignificantChange"));
    let store = store(&moto);
    let comparison_json = store.get(&format!("runs/{}/comparison.json", comparison.candidate)).await.unwrap();
    let stored: Value =
        serde_json::from_slice(&comparison_json.expect("comparison.json beside the candidate")).unwrap();
    assert!(stored.to_string().contains("NoSignificantChange"), "{stored}");
    assert!(
        store.get(&format!("runs/{}/report.html", comparison.candidate)).await.unwrap().is_some(),
        "no report.html"
    );
    // The Verdict column a user reads.
    let table = run_ok(control_plane.kubectl().args(["get", "evalsched", "nightly", "-n", &ns.name]));
    assert!(table.contains("NoSignificantChange"), "{table}");
    // And the metric the alert watches.
    let metrics = controller.metrics().await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("lightsout_schedule_regressed{") && l.contains("nightly"))
        .unwrap_or_else(|| panic!("no lightsout_schedule_regressed in\n{metrics}"));
    assert!(line.ends_with(" 0"), "{line}");
}
