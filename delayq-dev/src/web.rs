//! HTTP services under test (the waiting-room example, `delayq dashboard`): start one as a
//! process that prints its URL on its first line, and talk to it with a real HTTP client.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::signal_pid;

/// A service process, stopped (SIGINT, then SIGKILL after 5 s) when dropped.
pub struct Service {
    child: Child,
    /// The first line it printed on stdout.
    pub first_line: String,
    /// The lines it printed after the first (read as they come, so its stdout never fills).
    later: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Service {
    /// Starts `cmd` with stdout piped and waits for its first line.
    pub fn start(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let mut first_line = String::new();
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        out.read_line(&mut first_line).expect("read its first line");
        let later = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = later.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Service {
            child,
            first_line,
            later,
        }
    }

    /// The lines it printed on stdout after the first, so far.
    pub fn later_lines(&self) -> Vec<String> {
        self.later.lock().unwrap().clone()
    }

    /// Sends `sig` and waits up to `within` for the process to exit: its exit status, or
    /// `None` when it did not exit in time (it is then killed when dropped).
    pub fn signal_and_wait(
        &mut self,
        sig: libc::c_int,
        within: Duration,
    ) -> Option<std::process::ExitStatus> {
        signal_pid(self.child.id(), sig);
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The first `http://…` word of its first line, without a trailing slash.
    pub fn url(&self) -> String {
        self.first_line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {:?}", self.first_line))
            .trim_end_matches('/')
            .to_string()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        signal_pid(self.child.id(), libc::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client that returns error statuses instead of failing on them, 10 s timeout.
pub fn http_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// GET `url`: the status and the JSON body.
pub fn get_json(agent: &ureq::Agent, url: &str) -> (u16, serde_json::Value) {
    let mut r = agent.get(url).call().expect("GET");
    let status = r.status().as_u16();
    (status, r.body_mut().read_json().expect("a JSON body"))
}

/// POST `url` with no body and `headers`: the status and the JSON body.
pub fn post_json(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(&str, &str)],
) -> (u16, serde_json::Value) {
    let mut req = agent.post(url);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let mut r = req.send_empty().expect("POST");
    let status = r.status().as_u16();
    (status, r.body_mut().read_json().expect("a JSON body"))
}
