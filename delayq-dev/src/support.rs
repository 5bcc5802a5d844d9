//! Helpers the integration tests share: a producer and runtime on a test server, where a
//! message is, and waiting for listeners.

use std::time::Duration;

use crate::server::RedisServer;
use delayq_core::protocol::{Envelope, TopicKeys};
use delayq_core::{MessageId, Producer};

pub async fn producer(server: &RedisServer) -> Producer {
    Producer::connect(&server.url())
        .await
        .expect("connect a producer to the test server")
}

pub fn keys(topic: &str) -> TopicKeys {
    TopicKeys::new("delayq", topic).unwrap()
}

/// The envelope stored for `id`, if any, as its delivery sees it while it is in flight: a claim
/// leaves the envelope as it is and keeps its token beside it (under the id and a newline), so
/// the attempt counts this claim and the token is the claim's.
pub fn envelope(server: &RedisServer, topic: &str, id: &MessageId) -> Option<Envelope> {
    let (raw, token): (Option<Vec<u8>>, Option<u64>) = redis::cmd("HMGET")
        .arg(keys(topic).msg)
        .arg(id.as_str())
        .arg(format!("{id}\n"))
        .query(&mut server.connection())
        .unwrap();
    let envelope = Envelope::parse(&raw?).expect("stored envelope parses");
    Some(match token {
        Some(token) => envelope
            .delivered(token)
            .expect("an attempt below 2^32 - 1"),
        None => envelope,
    })
}

/// Gives `topic` far buckets of `ms` instead of a minute (before anything of it is stored), so
/// that promotion happens within seconds.
pub fn bucket_width(server: &RedisServer, topic: &str, ms: u64) {
    redis::cmd("HSET")
        .arg(keys(topic).farinfo)
        .arg("width")
        .arg(ms)
        .query::<()>(&mut server.connection())
        .unwrap();
}

/// The number in field `field` of `topic`'s `farinfo` (`count`, `dead_dropped`), 0 when absent.
pub fn farinfo_number(server: &RedisServer, topic: &str, field: &str) -> u64 {
    let n: Option<u64> = redis::cmd("HGET")
        .arg(keys(topic).farinfo)
        .arg(field)
        .query(&mut server.connection())
        .unwrap();
    n.unwrap_or(0)
}

/// Writes by hand, as an operator's edit would, a due id `id` of `topic` with `raw` as its
/// stored envelope (none: an id whose envelope is missing).
pub fn plant_due(server: &RedisServer, topic: &str, id: &str, raw: Option<&str>) {
    let k = keys(topic);
    let mut c = server.connection();
    if let Some(raw) = raw {
        redis::cmd("HSET")
            .arg(&k.msg)
            .arg(id)
            .arg(raw)
            .query::<()>(&mut c)
            .unwrap();
    }
    redis::cmd("ZADD")
        .arg(&k.delayed)
        .arg(0)
        .arg(id)
        .query::<()>(&mut c)
        .unwrap();
}

/// The test server's clock (unix ms), which the scripts go by.
pub fn redis_ms(server: &RedisServer) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut server.connection()).unwrap();
    s * 1_000 + us / 1_000
}

/// What a runtime's Prometheus endpoint at `addr` shows now.
pub fn scrape_metrics(addr: std::net::SocketAddr) -> String {
    ureq::get(&format!("http://{addr}/metrics"))
        .call()
        .expect("scrape /metrics")
        .body_mut()
        .read_to_string()
        .unwrap()
}

/// The sum of the series of `metric` at `addr`'s `/metrics` whose lines hold every one of
/// `labels` (such as `outcome="done"`).
pub fn metric_sum(addr: std::net::SocketAddr, metric: &str, labels: &[&str]) -> f64 {
    scrape_metrics(addr)
        .lines()
        .filter(|l| l.starts_with(metric) && labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<f64>().ok())
        .sum()
}

/// Score of `id` in the named sorted set of `topic` ("delayed", "inflight", "dead").
pub fn score(server: &RedisServer, key: &str, id: &MessageId) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(id.as_str())
        .query(&mut server.connection())
        .unwrap()
}

/// Which state `id` is in: "delayed", "inflight", "dead" or "gone"; panics when it is in more
/// than one, or in a set without an envelope. The four reads are one MULTI/EXEC, so a runtime
/// moving the message meanwhile cannot make it look like two states.
pub fn state(server: &RedisServer, topic: &str, id: &MessageId) -> &'static str {
    let k = keys(topic);
    type States = (Option<f64>, Option<f64>, Option<f64>, Option<f64>, bool);
    let (delayed, ready, inflight, dead, has_env): States = redis::pipe()
        .atomic()
        .zscore(&k.delayed, id.as_str())
        .zscore(&k.ready, id.as_str())
        .zscore(&k.inflight, id.as_str())
        .zscore(&k.dead, id.as_str())
        .hexists(&k.msg, id.as_str())
        .query(&mut server.connection())
        .unwrap();
    // A due message waiting in `ready` (priorities) is delayed.
    let found: Vec<&str> = [
        ("delayed", delayed),
        ("delayed", ready),
        ("inflight", inflight),
        ("dead", dead),
    ]
    .into_iter()
    .filter_map(|(name, score)| score.map(|_| name))
    .collect();
    match (found.as_slice(), has_env) {
        ([], false) => "gone",
        ([one], true) => one,
        _ => panic!("{id} is in {found:?} with envelope present = {has_env}"),
    }
}

