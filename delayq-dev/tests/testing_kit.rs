//! The test kit users test their own listeners with (`delayq_runtime::testing`, feature
//! `testing`): twenty runtimes in parallel in one binary never see each other's messages;
//! `advance` never delivers a message before one due earlier in its topic and keeps the
//! original due times; a manual-ack listener's `Ack` works; retries with a long backoff and a
//! daily schedule pass in well under a second; dropping a runtime leaves no keys.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_dev::Seen;
use delayq_runtime::testing::TestRuntime;
use delayq_runtime::{delay_listener, scheduled, Ack, Message, SendOptions, Tick};

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

static ECHO: Seen<(u32, u32)> = Seen::new();

#[delay_listener(topic = "kit.echo")]
async fn echo(msg: (u32, u32)) {
    ECHO.push(msg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_runtimes_in_parallel_see_only_their_own_messages() {
    let runs = (0..20u32).map(|i| {
        tokio::spawn(async move {
            let t = TestRuntime::builder()
                .topics(["kit.echo"])
                .start()
                .await
                .unwrap();
            for j in 0..25u32 {
                t.producer()
                    .send(
                        "kit.echo",
                        &(i, j),
                        Duration::from_secs(60 * (j as u64 % 5)),
                    )
                    .await
                    .unwrap();
            }
            t.advance(Duration::from_secs(300)).await.unwrap();
            t.run_until_idle().await.unwrap();
            let handled = t.handled("kit.echo").await.unwrap();
            let stats = t.producer().counts("kit.echo").await.unwrap();
            (i, handled.ok, stats, t.namespace().to_string())
        })
    });
    let mut namespaces = std::collections::BTreeSet::new();
    for run in runs {
        let (i, ok, counts, ns) = run.await.unwrap();
        assert_eq!(ok, 25, "runtime {i} handled {ok} in its namespace");
        assert_eq!(counts, Default::default(), "runtime {i}: {counts:?}");
        namespaces.insert(ns);
    }
    assert_eq!(namespaces.len(), 20);
    // (The drop test below sends to kit.echo too, as runtime 99.)
    let mut all: Vec<(u32, u32)> = ECHO.all().into_iter().filter(|(i, _)| *i < 20).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        500,
        "every message handled once, by its own runtime's listener"
    );
}

static ORDER: Seen<(u64, u64)> = Seen::new();

#[delay_listener(topic = "kit.order", concurrency = 1)]
async fn in_order(msg: Message<u64>) {
    ORDER.push((*msg.payload(), ms(msg.due_at())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_delivers_in_due_order_and_keeps_the_due_times() {
    let t = TestRuntime::builder()
        .topics(["kit.order"])
        .start()
        .await
        .unwrap();
    let p = t.producer();
    let sent = ms(SystemTime::now());
    // Minutes out of order, one a day away (a far bucket), one due now.
    let minutes = [37u64, 3, 59, 0, 12, 24 * 60, 44, 1, 30, 7];
    for m in minutes {
        // Ids that sort against due order, so that only the due times can order them.
        let id = format!("order-{}", 9_999 - m);
        let options = SendOptions::new().id(id).delay(Duration::from_secs(60 * m));
        p.send_with("kit.order", &m, options).await.unwrap();
    }
    t.advance(Duration::from_secs(3_600)).await.unwrap();
    t.run_until_idle().await.unwrap();
    let got = ORDER.all();
    let order: Vec<u64> = got.iter().map(|(m, _)| *m).collect();
    assert_eq!(order, [0, 1, 3, 7, 12, 30, 37, 44, 59], "not in due order");
    for (m, due) in &got {
        let expected = sent + m * 60_000;
        assert!(
            due.abs_diff(expected) < 2_000,
            "{m} min: due_at {due}, sent at {sent}"
        );
    }
    assert_eq!(
        t.pending("kit.order").await.unwrap().len(),
        1,
        "the one a day away waits"
    );
    t.advance(Duration::from_secs(24 * 3_600)).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(ORDER.all().last().unwrap().0, 24 * 60);
    assert!(t.pending("kit.order").await.unwrap().is_empty());
}

static MANUAL: Seen<u32> = Seen::new();

#[delay_listener(topic = "kit.manual", ack_timeout = "30s")]
async fn manual(msg: Message<u32>, ack: Ack) {
    MANUAL.push(msg.attempt());
    if msg.attempt() == 1 {
        ack.nack("not yet").await.unwrap();
    } else {
        ack.ack().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_ack_listener_acks_and_nacks_under_the_kit() {
    let t = TestRuntime::builder()
        .topics(["kit.manual"])
        .start()
        .await
        .unwrap();
    t.producer()
        .send("kit.manual", &1u32, Duration::from_secs(600))
        .await
        .unwrap();
    t.advance(Duration::from_secs(600)).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(MANUAL.all(), [1], "nacked once, waiting for its backoff");
    t.advance(Duration::from_secs(60)).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(MANUAL.all(), [1, 2]);
    let handled = t.handled("kit.manual").await.unwrap();
    assert_eq!((handled.ok, handled.retry, handled.dead), (1, 1, 0));
}

#[delay_listener(topic = "kit.fail", max_attempts = 3, backoff = "fixed(10m)")]
async fn always_fails(_msg: u32) -> Result<(), String> {
    Err("card declined".into())
}

static DAILY: Seen<(u64, u32, u64)> = Seen::new();

#[scheduled(name = "kit.daily", cron = "0 9 * * *", tz = "Europe/Berlin")]
async fn daily(tick: Tick) {
    DAILY.push((ms(tick.scheduled_at()), tick.attempt(), tick.missed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_with_a_ten_minute_backoff_and_a_daily_tick_take_under_a_second() {
    let started = Instant::now();
    let started_at = SystemTime::now();
    let t = TestRuntime::builder()
        .topics(["kit.fail"])
        .schedules(["kit.daily"])
        .start()
        .await
        .unwrap();
    t.producer()
        .send("kit.fail", &7u32, Duration::ZERO)
        .await
        .unwrap();
    for _ in 0..3 {
        t.run_until_idle().await.unwrap();
        t.advance(Duration::from_secs(600)).await.unwrap();
    }
    t.run_until_idle().await.unwrap();
    let dead = t.dead_letters("kit.fail").await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].attempts, dead[0].last_error.as_deref()),
        (3, Some("card declined"))
    );
    // A day ahead: the daily tick at 09:00 Berlin runs once, with its nominal time.
    t.advance(Duration::from_secs(24 * 3_600)).await.unwrap();
    t.run_until_idle().await.unwrap();
    let ticks = DAILY.all();
    let times: Vec<u64> = ticks.iter().map(|t| t.0).collect();
    let passed = Duration::from_secs(24 * 3_600 + 1_800);
    assert_eq!(times, nine_in_berlin_within(started_at, passed));
    assert!(ticks.iter().all(|t| (t.1, t.2) == (1, 0)), "{ticks:?}");
    let now = ms(SystemTime::now());
    assert!(
        times.iter().all(|at| *at > now),
        "nominal times, still ahead: {times:?}"
    );
    let elapsed = started.elapsed();
    println!("three attempts 10 min apart and a daily tick in {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_test_runtime_leaves_no_keys() {
    let t = TestRuntime::builder()
        .topics(["kit.echo"])
        .start()
        .await
        .unwrap();
    let ns = t.namespace().to_string();
    let p = t.producer();
    p.send("kit.echo", &(99u32, 0u32), Duration::from_secs(3 * 86_400))
        .await
        .unwrap();
    p.send("kit.echo", &(99u32, 1u32), Duration::ZERO)
        .await
        .unwrap();
    t.run_until_idle().await.unwrap();
    let url = t.redis_url().to_string();
    let count = |url: &str| -> Vec<String> {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        redis::cmd("KEYS")
            .arg(format!("{ns}:*"))
            .query(&mut c)
            .unwrap()
    };
    assert!(
        count(&url).len() > 5,
        "the runtime wrote its keys: {:?}",
        count(&url)
    );
    drop(t);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(count(&url).is_empty(), "keys left: {:?}", count(&url));
}

static SUM: Seen<u64> = Seen::new();

#[delay_listener(topic = "kit.sum")]
async fn summed(msg: u64) {
    SUM.push(msg);
}

static HALVES: Seen<u64> = Seen::new();

#[scheduled(name = "kit.daily.halves", cron = "0 9 * * *", tz = "Europe/Berlin")]
async fn daily_in_halves(tick: Tick) {
    HALVES.push(ms(tick.scheduled_at()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advances_add_up_for_messages_and_ticks() {
    let started = SystemTime::now();
    let t = TestRuntime::builder()
        .topics(["kit.sum"])
        .schedules(["kit.daily.halves"])
        .start()
        .await
        .unwrap();
    t.producer()
        .send("kit.sum", &30u64, Duration::from_secs(30 * 60))
        .await
        .unwrap();
    t.advance(Duration::from_secs(30 * 60 - 2)).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert!(SUM.is_empty(), "ran two seconds early");
    t.advance(Duration::from_secs(2)).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(SUM.all(), [30]);
    // The daily tick, 09:00 Berlin, in two halves of a day (plus the half hour above).
    t.advance(Duration::from_secs(12 * 3_600)).await.unwrap();
    t.advance(Duration::from_secs(12 * 3_600)).await.unwrap();
    t.run_until_idle().await.unwrap();
    let ticks = HALVES.all();
    let expected = nine_in_berlin_within(started, Duration::from_secs(30 * 60 + 24 * 3_600));
    assert_eq!(ticks, expected, "the 09:00 ticks within the time passed");
}

/// The 09:00 Berlin ticks from `from` to `from + passed` (one, or on a daylight-saving day
/// perhaps none or two), as unix ms.
fn nine_in_berlin_within(from: SystemTime, passed: Duration) -> Vec<u64> {
    delayq_runtime::Schedule::cron("0 9 * * *")
        .unwrap()
        .tz("Europe/Berlin")
        .unwrap()
        .next_ticks(from, 3)
        .unwrap()
        .into_iter()
        .filter(|t| *t <= from + passed)
        .map(ms)
        .collect()
}

static BULK: Seen<u64> = Seen::new();

#[delay_listener(topic = "kit.bulk", concurrency = 64)]
async fn bulk(msg: u64) {
    BULK.push(msg);
}

/// `advance` over 100,000 waiting messages (the old script passed the whole set to one
/// `ZADD` with `unpack` and failed from ~5,000 on), and over one due in the year 9000 (the
/// old loop never returned past a hundred years).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_scales_to_100000_waiting_and_to_the_year_9000() {
    let t = TestRuntime::builder()
        .topics(["kit.bulk"])
        .start()
        .await
        .unwrap();
    let p = t.producer();
    let started = Instant::now();
    for batch in 0..20u64 {
        let items = (0..5_000u64).map(|i| {
            let n = batch * 5_000 + i;
            (n, Duration::from_secs(7_200 + n % 3_600))
        });
        p.send_batch("kit.bulk", items).await.unwrap();
    }
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(221_845_392_000); // 9000-01-01
    p.send_at("kit.bulk", &u64::MAX, far).await.unwrap();
    // An hour passes: none is due yet (the earliest waits two hours).
    tokio::time::timeout(
        Duration::from_secs(60),
        t.advance(Duration::from_secs(3_600)),
    )
    .await
    .expect("advance returned")
    .unwrap();
    assert_eq!(t.pending("kit.bulk").await.unwrap().len(), 1_000);
    assert!(BULK.is_empty());
    // 100 s more (and the real seconds this test took): the messages of the first 100 s
    // (~28 a second) are due, none later.
    tokio::time::timeout(
        Duration::from_secs(60),
        t.advance(Duration::from_secs(3_700)),
    )
    .await
    .expect("advance returned")
    .unwrap();
    let real = started.elapsed().as_secs() + 1;
    t.run_until_idle().await.unwrap();
    let handled = BULK.len() as u64;
    assert!(handled >= 2_800, "{handled} handled");
    assert!(
        BULK.all().iter().all(|n| n % 3_600 <= 100 + real),
        "one ran early ({real} s passed)"
    );
}

static FLAKY: Seen<u32> = Seen::new();

#[delay_listener(topic = "kit.flaky")]
async fn flaky(msg: Message<u32>) -> Result<(), String> {
    FLAKY.push(msg.attempt());
    Err("always fails".into())
}

static LED: Seen<u64> = Seen::new();

#[delayq_runtime::leader_task(name = "kit.lead", every = "100ms")]
async fn lead(leader: delayq_runtime::Leadership) -> Result<(), String> {
    LED.push(leader.token());
    Ok(())
}

static STREAMED: Seen<u32> = Seen::new();

#[delayq_runtime::stream_listener(stream = "kit.stream.orders", group = "kit")]
async fn streamed(n: u32) {
    STREAMED.push(n);
}

static UNACKED: Seen<u32> = Seen::new();

#[delay_listener(topic = "kit.unacked", ack_timeout = "1h")]
async fn unacked(msg: Message<u32>, ack: Ack) {
    UNACKED.push(msg.attempt());
    if msg.attempt() > 1 {
        ack.ack().await.unwrap();
    }
    // The first delivery returns without acking: it comes back after its hour.
}

/// Users test what they deploy: an option set for the test (`max_attempts = 1` instead of the
/// attribute's 16), a leader task, a stream listener, and a claim's ack deadline advanced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_leader_tasks_streams_and_ack_deadlines_can_be_tested() {
    let t = TestRuntime::builder()
        .topics(["kit.flaky", "kit.unacked"])
        .leader_tasks(["kit.lead"])
        .streams(["kit.stream.orders"])
        .set(r#"listeners."kit.flaky".max_attempts"#, 1)
        .start()
        .await
        .unwrap();
    let p = t.producer();
    p.send("kit.flaky", &1u32, Duration::ZERO).await.unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(FLAKY.all(), [1], "max_attempts = 1 from the test's set");
    assert_eq!(t.dead_letters("kit.flaky").await.unwrap().len(), 1);

    LED.wait_for(1, Duration::from_secs(5)).await;
    p.publish("kit.stream.orders", &42u32).await.unwrap();
    assert_eq!(STREAMED.wait_for(1, Duration::from_secs(5)).await, [42]);

    p.send("kit.unacked", &7u32, Duration::ZERO).await.unwrap();
    UNACKED.wait_for(1, Duration::from_secs(5)).await;
    // A plain advance leaves the claim's deadline alone; advancing claims redelivers it.
    t.advance(Duration::from_secs(7_200)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(UNACKED.all(), [1]);
    t.advance_with_claims(Duration::from_secs(7_200))
        .await
        .unwrap();
    t.run_until_idle().await.unwrap();
    assert_eq!(UNACKED.all(), [1, 2]);
    t.shutdown().await.unwrap();
}
