//! [`Uploader`]: writes one attempt's artifacts to a [`ResultStore`] through a local spool, so
//! that a storage outage costs at most the attempt, never its results.
//!
//! Each artifact is first written to the spool directory (atomically: a temporary file renamed
//! into place), then uploaded, then removed from the spool. Artifacts whose file name is the
//! *commit* name (`result.json` by default) are uploaded last, and only once every other
//! artifact is confirmed, so the commit object's presence in the store means the set is
//! complete. When the store stays unreachable the uploader keeps trying until its deadline and
//! then fails with an error that ends the attempt as an infrastructure failure, leaving what is
//! not uploaded in the spool; [`Uploader::resume_spool`] uploads it later, from this process or
//! another. Keys are the caller's and deterministic, so a retried or resumed upload replaces
//! objects and never duplicates them.
//!
//! A spool directory belongs to one attempt and one process at a time. Its entries are
//! `<sha256(key)>.artifact` and `<sha256(key)>.commit` files holding the key as a JSON string on
//! the first line, then the bytes.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lightsout_core::results::ResultStore;
use sha2::{Digest, Sha256};

use crate::retry::RetryPolicy;

/// The commit name by default: the attempt's `result.json`.
pub const DEFAULT_COMMIT: &str = "result.json";

const ARTIFACT_EXT: &str = "artifact";
const COMMIT_EXT: &str = "commit";
const TMP_PREFIX: &str = ".tmp-";

/// One object to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The store key (e.g. from `RunLayout::artifact`).
    pub key: String,
    pub bytes: Vec<u8>,
}

impl Artifact {
    pub fn new(key: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Artifact { key: key.into(), bytes: bytes.into() }
    }
}

/// What an upload did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UploadReport {
    /// The keys uploaded, in order (commit keys last).
    pub uploaded: Vec<String>,
}

/// An upload that could not finish: the attempt must end as an infrastructure failure.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The spool could not be written or read (a full or broken disk).
    #[error(
        "could not use the upload spool {}: {source}; the attempt must end as an infrastructure failure",
        dir.display()
    )]
    Spool { dir: PathBuf, source: io::Error },
    /// The store refused or stayed unreachable until the deadline.
    #[error(
        "uploading {uri} failed for {:.1}s ({tries} tries, deadline {:.1}s): {source}; the attempt must end as \
         an infrastructure failure ({pending} artifact(s) left in the spool {} for resume_spool)",
        waited.as_secs_f64(), deadline.as_secs_f64(), spool.display()
    )]
    Upload {
        key: String,
        uri: String,
        spool: PathBuf,
        /// Artifacts still in the spool, this one included.
        pending: usize,
        tries: u32,
        waited: Duration,
        deadline: Duration,
        source: io::Error,
    },
}

impl UploadError {
    /// The spool directory that holds what is not uploaded.
    pub fn spool_dir(&self) -> &Path {
        match self {
            UploadError::Spool { dir, .. } => dir,
            UploadError::Upload { spool, .. } => spool,
        }
    }
}

impl From<UploadError> for io::Error {
    fn from(error: UploadError) -> Self {
        let kind = match &error {
            UploadError::Spool { source, .. } | UploadError::Upload { source, .. } => source.kind(),
        };
        io::Error::new(kind, error)
    }
}

/// Uploads a set of artifacts for one attempt through a spool directory.
#[derive(Debug, Clone)]
pub struct Uploader<S> {
    store: S,
    spool: PathBuf,
    commit: String,
    deadline: Duration,
    backoff: RetryPolicy,
}

impl<S: ResultStore> Uploader<S> {
    /// An uploader to `store` spooling in `spool` (one directory per attempt; created as
    /// needed). Defaults: commit name `result.json`, a 10-minute deadline, waits between tries
    /// growing from 1 s to 30 s.
    pub fn new(store: S, spool: impl Into<PathBuf>) -> Self {
        Uploader {
            store,
            spool: spool.into(),
            commit: DEFAULT_COMMIT.to_string(),
            deadline: Duration::from_secs(600),
            backoff: RetryPolicy {
                attempts: u32::MAX,
                base_delay: Duration::from_secs(1),
                max_delay: Duration::from_secs(30),
            },
        }
    }

