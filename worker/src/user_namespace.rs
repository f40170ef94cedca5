//! Namespaces without `CAP_SYS_ADMIN`: a user namespace of the sandbox's own, in which it holds
//! the capabilities to make the others (network, mount, IPC, PID) and mount tmpfs, when the
//! kernel lets an unprivileged process make one (`user.max_user_namespaces` above 0, and no
//! seccomp profile or LSM refusing `unshare(CLONE_NEWUSER)`).
//!
//! The namespace maps the sandbox's own uid and gid to themselves — and the agent's user too,
//! when the sandbox is root without `CAP_SYS_ADMIN` and has one to drop to — so files keep their
//! owners and the agent sees its real uid. A process inside cannot write an id map beyond its
//! own uid (it holds no capability in the parent namespace), so a helper forked beforehand, which
//! stays outside, writes the maps once the sandbox has entered the namespace.

use std::ffi::CString;
use std::io;

use crate::agent_process::AgentUser;

/// `CAP_SYS_ADMIN`'s bit in the capability sets.
pub const CAP_SYS_ADMIN: u32 = 21;
const CAP_SETUID: u32 = 7;
const CAP_SETGID: u32 = 6;

/// Whether this process holds capability `cap` in its effective set (from `/proc/self/status`).
pub fn has_capability(cap: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << cap) != 0)
}

/// The id maps to write: the process's own ids, plus `also`'s when it differs. Mapping more than
/// the own ids takes `CAP_SETUID` and `CAP_SETGID` outside; the own ids alone take denying
/// `setgroups` first (so a dropped group cannot be regained inside).
struct Maps {
    uid_map: String,
    gid_map: String,
    deny_setgroups: bool,
}

fn maps(also: Option<AgentUser>) -> io::Result<Maps> {
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let (mut uid_map, mut gid_map) = (format!("{uid} {uid} 1\n"), format!("{gid} {gid} 1\n"));
    let Some(user) = also.filter(|user| (user.uid, user.gid) != (uid, gid)) else {
        return Ok(Maps { uid_map, gid_map, deny_setgroups: true });
    };
    if !(has_capability(CAP_SETUID) && has_capability(CAP_SETGID)) {
        return Err(io::Error::other(format!(
            "mapping the agent user {}:{} takes CAP_SETUID and CAP_SETGID, which this process lacks",
            user.uid, user.gid
        )));
    }
    if user.uid != uid {
        uid_map.push_str(&format!("{0} {0} 1\n", user.uid));
    }
    if user.gid != gid {
        gid_map.push_str(&format!("{0} {0} 1\n", user.gid));
    }
    Ok(Maps { uid_map, gid_map, deny_setgroups: false })
}

