//! Benchmark: what the metering proxy costs an agent's model calls on loopback (issue 3).
//!
//! Targets: added latency against a direct connection ≤ 0.5 ms at p50 and ≤ 2 ms at p99; the
//! first streamed byte is not held back; ≥ 5,000 proxied requests/s on 2 cores.
//!
//! A minimal upstream (axum, on 127.0.0.1) answers `POST /v1/chat/completions` with a fixed small
//! chat completion, or — when the request asks for a stream — with a first SSE chunk at once, a
//! pause of [`STREAM_PAUSE`], then the rest and `data: [DONE]`; a "paced" stream sends
//! [`PACED_CHUNKS`] small chunks [`PACED_GAP`] apart, as a model streams tokens. The same
//! keep-alive client calls it directly and through a `MeteringProxy` (with its exchange log on),
//! alternating.
//!
//! Client, proxy and upstream each get their own tokio runtime (standing in for three
//! processes), all sharing this machine's cores. Per-runtime CPU time comes from
//! `/proc/self/task/<tid>/stat`, and the whole machine's from `/proc/stat`, so that load from
//! other processes shows.
//!
//! `cargo bench -p lightsout-worker --bench proxy`. Knobs (environment): `BENCH_LATENCY_N`
//! (2000), `BENCH_STREAM_N` (100), `BENCH_CONCURRENCY` (64), `BENCH_SECS` (5), `BENCH_THREADS`
//! (worker threads per runtime, default: the number of cores), `BENCH_UPSTREAM_NODELAY` (1; 0
//! leaves Nagle's algorithm on in the upstream, as `axum::serve` does by default).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use axum::Router;
use futures::StreamExt;
use lightsout_api::ApiKind;
use lightsout_model::pricing::PricingTable;
use lightsout_model::Endpoint;
use lightsout_worker::proxy::{MeteringProxy, ProxyConfig};
use serde_json::json;

const REAL_KEY: &str = "sk-bench-real-provider-key";
const AGENT_KEY: &str = "lightsout-bench-dummy-key";
/// How long the streaming upstream waits between its first chunk and the rest.
const STREAM_PAUSE: Duration = Duration::from_millis(50);

/// The paced stream: this many content chunks after the first, this far apart (token output).
const PACED_CHUNKS: usize = 20;
const PACED_GAP: Duration = Duration::from_millis(2);

const COMPLETION: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1767225600,"model":"gpt-5-mini","choices":[{"index":0,"message":{"role":"assistant","content":"1. csv_import.py:42 parse_bank_amount drops the sign of parenthesised amounts."},"finish_reason":"stop"}],"usage":{"prompt_tokens":612,"completion_tokens":24,"total_tokens":636}}"#;
const FIRST_CHUNK: &str = "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-5-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"1.\"},\"finish_reason\":null}]}\n\n";
const REST_CHUNKS: &str = concat!(
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-5-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" csv_import.py:42 parse_bank_amount\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-5-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" drops the sign of parenthesised amounts.\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-5-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-5-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":612,\"completion_tokens\":24,\"total_tokens\":636}}\n\n",
    "data: [DONE]\n\n",
);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// The upstream.

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn upstream(headers: HeaderMap, body: Bytes) -> Response {
    let expected = format!("Bearer {REAL_KEY}");
    if headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()) != Some(expected.as_bytes()) {
        return Response::builder().status(StatusCode::UNAUTHORIZED).body(Body::from("bad key")).unwrap();
    }
    // Serialised by serde_json (the client here, or the proxy when it amends a stream request):
    // compact, so this is exact.
    if contains(&body, b"\"stream\":true") && contains(&body, b"\"paced\"") {
        let first = futures::stream::once(async { Ok::<_, Infallible>(Bytes::from_static(FIRST_CHUNK.as_bytes())) });
        let paced = futures::stream::unfold(0usize, |k| async move {
            if k > PACED_CHUNKS {
                return None;
            }
            tokio::time::sleep(PACED_GAP).await;
            let chunk = if k < PACED_CHUNKS {
                Bytes::from(format!(
                    "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"gpt-5-mini\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" token{k}\"}},\"finish_reason\":null}}]}}\n\n"
                ))
            } else {
                Bytes::from_static(REST_CHUNKS.as_bytes())
            };
            Some((Ok::<_, Infallible>(chunk), k + 1))
        });
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(first.chain(paced)))
            .unwrap();
    }
    if contains(&body, b"\"stream\":true") {
        let first = futures::stream::once(async { Ok::<_, Infallible>(Bytes::from_static(FIRST_CHUNK.as_bytes())) });
        let rest = futures::stream::once(async {
            tokio::time::sleep(STREAM_PAUSE).await;
            Ok::<_, Infallible>(Bytes::from_static(REST_CHUNKS.as_bytes()))
        });
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(first.chain(rest)))
            .unwrap();
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(Bytes::from_static(COMPLETION.as_bytes())))
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Runtimes whose threads' CPU time can be read.

