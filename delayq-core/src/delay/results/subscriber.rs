//! The waits' subscriber task (see `hub.rs`): one connection, plain or sharded, that
//! subscribes to the end channels of the topics waited on, hears their announcements, reads
//! again what it may have missed, and ends with the last wait.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt;

use super::hub::{Hub, RECHECK_EVERY};

/// A subscriber connection's keepalive, and how long its PING may go unanswered.
const PING_EVERY: Duration = Duration::from_secs(15);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one attempt to connect may take, and the retries' delays.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_FROM: Duration = Duration::from_millis(100);
const RETRY_UPTO: Duration = Duration::from_secs(5);

/// The subscriber task: sessions until no wait is left.
pub(super) async fn run(hub: Hub) {
    let mut delay = RETRY_FROM;
    loop {
        let went_live = *hub.0.live.borrow();
        let ended = if hub.0.conn.is_cluster() {
            sharded(&hub).await
        } else {
            plain(&hub).await
        };
        hub.set_live(&[], false);
        match ended {
            Ok(()) => return, // no wait left
            Err(why) => tracing::debug!(%why, "the waits' subscription ended; subscribing again"),
        }
        // A session that got as far as subscribing starts the retries over.
        if *hub.0.live.borrow() != went_live {
            delay = RETRY_FROM;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_UPTO);
        if hub.wanted().is_none() {
            return;
        }
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A (un)subscribe within `PING_TIMEOUT`: a connection that went silent (a peer that vanished
/// without closing it) ends the session rather than stall it for good.
async fn bounded(
    call: impl std::future::Future<Output = redis::RedisResult<()>>,
) -> Result<(), String> {
    match tokio::time::timeout(PING_TIMEOUT, call).await {
        Ok(r) => r.map_err(err),
        Err(_) => Err("Redis did not answer a (un)subscribe".into()),
    }
}

/// The periodic read of the standing waits, and the keepalive, neither due at once.
fn timers() -> (tokio::time::Interval, tokio::time::Interval) {
    let mut recheck = tokio::time::interval(RECHECK_EVERY);
    recheck.reset();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    (recheck, ping)
}

/// The channels to subscribe and to leave, given those `subscribed` on this connection (the
/// ones subscribed already but not known live are told so first); `None`: no wait is left.
fn changes(hub: &Hub, subscribed: &HashSet<String>) -> Option<(Vec<String>, Vec<String>)> {
    let (wanted, not_live) = hub.wanted()?;
    // Left and wanted again before the task looked: still subscribed, but its waits do not
    // know it.
    let again: Vec<String> = not_live
        .into_iter()
        .filter(|c| subscribed.contains(c))
        .collect();
    if !again.is_empty() {
        hub.subscribed_now(again);
    }
    let new = wanted.difference(subscribed).cloned().collect();
    let old = subscribed.difference(&wanted).cloned().collect();
    Some((new, old))
}

/// One plain pub/sub connection (a single server, or Sentinel's primary).
async fn plain(hub: &Hub) -> Result<(), String> {
    let connect = async {
        let client = hub
            .0
            .conn
            .pubsub_client()
            .await
            .ok_or("no pub/sub client")?
            .map_err(err)?;
        client.get_async_pubsub().await.map_err(err)
    };
    let pubsub = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| "connecting timed out".to_string())??;
    let (mut sink, mut messages) = pubsub.split();
    let mut subscribed: HashSet<String> = HashSet::new();
    let (mut recheck, mut ping) = timers();
    loop {
        let Some((new, old)) = changes(hub, &subscribed) else {
            return Ok(());
        };
        if !new.is_empty() {
            bounded(sink.subscribe(&new)).await?;
            subscribed.extend(new.iter().cloned());
            hub.subscribed_now(new);
        }
        if !old.is_empty() {
            bounded(sink.unsubscribe(&old)).await?;
            old.iter().for_each(|c| {
                subscribed.remove(c);
            });
        }
        tokio::select! {
            m = messages.next() => match m {
                Some(m) => hub.heard(m.get_channel_name().as_bytes(), m.get_payload_bytes()),
                None => return Err("the pub/sub connection closed".into()),
            },
            _ = hub.0.changed.notified() => {}
            _ = recheck.tick() => hub.recheck(None),
            _ = ping.tick() => match tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(err(e)),
                Err(_) => return Err("Redis did not answer a PING".into()),
            },
        }
    }
}

/// One sharded subscription over a RESP3 cluster connection.
async fn sharded(hub: &Hub) -> Result<(), String> {
    let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
    let connect = async {
        hub.0
            .conn
            .cluster_subscriber(tx)
            .await
            .ok_or("no cluster")?
            .map_err(err)
    };
    let mut cluster = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| "connecting timed out".to_string())??;
    let mut subscribed: HashSet<String> = HashSet::new();
    let (mut recheck, mut ping) = timers();
    loop {
        let Some((new, old)) = changes(hub, &subscribed) else {
            return Ok(());
        };
        for channel in &new {
            // One call a channel: a sharded subscription takes channels of one slot only.
            bounded(cluster.ssubscribe(channel)).await?;
            subscribed.insert(channel.clone());
        }
        if !new.is_empty() {
            hub.subscribed_now(new);
        }
        for channel in old {
            bounded(cluster.sunsubscribe(&channel)).await?;
            subscribed.remove(&channel);
        }
        tokio::select! {
            push = pushes.recv() => match push {
                Some(push) => match push.kind {
                    redis::PushKind::SMessage => {
                        if let (Some(c), Some(p)) = (bytes(&push.data, 0), bytes(&push.data, 1)) {
                            hub.heard(c, p);
                        }
                    }
                    // Subscribed again by itself (a slot moved): what was announced meanwhile
                    // was missed.
                    redis::PushKind::SSubscribe => {
                        if let Some(c) = bytes(&push.data, 0).and_then(|c| std::str::from_utf8(c).ok()) {
                            hub.recheck(Some(vec![c.to_string()]));
                        }
                    }
                    redis::PushKind::Disconnection => return Err("a cluster node closed its connection".into()),
                    _ => {}
                },
                None => return Err("the sharded pub/sub connection closed".into()),
            },
            _ = hub.0.changed.notified() => {}
            _ = recheck.tick() => hub.recheck(None),
            _ = ping.tick() => {
                let cmd = redis::cmd("PING");
                match tokio::time::timeout(PING_TIMEOUT, cmd.query_async::<redis::Value>(&mut cluster)).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(err(e)),
                    Err(_) => return Err("Redis did not answer a PING".into()),
                }
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
