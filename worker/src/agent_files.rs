//! Reading what an agent leaves behind (its `review.md`, its harness's session log and log files)
//! as the untrusted input it is.
//!
//! A file is opened relative to the trial's scratch directory (a directory the worker made, which
//! the agent cannot replace) with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`: no component may be a symbolic link and the path cannot leave the
//! directory, so `ln -s /proc/self/environ review.md` or a symlinked parent directory is refused
//! rather than followed. On kernels without `openat2` (ENOSYS) the path is walked one component
//! at a time with `O_NOFOLLOW`. The file is opened `O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (a FIFO
//! cannot block the open), must be a regular file by `fstat`, and is read up to the size cap
//! plus one byte, so a file that grows after the `fstat` is caught too.
//!
//! When the worker runs as root and the agent as another user, the open happens in a thread of
//! its own that first takes the agent's user, group and no supplementary groups. Linux keeps
//! credentials per thread, and the raw `setres[ug]id`/`setgroups` system calls (unlike the C
//! library's wrappers) change only the calling thread; the thread ends after the read, so nothing
//! else of the worker runs with them. Reading as the agent means the worker can only ever read
//! what the agent itself could: a hard link to a file the agent cannot read (which no path check
//! can tell from a regular file) is refused by the kernel's own permission check, and root's
//! `CAP_DAC_OVERRIDE` is not in play. Checking owners and modes instead would have to re-implement
//! that check (groups, ACLs) and race with the agent changing them.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

use crate::agent_process::AgentUser;

/// The size cap of one agent file when the run sets none (`spec.agent.maxFileBytes`).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 << 20;

/// Why an agent file was not taken. All but [`Reason::Worker`] are the agent's doing.
#[derive(Debug)]
pub enum Reason {
    /// The file does not exist.
    Missing,
    /// The file, or a directory on its path, is a symbolic link.
    SymbolicLink,
    /// The path leads outside the directory it is read from.
    Outside,
    /// Not a regular file: a directory, a FIFO, a socket or a device.
    NotRegular(&'static str),
    /// Bigger than the cap when opened (`size`), or grew past it while read (`size: None`).
    TooLarge { size: Option<u64>, limit: u64 },
    /// The agent's user could not open or read it (e.g. a file it made unreadable, or a hard
    /// link to someone else's file).
    Unreadable(io::Error),
    /// The worker itself failed (taking the agent's user, starting a thread): not the agent's
    /// doing.
    Worker(io::Error),
}

/// A file of the agent's that was not taken, and why.
#[derive(Debug)]
pub struct Refusal {
    /// The path as the agent knows it, relative to the directory it was read from.
    pub path: PathBuf,
    pub reason: Reason,
}

impl Refusal {
    /// Whether the agent is answerable (everything but a failure of the worker's own).
    pub fn is_agents_doing(&self) -> bool {
        !matches!(self.reason, Reason::Worker(_))
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.reason {
            Reason::Missing => write!(f, "{path}: does not exist"),
            Reason::SymbolicLink => {
                write!(f, "{path}: is a symbolic link or lies under one, which is not followed")
            }
            Reason::Outside => write!(f, "{path}: leads outside the trial's directory"),
            Reason::NotRegular(kind) => write!(f, "{path}: is a {kind}, not a regular file"),
            Reason::TooLarge { size: Some(size), limit } => {
                write!(f, "{path}: {size} bytes, over the {limit}-byte limit (agent.maxFileBytes)")
            }
            Reason::TooLarge { size: None, limit } => {
                write!(f, "{path}: grew past the {limit}-byte limit (agent.maxFileBytes) while it was read")
            }
            Reason::Unreadable(e) => write!(f, "{path}: not readable as the agent's user: {e}"),
            Reason::Worker(e) => write!(f, "{path}: the worker could not read it: {e}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Set once `openat2` answered ENOSYS (a kernel before 5.6): later reads walk at once.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// How a path is resolved beneath the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolver {
    Openat2,
    /// Component by component with `O_NOFOLLOW`, for kernels without `openat2`.
    Walk,
}

/// The files of one trial's directory, read as untrusted.
#[derive(Debug)]
pub struct AgentFiles {
    root: OwnedFd,
    root_path: PathBuf,
    reader: Option<AgentUser>,
    max_bytes: u64,
}

impl AgentFiles {
    /// Reads files beneath `root` (which must be the worker's, not the agent's), as `reader`
    /// (`None`: as the worker's own user), at most `max_bytes` of each.
    pub fn open(root: &Path, reader: Option<AgentUser>, max_bytes: u64) -> io::Result<AgentFiles> {
        let root_fd = rustix::fs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("{}: {e}", root.display())))?;
        Ok(AgentFiles { root: root_fd, root_path: root.to_path_buf(), reader, max_bytes })
    }

    /// The directory files are read beneath.
    /// The most bytes of one file that are read.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// The file at `path` (relative to the root, or absolute beneath it): its bytes, or why it
    /// was refused.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, Refusal> {
        let resolver = if OPENAT2_MISSING.load(Ordering::Relaxed) { Resolver::Walk } else { Resolver::Openat2 };
        self.read_with(path, resolver)
    }

