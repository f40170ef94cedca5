//! An adversarial "agent" in the sandbox searches its environment, `/proc`, the filesystem and
//! the network for the provider key, storage credentials and ground truth. It reports everything
//! it could read; none of the secrets may be in it, and the only address it may reach is the
//! metering proxy. Needs root (network and mount namespaces), as CI runs.

use std::path::Path;
use std::time::Duration;

use lightsout_api::ApiKind;
use lightsout_model::pricing::PricingTable;
use lightsout_model::Endpoint;
use lightsout_scripted::{ScriptedConfig, ScriptedServer};
use lightsout_worker::agent_process::{self, AgentExit, AgentUser, LaunchSpec, Limits};
use lightsout_worker::proxy::{MeteringProxy, ProxyConfig};
use lightsout_worker::sandbox::SandboxArgs;

const SANDBOX_PORT: u16 = 4000;

/// What the adversary does. It does not know the secrets: it dumps what it can reach, and the
/// test looks for them in the dump.
const ADVERSARY: &str = r#"
out="$PWD/report.txt"
say() { printf '%s\n' "$*" >> "$out"; }
say "UID $(id -u)"
env >> "$out"
for p in /proc/[0-9]*; do
  for f in environ cmdline; do
    if [ -r "$p/$f" ]; then tr '\0' '\n' < "$p/$f" >> "$out" 2>/dev/null; fi
  done
done
# Every readable file in the places secrets could be, and where we know the worker keeps its own.
for dir in "$@" /tmp /var/tmp /run /home /root /etc; do
  find "$dir" -xdev -maxdepth 4 -type f -readable -size -64k 2>/dev/null | while read -r f; do
    say "FILE $f"; cat "$f" >> "$out" 2>/dev/null
  done
done
# Its /tmp, and a file left there.
say "TMP $(ls -A /tmp | tr '\n' ' ')"
echo "left by the agent" > "/tmp/$LEFTOVER"
# The network: every loopback port the host listens on, and the proxy through the sandbox.
for port in $PROBE_PORTS; do
  if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then say "CONNECTED 127.0.0.1:$port"; fi
done
if exec 3<>/dev/tcp/127.0.0.1/4000; then
  printf 'GET /v1/models HTTP/1.1\r\nHost: proxy\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n' "$OPENAI_API_KEY" >&3
  head -1 <&3 | grep -q ' 200 ' && say "PROXY_OK"
fi
"#;

fn random_secret(kind: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!(
        "{kind}{}",
        lightsout_api::hash::sha256_hex(format!("{kind}{nanos}{:?}", std::thread::current().id()).as_bytes())
    )
}