struct Rt {
    rt: tokio::runtime::Runtime,
    tids: Arc<Mutex<Vec<i32>>>,
}

impl Rt {
    fn new(name: &str, workers: usize) -> Rt {
        let tids = Arc::new(Mutex::new(Vec::new()));
        let record = tids.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name(name)
            .enable_all()
            // SAFETY: gettid has no preconditions.
            .on_thread_start(move || record.lock().unwrap().push(unsafe { libc::gettid() }))
            .build()
            .expect("a tokio runtime");
        Rt { rt, tids }
    }

    /// CPU seconds (user + system) used so far by this runtime's live threads.
    fn cpu_secs(&self) -> f64 {
        let hz = clock_ticks_per_sec();
        let ticks: u64 = self
            .tids
            .lock()
            .unwrap()
            .iter()
            .filter_map(|tid| std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok())
            .filter_map(|stat| {
                let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                // After the command: state is field 3, utime field 14, stime field 15.
                Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
            })
            .sum();
        ticks as f64 / hz
    }
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// Machine-wide CPU seconds so far: (busy, of which stolen by the hypervisor).
fn machine_cpu_secs() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> =
        stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal …
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy as f64 / clock_ticks_per_sec(), at(7) as f64 / clock_ticks_per_sec())
}

/// CPU seconds this process has used so far.
fn own_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let at = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    (at(11) + at(12)) as f64 / clock_ticks_per_sec()
}

// ---------------------------------------------------------------------------------------------
// Statistics.

struct Stats {
    p50: Duration,
    p99: Duration,
    mean: Duration,
    max: Duration,
}

fn stats(samples: &[Duration]) -> Stats {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    Stats { p50: at(0.50), p99: at(0.99), mean, max: *sorted.last().unwrap() }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn signed_ms(a: Duration, b: Duration) -> f64 {
    (a.as_secs_f64() - b.as_secs_f64()) * 1e3
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "MEETS"
    } else {
        "MISSES"
    }
}

/// The waits between streamed events over many calls.
struct Waits {
    stats: Stats,
    count: usize,
    /// Waits of at least the threshold…
    long: usize,
    /// …of which before the third event.
    long_early: usize,
}

/// The waits between events and the first-to-last spans of paced streamed calls.
fn summarise(runs: &[(Vec<Duration>, Duration)], threshold: Duration) -> (Waits, Stats) {
    let all: Vec<Duration> = runs.iter().flat_map(|(waits, _)| waits.iter().copied()).collect();
    let long = all.iter().filter(|w| **w >= threshold).count();
    let long_early = runs.iter().map(|(waits, _)| waits.iter().take(2).filter(|w| **w >= threshold).count()).sum();
    let spans: Vec<Duration> = runs.iter().map(|(_, span)| *span).collect();
    (Waits { stats: stats(&all), count: all.len(), long, long_early }, stats(&spans))
}

// ---------------------------------------------------------------------------------------------
// The client.

#[derive(Clone)]
struct Target {
    url: String,
    key: &'static str,
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Plain,
    Stream,
    /// Streamed, with [`PACED_CHUNKS`] small chunks [`PACED_GAP`] apart.
    Paced,
}

