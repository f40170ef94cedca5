//! The judge panel and the model client against a rate-limiting scripted server: no judgment is
//! lost to 429s, the per-provider limit adapts, usage is counted once, and the server's rate
//! limiting itself (token bucket, seeded random 429s) answers as documented.

use std::time::Duration;

use lightsout_api::{ApiKind, ModelRef, VoteRule};
use lightsout_core::dataset::TruthItem;
use lightsout_core::findings::Finding;
use lightsout_core::judge::{Judge, Panel, TrialVerdicts, VoteValue};
use lightsout_model::pricing::PricingTable;
use lightsout_model::{CallError, ChatRequest, Endpoint, ModelClient, ProviderStats, RateLimitPolicy, RetryPolicy};
use lightsout_scripted::{Faults, RateLimit, ScriptedConfig, ScriptedServer};

const KEY: &str = "sk-judge";

async fn start_server(faults: Faults) -> ScriptedServer {
    let config = ScriptedConfig { expected_api_key: Some(KEY.into()), faults };
    ScriptedServer::start(config).await.expect("the scripted server starts")
}

fn endpoint(server: &ScriptedServer, provider: &str, api_kind: ApiKind) -> Endpoint {
    Endpoint { provider: provider.into(), base_url: server.base_url(), api_kind, api_key: Some(KEY.into()) }
}

fn new_client(retry_attempts: u32, policy: RateLimitPolicy) -> ModelClient {
    let retry = RetryPolicy {
        attempts: retry_attempts,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(10),
    };
    ModelClient::with_rate_limits(Duration::from_secs(30), retry, policy)
}

/// Three judges at two providers of one server: two on OpenAI Chat, one on Anthropic.
fn panel(server: &ScriptedServer, client: &ModelClient) -> Panel {
    let judge = |name: &str, provider: &str, kind| Judge {
        model: ModelRef { name: name.into(), provider: provider.into() },
        endpoint: endpoint(server, provider, kind),
    };
    Panel {
        judges: vec![
            judge("judge-gpt-a", "openai", ApiKind::OpenAiChat),
            judge("judge-gpt-b", "openai", ApiKind::OpenAiChat),
            judge("judge-claude", "anthropic", ApiKind::Anthropic),
        ],
        vote: VoteRule::Majority,
        client: client.clone(),
        pricing: PricingTable::default(),
        concurrency: 16,
    }
}

const FINDINGS: usize = 4;
const TRUTH: usize = 3;
const JUDGMENTS: usize = FINDINGS * TRUTH * 3;

fn findings() -> Vec<Finding> {
    let bodies = [
        "The cache key omits the tenant id, so two tenants read each other's cached invoices.",
        "parse_amount drops the minus sign of amounts written in parentheses, importing debits as credits.",
        "The retry loop never sleeps between attempts and spins on a closed connection.",
        "An off-by-one in the pagination skips the last row of every page.",
    ];
    bodies
        .iter()
        .enumerate()
        .map(|(i, body)| Finding {
            rank: i as u32 + 1,
            body: (*body).into(),
            file: Some(format!("src/module{i}.rs")),
            line: Some(10 * i as i64 + 3),
            severity: None,
        })
        .collect()
}

fn truth() -> Vec<TruthItem> {
    let texts = [
        "Amounts in parentheses are imported with the wrong sign: the minus sign is dropped.",
        "The pagination is off by one and skips the last row of every page.",
        "Cached invoices are shared across tenants because the cache key has no tenant id.",
    ];
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| TruthItem { id: format!("b{i}"), text: (*text).into(), file: None, line: None })
        .collect()
}

fn total(stats: &[ProviderStats], field: impl Fn(&ProviderStats) -> u64) -> u64 {
    stats.iter().map(field).sum()
}

/// Every (finding, item, judge) has a valid vote, each from one successful call.
fn assert_complete(verdicts: &TrialVerdicts) {
    assert_eq!(verdicts.votes.len(), JUDGMENTS, "every judgment arrives");
    assert!(
        verdicts.votes.iter().all(|v| matches!(v.value, VoteValue::Yes | VoteValue::No) && v.attempts == 1),
        "no judgment is lost: {:?}",
        verdicts.votes
    );
    assert!(verdicts.is_complete());
    assert_eq!(verdicts.calls as usize, JUDGMENTS);
    assert!(verdicts.decisions.iter().all(|d| d.yes + d.no == 3 && d.failed == 0));
}

