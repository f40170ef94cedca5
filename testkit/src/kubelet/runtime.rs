//! A container as local processes, with util-linux's `unshare` and `nsenter` as the runtime.
//!
//! `unshare --mount --pid --uts --ipc --fork --kill-child` starts `/bin/sh` as pid 1 of new
//! namespaces. That shell (a generated script, kept beside the container's log) builds the
//! container's root on a tmpfs: the image's base (the host's `/usr` and `/etc`, read-only), the
//! image's files, a fresh `/proc`, a minimal `/dev`, the termination-message file and the pod's
//! volumes at their mount paths; then it starts the container's command with
//! `env -i … nsenter --root=ROOT --wd=DIR -S UID -G GID`, forwards SIGTERM to it and exits with
//! its status. The shell stays pid 1 (as root, so `--kill-child` keeps working): when it dies
//! the kernel kills everything in the namespace, so nothing a container starts outlives it, and
//! when the test process dies its `unshare` dies with it (see [`crate::process`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;

use crate::images::Image;

/// A bind mount of a host path into the container.
#[derive(Debug, Clone)]
pub struct Mount {
    pub host: PathBuf,
    /// Absolute path in the container.
    pub target: String,
    pub read_only: bool,
}

/// Everything needed to start one container.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// This run of the container's directory (root mount point, overlay layers, script, log).
    pub dir: PathBuf,
    pub image: Image,
    pub mounts: Vec<Mount>,
    /// The host file behind the termination-message path, and that path in the container.
    pub termination_log: (PathBuf, String),
    pub env: Vec<(String, String)>,
    pub command: Vec<String>,
    pub working_dir: Option<String>,
    pub uid: u32,
    pub gid: u32,
    pub read_only_root: bool,
    pub hostname: String,
}

/// A started container: its `unshare` process, which exits with the container.
pub struct Started {
    pub child: std::process::Child,
    /// Standard output and error of the container.
    pub log: PathBuf,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false)
}

/// The script that builds the container's root and runs its command. A failed step ends it
/// with status 128 (reported as a `StartError`), naming the step.
fn script(spec: &ContainerSpec) -> String {
    let root = spec.dir.join("root");
    let r = quote(&root.to_string_lossy());
    let mut s = String::from("fail() { echo \"testkit runtime: $1 failed\" >&2; exit 128; }\nexec </dev/null\n");
    let mut step = |command: String| {
        s += &format!("{command} || fail {}\n", quote(&command));
    };
    step("mount --make-rprivate /".into());
    step(format!("hostname {}", quote(&spec.hostname)));
    step(format!("mount -t tmpfs -o mode=0755 tmpfs {r}"));
    let overlay = |step: &mut dyn FnMut(String), target: &str, lower: &str, layer: &str| {
        let upper = quote(&spec.dir.join(format!("{layer}/upper")).to_string_lossy());
        let work = quote(&spec.dir.join(format!("{layer}/work")).to_string_lossy());
        step(format!("mkdir -p {target} {upper} {work}"));
        step(format!("mount -t overlay overlay -o lowerdir={lower},upperdir={upper},workdir={work} {target}"));
    };
    if spec.image.host_base {
        for top in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
            let host = Path::new("/").join(top);
            if let Ok(target) = std::fs::read_link(&host) {
                step(format!("ln -s {} {r}/{top}", quote(&target.to_string_lossy())));
            } else if is_dir(&host) {
                overlay(&mut step, &format!("{r}/{top}"), &format!("/{top}"), &format!("base-{top}"));
            }
        }
        // Overlays, so that volumes can be mounted below them and the container may write.
        for top in ["usr", "etc"] {
            overlay(&mut step, &format!("{r}/{top}"), &format!("/{top}"), &format!("base-{top}"));
        }
    }
    for (index, (path, host)) in spec.image.files.iter().enumerate() {
        let target = format!("{r}{}", quote(&path.to_string_lossy()));
        let host_q = quote(&host.to_string_lossy());
        if is_dir(host) {
            overlay(&mut step, &target, &host_q, &format!("layer-{index}"));
        } else {
            step(format!("mkdir -p \"$(dirname {target})\""));
            step(format!("touch {target}"));
            step(format!("mount --bind {host_q} {target}"));
            step(format!("mount -o remount,bind,ro {target}"));
        }
    }
    for dir in ["proc", "sys", "dev", "tmp"] {
        step(format!("mkdir -p {r}/{dir}"));
    }
    step(format!("chmod 1777 {r}/tmp"));
    step(format!("mount -t proc proc {r}/proc"));
    step(format!("mount --rbind /sys {r}/sys"));
    step(format!("mount -o remount,bind,ro {r}/sys"));
    step(format!("mount -t tmpfs -o mode=0755 tmpfs {r}/dev"));
    for device in ["null", "zero", "full", "random", "urandom", "tty"] {
        step(format!("touch {r}/dev/{device}"));
        step(format!("mount --bind /dev/{device} {r}/dev/{device}"));
    }
    step(format!("mkdir {r}/dev/shm"));
    step(format!("mount -t tmpfs -o mode=1777 tmpfs {r}/dev/shm"));
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        step(format!("ln -s {target} {r}/dev/{link}"));
    }
    let mut mounts: Vec<(&str, &Path, bool)> =
        spec.mounts.iter().map(|m| (m.target.as_str(), m.host.as_path(), m.read_only)).collect();
    mounts.push((spec.termination_log.1.as_str(), spec.termination_log.0.as_path(), false));
    for (target, host, read_only) in mounts {
        let t = format!("{r}{}", quote(target));
        let h = quote(&host.to_string_lossy());
        if is_dir(host) {
            step(format!("mkdir -p {t}"));
        } else {
            step(format!("mkdir -p \"$(dirname {t})\""));
            step(format!("touch {t}"));
        }
        step(format!("mount --bind {h} {t}"));
        if read_only {
            step(format!("mount -o remount,bind,ro {t}"));
        }
    }
    if spec.read_only_root {
        step(format!("mount -o remount,ro {r}"));
        if spec.image.host_base {
            for top in ["usr", "etc"] {
                step(format!("mount -o remount,ro {r}/{top}"));
            }
        }
    }
    let wd = spec.working_dir.clone().unwrap_or_else(|| "/".into());
    let mut command = format!(
        "/usr/bin/env -i {} /usr/bin/nsenter --root={r} --wd={r}{} -S {} -G {} --",
        spec.env.iter().map(|(k, v)| quote(&format!("{k}={v}"))).collect::<Vec<_>>().join(" "),
        quote(&wd),
        spec.uid,
        spec.gid
    );
    for arg in &spec.command {
        command += " ";
        command += &quote(arg);
    }
    s += &format!("{command} &\nchild=$!\n");
    // pid 1 ignores signals it has no handler for: forward SIGTERM to the command.
    s += "trap 'kill -TERM \"$child\" 2>/dev/null || true' TERM\n";
    s += "while :; do wait \"$child\"; status=$?; kill -0 \"$child\" 2>/dev/null || break; done\n";
    s += "exit \"$status\"\n";
    s
}

