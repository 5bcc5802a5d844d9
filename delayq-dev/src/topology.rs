//! Redis deployments of several processes for tests: a Redis Cluster of 3 primaries with a
//! replica each, and a Sentinel setup of one primary, one replica and three sentinels. All on
//! free loopback ports, killed by pid when dropped.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::server::RedisServer;

const READY_WITHIN: Duration = Duration::from_secs(30);

fn query<T: redis::FromRedisValue>(server: &RedisServer, cmd: &redis::Cmd) -> Option<T> {
    let client = redis::Client::open(server.url()).ok()?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    cmd.query(&mut c).ok()
}

fn info_field(text: &str, field: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix(&format!("{field}:"))
            .map(str::to_string)
    })
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + READY_WITHIN;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Redis Cluster: 3 primaries, each with one replica.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    killed: Vec<usize>,
}

impl RedisCluster {
    /// Starts 6 nodes, joins them with `redis-cli --cluster create … --cluster-replicas 1`,
    /// and waits until every slot is served and every replica is in sync.
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| RedisServer::builder().cluster_node().start())
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port()));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create (Debian: apt-get install -y redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster {
            nodes,
            killed: Vec::new(),
        };
        cluster.wait_healthy();
        cluster
    }

    /// The seed URLs, comma-separated, as `DELAYQ_REDIS_URL` takes them.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.pid().is_some())
            .map(RedisServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The nodes, in the order they were started.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.pid().is_some())
    }

    /// Waits until every live node sees the cluster as ok with every slot served by a live
    /// primary, and every primary has its replica in sync.
    pub fn wait_healthy(&self) {
        wait("the cluster to be healthy", || {
            self.live().all(|n| {
                let info: Option<String> = query(n, &redis::cmd("CLUSTER").arg("INFO").to_owned());
                info.is_some_and(|i| {
                    info_field(&i, "cluster_state").as_deref() == Some("ok")
                        && info_field(&i, "cluster_slots_ok").as_deref() == Some("16384")
                })
            }) && self.primaries().iter().all(|&p| {
                let info: Option<String> = query(
                    &self.nodes[p],
                    &redis::cmd("INFO").arg("replication").to_owned(),
                );
                info.is_some_and(|i| {
                    info_field(&i, "connected_slaves").is_some_and(|n| n != "0")
                        && i.contains("state=online")
                })
            })
        });
    }

    /// Indexes of the live primaries, as the cluster sees them now.
    pub fn primaries(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.is_primary(i))
            .collect()
    }

    /// Whether node `i` is alive and a primary now (a replica once promoted).
    pub fn is_primary(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        n.pid().is_some()
            && query::<String>(n, &redis::cmd("INFO").arg("replication").to_owned())
                .is_some_and(|i| info_field(&i, "role").as_deref() == Some("master"))
    }

    /// The index of the node replicating node `primary`.
    pub fn replica_of(&self, primary: usize) -> usize {
        let port = self.nodes[primary].port().to_string();
        (0..self.nodes.len())
            .find(|&i| {
                query::<String>(
                    &self.nodes[i],
                    &redis::cmd("INFO").arg("replication").to_owned(),
                )
                .is_some_and(|info| info_field(&info, "master_port").as_deref() == Some(&port))
            })
            .expect("a replica of the primary")
    }

    /// The index of the live primary serving `key`.
    pub fn primary_for(&self, key: &str) -> usize {
        let slot: i64 = self
            .live()
            .find_map(|n| query(n, &redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).to_owned()))
            .expect("CLUSTER KEYSLOT");
        *self
            .primaries()
            .iter()
            .find(|&&p| {
                let nodes: Option<String> = query(
                    &self.nodes[p],
                    &redis::cmd("CLUSTER").arg("NODES").to_owned(),
                );
                nodes.is_some_and(|n| serves(&n, slot))
            })
            .expect("a primary serves the slot")
    }

    /// Kills node `i` with SIGKILL, as a crash would.
    pub fn kill9(&mut self, i: usize) {
        self.nodes[i].kill9();
        self.killed.push(i);
    }

    /// Kills primary `i` with SIGKILL and waits (polling every 20 ms, at most 30 s) until its
    /// replica is a primary; returns when each happened.
    pub fn kill9_until_promoted(&mut self, i: usize) -> (Instant, Instant) {
        let replica = self.replica_of(i);
        self.kill9(i);
        let killed = Instant::now();
        while !self.is_primary(replica) {
            assert!(killed.elapsed() < READY_WITHIN, "no replica promoted");
            std::thread::sleep(Duration::from_millis(20));
        }
        (killed, Instant::now())
    }

    /// Restarts the killed nodes (same port and directory, so they rejoin, as replicas once
    /// a failover happened) and waits until every primary has a replica in sync again.
    pub fn restart_killed(&mut self) {
        for i in std::mem::take(&mut self.killed) {
            self.nodes[i].restart();
        }
        self.wait_healthy();
    }

    /// Waits until the cluster has three live primaries serving every slot again (after a
    /// kill, a replica takes over once the others agree the primary is gone).
    pub fn wait_failover(&self) {
        wait("a replica to take over", || {
            self.primaries().len() == 3
                && self.live().all(|n| {
                    let info: Option<String> =
                        query(n, &redis::cmd("CLUSTER").arg("INFO").to_owned());
                    info.is_some_and(|i| {
                        info_field(&i, "cluster_state").as_deref() == Some("ok")
                            && info_field(&i, "cluster_slots_fail").as_deref() == Some("0")
                            && info_field(&i, "cluster_slots_pfail").as_deref() == Some("0")
                    })
                })
        });
    }

    /// Keys per live primary matching `pattern` (`KEYS`, for printing the spread in tests).
    pub fn keys_per_primary(&self, pattern: &str) -> HashMap<u16, usize> {
        self.primaries()
            .into_iter()
            .map(|p| {
                let keys: Vec<String> =
                    query(&self.nodes[p], &redis::cmd("KEYS").arg(pattern).to_owned())
                        .unwrap_or_default();
                (self.nodes[p].port(), keys.len())
            })
            .collect()
    }

    /// `INFO commandstats` calls summed over the live nodes.
    pub fn command_calls(&self) -> HashMap<String, u64> {
        let mut total = HashMap::new();
        for n in self.live() {
            for (name, calls) in n.command_calls() {
                *total.entry(name).or_insert(0) += calls;
            }
        }
        total
    }

    /// Resets the statistics of every live node.
    pub fn reset_stats(&self) {
        self.live().for_each(RedisServer::reset_stats);
    }
}

