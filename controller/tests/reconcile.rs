//! The reconciler against a stateful fake API server (kube-fake-client), a real S3 store (moto),
//! the scripted model server and the worker's own trial code in the "pods".

mod common;

use common::{condition_of, run_to_completion, Cluster, PodEnd, NAMESPACE, RUN};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use lightsout_api::condition;
use lightsout_controller::labels;
use lightsout_controller::reconcile::FINALIZER;
use lightsout_core::summary::RunSummary;
use serde_json::json;

fn label<'a>(job: &'a k8s_openapi::api::batch::v1::Job, key: &str) -> &'a str {
    job.metadata.labels.as_ref().unwrap().get(key).map(String::as_str).unwrap_or("")
}

#[tokio::test]
async fn the_first_reconcile_creates_exactly_parallelism_jobs_with_their_config_maps_and_the_network_policy() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;

    let jobs = cluster.jobs().await;
    assert_eq!(jobs.len(), 2, "parallelism is 2");
    for job in &jobs {
        assert_eq!(label(job, labels::RUN), RUN);
        assert_eq!(label(job, labels::ATTEMPT), "1");
        let spec = job.spec.as_ref().unwrap();
        assert_eq!((spec.backoff_limit, spec.completions), (Some(0), Some(1)));
        assert_eq!(spec.ttl_seconds_after_finished, None, "no TTL before the result is recorded");
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("EvaluationRun", RUN, Some(true)));
    }
    // Small job files travel inline in the Job: no ConfigMap to create or clean up.
    assert!(cluster.config_maps().await.is_empty());
    let policies = cluster.network_policies().await;
    assert_eq!(policies.len(), 1);
    let egress = serde_json::to_string(&policies[0].spec.as_ref().unwrap().egress).unwrap();
    assert!(egress.contains("127.0.0.1/32"), "the scripted model and moto are reached by IP: {egress}");

    let run = cluster.run().await;
    assert!(run.metadata.finalizers.as_ref().unwrap().contains(&FINALIZER.to_string()));
    let status = run.status.unwrap();
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(condition_of(&status, condition::ACCEPTED).0, "True");
    assert_eq!(condition_of(&status, condition::PROGRESSING).1, "TrialsRunning");
    assert_eq!(condition_of(&status, condition::COMPLETE).0, "False");
    assert_eq!((status.trials.total, status.trials.running, status.trials.pending), (6, 2, 4));

    // Reconciling again changes nothing: no second Job for an attempt.
    cluster.reconcile().await;
    assert_eq!(cluster.jobs().await.len(), 2);
}

