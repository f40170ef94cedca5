//! The sandbox an agent runs in.
//!
//! The worker re-executes itself as `… sandbox [--socket S --port P] [--hide DIR]… [--keep DIR]…
//! [--tmpfs-mib N] [--report-fd N] [--user UID:GID] -- PROGRAM ARGS`. As root, that process:
//! 1. enters new network, mount and IPC namespaces (mounts private, so nothing leaks back to the
//!    host; System V IPC and POSIX message queues of its own);
//! 2. covers each `--hide` directory (the dataset, the results, the worker's spool) with an empty
//!    tmpfs, so ground truth and other trials' results cannot be read;
//! 3. gives the agent a private `/tmp`: a fresh tmpfs over the host's, so it neither sees what
//!    others left there nor leaves anything behind. Each `--keep` directory under `/tmp` (the
//!    agent's workspace and home, which the worker keeps in its scratch space there) is bound
//!    back in at the same path; everything else of the host's `/tmp` — the proxy's socket and
//!    log included — is out of sight. `/dev/shm`, `/var/tmp` and `/run` get fresh tmpfs too. Each
//!    of these is limited to `--tmpfs-mib` MiB, so filling one fills nothing of a neighbour's;
//! 4. brings loopback up and forwards `127.0.0.1:P` to the metering proxy's Unix socket `S`
//!    (reached through a descriptor of its directory opened before `/tmp` was covered) — the
//!    one and only way out;
//! 5. enters a new PID namespace and starts the sandbox's init ([`crate::sandbox_init`]) as its
//!    first process, which mounts the namespace's `/proc`, installs the system-call filter and
//!    runs the agent as the given user; everything left in the namespace dies with it;
//! 6. waits for the init, in the process group the worker created for the sandbox (so the
//!    worker's time limit reaches the agent), and exits with the agent's status.
//!
//! Not as root (in a pod), none of the namespaces can be made: the agent shares the pod's
//! network (the proxy is on its loopback) and filesystem, and only the init's protections apply
//! — the filter, `no_new_privs`, and killing what the agent leaves running. What was and was not
//! applied is reported on `--report-fd` ([`crate::sandbox_init::Report`]) for the trial's record.
//!
//! The environment is the one the worker gave the sandbox (nothing of its own), passed on as is.

use std::ffi::{CString, OsString};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::agent_process::AgentUser;

/// The sandbox's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxArgs {
    /// The metering proxy's socket and the port the agent reaches it on (root only: without a
    /// network namespace the agent reaches the proxy on the host's loopback).
    pub proxy: Option<(PathBuf, u16)>,
    pub hide: Vec<PathBuf>,
    /// Directories under `/tmp` the agent keeps in its private `/tmp`.
    pub keep: Vec<PathBuf>,
    /// The size of each private tmpfs (`/tmp`, `/dev/shm`, `/var/tmp`, `/run`), in MiB.
    pub tmpfs_mib: u64,
    /// Where to report what was applied (see [`crate::sandbox_init::Report`]).
    pub report_fd: Option<i32>,
    pub user: Option<AgentUser>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// The private tmpfs size when none is given.
pub const DEFAULT_TMPFS_MIB: u64 = 1024;