/// Whether this node's line in `CLUSTER NODES` (flag `myself`) lists `slot`.
fn serves(nodes: &str, slot: i64) -> bool {
    let Some(me) = nodes.lines().find(|l| l.contains("myself")) else {
        return false;
    };
    me.split_whitespace()
        .skip(8)
        .any(|range| match range.split_once('-') {
            Some((a, b)) => {
                a.parse::<i64>().is_ok_and(|a| a <= slot)
                    && b.parse::<i64>().is_ok_and(|b| slot <= b)
            }
            None => range.parse::<i64>().is_ok_and(|s| s == slot),
        })
}

/// One primary with one replica, watched by three sentinels (quorum 2).
#[derive(Debug)]
pub struct RedisSentinels {
    primary: RedisServer,
    replica: RedisServer,
    sentinels: Vec<RedisServer>,
}

/// The primary's name in the sentinels' config.
pub const SENTINEL_MASTER: &str = "mymaster";

impl RedisSentinels {
    /// Starts the primary, its replica and three sentinels, and waits until the sentinels
    /// know the replica and each other.
    pub fn start() -> RedisSentinels {
        let primary = RedisServer::start();
        let replica = RedisServer::builder()
            .config_values("replicaof", &["127.0.0.1", &primary.port().to_string()])
            .start();
        wait("the replica to sync", || {
            let info: Option<String> =
                query(&replica, &redis::cmd("INFO").arg("replication").to_owned());
            info.is_some_and(|i| info_field(&i, "master_link_status").as_deref() == Some("up"))
        });
        let sentinels: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::builder()
                    .sentinel(SENTINEL_MASTER, primary.port())
                    .start()
            })
            .collect();
        let set = RedisSentinels {
            primary,
            replica,
            sentinels,
        };
        wait("the sentinels to know the replica and each other", || {
            set.sentinels.iter().all(|s| {
                let master: Option<HashMap<String, String>> = query(
                    s,
                    &redis::cmd("SENTINEL")
                        .arg("MASTER")
                        .arg(SENTINEL_MASTER)
                        .to_owned(),
                );
                master.is_some_and(|m| {
                    m.get("num-slaves").map(String::as_str) == Some("1")
                        && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                })
            })
        });
        set
    }

    /// `redis+sentinel://…/mymaster`, as `DELAYQ_REDIS_URL` takes it.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        format!("redis+sentinel://{}/{SENTINEL_MASTER}", hosts.join(","))
    }

    /// The primary it started with.
    pub fn primary(&self) -> &RedisServer {
        &self.primary
    }

    /// The replica it started with.
    pub fn replica(&self) -> &RedisServer {
        &self.replica
    }

    /// Kills the primary with SIGKILL, as a crash would.
    pub fn kill9_primary(&mut self) {
        self.primary.kill9();
    }

    /// Restarts the killed primary; the sentinels make it a replica of the new primary. Waits
    /// until the new primary has it in sync.
    pub fn restart_killed(&mut self) {
        if self.primary.pid().is_none() {
            self.primary.restart();
        }
        wait("the old primary to rejoin as a replica", || {
            query::<String>(
                self.current_primary(),
                &redis::cmd("INFO").arg("replication").to_owned(),
            )
            .is_some_and(|i| {
                info_field(&i, "connected_slaves").is_some_and(|n| n != "0")
                    && i.contains("state=online")
            })
        });
    }

    /// The port of the primary the sentinels name now.
    pub fn current_primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let addr: Option<Vec<String>> = query(
                s,
                &redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(SENTINEL_MASTER)
                    .to_owned(),
            );
            addr.and_then(|a| a.get(1)?.parse().ok())
        })
    }

    /// Waits until the sentinels promoted the replica.
    pub fn wait_failover(&self) {
        let replica = self.replica.port();
        wait("the sentinels to promote the replica", || {
            self.current_primary_port() == Some(replica)
                && query::<String>(
                    &self.replica,
                    &redis::cmd("INFO").arg("replication").to_owned(),
                )
                .is_some_and(|i| info_field(&i, "role").as_deref() == Some("master"))
        });
    }

    /// The data node that is primary now (the replica after a failover).
    pub fn current_primary(&self) -> &RedisServer {
        if self.current_primary_port() == Some(self.replica.port()) {
            &self.replica
        } else {
            &self.primary
        }
    }
}

