//! What the examples share: finding a Redis to run against, as a newcomer expects: the one
//! `DELAYQ_REDIS_URL` or `delayq.toml` names, else the local Redis on 127.0.0.1:6379 when one
//! answers, else a throwaway `redis-server` started here (from `PATH`, on a free loopback port,
//! keeping nothing on disk) and stopped when the example ends.
//!
//! Your service does not need this: the runtime and `Producer::connect_resolved` read
//! `DELAYQ_REDIS_URL` and `delayq.toml` themselves.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use delayq_core::protocol::redact_url;

/// A `redis-server` an example started; stopped when dropped.
pub struct OwnRedis {
    child: Child,
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis URL for an example, and the server it started, if it had to (keep it alive).
///
/// # Panics
/// When no Redis answers and `redis-server` cannot be started, saying what to install.
pub fn redis_for_examples() -> (String, Option<OwnRedis>) {
    match redis_unless_configured() {
        (Some(url), server) => (url, server),
        (None, _) => {
            let c = delayq_core::resolve_connection(None, None).expect("a readable delayq.toml");
            (c.redis_url.expose().to_string(), None)
        }
    }
}

/// For an example that reads its configuration like a service: `None` when
/// `DELAYQ_REDIS_URL` or `delayq.toml` names a Redis (pass nothing to the builder, so that the
/// configured one is used and reported as such); else a URL as [`redis_for_examples`] finds one.
///
/// # Panics
/// As [`redis_for_examples`].
pub fn redis_unless_configured() -> (Option<String>, Option<OwnRedis>) {
    let configured = delayq_core::resolve_connection(None, None)
        .map(|c| c.url_source != delayq_core::config::ConfigSource::Default)
        // A file with problems: the runtime says what they are.
        .unwrap_or(true);
    if configured {
        return (None, None);
    }
    let local = "redis://127.0.0.1:6379";
    if answers(local) {
        return (Some(local.to_string()), None);
    }
    let (url, server) = start_redis();
    (Some(url), Some(server))
}

fn answers(url: &str) -> bool {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

fn start_redis() -> (String, OwnRedis) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port");
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("no Redis answers on 127.0.0.1:6379 and `redis-server` could not be started ({e}): install Redis 7 or newer (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis), or set DELAYQ_REDIS_URL")
        });
    let server = OwnRedis { child };
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answers(&url) {
        assert!(
            Instant::now() < deadline,
            "redis-server on port {port} did not answer within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (url, server)
}
