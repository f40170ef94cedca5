//! Lightsout under a real Kueue (issue 18): trial Jobs submitted to a LocalQueue whose
//! ClusterQueue admits fewer trials than the run's `parallelism`. Kueue's webhook suspends each
//! Job on creation; the controller counts them `queued` (never a pod that fails to start), never
//! more than the quota run at once, and the run completes with every trial in one attempt.

mod cluster;

use std::time::{Duration, Instant};

use cluster::*;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use lightsout_api::EvaluationRun;
use lightsout_testkit::kueue;
use serde_json::json;

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|spec| spec.suspend) == Some(true)
}

fn finished(job: &Job) -> bool {
    job_outcome(job).is_some()
}

#[tokio::test]
async fn a_sweep_larger_than_its_quota_completes_with_at_most_the_quota_admitted() {
    let Some(control_plane) = control_plane() else { return };
    let Some((_, kueue)) = kueue::shared() else { return };
    let ns = TestNamespace::create(control_plane, "kueue").await;
    // 2 CPUs of quota; each trial pod asks for 1.
    kueue::create_queues(&ns.client, &ns.name, "2").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let controller = Controller::start(control_plane, &config, "only");
    let spec = run_spec("sweep", &models.base_url(), &moto, |run| {
        let spec = &mut run["spec"];
        spec["dataset"]["filter"] = json!({"ids": sample_task_ids(3)});
        spec["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "openai"}]);
        spec["agent"]["resources"] = json!({"requests": {"cpu": "1"}});
        spec["queueName"] = json!("queue");
        spec["parallelism"] = json!(4);
    });
    let applied = kubectl_apply(control_plane, &ns.name, &spec);
    assert!(applied.status.success(), "kubectl apply: {}", stderr(&applied));

    // 3 tasks × 2 efforts = 6 trials, 4 Jobs at a time, 2 admitted at a time.
    let jobs = Api::<Job>::namespaced(ns.client.clone(), &ns.name);
    let (mut most_admitted, mut most_queued_in_status, mut waiting_since_shown) = (0, 0, false);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let all = jobs.list(&Default::default()).await.unwrap().items;
        let admitted = all.iter().filter(|job| !suspended(job) && !finished(job)).count();
        assert!(admitted <= 2, "{admitted} trial Jobs admitted at once on a quota of 2 CPUs");
        most_admitted = most_admitted.max(admitted);
        let run = ns.run("sweep").await;
        let status = run.status.clone().unwrap_or_default();
        most_queued_in_status = most_queued_in_status.max(status.trials.queued);
        if status.trials.queued > 0 {
            // While Jobs wait, status says since when the longest-waiting one has.
            waiting_since_shown |= status.queue.as_ref().is_some_and(|q| q.oldest_waiting_since.is_some());
        }
        if condition(&run, "Complete").is_some_and(|(status, _, _)| status == "True") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sweep did not complete: {:?}\ncontroller:\n{}\nKueue:\n{}\n{}",
            status.trials,
            controller.process.log_tail(40),
            kueue.log_tail(20),
            diagnose(control_plane, &ns.name)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(most_admitted, 2, "the quota was used");
    assert!(most_queued_in_status > 0, "Jobs waiting for Kueue were counted as queued in the status");

    assert!(waiting_since_shown, "status.queue.oldestWaitingSince was never set while Jobs waited");

    let run = ns.run("sweep").await;
    let status = run.status.unwrap();
    let trials = &status.trials;
    assert_eq!((trials.total, trials.succeeded, trials.infra_failed, trials.queued), (6, 6, 0, 0), "{trials:?}");
    // The queue's figures: every admission once, waits apart from running, nothing waiting now.
    let queue = status.queue.clone().expect("status.queue of a queued run");
    assert_eq!(queue.admitted, 6, "{queue:?}");
    assert!(queue.mean_wait_seconds <= queue.longest_wait_seconds && queue.oldest_waiting_since.is_none(), "{queue:?}");
    assert!(queue.total_wait_seconds > 0, "4 of 6 trials waited for the quota: {queue:?}");
    // One attempt per trial: waiting in the queue is never a failure that is retried.
    let names: Vec<String> = jobs_of(&ns, "sweep").await.iter().filter_map(|j| j.metadata.name.clone()).collect();
    assert!(names.iter().all(|n| n.ends_with("-a1")), "{names:?}");
    // Each trial's wait for admission is in the queue-wait histogram, once.
    let metrics = controller.metrics().await;
    let count = format!("lightsout_trial_queue_wait_seconds_count{{namespace=\"{}\",run=\"sweep\"}} 6", ns.name);
    assert!(metrics.lines().any(|l| l == count), "no `{count}` in:\n{metrics}");
    drop(controller);
}

/// A `queueName` that names no LocalQueue would leave every trial Job suspended forever: the run
/// is refused with the reason instead, and no Job is created.
#[tokio::test]
async fn a_missing_local_queue_is_a_condition_not_a_silent_wait() {
    let Some(control_plane) = control_plane() else { return };
    let Some(_) = kueue::shared() else { return };
    let ns = TestNamespace::create(control_plane, "kueue-missing").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let controller = Controller::start(control_plane, &config, "only");
    let spec = run_spec("orphan", &models.base_url(), &moto, |run| {
        run["spec"]["queueName"] = json!("no-such-queue");
    });
    let applied = kubectl_apply(control_plane, &ns.name, &spec);
    assert!(applied.status.success(), "kubectl apply: {}", stderr(&applied));
    let run =
        wait_condition(&ns, "orphan", "Accepted", "False", Duration::from_secs(60), || controller.process.log_tail(30))
            .await;
    let (_, reason, message) = condition(&run, "Accepted").unwrap();
    assert_eq!(reason, "LocalQueueNotFound", "{message}");
    assert!(message.contains("no-such-queue") && message.contains(&ns.name), "{message}");
    assert!(jobs_of(&ns, "orphan").await.is_empty(), "no Job waits on a queue that does not exist");
    drop(controller);
}

/// Two runs on one queue: a low-priority one fills the quota with slow trials, then a
/// high-priority one arrives; Kueue preempts the low run's Jobs (suspends them: their pods are
/// stopped: each worker gets SIGTERM and stores an interruption record), the high run
/// completes, and the low run's preempted trials are admitted again and complete afterwards in
/// their first attempt, each counted once: the preemptions are reported as `preempted`, apart
/// from failures, with no retry spent.
// Two threads: the slow model server runs in this test's runtime and must go on answering while
// the test waits for `lightsout run` at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_run_preempts_a_lower_one_which_still_completes_counting_each_trial_once() {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use kube::api::{Patch, PatchParams, PostParams};
    use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
    let Some(control_plane) = control_plane() else { return };
    let Some((_, kueue)) = kueue::shared() else { return };
    let ns = TestNamespace::create(control_plane, "kueue-preempt").await;
    kueue::create_queues(&ns.client, &ns.name, "2").await;
    let queues = kube::api::Api::<kube::api::DynamicObject>::all_with(
        ns.client.clone(),
        &kueue::kueue_resource("ClusterQueue", "clusterqueues"),
    );
    let preemption = json!({"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}});
    queues.patch(&ns.name, &PatchParams::default(), &Patch::Merge(&preemption)).await.unwrap();
    let classes = Api::<PriorityClass>::all(ns.client.clone());
    for (name, value) in [("lightsout-low", 100), ("lightsout-high", 1000)] {
        let class: PriorityClass = serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).unwrap();
        classes.create(&PostParams::default(), &class).await.unwrap();
    }
    let moto = start_moto();
    let judges = ModelServer::start(control_plane);
    let slow = ScriptedServer::start(ScriptedConfig {
        faults: Faults { delay_ms: 4000, ..Default::default() },
        ..Default::default()
    })
    .await
    .unwrap();
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let controller = Controller::start(control_plane, &config, "only");
    let spec = |name: &str, priority: &str| {
        run_spec(name, &judges.base_url(), &moto, |run| {
            let spec = &mut run["spec"];
            spec["dataset"]["filter"] = json!({"ids": sample_task_ids(2)});
            spec["providers"]["slow"] = json!({
                "baseUrl": slow.base_url(), "apiKind": "openai-chat", "secretRef": {"name": "model-key", "key": "api-key"},
            });
            spec["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "slow"}]);
            spec["matrix"]["reasoningEfforts"] = json!(["low"]);
            spec["judges"]["panel"] = json!([{"name": "gpt-5", "provider": "openai"}]);
            spec["agent"]["resources"] = json!({"requests": {"cpu": "1"}});
            spec["queueName"] = json!("queue");
            spec["priorityClassName"] = json!(priority);
            spec["parallelism"] = json!(2);
        })
    };
    assert!(kubectl_apply(control_plane, &ns.name, &spec("low", "lightsout-low")).status.success());
    let context = || {
        format!(
            "{}\nKueue:\n{}\n{}",
            controller.process.log_tail(40),
            kueue.log_tail(20),
            diagnose(control_plane, &ns.name)
        )
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running = jobs_of(&ns, "low").await.iter().filter(|j| !suspended(j) && !finished(j)).count();
        if running == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the low run's trials never ran: {}", context());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(kubectl_apply(control_plane, &ns.name, &spec("high", "lightsout-high")).status.success());
    // Kueue preempts the low run: its running Jobs are suspended again, their pods stopped.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let preempted = jobs_of(&ns, "low").await.iter().filter(|j| suspended(j) && !finished(j)).count();
        if preempted == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "Kueue did not preempt the low run: {}", context());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let low = ns.run("low").await;
    assert!(condition(&low, "Complete").is_none_or(|(status, _, _)| status == "False"), "preempted is not complete");
    wait_condition(&ns, "high", "Complete", "True", Duration::from_secs(120), context).await;
    let low = wait_condition(&ns, "low", "Complete", "True", Duration::from_secs(180), context).await;
    // Each preempted pod's worker stored the record of its stopped run beside the attempt (its
    // one call was still answering: no finished call to count). A low trial whose pod had just
    // finished when Kueue suspended its Job lost nothing and is no preempted run: one or two.
    let records = stored_keys(&moto, "low", "/interrupted-").await;
    assert!((1..=2).contains(&records.len()), "{records:?}\n{}", context());
    assert!(records.iter().all(|key| key.contains("/attempt-1/")), "{records:?}");
    let preempted = records.len() as i64;
    let status = low.status.unwrap();
    let trials = &status.trials;
    assert_eq!((trials.total, trials.succeeded, trials.infra_failed), (2, 2, 0), "{trials:?}");
    assert_eq!(trials.preempted, preempted, "{trials:?}");
    let metrics = controller.metrics().await;
    let gauge = format!(r#"lightsout_trials_preempted{{namespace="{}",run="low"}} {preempted}"#, ns.name);
    assert!(metrics.lines().any(|l| l == gauge), "{gauge} not in:\n{metrics}");
    let summary = stored_summary(&moto, "low").await;
    assert_eq!(summary["trials"]["preempted"], preempted, "{summary}");
    // Preemption is not an attempt: each trial ran to its result in its first attempt's Job,
    // and one result each is stored.
    let attempts = attempt_outcomes(&moto, "low").await;
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert!(
        attempts.iter().all(|(key, result)| key.contains("/attempt-1/") && result["outcome"] == "ok"),
        "{attempts:?}"
    );
    let names: Vec<String> = jobs_of(&ns, "low").await.iter().filter_map(|j| j.metadata.name.clone()).collect();
    assert!(names.iter().all(|n| n.ends_with("-a1")), "{names:?}");
    // The preempted run's results are those of an undisturbed one: `lightsout run` of its spec.
    let local = local_summary(control_plane, &spec("low", "lightsout-low"), &judges);
    for field in ["recall", "scored", "judge_agreement", "findings_per_review"] {
        assert_eq!(
            summary["variants"][0][field], local["variants"][0][field],
            "{field} differs from an undisturbed run's"
        );
    }
    drop(controller);
    slow.shutdown().await;
}

/// A trial that asks for more than its ClusterQueue could ever give (3 CPUs of a 2-CPU quota)
/// would wait forever: the run says so (`Progressing=False`, `QueueInadmissible`, with Kueue's
/// message). Raising the quota lets Kueue admit the Jobs, and the run completes.
#[tokio::test]
async fn a_trial_no_quota_can_hold_is_a_condition_until_the_quota_grows() {
    use kube::api::{Patch, PatchParams};
    let Some(control_plane) = control_plane() else { return };
    let Some((_, kueue)) = kueue::shared() else { return };
    let ns = TestNamespace::create(control_plane, "kueue-never").await;
    kueue::create_queues(&ns.client, &ns.name, "2").await;
    let moto = start_moto();
    let models = ModelServer::start(control_plane);
    let config = ControllerConfig::new(control_plane, &ns.name).await;
    let controller = Controller::start(control_plane, &config, "only");
    let spec = run_spec("big", &models.base_url(), &moto, |run| {
        let spec = &mut run["spec"];
        spec["dataset"]["filter"] = json!({"ids": sample_task_ids(1)});
        spec["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "openai"}]);
        spec["matrix"]["reasoningEfforts"] = json!(["low"]);
        spec["agent"]["resources"] = json!({"requests": {"cpu": "3"}});
        spec["queueName"] = json!("queue");
    });
    assert!(kubectl_apply(control_plane, &ns.name, &spec).status.success());
    let context = || format!("{}\nKueue:\n{}", controller.process.log_tail(30), kueue.log_tail(20));
    let run = wait_condition(&ns, "big", "Progressing", "False", Duration::from_secs(90), context).await;
    let (_, reason, message) = condition(&run, "Progressing").unwrap();
    assert_eq!(reason, "QueueInadmissible", "{message}");
    assert!(message.contains("request > maximum capacity (3 > 2)") && message.contains("Workload"), "{message}");
    assert_eq!(run.status.unwrap().trials.queued, 1);

    let queues = kube::api::Api::<kube::api::DynamicObject>::all_with(
        ns.client.clone(),
        &kueue::kueue_resource("ClusterQueue", "clusterqueues"),
    );
    let more = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu"],
        "flavors": [{"name": ns.name, "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}});
    queues.patch(&ns.name, &PatchParams::default(), &Patch::Merge(&more)).await.unwrap();
    let run = wait_condition(&ns, "big", "Complete", "True", Duration::from_secs(120), context).await;
    let trials = run.status.unwrap().trials;
    assert_eq!((trials.succeeded, trials.infra_failed), (1, 0), "{trials:?}");
    drop(controller);
}

/// Two runs in two namespaces whose ClusterQueues (1 CPU each) share a cohort: the first run,
/// alone, borrows the other's idle CPU (2 of its trials admitted at once on a nominal quota of
/// 1); once the second run arrives, the cohort never holds more than its 2 CPUs, and both
/// complete with each trial in one attempt.
#[tokio::test]
async fn two_runs_whose_queues_share_a_cohort_borrow_and_both_complete() {
    use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
    let Some(control_plane) = control_plane() else { return };
    let Some((_, kueue)) = kueue::shared() else { return };
    let first = TestNamespace::create(control_plane, "kueue-cohort-a").await;
    let second = TestNamespace::create(control_plane, "kueue-cohort-b").await;
    let cohort = format!("cohort-{}", first.name);
    kueue::create_cohort_queues(&first.client, &first.name, "1", &cohort).await;
    kueue::create_cohort_queues(&second.client, &second.name, "1", &cohort).await;
    let moto = start_moto();
    let judges = ModelServer::start(control_plane);
    let slow = ScriptedServer::start(ScriptedConfig {
        faults: Faults { delay_ms: 2000, ..Default::default() },
        ..Default::default()
    })
    .await
    .unwrap();
    let first_config = ControllerConfig::new(control_plane, &first.name).await;
    let second_config = ControllerConfig::new(control_plane, &second.name).await;
    let first_controller = Controller::start(control_plane, &first_config, "a");
    let second_controller = Controller::start(control_plane, &second_config, "b");
    let spec = |name: &str| {
        run_spec(name, &judges.base_url(), &moto, |run| {
            let spec = &mut run["spec"];
            spec["dataset"]["filter"] = json!({"ids": sample_task_ids(2)});
            spec["providers"]["slow"] = json!({
                "baseUrl": slow.base_url(), "apiKind": "openai-chat", "secretRef": {"name": "model-key", "key": "api-key"},
            });
            spec["matrix"]["models"] = json!([{"name": "gpt-5-mini", "provider": "slow"}]);
            spec["agent"]["resources"] = json!({"requests": {"cpu": "1"}});
            spec["queueName"] = json!("queue");
            spec["parallelism"] = json!(2);
        })
    };
    let admitted = |jobs: &[Job]| jobs.iter().filter(|j| !suspended(j) && !finished(j)).count();
    let context = || {
        format!(
            "{}\n{}\nKueue:\n{}",
            first_controller.process.log_tail(20),
            second_controller.process.log_tail(20),
            kueue.log_tail(20)
        )
    };
    // The first run alone: 2 tasks × 2 efforts, 2 Jobs at a time, 2 admitted by borrowing.
    assert!(kubectl_apply(control_plane, &first.name, &spec("first")).status.success());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if admitted(&jobs_of(&first, "first").await) == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the first run never borrowed the idle CPU: {}", context());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The second run arrives: together they never hold more than the cohort's 2 CPUs.
    assert!(kubectl_apply(control_plane, &second.name, &spec("second")).status.success());
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut second_admitted = 0;
    loop {
        let (a, b) = (admitted(&jobs_of(&first, "first").await), admitted(&jobs_of(&second, "second").await));
        assert!(a + b <= 2, "{a} + {b} trial Jobs admitted on a cohort of 2 CPUs");
        second_admitted = second_admitted.max(b);
        let complete = |run: &EvaluationRun| condition(run, "Complete").is_some_and(|(status, _, _)| status == "True");
        if complete(&first.run("first").await) && complete(&second.run("second").await) {
            break;
        }
        assert!(Instant::now() < deadline, "the runs did not complete: {}", context());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(second_admitted >= 1, "the second run got its share");
    for (ns, run) in [(&first, "first"), (&second, "second")] {
        let trials = ns.run(run).await.status.unwrap().trials;
        assert_eq!((trials.total, trials.succeeded, trials.infra_failed), (4, 4, 0), "{run}: {trials:?}");
        let names: Vec<String> = jobs_of(ns, run).await.iter().filter_map(|j| j.metadata.name.clone()).collect();
        assert!(names.iter().all(|n| n.ends_with("-a1")), "{names:?}");
    }
    drop(first_controller);
    drop(second_controller);
    slow.shutdown().await;
}