impl SandboxArgs {
    /// The command-line form, after the program that re-executes the worker.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some((socket, port)) = &self.proxy {
            out.extend(["--socket".into(), socket.clone().into(), "--port".into(), port.to_string().into()]);
        }
        for dir in &self.hide {
            out.push("--hide".into());
            out.push(dir.clone().into());
        }
        for dir in &self.keep {
            out.push("--keep".into());
            out.push(dir.clone().into());
        }
        out.extend(["--tmpfs-mib".into(), self.tmpfs_mib.to_string().into()]);
        if let Some(fd) = self.report_fd {
            out.extend(["--report-fd".into(), fd.to_string().into()]);
        }
        if let Some(user) = self.user {
            out.push("--user".into());
            out.push(format!("{}:{}", user.uid, user.gid).into());
        }
        out.push("--".into());
        out.push(self.program.clone());
        out.extend(self.args.iter().cloned());
        out
    }

    pub fn parse(args: &[OsString]) -> Result<SandboxArgs, String> {
        let mut socket = None;
        let mut port = None;
        let mut hide = Vec::new();
        let mut keep = Vec::new();
        let mut tmpfs_mib = DEFAULT_TMPFS_MIB;
        let mut report_fd = None;
        let mut user = None;
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = || rest.next().cloned().ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()));
            match arg.to_str() {
                Some("--socket") => socket = Some(PathBuf::from(value()?)),
                Some("--port") => {
                    port = Some(value()?.to_string_lossy().parse::<u16>().map_err(|e| format!("--port: {e}"))?)
                }
                Some("--hide") => hide.push(PathBuf::from(value()?)),
                Some("--keep") => keep.push(PathBuf::from(value()?)),
                Some("--tmpfs-mib") => {
                    tmpfs_mib = value()?.to_string_lossy().parse::<u64>().map_err(|e| format!("--tmpfs-mib: {e}"))?
                }
                Some("--report-fd") => {
                    report_fd =
                        Some(value()?.to_string_lossy().parse::<i32>().map_err(|e| format!("--report-fd: {e}"))?)
                }
                Some("--user") => user = Some(crate::sandbox_init::parse_user(&value()?.to_string_lossy())?),
                Some("--") => {
                    let program = rest.next().cloned().ok_or("no program after --")?;
                    let proxy = match (socket, port) {
                        (Some(socket), Some(port)) => Some((socket, port)),
                        (None, None) => None,
                        _ => return Err("--socket and --port go together".into()),
                    };
                    return Ok(SandboxArgs {
                        proxy,
                        hide,
                        keep,
                        tmpfs_mib,
                        report_fd,
                        user,
                        program,
                        args: rest.cloned().collect(),
                    });
                }
                _ => return Err(format!("unexpected sandbox argument {}", arg.to_string_lossy())),
            }
        }
        Err("no -- PROGRAM".into())
    }
}

/// The entry point of both sandbox processes, given the arguments after the program's own
/// (e.g. after `lightsout-worker sandbox`): `--init …` is the sandbox's init
/// ([`crate::sandbox_init`]), anything else the sandbox itself. Returns the exit code to exit
/// with, or what is wrong with the arguments.
pub fn main(args: &[OsString]) -> Result<i32, String> {
    if args.first().is_some_and(|arg| arg == "--init") {
        let init = crate::sandbox_init::InitArgs::parse(&args[1..])?;
        return Ok(crate::sandbox_init::run(&init));
    }
    let parsed = SandboxArgs::parse(args)?;
    // This program's own arguments before the sandbox's, to start the init the same way.
    let argv: Vec<OsString> = std::env::args_os().collect();
    let leading = argv.get(1..argv.len().saturating_sub(args.len())).unwrap_or_default().to_vec();
    Ok(run(&parsed, &leading))
}

/// The sandbox process's main: returns the exit code to exit with. `leading`: the arguments that
/// select the sandbox's entry point of this program.
fn run(args: &SandboxArgs, leading: &[OsString]) -> i32 {
    match enter_and_run(args, leading) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lightsout sandbox: {e}");
            // 125, like `env` and container runtimes: the sandbox, not the agent, failed.
            125
        }
    }
}

