//! The harness's session log of a trial (read through [`AgentFiles`], stored compressed, merged
//! into the proxy's trajectory) and the trajectory summary a result keeps.

use lightsout_core::compress::compress;
use lightsout_core::trial::TrajectorySummary;

use crate::agent_files::{AgentFiles, Refusal};
use crate::harness::SessionLog;

/// The most warnings a result's trajectory summary keeps, and the most characters of each.
const MAX_SUMMARY_WARNINGS: usize = 20;
const MAX_WARNING_CHARS: usize = 400;

/// Reads the harness's session log (through `files`), stores it (compressed) as an artifact, and
/// merges its tool executions into the trajectory. A missing log is not an error: it is noted in
/// the trajectory's warnings, and the trajectory stays the proxy's alone. A log file refused
/// (a link, a FIFO, over the size cap…) is, and nothing of the log is kept.
pub(crate) fn merge_session_log(
    log: &SessionLog,
    files: &AgentFiles,
    trajectory: &mut lightsout_trajectory::Trajectory,
    artifacts: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), Refusal> {
    let format = log.format.as_str();
    let shown = |path: &std::path::Path| path.strip_prefix(files.root()).unwrap_or(path).display().to_string();
    if log.files.is_empty() {
        trajectory
            .warnings
            .push(format!("no {format} log at {}: the trajectory is the proxy's alone", shown(&log.location)));
        return Ok(());
    }
    let mut read = Vec::new();
    let mut raw = Vec::new();
    let total_cap = files.max_bytes().saturating_mul(MAX_LOG_FILES_PER_CAP);
    for path in &log.files {
        if raw.len() as u64 >= total_cap {
            trajectory.warnings.push(format!(
                "{format} log passed {total_cap} bytes in total; {} and later files not read",
                shown(path)
            ));
            break;
        }
        match files.read_if_present(path)? {
            Some(bytes) => {
                raw.extend_from_slice(&bytes);
                if !raw.is_empty() && !raw.ends_with(b"\n") {
                    raw.push(b'\n');
                }
                read.push((shown(path), String::from_utf8_lossy(&bytes).into_owned()));
            }
            None => trajectory.warnings.push(format!("{format} log {} was gone when read", shown(path))),
        }
    }
    if read.is_empty() {
        trajectory.warnings.push(format!("no {format} log could be read: the trajectory is the proxy's alone"));
        return Ok(());
    }
    match compress(&raw) {
        Ok(packed) => artifacts.push((log.format.artifact().to_string(), packed)),
        Err(e) => trajectory.warnings.push(format!("{format} log not stored: compressing it failed: {e}")),
    }
    let parsed = lightsout_trajectory::parse_session(log.format, &read);
    trajectory.warnings.extend(parsed.warnings);
    lightsout_trajectory::merge_session(trajectory, &parsed.calls);
    Ok(())
}

/// How many files at the size cap the session log, and separately the harness's other logs, may
/// hold in total: an agent that writes a thousand log files just under the cap is not read whole.
pub(crate) const MAX_LOG_FILES_PER_CAP: u64 = 4;

