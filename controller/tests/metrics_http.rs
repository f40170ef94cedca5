//! The operations endpoint over real TCP: probes, metrics and graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lightsout_controller::http::{serve, Health};
use lightsout_controller::metrics::{Metrics, RunKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Decodes a `Transfer-Encoding: chunked` body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size_line = std::str::from_utf8(&raw[..line_end]).expect("utf-8 chunk size");
        let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16).expect("hex chunk size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// A raw HTTP/1.1 GET with `Connection: close`, read to the end.
async fn get(addr: SocketAddr, path: &str) -> Response {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write request");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("response within 10 s")
        .expect("read response");

    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of headers");
    let head = std::str::from_utf8(&raw[..split]).expect("utf-8 head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line.split(' ').nth(1).expect("status code").parse().expect("numeric status");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned())).collect();
    let body = &raw[split + 4..];
    let chunked =
        headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(body) } else { body.to_vec() };
    Response { status, headers, body: String::from_utf8(body).expect("utf-8 body") }
}

#[tokio::test]
async fn serves_probes_and_metrics_and_shuts_down() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let metrics = Arc::new(Metrics::new());
    let health = Health::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, metrics.clone(), health.clone(), async {
        let _ = stop_rx.await;
    }));

    let r = get(addr, "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));

    let r = get(addr, "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (503, "not ready"));
    health.set_ready(true);
    let r = get(addr, "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ready"));
    health.set_ready(false);
    assert_eq!(get(addr, "/readyz").await.status, 503);

    let run = RunKey { namespace: "ns".into(), run: "r".into() };
    metrics.trial_final(&run, "v", "ok", Some(12.0));
    metrics.set_leader(true);
    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert!(
        r.body.lines().any(|l| l == r#"lightsout_trials_total{namespace="ns",outcome="ok",run="r",variant="v"} 1"#),
        "{}",
        r.body
    );
    assert!(r.body.lines().any(|l| l == "lightsout_leader 1"), "{}", r.body);

    let r = get(addr, "/nope").await;
    assert_eq!(r.status, 404);

    stop_tx.send(()).expect("server still running");
    let result = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returns within 5 s of shutdown")
        .expect("serve task did not panic");
    assert!(result.is_ok(), "{result:?}");

    // The listener is closed: no more connections are accepted (or they are closed unanswered).
    if let Ok(mut stream) = TcpStream::connect(addr).await {
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "server still answered: {:?}", String::from_utf8_lossy(&buf));
    }
}
