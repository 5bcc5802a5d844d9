//! Wake-ups over pub/sub. Scripts publish on a topic's wake channel when a message lands
//! earlier than the head of `delayed` or a claim lands in an empty `inflight`, and a
//! schedule's upsert or removal publishes on its topic's (the schedules' reader then reads the
//! change at once); one subscriber connection per runtime routes them to the sleeping boss,
//! back pool or schedules' reader. Idle listeners
//! therefore issue no commands beyond this connection's keepalive PING. After a (re)connect
//! every topic is woken once, since announcements may have been missed before the
//! subscription.
//!
//! On a single server (or a Sentinel primary) it is a plain `SUBSCRIBE`; on Redis Cluster a
//! sharded `SSUBSCRIBE` over a RESP3 cluster connection, so each wake-up comes only from the
//! shard that owns its topic. That connection subscribes again by itself after a slot move;
//! each re-subscription wakes its topic, so a `MOVED` never strands one. It does not after a
//! failover: it keeps reconnecting to the dead primary and never asks the cluster who took
//! its slots over, so the topics of that shard went deaf. So when any of its node
//! connections closes, the subscriber starts over on a new cluster connection, retrying
//! (from 100 ms, doubling to 5 s; from 100 ms again after a subscription that held 5 s) until
//! every channel is subscribed where its slot is served now.
//!
//! A subscriber only reads, so a peer that vanished without closing the socket (a NAT or load
//! balancer dropping an idle flow) would leave every idle topic deaf. It PINGs every
//! `PING_EVERY` and reconnects when no answer comes within `PING_TIMEOUT`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{RedisConn, WAKE_BACK, WAKE_CLAIMED, WAKE_SCHEDULES, WAKE_TRAVEL};
use futures_util::StreamExt;
use redis::PushKind;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::topic::TopicRuntime;
use crate::health::{Health, RetryDelay};

/// How often the subscriber checks that Redis still answers on its connection.
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a PING may go unanswered before the connection counts as dead. A dead peer is
/// thus found within `PING_EVERY + PING_TIMEOUT` (25 s).
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one attempt to connect and subscribe may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A subscription that lasted this long ended for a new reason: the next retry starts from
/// the shortest delay again.
const STABLE_FOR: Duration = Duration::from_secs(5);
/// At most this many `SSUBSCRIBE` calls in flight while (re)subscribing a cluster.
const SUBSCRIBE_CONCURRENCY: usize = 64;

/// Wake channel → topic; and the schedules' reader, woken by a change of a schedule of any
/// of these topics (`WAKE_SCHEDULES`).
struct Routes(HashMap<String, Arc<TopicRuntime>>, Option<Arc<Notify>>);

impl Routes {
    fn deliver(&self, channel: &[u8], kind: &[u8]) {
        let Some(topic) = std::str::from_utf8(channel)
            .ok()
            .and_then(|c| self.0.get(c))
        else {
            return;
        };
        if kind == WAKE_TRAVEL {
            topic.rouse_boss();
            return;
        }
        if kind == WAKE_SCHEDULES {
            if let Some(schedules) = &self.1 {
                schedules.notify_one();
            }
            return;
        }
        match kind.strip_prefix(WAKE_BACK) {
            // `i<deadline ms>`: a claim landed in an empty `inflight`, due back then.
            Some(deadline) => match std::str::from_utf8(deadline)
                .ok()
                .and_then(|d| d.parse().ok())
            {
                Some(ms) => topic.wake_back_at(ms),
                None => topic.wake_back_now(),
            },
            None => match kind.strip_prefix(WAKE_CLAIMED) {
                // `c<next ms or -1>`: a claim took what was due.
                Some(rest) => {
                    let parsed = std::str::from_utf8(rest)
                        .ok()
                        .and_then(|r| r.split_once(':'))
                        .and_then(|(n, at)| Some((n.parse().ok()?, at.parse().ok()?)));
                    match parsed {
                        Some((next, at)) => topic.announce_claimed(next, at),
                        None => topic.wake_boss.notify_one(),
                    }
                }
                None => topic.wake_boss.notify_one(),
            },
        }
    }

    /// Everything announced before a (re)subscription was missed: the topic looks once.
    fn wake(topic: &TopicRuntime) {
        topic.rouse_boss();
        topic.wake_back_now();
    }

    fn wake_all(&self) {
        self.0.values().for_each(|t| Self::wake(t));
        if let Some(schedules) = &self.1 {
            schedules.notify_one();
        }
    }

