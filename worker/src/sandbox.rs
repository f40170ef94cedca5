//! The sandbox an agent runs in.
//!
//! The worker re-executes itself as `… sandbox [--socket S --port P] [--hide DIR]… [--keep DIR]…
//! [--tmpfs-mib N] [--report-fd N] [--user UID:GID] -- PROGRAM ARGS`. That process:
//! 0. with `CAP_SYS_ADMIN` (root) makes the namespaces below directly; without it (not root, or
//!    root in a container with the default capabilities) it first enters a user namespace of its
//!    own ([`crate::user_namespace`]), in which it may make them all when the kernel allows
//!    unprivileged user namespaces;
//! 1. enters new mount and IPC namespaces (mounts private, so nothing leaks back to the host;
//!    System V IPC and POSIX message queues of its own);
//! 2. covers each `--hide` directory (the dataset, the results, the worker's spool) with an empty
//!    tmpfs, so ground truth and other trials' results cannot be read;
//! 3. gives the agent a private `/tmp`: a fresh tmpfs over the host's, so it neither sees what
//!    others left there nor leaves anything behind. Each `--keep` directory under `/tmp` (the
//!    agent's workspace and home, which the worker keeps in its scratch space there) is bound
//!    back in at the same path; everything else of the host's `/tmp` — the proxy's socket and
//!    log included — is out of sight. `/dev/shm`, `/var/tmp` and `/run` get fresh tmpfs too. Each
//!    of these is limited to `--tmpfs-mib` MiB, so filling one fills nothing of a neighbour's;
//! 4. given `--socket`/`--port`, enters a new network namespace, brings loopback up and forwards
//!    `127.0.0.1:P` to the metering proxy's Unix socket `S` (reached through a descriptor of its
//!    directory opened before `/tmp` was covered) — the one and only way out. The worker asks for
//!    it only when [`network_namespace`] says one can be made; otherwise the agent reaches the
//!    proxy on the host's loopback;
//! 5. enters a new PID namespace and starts the sandbox's init ([`crate::sandbox_init`]) as its
//!    first process, with the namespace's own `/proc` mounted ([`ProcMount`]); the init installs
//!    the system-call filter and runs the agent as the given user; everything left in the
//!    namespace dies with it;
//! 6. waits for the init, in the process group the worker created for the sandbox (so the
//!    worker's time limit reaches the agent), and exits with the agent's status.
//!
//! Each protection is tried on its own: what the environment cannot give is reported missing,
//! with the reason, and the agent runs without it. With no namespace at all (a pod's restricted
//! profile refuses user namespaces), only the init's protections apply — the filter,
//! `no_new_privs`, and killing what the agent leaves running (as a child subreaper). What was and
//! was not applied is reported on `--report-fd` ([`crate::sandbox_init::Report`]) for the
//! trial's record.
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
    /// The metering proxy's socket and the port the agent reaches it on inside a network
    /// namespace of its own (when [`network_namespace`] says one can be made; without, the agent
    /// reaches the proxy on the host's loopback).
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
    if args.len() == 1 && args[0] == "--probe-network" {
        return Ok(probe_network());
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

/// How this process makes namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NamespaceSource {
    /// It holds `CAP_SYS_ADMIN` (root as CI and `lightsout run` as root run).
    Privileged,
    /// Inside a user namespace of its own ([`crate::user_namespace`]): unprivileged, or root
    /// without `CAP_SYS_ADMIN` (a container with the default capabilities).
    UserNamespace,
}

