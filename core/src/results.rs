//! Where results live, and how they are laid out.
//!
//! ```text
//! <root>/runs/<run>/run.json                      the spec, its hash, the variants
//! <root>/runs/<run>/summary.json                  per-variant outcomes, scores, cost, latency
//! <root>/runs/<run>/<variant>/<trial>/attempt-<n>/
//!     result.json    the trial's outcome, usage and cost (written last: its presence means done)
//!     review.md      the review as the agent wrote it
//!     findings.json  the findings parsed from it, ranked
//!     prompt.txt     the prompt the agent was given
//!     verdicts.json  every judge vote and the panel's decisions (written after the agent exited)
//!     interrupted-<ms>.json  what a run of the attempt spent before its pod was stopped (Kueue
//!                    preemption, eviction): see `crate::interruption`
//! ```
//! Keys are deterministic, so writing an artifact again replaces it and never duplicates it.

use std::io;
use std::path::{Path, PathBuf};

/// A place to keep results: a local directory (`file://`) here; S3 (`s3://`) in the worker.
#[allow(async_fn_in_trait)]
pub trait ResultStore: Send + Sync {
    /// Writes `bytes` at `key` atomically: a reader sees the old value or the new, never part.
    async fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()>;
    /// Reads `key`; `None` when it does not exist.
    async fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>>;
    /// The keys under `prefix` (recursively), sorted.
    async fn list(&self, prefix: &str) -> io::Result<Vec<String>>;
    /// A URI for humans and reports.
    fn uri(&self, key: &str) -> String;
    /// Whether writes can fail for a while (a store across a network), so that an attempt's
    /// artifacts are kept in a local spool until they are confirmed stored. A local directory
    /// needs none: each artifact is written once, durably, in its final place.
    fn needs_spool(&self) -> bool {
        true
    }
}

/// A `file://` results root.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore { root: root.into() }
    }

    /// The store for a `file://` URI; `None` for another scheme.
    pub fn from_uri(uri: &str) -> Option<Self> {
        uri.strip_prefix("file://").map(|path| LocalStore::new(if path.is_empty() { "." } else { path }))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// The path of `key`, which must stay under the root: relative, with no `.` or `..` part and
    /// no NUL (keys are built from checked names; this is the last line of defence).
    fn checked_path(&self, key: &str) -> io::Result<PathBuf> {
        let escapes =
            key.starts_with('/') || key.split('/').any(|part| matches!(part, "." | "..")) || key.contains('\0');
        if escapes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("result key {key:?} leaves the results root"),
            ));
        }
        Ok(self.path(key))
    }
}

/// `error` with the path it is about, keeping its kind (callers decide on retries by kind).
fn with_path(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |error| io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

impl ResultStore for LocalStore {
    /// Durable and atomic: a temporary file of a unique name in the same directory, written and
    /// synced, renamed into place, and the directory synced (and so every directory created on
    /// the way). A crash leaves the old value or the new, never part, and once this returns the
    /// new value survives one.
    async fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.checked_path(key)?;
        let bytes = bytes.to_vec();
        tokio::task::spawn_blocking(move || write_durably(&path, &bytes)).await.map_err(io::Error::other)?
    }

    async fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        let path = self.checked_path(key)?;
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(with_path(&path)(e)),
        }
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let root = self.root.clone();
        let start = if prefix.is_empty() { self.root.clone() } else { self.checked_path(prefix)? };
        tokio::task::spawn_blocking(move || {
            let mut keys = Vec::new();
            let mut stack = vec![start];
            while let Some(dir) = stack.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(with_path(&dir)(e)),
                };
                for entry in entries {
                    let entry = entry.map_err(with_path(&dir))?;
                    let path = entry.path();
                    if entry.file_type().map_err(with_path(&path))?.is_dir() {
                        stack.push(path);
                    } else if let Ok(relative) = path.strip_prefix(&root) {
                        let key = relative.to_string_lossy().replace('\\', "/");
                        if !key.contains(TMP_PREFIX) {
                            keys.push(key);
                        }
                    }
                }
            }
            keys.sort();
            Ok(keys)
        })
        .await
        .map_err(io::Error::other)?
    }

    fn uri(&self, key: &str) -> String {
        format!("file://{}", self.path(key).display())
    }

    fn needs_spool(&self) -> bool {
        false
    }
}

/// The prefix of temporary files in a local store, which `list` skips.
const TMP_PREFIX: &str = ".tmp-";