/// Enters a new user namespace mapping this process's ids (and `also`'s, see [`Maps`]). The
/// process must be single-threaded. An error before the namespace is entered leaves the process
/// as it was; one after (the maps could not be written) leaves it in a namespace where it is
/// nobody, and the caller must not go on.
pub fn enter(also: Option<AgentUser>) -> Result<(), EnterError> {
    let maps = maps(also).map_err(EnterError::Before)?;
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    // Everything the helper writes, prepared before the fork.
    let mut writes: Vec<(CString, &str)> = Vec::new();
    let path = |file: &str| CString::new(format!("/proc/{me}/{file}")).expect("no NUL");
    if maps.deny_setgroups {
        writes.push((path("setgroups"), "deny"));
    }
    writes.push((path("uid_map"), &maps.uid_map));
    writes.push((path("gid_map"), &maps.gid_map));

    let (go_read, go_write) = pipe().map_err(EnterError::Before)?;
    let (result_read, result_write) = pipe().map_err(EnterError::Before)?;
    // SAFETY: the process is single-threaded (see above), so the child may do anything; it only
    // makes system calls on memory prepared above, then exits.
    let helper = unsafe { libc::fork() };
    if helper < 0 {
        return Err(EnterError::Before(io::Error::last_os_error()));
    }
    if helper == 0 {
        // SAFETY: plain system calls on descriptors and buffers of this (child) process.
        unsafe {
            libc::close(go_write);
            libc::close(result_read);
            let mut byte = 0u8;
            // End of file without a byte: the parent did not enter the namespace.
            if libc::read(go_read, (&mut byte as *mut u8).cast(), 1) == 1 {
                for (index, (file, text)) in writes.iter().enumerate() {
                    let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    let written = fd >= 0 && libc::write(fd, text.as_ptr().cast(), text.len()) == text.len() as isize;
                    if !written {
                        let failure = [index as i32, *libc::__errno_location()];
                        libc::write(result_write, failure.as_ptr().cast(), std::mem::size_of_val(&failure));
                        libc::_exit(1);
                    }
                    libc::close(fd);
                }
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closes the child's ends in this process, then plain system calls.
    unsafe {
        libc::close(go_read);
        libc::close(result_write);
    }
    let finish = |go: bool| -> Option<[i32; 2]> {
        // SAFETY: writes one byte to, then closes, a pipe this process owns; waits for its child;
        // reads into a local.
        unsafe {
            if go {
                libc::write(go_write, [1u8].as_ptr().cast(), 1);
            }
            libc::close(go_write);
            let mut failure = [0i32; 2];
            let read = libc::read(result_read, failure.as_mut_ptr().cast(), std::mem::size_of_val(&failure));
            libc::close(result_read);
            let mut status = 0;
            libc::waitpid(helper, &mut status, 0);
            (read == std::mem::size_of_val(&failure) as isize).then_some(failure)
        }
    };
    // SAFETY: a plain system call.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        let error = io::Error::last_os_error();
        finish(false);
        return Err(EnterError::Before(io::Error::new(error.kind(), format!("unshare(CLONE_NEWUSER): {error}"))));
    }
    if let Some([index, errno]) = finish(true) {
        let file = writes.get(index as usize).map(|(file, _)| file.to_string_lossy().into_owned()).unwrap_or_default();
        return Err(EnterError::After(io::Error::new(
            io::Error::from_raw_os_error(errno).kind(),
            format!("writing {file}: {}", io::Error::from_raw_os_error(errno)),
        )));
    }
    Ok(())
}

/// Why [`enter`] failed, and whether the process is still as it was.
#[derive(Debug)]
pub enum EnterError {
    /// No namespace was entered.
    Before(io::Error),
    /// The namespace was entered, but its id maps could not be written.
    After(io::Error),
}

impl std::fmt::Display for EnterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnterError::Before(e) => write!(f, "{e}"),
            EnterError::After(e) => write!(f, "entered a user namespace but could not map its ids: {e}"),
        }
    }
}

/// A close-on-exec pipe: (read, write).
fn pipe() -> io::Result<(libc::c_int, libc::c_int)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_ids_are_mapped_and_setgroups_denied() {
        let own = maps(None).unwrap();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(own.uid_map, format!("{uid} {uid} 1\n"));
        assert!(own.deny_setgroups);
        // The agent's user beside the own ids needs CAP_SETUID and CAP_SETGID outside.
        let agent = AgentUser { uid: uid.wrapping_add(7), gid: uid.wrapping_add(7) };
        match maps(Some(agent)) {
            Ok(both) => {
                assert!(has_capability(CAP_SETUID) && has_capability(CAP_SETGID));
                assert_eq!(both.uid_map, format!("{uid} {uid} 1\n{0} {0} 1\n", agent.uid));
                assert!(!both.deny_setgroups, "root may keep setgroups to drop its groups");
            }
            Err(e) => assert!(
                !(has_capability(CAP_SETUID) && has_capability(CAP_SETGID)) && e.to_string().contains("CAP_SETUID"),
                "{e}"
            ),
        }
    }
}
