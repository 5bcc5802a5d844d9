//! A topic whose hash slot migrates to another shard while it is used (`CLUSTER SETSLOT …
//! MIGRATING/IMPORTING` and `MIGRATE`, as `redis-cli --cluster reshard` does). A script that
//! touches a key it did not declare fails partway while its slot migrates, keeping the writes
//! before the failure; delayq's scripts declare every far bucket they touch, so Redis answers
//! TRYAGAIN before they start and the client calls again once the migration is done.

use std::time::Duration;

use delayq_core::protocol::NackOutcome;
use delayq_core::{Producer, SendOptions};
use delayq_dev::RedisCluster;

const TOPIC: &str = "migrating";
const HOUR: Duration = Duration::from_secs(3600);

fn key(suffix: &str) -> String {
    format!("delayq:{{{TOPIC}}}:{suffix}")
}

fn node_id(c: &mut redis::Connection) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(c).unwrap()
}

/// The topic's keys on the node behind `c`, far buckets with their sizes.
fn far_buckets(c: &mut redis::Connection) -> Vec<(String, u64)> {
    let names: Vec<String> = redis::cmd("KEYS").arg(key("far:*")).query(c).unwrap();
    names
        .into_iter()
        .map(|k| {
            let n: u64 = redis::cmd("HLEN").arg(&k).query(c).unwrap();
            (k, n)
        })
        .collect()
}

/// What must hold of the far keys whatever happened: the far count is the number of records
/// in the buckets, and every bucket is listed in `far` (else it is never promoted).
fn assert_far_consistent(c: &mut redis::Connection, when: &str) {
    let buckets = far_buckets(c);
    let records: u64 = buckets.iter().map(|(_, n)| n).sum();
    let count: Option<u64> = redis::cmd("HGET")
        .arg(key("farinfo"))
        .arg("count")
        .query(c)
        .unwrap();
    assert_eq!(
        count.unwrap_or(0),
        records,
        "{when}: the far count says {count:?}, the buckets hold {records} ({buckets:?})"
    );
    let listed: Vec<String> = redis::cmd("ZRANGE")
        .arg(key("far"))
        .arg(0)
        .arg(-1)
        .query(c)
        .unwrap();
    for (bucket, _) in &buckets {
        let member = bucket.rsplit(':').next().unwrap().to_string();
        assert!(
            listed.contains(&member),
            "{when}: bucket {bucket} is not listed in `far` ({listed:?}): it would never be promoted"
        );
    }
}

/// Where `id` is: "inflight", "delayed", "far" or "nowhere".
fn state_of(c: &mut redis::Connection, id: &str) -> &'static str {
    let inflight: Option<f64> = redis::cmd("ZSCORE")
        .arg(key("inflight"))
        .arg(id)
        .query(c)
        .unwrap();
    let delayed: Option<f64> = redis::cmd("ZSCORE")
        .arg(key("delayed"))
        .arg(id)
        .query(c)
        .unwrap();
    let far = far_buckets(c).into_iter().any(|(bucket, _)| {
        redis::cmd("HEXISTS")
            .arg(&bucket)
            .arg(id)
            .query::<bool>(c)
            .unwrap()
    });
    match (inflight.is_some(), delayed.is_some(), far) {
        (true, false, false) => "inflight",
        (false, true, false) => "delayed",
        (false, false, true) => "far",
        (false, false, false) => "nowhere",
        _ => "in two places",
    }
}

/// A hash slot moving from primary `source` to primary `target`, as `redis-cli --cluster
/// reshard` moves it: `SETSLOT … IMPORTING/MIGRATING`, `MIGRATE` of its keys, `SETSLOT …
/// NODE` on every primary.
struct Migration<'a> {
    cluster: &'a RedisCluster,
    slot: u16,
    source: usize,
    target: usize,
    target_id: String,
}