/// Writes `bytes` at `path` durably and atomically (see [`LocalStore::put`]); errors name the
/// path.
fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let named = |what: &str, at: &Path, e: io::Error| io::Error::new(e.kind(), format!("{what} {}: {e}", at.display()));
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    create_dirs_durably(dir).map_err(|e| named("creating", dir, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .tempfile_in(dir)
        .map_err(|e| named("creating a file in", dir, e))?;
    tmp.write_all(bytes).map_err(|e| named("writing", tmp.path(), e))?;
    tmp.as_file().sync_data().map_err(|e| named("syncing", tmp.path(), e))?;
    // On failure the temporary file is removed when dropped.
    tmp.persist(path).map_err(|e| named("renaming into", path, e.error))?;
    sync_dir(dir).map_err(|e| named("syncing", dir, e))
}

/// Creates `dir` and its missing parents, syncing each parent that gained an entry, so that a
/// file renamed into `dir` is reachable after a crash.
fn create_dirs_durably(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    create_dirs_durably(parent)?;
    match std::fs::create_dir(dir) {
        Ok(()) => sync_dir(parent),
        // Created meanwhile by another writer, which syncs it.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match dir.is_dir() {
            true => Ok(()),
            false => Err(io::Error::new(io::ErrorKind::NotADirectory, "exists and is not a directory")),
        },
        Err(e) => Err(e),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Keys of one run's results.
#[derive(Debug, Clone)]
pub struct RunLayout {
    pub run: String,
}

impl RunLayout {
    pub fn new(run: &str) -> Self {
        RunLayout { run: run.to_string() }
    }
    pub fn run_dir(&self) -> String {
        format!("runs/{}", self.run)
    }
    pub fn run_json(&self) -> String {
        format!("runs/{}/run.json", self.run)
    }
    pub fn summary_json(&self) -> String {
        format!("runs/{}/summary.json", self.run)
    }
    pub fn attempt_dir(&self, variant: &str, trial: &str, attempt: u32) -> String {
        format!("runs/{}/{variant}/{trial}/attempt-{attempt}", self.run)
    }
    pub fn artifact(&self, variant: &str, trial: &str, attempt: u32, name: &str) -> String {
        format!("{}/{name}", self.attempt_dir(variant, trial, attempt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_list_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        store.put("runs/a/x/t/attempt-1/result.json", b"{}").await.unwrap();
        store.put("runs/a/x/t/attempt-1/result.json", b"{\"v\":2}").await.unwrap();
        store.put("runs/a/summary.json", b"s").await.unwrap();
        assert_eq!(store.get("runs/a/x/t/attempt-1/result.json").await.unwrap().unwrap(), b"{\"v\":2}");
        assert_eq!(store.get("runs/a/none").await.unwrap(), None);
        assert_eq!(
            store.list("runs/a").await.unwrap(),
            vec!["runs/a/summary.json", "runs/a/x/t/attempt-1/result.json"]
        );
        assert!(store.list("runs/missing").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn keys_that_leave_the_root_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().join("results"));
        for key in ["runs/../../../../tmp/x/run.json", "/etc/passwd", "runs/./a", "../x"] {
            let error = store.put(key, b"x").await.expect_err(key);
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{key}");
            assert!(error.to_string().contains("leaves the results root"), "{error}");
            assert!(store.get(key).await.is_err(), "{key}");
        }
        assert!(!dir.path().join("results").exists());
    }

    #[tokio::test]
    async fn os_errors_name_their_path_and_keep_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "not a directory").unwrap();
        let store = LocalStore::new(&file);
        let error = store.put("runs/a/run.json", b"x").await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotADirectory, "{error}");
        assert!(error.to_string().contains(&format!("{}/runs/a: ", file.display())), "{error}");
        let error = store.get("runs/a/run.json").await.unwrap_err();
        assert!(error.to_string().contains(&format!("{}/runs/a/run.json: ", file.display())), "{error}");
    }

    #[tokio::test]
    async fn concurrent_puts_in_one_directory_never_share_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        // `agent.stdout` and `agent.stderr` once had the same temporary name.
        let keys: Vec<String> = (0..16)
            .flat_map(|i| {
                [
                    format!("runs/a/v/t/attempt-{}/agent.stdout", i % 2),
                    format!("runs/a/v/t/attempt-{}/agent.stderr", i % 2),
                ]
            })
            .collect();
        let puts = keys.iter().enumerate().map(|(i, key)| {
            let store = store.clone();
            async move { store.put(key, format!("{key} {i}").repeat(1000).as_bytes()).await }
        });
        for result in futures::future::join_all(puts).await {
            result.unwrap();
        }
        for attempt in 0..2 {
            let attempt_dir = dir.path().join(format!("runs/a/v/t/attempt-{attempt}"));
            let mut names: Vec<String> = std::fs::read_dir(&attempt_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, ["agent.stderr", "agent.stdout"], "no temporary file left");
            for name in &names {
                let text = std::fs::read_to_string(attempt_dir.join(name)).unwrap();
                let key = format!("runs/a/v/t/attempt-{attempt}/{name}");
                let whole = |i: usize| keys[i] == key && text == format!("{key} {i}").repeat(1000);
                assert!((0..keys.len()).any(whole), "{key} holds one whole write of its own");
            }
        }
    }

    #[tokio::test]
    async fn a_put_that_cannot_be_written_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("runs"), "a file, not a directory").unwrap();
        let store = LocalStore::new(dir.path());
        let error = store.put("runs/a/result.json", b"{}").await.unwrap_err();
        assert!(error.to_string().contains(&dir.path().join("runs/a").display().to_string()), "{error}");
        assert!(!store.needs_spool());
    }
}
