//! Sends that wait for replicas ([`SendOptions::replicas`](crate::SendOptions::replicas)).
//!
//! Redis `WAIT` blocks the connection it is sent on until enough replicas acknowledged, or
//! its timeout passed; and it counts only the writes made earlier on that same connection.
//! On the producer's shared connection, one send waiting for a dead replica held up every
//! command behind it: after a failover (whose new primary has no replica yet) concurrent
//! sends queued one `replica_timeout` each, and every other command of the producer waited
//! behind them, until all failed with "timed out" after 10 s. So here:
//!
//! - these sends write and wait on a connection of their own, which nothing else uses (on a
//!   cluster, one per primary, as to a single server: the cluster client's own slot refreshes
//!   and checks queued behind a `WAIT` on its node connections, and after a failover it did
//!   not find the new primary until the response timeout);
//! - the writes made meanwhile on one primary share one `WAIT` (a group commit): one round at
//!   a time per primary connection, so N concurrent sends wait about one replica timeout, not
//!   N of them, and a slow shard never holds up another shard's round;
//! - where the write went (the node's address on a cluster, the connection's client id and
//!   generation) is read before the write and again after the `WAIT`: if the
//!   connection changed in between (a reconnect, a failover), that `WAIT` could not count this
//!   write, so the send reports 0 replicas instead of a false success.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::conn::RedisConn;
use crate::error::{Error, Result};

/// The connection a write went over: a `WAIT` counts it only on the same one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Seat {
    /// The primary's address on a cluster, empty otherwise.
    node: String,
    generation: u64,
    /// `CLIENT ID`.
    client: i64,
}

/// Where a send that waits for replicas writes: the connection and who it is.
pub(crate) struct Lane {
    pub(crate) conn: RedisConn,
    seat: Seat,
}

/// A write waiting for its replicas.
struct Waiter {
    conn: RedisConn,
    seat: Seat,
    replicas: u32,
    deadline: Instant,
    answer: oneshot::Sender<Result<usize>>,
}

/// The connections for these sends and the rounds of `WAIT` on them. Opened on the first
/// send with [`replicas`](crate::SendOptions::replicas); shared by a producer's clones.
pub(crate) struct Replicated {
    base: RedisConn,
    /// By primary address on a cluster; under "" otherwise.
    conns: tokio::sync::Mutex<HashMap<String, RedisConn>>,
    /// On a cluster: the primary last found for a key, until a write there fails.
    primaries: std::sync::Mutex<HashMap<String, String>>,
    rounds: std::sync::OnceLock<mpsc::UnboundedSender<Waiter>>,
}

impl Replicated {
    pub(crate) fn new(base: RedisConn) -> Self {
        Replicated {
            base,
            conns: Default::default(),
            primaries: Default::default(),
            rounds: std::sync::OnceLock::new(),
        }
    }

    /// The connection a write to `key` goes over, and who it is; read before the write.
    pub(crate) async fn lane(&self, key: &str) -> Result<Lane> {
        let known = self.primaries().get(key).cloned();
        let node = match known {
            Some(node) => node,
            None => {
                let node = self.base.primary_of(key).await?.unwrap_or_default();
                self.primaries().insert(key.to_string(), node.clone());
                node
            }
        };
        let conn = {
            let mut conns = self.conns.lock().await;
            match conns.get(&node) {
                Some(conn) => conn.clone(),
                None => {
                    // "" when not a cluster: the one server (or Sentinel primary).
                    let conn = if node.is_empty() {
                        self.base.of_its_own().await?
                    } else {
                        self.base.to_node(&node).await?
                    };
                    conns.insert(node.clone(), conn.clone());
                    conn
                }
            }
        };
        match seat_of(&conn, &node).await {
            Ok(seat) => Ok(Lane { conn, seat }),
            Err(e) => {
                self.forget(key);
                Err(e.into())
            }
        }
    }

    /// A write to `key` failed: the next one looks for its primary again (a failover or a
    /// slot move may have come).
    pub(crate) fn forget(&self, key: &str) {
        self.primaries().remove(key);
    }

