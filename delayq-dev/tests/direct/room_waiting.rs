//! The waiting room against a test-kit Redis: exact positions in arrival order for 100,000
//! tokens, admission of the earliest, a randomized run from 4 clients checked after every
//! tick, expiry and `complete` in capacity mode, and a runtime ticking a room.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_dev::{producer, sleep_ms, RedisServer};
use delayq_runtime::{RoomConfig, RoomStatus, Runtime, WaitingRoom};

fn line_key(room: &str) -> String {
    format!("delayq:{{room:{room}}}:line")
}

/// The waiting and the admitted tokens of `room`, read from Redis in one MULTI: a token in
/// the line after the last admitted arrival waits; one at or before it is inside.
fn states(server: &RedisServer, room: &str) -> (HashSet<String>, HashSet<String>) {
    let (line, admitted): (Vec<(String, f64)>, Option<f64>) = redis::pipe()
        .atomic()
        .zrange_withscores(line_key(room), 0, -1)
        .get(format!("delayq:{{room:{room}}}:admitted"))
        .query(&mut server.connection())
        .unwrap();
    let upto = admitted.unwrap_or(0.0);
    let (waiting, active): (Vec<_>, Vec<_>) = line.into_iter().partition(|(_, a)| *a > upto);
    let tokens = |v: Vec<(String, f64)>| v.into_iter().map(|(t, _)| t).collect::<HashSet<_>>();
    (tokens(waiting), tokens(active))
}