/// One of the three deployments, for tests that run on each.
#[derive(Debug)]
pub enum TestRedis {
    /// One server.
    Single(RedisServer),
    /// A 3-primary cluster with a replica each.
    Cluster(RedisCluster),
    /// A primary and a replica behind three sentinels.
    Sentinel(Box<RedisSentinels>),
}

impl TestRedis {
    /// Starts the deployment named `kind`: `single`, `cluster` or `sentinel`.
    pub fn start(kind: &str) -> TestRedis {
        match kind {
            "single" => TestRedis::Single(RedisServer::start()),
            "cluster" => TestRedis::Cluster(RedisCluster::start()),
            "sentinel" => TestRedis::Sentinel(Box::new(RedisSentinels::start())),
            other => panic!("unknown deployment {other:?}: single, cluster or sentinel"),
        }
    }

    /// The URL delayq takes for it.
    pub fn url(&self) -> String {
        match self {
            TestRedis::Single(s) => s.url(),
            TestRedis::Cluster(c) => c.url(),
            TestRedis::Sentinel(s) => s.url(),
        }
    }

    /// Runs `cmd` on the node that holds its keys (the cluster routes it; on Sentinel, the
    /// current primary), for tests that set or read a key directly.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        match self {
            TestRedis::Single(s) => cmd.query(&mut s.connection()).expect("query"),
            TestRedis::Cluster(c) => {
                let nodes: Vec<String> = c.url().split(',').map(str::to_string).collect();
                let client = redis::cluster::ClusterClient::new(nodes).expect("cluster client");
                cmd.query(&mut client.get_connection().expect("cluster connection"))
                    .expect("query")
            }
            TestRedis::Sentinel(s) => cmd
                .query(&mut s.current_primary().connection())
                .expect("query"),
        }
    }

    /// `INFO commandstats` calls of the data nodes (summed over a cluster's; the current
    /// primary's on Sentinel).
    pub fn command_calls(&self) -> HashMap<String, u64> {
        match self {
            TestRedis::Single(s) => s.command_calls(),
            TestRedis::Cluster(c) => c.command_calls(),
            TestRedis::Sentinel(s) => s.current_primary().command_calls(),
        }
    }

    /// Kills the primary that holds `key` with SIGKILL, as a crash would (a cluster's for
    /// that key's slot; Sentinel's one primary). A single server has no replica to take
    /// over: it panics.
    pub fn kill_primary_of(&mut self, key: &str) {
        match self {
            TestRedis::Single(_) => panic!("a single server has no replica to fail over to"),
            TestRedis::Cluster(c) => {
                let victim = c.primary_for(key);
                c.kill9(victim);
            }
            TestRedis::Sentinel(s) => s.kill9_primary(),
        }
    }

    /// Waits until a replica has taken over from a killed primary.
    pub fn wait_failover(&self) {
        match self {
            TestRedis::Single(_) => {}
            TestRedis::Cluster(c) => c.wait_failover(),
            TestRedis::Sentinel(s) => s.wait_failover(),
        }
    }

    /// Restarts killed nodes and waits until every primary has a replica again.
    pub fn restart_killed(&mut self) {
        match self {
            TestRedis::Single(_) => {}
            TestRedis::Cluster(c) => c.restart_killed(),
            TestRedis::Sentinel(s) => s.restart_killed(),
        }
    }

    /// The primaries that hold data now: the server, a cluster's live primaries, or the
    /// Sentinel primary.
    pub fn data_nodes(&self) -> Vec<&RedisServer> {
        match self {
            TestRedis::Single(s) => vec![s],
            TestRedis::Cluster(c) => c.primaries().into_iter().map(|i| &c.nodes()[i]).collect(),
            TestRedis::Sentinel(s) => vec![s.current_primary()],
        }
    }

    /// Resets the statistics of the data nodes.
    pub fn reset_stats(&self) {
        match self {
            TestRedis::Single(s) => s.reset_stats(),
            TestRedis::Cluster(c) => c.reset_stats(),
            TestRedis::Sentinel(s) => s.current_primary().reset_stats(),
        }
    }
}
