//! Headless Chromium (Debian's `chromium`) for the report tests: the rendered DOM, console
//! messages and screenshots of an HTML file.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's Chromium; the tests need it (`apt-get install -y chromium`).
pub fn chromium() -> PathBuf {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(candidate).exists() {
            return candidate.into();
        }
    }
    panic!("this test needs Debian's chromium (apt-get install -y chromium)");
}

/// Runs headless Chromium on `page` with `args`; returns (stdout, stderr).
pub fn headless(page: &Path, profile: &Path, args: &[&str]) -> (String, String) {
    let output = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--enable-logging=stderr", "--v=0", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let (out, err) = (super::stdout(&output), super::stderr(&output));
    assert!(output.status.success(), "chromium failed\nstdout:\n{out}\nstderr:\n{err}");
    (out, err)
}

/// Opens `page`: its rendered DOM, after checking that the browser logged no console message,
/// with a screenshot kept at `screenshot` (a PNG of some substance).
pub fn render(page: &Path, screenshot: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let (dom, dom_log) = headless(page, profile.path(), &["--dump-dom"]);
    let _ = std::fs::remove_file(screenshot);
    let (_, shot_log) =
        headless(page, profile.path(), &[&format!("--screenshot={}", screenshot.display()), "--window-size=1400,2000"]);
    for log in [&dom_log, &shot_log] {
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
        assert!(console.is_empty(), "console messages in the browser:\n{}", console.join("\n"));
    }
    let png = std::fs::read(screenshot).expect("chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());
    dom
}