/// (token, score) of a sorted set, in order.
fn members(server: &RedisServer, key: &str) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut server.connection())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_positions_are_exact_and_in_arrival_order_for_100000_tokens() {
    const TOKENS: usize = 100_000;
    let server = RedisServer::start();
    let p = producer(&server).await;
    let config = RoomConfig::default().admit_per_tick(1_000);
    let room = WaitingRoom::new(&p, "big", config).unwrap();
    // 8 clients enter at once.
    let mut clients = Vec::new();
    for _ in 0..8 {
        let room = room.clone();
        clients.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for _ in 0..TOKENS / 8 {
                mine.push(room.enter().await.unwrap());
            }
            mine
        }));
    }
    let mut entered = HashSet::new();
    for c in clients {
        entered.extend(c.await.unwrap());
    }
    assert_eq!(entered.len(), TOKENS, "tokens are unique");
    let line = members(&server, &line_key("big"));
    assert_eq!(line.len(), TOKENS);
    assert!(
        line.windows(2).all(|w| w[0].1 < w[1].1),
        "arrival numbers strictly increase along the line"
    );
    // Positions through the API: every 50th token, and the ends.
    let sample: Vec<usize> = (0..TOKENS).step_by(50).chain([TOKENS - 1]).collect();
    for &i in &sample {
        match room.status(&line[i].0).await.unwrap() {
            RoomStatus::Waiting {
                position, ahead, ..
            } => {
                assert_eq!(position, i as u64 + 1);
                assert_eq!(ahead, i as u64);
            }
            other => panic!("token {i}: {other:?}"),
        }
    }
    // A tick admits exactly the 1,000 earliest.
    assert_eq!(room.admit().await.unwrap(), 1_000);
    for (i, (token, _)) in line.iter().enumerate().take(1_010) {
        let status = room.status(token).await.unwrap();
        if i < 1_000 {
            assert!(
                matches!(status, RoomStatus::Active { .. }),
                "{i}: {status:?}"
            );
        } else {
            assert!(
                matches!(status, RoomStatus::Waiting { position, .. } if position == i as u64 - 999),
                "{i}: {status:?}"
            );
        }
    }
    // An ETA once a tick has run: 1,000 a tick over about a second or less.
    match room.status(&line[5_000].0).await.unwrap() {
        RoomStatus::Waiting { eta: Some(eta), .. } => {
            assert!(eta <= Duration::from_secs(10), "{eta:?}")
        }
        other => panic!("{other:?}"),
    }
    let counts = room.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.active), (99_000, 1_000));
    // Foreign input: never an error, never a hint whether it exists.
    for bad in [
        "",
        "nope",
        "../../etc",
        &"f".repeat(32),
        &line[0].0.to_uppercase(),
    ] {
        assert_eq!(
            room.status(bad).await.unwrap(),
            RoomStatus::Unknown,
            "{bad}"
        );
        assert!(!room.touch(bad).await.unwrap());
        assert!(!room.leave(bad).await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_randomized_run_from_4_clients_keeps_every_token_in_exactly_one_state() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let config = RoomConfig::default()
        .admit_per_tick(7)
        .capacity(Some(20))
        .waiting_ttl(Duration::from_secs(1))
        .active_ttl(Duration::from_secs(1));
    let room = WaitingRoom::new(&p, "random", config).unwrap();
    let entered = Arc::new(AtomicU64::new(0));
    let removed = Arc::new(AtomicU64::new(0));
    let (mut expired, mut ticks) = (0u64, 0u32);
    let lease = room.lease(Duration::from_secs(5)).unwrap();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        // A round: 4 clients interleave enters, touches, statuses, leaves and completes.
        let mut clients = Vec::new();
        for c in 0..4u64 {
            let (room, entered, removed) = (room.clone(), entered.clone(), removed.clone());
            let known: Vec<String> = members(&server, &line_key("random"))
                .into_iter()
                .map(|(t, _)| t)
                .collect();
            clients.push(tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(c * 7919 + u64::from(ticks));
                for _ in 0..25 {
                    let pick = |rng: &mut fastrand::Rng| -> Option<String> {
                        (!known.is_empty()).then(|| known[rng.usize(..known.len())].clone())
                    };
                    match rng.u8(0..10) {
                        0..=3 => {
                            room.enter().await.unwrap();
                            entered.fetch_add(1, Ordering::SeqCst);
                        }
                        4 | 5 => {
                            if let Some(t) = pick(&mut rng) {
                                room.touch(&t).await.unwrap();
                            }
                        }
                        6 => {
                            if let Some(t) = pick(&mut rng) {
                                room.status(&t).await.unwrap();
                            }
                        }
                        7 | 8 => {
                            if let Some(t) = pick(&mut rng) {
                                if room.leave(&t).await.unwrap() {
                                    removed.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                        }
                        _ => {
                            if let Some(t) = pick(&mut rng) {
                                if room.complete(&t).await.unwrap() {
                                    removed.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                        }
                    }
                }
            }));
        }
        for c in clients {
            c.await.unwrap();
        }
        // The tick, then the check.
        let leadership = lease.try_acquire().await.unwrap().expect("the only ticker");
        let report = room.admit_as(&leadership).await.unwrap().expect("current");
        ticks += 1;
        expired += (report.expired_waiting + report.expired_active) as u64;
        let (waiting, active) = states(&server, "random");
        assert!(
            waiting.is_disjoint(&active),
            "tick {ticks}: a token in both states"
        );
        // Every token entered is waiting, active, or was removed or expired exactly once.
        let accounted =
            waiting.len() as u64 + active.len() as u64 + removed.load(Ordering::SeqCst) + expired;
        assert_eq!(
            accounted,
            entered.load(Ordering::SeqCst),
            "tick {ticks}: a token in neither state (or counted twice)"
        );
        let inside = room.counts().await.unwrap().active;
        assert!(inside <= 20, "tick {ticks}: capacity exceeded: {inside}");
        sleep_ms(fastrand::u64(0..120)).await;
    }
    println!(
        "{ticks} ticks, {} entered, {} left or completed, {expired} expired",
        entered.load(Ordering::SeqCst),
        removed.load(Ordering::SeqCst)
    );
    assert!(expired > 0, "the run exercised expiry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_expiry_and_complete_as_configured() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let config = RoomConfig::default()
        .admit_per_tick(10)
        .capacity(Some(2))
        .waiting_ttl(Duration::from_secs(1))
        .active_ttl(Duration::from_secs(1));
    let room = WaitingRoom::new(&p, "cap", config).unwrap();
    let tokens: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(room.enter().await.unwrap());
        }
        v
    };
    assert_eq!(room.admit().await.unwrap(), 2, "up to the capacity");
    assert_eq!(room.admit().await.unwrap(), 0, "full");
    assert!(room.complete(&tokens[0]).await.unwrap());
    assert_eq!(room.status(&tokens[0]).await.unwrap(), RoomStatus::Unknown);
    assert!(!room.complete(&tokens[0]).await.unwrap(), "completed once");
    assert_eq!(room.admit().await.unwrap(), 1, "complete frees a slot");
    assert!(matches!(
        room.status(&tokens[2]).await.unwrap(),
        RoomStatus::Active { .. }
    ));
    // tokens[3] waits; it is touched, then left untouched past waiting_ttl.
    sleep_ms(600).await;
    assert!(room.touch(&tokens[3]).await.unwrap());
    sleep_ms(600).await;
    assert!(
        matches!(
            room.status(&tokens[3]).await.unwrap(),
            RoomStatus::Waiting { position: 1, .. }
        ),
        "touched 0.6 s ago: still waiting"
    );
    // Admissions expire after active_ttl: tokens[1] and tokens[2].
    assert_eq!(room.status(&tokens[1]).await.unwrap(), RoomStatus::Unknown);
    sleep_ms(700).await;
    assert_eq!(
        room.status(&tokens[3]).await.unwrap(),
        RoomStatus::Unknown,
        "untouched for over waiting_ttl"
    );
    assert_eq!(
        room.admit().await.unwrap(),
        0,
        "the expired waiting token is not admitted"
    );
    let counts = room.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.active), (0, 0));
    // Bad configuration is refused up front.
    let err = WaitingRoom::new(&p, "x", RoomConfig::default().admit_per_tick(0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("admit_per_tick"), "{err}");
    let err = WaitingRoom::new(&p, "bad room", RoomConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid room name"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_room_ticked_by_the_runtime_admits_at_its_rate() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let config = RoomConfig::default()
        .admit_per_tick(3)
        .tick(Duration::from_millis(100));
    let room = WaitingRoom::new(&p, "rt", config).unwrap();
    for _ in 0..100 {
        room.enter().await.unwrap();
    }
    let rt = Runtime::builder()
        .redis_url(server.url())
        .leader_tasks(Vec::<String>::new())
        .waiting_room("rt", config)
        .spawn()
        .await
        .unwrap();
    sleep_ms(1_050).await;
    let active = room.counts().await.unwrap().active;
    rt.shutdown().await.unwrap();
    // About 10 ticks of 3 in a second (the first tick at once).
    assert!((21..=36).contains(&active), "{active} admitted in 1 s");
}

/// More waiting tokens expire at once than a tick's sweep reaches (1,000): the tick still
/// admits none of them, only live tokens, however far down the line they stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_never_admits_an_expired_token_however_many_expire_at_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let config = RoomConfig::default()
        .admit_per_tick(2_000)
        .waiting_ttl(Duration::from_secs(1));
    let room = WaitingRoom::new(&p, "flood", config).unwrap();
    let mut abandoned = Vec::new();
    for _ in 0..1_500 {
        abandoned.push(room.enter().await.unwrap());
    }
    sleep_ms(1_200).await; // every one of them is past waiting_ttl, none touched
    let mut live = Vec::new();
    for _ in 0..10 {
        live.push(room.enter().await.unwrap());
    }
    let admitted = room.admit().await.unwrap();
    let (waiting, active) = states(&server, "flood");
    let abandoned_inside = abandoned.iter().filter(|t| active.contains(*t)).count();
    assert_eq!(
        abandoned_inside, 0,
        "{abandoned_inside} expired tokens admitted in one tick ({admitted} admitted in all)"
    );
    assert_eq!(admitted, 10, "the live tokens are admitted");
    for t in &live {
        assert!(
            matches!(room.status(t).await.unwrap(), RoomStatus::Active { .. }),
            "a live token is inside"
        );
    }
    assert!(waiting.is_empty(), "{} still waiting", waiting.len());
    for t in abandoned.iter().step_by(100) {
        assert_eq!(room.status(t).await.unwrap(), RoomStatus::Unknown);
    }
}
