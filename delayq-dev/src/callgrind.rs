//! A `redis-server` run under valgrind's callgrind, for the benches that count the instructions
//! Redis executes (a count a busy machine does not change, unlike seconds): counters are
//! zeroed before the measured part and dumped after it, with `callgrind_control`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::free_port;

const INSTALL_HINT: &str =
    "valgrind was not found on PATH. Install it (Debian/Ubuntu: `apt-get install -y valgrind`)";

/// A `redis-server` (no persistence) under `valgrind --tool=callgrind`, on a free loopback
/// port; killed by its pid when dropped.
#[derive(Debug)]
pub struct CallgrindRedis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    dumps: usize,
}

impl CallgrindRedis {
    /// Starts it and waits (up to 60 s: valgrind starts slowly) until it answers PING.
    pub fn start() -> CallgrindRedis {
        let dir = tempfile::Builder::new()
            .prefix("delayq-callgrind-")
            .tempdir()
            .expect("create a temporary directory");
        let port = free_port();
        let out = dir.path().join("callgrind.out");
        let child = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            // Each dump names its functions in full: a kept dump is read alone (compressed,
            // a later dump refers to names only the first defines).
            .args(["--compress-strings=no", "--compress-pos=no"])
            .args([
                "redis-server",
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{INSTALL_HINT}: {e}"));
        let server = CallgrindRedis {
            child,
            port,
            dir,
            dumps: 0,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !server.answers() {
            assert!(
                Instant::now() < deadline,
                "redis-server under callgrind did not answer PING within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    fn answers(&self) -> bool {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn))
            .is_ok()
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A blocking connection, for setup and `INFO`.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to the callgrind redis-server")
    }

    fn control(&self, flag: &str) {
        let status = Command::new("callgrind_control")
            .arg(flag)
            .arg(self.child.id().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run callgrind_control");
        assert!(status.success(), "callgrind_control {flag} failed");
    }

    /// Sets the instruction count to zero (and `INFO commandstats` too).
    pub fn zero(&self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.connection())
            .expect("CONFIG RESETSTAT");
        self.control("-z");
    }

    /// The instructions executed since [`zero`](Self::zero), by all of the server's threads;
    /// the dump they were read from is copied to `keep` (for `callgrind_annotate`).
    pub fn instructions(&mut self, keep: &Path) -> u64 {
        self.control("-d");
        self.dumps += 1;
        let path = self.dump_path(self.dumps);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read the callgrind dump {}: {e}", path.display()));
        if let Some(dir) = keep.parent() {
            std::fs::create_dir_all(dir).expect("create the dump's directory");
        }
        std::fs::write(keep, &text).expect("keep the callgrind dump");
        text.lines()
            .find_map(|l| l.strip_prefix("summary: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no summary line in {}", path.display()))
    }

    fn dump_path(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("callgrind.out.{n}"))
    }
}

impl Drop for CallgrindRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