#[tokio::test]
async fn completions_free_slots_and_the_run_completes_with_scored_results_in_status_and_s3() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    let first = cluster.jobs().await;
    cluster.run_pod(&first[0], PodEnd::Worker).await;
    cluster.reconcile().await;

    let jobs = cluster.jobs().await;
    assert_eq!(jobs.len(), 3, "the finished Job freed a slot for one more");
    assert_eq!(cluster.active_jobs().await.len(), 2);
    let finished = jobs.iter().find(|j| j.metadata.name == first[0].metadata.name).unwrap();
    assert_eq!(finished.spec.as_ref().unwrap().ttl_seconds_after_finished, Some(600), "TTL once the result is stored");

    let run = run_to_completion(&cluster, 10).await;
    let status = run.status.unwrap();
    assert_eq!(
        condition_of(&status, condition::COMPLETE),
        (
            "True".to_string(),
            "AllTrialsFinished".to_string(),
            "6 trials: 6 succeeded, 0 failed, 0 infrastructure failures".to_string()
        )
    );
    assert_eq!(condition_of(&status, condition::PROGRESSING).1, "Complete");
    assert_eq!((status.trials.succeeded, status.trials.failed, status.trials.infra_failed), (6, 0, 0));
    assert!(status.spend.judge_usd > 0.0 && status.spend.agent_usd > 0.0, "{:?}", status.spend);
    assert!(status.headline.as_deref().unwrap().starts_with("recall@3="), "{:?}", status.headline);
    assert_eq!(status.variants.len(), 2);
    assert!(status.completion_time.is_some());

    // The summary in S3 is the one the status was computed from, with every verdict in.
    let keys = cluster.keys();
    let summary_key = keys.iter().find(|k| k.ends_with("runs/nightly/summary.json")).expect("summary.json");
    assert_eq!(keys.iter().filter(|k| k.ends_with("/verdicts.json")).count(), 6);
    let text = cluster
        .moto
        .python(&format!("print(s3.get_object(Bucket='results', Key='{summary_key}')['Body'].read().decode())"));
    let summary: RunSummary = serde_json::from_str(&text).unwrap();
    assert_eq!(summary.trials.ok, 6);
    assert!(summary.scripted_models, "the scripted model server answered the trials, and its answers say so");
    assert!((summary.spend.total_usd - status.spend.total_usd).abs() < 1e-9);
    let metrics = cluster.metrics.encode();
    assert!(metrics.contains(r#"lightsout_trials_total{namespace="evals",outcome="ok",run="nightly""#), "{metrics}");
}

/// The results of a run the controller made read as `lightsout run`'s do: `lightsout compare`
/// and `lightsout report` (and a schedule's comparisons) load them through `run.json`.
#[tokio::test]
async fn a_run_completed_by_the_controller_can_be_compared_and_reported() {
    use lightsout_core::run_record::RunRecord;
    use lightsout_report::compare::{compare_runs, load_run, CompareSettings, Verdict};

    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    assert!(
        cluster.keys().iter().any(|k| k == "lightsout/runs/nightly/run.json"),
        "written when the location is claimed"
    );
    let run = run_to_completion(&cluster, 10).await;

    let store = cluster.store();
    let loaded = load_run(&store, RUN).await.expect("the run loads as lightsout compare loads it");
    assert_eq!(loaded.name, RUN);
    assert_eq!(loaded.variants, RunRecord::new(RUN, &run.spec).variants);
    assert_eq!(loaded.variants.len(), 2);
    assert_eq!(loaded.records.len(), 6, "every trial's final result");
    assert_eq!(loaded.spec_hash, loaded.summary.run.spec_hash, "run.json and summary.json name the same spec");
    let comparison = compare_runs(&loaded, &loaded, &CompareSettings::default()).unwrap();
    assert_eq!(comparison.verdict, Verdict::NoSignificantChange);

    let report = lightsout_report::load(&store, RUN).await.expect("the run loads as lightsout report loads it");
    let html = lightsout_report::render_html(&report);
    assert!(html.contains("gpt-5-mini"), "the report lists the variants");
    let uri = lightsout_report::store_report(&store, RUN, &report).await.unwrap();
    assert!(uri.ends_with("runs/nightly/report.html"), "{uri}");
}

/// The kubelet evicts a pod whose agent filled its scratch: the agent's failure, recorded by the
/// controller (the worker could not), scored, and never retried as infrastructure.
#[tokio::test]
async fn an_agent_that_fills_its_scratch_fails_its_trial_and_is_not_retried() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    let first = cluster.jobs().await;
    let trial = label(&first[0], labels::TRIAL).to_string();
    cluster.run_pod(&first[0], PodEnd::ScratchFull).await;
    cluster.reconcile().await;

    let keys = cluster.keys();
    let stored = keys.iter().find(|k| k.contains(&trial) && k.ends_with("attempt-1/result.json")).expect("a result");
    let text =
        cluster.moto.python(&format!("print(s3.get_object(Bucket='results', Key='{stored}')['Body'].read().decode())"));
    let result: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["outcome"], "agent-failed", "{result}");
    assert!(result["error"].as_str().unwrap().contains("scratch"), "{result}");
    assert_eq!(result["cost_usd"], serde_json::Value::Null, "unknown usage is not priced as 0");
    assert!(
        !cluster.metrics.encode().contains("lightsout_trial_attempt_infra_failures_total{"),
        "not an infra failure"
    );

    cluster.advance(600);
    let run = run_to_completion(&cluster, 10).await;
    let attempts: Vec<String> =
        cluster.keys().into_iter().filter(|k| k.contains(&trial) && k.ends_with("/result.json")).collect();
    assert_eq!(attempts.len(), 1, "never retried: {attempts:?}");
    let status = run.status.unwrap();
    assert_eq!((status.trials.failed, status.trials.infra_failed), (1, 0), "{status:?}");
}