fn check(result: libc::c_int, what: &str) -> io::Result<()> {
    if result != 0 {
        let error = io::Error::last_os_error();
        return Err(io::Error::new(error.kind(), format!("{what}: {error}")));
    }
    Ok(())
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

fn enter_and_run(args: &SandboxArgs, leading: &[OsString]) -> io::Result<i32> {
    let mut report = crate::sandbox_init::Report::on(args.report_fd);
    // The init is this same program, started once /tmp (where it may live) is covered.
    let exe = std::fs::File::open("/proc/self/exe").map_err(|e| annotate(e, "opening /proc/self/exe"))?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut pid_namespace = false;
    if root {
        enter_namespaces(args, &mut report)?;
        // Last, once the proxy's threads run: a process that entered a new PID namespace can
        // start processes (in it) but no more threads.
        // SAFETY: a plain system call.
        match check(unsafe { libc::unshare(libc::CLONE_NEWPID) }, "entering a new PID namespace") {
            Ok(()) => pid_namespace = true,
            Err(e) => report.missing("pid namespace", &e.to_string()),
        }
    } else {
        // SAFETY: geteuid has no preconditions.
        let why = format!("needs root; the worker runs as uid {}", unsafe { libc::geteuid() });
        for what in [
            "network namespace (the agent shares the worker's network)",
            "mount namespace (no private /tmp, /dev/shm, /var/tmp, /run; nothing hidden)",
            "pid namespace (the agent sees the worker's processes)",
            "ipc namespace",
            "agent user of its own (the agent runs as the worker's uid)",
        ] {
            report.missing(what, &why);
        }
    }
    let init = crate::sandbox_init::InitArgs {
        mount_proc: pid_namespace,
        report_fd: args.report_fd,
        user: args.user,
        program: args.program.clone(),
        args: args.args.clone(),
    };
    ignore_sigterm();
    let mut command = std::process::Command::new(format!("/proc/self/fd/{}", exe.as_raw_fd()));
    command.arg0("lightsout-sandbox-init").args(leading).arg("--init").args(init.to_args());
    let mut child = command.spawn().map_err(|e| annotate(e, "starting the sandbox's init"))?;
    // The init holds the report now; this process writes no more to it.
    drop(report);
    let status = child.wait()?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Root's part: network, mount and IPC namespaces, hidden directories, private tmpfs, and the
/// forwarder to the proxy.
fn enter_namespaces(args: &SandboxArgs, report: &mut crate::sandbox_init::Report) -> io::Result<()> {
    // SAFETY: unshare and mount are plain system calls on this (single-threaded, freshly
    // executed) process; their arguments are valid C strings or null where allowed.
    unsafe {
        check(
            libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS),
            "entering new network and mount namespaces (needs root)",
        )?;
        match check(libc::unshare(libc::CLONE_NEWIPC), "entering a new IPC namespace") {
            Ok(()) => report.applied("ipc namespace"),
            Err(e) => report.missing("ipc namespace", &e.to_string()),
        }
        let root = CString::new("/").expect("no NUL");
        check(
            libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
            "making mounts private",
        )?;
        // A directory that does not exist holds nothing to hide (and cannot be mounted over).
        for dir in args.hide.iter().filter(|dir| dir.is_dir()) {
            mount_tmpfs(dir, "mode=0755,size=1m").map_err(|e| annotate(e, &format!("hiding {}", dir.display())))?;
        }
    }
    // The proxy's socket, reached through its directory's descriptor once /tmp is covered.
    let forward_to = match &args.proxy {
        Some((socket, port)) => {
            let dir = socket.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let dir_fd = open_path(dir).map_err(|e| annotate(e, &format!("opening {}", dir.display())))?;
            let name = socket.file_name().ok_or_else(|| io::Error::other("--socket names no file"))?;
            let path = PathBuf::from(format!("/proc/self/fd/{}", dir_fd.as_raw_fd())).join(name);
            Some((dir_fd, path, *port))
        }
        None => None,
    };
    private_tmp(&args.keep, args.tmpfs_mib)?;
    private_dirs(args.tmpfs_mib)?;
    report.applied(&format!(
        "mount namespace: dataset, results and spool hidden; private /tmp, /dev/shm, /var/tmp, /run of {} MiB each",
        args.tmpfs_mib
    ));

    loopback_up()?;
    if let Some((socket_dir, socket, port)) = forward_to {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        std::thread::spawn(move || {
            // Holds the socket's directory open for as long as connections are forwarded.
            let _socket_dir = socket_dir;
            for connection in listener.incoming().flatten() {
                let socket = socket.clone();
                std::thread::spawn(move || forward(connection, &socket));
            }
        });
    }
    report.applied("network namespace: loopback only, the metering proxy its one way out");
    Ok(())
}

/// Mounts a fresh tmpfs at `target` with the given options (nosuid, nodev).
pub(crate) fn mount_tmpfs(target: &Path, options: &str) -> io::Result<()> {
    let target = c_path(target)?;
    let fstype = CString::new("tmpfs").expect("no NUL");
    let options = CString::new(options).map_err(io::Error::other)?;
    // SAFETY: a plain mount system call with valid C strings.
    let result = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    check(result, "mounting a tmpfs")
}

/// Covers `/dev/shm`, `/var/tmp` and `/run` (those that exist) with fresh, size-limited tmpfs:
/// what an agent leaves there is gone with its sandbox, and what others left is out of sight.
fn private_dirs(size_mib: u64) -> io::Result<()> {
    for (dir, mode) in [("/dev/shm", "1777"), ("/var/tmp", "1777"), ("/run", "0755")] {
        let Ok(dir) = std::fs::canonicalize(dir) else { continue };
        if dir.is_dir() {
            mount_tmpfs(&dir, &format!("mode={mode},size={size_mib}m"))
                .map_err(|e| annotate(e, &format!("covering {}", dir.display())))?;
        }
    }
    Ok(())
}

fn annotate(error: io::Error, what: &str) -> io::Error {
    io::Error::new(error.kind(), format!("{what}: {error}"))
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)
}

