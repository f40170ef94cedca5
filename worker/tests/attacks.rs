//! A hostile agent against its neighbours, through the real harness: mini-swe-agent (PyPI) runs
//! in the sandbox of `lightsout run`, and the scripted model server makes it run the attacks as
//! its bash actions. Where an attack needs a neighbour, two trials (models `attacker` and
//! `victim` of one run) run at once, and the test hands the attacker what it would otherwise have
//! to find: the victim's host PID and scratch path. Each attack reports what it got in its
//! `review.md`, which the run stores; the test reads it back.
//!
//! Each attack must fail to leak, linger or disturb. Needs root (namespaces, per-trial users),
//! as CI runs.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

const MINI_SWE_AGENT: &str = "2.4.6";
/// The scratch size the trials here get (see `lightsout_worker::scratch`): small, so that
/// filling it is quick.
const SCRATCH_MIB: u64 = 64;

fn nonce() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    lightsout_api::hash::sha256_hex(format!("{nanos}{:?}", std::thread::current().id()).as_bytes())[..10].to_string()
}

fn require_root() {
    assert!(common::is_root(), "the attack tests need root (namespaces, per-trial users), as CI runs");
    // The same value for every test of this binary, set before any run reads it.
    std::env::set_var("LIGHTSOUT_SCRATCH_MIB", SCRATCH_MIB.to_string());
}

/// A run named `name` of one sample task with the given models (each one trial), all at once.
fn run_yaml(name: &str, models: &[&str], base_url: &str) -> String {
    let models: Vec<String> = models.iter().map(|m| format!("{{name: {m}, provider: p}}")).collect();
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
  agent: {{harness: {{name: mini-swe-agent, version: "{MINI_SWE_AGENT}"}}, timeout: 4m, maxTurns: 12}}
  matrix: {{models: [{}]}}
  judges: {{panel: [{{name: claude-haiku-4-5, provider: p}}]}}
  providers: {{p: {{baseUrl: "{base_url}", apiKind: openai-chat, apiKeyEnv: E2E_KEY}}}}
  storage: {{results: "file:///unused"}}
  parallelism: {}
  retries: 0
"#,
        common::sample_dataset().display(),
        models.join(", "),
        models.len()
    )
}

/// Runs `yaml` (sandboxed) while `coordinate` runs beside it; returns each model's
/// (result.json, review.md).
async fn run_with<F: std::future::Future<Output = ()>>(
    yaml: &str,
    coordinate: F,
) -> (tempfile::TempDir, Vec<(String, Value, String)>) {
    let results = tempfile::tempdir().unwrap();
    let config = common::e2e_config(yaml, "attack.yaml", results.path(), true);
    let run = lightsout_worker::local::run_local(config, |_| {});
    let (report, ()) = tokio::join!(run, coordinate);
    report.unwrap();
    let trials = common::walk(results.path(), "result.json")
        .into_iter()
        .map(|file| {
            let result: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            let review = std::fs::read_to_string(file.with_file_name("review.md")).unwrap_or_default();
            let stderr = std::fs::read_to_string(file.with_file_name("agent.stderr")).unwrap_or_default();
            let model = result["model"].as_str().unwrap().to_string();
            assert!(result["outcome"] == "ok", "{model}: {result:#}\n--- agent.stderr\n{stderr}");
            (model, result, review)
        })
        .collect();
    (results, trials)
}

fn trial<'a>(trials: &'a [(String, Value, String)], model: &str) -> (&'a Value, &'a str) {
    let (_, result, review) = trials.iter().find(|(m, ..)| m == model).unwrap_or_else(|| panic!("no {model} trial"));
    (result, review)
}

/// The lines an attack reported (`ATTACK …`).
fn attack_lines(review: &str) -> Vec<&str> {
    review.lines().filter(|l| l.starts_with("ATTACK ")).collect()
}

/// Polls `probe` until it yields, failing the test (naming `what`) after two minutes.
async fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..1200 {
        if let Some(found) = probe() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gave up waiting for {what}");
}