    /// Like [`AgentFiles::read`], but a missing file is `Ok(None)`.
    pub fn read_if_present(&self, path: &Path) -> Result<Option<Vec<u8>>, Refusal> {
        match self.read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(Refusal { reason: Reason::Missing, .. }) => Ok(None),
            Err(refusal) => Err(refusal),
        }
    }

    fn read_with(&self, path: &Path, resolver: Resolver) -> Result<Vec<u8>, Refusal> {
        let relative = path.strip_prefix(&self.root_path).unwrap_or(path).to_path_buf();
        let reason = |reason| Refusal { path: relative.clone(), reason };
        if relative.is_absolute() {
            return Err(reason(Reason::Outside));
        }
        let read = || read_beneath(self.root.as_fd(), &relative, self.max_bytes, resolver);
        let result = match self.reader {
            None => read(),
            Some(user) => std::thread::scope(|scope| {
                let reader = std::thread::Builder::new()
                    .name("agent-file".into())
                    .spawn_scoped(scope, || become_user(user).map_err(Reason::Worker).and_then(|()| read()))
                    .map_err(Reason::Worker)?;
                reader.join().unwrap_or_else(|_| Err(Reason::Worker(io::Error::other("the reading thread panicked"))))
            }),
        };
        result.map_err(reason)
    }
}

/// Makes the calling thread (and only it) the agent's user: no supplementary groups, then its
/// group, then its user, so root's capabilities are gone for this thread.
fn become_user(user: AgentUser) -> io::Result<()> {
    use rustix::thread::{Gid, Uid};
    let gid = Gid::from_raw(user.gid);
    let uid = Uid::from_raw(user.uid);
    rustix::thread::set_thread_groups(&[])?;
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}

/// Opens `relative` beneath `root` and reads it if it is a regular file of at most `max_bytes`.
fn read_beneath(root: BorrowedFd<'_>, relative: &Path, max_bytes: u64, resolver: Resolver) -> Result<Vec<u8>, Reason> {
    let file = open_beneath(root, relative, resolver)?;
    let size = check_regular(&file)?;
    if size > max_bytes {
        return Err(Reason::TooLarge { size: Some(size), limit: max_bytes });
    }
    read_capped(file, size, max_bytes)
}

const FILE_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::NOCTTY).union(OFlags::CLOEXEC);

fn open_beneath(root: BorrowedFd<'_>, relative: &Path, resolver: Resolver) -> Result<File, Reason> {
    if resolver == Resolver::Openat2 {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(root, relative, FILE_FLAGS, Mode::empty(), resolve) {
            Ok(fd) => return Ok(File::from(fd)),
            Err(rustix::io::Errno::NOSYS) => OPENAT2_MISSING.store(true, Ordering::Relaxed),
            Err(e) => return Err(open_error(e)),
        }
    }
    open_walking(root, relative)
}