#[tokio::test]
async fn an_infrastructure_failure_becomes_a_new_attempt_after_its_backoff_and_is_never_scored() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    let first = cluster.jobs().await;
    cluster.run_pod(&first[0], PodEnd::Evicted).await;
    cluster.reconcile().await;

    // The failure is stored before anything else happens to the Job.
    let trial = label(&first[0], labels::TRIAL).to_string();
    let keys = cluster.keys();
    let stored =
        keys.iter().find(|k| k.contains(&trial) && k.ends_with("attempt-1/result.json")).expect("infra result");
    let text =
        cluster.moto.python(&format!("print(s3.get_object(Bucket='results', Key='{stored}')['Body'].read().decode())"));
    let result: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["outcome"], "infra-failed");
    assert!(result["error"].as_str().unwrap().starts_with("Evicted: "), "{result}");
    assert_eq!(result["cost_usd"], serde_json::Value::Null, "unknown usage is not priced as 0");

    // Within the backoff the slot goes to another trial, not to attempt 2.
    let attempts: Vec<String> = cluster
        .jobs()
        .await
        .iter()
        .filter(|j| label(j, labels::TRIAL) == trial)
        .map(|j| label(j, labels::ATTEMPT).to_string())
        .collect();
    assert_eq!(attempts, vec!["1"]);
    assert_eq!(cluster.active_jobs().await.len(), 2);
    let infra = cluster.metrics.encode();
    assert!(
        infra.contains(
            r#"lightsout_trial_attempt_infra_failures_total{namespace="evals",reason="Evicted",run="nightly"} 1"#
        ),
        "{infra}"
    );

    // After the backoff, attempt 2 of the same trial starts as soon as a slot frees.
    cluster.advance(600);
    cluster.run_active(PodEnd::Worker).await;
    cluster.reconcile().await;
    let attempts: Vec<String> = cluster
        .jobs()
        .await
        .iter()
        .filter(|j| label(j, labels::TRIAL) == trial)
        .map(|j| label(j, labels::ATTEMPT).to_string())
        .collect();
    assert_eq!(attempts, vec!["1", "2"], "attempt 2 is a new Job; attempt 1's stays until its TTL");

    let run = run_to_completion(&cluster, 10).await;
    let status = run.status.unwrap();
    assert_eq!(
        (status.trials.succeeded, status.trials.infra_failed),
        (6, 0),
        "the retried trial succeeded; nothing scored twice"
    );
}

#[tokio::test]
async fn an_agent_failure_is_the_trials_result_and_is_not_retried() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    let first = cluster.jobs().await;
    let summary = cluster.run_pod(&first[0], PodEnd::AgentOverBudget).await.unwrap();
    assert!(summary.outcome.is_scored() && summary.outcome.as_str() != "ok", "{:?}", summary.outcome);
    cluster.advance(3600);
    cluster.reconcile().await;
    let trial = label(&first[0], labels::TRIAL).to_string();
    let attempts: Vec<String> =
        cluster.keys().into_iter().filter(|k| k.contains(&trial) && k.ends_with("/result.json")).collect();
    assert_eq!(attempts.len(), 1, "never retried: {attempts:?}");

    let run = run_to_completion(&cluster, 10).await;
    let status = run.status.unwrap();
    assert_eq!((status.trials.succeeded, status.trials.failed, status.trials.infra_failed), (5, 1, 0));
}

#[tokio::test]
async fn the_budget_stops_creation_and_raising_it_resumes() {
    // A tiny budget: the first trials' spend (or their expected cost) reaches it.
    let cluster = Cluster::start_with(|run| run.spec.budget.max_usd = Some(0.000_001)).await;
    cluster.reconcile().await;
    let started = cluster.jobs().await.len();
    assert!(started <= 2);
    cluster.run_active(PodEnd::Worker).await;
    cluster.reconcile().await;
    cluster.reconcile().await;
    assert_eq!(cluster.active_jobs().await.len(), 0, "nothing new starts over budget");
    let status = cluster.run().await.status.unwrap();
    assert_eq!(condition_of(&status, condition::BUDGET_EXCEEDED).0, "True");
    assert_eq!(condition_of(&status, condition::PROGRESSING).1, "BudgetExceeded");
    assert_eq!(condition_of(&status, condition::COMPLETE).0, "False");

    cluster.patch_spec(json!({"budget": {"maxUSD": 100.0}})).await;
    cluster.reconcile().await;
    assert_eq!(cluster.active_jobs().await.len(), 2, "creation resumes with a raised budget");
    let run = cluster.run().await;
    let status = run.status.unwrap();
    assert_eq!(condition_of(&status, condition::BUDGET_EXCEEDED).0, "False");
    assert_eq!(status.observed_generation, run.metadata.generation, "the status is of the raised budget's generation");
}