/// Makes namespaces possible: directly with `CAP_SYS_ADMIN`, else by entering a user namespace.
/// `Err(Ok(why))`: none can be made, and the process is as it was; `Err(Err(e))`: the process is
/// in a user namespace it cannot use, and must not go on.
fn namespace_source(user: Option<AgentUser>) -> Result<NamespaceSource, Result<String, io::Error>> {
    use crate::user_namespace::{has_capability, EnterError, CAP_SYS_ADMIN};
    if has_capability(CAP_SYS_ADMIN) {
        return Ok(NamespaceSource::Privileged);
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    match crate::user_namespace::enter(user) {
        Ok(()) => Ok(NamespaceSource::UserNamespace),
        Err(EnterError::Before(e)) => {
            Err(Ok(format!("uid {uid} without CAP_SYS_ADMIN, and no user namespace could be made: {e}")))
        }
        Err(after @ EnterError::After(_)) => Err(Err(io::Error::other(after.to_string()))),
    }
}

/// `--probe-network`: whether this environment lets the sandbox make a network namespace, which
/// decides how the agent reaches the proxy (see [`network_namespace`]). Exits 0 if so; otherwise
/// prints why and exits 1.
fn probe_network() -> i32 {
    let made = match namespace_source(None) {
        Ok(_) => {
            // SAFETY: a plain system call (this process exits right after).
            let result = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            check(result, "unshare(CLONE_NEWNET)").map_err(|e| e.to_string())
        }
        Err(Ok(why)) => Err(why),
        Err(Err(e)) => Err(e.to_string()),
    };
    match made {
        Ok(()) => 0,
        Err(why) => {
            println!("{why}");
            1
        }
    }
}

/// Whether the sandbox started by `program leading_args` can give the agent a network namespace
/// in this environment, and if not why: asked of the sandbox once per process (the answer is
/// the machine's and the process's, not the trial's). With one, the agent reaches the proxy
/// through the forwarder inside it; without, on the host's loopback.
pub async fn network_namespace(program: &Path, leading_args: &[OsString]) -> Result<(), String> {
    static ANSWER: tokio::sync::OnceCell<Result<(), String>> = tokio::sync::OnceCell::const_new();
    ANSWER
        .get_or_init(|| async {
            let output = tokio::process::Command::new(program)
                .args(leading_args)
                .arg("--probe-network")
                .env_clear()
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .map_err(|e| format!("running {} --probe-network: {e}", program.display()))?;
            if output.status.success() {
                return Ok(());
            }
            // The reason on standard output; a sandbox that failed otherwise says why on its error.
            let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            let why = [stdout.trim(), stderr.trim()].into_iter().find(|text| !text.is_empty());
            Err(why.map_or_else(|| format!("{} --probe-network: {}", program.display(), output.status), str::to_string))
        })
        .await
        .clone()
}

fn enter_and_run(args: &SandboxArgs, leading: &[OsString]) -> io::Result<i32> {
    let mut report = crate::sandbox_init::Report::on(args.report_fd);
    // The init is this same program, started once /tmp (where it may live) is covered.
    let exe = std::fs::File::open("/proc/self/exe").map_err(|e| annotate(e, "opening /proc/self/exe"))?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mut pid_namespace = false;
    match namespace_source(args.user) {
        Ok(source) => {
            if source == NamespaceSource::UserNamespace {
                report.applied(&format!(
                    "user namespace of its own (uid {uid} without CAP_SYS_ADMIN), in which the namespaces below are made"
                ));
            }
            enter_namespaces(args, &mut report)?;
            // Last, once the proxy's threads run: a process that entered a new PID namespace can
            // start processes (in it) but no more threads.
            // SAFETY: a plain system call.
            match check(unsafe { libc::unshare(libc::CLONE_NEWPID) }, "unshare(CLONE_NEWPID)") {
                Ok(()) => pid_namespace = true,
                Err(e) => report
                    .missing("pid namespace (the agent sees and may signal the worker's processes)", &e.to_string()),
            }
        }
        Err(Err(unusable)) => return Err(unusable),
        Err(Ok(why)) => {
            // The worker asked for the proxy inside a network namespace only if its probe said
            // one can be made: something changed since, and the agent could not reach the proxy.
            if args.proxy.is_some() {
                return Err(io::Error::other(format!("the network namespace the proxy is forwarded into: {why}")));
            }
            for what in [
                "mount namespace (no private /tmp, /dev/shm, /var/tmp, /run; nothing hidden)",
                "pid namespace (the agent sees and may signal the worker's processes)",
                "ipc namespace",
            ] {
                report.missing(what, &why);
            }
        }
    }
    if args.user.is_none() {
        report.missing(
            &format!("agent user of its own (the agent runs as the worker's uid {uid})"),
            "leasing a user id takes root",
        );
    }
    let init = crate::sandbox_init::InitArgs {
        report_fd: args.report_fd,
        user: args.user,
        program: args.program.clone(),
        args: args.args.clone(),
    };
    crate::sandbox_init::ignore_sigterm();
    let mut command = std::process::Command::new(format!("/proc/self/fd/{}", exe.as_raw_fd()));
    command.arg0("lightsout-sandbox-init").args(leading).arg("--init").args(init.to_args());
    let proc_mount = pid_namespace.then(ProcMount::prepare).transpose()?;
    if let Some(proc_mount) = &proc_mount {
        // SAFETY: the hook only makes async-signal-safe system calls on static data.
        unsafe { command.pre_exec(proc_mount.in_child()) };
    }
    let mut child = command.spawn().map_err(|e| annotate(e, "starting the sandbox's init"))?;
    // Holds no descriptor of the init's, which must not outlive the spawn (see ProcMount).
    drop(command);
    if let Some(proc_mount) = proc_mount {
        report.applied("pid namespace: everything left in it dies with the agent, setsid or not");
        match proc_mount.result() {
            Ok(()) => report.applied("pid namespace's own /proc: the agent sees and signals only its own processes"),
            Err(e) => {
                report.missing("pid namespace's own /proc (the agent sees the host's process list)", &e.to_string())
            }
        }
    }
    // The init holds the report now; this process writes no more to it.
    drop(report);
    let status = child.wait()?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Mounting the PID namespace's `/proc`, done by the init's process between fork and exec: it is
/// the namespace's first process there and still holds this process's capabilities (which an
/// unprivileged init, in a user namespace, loses at exec). In a mount namespace of its own, so
/// that the sandbox process, outside the PID namespace, keeps its `/proc/self`. The outcome comes
/// back on a pipe: nothing written is success, else which step failed and its `errno`.
struct ProcMount {
    read: OwnedFd,
    write: OwnedFd,
}

impl ProcMount {
    fn prepare() -> io::Result<ProcMount> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors, owned just below.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(annotate(io::Error::last_os_error(), "a pipe for the /proc mount's outcome"));
        }
        use std::os::fd::FromRawFd;
        // SAFETY: both descriptors were just created and are owned by nothing else.
        Ok(unsafe { ProcMount { read: OwnedFd::from_raw_fd(fds[0]), write: OwnedFd::from_raw_fd(fds[1]) } })
    }

    /// The hook to run in the forked child: it never fails the exec (the init runs either way),
    /// and reports instead.
    fn in_child(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let write = self.write.as_raw_fd();
        move || {
            // SAFETY: unshare, mount and write are async-signal-safe system calls on static data.
            unsafe {
                let failed_step = if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    1
                } else if libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) != 0
                {
                    2
                } else {
                    return Ok(());
                };
                let failure = [failed_step, *libc::__errno_location()];
                libc::write(write, failure.as_ptr().cast(), std::mem::size_of_val(&failure));
            }
            Ok(())
        }
    }

    /// Once the init has started (its copy of the pipe closed at exec): whether its `/proc` was
    /// mounted.
    fn result(self) -> io::Result<()> {
        let ProcMount { read, write } = self;
        // This process's writing end must go too, or the read would not end.
        drop(write);
        let mut failure = [0i32; 2];
        // SAFETY: reads into a local from a descriptor this process owns.
        let n = unsafe { libc::read(read.as_raw_fd(), failure.as_mut_ptr().cast(), std::mem::size_of_val(&failure)) };
        if n != std::mem::size_of_val(&failure) as isize {
            return Ok(());
        }
        let error = io::Error::from_raw_os_error(failure[1]);
        let step = if failure[0] == 1 { "unshare(CLONE_NEWNS)" } else { "mounting proc on /proc" };
        Err(io::Error::new(error.kind(), format!("{step}: {error}")))
    }
}

