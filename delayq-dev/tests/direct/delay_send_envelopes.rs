//! What a send stores: every option of `SendOptions` lands in the envelope's header as the
//! layout says (prelude.lua), for a message placed hot and one placed far, sent alone and in
//! a batch. `send.lua` builds the envelopes a call's messages share once a call, not through
//! the prelude's `encode`; these check that the two write the same.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_core::protocol::Envelope;
use delayq_core::SendOptions;
use delayq_dev::{producer, RedisServer};
use redis::Commands;

/// The stored record of `id` on topic `t`: its envelope in `msg` (placed hot) or its record
/// in a far bucket.
fn stored(c: &mut redis::Connection, id: &str) -> Vec<u8> {
    if let Some(raw) = c
        .hget::<_, _, Option<Vec<u8>>>("delayq:{t}:msg", id)
        .unwrap()
    {
        return raw;
    }
    let buckets: Vec<String> = c.keys("delayq:{t}:far:*").unwrap();
    buckets
        .iter()
        .find_map(|b| c.hget::<_, _, Option<Vec<u8>>>(b, id).unwrap())
        .unwrap_or_else(|| panic!("{id} stored nowhere"))
}

#[tokio::test]
async fn every_send_option_lands_in_the_stored_envelope_hot_and_far() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    for (place, delay) in [("hot", 5_000u64), ("far", 3_600_000)] {
        let options = |name: &str| {
            SendOptions::new()
                .id(format!("{name}-{place}"))
                .delay(Duration::from_millis(delay))
        };
        let cases = [
            ("plain", options("plain")),
            ("attempts", options("attempts").max_attempts(3)),
            ("dedup", options("dedup").dedup_for(Duration::from_secs(60))),
            ("priority", options("priority").priority(200u8)),
            ("key", options("key").key("customer-7")),
            (
                "all",
                options("all")
                    .max_attempts(9)
                    .dedup_for(Duration::from_secs(2))
                    .priority(3u8)
                    .key("k"),
            ),
        ];
        for (name, opts) in cases {
            p.send_with("t", &format!("{name} payload"), opts)
                .await
                .unwrap();
            let id = format!("{name}-{place}");
            let raw = stored(&mut c, &id);
            if place == "far" && name == "plain" {
                // A fresh message without options is kept far in the short form (far_place.lua).
                assert_eq!(raw[0], b'F', "{id}: {}", String::from_utf8_lossy(&raw));
                continue;
            }
            let e = Envelope::parse(&raw)
                .unwrap_or_else(|why| panic!("{id}: {why}: {}", String::from_utf8_lossy(&raw)));
            let want_attempts = match name {
                "attempts" => 3,
                "all" => 9,
                _ => 0,
            };
            let want_dedup = match name {
                "dedup" => 60_000,
                "all" => 2_000,
                _ => 0,
            };
            let want_priority = match name {
                "priority" => 200,
                "all" => 3,
                _ => 128,
            };
            let want_key = match name {
                "key" => "customer-7",
                "all" => "k",
                _ => "",
            };
            assert_eq!(
                (e.attempt, e.token, e.max_attempts, e.due_ms - e.enqueued_ms),
                (0, 0, want_attempts, delay),
                "{id}"
            );
            assert_eq!(
                (e.dedup_ms, e.priority, e.key.as_str(), e.trace.as_str()),
                (want_dedup, want_priority, want_key, ""),
                "{id}"
            );
            assert_eq!((e.last_error.as_str(), e.dead_reason.as_str()), ("", ""));
            assert_eq!(e.payload, format!("\"{name} payload\"").as_bytes(), "{id}");
            if name == "plain" {
                // Only the fields a message uses: eight, the shortest header.
                let header = format!("1 0 0 0 {} {} 0 0\n", e.enqueued_ms, e.due_ms);
                assert!(raw.starts_with(header.as_bytes()), "{id}");
            }
        }
    }
}

#[tokio::test]
async fn a_send_at_a_time_and_a_batch_of_hot_and_far_store_their_due_times() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    let at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 7_000;
    let at = UNIX_EPOCH + Duration::from_millis(at_ms);
    p.send_with("t", &1, SendOptions::new().id("at").at(at).max_attempts(2))
        .await
        .unwrap();
    let e = Envelope::parse(&stored(&mut c, "at")).unwrap();
    assert_eq!((e.due_ms, e.max_attempts), (at_ms, 2));

    let delays = [0u64, 1_500, 600_000, 90, 7_200_000];
    let items: Vec<_> = delays
        .iter()
        .map(|&ms| (ms, Duration::from_millis(ms)))
        .collect();
    let ids = p.send_batch("t", items).await.unwrap();
    for (id, ms) in ids.iter().zip(delays) {
        let raw = stored(&mut c, id.as_str());
        if raw[0] == b'F' {
            assert!(ms > 120_000, "{ms} ms kept far");
            continue;
        }
        let e = Envelope::parse(&raw).unwrap();
        assert_eq!(e.due_ms - e.enqueued_ms, ms, "{id}");
        assert_eq!(e.payload, ms.to_string().as_bytes());
        let header = format!("1 0 0 0 {} {} 0 0\n", e.enqueued_ms, e.due_ms);
        assert!(raw.starts_with(header.as_bytes()), "{id}");
        let score: f64 = c.zscore("delayq:{t}:delayed", id.as_str()).unwrap();
        assert_eq!(score as u64, e.due_ms, "{id}: scored by its due time");
    }
    // Every message of the batch counted where it waits.
    assert_eq!(p.counts("t").await.unwrap().delayed, 6);
}