#[tokio::test]
async fn panel_loses_no_judgment_in_a_429_storm_and_the_limit_adapts() {
    // The same judgments on a server that never rate-limits, for the expected verdicts and usage.
    let calm = start_server(Faults::default()).await;
    let baseline = panel(&calm, &new_client(2, RateLimitPolicy::default())).judge(&findings(), &truth(), 5).await;
    assert_complete(&baseline);
    calm.shutdown().await;

    // 30% of requests answered 429 at random, and a rate limit of 25/s with a burst of 2 that
    // a panel asking 16 at a time overruns many times over.
    let storm = Faults {
        rate_limit: Some(RateLimit { per_second: 25.0, burst: 2 }),
        rate_limited_fraction: 0.3,
        seed: 7,
        ..Faults::default()
    };
    let server = start_server(storm).await;
    // Windows of 8 answers, at this test's scale.
    let policy = RateLimitPolicy { initial_limit: 8, max_limit: 32, window_answers: 8, ..RateLimitPolicy::default() };
    // Only 2 attempts for other errors: every 429 retry comes from the separate budget.
    let client = new_client(2, policy);
    let panel = panel(&server, &client);
    let verdicts = panel.judge(&findings(), &truth(), 5).await;
    assert_complete(&verdicts);
    assert_eq!(verdicts.votes, baseline.votes, "the same votes as without rate limiting");
    assert_eq!(verdicts.decisions, baseline.decisions);

    let log = server.requests();
    let served = log.iter().filter(|r| r.status == 200).count();
    let rejected = log.iter().filter(|r| r.status == 429).count();
    assert_eq!(served, JUDGMENTS, "one successful answer per judgment");
    assert_eq!(served + rejected, log.len(), "nothing but answers and 429s");
    assert!(rejected >= 5, "the storm and the rate limit answered 429s ({rejected})");

    let stats = client.stats();
    assert_eq!(stats.len(), 2, "one limiter per provider endpoint: {stats:#?}");
    let by_provider = |name: &str| stats.iter().find(|s| s.provider == name).expect("stats for the provider");
    let (openai, anthropic) = (by_provider("openai"), by_provider("anthropic"));
    assert_eq!((openai.api_kind, openai.calls, openai.succeeded), (ApiKind::OpenAiChat, 24, 24));
    assert_eq!((anthropic.api_kind, anthropic.calls, anthropic.succeeded), (ApiKind::Anthropic, 12, 12));
    assert_eq!(total(&stats, |s| s.failed), 0);
    assert_eq!(total(&stats, |s| s.rate_limited), rejected as u64, "the client saw every 429");
    assert_eq!(total(&stats, |s| s.attempts), log.len() as u64, "and every request");
    assert_eq!(total(&stats, |s| s.retries), rejected as u64, "each 429 was retried");
    assert!(stats.iter().all(|s| s.in_flight == 0 && s.waiting == 0));
    // The overload shrank the limit (16 asked at once, 2 tokens: the first window is mostly 429s).
    assert!(openai.decreases >= 1 && openai.lowest_limit < 8, "{openai:#?}");

    // Usage: each judgment's one answer, counted once — in the verdicts and in the client.
    assert_eq!(openai.usage + anthropic.usage, verdicts.usage);
    // Which request hits the simulated prompt cache depends on arrival order; the rest may not.
    assert_eq!(verdicts.usage.input_tokens, baseline.usage.input_tokens);
    assert_eq!(verdicts.usage.output_tokens, baseline.usage.output_tokens);
    assert_eq!(verdicts.usage.reasoning_tokens, baseline.usage.reasoning_tokens);

    // The storm is over: the limit grows back, +1 per `limit` successes, and nothing is lost.
    // (The storm's last window, still open, may yet close as overloaded: at most one decrease.)
    server.set_faults(Faults::default());
    let before = client.stats();
    for _ in 0..3 {
        assert_complete(&panel.judge(&findings(), &truth(), 5).await);
    }
    let after = client.stats();
    for (before, after) in before.iter().zip(&after) {
        assert_eq!(after.rate_limited, before.rate_limited, "no 429 without the storm");
        assert!(after.decreases <= before.decreases + 1);
        assert!(after.increases > before.increases, "{} grew: {before:#?} → {after:#?}", after.provider);
        assert!(after.limit > before.limit, "{before:#?} → {after:#?}");
    }
    server.shutdown().await;
}

fn judge_request() -> ChatRequest {
    ChatRequest {
        model: "judge-gpt-a".into(),
        system: Some("You are a code review judge.".into()),
        user: "<ground_truth>\nx\n</ground_truth>\n\n<finding>\ny\n</finding>".into(),
        reasoning_effort: None,
        max_output_tokens: Some(64),
    }
}

