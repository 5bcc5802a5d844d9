//! Headless Chromium for the tests that look at a page (Debian's `chromium`; `.ci/run`
//! installs it when missing): a screenshot, and the DOM once the page has loaded.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Chromium binary on this machine; panics with what to install when there is none.
pub fn chromium() -> &'static str {
    for c in ["chromium", "chromium-browser"] {
        if Command::new(c).arg("--version").output().is_ok() {
            return c;
        }
    }
    panic!("headless Chromium is needed (Debian: apt-get install chromium; .ci/run installs it)");
}

/// `target/screenshots`, created: where browser tests save what they saw.
pub fn screenshots_dir() -> PathBuf {
    let dir = std::env::current_exe()
        .expect("the test binary's path")
        .ancestors()
        .nth(3)
        .expect("the target directory")
        .join("screenshots");
    std::fs::create_dir_all(&dir).expect("create target/screenshots");
    dir
}

/// Saves a `width`×`height` screenshot of `url` to `shot`, after letting the page run its
/// scripts for `budget_ms` of virtual time; panics with Chromium's output when none appears.
pub fn screenshot(
    profile: &Path,
    url: &str,
    shot: &Path,
    (width, height): (u32, u32),
    budget_ms: u32,
) {
    let _ = std::fs::remove_file(shot);
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        shot.exists(),
        "no screenshot of {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The DOM of `url` as Chromium has it once loaded, after `wait_ms` (`--dump-dom` with a
/// virtual time budget hangs in this Chromium, so this waits in real time).
pub fn dump_dom(profile: &Path, url: &str, wait_ms: u32) -> String {
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--timeout={wait_ms}"))
        .arg(url)
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
