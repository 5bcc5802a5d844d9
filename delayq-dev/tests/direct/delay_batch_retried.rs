//! A batch retried by the cluster connection (a call of its pipeline answered TRYAGAIN while
//! its slot migrates) runs no call twice: with calls of 100 messages the connection sent the
//! whole pipeline again, and a message cancelled in between came back (found in review).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_core::Cancelled;
use delayq_core::{MessageId, Producer};
use delayq_dev::RedisCluster;

const TOPIC: &str = "chunks";

fn key(suffix: &str) -> String {
    format!("delayq:{{{TOPIC}}}:{suffix}")
}

fn node_id(c: &mut redis::Connection) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(c).unwrap()
}

fn setslot(c: &mut redis::Connection, slot: u16, how: &str, id: Option<&str>) {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SETSLOT").arg(slot).arg(how);
    if let Some(id) = id {
        cmd.arg(id);
    }
    let _: () = cmd.query(c).unwrap();
}

/// A batch's later call is answered TRYAGAIN (its slot started migrating while the batch was
/// in progress): the cluster client sends the whole pipeline again, so the calls that already
/// ran run a second time. A message of such a call that was cancelled in between (cancel
/// said Removed) is created again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_cancelled_while_its_batch_is_retried_stays_cancelled() {
    let cluster = RedisCluster::start();
    let p = Producer::connect(&cluster.url()).await.unwrap();
    // Real traffic creates the topic's keys: a hot message, a far one, a user id (`where`).
    let hot = p
        .send(TOPIC, &"hot", Duration::from_secs(30))
        .await
        .unwrap();
    p.send(TOPIC, &"far", Duration::from_secs(86_400))
        .await
        .unwrap();
    p.send_with(
        TOPIC,
        &"user id",
        delayq_core::SendOptions::new()
            .delay(Duration::from_secs(3 * 86_400))
            .id("user-e"),
    )
    .await
    .unwrap();
    let source = cluster.primary_for(&key("msg"));
    let target = *cluster.primaries().iter().find(|&&i| i != source).unwrap();
    let mut src = cluster.nodes()[source].connection();
    let mut dst = cluster.nodes()[target].connection();
    // The other keys, as a topic with claims, dead letters, dedup windows, priorities, keys
    // and a pause has them (members no call of this test reads), so that a call declaring
    // only existing keys runs while the slot migrates.
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(key("inflight"))
        .arg("+inf")
        .arg("x-inflight")
        .ignore()
        .cmd("ZADD")
        .arg(key("dead"))
        .arg(1)
        .arg("x-dead")
        .ignore()
        .cmd("SET")
        .arg(key("seq"))
        .arg(7)
        .ignore()
        .cmd("HSET")
        .arg(key("stats"))
        .arg("ok:0")
        .arg(1)
        .ignore()
        .cmd("SET")
        .arg(key("paused"))
        .arg(1)
        .ignore()
        .cmd("ZADD")
        .arg(key("done"))
        .arg(1)
        .arg("x-done")
        .ignore()
        .cmd("ZADD")
        .arg(key("ready"))
        .arg(1)
        .arg("x-ready")
        .ignore()
        .cmd("ZADD")
        .arg(key("keyrate"))
        .arg(1)
        .arg("x-key")
        .ignore()
        .cmd("HSET")
        .arg(key("priority"))
        .arg("x-prio")
        .arg(9)
        .ignore()
        .query(&mut src)
        .unwrap();
    // The far buckets a call of messages due now declares (this minute's and the next few).
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for b in now_ms / 60_000 - 2..=now_ms / 60_000 + 10 {
        let _: () = redis::cmd("HSETNX")
            .arg(key(&format!("far:{b}")))
            .arg("x-bucket")
            .arg("x")
            .query(&mut src)
            .unwrap();
    }
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key("msg"))
        .query(&mut src)
        .unwrap();
    let (source_id, target_id) = (node_id(&mut src), node_id(&mut dst));
    // A reshard starts (no key moved yet).
    setslot(&mut dst, slot, "IMPORTING", Some(&source_id));
    setslot(&mut src, slot, "MIGRATING", Some(&target_id));

    // 100 messages due now (the batch's first call: its keys all exist), 100 due in an hour
    // (the second call declares the hour's bucket, which does not exist: TRYAGAIN).
    let batch = {
        let p = p.clone();
        tokio::spawn(async move {
            let items = (0..200).map(|i| {
                let delay = if i < 100 { 0 } else { 3600 };
                (i, Duration::from_secs(delay))
            });
            p.send_batch(TOPIC, items).await
        })
    };
    // Wait for the first call's messages; cancel one of them.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut cancelled = None;
    while Instant::now() < deadline {
        let n: usize = redis::cmd("ZCARD")
            .arg(key("delayed"))
            .query(&mut src)
            .unwrap();
        if n > 1 {
            let ids: Vec<String> = redis::cmd("ZRANGE")
                .arg(key("delayed"))
                .arg(0)
                .arg(-1)
                .query(&mut src)
                .unwrap();
            let id = ids.into_iter().find(|i| i != hot.as_str()).unwrap();
            let id = MessageId::new(id).unwrap();
            let outcome = p.cancel(TOPIC, &id).await.unwrap();
            println!("cancelled {id} while the batch was in progress: {outcome:?} ({n} delayed)");
            assert_eq!(outcome, Cancelled::Removed);
            cancelled = Some(id);
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // The reshard is called off: the slot stays where it was.
    setslot(&mut src, slot, "STABLE", None);
    setslot(&mut dst, slot, "STABLE", None);
    let sent = tokio::time::timeout(Duration::from_secs(60), batch)
        .await
        .expect("the batch returns")
        .unwrap();
    println!("batch: {:?}", sent.as_ref().map(Vec::len));
    let evalsha: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut src)
        .unwrap();
    println!(
        "{}",
        evalsha
            .lines()
            .find(|l| l.contains("evalsha"))
            .unwrap_or("")
    );
    if let Some(id) = cancelled {
        let envelope: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(key("msg"))
            .arg(id.as_str())
            .query(&mut src)
            .unwrap();
        let delayed: Option<f64> = redis::cmd("ZSCORE")
            .arg(key("delayed"))
            .arg(id.as_str())
            .query(&mut src)
            .unwrap();
        assert!(
            envelope.is_none() && delayed.is_none(),
            "message {id} was cancelled (Removed), and is pending again: delayed {delayed:?}"
        );
    } else {
        println!("no message of the batch was written before the slot stopped migrating");
    }
    assert_eq!(sent.unwrap().len(), 200);
}
