//! Schedules' ticks against real Redis at the protocol level (`produce_ticks` as the runtime
//! calls it): a tick a clean shutdown handed back survives a `catch_up = "none"` catch-up; an
//! upsert racing production fences out the old spec; a process whose clock is off by minutes
//! loses no tick; a losing process learns the record's state from the fence's reply, without
//! reading the record again; and a retried tick keeps its nominal time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_core::protocol::{queue, tick_id, Produced};
use delayq_core::{CatchUp, Producer, Schedule};
use delayq_dev::{producer, state, RedisServer, Seen};
use delayq_runtime::{scheduled, Runtime, Tick};

const LEAD: u64 = 1_000;

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

async fn redis_now(p: &Producer) -> u64 {
    p.redis_now_ms().await.unwrap()
}

fn record(topic: &str, name: &str) -> String {
    format!("delayq:{{{topic}}}:schedule:{name}")
}

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut server.connection())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_handed_back_by_a_clean_shutdown_survives_a_catch_up_under_none() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "fence.release";
    let every = Schedule::every(Duration::from_millis(500))
        .unwrap()
        .catch_up(CatchUp::None)
        .misfire_after(Duration::from_secs(1))
        .unwrap();
    p.upsert_schedule("rel", every, topic, &"x").await.unwrap();
    let mut s = p.schedule_state("rel").await.unwrap().unwrap();
    let first = s.next;
    // The first tick written a little ahead, then claimed when due.
    let got = p
        .produce_ticks(&mut s, redis_now(&p).await, LEAD)
        .await
        .unwrap();
    assert!(matches!(got, Produced::Ticks { .. }), "{got:?}");
    tokio::time::sleep(Duration::from_millis(
        first.saturating_sub(redis_now(&p).await) + 20,
    ))
    .await;
    let q = queue(&p, topic).unwrap();
    let batch = q.claim_due(1, Duration::from_secs(30)).await.unwrap();
    let claimed = &batch.claimed[0];
    assert_eq!(claimed.id, tick_id("rel", first));
    // A clean shutdown hands it back (attempt back to 0, due now).
    assert_eq!(
        q.release(&[(claimed.id.clone(), claimed.token())])
            .await
            .unwrap(),
        1
    );
    // No process produces for a while: the next ticks are missed, and the catch-up under
    // `none` removes the ticks written ahead that never ran.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let got = p
        .produce_ticks(&mut s, redis_now(&p).await, LEAD)
        .await
        .unwrap();
    assert!(
        matches!(got, Produced::Ticks { skipped, .. } if skipped > 0),
        "{got:?}"
    );
    assert_eq!(
        state(&server, topic, &claimed.id),
        "delayed",
        "the handed-back tick was deleted"
    );
    let again = q.claim_due(10, Duration::from_secs(30)).await.unwrap();
    assert!(
        again.claimed.iter().any(|d| d.id == claimed.id),
        "the handed-back tick does not run: {:?}",
        again
            .claimed
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_racing_production_fences_out_the_old_spec() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "fence.gen";
    let a = Schedule::every(Duration::from_secs(1)).unwrap();
    p.upsert_schedule("gen", a, topic, &"a").await.unwrap();
    // A runtime reads the schedule under spec A...
    let mut old = p.schedule_state("gen").await.unwrap().unwrap();
    let a_next = old.next;
    // ...then spec B replaces it, whose first tick happens to be A's next (set by hand here:
    // the race needs the two to fall on the same millisecond).
    let b = Schedule::every(Duration::from_secs(7)).unwrap();
    p.upsert_schedule("gen", b, topic, &"b").await.unwrap();
    let key = record(topic, "gen");
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("next")
        .arg(a_next)
        .arg("anchor")
        .arg(a_next)
        .query(&mut server.connection())
        .unwrap();
    // Producing with what it read under A must not write A's ticks nor A's next.
    let got = p.produce_ticks(&mut old, a_next, LEAD).await.unwrap();
    let next: u64 = hget(&server, &key, "next").unwrap().parse().unwrap();
    assert!(
        !matches!(got, Produced::Ticks { .. }),
        "the old spec produced {got:?}; the record's next is now {next} (A's next was {a_next})"
    );
    assert_eq!(next, a_next, "the old spec moved next");
    // A new generation: the caller reads the record again (as runtimes do), then produces B's
    // ticks.
    assert_eq!(got, Produced::Changed);
    let mut old = p.schedule_state("gen").await.unwrap().unwrap();
    let got = p.produce_ticks(&mut old, a_next, LEAD).await.unwrap();
    assert_eq!(
        got,
        Produced::Ticks {
            ticks: vec![a_next],
            skipped: 0
        }
    );
    let next: u64 = hget(&server, &key, "next").unwrap().parse().unwrap();
    assert_eq!(next, a_next + 7_000, "not B's next");
}

