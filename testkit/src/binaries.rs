//! Where the test control plane's binaries are: built by `scripts/install-control-plane.sh
//! VERSION` into `<cache>/v<VERSION>/bin`, and the workspace's own binaries in `target/`.

use std::path::{Path, PathBuf};

/// The Kubernetes version the tests run against unless `LIGHTSOUT_KUBE_VERSION` says otherwise:
/// the oldest release Lightsout supports.
pub const DEFAULT_KUBE_VERSION: &str = "1.28.15";

/// The programs of one control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneBinaries {
    /// The Kubernetes version, without `v` (e.g. `1.28.15`).
    pub version: String,
    pub dir: PathBuf,
}

impl ControlPlaneBinaries {
    pub const PROGRAMS: [&'static str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];

    /// The binaries of `LIGHTSOUT_KUBE_VERSION` (default [`DEFAULT_KUBE_VERSION`]) in
    /// `LIGHTSOUT_CONTROL_PLANE_BIN`, or else in the cache directory the install script uses.
    /// `Err` says what is missing and how to build it.
    pub fn locate() -> Result<ControlPlaneBinaries, String> {
        let version = std::env::var("LIGHTSOUT_KUBE_VERSION").unwrap_or_else(|_| DEFAULT_KUBE_VERSION.into());
        let version = version.trim_start_matches('v').to_string();
        let dir = match std::env::var_os("LIGHTSOUT_CONTROL_PLANE_BIN") {
            Some(dir) => PathBuf::from(dir),
            None => cache_dir().join(format!("v{version}")).join("bin"),
        };
        let missing: Vec<&str> =
            Self::PROGRAMS.iter().copied().filter(|program| !is_executable(&dir.join(program))).collect();
        if missing.is_empty() {
            Ok(ControlPlaneBinaries { version, dir })
        } else {
            Err(format!(
                "no Kubernetes {version} control plane in {} ({} missing): build it with `scripts/install-control-plane.sh {version}`",
                dir.display(),
                missing.join(", ")
            ))
        }
    }

    pub fn program(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The minor version (28 for 1.28.15).
    pub fn minor(&self) -> u32 {
        self.version.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0)
    }
}

/// The install script's cache: `LIGHTSOUT_CONTROL_PLANE_DIR`, else `/var/cache/lightsout/
/// control-plane` as root, else `~/.cache/lightsout/control-plane`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LIGHTSOUT_CONTROL_PLANE_DIR") {
        return PathBuf::from(dir);
    }
    cache_root().join("control-plane")
}

/// Where the install scripts cache what they build: `/var/cache/lightsout` as root, else
/// `~/.cache/lightsout`.
pub fn cache_root() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/lightsout");
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("lightsout")
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// A binary of this workspace (`lightsout-worker`, `lightsout`, …) beside the running test's
/// own executable: `cargo test --workspace` builds every package's binaries into
/// `target/<profile>/`, and a test runs from `target/<profile>/deps/`.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's executable");
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps/<test>");
    let path = profile_dir.join(name);
    assert!(
        is_executable(&path),
        "{} is not built: run `cargo build --workspace --bins` (README's test command does)",
        path.display()
    );
    path
}

/// Whether the tests run under CI, where a missing control plane is a failure, not a skip.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}