#[tokio::test]
async fn suspend_stops_new_trials_while_running_ones_finish() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    cluster.patch_spec(json!({"suspend": true})).await;
    cluster.reconcile().await;
    assert_eq!(cluster.active_jobs().await.len(), 2, "running trials are not stopped");
    cluster.run_active(PodEnd::Worker).await;
    cluster.reconcile().await;
    assert_eq!(cluster.active_jobs().await.len(), 0, "no new trial while suspended");
    let status = cluster.run().await.status.unwrap();
    assert_eq!(condition_of(&status, condition::SUSPENDED).0, "True");
    assert_eq!(status.trials.succeeded, 2, "the trials that were running finished and count");

    cluster.patch_spec(json!({"suspend": false})).await;
    cluster.reconcile().await;
    assert_eq!(cluster.active_jobs().await.len(), 2);
}

#[tokio::test]
async fn deletion_removes_jobs_config_maps_and_the_network_policy_and_keeps_the_results() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    cluster.run_pod(&cluster.jobs().await[0], PodEnd::Worker).await;
    cluster.reconcile().await;
    assert_eq!(cluster.jobs().await.len(), 3);

    // The API server marks the run deleted and keeps it while the finalizer is on it.
    let mut run = cluster.run().await;
    run.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    cluster.reconcile_object(run).await;

    assert!(cluster.jobs().await.is_empty());
    assert!(cluster.config_maps().await.is_empty());
    assert!(cluster.network_policies().await.is_empty());
    let run = cluster.run().await;
    assert!(!run.metadata.finalizers.unwrap_or_default().contains(&FINALIZER.to_string()), "the finalizer is removed");
    assert!(cluster.keys().iter().any(|k| k.ends_with("/result.json")), "results stay in S3");
    assert!(!cluster.metrics.encode().contains(r#"run="nightly""#), "the run's series are gone");
}

#[tokio::test]
async fn a_restarted_controller_creates_no_duplicate_and_counts_nothing_twice() {
    let mut cluster = Cluster::start().await;
    cluster.reconcile().await;
    cluster.run_pod(&cluster.jobs().await[0], PodEnd::Worker).await;
    cluster.reconcile().await;
    let jobs_before: Vec<_> = cluster.jobs().await.into_iter().map(|j| j.metadata.name).collect();
    let status_before = cluster.run().await.status.unwrap();

    // The controller is killed: a new one starts with no memory, over the same API and store
    // (which lost run.json, as if the first one had died before writing it).
    cluster.moto.python("s3.delete_object(Bucket='results', Key='lightsout/runs/nightly/run.json')");
    cluster.restart_controller();
    cluster.reconcile().await;
    assert!(cluster.keys().iter().any(|k| k == "lightsout/runs/nightly/run.json"), "run.json is written again");
    let jobs_after: Vec<_> = cluster.jobs().await.into_iter().map(|j| j.metadata.name).collect();
    assert_eq!(jobs_after, jobs_before, "no Job created twice, none lost");
    let status_after = cluster.run().await.status.unwrap();
    assert_eq!(status_after.trials, status_before.trials);
    assert_eq!(status_after.spend, status_before.spend);
    assert!(
        !cluster.metrics.encode().contains(r#"lightsout_trials_total{"#),
        "results stored before the restart are not counted again"
    );

    // And it finishes the run with the same totals as an uninterrupted one.
    let run = run_to_completion(&cluster, 10).await;
    assert_eq!(run.status.unwrap().trials.succeeded, 6);
}

#[tokio::test]
async fn a_controller_killed_between_a_job_and_its_config_map_recreates_the_config_map() {
    // Small job files travel inline in the Job; a large one needs its ConfigMap.
    let source = common::large_diff_dataset();
    let mut cluster = Cluster::start_with(move |run| {
        run.spec.dataset.source = source;
        run.spec.dataset.filter = Default::default();
    })
    .await;
    cluster.reconcile().await;
    assert_eq!(cluster.config_maps().await.len(), 2, "one ConfigMap per Job of the large task");
    let name = cluster.jobs().await[0].metadata.name.clone().unwrap();
    let api = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(cluster.client.clone(), NAMESPACE);
    api.delete(&name, &Default::default()).await.unwrap();

    cluster.restart_controller();
    cluster.reconcile().await;
    let config_map = api.get(&name).await.expect("re-created");
    assert_eq!(config_map.metadata.owner_references.unwrap()[0].name, name);
    // And the trial runs from it.
    let job = cluster.jobs().await.into_iter().find(|j| j.metadata.name.as_deref() == Some(&name)).unwrap();
    assert!(cluster.run_pod(&job, PodEnd::Worker).await.unwrap().outcome.is_scored());
}

#[tokio::test]
async fn an_invalid_spec_gets_a_condition_naming_the_problem_and_no_jobs() {
    let cluster = Cluster::start_with(|run| {
        run.spec.providers.get_mut("scripted").unwrap().secret_ref.as_mut().unwrap().name = "missing-key".into()
    })
    .await;
    cluster.reconcile().await;
    assert!(cluster.jobs().await.is_empty());
    let status = cluster.run().await.status.unwrap();
    let (accepted, reason, message) = condition_of(&status, condition::ACCEPTED);
    assert_eq!((accepted.as_str(), reason.as_str()), ("False", "InvalidSpec"));
    assert!(message.contains("spec.providers.scripted.secretRef") && message.contains("missing-key"), "{message}");
    assert_eq!(condition_of(&status, condition::PROGRESSING).1, "InvalidSpec");

    let file_results = Cluster::start_with(|run| run.spec.storage.results = "file://results".into()).await;
    file_results.reconcile().await;
    let status = file_results.run().await.status.unwrap();
    let (_, _, message) = condition_of(&status, condition::ACCEPTED);
    assert!(message.starts_with("spec.storage.results: file://results"), "{message}");
    assert!(file_results.jobs().await.is_empty());
}

/// A condition or Event message as an operator reads it: one line, short, the store's own
/// words, not the S3 SDK's `Debug` dump of the response.
fn assert_one_line(message: &str) {
    assert!(!message.contains('\n') && message.len() < 600, "{} bytes: {message}", message.len());
    assert!(!message.contains("Error {") && !message.contains("request_id"), "{message}");
}

#[tokio::test]
async fn a_dataset_in_a_missing_bucket_or_under_a_missing_key_is_refused_with_a_reason_and_an_event() {
    // The dataset is read through the results store's connection (moto, with the run's Secret).
    let cases = [
        ("s3://no-such-bucket/datasets/crbugbench.jsonl", "NoSuchBucket: The specified bucket does not exist"),
        ("s3://results/datasets/missing.jsonl", "does not exist"),
    ];
    for (source, why) in cases {
        let cluster = Cluster::start_with(|run| run.spec.dataset.source = source.into()).await;
        let action = cluster.reconcile().await;
        assert!(cluster.jobs().await.is_empty());
        let status = cluster.run().await.status.unwrap();
        let (accepted, reason, message) = condition_of(&status, condition::ACCEPTED);
        assert_eq!((accepted.as_str(), reason.as_str()), ("False", "DatasetNotFound"), "{message}");
        assert!(message.contains(source) && message.contains(why), "{message}");
        assert_one_line(&message);
        assert_eq!(condition_of(&status, condition::FAILED).1, "DatasetNotFound");
        let events = cluster.events().await;
        let warnings: Vec<_> =
            events.iter().filter(|(kind, reason, _)| kind == "Warning" && reason == "DatasetNotFound").collect();
        assert_eq!(warnings.len(), 1, "{events:?}");
        assert!(warnings[0].2.contains(source), "the Event names the URI: {:?}", warnings[0]);

        // No retry storm: looked at again in a minute, and the same refusal is not announced twice.
        assert_eq!(action, kube::runtime::controller::Action::requeue(std::time::Duration::from_secs(60)));
        cluster.reconcile().await;
        let again = cluster.events().await.iter().filter(|(_, reason, _)| reason == "DatasetNotFound").count();
        assert_eq!(again, 1);
    }
}

#[tokio::test]
async fn an_unreachable_dataset_store_is_retried_with_a_condition_that_says_so() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cluster = Cluster::start_with(move |run| {
        run.spec.dataset.source = "s3://datasets/crbugbench.jsonl".into();
        let mut s3 = run.spec.storage.s3.clone().unwrap();
        s3.endpoint = Some(format!("http://127.0.0.1:{port}"));
        run.spec.dataset.s3 = Some(s3);
    })
    .await;
    let run = std::sync::Arc::new(cluster.run().await);
    let error = lightsout_controller::reconcile::reconcile(run, cluster.ctx.clone()).await.unwrap_err();
    assert_eq!(error.category(), "dataset", "retried as a failed reconcile: {error}");
    assert_one_line(&error.to_string());
    let status = cluster.run().await.status.unwrap();
    let (accepted, reason, message) = condition_of(&status, condition::ACCEPTED);
    assert_eq!((accepted.as_str(), reason.as_str()), ("False", "DatasetUnavailable"), "{message}");
    assert!(message.contains("s3://datasets/crbugbench.jsonl") && message.contains("Connection refused"), "{message}");
    assert_one_line(&message);
    assert_eq!(condition_of(&status, condition::FAILED).0, "False", "a store that does not answer fails nothing");
    let events = cluster.events().await;
    assert!(events.iter().any(|(kind, reason, _)| kind == "Warning" && reason == "DatasetUnavailable"), "{events:?}");
    assert!(cluster.jobs().await.is_empty());
}

#[tokio::test]
async fn changing_the_trials_of_a_started_run_is_refused() {
    let cluster = Cluster::start().await;
    cluster.reconcile().await;
    cluster.patch_spec(json!({"matrix": {"repeats": 2}})).await;
    cluster.reconcile().await;
    let status = cluster.run().await.status.unwrap();
    let (accepted, _, message) = condition_of(&status, condition::ACCEPTED);
    assert_eq!(accepted, "False");
    assert!(message.contains("cannot change once a run has started"), "{message}");
    assert_eq!(cluster.jobs().await.len(), 2, "nothing new starts");
    let _ = NAMESPACE;
}

/// Sums the samples of a metric family whose labels include every one of `labels`.
fn metric_sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(&format!("{family}{{")) && labels.iter().all(|l| line.contains(l)))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn stored_verdicts(cluster: &Cluster) -> Vec<lightsout_core::judge::TrialVerdicts> {
    cluster
        .keys()
        .iter()
        .filter(|k| k.ends_with("/verdicts.json"))
        .map(|key| {
            let text = cluster
                .moto
                .python(&format!("print(s3.get_object(Bucket='results', Key='{key}')['Body'].read().decode())"));
            match serde_json::from_str(&text).unwrap() {
                lightsout_core::scoring::Verdicts::CrBugBench(v) => v,
                other => panic!("{key}: a CRBugBench run stored {other:?}"),
            }
        })
        .collect()
}