/// Produces a `catch_up = "none"` schedule's ticks ahead with the right clock, then calls again
/// with a clock `skew_ms` off; no tick may be lost.
async fn ticks_survive_a_clock_off_by(skew_ms: i64) {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "fence.clock";
    let every = Schedule::every(Duration::from_millis(500))
        .unwrap()
        .catch_up(CatchUp::None)
        .misfire_after(Duration::from_secs(1))
        .unwrap();
    p.upsert_schedule("clock", every, topic, &"x")
        .await
        .unwrap();
    let mut s = p.schedule_state("clock").await.unwrap().unwrap();
    let now = redis_now(&p).await;
    // Three seconds written ahead.
    let got = p.produce_ticks(&mut s, now, 3_000).await.unwrap();
    let Produced::Ticks { ticks: ahead, .. } = got else {
        panic!("{got:?}")
    };
    assert!(ahead.len() >= 5, "{ahead:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let off = redis_now(&p).await.saturating_add_signed(skew_ms);
    let got = p.produce_ticks(&mut s, off, LEAD).await.unwrap();
    if let Produced::Ticks { skipped, .. } = got {
        assert_eq!(
            skipped, 0,
            "ticks counted as missed with the clock {skew_ms} ms off"
        );
    }
    for t in &ahead {
        assert_eq!(
            state(&server, topic, &tick_id("clock", *t)),
            "delayed",
            "tick {t} lost with the clock {skew_ms} ms off (got {got:?})"
        );
    }
    // The schedule did not jump over the ticks the next minutes hold.
    let next: u64 = hget(&server, &record(topic, "clock"), "next")
        .unwrap()
        .parse()
        .unwrap();
    let real = redis_now(&p).await;
    assert!(
        next <= real + 5_000,
        "next is {} s ahead",
        (next - real) / 1_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_ten_minutes_ahead_loses_no_tick() {
    ticks_survive_a_clock_off_by(600_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_ten_minutes_behind_loses_no_tick() {
    ticks_survive_a_clock_off_by(-600_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_slightly_ahead_does_not_skip_a_tick_on_time_by_redis() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "fence.slight";
    let every = Schedule::every(Duration::from_secs(1))
        .unwrap()
        .catch_up(CatchUp::None)
        .misfire_after(Duration::from_secs(1))
        .unwrap();
    p.upsert_schedule("slight", every, topic, &"x")
        .await
        .unwrap();
    // A tick half a second late by Redis' clock: on time (the threshold is a second).
    let now = redis_now(&p).await;
    let due = now - 500;
    let _: () = redis::cmd("HSET")
        .arg(record(topic, "slight"))
        .arg("next")
        .arg(due)
        .arg("anchor")
        .arg(due)
        .query(&mut server.connection())
        .unwrap();
    let mut s = p.schedule_state("slight").await.unwrap().unwrap();
    // A clock 0.8 s ahead would call it 1.3 s late, and `none` would skip it.
    let got = p.produce_ticks(&mut s, now + 800, LEAD).await.unwrap();
    let Produced::Ticks { ticks, skipped } = got else {
        panic!("{got:?}")
    };
    assert_eq!(
        (ticks.first(), skipped),
        (Some(&due), 0),
        "due {due}: {ticks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_losing_process_learns_the_next_tick_without_reading_the_record() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let topic = "fence.race";
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    p.upsert_schedule("race", every, topic, &"x").await.unwrap();
    let mut winner = p.schedule_state("race").await.unwrap().unwrap();
    let mut loser = winner.clone();
    let now = redis_now(&p).await;
    let won = p.produce_ticks(&mut winner, now, LEAD).await.unwrap();
    assert!(matches!(won, Produced::Ticks { .. }), "{won:?}");
    server.reset_stats();
    let lost = p.produce_ticks(&mut loser, now, LEAD).await.unwrap();
    assert_eq!(lost, Produced::Stale);
    assert_eq!(
        loser.next, winner.next,
        "the loser still waits for the tick the winner wrote"
    );
    // Nothing more to do for the loser until the next tick: no call at all.
    assert_eq!(
        p.produce_ticks(&mut loser, now, LEAD).await.unwrap(),
        Produced::NotYet
    );
    let calls = server.command_calls();
    assert_eq!(
        calls.get("hgetall"),
        None,
        "the loser read the record: {calls:?}"
    );
}

static RETRIED: Seen<(u32, u64)> = Seen::new();

#[scheduled(
    name = "fence.retried",
    every = "1s",
    backoff = "fixed(500ms)",
    max_attempts = 3
)]
async fn retried(tick: Tick) -> Result<(), String> {
    RETRIED.push((tick.attempt(), ms(tick.scheduled_at())));
    if tick.attempt() == 1 {
        Err("first attempt fails".into())
    } else {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_tick_keeps_its_nominal_time() {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["fence.retried"])
        .spawn()
        .await
        .unwrap();
    let seen = RETRIED.wait_for(2, Duration::from_secs(10)).await;
    rt.shutdown().await.unwrap();
    let first = seen.iter().find(|(a, _)| *a == 1).unwrap();
    let second = seen.iter().find(|(a, _)| *a == 2).unwrap();
    assert_eq!(
        second.1,
        first.1,
        "attempt 2 says scheduled_at {} ms after attempt 1",
        second.1 as i64 - first.1 as i64
    );
}

#[scheduled(name = "fence.misfire", every = "1h", misfire_after = "90s")]
async fn misfire(_tick: Tick) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misfire_after_comes_from_the_attribute_and_the_configuration() {
    let server = RedisServer::start();
    let threshold = |rt: &delayq_runtime::RuntimeHandle| {
        let p = rt.producer();
        async move {
            p.schedule("fence.misfire")
                .await
                .unwrap()
                .unwrap()
                .misfire_after
        }
    };
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["fence.misfire"])
        .spawn()
        .await
        .unwrap();
    assert_eq!(threshold(&rt).await, Duration::from_secs(90));
    rt.shutdown().await.unwrap();
    // A changed threshold keeps the next tick (it does not move the ticks).
    let before = producer(&server)
        .await
        .schedule("fence.misfire")
        .await
        .unwrap()
        .unwrap()
        .next_at;
    let rt = Runtime::builder()
        .redis_url(server.url())
        .schedules(["fence.misfire"])
        .set("schedules.\"fence.misfire\".misfire_after", "5m")
        .spawn()
        .await
        .unwrap();
    assert_eq!(threshold(&rt).await, Duration::from_secs(300));
    let info = rt
        .producer()
        .schedule("fence.misfire")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.next_at, before);
    rt.shutdown().await.unwrap();
    let refused = Runtime::builder()
        .redis_url(server.url())
        .schedules(["fence.misfire"])
        .set("schedules.\"fence.misfire\".misfire_after", "10ms")
        .spawn()
        .await;
    let Err(err) = refused.map(|_| ()) else {
        panic!("a 10 ms threshold is accepted")
    };
    let err = err.to_string();
    assert!(err.contains("misfire_after"), "{err}");
    // The default, for a dynamic schedule.
    let p = producer(&server).await;
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let info = p
        .upsert_schedule("dyn", every, "fence.dyn", &"x")
        .await
        .unwrap();
    assert_eq!(info.misfire_after, delayq_core::DEFAULT_MISFIRE_AFTER);
}