/// Polls `ok` every 20 ms until it holds; panics naming `what` after `limit`.
pub async fn wait_until(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        sleep_ms(20).await;
    }
}

/// Waits until a window of `window` starting now cannot meet a runtime's history writes
/// (they run 2-3 s after each minute of the clock, see delayq-runtime's history.rs): for tests
/// that count the commands of an idle runtime.
pub async fn clear_of_history_writes(window: Duration) {
    let window = window.as_millis() as u64;
    assert!(window < 50_000, "no window of {window} ms misses them");
    loop {
        let in_minute = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
            % 60_000;
        // Writes may still run until 5 s into a minute; the window must end 1 s before the
        // next ones.
        if in_minute >= 5_000 && in_minute + window <= 61_000 {
            return;
        }
        sleep_ms(250).await;
    }
}

pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// What listeners saw, for tests to wait on and inspect.
pub struct Seen<T> {
    events: std::sync::Mutex<Vec<T>>,
    changed: tokio::sync::Notify,
}

impl<T: Clone> Default for Seen<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Seen<T> {
    pub const fn new() -> Self {
        Seen {
            events: std::sync::Mutex::new(Vec::new()),
            changed: tokio::sync::Notify::const_new(),
        }
    }

    pub fn push(&self, event: T) {
        self.events.lock().unwrap().push(event);
        self.changed.notify_waiters();
    }

    pub fn all(&self) -> Vec<T> {
        self.events.lock().unwrap().clone()
    }

    pub fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until at least `n` events match `wanted`, and returns those; panics after
    /// `limit`.
    pub async fn wait_matching(
        &self,
        n: usize,
        limit: Duration,
        wanted: impl Fn(&T) -> bool,
    ) -> Vec<T> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            let matching: Vec<T> = self.all().into_iter().filter(|e| wanted(e)).collect();
            if matching.len() >= n {
                return matching;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "waited {limit:?} for {n} matching events, saw {}",
                    matching.len()
                );
            }
        }
    }

    /// Waits until at least `n` events arrived; panics after `limit`.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<T> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            if self.len() >= n {
                return self.all();
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("waited {limit:?} for {n} events, saw {}", self.len());
            }
        }
    }
}

/// Panics unless nothing in this test binary registers a listener, a stream listener, a
/// leader task or a schedule (whichever way it is written: an attribute, a crate path, a kit
/// macro): for the binaries that gather many test files, where one would run in every test
/// that starts a runtime.
pub fn assert_registers_no_listener() {
    let (delay, others) = delayq_runtime::__private::linked_registrations();
    assert!(
        delay.is_empty() && others == 0,
        "registered here: delay listeners {delay:?} and {others} others"
    );
}

/// A runtime running only `topics` against `server`, with a short shutdown grace.
pub async fn runtime(server: &RedisServer, topics: &[&str]) -> delayq_runtime::RuntimeHandle {
    runtime_at(&server.url(), topics, Duration::from_secs(2)).await
}

/// A runtime running only `topics` against the Redis at `url` (a proxy in front of a test
/// server, say), with the shutdown grace `grace`.
pub async fn runtime_at(
    url: &str,
    topics: &[&str],
    grace: Duration,
) -> delayq_runtime::RuntimeHandle {
    delayq_runtime::Runtime::builder()
        .redis_url(url)
        .topics(topics.iter().copied())
        .shutdown_grace(grace)
        .spawn()
        .await
        .expect("spawn the runtime")
}

/// Waits until `topic` has nothing delayed or in flight; panics after `limit`.
pub async fn drained(p: &Producer, topic: &str, limit: Duration) -> delayq_core::TopicCounts {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // After a Redis restart the first call on the old connection fails once, then the
        // connection is re-established.
        let c = p.counts(topic).await;
        if let Ok(c) = c {
            if c.delayed == 0 && c.inflight == 0 {
                return c;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic} not drained after {limit:?}: {c:?}"
        );
        sleep_ms(20).await;
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A runtime running only the stream listeners of `streams` against `server`, with a short
/// shutdown grace.
pub async fn stream_runtime(
    server: &RedisServer,
    streams: &[&str],
) -> delayq_runtime::RuntimeHandle {
    delayq_runtime::Runtime::builder()
        .redis_url(server.url())
        .streams(streams.iter().copied())
        .shutdown_grace(Duration::from_secs(2))
        .spawn()
        .await
        .expect("spawn the runtime")
}

/// How many entries of `group` on `stream` are pending (delivered, not acked).
pub fn pending_entries(server: &RedisServer, stream: &str, group: &str) -> u64 {
    let mut c = server.connection();
    let summary: redis::Value = redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .query(&mut c)
        .expect("XPENDING");
    match summary {
        redis::Value::Array(parts) => match parts.first() {
            Some(redis::Value::Int(n)) => *n as u64,
            _ => 0,
        },
        _ => 0,
    }
}

/// Waits until `group` has at least `n` dead letters on `stream`, and returns them (oldest
/// first); panics after `limit`.
pub async fn stream_dead_letters(
    p: &Producer,
    stream: &str,
    group: &str,
    n: usize,
    limit: Duration,
) -> Vec<delayq_core::StreamDeadLetter> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let letters = p
            .stream_dead_letters(stream, group, 0..n.max(100))
            .await
            .expect("list the dead letters");
        if letters.len() >= n {
            return letters;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {limit:?} for {n} dead letters of {group} on {stream}: {letters:?}"
        );
        sleep_ms(50).await;
    }
}
