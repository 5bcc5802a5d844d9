//! The user test kit on a Redis Cluster and behind Sentinel (`DELAYQ_TEST_REDIS_URL`): a
//! test runtime works there, and its keys are gone after `shutdown` — on every node of the
//! cluster, and on the primary the sentinels name (the old kit opened the URL as one server,
//! which a node list or a sentinel URL is not, and left every key behind).

use std::time::Duration;

use delayq_dev::{RedisCluster, RedisSentinels};
use delayq_runtime::delay_listener;
use delayq_runtime::testing::TestRuntime;

#[delay_listener(topic = "kitdep.work")]
async fn work(_msg: u32) {}

fn keys_of(url: &str, namespace: &str) -> Vec<String> {
    let mut c = redis::Client::open(url)
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap();
    redis::cmd("KEYS")
        .arg(format!("{namespace}:*"))
        .query(&mut c)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_runtime_leaves_no_key_on_a_cluster_or_behind_sentinels() {
    let cluster = RedisCluster::start();
    let sentinels = RedisSentinels::start();
    let nodes: Vec<String> = cluster.url().split(',').map(String::from).collect();
    for (url, servers) in [
        (cluster.url(), nodes.clone()),
        (sentinels.url(), vec![sentinels.primary().url()]),
    ] {
        // The only test of this binary: the variable is its own.
        std::env::set_var("DELAYQ_TEST_REDIS_URL", &url);
        let t = TestRuntime::builder()
            .topics(["kitdep.work"])
            .start()
            .await
            .unwrap();
        let namespace = t.namespace().to_string();
        t.producer()
            .send("kitdep.work", &1u32, Duration::from_secs(3_600))
            .await
            .unwrap();
        let before: usize = servers.iter().map(|s| keys_of(s, &namespace).len()).sum();
        assert!(before > 0, "nothing was written under {namespace}");
        t.shutdown().await.unwrap();
        for s in &servers {
            let left = keys_of(s, &namespace);
            assert!(left.is_empty(), "{url}: {s} keeps {left:?}");
        }
    }
}