fn request_body(shape: Shape) -> Bytes {
    let change = "diff --git a/pyledger/csv_import.py b/pyledger/csv_import.py\n\
                  @@ -40,7 +40,19 @@ def import_csv(path, ledger):\n\
                  -        amount = Decimal(row[\"amount\"])\n\
                  +        amount = parse_bank_amount(row[\"amount\"])\n";
    let mut prompt = String::from(
        "Review this change.\nTitle: Accept bank-export amount formats in CSV import\n\
         Report each bug you find as `N. file:line description`.\n\n",
    );
    while prompt.len() < 2048 {
        prompt.push_str(change);
    }
    let mut body = json!({
        "model": "gpt-5-mini",
        "messages": [
            {"role": "system", "content": "You are a careful code reviewer."},
            {"role": "user", "content": prompt},
        ],
        "max_completion_tokens": 2048,
    });
    if shape != Shape::Plain {
        body["stream"] = json!(true);
    }
    if shape == Shape::Paced {
        body["metadata"] = json!({"bench": "paced"});
    }
    Bytes::from(serde_json::to_vec(&body).unwrap())
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().pool_idle_timeout(Duration::from_secs(90)).build().unwrap()
}

/// One non-streamed call, read to the end.
async fn call(client: &reqwest::Client, target: &Target, body: &Bytes) -> Duration {
    let started = Instant::now();
    let answer = client
        .post(&target.url)
        .bearer_auth(target.key)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("the call is answered");
    assert_eq!(answer.status(), 200, "{}", target.url);
    let bytes = answer.bytes().await.expect("the answer is read");
    assert!(bytes.len() > 100, "{}", target.url);
    started.elapsed()
}

/// One streamed call: the time to its first body chunk, and to its end.
async fn call_stream(client: &reqwest::Client, target: &Target, body: &Bytes) -> (Duration, Duration) {
    let started = Instant::now();
    let answer = client
        .post(&target.url)
        .bearer_auth(target.key)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("the call is answered");
    assert_eq!(answer.status(), 200, "{}", target.url);
    let mut chunks = answer.bytes_stream();
    let first = chunks.next().await.expect("a first chunk").expect("a readable chunk");
    let first_at = started.elapsed();
    assert!(first.starts_with(b"data: {"), "the first chunk is an SSE event");
    let mut all = first.to_vec();
    while let Some(chunk) = chunks.next().await {
        all.extend_from_slice(&chunk.expect("a readable chunk"));
    }
    assert!(all.ends_with(b"data: [DONE]\n\n"), "the stream is complete");
    (first_at, started.elapsed())
}

/// One paced streamed call: the wait before each SSE event after the first (zero for events
/// that arrived in the same read as the one before), and the time from the first event to the
/// last.
async fn call_paced(client: &reqwest::Client, target: &Target, body: &Bytes) -> (Vec<Duration>, Duration) {
    let answer = client
        .post(&target.url)
        .bearer_auth(target.key)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("the call is answered");
    assert_eq!(answer.status(), 200, "{}", target.url);
    let mut chunks = answer.bytes_stream();
    let (mut events, mut all, mut waits) = (0usize, Vec::new(), Vec::new());
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.expect("a readable chunk");
        let now = Instant::now();
        all.extend_from_slice(&chunk);
        let seen = all.windows(2).filter(|w| w == b"\n\n").count();
        if seen > events {
            first.get_or_insert(now);
            if let Some(previous) = last {
                waits.push(now - previous);
                waits.extend(std::iter::repeat_n(Duration::ZERO, seen - events - 1));
            } else {
                waits.extend(std::iter::repeat_n(Duration::ZERO, seen - 1));
            }
            events = seen;
            last = Some(now);
        }
    }
    assert!(all.ends_with(b"data: [DONE]\n\n"), "the stream is complete");
    (waits, last.unwrap() - first.unwrap())
}

