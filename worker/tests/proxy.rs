//! The metering proxy between a client and a real (scripted) provider on loopback: credentials
//! are swapped, streams pass through, usage is metered from every API, budgets are enforced,
//! and every exchange is recorded.

use lightsout_api::ApiKind;
use lightsout_model::exchange::ExchangeBody;
use std::time::Duration;

use lightsout_model::pricing::PricingTable;
use lightsout_model::{Endpoint, DEFAULT_STALL_TIMEOUT};
use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use lightsout_worker::proxy::{MeteringProxy, ProxyConfig};
use serde_json::{json, Value};

const REAL_KEY: &str = "sk-real-provider-key";
const DUMMY_KEY: &str = "lightsout-trial-dummy";

async fn setup(
    kind: ApiKind,
    max_tokens: Option<u64>,
    faults: Faults,
) -> (ScriptedServer, MeteringProxy, tempfile::TempDir) {
    setup_with_stall_timeout(kind, max_tokens, faults, DEFAULT_STALL_TIMEOUT).await
}

async fn setup_with_stall_timeout(
    kind: ApiKind,
    max_tokens: Option<u64>,
    faults: Faults,
    stall_timeout: Duration,
) -> (ScriptedServer, MeteringProxy, tempfile::TempDir) {
    let server =
        ScriptedServer::start(ScriptedConfig { expected_api_key: Some(REAL_KEY.into()), faults }).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let proxy = MeteringProxy::start(ProxyConfig {
        upstream: Endpoint {
            provider: "p".into(),
            base_url: server.base_url(),
            api_kind: kind,
            api_key: Some(REAL_KEY.into()),
        },
        agent_key: DUMMY_KEY.into(),
        pricing: PricingTable::default(),
        max_tokens,
        max_usd: None,
        log_path: Some(dir.path().join("exchanges.jsonl")),
        unix_socket: None,
        stall_timeout,
    })
    .await
    .unwrap();
    (server, proxy, dir)
}

fn prompt() -> &'static str {
    "Review this change.\nTitle: Accept bank-export amount formats in CSV import\n"
}

async fn post(url: &str, kind: ApiKind, key: &str, body: Value) -> reqwest::Response {
    let client = reqwest::Client::new();
    let request = client.post(url).json(&body);
    let request = match kind {
        ApiKind::Anthropic => request.header("x-api-key", key).header("anthropic-version", "2023-06-01"),
        _ => request.bearer_auth(key),
    };
    request.send().await.unwrap()
}

/// Concatenates the text of a streamed answer of any API.
fn streamed_text(sse: &str) -> String {
    let mut text = String::new();
    for line in sse.lines() {
        let Some(data) = line.strip_prefix("data: ") else { continue };
        let Ok(event) = serde_json::from_str::<Value>(data) else { continue };
        for pointer in ["/choices/0/delta/content", "/delta/text"] {
            if let Some(piece) = event.pointer(pointer).and_then(Value::as_str) {
                text.push_str(piece);
            }
        }
        if event.get("type").and_then(Value::as_str) == Some("response.output_text.delta") {
            text.push_str(event.get("delta").and_then(Value::as_str).unwrap_or_default());
        }
    }
    text
}

#[tokio::test]
async fn swaps_the_dummy_key_for_the_real_one_and_meters_a_plain_call() {
    let (server, proxy, dir) = setup(ApiKind::OpenAiChat, None, Faults::default()).await;
    let body = json!({"model": "gpt-5-mini", "messages": [{"role": "user", "content": prompt()}]});
    let answer = post(&format!("{}/chat/completions", proxy.base_url()), ApiKind::OpenAiChat, DUMMY_KEY, body).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["x-lightsout-scripted"], "1", "the scripted server's mark reaches the agent too");
    assert_eq!(proxy.totals().scripted_answers, 1, "and the proxy counts the answer as scripted");
    let answer: Value = answer.json().await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].api_key.as_deref(), Some(REAL_KEY), "the provider sees the real key");

    let totals = proxy.totals();
    assert_eq!(totals.calls, 1);
    assert_eq!(totals.usage.input_tokens, answer["usage"]["prompt_tokens"].as_u64().unwrap());
    assert_eq!(totals.usage.output_tokens, answer["usage"]["completion_tokens"].as_u64().unwrap());
    assert!(totals.cost_usd > 0.0 && totals.known_cost().is_some());

    let exchanges = proxy.exchanges();
    assert_eq!(exchanges[0].model.as_deref(), Some("gpt-5-mini"));
    assert!(matches!(&exchanges[0].response, ExchangeBody::Json(v) if v["choices"].is_array()));
    let logged = std::fs::read_to_string(dir.path().join("exchanges.jsonl")).unwrap();
    assert_eq!(logged.lines().count(), 1);
    assert!(!logged.contains(REAL_KEY) && !logged.contains(DUMMY_KEY), "credentials are never recorded");
}

