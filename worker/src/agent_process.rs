//! Running an agent process: a clean environment, its own process group, an unprivileged user
//! when the worker runs as root, output to log files, and a time limit that sends SIGTERM to
//! the whole group, waits a grace period, then kills the group — keeping whatever the agent had
//! written by then.

use std::ffi::OsString;
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
    /// already unprivileged).
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
    let started = Instant::now();
    let mut child = command.spawn()?;
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

/// Gives the agent's user ownership of its working directories (when the worker is root).
pub fn hand_over(paths: &[&Path], user: Option<AgentUser>) -> std::io::Result<()> {
    let Some(user) = user else { return Ok(()) };
    for path in paths {
        chown_tree(path, user)?;
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
