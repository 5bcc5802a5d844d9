//! A Redis ACL user limited to the namespace's keys and channels and the commands delayq
//! uses runs the producer and the runtime; a wrong password fails at start, saying so.

use std::time::Duration;

use delayq_dev::RedisServer;
use delayq_dev::{drained, Seen};
use delayq_runtime::{delay_listener, Error, Producer, Runtime};

/// The ACL rule documented in README.md, for a user named `app` with password `app-secret`.
const ACL_RULE: &str = "on >app-secret resetkeys ~delayq:* resetchannels &delayq:* -@all \
    +evalsha +eval +script|load +time +zrange +zrangebyscore +zremrangebyrank +zcard +zadd \
    +zrem +zscore +zmscore +zcount +hget +hmget +hset +hdel +hexists +hincrby +hkeys +incrby +sadd \
    +hsetnx +hlen +hgetall +hrandfield +exists +del +get +set +publish +subscribe +type +ping";

static ACL_SEEN: Seen<u32> = Seen::new();

#[delay_listener(topic = "acl.jobs", ack_timeout = "2s")]
async fn acl_jobs(n: u32) -> Result<(), String> {
    ACL_SEEN.push(n);
    if n == 99 {
        return Err("dead on purpose".into());
    }
    Ok(())
}

fn create_user(server: &RedisServer) {
    create_user_with(server, ACL_RULE);
}

fn create_user_with(server: &RedisServer, rule: &str) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg("app");
    for part in rule.split_whitespace() {
        cmd.arg(part);
    }
    cmd.query::<()>(&mut server.connection())
        .expect("ACL SETUSER");
}

#[tokio::test]
async fn a_namespace_limited_acl_user_runs_producer_and_runtime() {
    let server = RedisServer::start();
    create_user(&server);
    let url = format!("redis://app:app-secret@127.0.0.1:{}", server.port());
    let p = Producer::connect(&url)
        .await
        .expect("producer as the ACL user");
    let rt = Runtime::builder()
        .redis_url(&url)
        .topics(["acl.jobs"])
        .spawn()
        .await
        .expect("runtime as the ACL user");
    // The effective configuration shows where the URL came from, never its password: not as
    // a value, not as JSON (a configprops-like endpoint), not in a `{:?}` log line.
    let config = rt.config();
    let shown = config.runtime("redis_url").expect("listed").value.clone();
    assert_eq!(
        shown,
        format!("redis://app:***@127.0.0.1:{}", server.port())
    );
    let json = serde_json::to_string(config).unwrap();
    let debug = format!("{config:?}");
    let builder = format!(
        "{:?}",
        Runtime::builder()
            .redis_url(&url)
            .set("redis_url", url.as_str())
    );
    for text in [&json, &debug, &builder] {
        assert!(!text.contains("app-secret"), "the password shows in {text}");
    }

    let later = p
        .send("acl.jobs", &1u32, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(p
        .reschedule("acl.jobs", &later, Duration::from_millis(100))
        .await
        .unwrap());
    let cancelled = p
        .send("acl.jobs", &2u32, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        p.cancel("acl.jobs", &cancelled).await.unwrap(),
        delayq_runtime::Cancelled::Removed
    );
    p.send_batch("acl.jobs", [(3u32, Duration::ZERO), (4, Duration::ZERO)])
        .await
        .unwrap();
    let dead = p
        .send_with(
            "acl.jobs",
            &99u32,
            delayq_runtime::SendOptions::new().max_attempts(1),
        )
        .await
        .unwrap();

    let mut seen = ACL_SEEN.wait_for(4, Duration::from_secs(20)).await;
    seen.sort();
    assert_eq!(seen, [1, 3, 4, 99]);
    let counts = drained(&p, "acl.jobs", Duration::from_secs(20)).await;
    assert_eq!(counts.dead, 1);
    let letters = p.dead_letters("acl.jobs", 0..10).await.unwrap();
    assert_eq!(letters[0].id, *dead.id());
    assert!(p.replay_dead("acl.jobs", dead.id()).await.unwrap());
    ACL_SEEN.wait_for(5, Duration::from_secs(20)).await;
    drained(&p, "acl.jobs", Duration::from_secs(20)).await;
    assert_eq!(p.purge_dead("acl.jobs").await.unwrap(), 1);
    rt.shutdown().await.unwrap();

    // The user really is confined: a key outside the namespace is refused.
    let outside = p.clone().with_namespace("other").unwrap();
    let err = outside
        .send("acl.jobs", &1u32, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("NOPERM") || err.to_string().contains("permission"),
        "{err}"
    );
}

#[tokio::test]
async fn a_wrong_password_fails_at_start_and_says_so() {
    let server = RedisServer::start();
    create_user(&server);
    let url = format!("redis://app:wrong@127.0.0.1:{}", server.port());
    let err = Producer::connect(&url).await.unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err}");
    assert!(
        err.to_string().contains("rejected the credentials"),
        "{err}"
    );
    let err = Runtime::builder()
        .redis_url(&url)
        .topics(["acl.jobs"])
        .spawn()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err}");
    assert!(
        !err.to_string().contains(":wrong@"),
        "the password leaked: {err}"
    );
}

#[tokio::test]
async fn a_user_without_sadd_still_sends_only_the_registry_misses_it() {
    let server = RedisServer::start();
    let rule = ACL_RULE.replace(" +sadd", "");
    assert_ne!(rule, ACL_RULE);
    create_user_with(&server, &rule);
    let url = format!("redis://app:app-secret@127.0.0.1:{}", server.port());
    let p = Producer::connect(&url).await.unwrap();
    p.send("acl.unlisted", &1u32, Duration::from_secs(60))
        .await
        .expect("a send needs no registry");
    p.send("acl.unlisted", &2u32, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(p.counts("acl.unlisted").await.unwrap().delayed, 2);
    let registered: u64 = redis::cmd("SCARD")
        .arg("delayq:registry:topics")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(registered, 0);
}
