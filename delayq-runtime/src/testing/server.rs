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
    // A free port can be taken by another test binary's server between the look and the
    // bind: then ours exits, and the one answering is not ours (its process id says so).
    let mut last = String::new();
    for _ in 0..5 {
        let port =
            free_port().map_err(|e| format!("no free loopback port for redis-server: {e}"))?;
        match start_on(port) {
            Ok(server) => return Ok(server),
            Err(why) => last = why,
        }
    }
    Err(last)
}

fn start_on(port: u16) -> std::result::Result<Server, String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("redis-server --port \"$1\" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & r=$!; echo $r; cat >/dev/null; kill $r")
        .arg("sh")
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start redis-server through sh: {e}"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or("no pipe to the redis-server keeper")?;
    // Nothing is ever written; a failed write only means the keeper is gone already.
    let _ = stdin.flush();
    let mut pid = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut pid);
    }
    let pid = pid.trim().to_string();
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("INFO").arg("server").query::<String>(&mut c));
        if let Ok(info) = info {
            let answering = info
                .lines()
                .find_map(|l| l.strip_prefix("process_id:"))
                .map(str::trim);
            if answering == Some(pid.as_str()) {
                break;
            }
            // Another server holds the port: ours could not bind. Stop it and try another.
            drop(stdin);
            let _ = child.wait();
            return Err(format!(
                "port {port} was taken by another redis-server (pid {answering:?}, ours {pid})"
            ));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A port another redis-server took between the look and the bind: ours exits, the one
    /// answering is not ours, and the kit does not take it for its own (the old PING loop did:
    /// two test binaries shared one server).
    #[test]
    fn a_port_another_server_took_is_not_taken_for_ours() {
        let port = free_port().unwrap();
        let mut other = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .is_err()
        {
            assert!(Instant::now() < deadline, "the other server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let taken = start_on(port).map(|s| s.url);
        let _ = other.kill();
        let _ = other.wait();
        let why = taken.expect_err("took another binary's server for its own");
        assert!(why.contains("taken by another redis-server"), "{why}");
    }
}