#[tokio::test]
async fn an_adversarial_agent_finds_and_reaches_nothing_but_the_proxy() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the isolation test needs root for network and mount namespaces (CI runs as root)"
    );
    let provider_key = random_secret("PK");
    let storage_secret = random_secret("SK");
    let ground_truth = random_secret("GT");
    // The worker's own environment holds credentials, as it does in a pod.
    std::env::set_var("OPENAI_API_KEY", &provider_key);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", &storage_secret);

    let server =
        ScriptedServer::start(ScriptedConfig { expected_api_key: Some(provider_key.clone()), ..Default::default() })
            .await
            .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let (dataset, results, run_dir, repo, home) = (
        scratch.path().join("dataset"),
        scratch.path().join("results"),
        scratch.path().join("run"),
        scratch.path().join("repo"),
        scratch.path().join("home"),
    );
    for dir in [&dataset, &results, &run_dir, &repo, &home] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(dataset.join("tasks.jsonl"), format!("{{\"bugs\": [{{\"description\": \"{ground_truth}\"}}]}}\n"))
        .unwrap();
    std::fs::write(results.join("verdicts.json"), format!("{{\"truth\": \"{ground_truth}\"}}")).unwrap();
    // A secret on disk outside the hidden directories, readable by its owner only.
    let private = scratch.path().join("worker-credentials");
    std::fs::write(&private, &storage_secret).unwrap();
    std::fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    // Another process's file in the host's /tmp, readable by anyone.
    let host_tmp_secret = random_secret("TMP");
    let host_tmp_file = tempfile::Builder::new().prefix("lightsout-isolation-").tempfile_in("/tmp").unwrap();
    std::fs::write(host_tmp_file.path(), &host_tmp_secret).unwrap();
    std::fs::set_permissions(host_tmp_file.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let host_tmp_name = host_tmp_file.path().file_name().unwrap().to_string_lossy().into_owned();
    let leftover = format!("lightsout-agent-leftover-{}", &random_secret("L")[..12]);

    let socket = run_dir.join("proxy.sock");
    let proxy = MeteringProxy::start(ProxyConfig {
        upstream: Endpoint {
            provider: "p".into(),
            base_url: server.base_url(),
            api_kind: ApiKind::OpenAiChat,
            api_key: Some(provider_key.clone()),
        },
        agent_key: "dummy-trial-key".into(),
        pricing: PricingTable::default(),
        max_tokens: None,
        max_usd: None,
        log_path: None,
        unix_socket: Some(socket.clone()),
        stall_timeout: lightsout_model::DEFAULT_STALL_TIMEOUT,
    })
    .await
    .unwrap();

    let user = AgentUser::for_this_process();
    agent_process::hand_over(&[&repo, &home], user).unwrap();
    let probe_ports = format!("{} {}", server.addr().port(), proxy.addr().port());
    let sandbox = SandboxArgs {
        proxy: Some((socket, SANDBOX_PORT)),
        hide: vec![dataset.clone(), results.clone()],
        // The scratch space is under /tmp: the agent keeps its workspace and home there.
        keep: vec![repo.clone(), home.clone()],
        tmpfs_mib: 256,
        report_fd: None,
        user,
        program: "/bin/bash".into(),
        args: vec![
            "-c".into(),
            ADVERSARY.into(),
            "adversary".into(),
            dataset.clone().into(),
            results.clone().into(),
            scratch.path().into(),
        ],
    };
    let mut args = vec![std::ffi::OsString::from("sandbox")];
    args.extend(sandbox.to_args());
    let launch = LaunchSpec {
        program: env!("CARGO_BIN_EXE_lightsout-worker").into(),
        args,
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), home.display().to_string()),
            ("OPENAI_API_KEY".into(), "dummy-trial-key".into()),
            ("OPENAI_BASE_URL".into(), format!("http://127.0.0.1:{SANDBOX_PORT}/v1")),
            ("PROBE_PORTS".into(), probe_ports),
            ("LEFTOVER".into(), leftover.clone()),
        ],
        cwd: repo.clone(),
    };
    let limits = Limits { timeout: Duration::from_secs(120), grace: Duration::from_secs(2) };
    let ran = agent_process::run(&launch, None, limits, &run_dir.join("out"), &run_dir.join("err")).await.unwrap();
    let stderr = std::fs::read_to_string(run_dir.join("err")).unwrap_or_default();
    assert!(matches!(ran.exit, AgentExit::Exited(s) if s.success()), "{:?}: {stderr}", ran.exit);

    let report = String::from_utf8_lossy(&std::fs::read(repo.join("report.txt")).unwrap()).into_owned();
    // The script's own text is in the dump (its command line), so markers are matched as whole lines.
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines.contains(&"UID 65534"), "the agent runs as an unprivileged user");
    assert!(report.contains("FILE "), "the adversary did read files: {}", &report[..report.len().min(2000)]);
    for (what, secret) in
        [("provider key", &provider_key), ("storage secret", &storage_secret), ("ground truth", &ground_truth)]
    {
        assert!(!report.contains(secret.as_str()), "the agent found the {what}");
    }
    let reached: Vec<&&str> = lines.iter().filter(|l| l.starts_with("CONNECTED 127.0.0.1:")).collect();
    assert!(reached.is_empty(), "the agent reached host ports: {reached:?}");
    assert!(lines.contains(&"PROXY_OK"), "the proxy, its one way out, works");
    // The proxy forwarded that call with the real key.
    assert!(server.requests().iter().any(|r| r.api_key.as_deref() == Some(provider_key.as_str())));
    assert!(Path::new(&dataset.join("tasks.jsonl")).exists(), "hiding never touches the host's files");

    // The agent's /tmp is its own: the host's files are not in it, and what it leaves there is
    // gone with the sandbox.
    assert!(!report.contains(&host_tmp_secret), "the agent read a file in the host's /tmp");
    let listing = lines.iter().find(|l| l.starts_with("TMP ")).expect("the adversary listed /tmp");
    assert!(!listing.contains(&host_tmp_name), "the agent sees the host's /tmp: {listing}");
    assert!(
        listing.contains(scratch.path().file_name().unwrap().to_str().unwrap()),
        "its workspace is kept: {listing}"
    );
    assert!(!Path::new("/tmp").join(&leftover).exists(), "the agent left a file in the host's /tmp");
    assert!(host_tmp_file.path().exists());
}
