//! `S3Store` and `Uploader` against a real S3-compatible server: moto's, started by each test on
//! a free port of 127.0.0.1 and killed when the test ends. Needs `pip install 'moto[server]==5.2.5'`.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lightsout_api::S3Connection;
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_s3::{Artifact, RetryPolicy, S3Credentials, S3Options, S3Store, UploadError, Uploader};

const BUCKET: &str = "lightsout-results";
const MOTO_INSTALL: &str = "pip install 'moto[server]==5.2.5'";

/// A moto server process, killed on drop.
struct Moto {
    child: Child,
    port: u16,
    log_dir: tempfile::TempDir,
}

impl Moto {
    fn start() -> Moto {
        Moto::start_on(free_port())
    }

    /// Starts moto on `port` and waits until it answers.
    fn start_on(port: u16) -> Moto {
        let check = Command::new("python3")
            .args(["-c", "import moto.server"])
            .output()
            .unwrap_or_else(|e| panic!("these tests need python3 and moto's server ({MOTO_INSTALL}): {e}"));
        assert!(
            check.status.success(),
            "these tests run a real S3-compatible server, moto's, which python3 cannot import; install it with \
             `{MOTO_INSTALL}`.\n{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let log_dir = tempfile::tempdir().unwrap();
        let log_path = log_dir.path().join("moto.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn python3 -m moto.server");
        let mut moto = Moto { child, port, log_dir };
        let started = Instant::now();
        loop {
            if let Some(status) = moto.child.try_wait().unwrap() {
                panic!("moto exited with {status}:\n{}", std::fs::read_to_string(&log_path).unwrap_or_default());
            }
            if moto.answers() {
                return moto;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moto did not answer on port {port} within 60s:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether moto answers an HTTP request.
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!("GET /moto-api/ HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", self.port);
        let mut head = [0u8; 12];
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_exact(&mut head).is_ok()
            && head.starts_with(b"HTTP/1.")
    }

    fn endpoint(&self) -> String {
        endpoint(self.port)
    }

    /// What the server logged: one line per request, with its method and path.
    fn log(&self) -> String {
        std::fs::read_to_string(self.log_dir.path().join("moto.log")).unwrap_or_default()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on (until someone binds it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn endpoint(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

fn connection(endpoint: String) -> S3Connection {
    S3Connection { endpoint: Some(endpoint), region: None, secret_name: None, force_path_style: Some(true) }
}

fn quick_retries() -> RetryPolicy {
    RetryPolicy { attempts: 3, base_delay: Duration::from_millis(50), max_delay: Duration::from_millis(200) }
}

fn store_at(endpoint: String, uri: &str, options: S3Options) -> S3Store {
    S3Store::new(uri, &connection(endpoint), Some(S3Credentials::new("testing", "testing")), options).unwrap()
}

async fn create_bucket(store: &S3Store) {
    store.client().create_bucket().bucket(store.bucket()).send().await.expect("create the test bucket");
}

/// A store that notes every put (key, succeeded) in order, delegating to a real one.
struct Recording<S> {
    inner: S,
    puts: Mutex<Vec<(String, bool)>>,
}

impl<S> Recording<S> {
    fn new(inner: S) -> Self {
        Recording { inner, puts: Mutex::new(Vec::new()) }
    }

    fn succeeded(&self) -> Vec<String> {
        self.puts.lock().unwrap().iter().filter(|(_, ok)| *ok).map(|(key, _)| key.clone()).collect()
    }

    fn failed(&self) -> usize {
        self.puts.lock().unwrap().iter().filter(|(_, ok)| !ok).count()
    }
}

impl<S: ResultStore> ResultStore for Recording<S> {
    async fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let result = self.inner.put(key, bytes).await;
        self.puts.lock().unwrap().push((key.to_string(), result.is_ok()));
        result
    }
    async fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        self.inner.list(prefix).await
    }
    fn uri(&self, key: &str) -> String {
        self.inner.uri(key)
    }
}

/// An attempt's artifacts, `result.json` first to show that order in the input does not matter.
fn attempt_artifacts(layout: &RunLayout) -> Vec<Artifact> {
    let key = |name: &str| layout.artifact("claude", "task-1", 1, name);
    vec![
        Artifact::new(key("result.json"), r#"{"outcome":"succeeded"}"#),
        Artifact::new(key("review.md"), "# Review\n\nLooks fine.\n"),
        Artifact::new(key("findings.json"), "[]"),
        Artifact::new(key("prompt.txt"), "Review this change."),
    ]
}

fn spool_files(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(read) => read.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Deterministic bytes that are not a repeating pattern.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[tokio::test]
async fn put_get_list_round_trip_with_pagination_and_overwrite() {
    let moto = Moto::start();
    let options = S3Options { list_page_size: Some(4), retry: quick_retries(), ..S3Options::default() };
    let store = store_at(moto.endpoint(), "s3://lightsout-results/results/", options);
    create_bucket(&store).await;

    let mut expected = Vec::new();
    for trial in 0..7 {
        for name in ["result.json", "review.md"] {
            let key = format!("runs/a/v/t{trial}/attempt-1/{name}");
            store.put(&key, format!("{trial}/{name}").as_bytes()).await.unwrap();
            expected.push(key);
        }
    }
    store.put("runs/a/run.json", b"run").await.unwrap();
    expected.push("runs/a/run.json".to_string());
    expected.sort();
    // Beside the listed directory, and outside the store's prefix: never listed.
    store.put("runs/ab/run.json", b"other run").await.unwrap();
    store.client().put_object().bucket(BUCKET).key("elsewhere/runs/a/x").send().await.unwrap();

    assert_eq!(store.list("runs/a").await.unwrap(), expected, "15 keys over pages of 4");
    assert_eq!(store.list("runs/a/").await.unwrap(), expected);
    assert_eq!(store.list("").await.unwrap().len(), expected.len() + 1);
    assert!(store.list("runs/missing").await.unwrap().is_empty());

    assert_eq!(store.get("runs/a/v/t3/attempt-1/review.md").await.unwrap().unwrap(), b"3/review.md");
    assert_eq!(store.get("runs/a/v/t3/attempt-1/verdicts.json").await.unwrap(), None);

    // The object sits under the prefix.
    let head = store.client().head_object().bucket(BUCKET).key("results/runs/a/run.json").send().await.unwrap();
    assert_eq!(head.content_length, Some(3));
    assert_eq!(head.content_type.as_deref(), Some("application/json"));
    assert_eq!(store.uri("runs/a/run.json"), "s3://lightsout-results/results/runs/a/run.json");

    // Overwriting replaces the object and never duplicates the key.
    store.put("runs/a/run.json", b"second version").await.unwrap();
    assert_eq!(store.get("runs/a/run.json").await.unwrap().unwrap(), b"second version");
    assert_eq!(store.list("runs/a").await.unwrap(), expected);

    // Empty objects round-trip.
    store.put("runs/a/empty.txt", b"").await.unwrap();
    assert_eq!(store.get("runs/a/empty.txt").await.unwrap().unwrap(), b"");
}

#[tokio::test]
async fn multipart_put_above_the_threshold() {
    let moto = Moto::start();
    let mib = 1024 * 1024;
    let options = S3Options { multipart_threshold: 5 * mib, retry: quick_retries(), ..S3Options::default() };
    let store = store_at(moto.endpoint(), "s3://lightsout-results", options);
    create_bucket(&store).await;

    let big = noise(12 * mib + 17);
    store.put("runs/a/v/t/attempt-1/trajectory.jsonl", &big).await.unwrap();
    let head =
        store.client().head_object().bucket(BUCKET).key("runs/a/v/t/attempt-1/trajectory.jsonl").send().await.unwrap();
    assert_eq!(head.content_length, Some(big.len() as i64));
    let etag = head.e_tag.unwrap_or_default();
    assert!(etag.trim_matches('"').ends_with("-3"), "a 3-part multipart upload's ETag, got {etag}");
    assert!(store.get("runs/a/v/t/attempt-1/trajectory.jsonl").await.unwrap().unwrap() == big);
    let pending = store.client().list_multipart_uploads().bucket(BUCKET).send().await.unwrap();
    assert!(pending.uploads.unwrap_or_default().is_empty(), "no multipart upload left open");

    // Exactly at the threshold: one PutObject. Then overwrite the multipart object with it.
    let small = noise(5 * mib);
    store.put("runs/a/v/t/attempt-1/trajectory.jsonl", &small).await.unwrap();
    assert!(store.get("runs/a/v/t/attempt-1/trajectory.jsonl").await.unwrap().unwrap() == small);
    assert_eq!(store.list("runs/a").await.unwrap(), vec!["runs/a/v/t/attempt-1/trajectory.jsonl"]);
}

#[tokio::test]
async fn errors_name_the_bucket_and_key() {
    let moto = Moto::start();
    let store = store_at(
        moto.endpoint(),
        "s3://no-such-bucket/p",
        S3Options { retry: quick_retries(), ..S3Options::default() },
    );
    let error = store.get("runs/a/run.json").await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotFound, "{error}");
    let message = error.to_string();
    assert!(message.contains("s3://no-such-bucket/p/runs/a/run.json") && message.contains("NoSuchBucket"), "{message}");
    assert!(message.contains("after 1 attempt"), "a missing bucket is not retried: {message}");
    assert_one_line(&message);

    // A missing key of a bucket that exists is no error at all.
    let store = store_at(moto.endpoint(), "s3://lightsout-results/p", S3Options::default());
    create_bucket(&store).await;
    assert_eq!(store.get("runs/a/run.json").await.unwrap(), None);

    // Nothing listens: connection refused, retried, then reported.
    let down = store_at(
        endpoint(free_port()),
        "s3://lightsout-results/p",
        S3Options { retry: quick_retries(), ..S3Options::default() },
    );
    let error = down.put("runs/a/run.json", b"x").await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("PutObject s3://lightsout-results/p/runs/a/run.json"), "{message}");
    assert!(message.contains("bucket lightsout-results") && message.contains("after 3 attempts"), "{message}");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{message}");
    assert!(message.contains("Connection refused"), "{message}");
    assert_one_line(&message);
    assert!(down.list("runs").await.unwrap_err().to_string().contains("ListObjectsV2"));
}

/// An error as logs and conditions show it: one short line with the service's own words, never
/// the SDK's `Debug` rendering of the response (kilobytes of metadata and headers).
fn assert_one_line(message: &str) {
    assert!(!message.contains('\n'), "more than one line: {message}");
    assert!(message.len() < 400, "{} bytes: {message}", message.len());
    assert!(!message.contains("Error {") && !message.contains("request_id"), "a Debug dump: {message}");
}

/// An endpoint by host name, as in a cluster (`http://s3.NS.svc:5000`): with `forcePathStyle`
/// unset the bucket goes in the path and the server answers for it. Told `false`, the store
/// puts the bucket in the host name (`lightsout-results.localhost`, which does not exist), so
/// nothing reaches the server.
#[tokio::test]
async fn an_endpoint_by_host_name_is_addressed_path_style_unless_told_otherwise() {
    let moto = Moto::start();
    let by_name = S3Connection {
        endpoint: Some(format!("http://localhost:{}", moto.port)),
        region: None,
        secret_name: None,
        force_path_style: None,
    };
    let credentials = Some(S3Credentials::new("testing", "testing"));
    let options = S3Options { retry: quick_retries(), ..S3Options::default() };
    let store = S3Store::new("s3://lightsout-results/p", &by_name, credentials.clone(), options.clone()).unwrap();
    create_bucket(&store).await;
    store.put("runs/a/run.json", b"{}").await.unwrap();
    assert_eq!(store.get("runs/a/run.json").await.unwrap().as_deref(), Some(&b"{}"[..]));
    assert_eq!(store.list("runs").await.unwrap(), ["runs/a/run.json"]);
    let log = moto.log();
    // moto's request log: `"PUT /lightsout-results/p/runs/a/run.json?x-id=PutObject HTTP/1.1" 200`.
    for request in ["\"PUT /lightsout-results/p/runs/a/run.json", "\"GET /lightsout-results/p/runs/a/run.json"] {
        assert!(log.contains(request), "not path-style ({request}):\n{log}");
    }

    let virtual_hosted = S3Connection { force_path_style: Some(false), ..by_name };
    let store = S3Store::new("s3://lightsout-results/p", &virtual_hosted, credentials, options).unwrap();
    let requests = moto.log().lines().count();
    let error = store.get("runs/a/run.json").await.unwrap_err();
    assert_eq!(moto.log().lines().count(), requests, "no request reached the server: {error}");
}

#[tokio::test]
async fn uploader_keeps_its_spool_through_an_outage_and_resume_uploads_it_commit_last() {
    let spool_root = tempfile::tempdir().unwrap();
    let spool = spool_root.path().join("a-claude-task-1-1");
    let layout = RunLayout::new("a");
    let options = S3Options { retry: quick_retries(), ..S3Options::default() };

    // S3 is down for the whole (short) deadline.
    let down = store_at(endpoint(free_port()), "s3://lightsout-results/results", options.clone());
    let uploader = Uploader::new(down, &spool)
        .with_deadline(Duration::from_secs(2))
        .with_backoff(Duration::from_millis(100), Duration::from_millis(400));
    let started = Instant::now();
    let error = uploader.upload(attempt_artifacts(&layout)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "gave up at the deadline: {:?}", started.elapsed());
    let message = error.to_string();
    assert!(message.contains("the attempt must end as an infrastructure failure"), "{message}");
    assert!(message.contains("4 artifact(s) left in the spool"), "{message}");
    assert!(matches!(error, UploadError::Upload { tries, .. } if tries > 1), "{error:?}");
    assert_eq!(error.spool_dir(), spool);
    assert_eq!(spool_files(&spool).len(), 4, "the spool is kept");

    // Later (another process, say) S3 is back: resume uploads everything, result.json last.
    let moto = Moto::start();
    let store = store_at(moto.endpoint(), "s3://lightsout-results/results", options);
    create_bucket(&store).await;
    let resumer = Uploader::new(Recording::new(store), spool_root.path().join("unused"));
    let report = resumer.resume_spool(&spool).await.unwrap();
    let result_json = layout.artifact("claude", "task-1", 1, "result.json");
    assert_eq!(report.uploaded.len(), 4);
    assert_eq!(report.uploaded.last(), Some(&result_json));
    assert_eq!(resumer.store().succeeded().last(), Some(&result_json), "result.json confirmed last");
    assert!(!spool.exists(), "the spool is removed once all is uploaded");

    let store = &resumer.store().inner;
    for artifact in attempt_artifacts(&layout) {
        assert_eq!(store.get(&artifact.key).await.unwrap().unwrap(), artifact.bytes, "{}", artifact.key);
    }
    let mut keys: Vec<String> = attempt_artifacts(&layout).into_iter().map(|a| a.key).collect();
    keys.sort();
    assert_eq!(store.list(&layout.run_dir()).await.unwrap(), keys);

    // Uploading the same set again replaces and never duplicates.
    let again = Uploader::new(Recording::new(store.clone()), &spool);
    again.upload(attempt_artifacts(&layout)).await.unwrap();
    assert_eq!(store.list(&layout.run_dir()).await.unwrap(), keys);
    assert!(resumer.resume_spool(&spool).await.unwrap().uploaded.is_empty(), "nothing left to resume");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploader_succeeds_when_s3_comes_up_during_its_retries() {
    let port = free_port();
    let spool_root = tempfile::tempdir().unwrap();
    let spool = spool_root.path().join("attempt");
    let layout = RunLayout::new("b");
    let mib = 1024 * 1024;
    let options = S3Options { retry: quick_retries(), multipart_threshold: 5 * mib, ..S3Options::default() };
    let store = store_at(endpoint(port), "s3://lightsout-results", options);
    let uploader = Uploader::new(Recording::new(store.clone()), &spool)
        .with_deadline(Duration::from_secs(90))
        .with_backoff(Duration::from_millis(100), Duration::from_millis(500));
    let mut artifacts = attempt_artifacts(&layout);
    let trajectory = noise(6 * mib);
    artifacts.push(Artifact::new(layout.artifact("claude", "task-1", 1, "trajectory.jsonl"), trajectory.clone()));

    let upload = tokio::spawn(async move {
        let report = uploader.upload(artifacts).await;
        (uploader, report)
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!upload.is_finished(), "the uploader waits for S3");
    assert_eq!(spool_files(&spool).len(), 5, "everything is spooled before the first upload");
    let moto = tokio::task::spawn_blocking(move || Moto::start_on(port)).await.unwrap();
    create_bucket(&store).await;

    let (uploader, report) = upload.await.unwrap();
    let report = report.unwrap();
    let result_json = layout.artifact("claude", "task-1", 1, "result.json");
    assert_eq!(report.uploaded.len(), 5);
    assert_eq!(report.uploaded.last(), Some(&result_json));
    assert_eq!(uploader.store().succeeded().last(), Some(&result_json));
    assert!(uploader.store().failed() > 0, "some tries failed while S3 was down");
    assert!(!spool.exists());
    assert!(
        store.get(&layout.artifact("claude", "task-1", 1, "trajectory.jsonl")).await.unwrap().unwrap() == trajectory
    );
    assert_eq!(store.get(&result_json).await.unwrap().unwrap(), br#"{"outcome":"succeeded"}"#);
    drop(moto);
}

/// The uploader's future can be spawned on a multi-threaded runtime.
#[test]
fn s3_upload_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let store = store_at(endpoint(9), "s3://b", S3Options::default());
    let uploader = Uploader::new(store, "/nonexistent");
    assert_send(&uploader.upload(Vec::new()));
    assert_send(&uploader.resume_spool(Path::new("/nonexistent")));
    assert_send(&uploader.store().get("k"));
    assert_send(&uploader.store().put("k", b""));
    assert_send(&uploader.store().list(""));
}
