//! The sandbox where it cannot have everything, each environment simulated for real around the
//! sandbox binary (the test process is root, as CI runs):
//! - not root (uid 65534), where the kernel allows unprivileged user namespaces;
//! - root without `CAP_SYS_ADMIN` (a container with the default capabilities: `capsh
//!   --drop=cap_sys_admin`), dropping to an agent user of its own;
//! - no `CAP_SYS_ADMIN` and no user namespace (a restricted pod: inside a user namespace whose
//!   `user.max_user_namespaces` is 0, `CAP_SYS_ADMIN` dropped).
//!
//! In each, the agent leaves a `setsid` daemon (which must be dead when the sandbox exits) and
//! tries `ptrace` and `process_vm_readv` on a process of its own (which the filter must refuse),
//! and the report must say exactly what was and was not applied.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lightsout_worker::agent_process::{self, AgentExit, AgentRun, AgentUser, LaunchSpec, Limits};
use lightsout_worker::sandbox::SandboxArgs;
use lightsout_worker::sandbox_init::Report;

const WORKER: &str = env!("CARGO_BIN_EXE_lightsout-worker");
const NOBODY: AgentUser = AgentUser { uid: 65534, gid: 65534 };

fn nonce() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    lightsout_api::hash::sha256_hex(format!("{nanos}{:?}", std::thread::current().id()).as_bytes())[..12].to_string()
}

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the test simulates the other environments from root, as CI runs");
}

/// What the agent does: reports its filter and uid, leaves a daemon, tries to reach into a
/// process of its own, reads a hidden file, leaves a file in /tmp, and talks to the proxy port
/// when there is one.
const AGENT: &str = r#"
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status
echo "UID $(id -u)"
setsid sh -c 'while :; do sleep 0.2; done' "$MARKER" > /dev/null 2>&1 &
sleep 30 &
victim=$!
sleep 0.5
echo "DAEMONS $(grep -l "$MARKER" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)"
echo "PID1 $(tr '\0' '\n' < /proc/1/cmdline | head -1)"
/usr/bin/python3 - "$victim" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
r = libc.ptrace(16, pid, 0, 0)
print('PTRACE %s' % ('ATTACHED' if r == 0 else 'refused: ' + os.strerror(ctypes.get_errno())))
buf = ctypes.create_string_buffer(64)
local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = (ctypes.c_void_p * 2)(0x400000, 64)
n = libc.process_vm_readv(pid, local, 1, remote, 1, 0)
print('VM_READV %s' % ('READ' if n >= 0 else 'refused: ' + os.strerror(ctypes.get_errno())))
PY
kill "$victim"
if kill -0 "$WORKER_PID" 2>/dev/null; then echo "WORKER signallable"; else echo "WORKER out of reach"; fi
echo "HIDDEN $(cat "$HIDDEN_FILE" 2>/dev/null || echo unreadable)"
echo left > "/tmp/$MARKER" 2>/dev/null
if [ -n "$PROXY_PORT" ] && exec 3<>"/dev/tcp/127.0.0.1/$PROXY_PORT"; then
  echo ping >&3; read -r answer <&3; echo "PROXY $answer"
fi
"#;

/// One environment's run of [`AGENT`] in the sandbox.
struct Ran {
    run: AgentRun,
    output: String,
    stderr: String,
    applied: Vec<String>,
    missing: Vec<String>,
    marker: String,
    secret: String,
}

impl Ran {
    fn lines(&self) -> Vec<&str> {
        self.output.lines().map(str::trim).collect()
    }

    fn has(&self, line: &str) -> bool {
        self.lines().contains(&line)
    }

    fn applied(&self, what: &str) -> bool {
        self.applied.iter().any(|a| a.starts_with(what))
    }

    /// What ran the same in every environment: the filter, the reaper, nothing left in /tmp.
    fn assert_filtered_and_reaped(&self) {
        assert!(matches!(self.run.exit, AgentExit::Exited(s) if s.success()), "{:?}: {}", self.run.exit, self.stderr);
        assert!(self.has("NoNewPrivs:\t1") && self.has("Seccomp:\t2"), "{}", self.output);
        assert!(self.applied("seccomp filter and no_new_privs"), "{:?}", self.applied);
        assert!(self.has("PTRACE refused: Operation not permitted"), "{}", self.output);
        assert!(self.has("VM_READV refused: Operation not permitted"), "{}", self.output);
        // Outside its PID namespace, or refused by the filter where there is none.
        assert!(self.has("WORKER out of reach"), "{}", self.output);
        // The daemon and the grep that counts: the daemon ran.
        let daemons = self.lines().iter().find_map(|l| l.strip_prefix("DAEMONS ")).and_then(|n| n.parse::<u32>().ok());
        assert_eq!(daemons, Some(2), "{}", self.output);
        assert_eq!(processes_with(&self.marker), Vec::<u32>::new(), "the setsid daemon outlived the sandbox");
    }

