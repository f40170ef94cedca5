//! `lightsout run` where the sandbox cannot have everything, through the real CLI and the real
//! mini-swe-agent (its bash actions scripted by the scripted model server): as uid 65534, and as
//! root without `CAP_SYS_ADMIN` (`capsh --drop=cap_sys_admin`, a container's default
//! capabilities). The agent leaves a `setsid` daemon, tries `ptrace` and `process_vm_readv`, and
//! searches every process's environment it can read for the provider key. The daemon must be dead
//! when the run ends, the calls refused, the key not found, and the trial's record and the one-line
//! notice must say what was missing. The test process is root (it starts the CLI as the other
//! environments), as CI runs.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use lightsout_scripted::{Faults, ScriptedConfig, ScriptedServer};
use serde_json::Value;

const MINI_SWE_AGENT: &str = "2.4.6";
const KEY: &str = "real-key-of-the-degraded-run";

fn nonce() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    lightsout_api::hash::sha256_hex(format!("{nanos}{:?}", std::thread::current().id()).as_bytes())[..10].to_string()
}

fn sample_dataset() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/crbugbench.jsonl").canonicalize().unwrap()
}

/// The attacker's bash actions: a daemon, then the attacks, written to `review.md`.
fn attack_steps(marker: &str) -> Vec<String> {
    vec![
        format!("setsid nohup sh -c 'while :; do sleep 0.2; done' {marker} > /dev/null 2>&1 &"),
        format!(
            r#"{{ printf '# Review\n\n'; sleep 30 & victim=$!
/usr/bin/python3 - "$victim" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
r = libc.ptrace(16, pid, 0, 0)
print('ATTACK ptrace: %s' % ('ATTACHED' if r == 0 else 'refused: ' + os.strerror(ctypes.get_errno())))
buf = ctypes.create_string_buffer(64)
local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = (ctypes.c_void_p * 2)(0x400000, 64)
n = libc.process_vm_readv(pid, local, 1, remote, 1, 0)
print('ATTACK process_vm_readv: %s' % ('READ' if n >= 0 else 'refused: ' + os.strerror(ctypes.get_errno())))
PY
kill $victim
n=0; m="{marker_head}""{marker_tail}"
for p in /proc/[0-9]*; do case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in *"done $m"*) n=$((n+1));; esac; done
echo "ATTACK daemons running: $n"
echo "ATTACK environments holding the key: $(grep -l {key_tail} /proc/[0-9]*/environ 2>/dev/null | wc -l)"
}} > review.md 2>&1"#,
            // Split, so the searching commands' own command lines do not hold what they look for.
            key_tail = &KEY[4..],
            marker_head = &marker[..4],
            marker_tail = &marker[4..],
        ),
    ]
}

fn run_yaml(name: &str, base_url: &str) -> String {
    format!(
        r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: {name}}}
spec:
  dataset:
    format: crbugbench
    source: "file://{}"
    filter: {{ids: [pyledger-001]}}
  agent: {{harness: {{name: mini-swe-agent, version: "{MINI_SWE_AGENT}"}}, timeout: 4m, maxTurns: 8}}
  matrix: {{models: [{{name: attacker, provider: p}}]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers: {{p: {{baseUrl: "{base_url}", apiKind: openai-chat, apiKeyEnv: E2E_KEY}}}}
  storage: {{results: "file:///unused"}}
  retries: 0
"#,
        sample_dataset().display()
    )
}

fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline).contains(marker).then_some(pid)
        })
        .collect()
}

fn walk(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path, name));
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
    out
}

/// What one degraded `lightsout run` left: the trial's record, its review, and the CLI's stderr.
struct Degraded {
    result: Value,
    review: String,
    stderr: String,
}

impl Degraded {
    fn isolation(&self, which: &str) -> Vec<String> {
        self.result["isolation"][which]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    }

    fn applied(&self, what: &str) -> bool {
        self.isolation("applied").iter().any(|a| a.starts_with(what))
    }

    /// What holds in every degraded environment: the attacks failed and the daemon is gone.
    fn assert_attacks_failed(&self, marker: &str) {
        assert_eq!(self.result["outcome"], "ok", "{:#}\n{}", self.result, self.stderr);
        let lines: Vec<&str> = self.review.lines().filter(|l| l.starts_with("ATTACK ")).collect();
        assert_eq!(
            lines,
            [
                "ATTACK ptrace: refused: Operation not permitted",
                "ATTACK process_vm_readv: refused: Operation not permitted",
                // Counted by a loop whose own command line holds the marker split in two.
                "ATTACK daemons running: 1",
                "ATTACK environments holding the key: 0",
            ],
            "{}",
            self.review
        );
        assert_eq!(processes_with(marker), Vec::<u32>::new(), "the daemon outlived its trial");
        assert!(self.applied("seccomp filter and no_new_privs"), "{:?}", self.isolation("applied"));
    }
}