/// What a result records of the trajectory.
pub(crate) fn summarise(trajectory: &lightsout_trajectory::Trajectory) -> TrajectorySummary {
    let mut warnings: Vec<String> = trajectory
        .warnings
        .iter()
        .take(MAX_SUMMARY_WARNINGS)
        .map(|w| match w.char_indices().nth(MAX_WARNING_CHARS) {
            Some((cut, _)) => format!("{}…", &w[..cut]),
            None => w.clone(),
        })
        .collect();
    if trajectory.warnings.len() > MAX_SUMMARY_WARNINGS {
        warnings.push(format!("… and {} more", trajectory.warnings.len() - MAX_SUMMARY_WARNINGS));
    }
    TrajectorySummary {
        turns: trajectory.turns,
        tool_calls: trajectory.tool_calls,
        action_mix: trajectory.action_mix.iter().map(|(action, n)| (action.as_str().to_string(), *n)).collect(),
        confirmed_tool_calls: trajectory.confirmed_tool_calls,
        failed_tool_calls: trajectory.failed_tool_calls,
        harness_only_tool_calls: trajectory.harness_only_tool_calls,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use lightsout_trajectory::{SessionFormat, Trajectory};

    use super::*;

    fn codex_log(scratch: &Path, files: Vec<PathBuf>) -> SessionLog {
        SessionLog { format: SessionFormat::CodexRollout, location: scratch.join("home/.codex/sessions"), files }
    }

    #[test]
    fn a_missing_session_log_is_a_warning() {
        let scratch = tempfile::tempdir().unwrap();
        let mut trajectory = Trajectory::default();
        let mut artifacts = Vec::new();
        let files = AgentFiles::open(scratch.path(), None, 1 << 20).unwrap();
        merge_session_log(&codex_log(scratch.path(), vec![]), &files, &mut trajectory, &mut artifacts).unwrap();
        assert!(artifacts.is_empty());
        assert_eq!(
            trajectory.warnings,
            ["no codex rollout log at home/.codex/sessions: the trajectory is the proxy's alone"]
        );
        assert_eq!(summarise(&trajectory).warnings, trajectory.warnings);
    }

    #[test]
    fn a_session_log_file_that_is_a_link_or_a_fifo_is_refused_and_nothing_of_the_log_kept() {
        let scratch = tempfile::tempdir().unwrap();
        let secret = scratch.path().join("secret");
        std::fs::write(&secret, "ground truth").unwrap();
        let sessions = scratch.path().join("home/.codex/sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        let good = sessions.join("rollout-good.jsonl");
        std::fs::write(&good, "{}\n").unwrap();
        let link = sessions.join("rollout-link.jsonl");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let fifo = sessions.join("rollout-fifo.jsonl");
        let c_fifo = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o644) }, 0);
        let files = AgentFiles::open(scratch.path(), None, 1 << 20).unwrap();
        for (bad, why) in [
            (link, "home/.codex/sessions/rollout-link.jsonl: is a symbolic link"),
            (fifo, "home/.codex/sessions/rollout-fifo.jsonl: is a FIFO, not a regular file"),
        ] {
            let mut trajectory = Trajectory::default();
            let mut artifacts = Vec::new();
            let log = codex_log(scratch.path(), vec![good.clone(), bad]);
            let refusal = merge_session_log(&log, &files, &mut trajectory, &mut artifacts).unwrap_err();
            assert!(refusal.is_agents_doing() && refusal.to_string().starts_with(why), "{refusal}");
            assert!(artifacts.is_empty(), "nothing of a refused log is stored");
        }
        // A file that vanished before it was read is only a warning.
        let mut trajectory = Trajectory::default();
        let mut artifacts = Vec::new();
        let log = codex_log(scratch.path(), vec![sessions.join("rollout-gone.jsonl")]);
        merge_session_log(&log, &files, &mut trajectory, &mut artifacts).unwrap();
        assert_eq!(
            trajectory.warnings,
            [
                "codex rollout log home/.codex/sessions/rollout-gone.jsonl was gone when read",
                "no codex rollout log could be read: the trajectory is the proxy's alone"
            ]
        );
    }

    #[test]
    fn a_session_log_is_stored_and_its_bad_lines_named() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("home/.codex/sessions/2026/12/01");
        std::fs::create_dir_all(&dir).unwrap();
        let rollout = dir.join("rollout-1.jsonl");
        let sample = include_str!("../../trajectory/src/samples/codex-rollout.jsonl");
        std::fs::write(&rollout, format!("{sample}not json\n")).unwrap();
        let mut trajectory = Trajectory::default();
        let mut artifacts = Vec::new();
        let files = AgentFiles::open(scratch.path(), None, 1 << 20).unwrap();
        merge_session_log(&codex_log(scratch.path(), vec![rollout]), &files, &mut trajectory, &mut artifacts).unwrap();
        assert_eq!(artifacts.len(), 1);
        assert_eq!(artifacts[0].0, "harness-session.jsonl.zst");
        let stored = lightsout_core::compress::decompress(&artifacts[0].1).unwrap();
        assert_eq!(stored, format!("{sample}not json\n").as_bytes());
        let line = sample.lines().count() + 1;
        assert_eq!(trajectory.warnings.len(), 1, "{:?}", trajectory.warnings);
        assert!(
            trajectory.warnings[0]
                .starts_with(&format!("home/.codex/sessions/2026/12/01/rollout-1.jsonl:{line}: skipped a line")),
            "{:?}",
            trajectory.warnings
        );
        // No proxy tool calls to merge into: the commands are the harness's alone.
        assert_eq!(
            (trajectory.tool_calls, trajectory.harness_only_tool_calls, trajectory.failed_tool_calls),
            (2, 2, 1)
        );
    }

    #[test]
    fn a_session_log_is_read_up_to_its_total_cap_and_the_files_left_named() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("home/.codex/sessions");
        std::fs::create_dir_all(&dir).unwrap();
        // Each file just under the 1 KiB cap; together past four times it.
        let paths: Vec<PathBuf> = (0..6)
            .map(|i| {
                let path = dir.join(format!("rollout-{i}.jsonl"));
                std::fs::write(&path, format!("{}\n", "x".repeat(1000))).unwrap();
                path
            })
            .collect();
        let files = AgentFiles::open(scratch.path(), None, 1024).unwrap();
        let (mut trajectory, mut artifacts) = (Trajectory::default(), Vec::new());
        merge_session_log(&codex_log(scratch.path(), paths), &files, &mut trajectory, &mut artifacts).unwrap();
        let stored = lightsout_core::compress::decompress(&artifacts[0].1).unwrap();
        assert_eq!(stored.len(), 5 * 1001, "read until the total passed 4 KiB");
        let warning = trajectory.warnings.iter().find(|w| w.contains("in total")).expect("the cut is said");
        assert_eq!(
            warning,
            "codex rollout log passed 4096 bytes in total; home/.codex/sessions/rollout-5.jsonl and later files not read"
        );
    }

    #[test]
    fn summaries_keep_the_first_warnings_short() {
        let trajectory = Trajectory {
            warnings: (0..30).map(|i| format!("{i}: {}", "é".repeat(500))).collect(),
            ..Default::default()
        };
        let summary = summarise(&trajectory);
        assert_eq!(summary.warnings.len(), MAX_SUMMARY_WARNINGS + 1);
        assert!(summary.warnings[0].ends_with('…') && summary.warnings[0].chars().count() == MAX_WARNING_CHARS + 1);
        assert_eq!(summary.warnings.last().unwrap(), "… and 10 more");
    }
}
