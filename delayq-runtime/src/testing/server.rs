//! The Redis the test kit's runtimes share: `DELAYQ_TEST_REDIS_URL` when set, else one
//! throwaway `redis-server` per test binary, started from `PATH` on a free loopback port and
//! stopped when the test binary exits (a shell holds it, and stops it when the binary's end
//! of a pipe closes: however the binary ends, the server does not outlive it).

use std::io::Write;
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use delayq_core::{Error, Result};

/// The variable that points the kit at a Redis of your own (it writes under namespaces of its
/// own and deletes them).
pub const TEST_REDIS_URL_VAR: &str = "DELAYQ_TEST_REDIS_URL";

struct Server {
    url: String,
    /// Held open for the life of the binary: closing it stops the server.
    _keeper: Mutex<(Child, ChildStdin)>,
}

static SERVER: OnceLock<std::result::Result<Server, String>> = OnceLock::new();

/// The URL of the Redis the kit uses, starting the server the first time.
pub(crate) fn redis_url() -> Result<String> {
    if let Ok(url) = std::env::var(TEST_REDIS_URL_VAR) {
        if !url.trim().is_empty() {
            return Ok(url);
        }
    }
    match SERVER.get_or_init(start) {
        Ok(server) => Ok(server.url.clone()),
        Err(why) => Err(Error::Config(why.clone())),
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn start() -> std::result::Result<Server, String> {
    let missing = || {
        format!(
            "the delayq test kit needs Redis: no `redis-server` on PATH and {TEST_REDIS_URL_VAR} is not set. Install Redis 7 or newer (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis), or set {TEST_REDIS_URL_VAR} to a Redis the tests may write to"
        )
    };
    match Command::new("redis-server").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Err(missing()),
    }
    let port = free_port().map_err(|e| format!("no free loopback port for redis-server: {e}"))?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("redis-server --port \"$1\" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & r=$!; cat >/dev/null; kill $r")
        .arg("sh")
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server through sh: {e}"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or("no pipe to the redis-server keeper")?;
    // Nothing is ever written; a failed write only means the keeper is gone already.
    let _ = stdin.flush();
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ping = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        if ping.is_ok() {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "redis-server on port {port} did not answer within 10 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Server {
        url,
        _keeper: Mutex::new((child, stdin)),
    })
}
