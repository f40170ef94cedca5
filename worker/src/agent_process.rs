//! Running an agent process: a clean environment, its own process group, an unprivileged user
//! when the worker runs as root, output to log files, and a time limit that sends SIGTERM to
//! the whole group, waits a grace period, then kills the group — keeping whatever the agent had
//! written by then.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What to run, and with which environment. Nothing of the worker's own environment is passed
/// on: only `env` (so no provider key, storage credential or other secret can leak through it).
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// The user an agent runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentUser {
    pub uid: u32,
    pub gid: u32,
}

impl AgentUser {
    /// `nobody:nogroup` when the worker runs as root; otherwise the worker's own user (it is
    /// already unprivileged). Trials lease a user of their own instead (see
    /// [`crate::uid_lease`]); this one serves tests and benchmarks.
    pub fn for_this_process() -> Option<AgentUser> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        (unsafe { libc::geteuid() } == 0).then_some(AgentUser { uid: 65534, gid: 65534 })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
}

#[derive(Debug)]
pub enum AgentExit {
    Exited(ExitStatus),
    /// The time limit ended it.
    TimedOut {
        killed: bool,
    },
}

#[derive(Debug)]
pub struct AgentRun {
    pub exit: AgentExit,
    pub duration: Duration,
}

/// Runs `spec` to completion or to the time limit. Standard output and error go to the given
/// files.
pub async fn run(
    spec: &LaunchSpec,
    user: Option<AgentUser>,
    limits: Limits,
    stdout: &Path,
    stderr: &Path,
) -> std::io::Result<AgentRun> {
    run_with(spec, user, limits, stdout, stderr, None).await
}

/// The descriptor a sandbox started by [`run_reporting`] writes its report on.
pub const REPORT_FD: RawFd = 3;
/// The most of a report that is read.
const MAX_REPORT_BYTES: usize = 64 << 10;

/// Like [`run`], with a pipe on descriptor [`REPORT_FD`] of the process (see
/// [`crate::sandbox_init::Report`]); returns what was written to it besides the run.
pub async fn run_reporting(
    spec: &LaunchSpec,
    user: Option<AgentUser>,
    limits: Limits,
    stdout: &Path,
    stderr: &Path,
) -> std::io::Result<(AgentRun, String)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two descriptors, owned just below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let ran = run_with(spec, user, limits, stdout, stderr, Some(write)).await?;
    // Every writer has exited: the sandbox, its init (which closed it before the agent started).
    let mut report = Vec::new();
    let mut file = std::fs::File::from(read);
    let mut buffer = [0u8; 4096];
    while report.len() < MAX_REPORT_BYTES {
        match std::io::Read::read(&mut file, &mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => report.extend_from_slice(&buffer[..n]),
        }
    }
    Ok((ran, String::from_utf8_lossy(&report).into_owned()))
}

async fn run_with(
    spec: &LaunchSpec,
    user: Option<AgentUser>,
    limits: Limits,
    stdout: &Path,
    stderr: &Path,
    report: Option<OwnedFd>,
) -> std::io::Result<AgentRun> {
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(stdout)?)
        .stderr(std::fs::File::create(stderr)?)
        // Its own process group, so that the time limit reaches every process it started.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(user) = user {
        // The standard library drops root's supplementary groups (setgroups) before it changes
        // the uid, so the agent holds none of them.
        command.uid(user.uid).gid(user.gid);
    }
    if let Some(write) = report.as_ref().map(|fd| fd.as_raw_fd()) {
        // SAFETY: dup2 and fcntl are async-signal-safe and touch only descriptors of the child.
        unsafe {
            command.pre_exec(move || {
                // dup2 onto itself would keep close-on-exec; clear it instead.
                let result = if write == REPORT_FD {
                    libc::fcntl(write, libc::F_SETFD, 0)
                } else {
                    libc::dup2(write, REPORT_FD)
                };
                if result < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let started = Instant::now();
    let spawned = command.spawn();
    // The child has its copy; the worker's must go, or reading the report would never end.
    drop(report);
    let mut child = spawned?;
    let pgid = child.id().map(|id| id as libc::pid_t);
    let exit = match tokio::time::timeout(limits.timeout, child.wait()).await {
        Ok(status) => AgentExit::Exited(status?),
        Err(_) => {
            signal_group(pgid, libc::SIGTERM);
            let killed = tokio::time::timeout(limits.grace, child.wait()).await.is_err();
            // Even when the leader exited, stragglers in its group are killed.
            signal_group(pgid, libc::SIGKILL);
            let _ = child.wait().await;
            AgentExit::TimedOut { killed }
        }
    };
    Ok(AgentRun { exit, duration: started.elapsed() })
}

fn signal_group(pgid: Option<libc::pid_t>, signal: libc::c_int) {
    if let Some(pgid) = pgid.filter(|p| *p > 0) {
        // SAFETY: killpg only sends a signal; a group that no longer exists yields ESRCH.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// Gives the agent's user ownership of its working directories (when the worker is root), and
/// makes each of them its alone (mode 0700): no other trial's user may enter them.
pub fn hand_over(paths: &[&Path], user: Option<AgentUser>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Some(user) = user else { return Ok(()) };
    for path in paths {
        chown_tree(path, user).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

fn chown_tree(path: &Path, user: AgentUser) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))?;
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), user)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, dir: &Path) -> LaunchSpec {
        LaunchSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into()), ("ONLY".into(), "this".into())],
            cwd: dir.to_path_buf(),
        }
    }

    #[tokio::test]
    async fn the_environment_is_only_what_is_given() {
        std::env::set_var("LIGHTSOUT_TEST_SECRET", "must-not-leak");
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("out"), dir.path().join("err"));
        let limits = Limits { timeout: Duration::from_secs(10), grace: Duration::from_secs(1) };
        let run = run(&sh("env", dir.path()), None, limits, &out, &err).await.unwrap();
        assert!(matches!(run.exit, AgentExit::Exited(s) if s.success()));
        let env = std::fs::read_to_string(&out).unwrap();
        assert!(env.contains("ONLY=this") && !env.contains("must-not-leak"), "{env}");
    }

    #[tokio::test]
    async fn the_time_limit_ends_the_whole_group_and_keeps_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("out"), dir.path().join("err"));
        // A child that ignores SIGTERM, and a grandchild that would write later.
        let script = "echo partial > kept.txt; (trap '' TERM; sleep 30; echo late > late.txt) & trap '' TERM; sleep 30";
        let limits = Limits { timeout: Duration::from_millis(300), grace: Duration::from_millis(200) };
        let run = run(&sh(script, dir.path()), None, limits, &out, &err).await.unwrap();
        assert!(matches!(run.exit, AgentExit::TimedOut { killed: true }), "{:?}", run.exit);
        assert!(run.duration < Duration::from_secs(5));
        assert_eq!(std::fs::read_to_string(dir.path().join("kept.txt")).unwrap(), "partial\n");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!dir.path().join("late.txt").exists(), "a straggler survived the kill");
    }
}