/// The `O_NOFOLLOW` walk: every directory on the path is opened `O_PATH | O_NOFOLLOW` and must
/// be a directory (a symbolic link is then the link itself, refused); the file `O_NOFOLLOW`.
fn open_walking(root: BorrowedFd<'_>, relative: &Path) -> Result<File, Reason> {
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return Err(Reason::Outside),
        }
    }
    let Some((file_name, dirs)) = names.split_last() else { return Err(Reason::NotRegular("directory")) };
    let mut dir: Option<OwnedFd> = None;
    for name in dirs {
        let at = dir.as_ref().map_or(root, |fd| fd.as_fd());
        let next = rustix::fs::openat(at, *name, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
            .map_err(open_error)?;
        match FileType::from_raw_mode(rustix::fs::fstat(&next).map_err(open_error)?.st_mode) {
            FileType::Directory => dir = Some(next),
            FileType::Symlink => return Err(Reason::SymbolicLink),
            _ => return Err(Reason::Unreadable(io::Error::from(rustix::io::Errno::NOTDIR))),
        }
    }
    let at = dir.as_ref().map_or(root, |fd| fd.as_fd());
    rustix::fs::openat(at, *file_name, FILE_FLAGS | OFlags::NOFOLLOW, Mode::empty()).map(File::from).map_err(open_error)
}

fn open_error(errno: rustix::io::Errno) -> Reason {
    match errno {
        rustix::io::Errno::NOENT => Reason::Missing,
        rustix::io::Errno::LOOP => Reason::SymbolicLink,
        // RESOLVE_BENEATH refuses `..` past the root and absolute paths with EXDEV.
        rustix::io::Errno::XDEV => Reason::Outside,
        // The agent cannot make a device node, but a tty it opened could be reached here.
        rustix::io::Errno::NXIO => Reason::NotRegular("device or socket"),
        other => Reason::Unreadable(other.into()),
    }
}

/// The size of an open file that must be a regular file.
fn check_regular(file: &File) -> Result<u64, Reason> {
    let stat = rustix::fs::fstat(file).map_err(|e| Reason::Unreadable(e.into()))?;
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => return Ok(stat.st_size.max(0) as u64),
        FileType::Directory => "directory",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "symbolic link",
        FileType::Unknown => "file of unknown type",
    };
    Err(Reason::NotRegular(kind))
}

