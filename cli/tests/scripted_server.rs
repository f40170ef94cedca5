//! `lightsout scripted-server --listen ADDR`: serves on the given address, prints its base URL,
//! answers an OpenAI chat completion, and exits cleanly on SIGTERM (what a container runtime
//! sends PID 1).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server if the test fails before it exits.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request with `Connection: close`; the raw response (head and body).
fn http_post(port: u16, path: &str, key: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects to the server");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("reads the response");
    response
}

#[test]
fn listens_on_the_given_address_answers_and_stops_on_sigterm() {
    // A free port, released before the server binds it.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(env!("CARGO_BIN_EXE_lightsout"))
        .args(["scripted-server", "--listen", &format!("127.0.0.1:{port}"), "--api-key", "sk-test"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starts lightsout scripted-server");
    let mut server = Server(child);

    // The first line names the base URL: the server is listening once it is printed.
    let mut stdout = BufReader::new(server.0.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("reads the banner");
    assert!(line.trim_end().ends_with(&format!("at http://127.0.0.1:{port}/v1")), "{line:?}");

    let body = r#"{"model":"gpt-test","messages":[{"role":"system","content":"You are a code reviewer."},{"role":"user","content":"Review this pull request."}]}"#;
    let response = http_post(port, "/v1/chat/completions", "sk-test", body);
    let (head, json) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Axum sends a Content-Length here (not chunked), so the body is the JSON itself.
    let json: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(json["object"], "chat.completion");
    assert!(json["choices"][0]["message"]["content"].as_str().is_some_and(|text| !text.is_empty()), "{json}");

    // SAFETY: kill has no memory-safety preconditions; the pid is our live child's.
    let sent = unsafe { libc::kill(server.0.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0, "sending SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "scripted-server still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status after SIGTERM: {status}");
}