    /// What a mount and a PID namespace of its own give.
    fn assert_hidden_and_own_proc(&self) {
        assert!(self.has("HIDDEN unreadable") && !self.output.contains(&self.secret), "{}", self.output);
        assert!(self.has("PID1 lightsout-sandbox-init"), "the agent's /proc is its namespace's: {}", self.output);
    }
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

/// A directory anyone may use (the sandbox may run as nobody).
fn open_dir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    path.to_path_buf()
}

/// Answers `pong` to each line on a Unix socket at `path` (the metering proxy's place).
fn pong_server(path: &Path) {
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{BufRead, Write};
            let mut line = String::new();
            let mut reader = std::io::BufReader::new(&stream);
            if reader.read_line(&mut line).is_ok() {
                let _ = (&stream).write_all(b"pong\n");
            }
        }
    });
}

/// Runs [`AGENT`] in the sandbox, started through `wrapper` (a command line that ends by running
/// its arguments) as `spawn_user`, asking for an agent user `agent_user` and, with `proxy`, a
/// network namespace forwarding to a pong server.
async fn run_agent(wrapper: &[&str], spawn_user: Option<AgentUser>, agent_user: Option<AgentUser>, proxy: bool) -> Ran {
    let scratch = tempfile::tempdir_in("/tmp").unwrap();
    let base = open_dir(scratch.path());
    let (work, hidden, run_dir) =
        (open_dir(&base.join("work")), open_dir(&base.join("hidden")), open_dir(&base.join("run")));
    if let Some(user) = agent_user {
        agent_process::hand_over(&[&work], Some(user)).unwrap();
    }
    let secret = format!("SECRET-{}", nonce());
    std::fs::write(hidden.join("truth"), &secret).unwrap();
    std::fs::set_permissions(hidden.join("truth"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let socket = run_dir.join("proxy.sock");
    if proxy {
        pong_server(&socket);
    }
    let marker = format!("LIGHTSOUT-DEGRADED-{}", nonce());
    let sandbox = SandboxArgs {
        proxy: proxy.then(|| (socket.clone(), 4000)),
        hide: vec![hidden.clone()],
        keep: vec![work.clone()],
        tmpfs_mib: 64,
        report_fd: Some(agent_process::REPORT_FD),
        user: agent_user,
        program: "/bin/bash".into(),
        args: vec!["-c".into(), AGENT.into()],
    };
    let mut args: Vec<OsString> = wrapper.iter().skip(1).map(OsString::from).collect();
    args.push(WORKER.into());
    args.push("sandbox".into());
    args.extend(sandbox.to_args());
    let launch = LaunchSpec {
        program: wrapper.first().copied().unwrap_or(WORKER).into(),
        args: if wrapper.is_empty() { args.split_off(1) } else { args },
        env: vec![
            ("PATH".into(), "/usr/sbin:/usr/bin:/sbin:/bin".into()),
            ("MARKER".into(), marker.clone()),
            ("HIDDEN_FILE".into(), hidden.join("truth").display().to_string()),
            ("PROXY_PORT".into(), if proxy { "4000".into() } else { String::new() }),
            // The test process stands for the worker that runs the sandbox.
            ("WORKER_PID".into(), std::process::id().to_string()),
        ],
        cwd: work.clone(),
    };
    let (out, err) = (run_dir.join("out"), run_dir.join("err"));
    let limits = Limits { timeout: Duration::from_secs(60), grace: Duration::from_secs(2) };
    let (run, report) = agent_process::run_reporting(&launch, spawn_user, limits, &out, &err).await.unwrap();
    let (applied, missing) = Report::parse(&report);
    let ran = Ran {
        run,
        output: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
        applied,
        missing,
        marker,
        secret,
    };
    assert!(!Path::new("/tmp").join(&ran.marker).exists() || !ran.applied("mount namespace"), "a private /tmp leaked");
    let _ = std::fs::remove_file(Path::new("/tmp").join(&ran.marker));
    ran
}

/// The wrapper that takes `CAP_SYS_ADMIN` away (from the bounding set, so the sandbox, which
/// is root, execs without it).
const NO_SYS_ADMIN: &[&str] = &["/usr/sbin/capsh", "--drop=cap_sys_admin", "--", "-c", "exec \"$0\" \"$@\""];

/// The wrapper that simulates a restricted pod: a user namespace (so its limits can be set)
/// that allows no further user namespace, and no `CAP_SYS_ADMIN` in it.
const NO_USER_NAMESPACES: &[&str] = &[
    "/usr/bin/unshare",
    "--user",
    "--map-root-user",
    "/bin/sh",
    "-c",
    "echo 0 > /proc/sys/user/max_user_namespaces && exec /usr/sbin/capsh --drop=cap_sys_admin -- -c 'exec \"$0\" \"$@\"' \"$@\"",
    "restricted",
];

#[tokio::test]
async fn not_root_the_sandbox_makes_its_namespaces_in_a_user_namespace() {
    require_root();
    let max: u64 = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").unwrap().trim().parse().unwrap();
    assert!(max > 0, "this test needs unprivileged user namespaces, as CI's kernel allows");
    let ran = run_agent(&[], Some(NOBODY), None, true).await;
    ran.assert_filtered_and_reaped();
    ran.assert_hidden_and_own_proc();
    assert!(ran.has("UID 65534"), "{}", ran.output);
    assert!(ran.has("PROXY pong"), "the proxy is reached through the network namespace: {}", ran.output);
    for what in [
        "user namespace of its own (uid 65534 without CAP_SYS_ADMIN)",
        "ipc namespace",
        "mount namespace: hidden /tmp/",
        "network namespace",
        "pid namespace: everything left in it dies",
        "pid namespace's own /proc",
    ] {
        assert!(ran.applied(what), "{what} not in {:?}", ran.applied);
    }
    assert!(
        ran.applied.iter().any(|a| a.contains("private /tmp, /dev/shm, /var/tmp, /run of 64 MiB")),
        "{:?}",
        ran.applied
    );
    assert_eq!(
        ran.missing,
        vec!["agent user of its own (the agent runs as the worker's uid 65534): leasing a user id takes root"],
        "{:?}",
        ran.applied
    );
}

#[tokio::test]
async fn root_without_cap_sys_admin_maps_its_agent_user_into_a_user_namespace() {
    require_root();
    let ran = run_agent(NO_SYS_ADMIN, None, Some(NOBODY), true).await;
    ran.assert_filtered_and_reaped();
    assert!(ran.has("UID 65534"), "the agent runs as its own user: {}", ran.output);
    ran.assert_hidden_and_own_proc();
    assert!(ran.has("PROXY pong"), "{}", ran.output);
    for what in [
        "user namespace of its own (uid 0 without CAP_SYS_ADMIN)",
        "ipc namespace",
        "mount namespace",
        "network namespace",
        "pid namespace: everything",
        "pid namespace's own /proc",
        "agent user 65534:65534 of its own",
    ] {
        assert!(ran.applied(what), "{what} not in {:?}", ran.applied);
    }
    assert_eq!(ran.missing, Vec::<String>::new());
}

#[tokio::test]
async fn without_cap_sys_admin_or_user_namespaces_the_filter_and_the_reaper_still_hold() {
    require_root();
    let ran = run_agent(NO_USER_NAMESPACES, None, None, false).await;
    ran.assert_filtered_and_reaped();
    // Nothing hidden, and the host's /proc: what the record must then say is missing.
    assert!(ran.output.contains("HIDDEN SECRET-"), "{}", ran.output);
    assert!(!ran.has("PID1 lightsout-sandbox-init"), "{}", ran.output);
    assert_eq!(ran.applied.len(), 1, "only the filter: {:?}", ran.applied);
    let why = ": uid 0 without CAP_SYS_ADMIN, and no user namespace could be made: unshare(CLONE_NEWUSER): No space left on device";
    for what in ["mount namespace (", "pid namespace (", "ipc namespace"] {
        assert!(ran.missing.iter().any(|m| m.starts_with(what) && m.contains(why)), "{what}: {:?}", ran.missing);
    }
    assert!(ran.missing.iter().any(|m| m.starts_with("agent user of its own")), "{:?}", ran.missing);
    assert_eq!(ran.missing.len(), 4, "{:?}", ran.missing);
}

/// Asked to forward to the proxy where no network namespace can be made (the worker asks only
/// when its probe said one can), the sandbox refuses to start the agent, which could not reach
/// the proxy: exit 125, an infrastructure failure, not a model's.
#[tokio::test]
async fn without_a_network_namespace_a_proxy_forward_is_refused() {
    require_root();
    let ran = run_agent(NO_USER_NAMESPACES, None, None, true).await;
    assert!(matches!(ran.run.exit, AgentExit::Exited(s) if s.code() == Some(125)), "{:?}", ran.run.exit);
    assert!(ran.stderr.contains("the network namespace the proxy is forwarded into"), "{}", ran.stderr);
    assert!(ran.output.is_empty(), "the agent did not start: {}", ran.output);
}

/// `--probe-network`, which the worker asks once to decide how the agent reaches the proxy.
#[test]
fn the_network_probe_says_what_the_environment_allows() {
    require_root();
    let probe = |wrapper: &[&str], user: Option<AgentUser>| {
        let mut command = std::process::Command::new(wrapper.first().copied().unwrap_or(WORKER));
        command.args(wrapper.iter().skip(1)).args(if wrapper.is_empty() { vec![] } else { vec![WORKER] });
        command.args(["sandbox", "--probe-network"]);
        if let Some(user) = user {
            std::os::unix::process::CommandExt::uid(&mut command, user.uid);
            std::os::unix::process::CommandExt::gid(&mut command, user.gid);
        }
        let output = command.output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    assert_eq!(probe(&[], None), (Some(0), String::new()));
    assert_eq!(probe(&[], Some(NOBODY)), (Some(0), String::new()));
    assert_eq!(probe(NO_SYS_ADMIN, None), (Some(0), String::new()));
    let (code, why) = probe(NO_USER_NAMESPACES, None);
    assert_eq!(code, Some(1));
    assert!(why.contains("no user namespace could be made: unshare(CLONE_NEWUSER): No space left on device"), "{why}");
}