/// The namespaces besides the PID namespace, each tried on its own: what cannot be made is
/// reported missing, with the reason, and the agent runs without it. Only the network namespace
/// is required once asked for (the agent's proxy address is inside it).
fn enter_namespaces(args: &SandboxArgs, report: &mut crate::sandbox_init::Report) -> io::Result<()> {
    // SAFETY: a plain system call on this (single-threaded, freshly executed) process.
    match check(unsafe { libc::unshare(libc::CLONE_NEWIPC) }, "unshare(CLONE_NEWIPC)") {
        Ok(()) => report.applied("ipc namespace"),
        Err(e) => report.missing("ipc namespace", &e.to_string()),
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
    private_mounts(args, report);
    let Some((socket_dir, socket, port)) = forward_to else { return Ok(()) };
    // SAFETY: a plain system call.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) }, "entering a new network namespace")?;
    loopback_up()?;
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    std::thread::spawn(move || {
        // Holds the socket's directory open for as long as connections are forwarded.
        let _socket_dir = socket_dir;
        for connection in listener.incoming().flatten() {
            let socket = socket.clone();
            std::thread::spawn(move || forward(connection, &socket));
        }
    });
    report.applied("network namespace: loopback only, the metering proxy its one way out");
    Ok(())
}

/// A mount namespace with the hidden directories covered and private `/tmp`, `/dev/shm`,
/// `/var/tmp` and `/run`: each step on its own, what fails reported missing.
fn private_mounts(args: &SandboxArgs, report: &mut crate::sandbox_init::Report) {
    let root = CString::new("/").expect("no NUL");
    // SAFETY: plain system calls with valid C strings or null where allowed.
    let entered = unsafe {
        check(libc::unshare(libc::CLONE_NEWNS), "unshare(CLONE_NEWNS)").and_then(|()| {
            check(
                libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ),
                "making mounts private",
            )
        })
    };
    if let Err(e) = entered {
        report.missing("mount namespace (no private /tmp, /dev/shm, /var/tmp, /run; nothing hidden)", &e.to_string());
        return;
    }
    let mut hidden = Vec::new();
    // A directory that does not exist holds nothing to hide (and cannot be mounted over).
    for dir in args.hide.iter().filter(|dir| dir.is_dir()) {
        match mount_tmpfs(dir, "mode=0755,size=1m") {
            Ok(()) => hidden.push(dir.display().to_string()),
            Err(e) => report.missing(&format!("hiding {} (the agent can read it)", dir.display()), &e.to_string()),
        }
    }
    let mut private = Vec::new();
    match private_tmp(&args.keep, args.tmpfs_mib) {
        Ok(true) => private.push("/tmp".to_string()),
        Ok(false) => {}
        Err(e) => report.missing("private /tmp (the agent shares the host's)", &e.to_string()),
    }
    for (dir, result) in private_dirs(args.tmpfs_mib) {
        match result {
            Ok(()) => private.push(dir.display().to_string()),
            Err(e) => {
                report.missing(&format!("private {} (the agent shares the host's)", dir.display()), &e.to_string())
            }
        }
    }
    report.applied(&format!(
        "mount namespace: hidden {}; private {} of {} MiB each",
        if hidden.is_empty() { "nothing".to_string() } else { hidden.join(", ") },
        if private.is_empty() { "nothing".to_string() } else { private.join(", ") },
        args.tmpfs_mib
    ));
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
/// Each directory's outcome.
fn private_dirs(size_mib: u64) -> Vec<(PathBuf, io::Result<()>)> {
    let mut covered = Vec::new();
    for (dir, mode) in [("/dev/shm", "1777"), ("/var/tmp", "1777"), ("/run", "0755")] {
        let Ok(dir) = std::fs::canonicalize(dir) else { continue };
        if dir.is_dir() {
            let result = mount_tmpfs(&dir, &format!("mode={mode},size={size_mib}m"))
                .map_err(|e| annotate(e, &format!("covering {}", dir.display())));
            covered.push((dir, result));
        }
    }
    covered
}

fn annotate(error: io::Error, what: &str) -> io::Error {
    io::Error::new(error.kind(), format!("{what}: {error}"))
}

/// A path as the C string system calls take.
pub(crate) fn c_path(path: &Path) -> io::Result<CString> {
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
/// path (see the module documentation). Directories outside `/tmp` stay as they are. False when
/// there is no `/tmp` to cover.
fn private_tmp(keep: &[PathBuf], size_mib: u64) -> io::Result<bool> {
    let Ok(tmp) = std::fs::canonicalize("/tmp") else { return Ok(false) };
    if !tmp.is_dir() {
        return Ok(false);
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
    Ok(true)
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