#[tokio::test]
async fn rate_limited_retries_have_their_own_budget_and_client_errors_none() {
    // Every request is answered 429 (retry-after: 0): the call gives up after its 429 budget
    // of 5, not after the 2 attempts of the ordinary budget.
    let server = start_server(Faults { status_every_nth: Some((429, 1)), ..Faults::default() }).await;
    let policy = RateLimitPolicy { rate_limited_attempts: 5, ..RateLimitPolicy::default() };
    let client = new_client(2, policy.clone());
    let openai = endpoint(&server, "openai", ApiKind::OpenAiChat);
    let error = client.complete(&openai, &judge_request()).await.expect_err("always rate-limited");
    assert_eq!(error.status(), Some(429));
    assert_eq!(server.requests().len(), 5);
    let stats = &client.stats()[0];
    assert_eq!((stats.calls, stats.failed, stats.attempts, stats.retries, stats.rate_limited), (1, 1, 5, 4, 5));
    assert_eq!(stats.usage, Default::default(), "failed attempts carry no usage");

    // A server error uses the ordinary budget: 2 attempts.
    server.set_faults(Faults { status_every_nth: Some((503, 1)), ..Faults::default() });
    let error = client.complete(&openai, &judge_request()).await.expect_err("always failing");
    assert_eq!(error.status(), Some(503));
    assert_eq!(server.requests().len(), 7);

    // A client error is returned at once: a wrong key gets one 401.
    server.set_faults(Faults::default());
    let wrong_key = Endpoint { api_key: Some("sk-wrong".into()), ..openai.clone() };
    let error = client.complete(&wrong_key, &judge_request()).await.expect_err("unauthorised");
    assert!(matches!(error, CallError::Status { status: 401, .. }), "{error}");
    assert!(!error.is_retryable());
    assert_eq!(server.requests().len(), 8);

    server.shutdown().await;

    // A success after a 429 reports both attempts and carries the one answer's usage: every
    // second request is answered 429, so the second call takes two attempts.
    let server = start_server(Faults { status_every_nth: Some((429, 2)), ..Faults::default() }).await;
    let openai = endpoint(&server, "openai", ApiKind::OpenAiChat);
    let client = new_client(2, policy);
    let first = client.complete(&openai, &judge_request()).await.expect("answered");
    let second = client.complete(&openai, &judge_request()).await.expect("answered after a 429");
    assert_eq!((first.attempts, second.attempts), (1, 2));
    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 429, 200]);
    let stats = &client.stats()[0];
    assert_eq!((stats.succeeded, stats.attempts, stats.retries, stats.rate_limited), (2, 3, 1, 1));
    assert!(second.usage.total_tokens() > 0);
    assert_eq!(stats.usage, first.usage + second.usage, "only the answers carry usage");
    server.shutdown().await;
}

async fn post_chat(server: &ScriptedServer) -> reqwest::Response {
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
    let url = format!("{}/chat/completions", server.base_url());
    reqwest::Client::new().post(url).bearer_auth(KEY).json(&body).send().await.expect("the server answers")
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

#[tokio::test]
async fn scripted_rate_limit_is_a_token_bucket_answering_429_with_retry_after() {
    // A burst of 2, then one token per 100 s: the third request is over the limit.
    let server =
        start_server(Faults { rate_limit: Some(RateLimit { per_second: 0.01, burst: 2 }), ..Faults::default() }).await;
    assert_eq!(post_chat(&server).await.status(), 200);
    assert_eq!(post_chat(&server).await.status(), 200);
    let limited = post_chat(&server).await;
    assert_eq!(limited.status(), 429);
    // About 100 s until the next token, in whole seconds and in milliseconds, rounded up.
    let seconds: u64 = header(&limited, "retry-after").parse().expect("retry-after in seconds");
    let millis: u64 = header(&limited, "retry-after-ms").parse().expect("retry-after-ms");
    assert!((99..=100).contains(&seconds) && (99_000..=100_000).contains(&millis), "{seconds} s, {millis} ms");
    assert_eq!(seconds, millis.div_ceil(1000));
    let error: serde_json::Value = limited.json().await.expect("an OpenAI error body");
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    // Replacing the faults refills the bucket.
    server.set_faults(Faults { rate_limit: Some(RateLimit { per_second: 0.01, burst: 1 }), ..Faults::default() });
    assert_eq!(post_chat(&server).await.status(), 200);
    assert_eq!(post_chat(&server).await.status(), 429);
    server.shutdown().await;
}

#[tokio::test]
async fn scripted_random_429s_follow_the_seed_and_the_fraction() {
    let storm =
        |seed| Faults { rate_limited_fraction: 0.3, rate_limited_retry_after_ms: 1500, seed, ..Faults::default() };
    let mut runs = Vec::new();
    for seed in [11, 11, 12] {
        let server = start_server(storm(seed)).await;
        let mut statuses = Vec::new();
        for _ in 0..200 {
            let response = post_chat(&server).await;
            if response.status() == 429 {
                assert_eq!(
                    (header(&response, "retry-after"), header(&response, "retry-after-ms")),
                    ("2".into(), "1500".into())
                );
            }
            statuses.push(response.status().as_u16());
        }
        server.shutdown().await;
        let rejected = statuses.iter().filter(|s| **s == 429).count();
        assert!((40..=80).contains(&rejected), "about 30% of 200: {rejected}");
        assert_eq!(statuses.iter().filter(|s| **s == 200).count() + rejected, 200);
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1], "the same seed gives the same answers");
    assert_ne!(runs[0], runs[2], "another seed, others");
}
