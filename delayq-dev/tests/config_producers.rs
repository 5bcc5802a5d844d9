//! Every part that connects reads the runtime's `delayq.toml`: with only `DELAYQ_CONFIG` set
//! (redis_url and namespace `shop` in the file), `Producer::connect_from_env()` and
//! `WaitingRoom::connect_from_env()` meet the runtime in the same Redis and namespace, and a
//! message sent is handled. (API.md's own `main` with its example file sent to `delayq` while
//! the runtime listened in `shop`: the handler never ran.)

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use delayq_dev::{wait_until, RedisServer};
use delayq_runtime::{delay_listener, Producer, RoomConfig, Runtime, WaitingRoom};

static HANDLED: AtomicU32 = AtomicU32::new(0);

#[delay_listener(topic = "cfg.orders")]
async fn orders(_msg: u32) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_rooms_read_the_runtimes_file() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("delayq.toml");
    std::fs::write(
        &file,
        format!("redis_url = \"{}\"\nnamespace = \"shop\"\n", server.url()),
    )
    .unwrap();
    // The only test of this binary: the environment is its own.
    std::env::remove_var("DELAYQ_REDIS_URL");
    std::env::remove_var("DELAYQ_NAMESPACE");
    std::env::set_var("DELAYQ_CONFIG", &file);

    let rt = Runtime::builder().spawn().await.unwrap();
    let p = Producer::connect_from_env().await.unwrap();
    assert_eq!(p.namespace(), "shop");
    p.send("cfg.orders", &7u32, Duration::ZERO).await.unwrap();
    wait_until(Duration::from_secs(5), "the message is handled", || {
        HANDLED.load(Ordering::SeqCst) == 1
    })
    .await;
    let room = WaitingRoom::connect_from_env("concert", RoomConfig::default())
        .await
        .unwrap();
    room.enter().await.unwrap();
    let shop_keys: Vec<String> = redis::cmd("KEYS")
        .arg("shop:*concert*")
        .query(&mut server.connection())
        .unwrap();
    assert!(!shop_keys.is_empty(), "the room is not in namespace shop");
    // Producer::connect(url) takes the namespace from the file too.
    let q = Producer::connect(&server.url()).await.unwrap();
    assert_eq!(q.namespace(), "shop");
    rt.shutdown().await.unwrap();
}