/// A descriptor that only names a directory (`O_PATH`), closed when the agent starts.
fn open_path(dir: &Path) -> io::Result<OwnedFd> {
    let path = c_path(dir)?;
    // SAFETY: a valid C string; the returned descriptor is owned here and nowhere else.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is not owned by anything else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Covers `/tmp` with a fresh tmpfs and binds each `keep` directory under it back in at the same
/// path (see the module documentation). Directories outside `/tmp` stay as they are.
fn private_tmp(keep: &[PathBuf], size_mib: u64) -> io::Result<()> {
    let Ok(tmp) = std::fs::canonicalize("/tmp") else { return Ok(()) };
    if !tmp.is_dir() {
        return Ok(());
    }
    // Opened before the tmpfs covers them; parents before their children.
    let mut kept: Vec<(PathBuf, OwnedFd)> = Vec::new();
    let mut dirs: Vec<PathBuf> = keep.iter().filter_map(|dir| std::fs::canonicalize(dir).ok()).collect();
    dirs.sort_by(|a, b| (a.components().count(), a).cmp(&(b.components().count(), b)));
    dirs.dedup();
    for dir in dirs.into_iter().filter(|dir| dir.starts_with(&tmp) && *dir != tmp && dir.is_dir()) {
        let fd = open_path(&dir).map_err(|e| annotate(e, &format!("opening {}", dir.display())))?;
        kept.push((dir, fd));
    }
    mount_tmpfs(&tmp, &format!("mode=1777,size={size_mib}m")).map_err(|e| annotate(e, "mounting a private /tmp"))?;
    // SAFETY: plain mount system calls with valid C strings (or null where allowed).
    unsafe {
        for (dir, fd) in &kept {
            std::fs::create_dir_all(dir)
                .map_err(|e| annotate(e, &format!("creating {} in the private /tmp", dir.display())))?;
            let source = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL");
            let target = c_path(dir)?;
            check(
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ),
                &format!("keeping {} in the private /tmp", dir.display()),
            )?;
        }
    }
    Ok(())
}

/// Copies bytes both ways between an agent's TCP connection and the proxy's Unix socket.
fn forward(tcp: TcpStream, socket: &std::path::Path) {
    // Small streamed writes must not wait for ACKs (see the proxy's listener).
    let _ = tcp.set_nodelay(true);
    let Ok(unix) = UnixStream::connect(socket) else { return };
    let (Ok(mut tcp_read), Ok(mut unix_write)) = (tcp.try_clone(), unix.try_clone()) else { return };
    let upstream = std::thread::spawn(move || {
        let _ = io::copy(&mut tcp_read, &mut unix_write);
        let _ = unix_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut unix_read, mut tcp_write) = (unix, tcp);
    let _ = io::copy(&mut unix_read, &mut tcp_write);
    let _ = tcp_write.shutdown(std::net::Shutdown::Write);
    let _ = upstream.join();
}

/// A new network namespace's loopback starts down.
fn loopback_up() -> io::Result<()> {
    // SAFETY: an ifreq zeroed then named "lo"; SIOCGIFFLAGS/SIOCSIFFLAGS read and write its flags.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (i, byte) in b"lo".iter().enumerate() {
            request.ifr_name[i] = *byte as libc::c_char;
        }
        let result = (|| {
            check(libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request), "reading loopback flags")?;
            request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            check(libc::ioctl(fd, libc::SIOCSIFFLAGS, &request), "bringing loopback up")
        })();
        libc::close(fd);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip() {
        let args = SandboxArgs {
            proxy: Some(("/run/p.sock".into(), 4000)),
            hide: vec!["/data".into(), "/results".into()],
            keep: vec!["/tmp/trial/repo".into()],
            tmpfs_mib: 64,
            report_fd: Some(3),
            user: Some(AgentUser { uid: 65534, gid: 65534 }),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "echo --hide".into()],
        };
        assert_eq!(SandboxArgs::parse(&args.to_args()).unwrap(), args);
        assert!(SandboxArgs::parse(&["--port".into(), "x".into()]).is_err());
        let no_proxy = SandboxArgs { proxy: None, report_fd: None, user: None, ..args };
        assert_eq!(SandboxArgs::parse(&no_proxy.to_args()).unwrap(), no_proxy);
        assert!(SandboxArgs::parse(&["--port".into(), "1".into(), "--".into(), "sh".into()]).is_err());
    }
}
