//! Names that become parts of paths: a run's name (`metadata.name`) and every task id or
//! repository name a dataset gives. Each is checked before it is joined to a directory, so no
//! file a run reads or writes is ever outside its root.

/// The longest task id, repository name part or other dataset value used as one path
/// component, in bytes: file systems allow 255, and ids get suffixes (`<id>_human.json`).
pub const PATH_COMPONENT_MAX: usize = 200;

/// The longest run name: Kubernetes' limit for object names (a DNS-1123 subdomain).
pub const RUN_NAME_MAX: usize = 253;

/// Checks that `text` names one entry of a directory and nothing else: not empty, not `.` or
/// `..`, no `/` or `\`, no NUL or other control character, at most [`PATH_COMPONENT_MAX`]
/// bytes. The error says what is wrong, for a message that names the field.
pub fn safe_path_component(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("is empty".into());
    }
    if text.len() > PATH_COMPONENT_MAX {
        return Err(format!("is {} bytes long; at most {PATH_COMPONENT_MAX} are allowed", text.len()));
    }
    if text == "." || text == ".." {
        return Err(format!("{text:?} would name a directory other than its own"));
    }
    if let Some(c) = text.chars().find(|c| matches!(c, '/' | '\\') || c.is_control()) {
        return Err(format!("{text:?} contains {c:?}; it must be a single path component"));
    }
    Ok(())
}

/// Checks a repository name (`owner/name`, or a longer path such as `host/owner/name`): every
/// `/`-separated part a [`safe_path_component`].
pub fn safe_repo_name(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("is empty".into());
    }
    for part in text.split('/') {
        safe_path_component(part).map_err(|e| format!("{text:?}: part {part:?} {e}"))?;
    }
    Ok(())
}

/// Checks a run name as Kubernetes checks object names: a DNS-1123 subdomain (lowercase letters,
/// digits, `-` and `.`, starting and ending with a letter or digit, at most [`RUN_NAME_MAX`]
/// characters). It names the run's results directory.
pub fn dns1123_subdomain(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("a run needs a name".into());
    }
    if text.len() > RUN_NAME_MAX {
        return Err(format!("is {} characters long; at most {RUN_NAME_MAX} are allowed", text.len()));
    }
    let label_ok = |label: &str| {
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        edge(label.chars().next())
            && edge(label.chars().last())
            && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !text.split('.').all(label_ok) {
        return Err(format!(
            "{text:?} is not a valid name: use lowercase letters, digits, '-' and '.', starting and ending with \
             a letter or digit (a DNS-1123 subdomain, as Kubernetes requires)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_components_stay_in_their_directory() {
        for good in ["pyledger-001", "owner__repo-1234", "a.b", "...", "é"] {
            assert_eq!(safe_path_component(good), Ok(()), "{good}");
        }
        let long = "x".repeat(PATH_COMPONENT_MAX + 1);
        for (bad, why) in [
            ("", "is empty"),
            (".", "other than its own"),
            ("..", "other than its own"),
            ("a/b", "contains '/'"),
            ("..\\x", "contains '\\\\'"),
            ("a\0b", "contains '\\0'"),
            ("a\nb", "contains '\\n'"),
            (long.as_str(), "201 bytes long"),
        ] {
            let error = safe_path_component(bad).expect_err(bad);
            assert!(error.contains(why), "{bad:?}: {error}");
        }
    }

    #[test]
    fn repository_names_are_checked_part_by_part() {
        assert_eq!(safe_repo_name("lightsout-samples/pyledger"), Ok(()));
        assert_eq!(safe_repo_name("github.com/o/r"), Ok(()));
        for bad in ["../..", "o/..", "/abs", "o//r", "o/r/", ""] {
            assert!(safe_repo_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn run_names_are_dns_1123_subdomains() {
        for good in ["demo", "nightly-2026-12-02", "a.b-c.d", "0"] {
            assert_eq!(dns1123_subdomain(good), Ok(()), "{good}");
        }
        let long = "a".repeat(RUN_NAME_MAX + 1);
        for bad in ["", "../../../../tmp/x", "Demo", "-a", "a-", "a..b", ".a", "a_b", "a/b", long.as_str()] {
            assert!(dns1123_subdomain(bad).is_err(), "{bad}");
        }
    }
}