/// Judge calls that fail leave votes missing; asking them again meters only the new calls: the
/// judge tokens in the metrics are those of the stored verdicts (every successful call once),
/// and every vote asked is one judge call in the metrics.
#[tokio::test]
async fn judging_missing_votes_again_meters_only_the_new_calls() {
    use lightsout_core::judge::VoteValue;
    use lightsout_scripted::Faults;

    let cluster = Cluster::start_with(|run| run.spec.parallelism = 6).await;
    cluster.reconcile().await;
    assert_eq!(cluster.run_active(PodEnd::Worker).await, 6, "every trial runs before any judging");
    // Every second judge call is refused (a 400 is not retried): its vote is missing.
    cluster.scripted.set_faults(Faults { status_every_nth: Some((400, 2)), ..Faults::default() });
    cluster.reconcile().await;
    let first = stored_verdicts(&cluster);
    assert_eq!(first.len(), 6);
    let first_missing: usize =
        first.iter().map(|v| v.votes.iter().filter(|vote| vote.value == VoteValue::Missing).count()).sum();
    assert!(
        first.iter().any(|v| !v.is_complete() && v.votes.iter().any(|vote| vote.value != VoteValue::Missing)),
        "a trial is left unjudged with answered votes to keep"
    );

    cluster.scripted.set_faults(Faults::default());
    let run = run_to_completion(&cluster, 5).await;
    assert_eq!(run.status.unwrap().trials.succeeded, 6);
    let last = stored_verdicts(&cluster);
    assert!(last.iter().all(|v| v.is_complete()));
    // A trial whose missing votes could not change a pair is judged and not asked them again.
    let last_missing: usize = last.iter().map(|v| v.missing_votes as usize).sum();

    let metrics = cluster.metrics.encode();
    for kind in ["input", "output"] {
        let metered =
            metric_sum(&metrics, "lightsout_tokens_total", &[r#"role="judge""#, &format!(r#"kind="{kind}""#)]);
        let stored: u64 =
            last.iter().map(|v| if kind == "input" { v.usage.input_tokens } else { v.usage.output_tokens }).sum();
        assert_eq!(metered, stored as f64, "judge {kind} tokens metered once each:\n{metrics}");
    }
    let votes: usize = last.iter().map(|v| v.votes.len()).sum();
    let failed: usize =
        last.iter().map(|v| v.votes.iter().filter(|vote| vote.value == VoteValue::Failed).count()).sum();
    assert_eq!(
        metric_sum(&metrics, "lightsout_judge_calls_total", &[]),
        (votes + first_missing - last_missing) as f64,
        "each vote asked is one judge call: the final votes and the missing ones asked again"
    );
    assert_eq!(metric_sum(&metrics, "lightsout_judge_failures_total", &[]), (first_missing + failed) as f64);
}

/// `matrix.contextConfigs`: the controller plans every task in each configuration, gives each
/// trial's pod the prompt of its configuration and its configuration in the job file, and scores
/// each review in it: the summary's `report.by_config` has one row per configuration.
#[tokio::test]
async fn the_context_axis_runs_each_configuration_as_its_own_trial_and_scores_it_so() {
    use lightsout_api::{ContextConfig, DatasetFormat, PromptPreset, PromptRef};
    let mut cluster = Cluster::start_with(|run| {
        let spec = &mut run.spec;
        spec.dataset.format = DatasetFormat::SwePrBench;
        spec.dataset.source =
            concat!("file://", env!("CARGO_MANIFEST_DIR"), "/../datasets/sample/swe-prbench/tasks.jsonl").into();
        spec.dataset.filter.ids = vec!["pyledger-001".into()];
        spec.agent.prompt = PromptRef { preset: Some(PromptPreset::SwePrBench), inline: None };
        spec.matrix.reasoning_efforts = None;
        spec.matrix.context_configs =
            Some(vec![ContextConfig::ConfigA, ContextConfig::ConfigB, ContextConfig::ConfigC]);
        spec.judges.panel.truncate(1);
        spec.parallelism = 3;
    })
    .await;
    // SWE-PRBench tasks name no image.
    cluster.set_default_task_image("python:3.12-slim");
    cluster.reconcile().await;
    let jobs = cluster.jobs().await;
    assert_eq!(jobs.len(), 3, "one task, one variant, three configurations: {:?}", cluster.run().await.status);
    let mut contexts = Vec::new();
    for job in &jobs {
        let template = job.spec.as_ref().unwrap().template.metadata.as_ref().unwrap();
        let pod_job = lightsout_core::pod_job::PodJob::parse(
            &template.annotations.as_ref().unwrap()[lightsout_controller::job::JOB_ANNOTATION],
        )
        .unwrap();
        let context = pod_job.context_config.expect("the job file names the trial's configuration");
        assert_eq!(label(job, labels::CONTEXT_CONFIG), context.as_str());
        assert_eq!(pod_job.prompt.contains("## Related files (unchanged)"), context == ContextConfig::ConfigC);
        let expected = lightsout_core::plan::trial_id_in_context(&pod_job.variant.id, "pyledger-001", Some(context), 0);
        assert_eq!(pod_job.trial_id, expected);
        contexts.push(context);
    }
    contexts.sort();
    assert_eq!(contexts, [ContextConfig::ConfigA, ContextConfig::ConfigB, ContextConfig::ConfigC]);

    let run = run_to_completion(&cluster, 5).await;
    let status = run.status.unwrap();
    assert_eq!((status.trials.total, status.trials.succeeded), (3, 3), "{:?}", status.trials);
    let keys = cluster.keys();
    let summary_key = keys.iter().find(|k| k.ends_with("runs/nightly/summary.json")).expect("summary.json");
    let text = cluster
        .moto
        .python(&format!("print(s3.get_object(Bucket='results', Key='{summary_key}')['Body'].read().decode())"));
    let summary: RunSummary = serde_json::from_str(&text).unwrap();
    let swe = summary.variants[0].swe_prbench.as_ref().expect("SWE-PRBench scores");
    let by_context: Vec<(&str, usize)> = swe.report.by_config.iter().map(|(c, g)| (c.as_str(), g.n)).collect();
    assert_eq!(by_context, [("config_A", 1), ("config_B", 1), ("config_C", 1)]);
}
