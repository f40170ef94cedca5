//! The system-call filter every agent runs under (with `no_new_privs`), installed by the sandbox's
//! init just before it starts the agent. Both work without privileges, so they hold in a pod too.
//!
//! It is a deny list: an agent runs arbitrary developer tools (compilers, package managers, test
//! suites), which an allow list would break. What it refuses is what lets one process reach into
//! another, change the system, or widen the kernel's attack surface — none of which reviewing
//! code needs:
//! - reaching into other processes: `ptrace`, `process_vm_readv`/`writev`, `process_madvise`,
//!   `pidfd_getfd` (stealing another process's descriptors), `kcmp`;
//! - leaving or reshaping the sandbox: `unshare`, `setns`, `clone` with any namespace flag,
//!   `mount`/`umount2`/`pivot_root` and the new mount API (`open_tree`, `move_mount`, `fsopen`,
//!   `fsconfig`, `fsmount`, `fspick`, `mount_setattr`), `chroot`;
//! - the kernel itself: `kexec_load`/`kexec_file_load`, `init_module`/`finit_module`/
//!   `delete_module`, `reboot`, `swapon`/`swapoff`, `acct`, `settimeofday`/`clock_settime`/
//!   `clock_adjtime`/`adjtimex`, `syslog`, `quotactl`, `iopl`/`ioperm` (x86);
//! - frequent kernel-exploit primitives: `bpf`, `perf_event_open`, `userfaultfd`, `keyctl`/
//!   `add_key`/`request_key` (the kernel keyring is not namespaced), `open_by_handle_at` (the
//!   classic container escape), `io_uring_*` (its operations bypass this filter).
//!
//! - when the agent shares a PID namespace with the processes that run it (no PID namespace could
//!   be made: an unprivileged pod), reaching those: signals to the worker, the sandbox and its
//!   init or their process groups (`kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`,
//!   `rt_tgsigqueueinfo`), `kill(-1)` (every process of the uid), `pidfd_open` of them (a pidfd
//!   signals too) and `prlimit64` on them. An agent that killed its worker would have its trial
//!   retried as an infrastructure failure instead of scored.
//!
//! Refused calls fail with `EPERM`, except `clone3`, which fails with `ENOSYS`: its flags are in
//! memory a filter cannot read, and `ENOSYS` makes the C library fall back to `clone`, whose
//! flags it can.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// Refused outright, with `EPERM`.
const REFUSED: &[(&str, libc::c_long)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("process_madvise", libc::SYS_process_madvise),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
];

/// `clone` flags that create namespaces (`CLONE_NEWTIME` overlaps `clone`'s exit-signal bits
/// and can only be asked for through `unshare` or `clone3`, both refused).
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The names of the calls the filter refuses, for the record and the documentation.
pub fn refused_calls() -> Vec<&'static str> {
    let mut names: Vec<&str> = REFUSED.iter().map(|(name, _)| *name).collect();
    names.extend(["clone (with namespace flags)", "clone3 (ENOSYS)"]);
    names
}

fn target_arch() -> Result<TargetArch, String> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else {
        Err(format!("no system-call filter for the {} architecture", std::env::consts::ARCH))
    }
}

/// The compiled filter: refusals with `EPERM`, and `clone3` with `ENOSYS`.
pub struct Filter([BpfProgram; 2]);

/// Calls whose first argument is a process (or, for `kill`, a negated process group), refused
/// when it names a protected one.
const TARGETING_A_PROCESS: &[libc::c_long] = &[
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_pidfd_open,
    libc::SYS_prlimit64,
];

impl Filter {
    /// The filter for an agent in a PID namespace of its own: no process outside it is in reach.
    pub fn build() -> Result<Filter, String> {
        programs(&[])
    }

    /// The filter for an agent that shares its PID namespace with `protected` (the worker, the
    /// sandbox, its init): none of them, nor their process groups, may be signalled or limited.
    /// The agent's own process group `own_group` stays in reach: signalling it ends only the
    /// agent's own trial (the sandbox and its init are in it; the worker is not).
    pub fn protecting(protected: &[libc::pid_t], own_group: libc::pid_t) -> Result<Filter, String> {
        let mut targets: Vec<libc::pid_t> = vec![-1];
        for &pid in protected.iter().filter(|&&pid| pid > 0) {
            targets.push(pid);
            // SAFETY: getpgid with an integer argument.
            let group = unsafe { libc::getpgid(pid) };
            if group > 1 && group != own_group {
                targets.push(-group);
            }
        }
        targets.sort_unstable();
        targets.dedup();
        programs(&targets)
    }

