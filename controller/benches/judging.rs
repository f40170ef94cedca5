//! Judging benchmark: how long reconciles take while a slow judge provider answers.
//!
//! A run of `--reviews` finished reviews (the sample's three tasks, two reasoning efforts,
//! repeated), every pod already run, is driven to completion as the controller drives it: a
//! reconcile, then the next one when the judge queue wakes the run (or after the reconcile's
//! requeue, whichever comes first). Each judge call of the three-judge panel is answered by the
//! scripted server after `--judge-delay-ms`. Reported: the reconciles' durations (p50, max), the
//! time to completion, and the judge calls made (the same work however it is scheduled).
//!
//! Against the fake API server and moto, as the reconcile tests (needs `moto_server` on PATH).
//!
//! Run: `cargo bench -p lightsout-controller --bench judging -- --reviews 48 --judge-delay-ms 2000`

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{condition_of, Cluster, PodEnd};
use futures::StreamExt;
use kube::runtime::controller::Action;
use lightsout_api::condition;
use lightsout_controller::reconcile::reconcile;
use lightsout_scripted::Faults;

struct Args {
    reviews: u32,
    judge_delay_ms: u64,
}

fn args() -> Args {
    let mut args = Args { reviews: 48, judge_delay_ms: 2000 };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = || given.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--reviews" => args.reviews = value().parse().expect("--reviews: a number"),
            "--judge-delay-ms" => args.judge_delay_ms = value().parse().expect("--judge-delay-ms: a number"),
            // cargo bench passes `--bench`.
            "--bench" => {}
            other => panic!("unknown argument {other} (--reviews N, --judge-delay-ms MS)"),
        }
    }
    assert!(args.reviews.is_multiple_of(6) && args.reviews > 0, "--reviews: a multiple of 6 (3 tasks × 2 efforts)");
    args
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args = args();
    let repeats = args.reviews / 6;
    let cluster = Cluster::start_with(|run| {
        run.spec.matrix.repeats = repeats as i32;
        run.spec.parallelism = args.reviews as i32;
    })
    .await;
    cluster.reconcile().await;
    assert_eq!(cluster.run_active(PodEnd::Worker).await, args.reviews as usize, "every review before judging");
    cluster.scripted.set_faults(Faults { delay_ms: args.judge_delay_ms, ..Faults::default() });
    let judge_calls_before = cluster.scripted.requests().len();

    let mut wakes = cluster.ctx.judges.wakes();
    let mut durations = Vec::new();
    let started = Instant::now();
    loop {
        let run = Arc::new(cluster.run().await);
        let began = Instant::now();
        let action = reconcile(run, cluster.ctx.clone()).await.expect("reconcile");
        durations.push(began.elapsed().as_secs_f64());
        let status = cluster.run().await.status.unwrap();
        if condition_of(&status, condition::COMPLETE).0 == "True" {
            break;
        }
        // As kube-runtime's Controller: the next reconcile on a wake or at the requeue; wakes
        // that arrived meanwhile are one reconcile.
        let requeue = requeue_after(&action).unwrap_or(Duration::from_secs(300));
        let _ = tokio::time::timeout(requeue, wakes.next()).await;
        while wakes.try_recv().is_ok() {}
    }
    let completion = started.elapsed().as_secs_f64();
    let judge_calls = cluster.scripted.requests().len() - judge_calls_before;

    let mut sorted = durations.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "judging: {} reviews, judge calls answered after {} ms ({} judge calls)",
        args.reviews, args.judge_delay_ms, judge_calls
    );
    println!(
        "  reconciles: {} — p50 {:.3} s, max {:.3} s; completion {:.1} s",
        durations.len(),
        percentile(&sorted, 0.5),
        sorted[sorted.len() - 1],
        completion
    );
}

/// The requeue of a reconcile's [`Action`] (kube-runtime shows it only in its `Debug`).
fn requeue_after(action: &Action) -> Option<Duration> {
    let text = format!("{action:?}");
    let secs = text.split("requeue_after: Some(").nth(1)?.split(')').next()?;
    parse_duration_debug(secs)
}

/// `2s`, `1.5s`, `300ms` as Debug prints a Duration.
fn parse_duration_debug(text: &str) -> Option<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse::<f64>().ok().map(|v| Duration::from_secs_f64(v / 1000.0));
    }
    text.strip_suffix('s')?.parse::<f64>().ok().map(Duration::from_secs_f64)
}