    fn channels(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

pub(crate) async fn run_subscriber(
    conn: RedisConn,
    (topics, schedules): (Vec<Arc<TopicRuntime>>, Option<Arc<Notify>>),
    stop: CancellationToken,
    subscribed: tokio::sync::oneshot::Sender<()>,
    // Whether the subscription stands: the runtime's first sign that Redis is gone.
    health: Arc<Health>,
) {
    let mut subscribed = Some(subscribed);
    let routes = Routes(
        topics
            .iter()
            .map(|t| (t.queue.keys().wake.clone(), t.clone()))
            .collect(),
        schedules,
    );
    let mut session = Session {
        conn: &conn,
        routes: &routes,
        stop: &stop,
        subscribed: &mut subscribed,
        health,
        since: None,
    };
    let mut retry = RetryDelay::new();
    while !stop.is_cancelled() {
        session.since = None;
        let ended = if conn.is_cluster() {
            session.sharded().await
        } else {
            session.plain().await
        };
        match ended {
            Ok(()) => return, // stopped
            Err(why) => session.health.failed(&why),
        }
        if session.since.is_some_and(|at| at.elapsed() >= STABLE_FOR) {
            retry.reset();
        }
        tokio::select! {
            _ = tokio::time::sleep(retry.next_delay()) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Runs `connect` within `CONNECT_TIMEOUT`; `Ok(None)` when the runtime stops first.
async fn connect_unless_stopped<T>(
    connect: impl std::future::Future<Output = redis::RedisResult<T>>,
    stop: &CancellationToken,
) -> Result<Option<T>, String> {
    tokio::select! {
        c = tokio::time::timeout(CONNECT_TIMEOUT, connect) => match c {
            Ok(Ok(connection)) => Ok(Some(connection)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("connecting and subscribing timed out".into()),
        },
        _ = stop.cancelled() => Ok(None),
    }
}

/// What one subscription needs; each session runs until its connection fails (`Err`, why)
/// or the runtime stops (`Ok`).
struct Session<'a> {
    conn: &'a RedisConn,
    routes: &'a Routes,
    stop: &'a CancellationToken,
    /// Told once the first subscription is in place, so that `spawn` can return.
    subscribed: &'a mut Option<tokio::sync::oneshot::Sender<()>>,
    health: Arc<Health>,
    /// When this session's subscription was in place.
    since: Option<std::time::Instant>,
}

impl Session<'_> {
    /// Once subscribed: the topics look once, and `spawn` learns it may return.
    fn subscribed_now(&mut self) {
        self.since = Some(std::time::Instant::now());
        self.health.ok();
        self.routes.wake_all();
        if let Some(ready) = self.subscribed.take() {
            let _ = ready.send(());
        }
    }

    /// One plain pub/sub connection.
    async fn plain(&mut self) -> Result<(), String> {
        let (conn, routes, stop) = (self.conn, self.routes, self.stop);
        let channels = routes.channels();
        let connect = async {
            let client = conn
                .pubsub_client()
                .await
                .expect("a plain deployment has a pub/sub client")?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let Some(pubsub) = connect_unless_stopped(connect, stop).await? else {
            return Ok(());
        };
        self.subscribed_now();
        let (mut sink, mut messages) = pubsub.split();
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(m) => routes.deliver(m.get_channel_name().as_bytes(), m.get_payload_bytes()),
                    None => return Err("the pub/sub connection closed".into()),
                },
                _ = ping.tick() => {
                    // Any reply will do: in subscriber mode Redis answers PING with a
                    // ["pong", ""] push, not +PONG.
                    match tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return Err(format!("a PING on the pub/sub connection failed: {e}")),
                        Err(_) => return Err("Redis did not answer a PING on the pub/sub connection".into()),
                    }
                }
                _ = stop.cancelled() => return Ok(()),
            }
        }
    }

    /// One sharded subscription over a RESP3 cluster connection.
    async fn sharded(&mut self) -> Result<(), String> {
        let (conn, routes, stop) = (self.conn, self.routes, self.stop);
        let (pushes_tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        let channels = routes.channels();
        let connect = async {
            let cluster = conn
                .cluster_subscriber(pushes_tx)
                .await
                .expect("a cluster deployment has a cluster subscriber")?;
            // One call per channel: a sharded subscription takes channels of one slot only.
            let calls: Vec<_> = channels
                .iter()
                .cloned()
                .map(|channel| {
                    let mut cluster = cluster.clone();
                    async move { cluster.ssubscribe(channel).await }
                })
                .collect();
            futures_util::stream::iter(calls)
                .buffer_unordered(SUBSCRIBE_CONCURRENCY)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<redis::RedisResult<Vec<()>>>()?;
            Ok::<_, redis::RedisError>(cluster)
        };
        let Some(mut cluster) = connect_unless_stopped(connect, stop).await? else {
            return Ok(());
        };
        self.subscribed_now();
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.reset();
        loop {
            tokio::select! {
                push = pushes.recv() => match push {
                    Some(push) => match push.kind {
                        PushKind::SMessage => {
                            if let (Some(channel), Some(kind)) = (bytes(&push.data, 0), bytes(&push.data, 1)) {
                                routes.deliver(channel, kind);
                            }
                        }
                        // A (re)subscription: after a reconnect, failover or slot move the
                        // connection subscribes again by itself; what was announced meanwhile was
                        // missed, so the topic looks once.
                        PushKind::SSubscribe => {
                            if let Some(topic) = bytes(&push.data, 0)
                                .and_then(|c| std::str::from_utf8(c).ok())
                                .and_then(|c| routes.0.get(c))
                            {
                                Routes::wake(topic);
                                if let Some(schedules) = &routes.1 {
                                    schedules.notify_one();
                                }
                            }
                        }
                        // A node connection closed: perhaps a primary died, whose slots a
                        // replica will serve; this connection would never look (see above).
                        PushKind::Disconnection => {
                            return Err("a cluster node closed its connection; subscribing anew".into());
                        }
                        _ => {}
                    },
                    None => return Err("the sharded pub/sub connection closed".into()),
                },
                _ = ping.tick() => {
                    let cmd = redis::cmd("PING");
                    match tokio::time::timeout(PING_TIMEOUT, cmd.query_async::<redis::Value>(&mut cluster)).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return Err(format!("a PING on the sharded pub/sub connection failed: {e}")),
                        Err(_) => return Err("Redis did not answer a PING on the sharded pub/sub connection".into()),
                    }
                }
                _ = stop.cancelled() => return Ok(()),
            }
        }
    }
}

/// The bytes of a push's `i`th element.
fn bytes(data: &[redis::Value], i: usize) -> Option<&[u8]> {
    match data.get(i)? {
        redis::Value::BulkString(b) => Some(b),
        redis::Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}