    /// Sets `no_new_privs` and installs the filter on the calling thread (the sandbox's
    /// single-threaded init; the agent it starts inherits both). Allocates nothing unless it
    /// fails, so it may run in a freshly forked child.
    pub fn install(&self) -> Result<(), String> {
        for program in &self.0 {
            seccompiler::apply_filter(program).map_err(|e| format!("installing the system-call filter: {e}"))?;
        }
        Ok(())
    }
}

fn programs(protected_targets: &[libc::pid_t]) -> Result<Filter, String> {
    let arch = target_arch()?;
    let error = |e: seccompiler::BackendError| format!("building the system-call filter: {e}");
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = REFUSED.iter().map(|(_, nr)| (*nr, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = *flag as u64;
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(error)?;
    refused.insert(libc::SYS_clone, clone_rules);
    if !protected_targets.is_empty() {
        for &call in TARGETING_A_PROCESS {
            let rules = protected_targets
                .iter()
                .map(|&target| {
                    // A pid_t is 32 bits: compare the low half, whatever the caller left above it.
                    SeccompRule::new(vec![SeccompCondition::new(
                        0,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::Eq,
                        u64::from(target as u32),
                    )?])
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(error)?;
            refused.insert(call, rules);
        }
    }
    let refuse = SeccompFilter::new(refused, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(error)?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(error)?;
    let compile = |filter: SeccompFilter| {
        BpfProgram::try_from(filter).map_err(|e| format!("compiling the system-call filter: {e}"))
    };
    Ok(Filter([compile(refuse)?, compile(clone3)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_refuses_what_it_lists_and_allows_the_rest() {
        let filter = Filter::build().unwrap();
        // In a child process: a filter cannot be removed from the process that installed it.
        // SAFETY: the child only makes system calls and exits; it allocates nothing (the filter
        // was built before the fork), so no lock another thread held matters.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = (|| {
                filter.install().ok()?;
                // SAFETY: plain system calls with integer arguments, expected to be refused.
                let errno = || std::io::Error::last_os_error().raw_os_error();
                unsafe {
                    if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != -1 || errno() != Some(libc::EPERM) {
                        return None;
                    }
                    if libc::unshare(libc::CLONE_NEWUSER) != -1 || errno() != Some(libc::EPERM) {
                        return None;
                    }
                    if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != Some(libc::ENOSYS) {
                        return None;
                    }
                    if libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 || libc::getpid() <= 0 {
                        return None;
                    }
                    // Plain fork still works (clone without namespace flags).
                    let child = libc::fork();
                    if child == 0 {
                        libc::_exit(0);
                    }
                    let mut status = 0;
                    if child < 0 || libc::waitpid(child, &mut status, 0) != child {
                        return None;
                    }
                }
                Some(())
            })()
            .map_or(1, |()| 0);
            // SAFETY: ends the child without running the parent's destructors or test harness.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
        assert!(refused_calls().contains(&"ptrace"));
    }

    #[test]
    fn a_protected_process_and_its_group_cannot_be_signalled_and_others_can() {
        // SAFETY: getpid with no arguments.
        let test_process = unsafe { libc::getpid() };
        // Built before the fork (a forked child of a threaded process must not allocate); the
        // child takes a group of its own, as the sandbox has, so the test process's is protected.
        let filter = Filter::protecting(&[test_process], 0).unwrap();
        // SAFETY: as above; the child makes system calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = (|| {
                // SAFETY: setpgid with integer arguments.
                unsafe { libc::setpgid(0, 0) };
                filter.install().ok()?;
                let refused = |result: libc::c_long| {
                    result == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
                };
                // SAFETY: signal 0 only checks that a signal could be sent; nothing is delivered.
                unsafe {
                    let group = libc::getpgid(test_process);
                    let checks = [
                        refused(libc::kill(test_process, 0) as libc::c_long),
                        refused(libc::kill(-1, 0) as libc::c_long),
                        group <= 1 || refused(libc::kill(-group, 0) as libc::c_long),
                        refused(libc::syscall(libc::SYS_tgkill, test_process, test_process, 0)),
                        refused(libc::syscall(libc::SYS_pidfd_open, test_process, 0)),
                        // Its own processes and group stay in reach.
                        libc::kill(libc::getpid(), 0) == 0,
                        libc::kill(-libc::getpid(), 0) == 0,
                        libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) >= 0,
                    ];
                    checks.iter().all(|ok| *ok).then_some(())
                }
            })()
            .map_or(1, |()| 0);
            // SAFETY: ends the child without running the parent's destructors or test harness.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
    }
}
