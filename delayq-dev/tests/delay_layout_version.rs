//! A namespace holds the version of its key layout (`ns:layout`): a new one is marked with
//! this build's, and a producer, runtime or CLI of another layout refuses it with an error
//! that says so, writing nothing.

use std::time::Duration;

use delayq_dev::{producer, RedisServer};
use delayq_runtime::{delay_listener, Error, Runtime, LAYOUT_VERSION};

#[delay_listener(topic = "layout.jobs")]
async fn jobs(_n: u32) {}

fn layout(server: &RedisServer, namespace: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(format!("{namespace}:layout"))
        .query(&mut server.connection())
        .unwrap()
}

#[tokio::test]
async fn delay_a_new_namespace_is_marked_and_another_layout_is_refused() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    assert_eq!(layout(&server, "delayq"), None);
    p.send("layout.jobs", &1u32, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(layout(&server, "delayq"), Some(LAYOUT_VERSION.to_string()));

    // A namespace written by another layout (a future one, say).
    let _: () = redis::cmd("SET")
        .arg("other:layout")
        .arg("99")
        .query(&mut server.connection())
        .unwrap();
    let foreign = p.clone().with_namespace("other").unwrap();
    let err = foreign
        .send("layout.jobs", &2u32, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LayoutMismatch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("\"other\"")
            && text.contains("layout 99")
            && text.contains(&format!("layout {LAYOUT_VERSION}")),
        "{text}"
    );
    let err = foreign
        .send_batch("layout.jobs", [(3u32, Duration::ZERO)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LayoutMismatch { .. }), "{err}");
    let written: Vec<String> = redis::cmd("KEYS")
        .arg("other:*")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(written, ["other:layout"], "nothing written under it");

    // A namespace of the first layout (one sorted set and one hash per topic, no far
    // buckets) is refused too: this build would not find its far messages there.
    let _: () = redis::cmd("SET")
        .arg("v1:layout")
        .arg("1")
        .query(&mut server.connection())
        .unwrap();
    let v1 = p.clone().with_namespace("v1").unwrap();
    let err = v1
        .send("layout.jobs", &4u32, Duration::from_secs(3600))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LayoutMismatch { ref found, .. } if found == "1"),
        "{err}"
    );

    // The runtime refuses to start on it.
    let err = Runtime::builder()
        .redis_url(server.url())
        .namespace("other")
        .topics(["layout.jobs"])
        .spawn()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LayoutMismatch { .. }), "{err}");

    // The namespace of this layout still works, and a runtime starts on it.
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["layout.jobs"])
        .spawn()
        .await
        .unwrap();
    rt.shutdown().await.unwrap();
}

/// Layout 3 keeps a claim's fence token beside its envelope; an earlier build fences by the
/// envelope alone, so it must not run beside this one. This build reads a namespace of layout 2
/// as it is and marks it 3 (the CLI, which only looks, leaves the mark); an earlier build's
/// check (`layout.lua` of layout 2: it marks a new namespace, else reads) then sees 3.
#[tokio::test]
async fn a_namespace_of_layout_2_is_upgraded_and_an_earlier_build_is_refused() {
    let server = RedisServer::start();
    let _: () = redis::cmd("SET")
        .arg("delayq:layout")
        .arg("2")
        .query(&mut server.connection())
        .unwrap();
    let p = producer(&server).await;
    p.check_layout_read_only().await.unwrap();
    assert_eq!(
        layout(&server, "delayq").as_deref(),
        Some("2"),
        "a look writes nothing"
    );
    p.send("layout.jobs", &1u32, Duration::ZERO).await.unwrap();
    assert_eq!(layout(&server, "delayq"), Some(LAYOUT_VERSION.to_string()));
    assert_eq!(LAYOUT_VERSION, 3);
    // What an earlier build's check runs, and what it compares with.
    let earlier = redis::Script::new(
        "local held = redis.call('GET', KEYS[1]) \
         if not held then redis.call('SET', KEYS[1], ARGV[1]) return ARGV[1] end return held",
    );
    let held: String = earlier
        .key("delayq:layout")
        .arg(2)
        .invoke(&mut server.connection())
        .unwrap();
    assert_ne!(held, "2", "an earlier build would run beside this one");
}
