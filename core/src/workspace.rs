//! A task's working tree: the repository at its base commit with the change under review
//! applied as uncommitted modifications, as CRBugBench gives it to an agent.
//!
//! Repositories may come as a plain base tree (the sample dataset keeps them so); a tree is
//! committed with a fixed identity and date so that its commit id is reproducible and can be
//! checked against the dataset's `base_commit`.

use std::path::Path;
use std::process::Command;

/// The identity and time of reproducible commits.
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "Lightsout Sample"),
    ("GIT_AUTHOR_EMAIL", "sample@lightsout.dev"),
    ("GIT_COMMITTER_NAME", "Lightsout Sample"),
    ("GIT_COMMITTER_EMAIL", "sample@lightsout.dev"),
];
const BASE_DATE: &str = "2026-01-01T00:00:00Z";
const CHANGE_DATE: &str = "2026-01-02T00:00:00Z";

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("git {args}: {message}")]
    Git { args: String, message: String },
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

fn git(dir: &Path, args: &[&str], date: Option<&str>, stdin: Option<&[u8]>) -> Result<String, WorkspaceError> {
    use std::io::Write;
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .args(["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(IDENTITY);
    if let Some(date) = date {
        command.env("GIT_AUTHOR_DATE", date).env("GIT_COMMITTER_DATE", date);
    }
    let fail = |message: String| WorkspaceError::Git { args: args.join(" "), message };
    let mut child = command
        .stdin(if stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start git: {e}")))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes).map_err(|e| fail(e.to_string()))?;
    }
    let output = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !output.status.success() {
        return Err(fail(String::from_utf8_lossy(&output.stderr).trim().to_string()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError {
    let path = path.display().to_string();
    move |source| WorkspaceError::Io { path, source }
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let target = to.join(entry.file_name());
        let file_type = entry.file_type().map_err(io(&entry.path()))?;
        if file_type.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if file_type.is_symlink() {
            // A link is copied as a link (as git would check it out), never as what it points
            // to: a base tree cannot carry files from outside itself into the agent's workspace.
            let link = std::fs::read_link(entry.path()).map_err(io(&entry.path()))?;
            std::os::unix::fs::symlink(&link, &target).map_err(io(&target))?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(io(&target))?;
        }
    }
    Ok(())
}

/// Commits the base tree `tree` into a new repository at `dest`; returns the base commit id.
pub fn materialise_base(tree: &Path, dest: &Path) -> Result<String, WorkspaceError> {
    copy_tree(tree, dest)?;
    git(dest, &["init", "-q"], None, None)?;
    git(dest, &["add", "-A"], None, None)?;
    git(dest, &["commit", "-q", "-m", "base"], Some(BASE_DATE), None)?;
    git(dest, &["rev-parse", "HEAD"], None, None)
}

/// Applies the change under review to the working tree, uncommitted.
pub fn apply_change(dest: &Path, diff: &str) -> Result<(), WorkspaceError> {
    git(dest, &["apply", "--whitespace=nowarn", "-"], None, Some(diff.as_bytes()))?;
    Ok(())
}

/// Commits the applied change as the dataset's reviewed commit; returns its id.
pub fn commit_change(dest: &Path, title: &str) -> Result<String, WorkspaceError> {
    git(dest, &["add", "-A"], None, None)?;
    git(dest, &["commit", "-q", "-m", title], Some(CHANGE_DATE), None)?;
    git(dest, &["rev-parse", "HEAD"], None, None)
}

/// A trial's working tree: `repo/` (the base commit with the change applied, uncommitted) and
/// `pr/` (title, description and diff as files, as CRBugBench gives them).
#[derive(Debug, Clone)]
pub struct TrialWorkspace {
    pub repo: std::path::PathBuf,
    pub pr: std::path::PathBuf,
}

/// Prepares a trial's workspace under `dir` from the repository's base tree. When the task
/// names its base commit, the materialised one must match it.
pub fn prepare(task: &crate::dataset::Task, base_tree: &Path, dir: &Path) -> Result<TrialWorkspace, WorkspaceError> {
    let repo = dir.join("repo");
    let pr = dir.join("pr");
    let base = materialise_base(base_tree, &repo)?;
    if let Some(expected) = task.base_commit.as_deref().filter(|c| !c.is_empty()) {
        if !base.starts_with(expected) && !expected.starts_with(&base) {
            return Err(WorkspaceError::Git {
                args: "rev-parse HEAD".into(),
                message: format!(
                    "{} materialises as {base}, but task {} names base commit {expected}",
                    base_tree.display(),
                    task.id
                ),
            });
        }
    }
    apply_change(&repo, &task.diff)?;
    std::fs::create_dir_all(&pr).map_err(io(&pr))?;
    for (name, text) in [
        ("title.txt", task.title.as_str()),
        ("description.md", task.description.as_str()),
        ("diff.patch", task.diff.as_str()),
    ] {
        let path = pr.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(TrialWorkspace { repo, pr })
}

/// Where a local dataset keeps a task's repository base tree: `repos/<name>` beside the dataset
/// file, `<name>` being the last part of the task's `repo` (which dataset loading has checked
/// is a safe path component: `repo: "../.."` never gets this far).
pub fn local_base_tree(dataset_file: &Path, repo: &str) -> std::path::PathBuf {
    let name = repo.rsplit('/').next().unwrap_or(repo);
    let dir = dataset_file.parent().unwrap_or(Path::new("."));
    // SWE-PRBench's tasks.jsonl sits one level down (swe-prbench/), beside annotations/.
    let candidate = dir.join("repos").join(name);
    if candidate.exists() {
        return candidate;
    }
    dir.parent().map(|p| p.join("repos").join(name)).filter(|p| p.exists()).unwrap_or(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_in_a_base_tree_is_copied_as_a_link_not_as_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("ground-truth.jsonl");
        std::fs::write(&secret, "the answers").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/a.py"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink(&secret, tree.join("src/answers")).unwrap();
        let copy = dir.path().join("copy");
        copy_tree(&tree, &copy).unwrap();
        assert_eq!(std::fs::read_to_string(copy.join("src/a.py")).unwrap(), "x = 1\n");
        let copied = copy.join("src/answers");
        assert!(std::fs::symlink_metadata(&copied).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_link(&copied).unwrap(), secret);
    }
}
