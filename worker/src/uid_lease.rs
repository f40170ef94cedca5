//! A user id of its own for each trial's agent (when the worker is root), so that no trial can
//! signal, ptrace or read the files of another: the kernel's permission checks all start from
//! the uid.
//!
//! Ids are leased from a range no account uses, each held by an exclusive `flock` on a lock file
//! of its own (`LOCK_DIR/<uid>.lock`): unique among concurrent trials of this process and of
//! every other worker process on the machine, and released when the lease is dropped or its
//! holder dies. The group id is the same number, so groups are not shared either.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::agent_process::AgentUser;

/// The first id leased: far above any account or container user-namespace range in common use.
pub const FIRST_AGENT_UID: u32 = 2_000_000_000;
/// How many ids there are: the most trials that can run at once on one machine.
pub const AGENT_UIDS: u32 = 4096;

/// Where the lock files are: under `/run`, which the sandbox covers with an empty tmpfs, so an
/// agent can neither see nor hold them.
pub fn default_lock_dir() -> PathBuf {
    PathBuf::from("/run/lightsout/agent-uids")
}

/// A leased uid; released when dropped.
#[derive(Debug)]
pub struct UidLease {
    user: AgentUser,
    // Holds the lock.
    _lock: File,
}

impl UidLease {
    /// Leases the first free id of `first..first + count`, locking it under `lock_dir`.
    pub fn acquire(lock_dir: &Path, first: u32, count: u32) -> std::io::Result<UidLease> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let named = |e: std::io::Error, path: &Path| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(lock_dir).map_err(|e| named(e, lock_dir))?;
        for uid in first..first.saturating_add(count) {
            let path = lock_dir.join(format!("{uid}.lock"));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| named(e, &path))?;
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(UidLease { user: AgentUser { uid, gid: uid }, _lock: file });
            }
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(named(error, &path));
            }
        }
        Err(std::io::Error::other(format!(
            "all {count} agent user ids from {first} are in use (locks in {})",
            lock_dir.display()
        )))
    }

    pub fn user(&self) -> AgentUser {
        self.user
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_leases_are_unique_and_freed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = UidLease::acquire(dir.path(), 5000, 2).unwrap();
        let second = UidLease::acquire(dir.path(), 5000, 2).unwrap();
        assert_eq!((first.user().uid, second.user().uid), (5000, 5001));
        assert_eq!(second.user().gid, 5001, "a group of its own");
        let full = UidLease::acquire(dir.path(), 5000, 2).unwrap_err();
        assert!(full.to_string().contains("all 2 agent user ids from 5000 are in use"), "{full}");
        drop(first);
        assert_eq!(UidLease::acquire(dir.path(), 5000, 2).unwrap().user().uid, 5000);
    }
}
