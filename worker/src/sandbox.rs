//! The local-mode sandbox an agent runs in (Linux, as root).
//!
//! The worker re-executes itself as
//! `… sandbox --socket S --port P [--hide DIR]… [--keep DIR]… -- PROGRAM ARGS`. That process:
//! 1. enters a new network namespace, where only a loopback interface exists, and a new mount
//!    namespace (private, so nothing leaks back to the host);
//! 2. covers each `--hide` directory (the dataset, the results, the worker's spool) with an empty
//!    tmpfs, so ground truth and other trials' results cannot be read;
//! 3. gives the agent a private `/tmp`: a fresh tmpfs over the host's, so it neither sees what
//!    others left there nor leaves anything behind. Each `--keep` directory under `/tmp` (the
//!    agent's workspace and home, which the worker keeps in its scratch space there) is bound
//!    back in at the same path; everything else of the host's `/tmp` — the proxy's socket and
//!    log included — is out of sight;
//! 4. brings loopback up and forwards `127.0.0.1:P` to the metering proxy's Unix socket `S`
//!    (reached through a descriptor of its directory opened before `/tmp` was covered) — the
//!    one and only way out;
//! 5. runs the agent as an unprivileged user, in the process group the worker created for the
//!    sandbox (so the worker's time limit reaches it), and exits with the agent's status.
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
    pub socket: PathBuf,
    pub port: u16,
    pub hide: Vec<PathBuf>,
    /// Directories under `/tmp` the agent keeps in its private `/tmp`.
    pub keep: Vec<PathBuf>,
    pub user: Option<AgentUser>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl SandboxArgs {
    /// The command-line form, after the program that re-executes the worker.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> =
            vec!["--socket".into(), self.socket.clone().into(), "--port".into(), self.port.to_string().into()];
        for dir in &self.hide {
            out.push("--hide".into());
            out.push(dir.clone().into());
        }
        for dir in &self.keep {
            out.push("--keep".into());
            out.push(dir.clone().into());
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
                Some("--user") => {
                    let text = value()?.to_string_lossy().into_owned();
                    let (uid, gid) = text.split_once(':').ok_or("--user is uid:gid")?;
                    user = Some(AgentUser {
                        uid: uid.parse().map_err(|_| "--user: bad uid")?,
                        gid: gid.parse().map_err(|_| "--user: bad gid")?,
                    });
                }
                Some("--") => {
                    let program = rest.next().cloned().ok_or("no program after --")?;
                    return Ok(SandboxArgs {
                        socket: socket.ok_or("--socket is required")?,
                        port: port.ok_or("--port is required")?,
                        hide,
                        keep,
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

/// The sandbox process's main: returns the exit code to exit with.
pub fn run(args: &SandboxArgs) -> i32 {
    match enter_and_run(args) {
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

fn enter_and_run(args: &SandboxArgs) -> io::Result<i32> {
    // SAFETY: unshare and mount are plain system calls on this (single-threaded, freshly
    // executed) process; their arguments are valid C strings or null where allowed.
    unsafe {
        check(
            libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS),
            "entering new network and mount namespaces (needs root)",
        )?;
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
            let target = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
            let fstype = CString::new("tmpfs").expect("no NUL");
            let options = CString::new("mode=0755,size=1m").expect("no NUL");
            check(
                libc::mount(
                    fstype.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    options.as_ptr().cast(),
                ),
                &format!("hiding {}", dir.display()),
            )?;
        }
    }
    // The proxy's socket, reached through its directory's descriptor once /tmp is covered.
    let socket_dir = args.socket.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let socket_dir = open_path(socket_dir).map_err(|e| annotate(e, &format!("opening {}", socket_dir.display())))?;
    let socket_name = args.socket.file_name().ok_or_else(|| io::Error::other("--socket names no file"))?;
    let socket = PathBuf::from(format!("/proc/self/fd/{}", socket_dir.as_raw_fd())).join(socket_name);
    private_tmp(&args.keep)?;

    loopback_up()?;
    let listener = TcpListener::bind(("127.0.0.1", args.port))?;
    std::thread::spawn(move || {
        // Holds the socket's directory open for as long as connections are forwarded.
        let _socket_dir = socket_dir;
        for connection in listener.incoming().flatten() {
            let socket = socket.clone();
            std::thread::spawn(move || forward(connection, &socket));
        }
    });

    let mut command = std::process::Command::new(&args.program);
    command.args(&args.args);
    if let Some(user) = args.user {
        // The standard library drops root's supplementary groups (setgroups) before it changes
        // the uid, so the agent holds none of them.
        command.uid(user.uid).gid(user.gid);
    }
    let status = command.status()?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
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
fn private_tmp(keep: &[PathBuf]) -> io::Result<()> {
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
    let target = c_path(&tmp)?;
    let fstype = CString::new("tmpfs").expect("no NUL");
    let options = CString::new("mode=1777").expect("no NUL");
    // SAFETY: plain mount system calls with valid C strings (or null where allowed).
    unsafe {
        check(
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            ),
            "mounting a private /tmp",
        )?;
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
            socket: "/run/p.sock".into(),
            port: 4000,
            hide: vec!["/data".into(), "/results".into()],
            keep: vec!["/tmp/trial/repo".into()],
            user: Some(AgentUser { uid: 65534, gid: 65534 }),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "echo --hide".into()],
        };
        assert_eq!(SandboxArgs::parse(&args.to_args()).unwrap(), args);
        assert!(SandboxArgs::parse(&["--port".into(), "x".into()]).is_err());
    }
}
