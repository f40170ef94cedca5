//! Judge client under rate limiting: 3,000 judgments through the real judge panel and model
//! client against the scripted server on loopback, which enforces a rate limit of 200 requests/s
//! (token bucket, burst 10) and also answers 30% of requests 429 at random (seeded), with the
//! client's default `RateLimitPolicy` and `RetryPolicy`. Every request takes 20 ms (a model
//! answer takes seconds; what matters is that neither answers nor 429s are instantaneous), and
//! the random 429s ask to wait 100 ms (`retry-after-ms`, as OpenAI sends it), between the 0 and
//! 1 s providers send. Throughput is counted over the whole run, ramp-up and the last retries
//! included.
//! Target (issue 4): successful throughput ≥ 95% of the rate limit, no judgment lost.
//! Run: `cargo bench -p lightsout-core --bench judge_client`

use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use lightsout_api::{ApiKind, ModelRef, VoteRule};
use lightsout_core::dataset::TruthItem;
use lightsout_core::findings::Finding;
use lightsout_core::judge::{Judge, Panel, VoteValue};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{Endpoint, ModelClient, RateLimitPolicy, RetryPolicy};
use lightsout_scripted::{Faults, RateLimit, ScriptedConfig, ScriptedServer};

/// The provider's rate limit (requests/s) and burst.
const RATE: f64 = 200.0;
const BURST: u32 = 10;
/// The share of requests answered 429 at random, and their `retry-after-ms`.
const STORM: f64 = 0.3;
const STORM_RETRY_AFTER_MS: u64 = 100;
/// Every request (answer or 429) takes this long.
const LATENCY_MS: u64 = 20;
/// 100 trials × 5 findings × 2 ground-truth items × 3 judges = 3,000 judgments.
const TRIALS: usize = 100;
const FINDINGS: usize = 5;
const ITEMS: usize = 2;
const JUDGES: usize = 3;
/// Trials judged at once, each with the panel's 8 calls at a time: up to 256 calls asked at once.
const PARALLEL_TRIALS: usize = 32;
const KEY: &str = "sk-bench";

fn findings(trial: usize) -> Vec<Finding> {
    (0..FINDINGS)
        .map(|i| Finding {
            rank: i as u32 + 1,
            body: format!(
                "Trial {trial}, finding {i}: the loop over the ledger rows skips row {i} when it is negative."
            ),
            file: Some(format!("src/ledger_{i}.py")),
            line: Some(10 + i as i64),
            severity: None,
        })
        .collect()
}

fn truth(trial: usize) -> Vec<TruthItem> {
    (0..ITEMS)
        .map(|i| TruthItem {
            id: format!("b{i}"),
            text: format!("Trial {trial}: negative ledger row {i} is skipped by the import loop."),
            file: None,
            line: None,
        })
        .collect()
}

async fn run() {
    let faults = Faults {
        rate_limit: Some(RateLimit { per_second: RATE, burst: BURST }),
        rate_limited_fraction: STORM,
        rate_limited_retry_after_ms: STORM_RETRY_AFTER_MS,
        seed: 2024,
        delay_ms: LATENCY_MS,
        ..Faults::default()
    };
    let server = ScriptedServer::start(ScriptedConfig { expected_api_key: Some(KEY.into()), faults })
        .await
        .expect("the scripted server starts");
    let endpoint = Endpoint {
        provider: "scripted".into(),
        base_url: server.base_url(),
        api_kind: ApiKind::OpenAiChat,
        api_key: Some(KEY.into()),
    };
    // The defaults, as `lightsout run` uses them.
    let policy = RateLimitPolicy::default();
    let client = ModelClient::with_rate_limits(Duration::from_secs(60), RetryPolicy::default(), policy.clone());
    let panel = Panel {
        judges: (0..JUDGES)
            .map(|j| Judge {
                model: ModelRef { name: format!("judge-{j}"), provider: "scripted".into() },
                endpoint: endpoint.clone(),
            })
            .collect(),
        vote: VoteRule::Majority,
        client: client.clone(),
        pricing: PricingTable::default(),
        concurrency: 8,
    };

    let expected = TRIALS * FINDINGS * ITEMS * JUDGES;
    let started = Instant::now();
    let outcomes: Vec<_> = stream::iter(0..TRIALS)
        .map(|trial| {
            let panel = &panel;
            async move { panel.judge(&findings(trial), &truth(trial), FINDINGS as u32).await }
        })
        .buffer_unordered(PARALLEL_TRIALS)
        .collect()
        .await;
    let wall = started.elapsed().as_secs_f64();

    let mut judged = 0;
    let mut failed_votes = 0;
    let mut errors = Vec::new();
    for verdicts in outcomes {
        judged += verdicts.votes.len();
        failed_votes += verdicts.votes.iter().filter(|v| v.value == VoteValue::Failed).count();
        errors.extend(verdicts.votes.iter().filter(|v| v.value == VoteValue::Missing).map(|v| v.error.clone()));
    }
    let lost = expected - judged + failed_votes;
    let log = server.requests();
    let served = log.iter().filter(|r| r.status == 200).count();
    let rejected = log.iter().filter(|r| r.status == 429).count();
    let stats = client.stats();
    let stats = stats.first().expect("the provider's stats");
    let throughput = served as f64 / wall;

    println!(
        "judge client: {judged} judgments, rate limit {RATE:.0}/s, {:.0}% 429s: {throughput:.1}/s = {:.1}% of limit, \
         {lost} lost (target ≥ 95%, 0 lost)",
        STORM * 100.0,
        100.0 * throughput / RATE,
    );
    println!(
        "judge client: wall {wall:.2} s; server: {} requests, {served} answered, {rejected} answered 429 ({:.0}%)",
        log.len(),
        100.0 * rejected as f64 / log.len() as f64,
    );
    println!(
        "judge client: client: {} attempts, {} retries, {} rate-limited; limit {} (initial {}, lowest {}, max {}), \
         {} decreases, {} increases; {LATENCY_MS} ms per request, storm retry-after {STORM_RETRY_AFTER_MS} ms, \
         up to {} calls asked at once",
        stats.attempts,
        stats.retries,
        stats.rate_limited,
        stats.limit,
        policy.initial_limit,
        stats.lowest_limit,
        policy.max_limit,
        stats.decreases,
        stats.increases,
        PARALLEL_TRIALS * 8,
    );
    assert!(errors.is_empty(), "judgings failed: {errors:?}");
    assert_eq!(lost, 0, "no judgment may be lost");
    assert_eq!(served, expected, "one answer per judgment");
    assert_eq!(stats.rate_limited as usize, rejected);
    server.shutdown().await;
}

fn main() {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime").block_on(run());
}
