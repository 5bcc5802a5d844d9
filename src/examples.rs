//! Finding a Redis for the examples.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::server::RedisServer;

/// A Redis for the examples: the one `DELAYQ_REDIS_URL` or `delayq.toml` names, else the
/// local Redis on 127.0.0.1:6379 when one answers, else a throwaway server started here
/// (returned, so it lives as long as the example keeps it).
pub fn redis_for_examples() -> (String, Option<RedisServer>) {
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
pub fn redis_unless_configured() -> (Option<String>, Option<RedisServer>) {
    let configured = delayq_core::resolve_connection(None, None)
        .map(|c| c.url_source != delayq_core::config::ConfigSource::Default)
        // A file with problems: the runtime says what they are.
        .unwrap_or(true);
    if configured {
        return (None, None);
    }
    let local = "redis://127.0.0.1:6379";
    let answers = redis::Client::open(local)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok();
    if answers {
        return (Some(local.to_string()), None);
    }
    let server = RedisServer::start();
    (Some(server.url()), Some(server))
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