    fn primaries(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.primaries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many replicas acknowledged the writes made on `lane` (this one included), waiting
    /// for `replicas` of them until `deadline`.
    pub(crate) async fn wait(&self, lane: Lane, replicas: u32, deadline: Instant) -> Result<usize> {
        let (answer, answered) = oneshot::channel();
        let waiter = Waiter {
            conn: lane.conn,
            seat: lane.seat,
            replicas,
            deadline,
            answer,
        };
        let rounds = self.rounds.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(rounds(rx));
            tx
        });
        rounds
            .send(waiter)
            .map_err(|_| Error::unexpected("waiting for replicas", &"the rounds stopped"))?;
        answered
            .await
            .unwrap_or_else(|_| Err(Error::unexpected("waiting for replicas", &"no answer")))
    }
}

/// Who `conn` (to `node`) is now.
async fn seat_of(conn: &RedisConn, node: &str) -> redis::RedisResult<Seat> {
    let (generation, client) = conn
        .command_at_primary("", redis::cmd("CLIENT").arg("ID").clone())
        .await?;
    Ok(Seat {
        node: node.to_string(),
        generation,
        client: redis::from_redis_value(client)?,
    })
}

/// Runs the rounds: for each seat, one `WAIT` at a time, for every write queued on it.
async fn rounds(mut incoming: mpsc::UnboundedReceiver<Waiter>) {
    let mut queued: HashMap<Seat, Vec<Waiter>> = HashMap::new();
    let mut busy: HashSet<Seat> = HashSet::new();
    let mut running: JoinSet<Seat> = JoinSet::new();
    let mut open = true;
    while open || !running.is_empty() || !queued.is_empty() {
        tokio::select! {
            waiter = incoming.recv(), if open => match waiter {
                Some(w) => queued.entry(w.seat.clone()).or_default().push(w),
                None => open = false,
            },
            Some(done) = running.join_next() => {
                // A round cannot panic but by a bug; its seat then stays busy, and its waiters
                // get "no answer".
                if let Ok(seat) = done {
                    busy.remove(&seat);
                }
            }
        }
        let ready: Vec<Seat> = queued
            .keys()
            .filter(|s| !busy.contains(*s))
            .cloned()
            .collect();
        for seat in ready {
            let waiters = queued.remove(&seat).unwrap_or_default();
            busy.insert(seat.clone());
            running.spawn(round(seat, waiters));
        }
    }
}

/// One `WAIT` for `waiters`, who all wrote on `seat`: for the most replicas any of them asks,
/// until the earliest deadline among them (at least 1 ms: `WAIT … 0` would block for ever).
async fn round(seat: Seat, waiters: Vec<Waiter>) -> Seat {
    let replicas = waiters.iter().map(|w| w.replicas).max().unwrap_or(1);
    let deadline = waiters.iter().map(|w| w.deadline).min();
    let left = deadline.map_or(Duration::ZERO, |d| {
        d.saturating_duration_since(Instant::now())
    });
    let millis = left.as_millis().clamp(1, u64::MAX as u128) as u64;
    let Some(conn) = waiters.first().map(|w| w.conn.clone()) else {
        return seat;
    };
    // WAIT and CLIENT ID in one pipeline on this connection (to one server, so both go over
    // it in order): the same client as before the write means no reconnect came between
    // (client ids only grow), so the WAIT counted the write.
    let mut pipe = redis::pipe();
    pipe.cmd("WAIT").arg(replicas).arg(millis);
    pipe.cmd("CLIENT").arg("ID");
    let acked = async {
        let (generation, values) = conn.pipeline_on(pipe).await?;
        let (count, client): (usize, i64) = redis::from_redis_value(redis::Value::Array(values))?;
        let now = Seat {
            node: seat.node.clone(),
            generation,
            client,
        };
        Ok::<_, redis::RedisError>(if now == seat { count } else { 0 })
    }
    .await;
    for w in waiters {
        let answer = match &acked {
            Ok(n) => Ok(*n),
            Err(e) => Err(Error::Redis(e.clone())),
        };
        let _ = w.answer.send(answer);
    }
    seat
}
