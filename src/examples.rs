//! Finding a Redis for the examples.

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