/// A provider that sends nothing, not even headers, for the proxy's stall timeout is taken for a
/// hang: the agent gets a 502 and the exchange is the provider's failure. The scripted server
/// holds its answer for 5 s, which a proxy on the default stall timeout (300 s) would wait out.
#[tokio::test]
async fn a_provider_silent_for_the_configured_stall_timeout_fails_the_call() {
    let faults = Faults { delay_ms: 5_000, ..Faults::default() };
    let (_server, proxy, _dir) =
        setup_with_stall_timeout(ApiKind::OpenAiChat, None, faults, Duration::from_secs(1)).await;
    let body = json!({"model": "gpt-5-mini", "messages": [{"role": "user", "content": prompt()}]});
    let answer = post(&format!("{}/chat/completions", proxy.base_url()), ApiKind::OpenAiChat, DUMMY_KEY, body).await;
    assert_eq!(answer.status(), 502);
    let error: Value = answer.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("could not be reached"), "{error}");
    let totals = proxy.totals();
    assert_eq!((totals.calls, totals.provider_failures), (1, 1), "{totals:?}");
    assert_eq!(totals.last_call_failed.as_deref(), Some("HTTP 502"));
}

#[tokio::test]
async fn refuses_calls_without_the_trials_key() {
    let (server, proxy, _dir) = setup(ApiKind::OpenAiChat, None, Faults::default()).await;
    let body = json!({"model": "gpt-5-mini", "messages": []});
    let answer = post(&format!("{}/chat/completions", proxy.base_url()), ApiKind::OpenAiChat, REAL_KEY, body).await;
    assert_eq!(answer.status(), 401);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn streams_pass_through_and_are_metered_for_every_api() {
    for kind in [ApiKind::OpenAiChat, ApiKind::OpenAiResponses, ApiKind::Anthropic] {
        let (_server, proxy, _dir) = setup(kind, None, Faults::default()).await;
        let (path, body) = match kind {
            ApiKind::OpenAiChat => (
                "/chat/completions",
                json!({"model": "gpt-5", "stream": true, "messages": [{"role": "user", "content": prompt()}]}),
            ),
            ApiKind::OpenAiResponses => ("/responses", json!({"model": "gpt-5", "stream": true, "input": prompt()})),
            ApiKind::Anthropic => (
                "/messages",
                json!({"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 2000, "messages": [{"role": "user", "content": prompt()}]}),
            ),
        };
        let answer = post(&format!("{}{path}", proxy.base_url()), kind, DUMMY_KEY, body).await;
        assert_eq!(answer.status(), 200, "{kind:?}");
        assert!(answer.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        let sse = answer.text().await.unwrap();
        let text = streamed_text(&sse);
        assert!(text.contains("Review") || text.contains("1."), "{kind:?}: {text}");
        // The stream has ended for the client; the proxy records it as it closes.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let totals = proxy.totals();
        assert_eq!(totals.calls, 1, "{kind:?}");
        assert!(totals.usage.input_tokens > 0 && totals.usage.output_tokens > 0, "{kind:?}: {totals:?}");
        let exchange = &proxy.exchanges()[0];
        assert!(exchange.stream);
        assert!(
            matches!(&exchange.response, ExchangeBody::Sse(raw) if raw == &sse),
            "{kind:?}: recorded exactly as received"
        );
        assert!(exchange.first_byte_ms.is_some());
    }
}

#[tokio::test]
async fn chat_streams_are_asked_for_usage_even_when_the_agent_does_not() {
    let (server, proxy, _dir) = setup(ApiKind::OpenAiChat, None, Faults::default()).await;
    let body = json!({"model": "gpt-5", "stream": true, "messages": [{"role": "user", "content": prompt()}]});
    let sse = post(&format!("{}/chat/completions", proxy.base_url()), ApiKind::OpenAiChat, DUMMY_KEY, body)
        .await
        .text()
        .await
        .unwrap();
    assert!(sse.contains("\"usage\""), "{sse}");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(proxy.totals().usage.output_tokens > 0);
    assert_eq!(server.requests().len(), 1);
    // The agent's own request is what is recorded.
    assert!(proxy.exchanges()[0].request.get("stream_options").is_none());
}

#[tokio::test]
async fn a_spent_budget_refuses_further_calls_with_a_clear_error() {
    let (server, proxy, _dir) = setup(ApiKind::Anthropic, Some(10), Faults::default()).await;
    let url = format!("{}/messages", proxy.base_url());
    let body =
        json!({"model": "claude-sonnet-4-5", "max_tokens": 1000, "messages": [{"role": "user", "content": prompt()}]});
    assert_eq!(post(&url, ApiKind::Anthropic, DUMMY_KEY, body.clone()).await.status(), 200);
    let refused = post(&url, ApiKind::Anthropic, DUMMY_KEY, body).await;
    assert_eq!(refused.status(), 403);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["type"], "budget_exceeded");
    assert!(error["error"]["message"].as_str().unwrap().contains("token budget is spent"));
    assert_eq!(server.requests().len(), 1, "the refused call never reached the provider");
    let totals = proxy.totals();
    assert_eq!((totals.calls, totals.refused), (1, 1));
    assert!(proxy.budget_exceeded());
}

#[tokio::test]
async fn provider_errors_pass_through_and_unknown_models_have_no_price() {
    let (_server, proxy, _dir) =
        setup(ApiKind::OpenAiChat, None, Faults { status_every_nth: Some((503, 2)), ..Faults::default() }).await;
    let url = format!("{}/chat/completions", proxy.base_url());
    let body = json!({"model": "no-such-model", "messages": [{"role": "user", "content": prompt()}]});
    assert_eq!(post(&url, ApiKind::OpenAiChat, DUMMY_KEY, body.clone()).await.status(), 200);
    assert_eq!(post(&url, ApiKind::OpenAiChat, DUMMY_KEY, body).await.status(), 503);
    let totals = proxy.totals();
    assert_eq!(totals.calls, 2, "the failed call is recorded too");
    assert_eq!(totals.unpriced_calls, 1, "the answered call of an unknown model has no price");
    assert_eq!(totals.known_cost(), None);
    let statuses: Vec<u16> = proxy.exchanges().iter().map(|e| e.status).collect();
    assert_eq!(statuses, vec![200, 503]);
}

/// The proxy knows whether the provider was failing when the agent stopped: the last call it
/// forwarded was answered 429/5xx, or its stream broke off (a healthy answer clears it).
#[tokio::test]
async fn the_proxy_records_whether_the_provider_was_failing_last() {
    let (_server, proxy, _dir) =
        setup(ApiKind::OpenAiChat, None, Faults { status_every_nth: Some((503, 2)), ..Faults::default() }).await;
    let body = json!({"model": "gpt-5-mini", "messages": [{"role": "user", "content": prompt()}]});
    let url = format!("{}/chat/completions", proxy.base_url());
    assert_eq!(post(&url, ApiKind::OpenAiChat, DUMMY_KEY, body.clone()).await.status(), 200);
    assert_eq!(proxy.totals().last_call_failed, None);
    assert_eq!(post(&url, ApiKind::OpenAiChat, DUMMY_KEY, body.clone()).await.status(), 503);
    let totals = proxy.totals();
    assert_eq!((totals.last_call_failed.as_deref(), totals.provider_failures), (Some("HTTP 503"), 1));
    assert_eq!(post(&url, ApiKind::OpenAiChat, DUMMY_KEY, body).await.status(), 200);
    let totals = proxy.totals();
    assert_eq!((totals.last_call_failed, totals.provider_failures, totals.calls), (None, 1, 3));
}

/// A stream the provider cuts short is the provider's failure too.
#[tokio::test]
async fn a_stream_the_provider_cuts_short_is_its_failure() {
    use lightsout_scripted::chaos::{ChaosConfig, ChaosServer, FaultRates};
    let server =
        ScriptedServer::start(ScriptedConfig { expected_api_key: Some(REAL_KEY.into()), faults: Faults::default() })
            .await
            .unwrap();
    let chaos = ChaosServer::start(ChaosConfig {
        upstream: server.base_url(),
        seed: 1,
        rates: FaultRates { truncated_sse: 1.0, ..FaultRates::NONE },
        hang_for: std::time::Duration::from_secs(1),
    })
    .await
    .unwrap();
    let proxy = MeteringProxy::start(ProxyConfig {
        upstream: Endpoint {
            provider: "p".into(),
            base_url: chaos.base_url(),
            api_kind: ApiKind::OpenAiChat,
            api_key: Some(REAL_KEY.into()),
        },
        agent_key: DUMMY_KEY.into(),
        pricing: PricingTable::default(),
        max_tokens: None,
        max_usd: None,
        log_path: None,
        unix_socket: None,
        stall_timeout: DEFAULT_STALL_TIMEOUT,
    })
    .await
    .unwrap();
    let body = json!({"model": "gpt-5-mini", "stream": true, "messages": [{"role": "user", "content": prompt()}]});
    let answer = post(&format!("{}/chat/completions", proxy.base_url()), ApiKind::OpenAiChat, DUMMY_KEY, body).await;
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.is_err(), "the agent sees the stream break off");
    // The proxy records the exchange as the stream ends; give it a moment to finish.
    for _ in 0..100 {
        if proxy.totals().calls == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let totals = proxy.totals();
    assert_eq!(totals.provider_failures, 1, "{totals:?}");
    assert!(totals.last_call_failed.as_deref().is_some_and(|f| f.starts_with("the stream broke off")), "{totals:?}");
}
