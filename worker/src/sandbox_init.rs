//! The sandbox's init: the first process of the trial's PID namespace (when the sandbox could
//! make one), which starts the agent and outlives it only long enough to collect its status.
//!
//! `… sandbox --init [--report-fd N] [--user UID:GID] -- PROGRAM ARGS` (its `/proc`, when it has
//! a namespace, was mounted by the sandbox as it started it: see `sandbox::ProcMount`):
//! 1. sets `no_new_privs` and installs the system-call filter ([`crate::seccomp`]), which the
//!    agent inherits;
//! 2. reports what it applied on descriptor N ([`Report`]) and closes it;
//! 3. runs the agent as the given user, reaping every orphan handed to it, and exits with the
//!    agent's status. As PID 1 its exit kills everything left in the namespace — a `setsid`
//!    daemon included — before the sandbox, and so the worker, sees the trial end. Without a
//!    namespace it is a child subreaper instead and kills whatever of the agent's descendants
//!    are left.
//!
//! The time limit's SIGTERM reaches the agent directly (it is in the worker's process group for
//! the sandbox); PID 1 of a namespace ignores it, and a subreaper waits on, so the agent keeps its
//! grace period. SIGKILL ends the init, and with it the namespace.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};

use crate::agent_process::AgentUser;

/// The init's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitArgs {
    pub report_fd: Option<i32>,
    pub user: Option<AgentUser>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl InitArgs {
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some(fd) = self.report_fd {
            out.extend(["--report-fd".into(), fd.to_string().into()]);
        }
        if let Some(user) = self.user {
            out.extend(["--user".into(), format!("{}:{}", user.uid, user.gid).into()]);
        }
        out.push("--".into());
        out.push(self.program.clone());
        out.extend(self.args.iter().cloned());
        out
    }

    pub fn parse(args: &[OsString]) -> Result<InitArgs, String> {
        let (mut report_fd, mut user) = (None, None);
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = || rest.next().cloned().ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()));
            match arg.to_str() {
                Some("--report-fd") => {
                    report_fd =
                        Some(value()?.to_string_lossy().parse::<i32>().map_err(|e| format!("--report-fd: {e}"))?)
                }
                Some("--user") => user = Some(parse_user(&value()?.to_string_lossy())?),
                Some("--") => {
                    let program = rest.next().cloned().ok_or("no program after --")?;
                    return Ok(InitArgs { report_fd, user, program, args: rest.cloned().collect() });
                }
                _ => return Err(format!("unexpected sandbox-init argument {}", arg.to_string_lossy())),
            }
        }
        Err("no -- PROGRAM".into())
    }
}

/// `uid:gid`.
pub(crate) fn parse_user(text: &str) -> Result<AgentUser, String> {
    let (uid, gid) = text.split_once(':').ok_or("--user is uid:gid")?;
    Ok(AgentUser {
        uid: uid.parse().map_err(|_| format!("--user: bad uid {uid:?}"))?,
        gid: gid.parse().map_err(|_| format!("--user: bad gid {gid:?}"))?,
    })
}

/// What the sandbox tells the worker it applied and what it could not, one line each
/// (`applied\tWHAT` or `missing\tWHAT: WHY`) on a descriptor the worker reads once the sandbox
/// has exited. The agent never holds that descriptor, so it cannot forge a line.
pub struct Report(Option<File>);

impl Report {
    /// Takes ownership of descriptor `fd`, if any.
    pub fn on(fd: Option<i32>) -> Report {
        // SAFETY: the descriptor was handed to this process for this purpose alone (see
        // `agent_process::run_reporting`) and nothing else owns it.
        Report(fd.filter(|fd| *fd >= 0).map(|fd| unsafe { File::from_raw_fd(fd) }))
    }

    pub fn applied(&mut self, what: &str) {
        self.line(&format!("applied\t{what}"));
    }

    pub fn missing(&mut self, what: &str, why: &str) {
        self.line(&format!("missing\t{what}: {why}"));
    }

    fn line(&mut self, line: &str) {
        if let Some(file) = &mut self.0 {
            // One write per line: the sandbox and its init may both be writing (a pipe keeps a
            // write of up to PIPE_BUF bytes whole).
            let _ = file.write_all(format!("{}\n", line.replace('\n', " ")).as_bytes());
        }
    }

    /// Parses a report into (applied, missing).
    pub fn parse(text: &str) -> (Vec<String>, Vec<String>) {
        let (mut applied, mut missing) = (Vec::new(), Vec::new());
        for line in text.lines() {
            match line.split_once('\t') {
                Some(("applied", what)) => applied.push(what.to_string()),
                Some(("missing", what)) => missing.push(what.to_string()),
                _ => {}
            }
        }
        (applied, missing)
    }
}

