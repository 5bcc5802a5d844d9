//! Finding a Redis for the examples.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::server::RedisServer;

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

/// The built binary of example `name`, for the tests that run an example as a process (it is
/// built by `cargo test --workspace`).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built; run `cargo test --workspace`",
        path.display()
    );
    path
}
