//! Long-lived child processes (etcd, the API server, controllers, trial containers) that never
//! outlive the test process.
//!
//! Every child is forked by one keeper thread that lives as long as the process and is asked
//! for `PR_SET_PDEATHSIG(SIGKILL)`: the kernel sends that signal when the *thread* that forked a
//! child exits, so forking from short-lived test threads would kill children at the end of each
//! test, and forking from nowhere in particular would leave them running after a test binary
//! that panicked or was interrupted. A [`Process`] dropped kills its child.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

fn keeper() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("testkit-process-keeper".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
                    unsafe {
                        command.pre_exec(|| {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                                return Err(std::io::Error::last_os_error());
                            }
                            Ok(())
                        });
                    }
                    let _ = reply.send(command.spawn());
                }
                // The sender is in a static: this loop only ends with the process, and the
                // thread must not end before its children.
                loop {
                    std::thread::park();
                }
            })
            .expect("the process keeper thread");
        Mutex::new(requests)
    })
}

/// Forks `command` from the keeper thread.
pub fn spawn_kept(command: Command) -> std::io::Result<Child> {
    let (reply, answer) = mpsc::channel();
    keeper().lock().unwrap().send((command, reply)).expect("the process keeper is alive");
    answer.recv().expect("the process keeper answers")
}

/// A named child process whose standard output and error go to a log file.
pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
}

impl Process {
    /// Starts `command` with its output appended to `log`.
    pub fn start(name: &str, mut command: Command, log: &Path) -> anyhow::Result<Process> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        command.stdin(Stdio::null()).stdout(file.try_clone()?).stderr(file);
        let child = spawn_kept(command).with_context(|| format!("starting {name}"))?;
        Ok(Process { name: name.into(), log: log.into(), child: Some(child), status: None })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) unless the process has exited.
    pub fn signal(&mut self, signal: i32) {
        if self.try_status().is_none() {
            // SAFETY: kill has no memory effects; the pid is our unreaped child.
            unsafe { libc::kill(self.pid() as i32, signal) };
        }
    }

    /// The exit status if the process has exited (reaping it).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Some(child) = self.child.as_mut() {
                self.status = child.try_wait().ok().flatten();
            }
        }
        self.status
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(child) = self.child.as_mut() {
            if self.status.is_none() {
                self.status = child.wait().ok();
            }
        }
    }

    /// The last `lines` lines of the log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Peak resident memory (VmHWM) in KiB, while the process runs.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a log file.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a port on 127.0.0.1");
    listener.local_addr().unwrap().port()
}