/// The init's main: returns the exit code to exit with.
pub fn run(args: &InitArgs) -> i32 {
    let mut report = Report::on(args.report_fd);
    // SAFETY: getpid and prctl with integer arguments.
    let pid1 = unsafe { libc::getpid() } == 1;
    unsafe {
        // Dies with the sandbox process, should that be killed first.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        if !pid1 {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
            ignore_sigterm();
        }
    }
    // In a PID namespace of its own the agent cannot reach anything outside it; otherwise the
    // filter keeps its hands off this init, the sandbox and the worker above them.
    let filter = if pid1 {
        crate::seccomp::Filter::build()
    } else {
        // SAFETY: getpgid with an integer argument.
        crate::seccomp::Filter::protecting(&ancestors(), unsafe { libc::getpgid(0) })
    };
    match filter.and_then(|filter| filter.install()) {
        Ok(()) => report.applied(&format!(
            "seccomp filter and no_new_privs (refusing {}{})",
            crate::seccomp::refused_calls().join(", "),
            if pid1 { "" } else { "; signals to the worker, the sandbox and this init" }
        )),
        Err(e) => report.missing("seccomp filter", &e),
    }
    let mut command = std::process::Command::new(&args.program);
    command.args(&args.args);
    if let Some(user) = args.user {
        // The standard library drops root's supplementary groups (setgroups) before it changes
        // the uid, so the agent holds none of them.
        command.uid(user.uid).gid(user.gid);
        report.applied(&format!("agent user {}:{} of its own", user.uid, user.gid));
    }
    // Closed before the agent starts: it must not write to the report.
    drop(report);
    let agent = match command.spawn() {
        Ok(child) => child.id() as libc::pid_t,
        Err(e) => {
            eprintln!("lightsout sandbox: starting {}: {e}", args.program.to_string_lossy());
            return 125;
        }
    };
    let code = reap_until(agent);
    if !pid1 {
        kill_descendants();
    }
    code
}

/// This process and its ancestors up to (not including) pid 1: the init, the sandbox, the worker
/// (or `lightsout run`) and whatever started it.
fn ancestors() -> Vec<libc::pid_t> {
    // SAFETY: getpid with no arguments.
    let mut chain = vec![unsafe { libc::getpid() }];
    while let Some(&pid) = chain.last() {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| {
            // The command name may hold spaces and parentheses: the fields follow its last `)`.
            let fields = &stat[stat.rfind(')')? + 1..];
            fields.split_whitespace().nth(1)?.parse::<libc::pid_t>().ok()
        });
        match parent {
            Some(parent) if parent > 1 && !chain.contains(&parent) && chain.len() < 64 => chain.push(parent),
            _ => break,
        }
    }
    chain
}

/// Reaps children (orphans handed to this init included) until `agent` exits; its exit code,
/// or 128 + the signal that ended it.
fn reap_until(agent: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == agent {
            let status = std::process::ExitStatus::from_raw(status);
            return status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 125;
        }
    }
}

/// Kills this process's children until none is left: killing one hands its own children to this
/// subreaper, so each round reaches one generation further down.
fn kill_descendants() {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    for _ in 0..10_000 {
        let children = children_of(me);
        if children.is_empty() {
            return;
        }
        for child in children {
            let mut status = 0;
            // SAFETY: signals and reaps a child of this process.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                libc::waitpid(child, &mut status, 0);
            }
        }
    }
}

/// The processes whose parent is `parent`, from `/proc/*/stat`.
fn children_of(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: libc::pid_t = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`: the command may hold spaces and parentheses.
            let ppid: libc::pid_t = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
}

/// Lets SIGTERM through to nothing but a no-op handler, so that the time limit's SIGTERM to the
/// whole group ends the agent while this process waits for it (a handler, unlike `SIG_IGN`, is
/// reset in the programs this process starts).
pub(crate) fn ignore_sigterm() {
    extern "C" fn noop(_: libc::c_int) {}
    // SAFETY: installs an async-signal-safe handler that does nothing.
    unsafe {
        libc::signal(libc::SIGTERM, noop as *const () as libc::sighandler_t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_reports_round_trip() {
        let args = InitArgs {
            report_fd: Some(3),
            user: Some(AgentUser { uid: 2_000_000_001, gid: 2_000_000_001 }),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "echo --user".into()],
        };
        assert_eq!(InitArgs::parse(&args.to_args()).unwrap(), args);
        assert!(InitArgs::parse(&["--report-fd".into(), "x".into()]).is_err());
        let (applied, missing) = Report::parse("applied\tpid namespace\nmissing\tseccomp filter: EINVAL\nnoise\n");
        assert_eq!((applied, missing), (vec!["pid namespace".to_string()], vec!["seccomp filter: EINVAL".to_string()]));
    }

    #[test]
    fn children_are_found_by_their_parent() {
        let mut child = std::process::Command::new("/bin/sleep").arg("30").spawn().unwrap();
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        assert!(children_of(me).contains(&(child.id() as libc::pid_t)));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