    /// The commit name: an artifact whose key is `commit`, or ends with `/commit`, is uploaded
    /// after all the others.
    pub fn with_commit(mut self, commit: impl Into<String>) -> Self {
        self.commit = commit.into();
        self
    }

    /// How long an upload (or a resume) may take in all before it gives up.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The wait between tries of one artifact doubles from `base` up to `max` (jittered).
    pub fn with_backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff = RetryPolicy { attempts: u32::MAX, base_delay: base, max_delay: max };
        self
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn spool_dir(&self) -> &Path {
        &self.spool
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Whether `key` is a commit key, uploaded last.
    pub fn is_commit(&self, key: &str) -> bool {
        key == self.commit || key.strip_suffix(self.commit.as_str()).is_some_and(|rest| rest.ends_with('/'))
    }

    /// Spools `artifacts` (commit artifacts last), then uploads everything in the spool
    /// directory (anything an earlier process left there too) with the commit artifacts last,
    /// and removes the spool once all is confirmed.
    pub async fn upload(&self, artifacts: Vec<Artifact>) -> Result<UploadReport, UploadError> {
        let started = Instant::now();
        if let Some(empty) = artifacts.iter().find(|a| a.key.is_empty() || a.key.contains('\n')) {
            return Err(UploadError::Spool {
                dir: self.spool.clone(),
                source: io::Error::new(io::ErrorKind::InvalidInput, format!("invalid artifact key {:?}", empty.key)),
            });
        }
        let (commits, others): (Vec<Artifact>, Vec<Artifact>) =
            artifacts.into_iter().partition(|a| self.is_commit(&a.key));
        let dir = self.spool.clone();
        let entries: Vec<(Artifact, bool)> =
            others.into_iter().map(|a| (a, false)).chain(commits.into_iter().map(|a| (a, true))).collect();
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            for (artifact, commit) in &entries {
                spool_entry(&dir, &artifact.key, &artifact.bytes, *commit)?;
            }
            Ok(())
        })
        .await
        .map_err(io::Error::other)
        .and_then(|result| result)
        .map_err(|source| UploadError::Spool { dir: self.spool.clone(), source })?;
        self.drain(&self.spool, started).await
    }

    /// Uploads what an earlier process left in the spool directory `dir` (the commit artifacts
    /// last) and removes it. A missing or empty directory uploads nothing.
    pub async fn resume_spool(&self, dir: &Path) -> Result<UploadReport, UploadError> {
        self.drain(dir, Instant::now()).await
    }

    async fn drain(&self, dir: &Path, started: Instant) -> Result<UploadReport, UploadError> {
        let spool_error = |source| UploadError::Spool { dir: dir.to_path_buf(), source };
        let owned = dir.to_path_buf();
        let entries = tokio::task::spawn_blocking(move || list_spool(&owned))
            .await
            .map_err(io::Error::other)
            .and_then(|result| result)
            .map_err(spool_error)?;
        let mut report = UploadReport::default();
        for (index, path) in entries.iter().enumerate() {
            let (key, bytes) = read_entry(path).await.map_err(spool_error)?;
            self.put_until_deadline(&key, &bytes, started).await.map_err(|(source, tries)| UploadError::Upload {
                uri: self.store.uri(&key),
                key: key.clone(),
                spool: dir.to_path_buf(),
                pending: entries.len() - index,
                tries,
                waited: started.elapsed(),
                deadline: self.deadline,
                source,
            })?;
            match tokio::fs::remove_file(path).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(spool_error(e)),
            }
            report.uploaded.push(key);
        }
        match tokio::fs::remove_dir(dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // Something else lives there; what was ours is gone.
            Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "spool directory kept"),
        }
        Ok(report)
    }

    /// Puts `key`, trying again after any failure but a permanent one ([`is_permanent`]) until
    /// the deadline (counted from `started`). The error comes with the tries made.
    async fn put_until_deadline(&self, key: &str, bytes: &[u8], started: Instant) -> Result<(), (io::Error, u32)> {
        let deadline = started + self.deadline;
        let mut tries = 0;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let error = if remaining.is_zero() {
                io::Error::new(io::ErrorKind::TimedOut, "the upload deadline passed")
            } else {
                tries += 1;
                match tokio::time::timeout(remaining, self.store.put(key, bytes)).await {
                    Ok(Ok(())) => return Ok(()),
                    Ok(Err(error)) => error,
                    Err(_) => io::Error::new(io::ErrorKind::TimedOut, "the upload deadline passed during a try"),
                }
            };
            if is_permanent(error.kind()) {
                return Err((error, tries));
            }
            let wait = self.backoff.backoff(tries.max(1));
            if Instant::now() + wait >= deadline {
                return Err((error, tries));
            }
            tracing::warn!(uri = %self.store.uri(key), error = %error, retry_in = ?wait, "upload failed; will retry");
            tokio::time::sleep(wait).await;
        }
    }
}

