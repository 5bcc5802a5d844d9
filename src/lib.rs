//! The delayq test kit: throwaway `redis-server` processes on free loopback ports, so tests run
//! in parallel against real Redis and can stop, kill, freeze or restart their own server.
//!
//! ```no_run
//! let server = delayq_dev::RedisServer::start();
//! println!("a private Redis at {}", server.url());
//! // dropped: the process is killed by its pid and its files removed
//! ```

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod consumer;
mod proxy;

pub use consumer::{read_ledger, ConsumerProcess, LedgerLine};
/// A URL with its password hidden, for printing.
pub use delayq_core::protocol::redact_url;
pub use proxy::BlackholeProxy;

/// Sends `sig` to process `pid`: the one place the test kit calls kill(2).
pub fn signal_pid(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; callers pass pids of children they started and
    // have not reaped, so the pid cannot belong to another process.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

const INSTALL_HINT: &str = "redis-server was not found on PATH. Install it (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`) and run the tests again";

/// How a test server keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Nothing on disk (the default): a restart starts empty.
    None,
    /// Append-only file, fsync on every write.
    AofAlways,
    /// Append-only file, fsync once a second.
    AofEverySec,
}

/// Options for a test server.
#[derive(Debug, Clone)]
pub struct RedisServerBuilder {
    persistence: Persistence,
    extra: Vec<String>,
    tls: Option<TlsFiles>,
}

/// PEM files for a TLS-only test server.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA that signed it.
    pub ca: PathBuf,
}

impl RedisServerBuilder {
    /// How it keeps data across a restart.
    pub fn persistence(mut self, p: Persistence) -> Self {
        self.persistence = p;
        self
    }

    /// An extra `redis-server` argument pair such as `("maxmemory", "10mb")`.
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.extra.push(format!("--{name}"));
        self.extra.push(value.to_string());
        self
    }

    /// Serves TLS only (`rediss://`), with these files; clients need not present a certificate.
    pub fn tls(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }

    /// Starts it; panics with the install command when `redis-server` is missing.
    pub fn start(self) -> RedisServer {
        let dir = tempfile::Builder::new()
            .prefix("delayq-redis-")
            .tempdir()
            .expect("create a temporary directory for redis-server");
        let mut server = RedisServer {
            child: None,
            port: 0,
            dir,
            options: self,
        };
        server.spawn_on_free_port();
        server
    }
}

/// A `redis-server` process owned by a test. Dropping it kills the process (by its pid) and
/// deletes its directory.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    options: RedisServerBuilder,
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("find a free loopback port")
}

impl RedisServer {
    /// A server with no persistence on a free port.
    pub fn start() -> RedisServer {
        Self::builder().start()
    }

    /// Options first.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder {
            persistence: Persistence::None,
            extra: Vec::new(),
            tls: None,
        }
    }

    fn args(&self) -> Vec<String> {
        let dir = self.dir.path().display().to_string();
        let port = self.port.to_string();
        let (plain_port, tls_port) = match self.options.tls {
            Some(_) => ("0", port.as_str()),
            None => (port.as_str(), "0"),
        };
        let mut args: Vec<String> = [
            "--port",
            plain_port,
            "--tls-port",
            tls_port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            &dir,
            "--logfile",
            "redis.log",
            "--daemonize",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let aof = match self.options.persistence {
            Persistence::None => vec!["--appendonly", "no"],
            Persistence::AofAlways => vec!["--appendonly", "yes", "--appendfsync", "always"],
            Persistence::AofEverySec => vec!["--appendonly", "yes", "--appendfsync", "everysec"],
        };
        args.extend(aof.into_iter().map(String::from));
        if let Some(tls) = &self.options.tls {
            for (name, path) in [
                ("--tls-cert-file", &tls.cert),
                ("--tls-key-file", &tls.key),
                ("--tls-ca-cert-file", &tls.ca),
            ] {
                args.push(name.to_string());
                args.push(path.display().to_string());
            }
            args.extend(["--tls-auth-clients".to_string(), "no".to_string()]);
        }
        args.extend(self.options.extra.iter().cloned());
        args
    }

    fn spawn_on_free_port(&mut self) {
        let mut last_error = String::new();
        for _ in 0..10 {
            self.port = free_port();
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// Starts the process on `self.port` and waits until it answers PING.
    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
            Err(e) => panic!("could not run redis-server: {e}"),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "redis-server on port {} exited with {status}; its log: {}",
                    self.port,
                    self.log_tail()
                ));
            }
            if self.ping() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "redis-server on port {} did not answer PING within 10 s",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn ping(&self) -> bool {
        if self.options.tls.is_some() {
            // Redis listens only once it can serve; a TCP accept is enough here.
            let addr = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
            return std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
        }
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        // LOADING replies are errors: the server is up but not ready. NOAUTH means it is up
        // and wants the password the test set.
        match redis::cmd("PING").query::<String>(&mut conn) {
            Ok(_) => true,
            Err(e) => e.code() == Some("NOAUTH"),
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// `redis://127.0.0.1:<port>`, or `rediss://` for a TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.options.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port it listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its working directory (AOF and log live here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The path of its log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn signal(&self, sig: libc::c_int) {
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

/// Parses `INFO commandstats` into command name → calls.
pub fn parse_command_calls(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill9();
    }
}

/// A Redis for the examples: `DELAYQ_REDIS_URL` when set, else the local Redis on
/// 127.0.0.1:6379 when one answers, else a throwaway server started here (returned, so it
/// lives as long as the example keeps it).
pub fn redis_for_examples() -> (String, Option<RedisServer>) {
    if let Ok(url) = std::env::var("DELAYQ_REDIS_URL") {
        return (url, None);
    }
    let local = "redis://127.0.0.1:6379";
    let answers = redis::Client::open(local)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok();
    if answers {
        return (local.to_string(), None);
    }
    let server = RedisServer::start();
    (server.url(), Some(server))
}

/// Declares idle listeners (`async fn name(_: u32) {}`, one per topic) and a `const` slice of
/// their topics, for the idle-cost test and benchmark:
/// `delayq_dev::idle_listeners!(IDLE_TOPICS: a = "t.a", b = "t.b");`
#[macro_export]
macro_rules! idle_listeners {
    ($topics:ident: $($name:ident = $topic:literal),* $(,)?) => {
        $(#[::delayq_runtime::delay_listener(topic = $topic)]
        async fn $name(_: u32) {})*
        const $topics: &[&str] = &[$($topic),*];
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_restarts_and_kills_its_own_server() {
        let mut server = RedisServer::builder()
            .persistence(Persistence::AofAlways)
            .start();
        let mut c = server.connection();
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query::<()>(&mut c)
            .unwrap();
        let pid = server.pid().unwrap();
        server.kill9();
        assert!(server.pid().is_none());
        // SAFETY: signal 0 only checks whether the pid exists.
        assert_ne!(
            unsafe { libc::kill(pid as libc::pid_t, 0) },
            0,
            "pid {pid} still alive"
        );
        server.restart();
        let v: String = redis::cmd("GET")
            .arg("k")
            .query(&mut server.connection())
            .unwrap();
        assert_eq!(v, "v", "the AOF brought the key back");
        assert!(server.command_calls().contains_key("get"));
    }

    #[test]
    fn parses_commandstats() {
        let calls = parse_command_calls(
            "# Commandstats\r\ncmdstat_evalsha:calls=3,usec=9,usec_per_call=3.00\r\n",
        );
        assert_eq!(calls["evalsha"], 3);
    }
}
