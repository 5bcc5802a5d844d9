//! `redis-server` processes owned by tests: started on a free loopback port, each with its
//! own directory, killed by pid when dropped.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    role: Role,
}

/// What kind of process a test server is.
#[derive(Debug, Clone)]
enum Role {
    /// A plain server.
    Server,
    /// A Redis Cluster node: its port plus 10,000 (the cluster bus) must be free too.
    ClusterNode,
    /// A Sentinel watching the primary `master` on `master_port`.
    Sentinel { master: String, master_port: u16 },
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

    /// An extra `redis-server` option with several values, such as
    /// `("replicaof", &["127.0.0.1", "6379"])`.
    pub fn config_values(mut self, name: &str, values: &[&str]) -> Self {
        self.extra.push(format!("--{name}"));
        self.extra.extend(values.iter().map(|v| v.to_string()));
        self
    }

    /// A Redis Cluster node (`cluster-enabled yes`, a 1 s node timeout so failovers are quick
    /// in tests), on a port whose cluster bus port (+10,000) is free too.
    pub fn cluster_node(mut self) -> Self {
        self.role = Role::ClusterNode;
        self.config("cluster-enabled", "yes")
            .config("cluster-config-file", "nodes.conf")
            .config("cluster-node-timeout", "1000")
    }

    /// A Sentinel (quorum 2) watching the primary named `master` on `master_port`, with a 1 s
    /// down-after time so failovers are quick in tests.
    pub fn sentinel(mut self, master: &str, master_port: u16) -> Self {
        self.role = Role::Sentinel {
            master: master.to_string(),
            master_port,
        };
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
    pub(crate) child: Option<Child>,
    pub(crate) port: u16,
    dir: tempfile::TempDir,
    options: RedisServerBuilder,
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("find a free loopback port")
}

/// A free port whose cluster bus port (port + 10,000) is free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 && TcpListener::bind((Ipv4Addr::LOCALHOST, port + 10_000)).is_ok() {
            return port;
        }
    }
}

impl RedisServer {
    /// A server with no persistence on a free port.
    pub fn start() -> RedisServer {
        Self::builder().start()
    }

    /// Options first.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder {
            role: Role::Server,
            persistence: Persistence::None,
            extra: Vec::new(),
            tls: None,
        }
    }

    fn args(&self) -> Vec<String> {
        if let Role::Sentinel {
            master,
            master_port,
        } = &self.options.role
        {
            return self.sentinel_args(master, *master_port);
        }
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

    /// A Sentinel reads and rewrites a config file: it is written here, with the port.
    fn sentinel_args(&self, master: &str, master_port: u16) -> Vec<String> {
        let conf = self.dir.path().join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile redis.log\n\
             sentinel monitor {master} 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds {master} 1000\n\
             sentinel failover-timeout {master} 3000\n\
             sentinel parallel-syncs {master} 1\n",
            port = self.port,
            dir = self.dir.path().display(),
        );
        std::fs::write(&conf, text).expect("write sentinel.conf");
        vec![conf.display().to_string(), "--sentinel".to_string()]
    }

    fn spawn_on_free_port(&mut self) {
        let mut last_error = String::new();
        for _ in 0..10 {
            self.port = match self.options.role {
                Role::ClusterNode => free_cluster_port(),
                _ => free_port(),
            };
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// Starts the process on `self.port` and waits until it answers PING.
    pub(crate) fn spawn(&mut self) -> Result<(), String> {
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
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill9();
    }
}