/// Errors that trying again cannot cure, so the upload fails at once instead of waiting out its
/// deadline: refusals, bad keys, and a destination that is full, read-only or not a directory.
fn is_permanent(kind: io::ErrorKind) -> bool {
    use io::ErrorKind::*;
    matches!(
        kind,
        PermissionDenied
            | InvalidInput
            | StorageFull
            | QuotaExceeded
            | FileTooLarge
            | ReadOnlyFilesystem
            | NotADirectory
            | IsADirectory
    )
}

/// The spool file name of `key`.
fn entry_stem(key: &str) -> String {
    hex::encode(&Sha256::digest(key.as_bytes())[..16])
}

/// Writes one spool entry atomically (a temporary file, synced, then renamed into place).
fn spool_entry(dir: &Path, key: &str, bytes: &[u8], commit: bool) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let stem = entry_stem(key);
    let (ext, other_ext) = if commit { (COMMIT_EXT, ARTIFACT_EXT) } else { (ARTIFACT_EXT, COMMIT_EXT) };
    let tmp = dir.join(format!("{TMP_PREFIX}{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        serde_json::to_writer(&mut file, key)?;
        file.write_all(b"\n")?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join(format!("{stem}.{ext}")))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    // The same key spooled earlier under the other class.
    match std::fs::remove_file(dir.join(format!("{stem}.{other_ext}"))) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The spool's entries in upload order: artifacts, then commits (each sorted by name).
/// Removes temporary files a crashed writer left.
fn list_spool(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut artifacts = Vec::new();
    let mut commits = Vec::new();
    for entry in read {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with(TMP_PREFIX) {
            std::fs::remove_file(&path)?;
            continue;
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some(ARTIFACT_EXT) => artifacts.push(path),
            Some(COMMIT_EXT) => commits.push(path),
            _ => {}
        }
    }
    artifacts.sort();
    commits.sort();
    artifacts.extend(commits);
    Ok(artifacts)
}

async fn read_entry(path: &Path) -> io::Result<(String, Vec<u8>)> {
    let mut bytes = tokio::fs::read(path).await?;
    let corrupt = || io::Error::new(io::ErrorKind::InvalidData, format!("spool entry {} is corrupt", path.display()));
    let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(corrupt)?;
    let key: String = serde_json::from_slice(&bytes[..newline]).map_err(|_| corrupt())?;
    bytes.drain(..=newline);
    Ok((key, bytes))
}

#[cfg(test)]
mod tests {
    use lightsout_core::results::LocalStore;

    use super::*;

    #[test]
    fn commit_keys_are_the_commit_name_or_end_with_it() {
        let uploader = Uploader::new(LocalStore::new("/nonexistent"), "/nonexistent-spool");
        assert!(uploader.is_commit("runs/r/v/t/attempt-1/result.json"));
        assert!(uploader.is_commit("result.json"));
        assert!(!uploader.is_commit("runs/r/v/t/attempt-1/not-result.json"));
        assert!(!uploader.is_commit("runs/r/v/t/attempt-1/review.md"));
        let custom = uploader.with_commit("runs/r/summary.json");
        assert!(custom.is_commit("runs/r/summary.json"));
        assert!(!custom.is_commit("runs/r/v/t/attempt-1/result.json"));
    }

    #[test]
    fn spool_entries_round_trip_and_order_commits_last() {
        let dir = tempfile::tempdir().unwrap();
        spool_entry(dir.path(), "a/result.json", b"{}", true).unwrap();
        spool_entry(dir.path(), "a/review.md", b"line\nline\n", false).unwrap();
        spool_entry(dir.path(), "a/z.json", b"", false).unwrap();
        spool_entry(dir.path(), "a/z.json", b"replaced", false).unwrap();
        std::fs::write(dir.path().join(".tmp-1-1"), b"half").unwrap();
        let entries = list_spool(dir.path()).unwrap();
        assert_eq!(entries.len(), 3, "{entries:?}");
        assert!(!dir.path().join(".tmp-1-1").exists(), "a crashed writer's temporary file is removed");
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let read: Vec<(String, Vec<u8>)> = entries.iter().map(|p| rt.block_on(read_entry(p)).unwrap()).collect();
        assert_eq!(read.last().unwrap(), &("a/result.json".to_string(), b"{}".to_vec()));
        assert!(read.contains(&("a/review.md".to_string(), b"line\nline\n".to_vec())));
        assert!(read.contains(&("a/z.json".to_string(), b"replaced".to_vec())));
        assert!(list_spool(&dir.path().join("missing")).unwrap().is_empty());
    }

    #[tokio::test]
    async fn uploads_to_a_local_store_and_removes_the_spool() {
        let root = tempfile::tempdir().unwrap();
        let spool = tempfile::tempdir().unwrap();
        let spool_dir = spool.path().join("attempt");
        let uploader = Uploader::new(LocalStore::new(root.path()), &spool_dir);
        let report = uploader
            .upload(vec![
                Artifact::new("runs/r/v/t/attempt-1/result.json", "{}"),
                Artifact::new("runs/r/v/t/attempt-1/review.md", "# review"),
            ])
            .await
            .unwrap();
        assert_eq!(report.uploaded, vec!["runs/r/v/t/attempt-1/review.md", "runs/r/v/t/attempt-1/result.json"]);
        assert!(!spool_dir.exists());
        assert_eq!(std::fs::read_to_string(root.path().join("runs/r/v/t/attempt-1/review.md")).unwrap(), "# review");
        assert!(uploader.resume_spool(&spool_dir).await.unwrap().uploaded.is_empty());
    }

    /// A store whose every put fails with one error kind, counting the tries.
    #[derive(Clone)]
    struct Failing(io::ErrorKind, std::sync::Arc<AtomicU64>);

    impl ResultStore for Failing {
        async fn put(&self, key: &str, _bytes: &[u8]) -> io::Result<()> {
            self.1.fetch_add(1, Ordering::SeqCst);
            Err(io::Error::new(self.0, format!("/results/{key}: failing store")))
        }
        async fn get(&self, _key: &str) -> io::Result<Option<Vec<u8>>> {
            Ok(None)
        }
        async fn list(&self, _prefix: &str) -> io::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn uri(&self, key: &str) -> String {
            format!("file:///results/{key}")
        }
    }

    #[tokio::test]
    async fn a_full_or_read_only_destination_fails_at_the_first_try() {
        for kind in [io::ErrorKind::StorageFull, io::ErrorKind::ReadOnlyFilesystem, io::ErrorKind::NotADirectory] {
            let spool = tempfile::tempdir().unwrap();
            let tries = std::sync::Arc::new(AtomicU64::new(0));
            // A deadline no test could wait out: only failing at once passes.
            let uploader = Uploader::new(Failing(kind, tries.clone()), spool.path().join("attempt"))
                .with_deadline(Duration::from_secs(3600));
            let error = uploader.upload(vec![Artifact::new("runs/r/result.json", "{}")]).await.unwrap_err();
            assert_eq!(tries.load(Ordering::SeqCst), 1, "{kind:?}: {error}");
            assert!(error.to_string().contains("/results/runs/r/result.json: failing store"), "{error}");
            assert_eq!(io::Error::from(error).kind(), kind);
        }
    }

    #[tokio::test]
    async fn a_results_root_that_is_a_file_fails_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("results");
        std::fs::write(&file, "a file").unwrap();
        let uploader =
            Uploader::new(LocalStore::new(&file), dir.path().join("spool")).with_deadline(Duration::from_secs(3600));
        let error = uploader.upload(vec![Artifact::new("runs/r/result.json", "{}")]).await.unwrap_err();
        let UploadError::Upload { tries, ref source, .. } = error else { panic!("{error}") };
        assert_eq!((tries, source.kind()), (1, io::ErrorKind::NotADirectory), "{error}");
        assert!(error.to_string().contains(&format!("{}/runs/r: ", file.display())), "{error}");
    }
}