/// Runs one attacking trial with `lightsout run`, started through `wrapper` (a command line that
/// ends by running its arguments, e.g. dropping capabilities) as `uid` (its gid the same).
fn degraded_run(name: &str, marker: &str, wrapper: &[&str], uid: Option<u32>) -> Degraded {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::start(ScriptedConfig {
            expected_api_key: Some(KEY.into()),
            faults: Faults::default(),
        }))
        .unwrap();
    server.script_agent("attacker", attack_steps(marker));
    let dir = tempfile::tempdir().unwrap();
    let (results, home) = (dir.path().join("results"), dir.path().join("home"));
    for path in [dir.path(), &results, &home] {
        std::fs::create_dir_all(path).unwrap();
        if let Some(uid) = uid {
            std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run_file = dir.path().join("run.yaml");
    std::fs::write(&run_file, run_yaml(name, &server.base_url())).unwrap();
    std::fs::set_permissions(&run_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Installed once as root (world-readable), as CI's attack tests do.
    let harnesses = lightsout_worker::harness::default_root();
    let cli = env!("CARGO_BIN_EXE_lightsout");
    let mut command = std::process::Command::new(wrapper.first().copied().unwrap_or(cli));
    command.args(wrapper.iter().skip(1)).args(if wrapper.is_empty() { None } else { Some(cli) });
    command
        .args(["run", "-f"])
        .arg(&run_file)
        .arg("--results")
        .arg(format!("file://{}", results.display()))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", &home)
        .env("LIGHTSOUT_HARNESS_DIR", &harnesses)
        .env("E2E_KEY", KEY)
        .current_dir(dir.path());
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    let output = runtime.block_on(async { tokio::process::Command::from(command).output().await }).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let result_file = walk(&results, "result.json").into_iter().next().unwrap_or_else(|| panic!("no result: {stderr}"));
    let result: Value = serde_json::from_slice(&std::fs::read(&result_file).unwrap()).unwrap();
    let review = std::fs::read_to_string(result_file.with_file_name("review.md")).unwrap_or_default();
    runtime.block_on(server.shutdown());
    Degraded { result, review, stderr }
}

fn require_root_and_harness() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the test starts the CLI as other users, which needs root (CI runs as root)"
    );
    let harness =
        lightsout_api::HarnessRef { name: lightsout_api::HarnessName::MiniSweAgent, version: MINI_SWE_AGENT.into() };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(lightsout_worker::harness::install(&harness, &lightsout_worker::harness::default_root())).unwrap();
}

/// The lines of `stderr` that note partial isolation.
fn isolation_notes(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("note: agents run with partial isolation")).collect()
}

#[test]
fn not_root_lightsout_run_sandboxes_its_agents_and_says_what_is_missing() {
    require_root_and_harness();
    let marker = format!("DEGRADED-DAEMON-{}", nonce());
    let run = degraded_run(&format!("degraded-user-{}", nonce()), &marker, &[], Some(65534));
    run.assert_attacks_failed(&marker);
    for what in ["user namespace of its own (uid 65534", "mount namespace", "network namespace", "pid namespace"] {
        assert!(run.applied(what), "{what} not in {:?}", run.isolation("applied"));
    }
    let missing = run.isolation("missing");
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(missing[0].starts_with("scratch size limit: needs root"), "{missing:?}");
    assert!(missing[1].starts_with("agent user of its own (the agent runs as the worker's uid 65534)"), "{missing:?}");
    assert_eq!(
        isolation_notes(&run.stderr),
        ["note: agents run with partial isolation, without: scratch size limit, agent user of its own (each trial's \
          isolation.missing says why; see README, Isolation between trials)"],
        "{}",
        run.stderr
    );
}

#[test]
fn root_without_cap_sys_admin_lightsout_run_keeps_every_protection_but_the_scratch_limit() {
    require_root_and_harness();
    let marker = format!("DEGRADED-DAEMON-{}", nonce());
    let wrapper = ["/usr/sbin/capsh", "--drop=cap_sys_admin", "--", "-c", "exec \"$0\" \"$@\""];
    let run = degraded_run(&format!("degraded-caps-{}", nonce()), &marker, &wrapper, None);
    run.assert_attacks_failed(&marker);
    for what in [
        "user namespace of its own (uid 0 without CAP_SYS_ADMIN)",
        "mount namespace",
        "network namespace",
        "pid namespace",
        "agent user 2",
    ] {
        assert!(run.applied(what), "{what} not in {:?}", run.isolation("applied"));
    }
    let missing = run.isolation("missing");
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(missing[0].starts_with("scratch size limit: mounting a tmpfs at /tmp/lightsout-"), "{missing:?}");
    assert!(missing[0].ends_with("Operation not permitted (os error 1)"), "{missing:?}");
    assert_eq!(isolation_notes(&run.stderr).len(), 1, "{}", run.stderr);
    assert!(isolation_notes(&run.stderr)[0].contains("without: scratch size limit ("), "{}", run.stderr);
}