/// The scratch directories of the run's trials (`/tmp/lightsout-<run>-…`).
fn scratches(run: &str) -> Vec<PathBuf> {
    let prefix = format!("lightsout-{run}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The scratch whose workspace holds `file`.
fn scratch_with(run: &str, file: &str) -> Option<PathBuf> {
    scratches(run).into_iter().find(|s| s.join("repo").join(file).exists())
}

/// Host PIDs of the processes whose command line holds `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
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

/// A bash step that waits (up to 25 s, under mini-swe-agent's 30 s command limit) for `file` in
/// the workspace.
fn wait_step(file: &str, marker: &str) -> String {
    format!(": {marker}; for i in $(seq 250); do [ -e {file} ] && break; sleep 0.1; done; true")
}

/// The victim: makes a secret in its workspace, says it is ready, waits (its waiting shell's
/// command line carries `marker`) until told to go on, then reviews as usual and reports whether
/// it could still write to its scratch and /tmp.
fn victim_script(marker: &str) -> Vec<String> {
    vec![
        format!(
            ": {marker}; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > secret.txt; touch victim-ready; {}",
            wait_step("go", marker)
        ),
        wait_step("go", marker),
        wait_step("go", marker),
        "git status --short > /dev/null; scratch=$(echo ok > probe && echo yes || echo no); \
         tmp=$(echo ok > /tmp/probe && echo yes || echo no); secret=$(cat secret.txt); \
         printf '# Review\\n\\n1. **[P2] pyledger/csv_import.py:1** — victim intact: scratch %s, tmp %s, secret %s\\n' \
         \"$scratch\" \"$tmp\" \"$secret\" > review.md"
            .into(),
    ]
}

/// The attacker: says it is ready, waits for what the test tells it about the victim (as shell
/// variables in `go`), then runs `attack`, which writes its findings to `review.md`.
fn attacker_script(attack: &str) -> Vec<String> {
    vec![format!("touch attacker-ready; {}", wait_step("go", "attacker")), wait_step("go", "attacker"), {
        // Newlines around the attack: it may end with a here-document.
        format!("test -e go && set -a && . ./go && set +a && {{ printf '# Review\\n\\n'\n{attack}\n}} > review.md 2>&1")
    }]
}

/// Runs an attacker and a victim at once: the attacker attacks once the victim is waiting, and
/// the victim finishes after the attacker's trial has ended. Returns the attacker's and the
/// victim's (result, review), and the victim's secret.
async fn attack_a_neighbour(name: &str, attack: &str) -> (Value, String, Value, String, String) {
    require_root();
    let run = format!("{name}-{}", nonce());
    let marker = format!("VICTIM-{}", nonce());
    let server = common::keyed_scripted_server().await;
    server.script_agent("victim", victim_script(&marker));
    server.script_agent("attacker", attacker_script(&attack.replace("@MARKER_TAIL@", &marker["VICT".len()..])));
    let yaml = run_yaml(&run, &["attacker", "victim"], &server.base_url());
    let secret = std::sync::Mutex::new(String::new());
    let coordinate = async {
        let victim = wait_for("the victim to be ready", || scratch_with(&run, "victim-ready")).await;
        let attacker = wait_for("the attacker to be ready", || scratch_with(&run, "attacker-ready")).await;
        let pid = wait_for("the victim's waiting shell", || pids_with(&format!(": {marker};")).first().copied()).await;
        // The harness itself: mini-swe-agent's Python, given the model on its command line.
        let agent = wait_for("the victim's harness", || pids_with("openai/victim").first().copied()).await;
        *secret.lock().unwrap() = std::fs::read_to_string(victim.join("repo/secret.txt")).unwrap();
        let facts = format!("VICTIM_PID={pid}\nVICTIM_AGENT_PID={agent}\nVICTIM_SCRATCH={}\n", victim.display());
        std::fs::write(attacker.join("repo/go"), facts).unwrap();
        wait_for("the attacker's trial to end", || (!attacker.exists()).then_some(())).await;
        std::fs::write(victim.join("repo/go"), "").unwrap();
    };
    let (_results, trials) = run_with(&yaml, coordinate).await;
    let (attacker, attacker_review) = trial(&trials, "attacker");
    let (victim, victim_review) = trial(&trials, "victim");
    let secret = secret.into_inner().unwrap();
    assert_eq!(secret.len(), 32, "the victim made its secret");
    assert!(
        victim_review.contains(&format!("victim intact: scratch yes, tmp yes, secret {secret}")),
        "the victim's review: {victim_review}"
    );
    assert!(victim["findings"].as_u64() >= Some(1), "{victim}");
    (attacker.clone(), attacker_review.to_string(), victim.clone(), victim_review.to_string(), secret)
}

/// Python that tries to ptrace-attach to the victim: by its host PID, and to every process whose
/// command line shows the victim's marker (the marker is split in the source, so the attacker's
/// own shell does not match).
const PTRACE_ATTACK: &str = r#"/usr/bin/python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
marker = ('VICT' + '@MARKER_TAIL@').encode()
targets = {int(os.environ['VICTIM_PID']): 'victim host pid', int(os.environ['VICTIM_AGENT_PID']): 'victim harness host pid'}
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) not in (os.getpid(), os.getppid()):
        try:
            if marker in open('/proc/%s/cmdline' % p, 'rb').read():
                targets[int(p)] = 'victim found in /proc'
        except OSError:
            pass
for pid, how in targets.items():
    r = libc.ptrace(16, pid, 0, 0)
    e = ctypes.get_errno()
    if r == 0:
        libc.ptrace(17, pid, 0, 0)
    print('ATTACK ptrace %s %d: %s' % (how, pid, 'ATTACHED' if r == 0 else 'refused: ' + os.strerror(e)))
    buf = ctypes.create_string_buffer(64)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = (ctypes.c_void_p * 2)(0x400000, 64)
    n = libc.process_vm_readv(pid, local, 1, remote, 1, 0)
    e = ctypes.get_errno()
    print('ATTACK process_vm_readv %s %d: %s' % (how, pid, 'READ' if n >= 0 else 'refused: ' + os.strerror(e)))
PY"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ptrace_of_a_neighbour_trials_agent_fails() {
    let (_, review, ..) = attack_a_neighbour("atk-ptrace", PTRACE_ATTACK).await;
    let lines = attack_lines(&review);
    assert!(lines.iter().any(|l| l.starts_with("ATTACK ptrace victim host pid")), "the attack ran: {review}");
    assert!(lines.iter().any(|l| l.starts_with("ATTACK ptrace victim harness host pid")), "{review}");
    // Refused before any memory is touched: a bad address (EFAULT) would mean access was allowed.
    for line in &lines {
        assert!(
            line.ends_with("refused: Operation not permitted") || line.ends_with("refused: No such process"),
            "{line}\n{review}"
        );
    }
}

