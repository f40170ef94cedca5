//! A trial's scratch space (its workspace, home and logs) as a tmpfs of a fixed size, when the
//! worker is root: an agent that fills it gets `ENOSPC` in its own space and takes nothing from a
//! neighbour's disk. Not as root (in a pod), the scratch is a plain directory and the pod's own
//! storage limits apply.

use std::path::Path;

pub use lightsout_api::DEFAULT_SCRATCH_MIB;

/// The per-trial scratch size when the run does not set `spec.agent.scratchMiB`:
/// `LIGHTSOUT_SCRATCH_MIB`, else [`DEFAULT_SCRATCH_MIB`]. A tmpfs
/// takes memory only for what is written, so the limit is a ceiling, not a reservation.
pub fn scratch_mib() -> u64 {
    std::env::var("LIGHTSOUT_SCRATCH_MIB")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_SCRATCH_MIB)
}

/// Detaches whatever is mounted at `dir` (a scratch left by an interrupted worker); nothing
/// mounted is fine.
pub fn unmount(dir: &Path) {
    if let Ok(path) = crate::sandbox::c_path(dir) {
        // SAFETY: a plain system call with a valid C string.
        unsafe {
            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// Creates `dir` afresh as a tmpfs of `size_mib` MiB, owned by root and only traversable by
/// others (each agent's own directories in it are its user's alone).
pub fn mount(dir: &Path, size_mib: u64) -> std::io::Result<()> {
    unmount(dir);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    crate::sandbox::mount_tmpfs(dir, &format!("mode=0711,size={size_mib}m"))
}

/// Removes the scratch space: unmounts the tmpfs (its contents go with it) and the directory.
pub fn remove(dir: &Path, mounted: bool) {
    if mounted {
        unmount(dir);
    }
    let _ = std::fs::remove_dir_all(dir);
}
