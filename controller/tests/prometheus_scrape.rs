//! A real Prometheus server scrapes the controller's `/metrics` after the controller took a run
//! to completion (the fake API server, moto as S3, the scripted models, the worker's trial code in
//! the "pods"), with the chart's alert rules loaded: the expected series arrive with the expected
//! labels, and every rule evaluates against them without error.
//!
//! Needs Debian's `prometheus` (`apt-get install prometheus`; `.ci/run` installs it), or the
//! binary named by `$PROMETHEUS`.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_to_completion, Cluster, NAMESPACE, RUN};
use lightsout_controller::http::{serve, Health};
use serde_json::Value;

/// A Prometheus server, killed when dropped.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(dir: &Path, target: &str) -> Prometheus {
        let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/lightsout/files/alerts.yaml");
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 rule_files: ['{}']\n\
                 scrape_configs:\n\
                 - job_name: lightsout-controller\n  honor_labels: true\n  static_configs: [{{targets: ['{target}']}}]\n",
                rules.display()
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let binary = std::env::var("PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary} (apt-get install prometheus, or set $PROMETHEUS): {e}"));
        Prometheus { child, url: format!("http://127.0.0.1:{port}") }
    }

    /// `GET /api/v1/<path>`'s `data`, or None while the server is not answering yet.
    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Option<Value> {
        let response =
            reqwest::Client::new().get(format!("{}/api/v1/{path}", self.url)).query(query).send().await.ok()?;
        let body: Value = response.json().await.ok()?;
        assert_eq!(body["status"], "success", "{path}: {body}");
        Some(body["data"].clone())
    }

    /// The instant vector of `query`, once it has at least `min` series (within 60 s).
    async fn series(&self, query: &str, min: usize, log: &Path) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(data) = self.api("query", &[("query", query)]).await {
                let result = data["result"].as_array().cloned().unwrap_or_default();
                if result.len() >= min {
                    return result;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no {min} series for {query} within 60 s; Prometheus log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn label<'a>(series: &'a Value, name: &str) -> &'a str {
    series["metric"][name].as_str().unwrap_or_else(|| panic!("no label {name} in {series}"))
}

fn value(series: &Value) -> f64 {
    series["value"][1].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn prometheus_scrapes_a_finished_runs_series_and_evaluates_the_alert_rules() {
    let cluster = Cluster::start().await;
    run_to_completion(&cluster, 10).await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let health = Health::default();
    health.set_ready(true);
    cluster.metrics.set_leader(true);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, cluster.metrics.clone(), health, async {
        let _ = stopped.await;
    }));

    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), &target);
    let log = dir.path().join("prometheus.log");

    let up = prometheus.series(r#"up{job="lightsout-controller"}"#, 1, &log).await;
    assert_eq!(value(&up[0]), 1.0, "{up:?}");

    // Six trials over two variants, all ok; every series names its run and namespace.
    let trials = prometheus.series("lightsout_trials_total", 2, &log).await;
    assert_eq!(trials.len(), 2, "one series per variant: {trials:?}");
    for series in &trials {
        assert_eq!(
            (label(series, "namespace"), label(series, "run"), label(series, "outcome"), label(series, "job")),
            (NAMESPACE, RUN, "ok", "lightsout-controller")
        );
        assert!(!label(series, "variant").is_empty());
        assert!(series["metric"].get("trial").is_none() && series["metric"].get("task").is_none());
    }
    assert_eq!(trials.iter().map(value).sum::<f64>(), 6.0);

    // Spend by role: agents and judges both priced.
    let cost = prometheus.series("sum by (role) (lightsout_cost_usd_total)", 2, &log).await;
    for series in &cost {
        assert!(["agent", "judge"].contains(&label(series, "role")), "{series}");
        assert!(value(series) > 0.0, "{series}");
    }
    let tokens = prometheus.series(r#"lightsout_tokens_total{role="agent",kind="input"}"#, 2, &log).await;
    assert!(tokens.iter().all(|s| value(s) > 0.0 && !label(s, "model").is_empty()), "{tokens:?}");

    // Durations, scores and the run's state.
    let durations = prometheus.series("sum(lightsout_trial_duration_seconds_count)", 1, &log).await;
    assert_eq!(value(&durations[0]), 6.0);
    let recall = prometheus.series("lightsout_variant_recall", 2, &log).await;
    assert!(recall.iter().all(|s| (0.0..=1.0).contains(&value(s)) && !label(s, "k").is_empty()), "{recall:?}");
    let complete = prometheus.series("lightsout_run_complete", 1, &log).await;
    assert_eq!((label(&complete[0], "run"), value(&complete[0])), (RUN, 1.0));
    let progress = prometheus.series("lightsout_run_last_progress_timestamp_seconds", 1, &log).await;
    assert!(value(&progress[0]) > 1.7e9, "{progress:?}");
    for family in ["lightsout_run_spend_usd", "lightsout_active_trials", "lightsout_pending_trials"] {
        let series = prometheus.series(family, 1, &log).await;
        assert_eq!((label(&series[0], "namespace"), label(&series[0], "run")), (NAMESPACE, RUN), "{family}");
    }
    let judges = prometheus.series("lightsout_judge_calls_total", 1, &log).await;
    assert!(judges.iter().map(value).sum::<f64>() > 0.0, "{judges:?}");
    prometheus.series("lightsout_reconcile_duration_seconds_count", 1, &log).await;
    prometheus.series("lightsout_provider_retries_total", 1, &log).await;

    // The chart's alert rules are loaded and evaluate without error over these series; a
    // finished run within its budget fires none of them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let rules = loop {
        let data = prometheus.api("rules", &[]).await.expect("rules API");
        let rules: Vec<Value> =
            data["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap().clone()).collect();
        if !rules.is_empty()
            && rules
                .iter()
                .all(|r| r.get("lastEvaluation").and_then(Value::as_str).is_some_and(|t| !t.starts_with("0001")))
        {
            break rules;
        }
        assert!(Instant::now() < deadline, "rules not evaluated within 30 s: {data}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(rules.iter().filter(|r| r["type"] == "alerting").count() >= 6, "{rules:?}");
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "rule {} failed: {}", rule["name"], rule["lastError"]);
    }
    let firing: Vec<&Value> = rules.iter().filter(|r| r["type"] == "alerting" && r["state"] == "firing").collect();
    assert!(firing.is_empty(), "alerts firing for a healthy finished run: {firing:?}");

    drop(prometheus);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