/// Requests per second from `concurrency` tasks calling `target` for `secs`.
async fn throughput(client: &reqwest::Client, target: &Target, body: &Bytes, concurrency: usize, secs: f64) -> f64 {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, target, body) = (client.clone(), target.clone(), body.clone());
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < deadline {
                    call(&client, &target, &body).await;
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut total = 0u64;
    for task in tasks {
        total += task.await.expect("a client task");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------------------------------------

fn main() {
    // Loopback only: no system proxy may be picked up by the metering proxy's own HTTP client.
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        std::env::remove_var(var);
    }
    let bench_started = Instant::now();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = env_usize("BENCH_THREADS", cores);
    let latency_n = env_usize("BENCH_LATENCY_N", 2000);
    let stream_n = env_usize("BENCH_STREAM_N", 100);
    let concurrency = env_usize("BENCH_CONCURRENCY", 64);
    let secs = env_usize("BENCH_SECS", 5) as f64;

    let upstream_rt = Rt::new("upstream", threads);
    let proxy_rt = Rt::new("proxy", threads);
    let client_rt = Rt::new("client", threads);
    let log_dir = tempfile::tempdir().unwrap();

    let upstream_addr = upstream_rt.rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        // As a provider's server would: small writes go out at once. (`BENCH_UPSTREAM_NODELAY=0`
        // leaves Nagle's algorithm on, as `axum::serve` does by default, for comparison.)
        let nodelay = env_usize("BENCH_UPSTREAM_NODELAY", 1) != 0;
        let listener = listener.tap_io(move |tcp| {
            let _ = tcp.set_nodelay(nodelay);
        });
        let app = Router::new().route("/v1/chat/completions", post(upstream));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    });
    let proxy = proxy_rt
        .rt
        .block_on(MeteringProxy::start(ProxyConfig {
            upstream: Endpoint {
                provider: "bench".into(),
                base_url: format!("http://{upstream_addr}/v1"),
                api_kind: ApiKind::OpenAiChat,
                api_key: Some(REAL_KEY.into()),
            },
            agent_key: AGENT_KEY.into(),
            pricing: PricingTable::default(),
            max_tokens: None,
            max_usd: None,
            log_path: Some(log_dir.path().join("exchanges.jsonl")),
            unix_socket: None,
            stall_timeout: lightsout_model::DEFAULT_STALL_TIMEOUT,
        }))
        .expect("the proxy starts");
    assert!(proxy.addr().ip().is_loopback() && upstream_addr.ip().is_loopback());
    let direct = Target { url: format!("http://{upstream_addr}/v1/chat/completions"), key: REAL_KEY };
    let proxied = Target { url: format!("{}/chat/completions", proxy.base_url()), key: AGENT_KEY };
    let body = request_body(Shape::Plain);
    let stream_body = request_body(Shape::Stream);
    let paced_body = request_body(Shape::Paced);

    println!("metering proxy benchmark (issue 3), release build");
    println!(
        "machine: {cores} cores; client, proxy and upstream share them, each on its own tokio runtime with {threads} \
         worker threads"
    );
    println!(
        "upstream: axum on {upstream_addr}, fixed {}-byte chat completion; request body {} bytes (~2 KB prompt); \
         proxy exchange log on",
        COMPLETION.len(),
        body.len()
    );
    println!();

    // --- Latency: sequential calls, one keep-alive client, direct and proxied alternating.
    let (direct_lat, proxied_lat) = client_rt.rt.block_on(async {
        let client = client();
        for _ in 0..300 {
            call(&client, &direct, &body).await;
            call(&client, &proxied, &body).await;
        }
        let (mut d, mut p) = (Vec::with_capacity(latency_n), Vec::with_capacity(latency_n));
        for i in 0..latency_n {
            if i % 2 == 0 {
                d.push(call(&client, &direct, &body).await);
                p.push(call(&client, &proxied, &body).await);
            } else {
                p.push(call(&client, &proxied, &body).await);
                d.push(call(&client, &direct, &body).await);
            }
        }
        (stats(&d), stats(&p))
    });
    let added_p50 = signed_ms(proxied_lat.p50, direct_lat.p50);
    let added_p99 = signed_ms(proxied_lat.p99, direct_lat.p99);
    println!("1. latency: {latency_n} sequential non-streamed calls each way, keep-alive, after 300 warm-up pairs");
    println!("                p50          p99          mean         max");
    for (label, s) in [("   direct  ", &direct_lat), ("   proxied ", &proxied_lat)] {
        println!("{label}  {:<12} {:<12} {:<12} {}", ms(s.p50), ms(s.p99), ms(s.mean), ms(s.max));
    }
    println!(
        "   added by the proxy: p50 {added_p50:+.3} ms (target ≤ 0.5 ms: {}), p99 {added_p99:+.3} ms (target ≤ 2 ms: \
         {}), mean {:+.3} ms",
        verdict(added_p50 <= 0.5),
        verdict(added_p99 <= 2.0),
        signed_ms(proxied_lat.mean, direct_lat.mean)
    );
    println!();

    // --- First byte of a streamed answer.
    let ((direct_first, direct_total), (proxied_first, proxied_total)) = client_rt.rt.block_on(async {
        let client = client();
        for _ in 0..5 {
            call_stream(&client, &direct, &stream_body).await;
            call_stream(&client, &proxied, &stream_body).await;
        }
        let (mut df, mut dt, mut pf, mut pt) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..stream_n {
            let order = if i % 2 == 0 { [&direct, &proxied] } else { [&proxied, &direct] };
            for target in order {
                let (first, total) = call_stream(&client, target, &stream_body).await;
                if std::ptr::eq(target, &direct) {
                    df.push(first);
                    dt.push(total);
                } else {
                    pf.push(first);
                    pt.push(total);
                }
            }
        }
        ((stats(&df), stats(&dt)), (stats(&pf), stats(&pt)))
    });
    let pause_ms = STREAM_PAUSE.as_secs_f64() * 1e3;
    let first_byte_ok = proxied_first.max < STREAM_PAUSE / 2;
    println!(
        "2. first byte: {stream_n} streamed calls each way; the upstream sends its first chunk at once and the rest \
         {pause_ms:.0} ms later"
    );
    println!("                first chunk p50 / p99 / max            whole stream p50 / p99");
    for (label, first, total) in
        [("   direct  ", &direct_first, &direct_total), ("   proxied ", &proxied_first, &proxied_total)]
    {
        println!(
            "{label}  {} / {} / {}      {} / {}",
            ms(first.p50),
            ms(first.p99),
            ms(first.max),
            ms(total.p50),
            ms(total.p99)
        );
    }
    println!(
        "   added to the first chunk: p50 {:+.3} ms, p99 {:+.3} ms; slowest proxied first chunk {} vs the {pause_ms:.0} \
         ms the rest is held upstream — first byte not held back: {}",
        signed_ms(proxied_first.p50, direct_first.p50),
        signed_ms(proxied_first.p99, direct_first.p99),
        ms(proxied_first.max),
        verdict(first_byte_ok)
    );
    println!();

    // --- Token streaming: are small chunks passed on as they come?
    let paced_n = (stream_n / 2).max(10);
    let long_wait = Duration::from_millis(10);
    let (direct_runs, proxied_runs) = client_rt.rt.block_on(async {
        let client = client();
        for _ in 0..3 {
            call_paced(&client, &direct, &paced_body).await;
            call_paced(&client, &proxied, &paced_body).await;
        }
        let (mut direct_runs, mut proxied_runs) = (Vec::new(), Vec::new());
        for i in 0..paced_n {
            let order = if i % 2 == 0 { [&direct, &proxied] } else { [&proxied, &direct] };
            for target in order {
                let run = call_paced(&client, target, &paced_body).await;
                if std::ptr::eq(target, &direct) {
                    direct_runs.push(run)
                } else {
                    proxied_runs.push(run)
                }
            }
        }
        (direct_runs, proxied_runs)
    });
    let (direct_waits, direct_span) = summarise(&direct_runs, long_wait);
    let (proxied_waits, proxied_span) = summarise(&proxied_runs, long_wait);
    let gap_ms = PACED_GAP.as_secs_f64() * 1e3;
    println!(
        "2b. token streaming: {paced_n} calls each way, {PACED_CHUNKS} small chunks {gap_ms:.0} ms apart after the first"
    );
    println!(
        "                wait between events p50 / p99 / max       waits ≥ 10 ms (of them before the 3rd event)   \
         first → last event p50"
    );
    for (label, waits, span) in
        [("   direct  ", &direct_waits, &direct_span), ("   proxied ", &proxied_waits, &proxied_span)]
    {
        println!(
            "{label}  {} / {} / {}      {:>4} of {} ({})                            {}",
            ms(waits.stats.p50),
            ms(waits.stats.p99),
            ms(waits.stats.max),
            waits.long,
            waits.count,
            waits.long_early,
            ms(span.p50)
        );
    }
    let added_p99 = signed_ms(proxied_waits.stats.p99, direct_waits.stats.p99);
    println!(
        "   added to the p99 wait between events: {added_p99:+.3} ms — chunks passed on as they come (≤ +2 ms): {}",
        verdict(added_p99 <= 2.0)
    );
    println!();

    // --- Throughput: many keep-alive clients for a fixed time.
    let measure = |target: &Target| {
        let cpu_before = [upstream_rt.cpu_secs(), proxy_rt.cpu_secs(), client_rt.cpu_secs()];
        let ((machine_before, steal_before), own_before) = (machine_cpu_secs(), own_cpu_secs());
        let rate = client_rt.rt.block_on(async {
            let client = client();
            throughput(&client, target, &body, concurrency, 0.5).await;
            throughput(&client, target, &body, concurrency, secs).await
        });
        let cpu_after = [upstream_rt.cpu_secs(), proxy_rt.cpu_secs(), client_rt.cpu_secs()];
        let (machine_after, steal_after) = machine_cpu_secs();
        let mut used: Vec<f64> = cpu_after.iter().zip(cpu_before).map(|(a, b)| a - b).collect();
        // [upstream, proxy, client, whole machine busy, of which steal, this process]
        used.extend([machine_after - machine_before, steal_after - steal_before, own_cpu_secs() - own_before]);
        (rate, used)
    };
    let (proxied_rate, proxied_cpu) = measure(&proxied);
    let (direct_rate, direct_cpu) = measure(&direct);
    let run_secs = secs + 0.5;
    println!("3. throughput: {concurrency} concurrent keep-alive clients for {secs:.0} s (after a 0.5 s warm-up)");
    println!(
        "   proxied {proxied_rate:>8.0} requests/s (target ≥ 5,000 on 2 cores: {})",
        verdict(proxied_rate >= 5000.0)
    );
    println!("   direct  {direct_rate:>8.0} requests/s (reference: client and upstream alone)");
    println!(
        "   CPU used during the proxied run (incl. warm-up, {run_secs:.1} s wall, {cores} cores = {:.1} core-s): \
         upstream {:.2} s, proxy {:.2} s, client {:.2} s",
        run_secs * cores as f64,
        proxied_cpu[0],
        proxied_cpu[1],
        proxied_cpu[2]
    );
    println!("   CPU used during the direct run: upstream {:.2} s, client {:.2} s", direct_cpu[0], direct_cpu[2]);
    for (label, cpu) in [("proxied", &proxied_cpu), ("direct", &direct_cpu)] {
        println!(
            "   whole machine during the {label} run: {:.2} core-s busy (of which {:.2} stolen by the hypervisor); this \
             benchmark process {:.2} core-s; the rest is other processes and kernel softirq work",
            cpu[3], cpu[4], cpu[5]
        );
    }
    if proxied_rate > 0.0 {
        let proxy_us = proxied_cpu[1] / (proxied_rate * run_secs) * 1e6;
        println!(
            "   proxy CPU per request ≈ {proxy_us:.0} µs → the proxy alone could serve ≈ {:.0} requests/s on {cores} \
             cores if client and upstream ran elsewhere",
            cores as f64 * 1e6 / proxy_us
        );
        let all_us = (proxied_cpu[0] + proxied_cpu[1] + proxied_cpu[2]) / (proxied_rate * run_secs) * 1e6;
        println!(
            "   client + proxy + upstream CPU per proxied request ≈ {all_us:.0} µs → ≈ {:.0} requests/s if this \
             benchmark had the {cores} cores to itself (other processes took the rest of the machine above)",
            cores as f64 * 1e6 / all_us
        );
    }
    println!("   note: client, proxy and upstream all run on the same {cores} cores, so the proxied figure is a floor");
    println!();

    let totals = proxy.totals();
    println!(
        "proxy metered {} calls ({} tokens, {:.2} USD, {} refused); benchmark took {:.1} s",
        totals.calls,
        totals.usage.total_tokens(),
        totals.cost_usd,
        totals.refused,
        bench_started.elapsed().as_secs_f64()
    );
    proxy_rt.rt.block_on(proxy.shutdown());
}