/// Signals the victim by its host PID and wherever it shows in `/proc` (probe, stop, continue).
const SIGNAL_ATTACK: &str = r#"for pid in "$VICTIM_PID" "$VICTIM_AGENT_PID"; do for sig in 0 STOP CONT; do
  if err=$(kill -$sig "$pid" 2>&1); then echo "ATTACK kill -$sig victim host pid $pid: DELIVERED"
  else echo "ATTACK kill -$sig victim host pid $pid: refused: $err"; fi
done; done
for p in /proc/[0-9]*; do
  if grep -q "VICT""@MARKER_TAIL@" "$p/cmdline" 2>/dev/null; then
    if err=$(kill -STOP "${p#/proc/}" 2>&1); then kill -CONT "${p#/proc/}"; echo "ATTACK kill -STOP $p: DELIVERED"
    else echo "ATTACK kill -STOP $p: refused: $err"; fi
  fi
done"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signalling_a_neighbour_trials_process_fails() {
    let (_, review, ..) = attack_a_neighbour("atk-signal", SIGNAL_ATTACK).await;
    let lines = attack_lines(&review);
    assert_eq!(lines.iter().filter(|l| l.starts_with("ATTACK kill -STOP victim host pid")).count(), 2, "{review}");
    for line in &lines {
        assert!(line.contains("refused"), "{line}\n{review}");
    }
}

/// Reads the victim's workspace by its host path, through `/proc/PID/cwd`, and searches for it.
const READ_ATTACK: &str = r#"for f in "$VICTIM_SCRATCH/repo/secret.txt" "/proc/$VICTIM_PID/cwd/secret.txt" "/proc/$VICTIM_PID/environ" "/proc/$VICTIM_AGENT_PID/environ"; do
  if out=$(cat "$f" 2>&1); then echo "ATTACK read $f: READ $out"; else echo "ATTACK read $f: refused: $out"; fi
