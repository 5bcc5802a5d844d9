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

/// A headless Chromium with one page, driven over the DevTools protocol: for tests that
/// press a page's buttons. The browser is killed (by its pid) when this is dropped.
pub struct DevTools {
    child: std::process::Child,
    socket: tungstenite::WebSocket<std::net::TcpStream>,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl DevTools {
    /// Starts Chromium on `url` with a `width`×`height` window and attaches to its page.
    pub fn open(url: &str, (width, height): (u32, u32)) -> Self {
        use std::io::BufRead;
        let profile = tempfile::tempdir().expect("a Chromium profile dir");
        let mut child = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={width},{height}"))
            .arg(url)
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start chromium");
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
        let ws_url = loop {
            let line = lines
                .next()
                .and_then(Result::ok)
                .expect("Chromium exited before its DevTools endpoint was up");
            if let Some(rest) = line.split("DevTools listening on ").nth(1) {
                break rest.trim().to_string();
            }
        };
        // Keep draining its stderr so that Chromium never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let addr = ws_url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("host:port")
            .to_string();
        let stream = std::net::TcpStream::connect(&addr).expect("connect to DevTools");
        let (socket, _) = tungstenite::client(ws_url.as_str(), stream).expect("DevTools handshake");
        let mut tools = DevTools {
            child,
            socket,
            session: String::new(),
            next_id: 0,
            _profile: profile,
        };
        let targets = tools.call("Target.getTargets", serde_json::json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["targetId"].as_str())
            .expect("Chromium has a page")
            .to_string();
        let attached = tools.call(
            "Target.attachToTarget",
            serde_json::json!({ "targetId": page, "flatten": true }),
        );
        tools.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        tools
    }

    /// Sends a DevTools command (to the page once attached) and returns its result.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = serde_json::json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = serde_json::Value::String(self.session.clone());
        }
        self.socket
            .send(tungstenite::Message::text(msg.to_string()))
            .expect("send to DevTools");
        loop {
            let frame = self.socket.read().expect("read from DevTools");
            let Ok(text) = frame.to_text() else { continue };
            let Ok(reply) = serde_json::from_str::<serde_json::Value>(text) else {
                continue;
            };
            if reply["id"] == id {
                if let Some(error) = reply.get("error") {
                    panic!("DevTools {method} failed: {error}");
                }
                return reply["result"].clone();
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise): its value, or what it threw.
    fn try_eval(&mut self, expression: &str) -> Result<serde_json::Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            serde_json::json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
        );
        match result.get("exceptionDetails") {
            Some(e) => Err(e.to_string()),
            None => Ok(result["result"]["value"].clone()),
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise) and returns its value; panics
    /// when it throws.
    pub fn eval(&mut self, expression: &str) -> serde_json::Value {
        self.try_eval(expression)
            .unwrap_or_else(|e| panic!("{expression} threw: {e}"))
    }

    /// Saves the whole page as it is now (as driven so far, below the window too) to `shot`,
    /// a PNG.
    pub fn capture(&mut self, shot: &Path) {
        use base64::Engine;
        let size = self.eval(
            "({ width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight })",
        );
        let png = self.call(
            "Page.captureScreenshot",
            serde_json::json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": { "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 },
            }),
        );
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png["data"].as_str().expect("screenshot data"))
            .expect("base64 screenshot");
        std::fs::write(shot, bytes).expect("write the screenshot");
    }

    /// Evaluates `expression` until it is true (throwing counts as not yet, as while the page
    /// loads), for up to `limit`.
    pub fn wait_for(&mut self, expression: &str, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let last = self.try_eval(expression);
            if last == Ok(serde_json::Value::Bool(true)) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the page never made `{expression}` true (last: {last:?})"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for DevTools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