impl<'a> Migration<'a> {
    fn start(cluster: &'a RedisCluster, slot: u16, source: usize, target: usize) -> Self {
        let mut src = cluster.nodes()[source].connection();
        let mut dst = cluster.nodes()[target].connection();
        let (source_id, target_id) = (node_id(&mut src), node_id(&mut dst));
        setslot(&mut dst, slot, "IMPORTING", &source_id);
        setslot(&mut src, slot, "MIGRATING", &target_id);
        Migration {
            cluster,
            slot,
            source,
            target,
            target_id,
        }
    }

    /// Moves `keys` (of the slot) to the target.
    fn migrate(&self, keys: &[String]) {
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(self.cluster.nodes()[self.target].port())
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(keys)
            .query(&mut self.cluster.nodes()[self.source].connection())
            .unwrap();
    }

    /// Moves the slot's remaining keys, and gives the slot to the target.
    fn finish(self) {
        let mut src = self.cluster.nodes()[self.source].connection();
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(100)
                .query(&mut src)
                .unwrap();
            if keys.is_empty() {
                break;
            }
            self.migrate(&keys);
        }
        for i in self.cluster.primaries() {
            let mut c = self.cluster.nodes()[i].connection();
            setslot(&mut c, self.slot, "NODE", &self.target_id);
        }
    }
}