done
echo "ATTACK list $VICTIM_SCRATCH: $(ls -la "$VICTIM_SCRATCH" "$VICTIM_SCRATCH/repo" 2>&1 | tr '\n' ' ')"
for f in $(find /tmp /var/tmp /dev/shm /run -maxdepth 6 -name secret.txt 2>/dev/null); do
  echo "ATTACK found $f: $(cat "$f" 2>&1)"
done
for p in /proc/[0-9]*; do
  if grep -q "VICT""@MARKER_TAIL@" "$p/cmdline" 2>/dev/null; then
    echo "ATTACK read $p/cwd/secret.txt: $(cat "$p/cwd/secret.txt" 2>&1)"
  fi
done"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_neighbour_trials_scratch_and_workspace_fails() {
    let (_, review, _, _, secret) = attack_a_neighbour("atk-read", READ_ATTACK).await;
    let lines = attack_lines(&review);
    assert!(lines.iter().any(|l| l.contains("/repo/secret.txt: refused")), "the attack ran: {review}");
    assert!(!review.contains(&secret), "the attacker read the victim's secret: {review}");
    assert!(!lines.iter().any(|l| l.contains(": READ")), "{review}");
}

/// Fills its scratch, /tmp, /dev/shm and /var/tmp (asking for 4 × the limit each), keeps them full
/// while the victim works, then reports how much each took and whether the victim finished
/// meanwhile. One command: between steps mini-swe-agent writes to the (full) scratch itself.
fn disk_fill_script() -> Vec<String> {
    let count = SCRATCH_MIB * 4;
    vec![format!(
        "touch attacker-ready; for d in \"$PWD\" /tmp /dev/shm /var/tmp; do \
         dd if=/dev/zero of=\"$d/fill\" bs=1M count={count} 2>/dev/null; done; touch filled; \
         {wait}; r=\"ATTACK the victim finished while full: $([ -e go ] && echo yes || echo no)\"; \
         for d in \"$PWD\" /tmp /dev/shm /var/tmp; do \
         r=\"$r\nATTACK filled $d: $(( $(stat -c %s \"$d/fill\") >> 20 )) of {count} MiB\"; rm -f \"$d/fill\"; done; \
         printf '# Review\\n%b\\n' \"$r\" > review.md",
        wait = wait_step("go", "attacker")
    )]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filling_scratch_does_not_make_a_neighbour_fail() {
    require_root();
    let run = format!("atk-fill-{}", nonce());
    let marker = format!("VICTIM-{}", nonce());
    let server = common::keyed_scripted_server().await;
    server.script_agent("victim", victim_script(&marker));
    server.script_agent("attacker", disk_fill_script());
    let yaml = run_yaml(&run, &["attacker", "victim"], &server.base_url());
    let coordinate = async {
        let victim = wait_for("the victim to be ready", || scratch_with(&run, "victim-ready")).await;
        let attacker = wait_for("the attacker to fill its space", || scratch_with(&run, "filled")).await;
        // The victim works while the attacker's space is full.
        std::fs::write(victim.join("repo/go"), "").unwrap();
        wait_for("the victim's trial to end", || (!victim.exists()).then_some(())).await;
        // Had the attacker stopped waiting, it finds no `go` and says so.
        let _ = std::fs::write(attacker.join("repo/go"), "");
    };
    let (_results, trials) = run_with(&yaml, coordinate).await;
    let (victim, victim_review) = trial(&trials, "victim");
    assert!(victim_review.contains("victim intact: scratch yes, tmp yes"), "{victim_review}");
    assert!(victim["findings"].as_u64() >= Some(1), "{victim}");
    let (_, review) = trial(&trials, "attacker");
    let lines = attack_lines(review);
    assert_eq!(lines.len(), 5, "{review}");
    assert_eq!(lines[0], "ATTACK the victim finished while full: yes", "{review}");
    for line in &lines[1..] {
        // "ATTACK filled DIR: N of M MiB": stopped by the limit, not by the count asked for.
        let filled: u64 = line.rsplit(": ").next().unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!(filled <= SCRATCH_MIB, "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_does_not_outlive_its_trial() {
    require_root();
    let run = format!("atk-daemon-{}", nonce());
    let marker = format!("DAEMON-{}", nonce());
    let server = common::keyed_scripted_server().await;
    // Three ways to outlive a command: setsid + nohup, a double fork into a new session, and a
    // process that ignores SIGTERM and SIGHUP.
    server.script_agent(
        "attacker",
        vec![
            format!("setsid nohup sh -c 'while :; do sleep 0.2; done' {marker} > /dev/null 2>&1 &"),
            format!("( setsid sh -c 'while :; do sleep 0.2; done' {marker} > /dev/null 2>&1 & ) ; true"),
            format!("nohup sh -c 'trap \"\" TERM HUP; while :; do sleep 0.2; done' {marker} > /dev/null 2>&1 & true"),
            format!(
                "n=$(grep -l {} /proc/[0-9]*/cmdline 2>/dev/null | wc -l); printf '# Review\\n\\nATTACK daemons running: %s\\n' \"$n\" > review.md",
                &marker
            ),
        ],
    );
    let yaml = run_yaml(&run, &["attacker"], &server.base_url());
    let (_results, trials) = run_with(&yaml, async {}).await;
    let (result, review) = trial(&trials, "attacker");
    // The grep's own command line holds the marker too, so at least 4.
    let running: u32 = review.trim().rsplit(": ").next().unwrap().parse().unwrap();
    assert!(running >= 4, "the daemons ran during the trial: {review}");
    assert_eq!(pids_with(&marker), Vec::<u32>::new(), "a daemon outlived its trial");
    // The trial's record says how it was isolated.
    let isolation = &result["isolation"];
    let applied: Vec<&str> = isolation["applied"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for what in ["pid namespace", "seccomp filter", "agent user", "scratch: a tmpfs", "mount namespace", "network"] {
        assert!(applied.iter().any(|a| a.starts_with(what)), "{what} not in {applied:?}");
    }
    assert!(isolation.get("missing").is_none(), "{isolation}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_shm_var_tmp_and_run_do_not_persist_between_trials() {
    require_root();
    let marker = format!("lightsout-left-{}", nonce());
    let places = "/dev/shm /var/tmp /run/lock /run /tmp";
    let server = common::keyed_scripted_server().await;
    server.script_agent(
        "writer",
        vec![format!(
            "{{ printf '# Review\\n\\n'; for d in {places}; do \
             if echo {marker} > \"$d/{marker}\" 2>/dev/null; then echo \"ATTACK wrote $d\"; else echo \"ATTACK could not write $d\"; fi; \
             done; }} > review.md"
        )],
    );
    server.script_agent(
        "reader",
        vec![format!(
            "{{ printf '# Review\\n\\n'; for d in {places}; do \
             if [ -e \"$d/{marker}\" ]; then echo \"ATTACK found $d/{marker}\"; else echo \"ATTACK nothing left in $d\"; fi; \
             done; }} > review.md"
        )],
    );
    let writer = run_yaml(&format!("atk-shm-w-{}", nonce()), &["writer"], &server.base_url());
    let (_w, written) = run_with(&writer, async {}).await;
    let (_, review) = trial(&written, "writer");
    let wrote: Vec<&str> = attack_lines(review).into_iter().filter(|l| l.starts_with("ATTACK wrote")).collect();
    for place in ["/dev/shm", "/var/tmp", "/tmp"] {
        assert!(wrote.contains(&format!("ATTACK wrote {place}").as_str()), "{review}");
    }
    for place in places.split(' ') {
        assert!(!Path::new(place).join(&marker).exists(), "{place}/{marker} persisted on the host");
    }
    let reader = run_yaml(&format!("atk-shm-r-{}", nonce()), &["reader"], &server.base_url());
    let (_r, read) = run_with(&reader, async {}).await;
    let (_, review) = trial(&read, "reader");
    let lines = attack_lines(review);
    assert_eq!(lines.len(), 5, "{review}");
    assert!(lines.iter().all(|l| l.starts_with("ATTACK nothing left in")), "{review}");
}