/// Reads at most `max_bytes + 1` bytes: one more than allowed means the file grew past the cap
/// after `fstat` said `size`.
fn read_capped(file: File, size: u64, max_bytes: u64) -> Result<Vec<u8>, Reason> {
    let mut bytes = Vec::with_capacity(size.min(max_bytes) as usize);
    file.take(max_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(Reason::Unreadable)?;
    if bytes.len() as u64 > max_bytes {
        return Err(Reason::TooLarge { size: None, limit: max_bytes });
    }
    Ok(bytes)
}

/// Reads a log the worker itself created for the agent's output (its standard output or error),
/// whose size the agent decides: the first `max_bytes`, and a note of how much was left out.
pub fn read_own_log(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(size.min(max_bytes) as usize);
    file.take(max_bytes).read_to_end(&mut bytes)?;
    if size > max_bytes {
        bytes.extend_from_slice(format!("\n[lightsout: {} more bytes not kept]\n", size - max_bytes).as_bytes());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::{symlink, PermissionsExt};

    use super::*;

    /// A trial directory with an agent-writable workspace `repo/`, and a file outside it.
    struct Trial {
        dir: tempfile::TempDir,
    }

    impl Trial {
        fn new() -> Trial {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("repo")).unwrap();
            Trial { dir }
        }
        fn path(&self, relative: &str) -> PathBuf {
            self.dir.path().join(relative)
        }
        fn files(&self, max_bytes: u64) -> AgentFiles {
            AgentFiles::open(self.dir.path(), None, max_bytes).unwrap()
        }
        /// The refusal of `relative`, the same whichever resolver runs.
        fn refusal(&self, relative: &str, max_bytes: u64) -> String {
            let files = self.files(max_bytes);
            let by_openat2 = files.read_with(Path::new(relative), Resolver::Openat2).unwrap_err().to_string();
            let by_walk = files.read_with(Path::new(relative), Resolver::Walk).unwrap_err().to_string();
            assert_eq!(by_openat2, by_walk, "both resolvers refuse alike");
            by_openat2
        }
    }

    const SYMLINK: &str = "is a symbolic link or lies under one, which is not followed";

    #[test]
    fn a_regular_file_is_read_by_either_resolver() {
        let trial = Trial::new();
        std::fs::create_dir_all(trial.path("repo/sub")).unwrap();
        std::fs::write(trial.path("repo/sub/review.md"), "# Review\n").unwrap();
        let files = trial.files(1 << 20);
        for resolver in [Resolver::Openat2, Resolver::Walk] {
            assert_eq!(files.read_with(Path::new("repo/sub/review.md"), resolver).unwrap(), b"# Review\n");
            assert_eq!(files.read_with(&trial.path("repo/./sub/review.md"), resolver).unwrap(), b"# Review\n");
        }
        assert!(files.read_if_present(Path::new("repo/missing.md")).unwrap().is_none());
        assert_eq!(trial.refusal("repo/missing.md", 1 << 20), "repo/missing.md: does not exist");
    }

    #[test]
    fn symbolic_links_are_refused_wherever_they_point() {
        let trial = Trial::new();
        // The hidden dataset, outside the workspace.
        std::fs::write(trial.path("dataset.jsonl"), "ground truth").unwrap();
        for (name, target) in [
            ("environ.md", PathBuf::from("/proc/self/environ")),
            ("shadow.md", PathBuf::from("/etc/shadow")),
            ("dataset.md", trial.path("dataset.jsonl")),
            ("relative.md", PathBuf::from("../dataset.jsonl")),
            ("inside.md", PathBuf::from("other.md")),
        ] {
            std::fs::write(trial.path("repo/other.md"), "fine").unwrap();
            symlink(&target, trial.path(&format!("repo/{name}"))).unwrap();
            assert_eq!(trial.refusal(&format!("repo/{name}"), 1 << 20), format!("repo/{name}: {SYMLINK}"));
        }
        // /proc/self/fd/N is a magic link to whatever the worker has open.
        symlink("/proc/self/fd/0", trial.path("repo/magic.md")).unwrap();
        assert_eq!(trial.refusal("repo/magic.md", 1 << 20), format!("repo/magic.md: {SYMLINK}"));
    }

    #[test]
    fn a_symlinked_directory_on_the_path_is_refused() {
        let trial = Trial::new();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("rollout.jsonl"), "secret").unwrap();
        std::fs::create_dir_all(trial.path("repo/home")).unwrap();
        symlink(elsewhere.path(), trial.path("repo/home/sessions")).unwrap();
        assert_eq!(
            trial.refusal("repo/home/sessions/rollout.jsonl", 1 << 20),
            format!("repo/home/sessions/rollout.jsonl: {SYMLINK}")
        );
        // And `..` cannot climb out either.
        std::fs::write(elsewhere.path().join("x"), "secret").unwrap();
        assert_eq!(trial.refusal("../x", 1 << 20), "../x: leads outside the trial's directory");
        let files = trial.files(1 << 20);
        let absolute = files.read(Path::new("/etc/passwd")).unwrap_err();
        assert_eq!(absolute.to_string(), "/etc/passwd: leads outside the trial's directory");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let trial = Trial::new();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            trial.path("repo/review.md"),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        // No writer ever opens it: a blocking open would hang the test forever.
        assert_eq!(trial.refusal("repo/review.md", 1 << 20), "repo/review.md: is a FIFO, not a regular file");
    }

    #[test]
    fn a_directory_and_a_socket_are_refused() {
        let trial = Trial::new();
        std::fs::create_dir(trial.path("repo/review.md")).unwrap();
        assert_eq!(trial.refusal("repo/review.md", 1 << 20), "repo/review.md: is a directory, not a regular file");
        let _listener = std::os::unix::net::UnixListener::bind(trial.path("repo/sock.md")).unwrap();
        let refusal = trial.refusal("repo/sock.md", 1 << 20);
        assert!(refusal.starts_with("repo/sock.md: is a ") && refusal.ends_with(", not a regular file"), "{refusal}");
    }

    #[test]
    fn a_huge_sparse_file_is_refused_unread() {
        let trial = Trial::new();
        let file = File::create(trial.path("repo/review.md")).unwrap();
        file.set_len(1 << 30).unwrap();
        assert_eq!(
            trial.refusal("repo/review.md", DEFAULT_MAX_FILE_BYTES),
            "repo/review.md: 1073741824 bytes, over the 8388608-byte limit (agent.maxFileBytes)"
        );
        // Exactly at the cap is fine.
        file.set_len(16).unwrap();
        assert_eq!(trial.files(16).read(Path::new("repo/review.md")).unwrap(), vec![0; 16]);
    }

    #[test]
    fn a_file_growing_past_the_cap_after_fstat_is_caught() {
        let trial = Trial::new();
        std::fs::write(trial.path("repo/review.md"), "# Review\n").unwrap();
        let files = trial.files(64);
        let file = open_beneath(files.root.as_fd(), Path::new("repo/review.md"), Resolver::Openat2).unwrap();
        let size = check_regular(&file).unwrap();
        assert_eq!(size, 9);
        // The agent's process keeps appending after the size was checked.
        let mut writer = std::fs::OpenOptions::new().append(true).open(trial.path("repo/review.md")).unwrap();
        writer.write_all(&[b'x'; 100]).unwrap();
        let refusal = read_capped(file, size, 64).unwrap_err();
        assert!(matches!(refusal, Reason::TooLarge { size: None, limit: 64 }), "{refusal:?}");
    }

    #[test]
    fn the_file_is_read_as_the_agents_user() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: reading as another user needs root (CI runs as root)");
            return;
        }
        let trial = Trial::new();
        let nobody = AgentUser { uid: 65534, gid: 65534 };
        std::fs::set_permissions(trial.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(trial.path("repo/review.md"), "# Review\n").unwrap();
        // A file only root may read, as a hard link to /etc/shadow would be: the kernel refuses
        // it to the agent's user though no path check could tell it from the agent's own file.
        std::fs::write(trial.path("repo/root-only.md"), "secret").unwrap();
        std::fs::set_permissions(trial.path("repo/root-only.md"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let files = AgentFiles::open(trial.dir.path(), Some(nobody), 1 << 20).unwrap();
        assert_eq!(files.read(Path::new("repo/review.md")).unwrap(), b"# Review\n");
        let refusal = files.read(Path::new("repo/root-only.md")).unwrap_err();
        assert!(refusal.is_agents_doing());
        assert_eq!(
            refusal.to_string(),
            "repo/root-only.md: not readable as the agent's user: Permission denied (os error 13)"
        );
        // The worker itself is still root: only the reading thread changed.
        // SAFETY: as above.
        assert_eq!(unsafe { libc::geteuid() }, 0);
        assert_eq!(std::fs::read(trial.path("repo/root-only.md")).unwrap(), b"secret");
    }

    #[test]
    fn the_worker_s_own_logs_are_kept_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.stdout");
        std::fs::write(&log, "0123456789").unwrap();
        assert_eq!(read_own_log(&log, 64).unwrap(), b"0123456789");
        assert_eq!(read_own_log(&log, 4).unwrap(), b"0123\n[lightsout: 6 more bytes not kept]\n");
    }
}
