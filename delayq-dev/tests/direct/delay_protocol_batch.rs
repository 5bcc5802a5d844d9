//! `send_batch` costs one round trip, counted by the server.

use std::time::Duration;

use delayq_dev::producer;
use delayq_dev::{slowlog_every_command, slowlog_script_calls, RedisServer};

#[tokio::test]
async fn a_batch_of_10000_is_one_script_call() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    // Load the script and register the topic (a producer adds a topic to the namespace's
    // registry once, before its first send) first, so the count is of the batch alone.
    p.send("t", &0, Duration::from_secs(3600)).await.unwrap();
    server.reset_stats();
    // The slow log, at a threshold of 0, keeps every command with its argument count (the
    // commands a script runs too: some 10,000 here).
    let mut c = server.connection();
    slowlog_every_command(&mut c, 100_000);

    let items = (0..10_000).map(|i| {
        (
            serde_json::json!({ "n": i }),
            Duration::from_millis(i % 5000),
        )
    });
    let ids = p.send_batch("t", items).await.unwrap();
    assert_eq!(ids.len(), 10_000);

    // commandstats also counts the commands a script runs inside Redis; those are the ones
    // send.lua calls. Anything else would be a command the client sent on its own.
    let calls = server.command_calls();
    let count = |name: &str| calls.get(name).copied().unwrap_or(0);
    let inside_send_lua = [
        "time", "zrange", "hexists", "zscore", "zrem", "hset", "zadd", "publish", "exists", "hget",
        "hsetnx", "hincrby", "hdel", "hmget", "type",
    ];
    let sent_by_client: Vec<_> = calls
        .iter()
        .filter(|(n, _)| {
            !inside_send_lua.contains(&n.as_str())
                && !["config|resetstat", "config|set", "slowlog|reset"].contains(&n.as_str())
        })
        .collect();
    println!("send_batch(10_000): {sent_by_client:?} sent by the client; all: {calls:?}");
    assert_eq!(
        sent_by_client,
        vec![(&"evalsha".to_string(), &1)],
        "one script call, nothing else"
    );
    // Inside the call, HMGETs ask which ids have an envelope, and HSETs and ZADDs write the
    // messages, 1,000 arguments a command (not a command a message).
    assert_eq!(
        (count("hmget"), count("hset"), count("zadd")),
        (10, 20, 20),
        "HMGET, HSET and ZADD of 1,000 arguments"
    );

    // Each call's messages, from its argument count: sha numkeys, the keys, two arguments,
    // seven the messages share, then three a message. The slow log keeps 31 arguments and then "... (N more arguments)".
    let mut per_call = Vec::new();
    for args in slowlog_script_calls(&mut c) {
        let more = args
            .last()
            .and_then(|a| a.strip_prefix("... ("))
            .and_then(|a| a.strip_suffix(" more arguments)"))
            .map_or(0, |n| n.parse::<usize>().unwrap());
        let argc = if more > 0 {
            args.len() - 1 + more
        } else {
            args.len()
        };
        let numkeys: usize = args[1].parse().unwrap();
        per_call.push((argc - 2 - numkeys - 2 - 7) / 3);
    }
    assert_eq!(per_call, [10_000], "one call carries the whole batch");

    assert_eq!(
        p.counts("t").await.unwrap().delayed,
        10_001,
        "the batch and the first one"
    );
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 10_000);
}

#[tokio::test]
async fn a_batch_after_a_script_flush_reloads_and_still_writes_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("warm", &0, Duration::ZERO).await.unwrap();
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut server.connection())
        .unwrap();
    let ids = p
        .send_batch("t", (0..25_000).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    assert_eq!(ids.len(), 25_000);
    assert_eq!(p.counts("t").await.unwrap().delayed, 25_000);
}

#[tokio::test]
async fn claims_and_acks_larger_than_one_script_call_are_split() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let q = delayq_core::protocol::queue(&p, "t").unwrap();
    // Lua's unpack fails past ~8,000 values: 9,000 acks, or a 9,000 claim, in one call would.
    p.send_batch("t", (0..9_000).map(|i| (i, Duration::ZERO)))
        .await
        .unwrap();
    let batch = q.claim_due(9_000, Duration::from_secs(30)).await.unwrap();
    assert_eq!(batch.claimed.len(), 1_000, "one claim takes at most 1,000");
    let mut all: Vec<_> = batch.claimed.iter().map(|c| c.receipt()).collect();
    for _ in 0..8 {
        let more = q.claim_due(1_000, Duration::from_secs(30)).await.unwrap();
        all.extend(more.claimed.iter().map(|c| c.receipt()));
    }
    let acked = q.ack(&all).await.unwrap();
    assert_eq!(acked.len(), 9_000);
    assert!(acked.iter().all(|a| *a));
    assert_eq!(
        p.counts("t").await.unwrap(),
        delayq_core::TopicCounts::default()
    );
}

/// Redis reaches maxmemory partway through a batch: the batch fails whole, nothing written
/// (with calls of 100 messages, the first 400 were written and the error returned: found in
/// review).
#[tokio::test]
async fn a_batch_that_fails_leaves_nothing_written() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("t", &0, Duration::from_secs(3600)).await.unwrap();
    let mut c = server.connection();
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used + 1_500_000)
        .query(&mut c)
        .unwrap();
    let payload = "x".repeat(3000);
    let result = p
        .send_batch(
            "t",
            (0..1000).map(|_| (payload.clone(), Duration::from_secs(5))),
        )
        .await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let delayed = p.counts("t").await.unwrap().delayed - 1;
    println!(
        "send_batch at maxmemory: {:?}; {delayed} of its 1000 messages written",
        result.as_ref().map(Vec::len)
    );
    match result {
        Ok(ids) => assert_eq!((ids.len(), delayed), (1000, 1000)),
        Err(e) => assert_eq!(
            delayed, 0,
            "send_batch failed ({e}) and left {delayed} written"
        ),
    }
}
