//! `lightsout-worker copy-self DIR` (the trial pod's `worker` init container) and the
//! non-dumpable worker process of `run`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::{Duration, Instant};

const WORKER: &str = env!("CARGO_BIN_EXE_lightsout-worker");

#[test]
fn copy_self_installs_a_runnable_copy_with_mode_0755() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("opt/lightsout/bin");
    let out = Command::new(WORKER).arg("copy-self").arg(&bin).output().unwrap();
    assert!(out.status.success(), "copy-self failed: {}", String::from_utf8_lossy(&out.stderr));
    let copy = bin.join("lightsout-worker");
    let meta = std::fs::metadata(&copy).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o755);
    assert_eq!(meta.len(), std::fs::metadata(WORKER).unwrap().len());
    // Nothing but the binary is left behind (the temporary file was renamed).
    let entries: Vec<_> = std::fs::read_dir(&bin).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(entries, vec![std::ffi::OsString::from("lightsout-worker")]);
    let version = Command::new(&copy).arg("--version").output().unwrap();
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("lightsout-worker {}", env!("CARGO_PKG_VERSION"))
    );

    // Copying again replaces the binary in place.
    let again = Command::new(WORKER).arg("copy-self").arg(&bin).output().unwrap();
    assert!(again.status.success());
    assert!(Command::new(&copy).arg("--version").status().unwrap().success());
}

#[test]
fn copy_self_without_a_directory_is_a_usage_error() {
    let out = Command::new(WORKER).arg("copy-self").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn copy_self_into_an_unwritable_place_fails_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let out = Command::new(WORKER).arg("copy-self").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not-a-dir"));
}

/// `run` makes the worker non-dumpable before it reads its job: its `/proc/<pid>` files then
/// belong to root instead of the worker's uid, so an agent of the same uid cannot read its
/// environment (the provider key). Started as uid 65532 (this needs root, as CI runs the tests),
/// blocked reading its job from a FIFO, the worker's `/proc/<pid>/environ` must turn root-owned.
#[test]
fn run_makes_the_worker_non_dumpable_before_reading_its_job() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to start the worker as another uid");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let fifo = dir.path().join("job.json");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut child = Command::new(WORKER)
        .args(["run", "--job"])
        .arg(&fifo)
        .uid(65532)
        .gid(65532)
        .env("OPENAI_API_KEY", "sk-secret")
        .spawn()
        .unwrap();
    let environ = format!("/proc/{}/environ", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut owner = u32::MAX;
    while Instant::now() < deadline {
        owner = std::fs::metadata(&environ).map(|m| m.uid()).unwrap_or(u32::MAX);
        if owner == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Unblock the worker: an empty job is a bad job (exit 2).
    std::fs::write(&fifo, "{}").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(owner, 0, "the worker's /proc/<pid>/environ stayed owned by uid {owner}: it is still dumpable");
    assert_eq!(status.code(), Some(2));
}
