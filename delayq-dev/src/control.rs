//! Controlling a test server: stop, crash, restart, freeze, and reading its statistics.

use crate::signal_pid;
use std::collections::HashMap;
use std::time::Duration;

use crate::info::parse_command_calls;
use crate::server::RedisServer;

impl RedisServer {
    pub(crate) fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.pid() {
            signal_pid(pid, sig);
        }
    }

    /// Stops it cleanly (SIGTERM; with persistence it writes its AOF) and waits for the exit.
    pub fn stop(&mut self) {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Kills it with SIGKILL, as a crash would, and waits for the exit.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same directory (and so the same AOF).
    pub fn restart(&mut self) {
        assert!(
            self.child.is_none(),
            "stop or kill the server before restarting it"
        );
        let mut last_error = String::new();
        // The old socket may linger for a moment; retry the same port for a few seconds.
        for _ in 0..50 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "could not restart redis-server on port {}: {last_error}",
            self.port
        );
    }

    /// Freezes it with SIGSTOP: connections stay open, nothing answers.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Resumes a frozen server with SIGCONT.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// A blocking connection for assertions in tests.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to the test redis-server")
    }

    /// `INFO commandstats` as command name → calls.
    pub fn command_calls(&self) -> HashMap<String, u64> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .expect("INFO commandstats");
        parse_command_calls(&info)
    }

    /// Resets the server's statistics (`CONFIG RESETSTAT`).
    pub fn reset_stats(&self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.connection())
            .expect("CONFIG RESETSTAT");
    }
}