fn setslot(c: &mut redis::Connection, slot: u16, how: &str, id: &str) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(how)
        .arg(id)
        .query(c)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migrating_mid_use_changes_nothing_partway() {
    let cluster = RedisCluster::start();
    let p = Producer::connect(&cluster.url()).await.unwrap();
    let q = delayq_core::protocol::queue(&p, TOPIC).unwrap();

    // Every one of the topic's nine keys exists, so that Redis lets its scripts run on the
    // old shard during the migration (a script that declares a missing key gets TRYAGAIN).
    p.send_with(
        TOPIC,
        "hot",
        SendOptions::new().delay(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    p.send(TOPIC, "to retry", Duration::ZERO).await.unwrap();
    p.send(TOPIC, "to bury", Duration::ZERO).await.unwrap();
    let in_an_hour = p.send(TOPIC, "in an hour", HOUR).await.unwrap();
    p.send_with(
        TOPIC,
        "user id",
        SendOptions::new().delay(3 * HOUR).id("user-e"),
    )
    .await
    .unwrap();
    let batch = q.claim_due(10, Duration::from_secs(600)).await.unwrap();
    assert_eq!(batch.claimed.len(), 2);
    let (retry, bury) = (&batch.claimed[0], &batch.claimed[1]);
    let buried = q
        .nack(
            &bury.id,
            bury.token(),
            Duration::ZERO,
            "boom",
            5,
            Some("poison"),
        )
        .await
        .unwrap();
    assert_eq!(buried, NackOutcome::Dead);

    let source = cluster.primary_for(&key("msg"));
    let target = *cluster.primaries().iter().find(|&&i| i != source).unwrap();
    let mut src = cluster.nodes()[source].connection();
    let mut dst = cluster.nodes()[target].connection();
    for k in [
        "delayed", "inflight", "msg", "dead", "seq", "stats", "far", "where", "farinfo",
    ] {
        let exists: bool = redis::cmd("EXISTS").arg(key(k)).query(&mut src).unwrap();
        assert!(exists, "{k} exists before the migration");
    }
    assert_far_consistent(&mut src, "before the migration");
    let hour_bucket = far_buckets(&mut src)
        .into_iter()
        .map(|(k, _)| k)
        .find(|k| {
            redis::cmd("HEXISTS")
                .arg(k)
                .arg(in_an_hour.as_str())
                .query::<bool>(&mut src)
                .unwrap()
        })
        .expect("the bucket of the message due in an hour");

    // The migration starts, and the bucket of the message due in an hour moves first.
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key("msg"))
        .query(&mut src)
        .unwrap();
    let migration = Migration::start(&cluster, slot, source, target);
    migration.migrate(std::slice::from_ref(&hour_bucket));

    // While the slot migrates: a retry with a two-hour backoff (a bucket no one has yet), and
    // a batch of two, one into the bucket of "user-e" (still on the old shard), one into the
    // bucket that moved.
    let nack = {
        let q = q.clone();
        let (id, token) = (retry.id.clone(), retry.token());
        tokio::spawn(async move { q.nack(&id, token, 2 * HOUR, "later", 5, None).await })
    };
    let send = {
        let p = p.clone();
        tokio::spawn(async move {
            let items = [("beside user-e", 3 * HOUR), ("beside the hour", HOUR)];
            p.send_batch(TOPIC, items).await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The rest of the slot moves, and the target owns it.
    migration.finish();

    let nacked = tokio::time::timeout(Duration::from_secs(30), nack)
        .await
        .expect("the retry returns")
        .unwrap();
    let sent = tokio::time::timeout(Duration::from_secs(30), send)
        .await
        .expect("the batch returns")
        .unwrap();
    println!("during the migration: retry {nacked:?}, batch {sent:?}");

    // Nothing changed partway: the retried message is in exactly one place (in flight still,
    // when the retry failed), and the far count matches the buckets.
    let retried = state_of(&mut dst, retry.id.as_str());
    assert!(
        retried == "far" || (retried == "inflight" && nacked.is_err()),
        "the retried message is {retried} after a retry that returned {nacked:?}"
    );
    assert_far_consistent(&mut dst, "after the migration");
    if let Ok(ids) = &sent {
        for id in ids {
            assert_eq!(state_of(&mut dst, id.as_str()), "far", "batch message {id}");
        }
    }
    // Both calls went through once the slot had moved (the client retried the TRYAGAIN).
    assert_eq!(nacked.unwrap(), NackOutcome::Retry);
    assert_eq!(sent.unwrap().len(), 2);
    let counts = p.counts(TOPIC).await.unwrap();
    assert_eq!(
        (counts.delayed, counts.inflight, counts.dead),
        (6, 0, 1),
        "hot, an hour, user-e, the retry and the batch of two; one dead"
    );
}

/// Moves the slot of `key` to another primary, keys and all; returns the new primary.
fn move_slot_of(cluster: &RedisCluster, key: &str) -> usize {
    let source = cluster.primary_for(key);
    let target = *cluster.primaries().iter().find(|&&i| i != source).unwrap();
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut cluster.nodes()[source].connection())
        .unwrap();
    Migration::start(cluster, slot, source, target).finish();
    target
}

/// A send with `replicas(1)` writes on a connection of its own to the primary it last found
/// for the topic; after the topic's slot moved to another shard, that primary answers MOVED
/// (the script ran nowhere), and the send looks again and writes there at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_send_follows_its_topic_to_another_shard() {
    let cluster = RedisCluster::start();
    let p = Producer::connect(&cluster.url()).await.unwrap();
    let options = || {
        SendOptions::new()
            .replicas(1)
            .replica_timeout(Duration::from_secs(5))
    };
    let topic = "moving";
    let msg = format!("delayq:{{{topic}}}:msg");
    p.send_with(topic, "before", options()).await.unwrap();
    let target = move_slot_of(&cluster, &msg);
    assert_eq!(cluster.primary_for(&msg), target);
    let after = p.send_with(topic, "after", options()).await;
    println!("a send with replicas(1) after the slot moved: {after:?}");
    assert!(after.is_ok(), "{after:?}");
    assert_eq!(p.counts(topic).await.unwrap().delayed, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_follows_its_topic_to_another_shard() {
    let cluster = RedisCluster::start();
    let p = Producer::connect(&cluster.url()).await.unwrap();
    let topic = "moving";
    let msg = format!("delayq:{{{topic}}}:msg");
    p.send(topic, &"before", Duration::from_secs(5))
        .await
        .unwrap();
    move_slot_of(&cluster, &msg);
    // The producer still maps the slot to the source: the batch's call is answered MOVED
    // there, and is sent again where the slot is served now.
    let ids = p
        .send_batch(topic, (0..1_000).map(|i| (i, Duration::from_secs(5))))
        .await;
    println!(
        "a batch of 1,000 after the slot moved: {:?}",
        ids.as_ref().map(Vec::len)
    );
    assert_eq!(ids.unwrap().len(), 1_000);
    assert_eq!(p.counts(topic).await.unwrap().delayed, 1_001);
}
