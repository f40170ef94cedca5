//! Judging off the reconcile path: a reconcile hands finished reviews to the judge queue and
//! returns while a slow judge provider still answers; the next reconcile stores what was judged;
//! a controller that dies while its judges answer loses nothing (against the fake API server,
//! moto and the scripted judges, as `reconcile.rs`).

mod common;

use std::sync::Arc;

use common::{condition_of, run_to_completion, Cluster, PodEnd};
use lightsout_api::condition;
use lightsout_controller::reconcile::reconcile;
use lightsout_scripted::Faults;

/// Six finished reviews, judged by a panel that answers each call after `delay_ms`.
async fn six_reviews_and_slow_judges(delay_ms: u64) -> (Cluster, String) {
    let cluster = Cluster::start_with(|run| run.spec.parallelism = 6).await;
    cluster.reconcile().await;
    assert_eq!(cluster.run_active(PodEnd::Worker).await, 6);
    cluster.scripted.set_faults(Faults { delay_ms, ..Faults::default() });
    let uid = cluster.run().await.metadata.uid.unwrap();
    (cluster, uid)
}

/// One reconcile as the controller runs it: no waiting for the queue.
async fn bare_reconcile(cluster: &Cluster) {
    reconcile(Arc::new(cluster.run().await), cluster.ctx.clone()).await.expect("reconcile");
}

fn verdicts_stored(cluster: &Cluster) -> usize {
    cluster.keys().iter().filter(|k| k.ends_with("/verdicts.json")).count()
}

#[tokio::test]
async fn a_reconcile_hands_reviews_to_the_judges_and_stores_their_verdicts_on_a_later_pass() {
    let (cluster, uid) = six_reviews_and_slow_judges(300).await;
    bare_reconcile(&cluster).await;
    // Returned with the judges still answering: 18 calls of 300 ms, 8 at a time.
    assert!(cluster.ctx.judges.is_busy(&uid), "the reconcile did not wait for the judges");
    let status = cluster.run().await.status.unwrap();
    assert_eq!(condition_of(&status, condition::COMPLETE).0, "False");
    assert!(condition_of(&status, condition::COMPLETE).2.ends_with("; 6 reviews awaiting the judges"));

    cluster.ctx.judges.settled(&uid).await;
    assert_eq!(verdicts_stored(&cluster), 6, "the queue stored every review's verdicts");
    bare_reconcile(&cluster).await;
    assert!(!cluster.ctx.judges.is_busy(&uid), "nothing handed over twice");
    let status = cluster.run().await.status.unwrap();
    assert_eq!(condition_of(&status, condition::COMPLETE).0, "True", "{:?}", status.conditions);
    assert!(status.spend.judge_usd > 0.0);
    assert!(status.headline.as_deref().unwrap().starts_with("recall@3="));
}

#[tokio::test]
async fn a_controller_that_dies_while_its_judges_answer_gives_the_same_scores() {
    let undisturbed = {
        let (cluster, _) = six_reviews_and_slow_judges(0).await;
        run_to_completion(&cluster, 5).await.status.unwrap()
    };

    let (mut cluster, uid) = six_reviews_and_slow_judges(300).await;
    bare_reconcile(&cluster).await;
    assert!(cluster.ctx.judges.is_busy(&uid));
    // The process dies: its judges stop mid-answer and its memory is gone.
    cluster.ctx.judges.forget_run(&uid);
    cluster.restart_controller();
    cluster.scripted.set_faults(Faults::default());
    let status = run_to_completion(&cluster, 5).await.status.unwrap();

    assert_eq!(verdicts_stored(&cluster), 6);
    assert_eq!(status.headline, undisturbed.headline);
    assert_eq!(status.trials.succeeded, undisturbed.trials.succeeded);
    let recall = |s: &lightsout_api::EvaluationRunStatus| {
        s.variants.iter().map(|v| (v.name.clone(), format!("{:?}", v.recall))).collect::<Vec<_>>()
    };
    assert_eq!(recall(&status), recall(&undisturbed));
}