/// Starts the container; its output goes to `dir/log`.
pub fn start(spec: &ContainerSpec) -> anyhow::Result<Started> {
    std::fs::create_dir_all(spec.dir.join("root")).with_context(|| format!("creating {}", spec.dir.display()))?;
    let script_path = spec.dir.join("run.sh");
    std::fs::write(&script_path, script(spec))?;
    let log = spec.dir.join("log");
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
    let mut command = Command::new("/usr/bin/unshare");
    command
        .args(["--mount", "--pid", "--uts", "--ipc", "--fork", "--kill-child", "/bin/sh"])
        .arg(&script_path)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    let child = crate::process::spawn_kept(command).context("starting unshare")?;
    Ok(Started { child, log })
}

/// A container's exit code as a runtime reports it: 128 + the signal for a killed command.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(libc::SIGKILL))
}

fn first_child(pid: i32) -> Option<i32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// The host pid of the container's pid 1 (the shell that runs the command), once forked.
pub fn init_pid(unshare_pid: u32) -> Option<i32> {
    first_child(unshare_pid as i32)
}

/// The host pid of the container's command (pid 2 of its namespace), once started.
pub fn command_pid(unshare_pid: u32) -> Option<i32> {
    first_child(init_pid(unshare_pid)?)
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.rsplit(')').next().map(|rest| rest.trim_start().starts_with('Z')).unwrap_or(true))
        .unwrap_or(false)
}

/// Stops a container as the kubelet does: SIGTERM to its command, then after `grace` SIGKILL
/// to its pid 1, which ends everything in its namespace. `unshare_pid` must not have been
/// reaped yet (the caller's record of the container says whether it exited).
pub async fn stop(unshare_pid: u32, grace: Duration) {
    if let Some(init) = init_pid(unshare_pid) {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(init, libc::SIGTERM) };
    }
    let deadline = tokio::time::Instant::now() + grace;
    while alive(unshare_pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill(unshare_pid);
}

/// SIGKILL to the container's pid 1 and its `unshare`.
pub fn kill(unshare_pid: u32) {
    if !alive(unshare_pid) {
        return;
    }
    if let Some(init) = init_pid(unshare_pid) {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(init, libc::SIGKILL) };
    }
    // SAFETY: as above; the unshare process is the kubelet's unreaped child.
    unsafe { libc::kill(unshare_pid as i32, libc::SIGKILL) };
}
