//! A topic's history (`delayq stats --since`): what processes counted, added up per minute and
//! per hour, with the backlog sampled at each write; shown as sparklines and as JSON; a
//! hand-edited point skipped; a point from a day ago in the same ring slot overwritten, never
//! added to; and what a day of points costs in memory.

use std::time::Duration;

use delayq_core::protocol::{queue, Tally};
use delayq_dev::{keys, producer, RedisServer};

use crate::common::delayq;

fn tally(ok: u64, retry: u64, late_ms: &[u64]) -> Tally {
    let mut t = Tally {
        ok,
        retry,
        ..Tally::default()
    };
    for ms in late_ms {
        t.lateness[Tally::bin(Duration::from_millis(*ms))] += 1;
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_add_up_in_the_minute_and_the_hour() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let t = "cli.hist";
    // A backlog: 3 waiting (one due), 1 in flight.
    for delay in [0, 0, 60, 3_600] {
        p.send(t, &delay, Duration::from_secs(delay)).await.unwrap();
    }
    let q = queue(&p, t).unwrap();
    q.claim_due(1, Duration::from_secs(30)).await.unwrap();
    // Two processes write what they counted.
    q.record_history(&tally(10, 1, &[0, 0, 0, 40]))
        .await
        .unwrap();
    queue(&p, t)
        .unwrap()
        .record_history(&tally(5, 0, &[2_000]))
        .await
        .unwrap();

    let run = delayq(&url, &["--json", "stats", t, "--since", "1h"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let h = &run.json()[0];
    assert_eq!(h["step_s"], 60);
    let points = h["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{h}");
    let m = &points[0];
    assert_eq!(
        (&m["ok"], &m["retry"], &m["started"]),
        (&15.into(), &1.into(), &5.into()),
        "{m}"
    );
    // Of 5 starts: 3 within 1 ms, one within 50 ms, one within 2.5 s.
    assert_eq!(
        (&m["lateness_p50_ms"], &m["lateness_p99_ms"]),
        (&1.into(), &2_500.into()),
        "{m}"
    );
    assert_eq!(
        (&m["delayed"], &m["due"], &m["inflight"]),
        (&3.into(), &1.into(), &1.into()),
        "{m}"
    );

    // The hours hold the same counts.
    let run = delayq(&url, &["--json", "stats", t, "--since", "48h"]);
    let h = &run.json()[0];
    assert_eq!(h["step_s"], 3_600, "{h}");
    assert_eq!(h["points"][0]["ok"], 15, "{h}");

    // For people: a line per series, the last minute's bar the highest.
    let run = delayq(&url, &["stats", t, "--since", "1h"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in\n{}", run.stdout))
            .to_string()
    };
    assert!(
        line("handled/min").contains("█  total 15"),
        "{}",
        run.stdout
    );
    assert!(
        line("lateness p99").contains("last 2s500ms"),
        "{}",
        run.stdout
    );
    assert!(
        line("in flight").contains("last 1, highest 1"),
        "{}",
        run.stdout
    );
    assert_eq!(
        line("handled/min").matches('·').count(),
        59,
        "{}",
        run.stdout
    );

    // Bad windows are usage errors.
    for bad in ["30s", "721h", "1d", "soon"] {
        let run = delayq(&url, &["stats", t, "--since", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
    }
    // A topic nothing wrote says so.
    p.send("cli.quiet", &0, Duration::from_secs(60))
        .await
        .unwrap();
    let run = delayq(&url, &["stats", "cli.quiet", "--since", "1h"]);
    assert!(run.stdout.contains("nothing written"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_or_hand_edited_point_is_never_added_to() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "cli.hist.ring";
    p.send(t, &0, Duration::from_secs(60)).await.unwrap();
    let k = keys(t);
    let q = queue(&p, t).unwrap();
    q.record_history(&tally(1, 0, &[])).await.unwrap();
    let mut c = server.connection();
    let fields: Vec<(String, String)> =
        redis::cmd("HGETALL").arg(&k.history).query(&mut c).unwrap();
    let (slot, point) = fields[0].clone();
    let stamp: u64 = point.split(' ').next().unwrap().parse().unwrap();
    // The same slot a day earlier, with big counts: the next write starts the slot afresh.
    let old = format!(
        "{} 900 900 900 900 9 9 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        stamp - 1_440
    );
    let _: () = redis::cmd("HSET")
        .arg(&k.history)
        .arg(&slot)
        .arg(&old)
        .query(&mut c)
        .unwrap();
    q.record_history(&tally(2, 0, &[])).await.unwrap();
    let h = p
        .topic_history(t, Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(h.points.len(), 1);
    assert_eq!(h.points[0].ok, 2, "{:?}", h.points);
    // A field that does not parse is skipped by readers and replaced by the next write.
    let _: () = redis::cmd("HSET")
        .arg(&k.history)
        .arg(&slot)
        .arg("garbage")
        .query(&mut c)
        .unwrap();
    assert!(p
        .topic_history(t, Duration::from_secs(3_600))
        .await
        .unwrap()
        .points
        .is_empty());
    let run = delayq(&server.url(), &["stats", t, "--since", "1h"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    q.record_history(&tally(3, 0, &[])).await.unwrap();
    let h = p
        .topic_history(t, Duration::from_secs(3_600))
        .await
        .unwrap();
    assert_eq!(h.points[0].ok, 3, "{:?}", h.points);
    // So is a point with another number of fields (a later build's), in the hours too.
    let hours: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(&k.history_hours)
        .query(&mut c)
        .unwrap();
    assert_eq!(hours.len(), 1);
    assert!(hours[0].1.split(' ').nth(1) == Some("6"), "{hours:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_day_and_month_of_points_stay_bounded() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let t = "cli.hist.full";
    let k = keys(t);
    queue(&p, t)
        .unwrap()
        .record_history(&tally(1, 0, &[1]))
        .await
        .unwrap();
    let mut c = server.connection();
    let point: String = redis::cmd("HGET")
        .arg(&k.history)
        .arg(
            redis::cmd("HKEYS")
                .arg(&k.history)
                .query::<Vec<String>>(&mut c)
                .unwrap()[0]
                .clone(),
        )
        .query(&mut c)
        .unwrap();
    let stamp: u64 = point.split(' ').next().unwrap().parse().unwrap();
    // A busy day: every minute with counts in several bins and a backlog in the thousands.
    let mut cmd = redis::cmd("HSET");
    cmd.arg(&k.history);
    for back in 0..1_440u64 {
        let s = stamp - back;
        cmd.arg(s % 1_440).arg(format!(
            "{s} 5400 120 3 1 25000 1200 200 3000 1500 300 200 100 50 20 10 5 2 1 0 0 0 0"
        ));
    }
    let _: () = cmd.query(&mut c).unwrap();
    let mut cmd = redis::cmd("HSET");
    cmd.arg(&k.history_hours);
    for back in 0..720u64 {
        let s = stamp / 60 - back;
        cmd.arg(s % 720).arg(format!(
            "{s} 324000 7200 180 60 25000 1200 200 180000 90000 18000 12000 6000 3000 1200 600 300 120 60 0 0 0 0"
        ));
    }
    let _: () = cmd.query(&mut c).unwrap();
    let mut bytes = |key: &str| -> u64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(&mut c)
            .unwrap()
    };
    let (minutes, hours) = (bytes(&k.history), bytes(&k.history_hours));
    println!(
        "a topic's history: {minutes} bytes for a day of minutes, {hours} for 30 days of hours"
    );
    assert!(minutes + hours < 400_000, "{minutes} + {hours} bytes");
    let h = p
        .topic_history(t, Duration::from_secs(24 * 3_600))
        .await
        .unwrap();
    assert!(
        (1_439..=1_440).contains(&h.points.len()),
        "{}",
        h.points.len()
    );
    let h = p
        .topic_history(t, Duration::from_secs(720 * 3_600))
        .await
        .unwrap();
    assert!((719..=720).contains(&h.points.len()), "{}", h.points.len());
}

/// Without a topic, `--since` shows every history: topics, schedules (their ticks), stream
/// groups (lag and pending for the backlog) and rooms (waiting and inside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_history_is_listed() {
    use delayq_runtime::{RoomConfig, Schedule, WaitingRoom};
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    p.upsert_schedule(
        "cli.nightly",
        Schedule::cron("0 3 * * *").unwrap(),
        "cli.jobs",
        &1,
    )
    .await
    .unwrap();
    let q = queue(&p, "cli.jobs").unwrap();
    q.record_history(&tally(0, 0, &[])).await.unwrap();
    delayq_core::protocol::record_schedule_history(&q, "cli.nightly", &tally(1, 0, &[3_000]))
        .await
        .unwrap();
    p.publish("cli.events", &1).await.unwrap();
    let conn = delayq_core::protocol::RedisConn::connect(&url, delayq_core::UrlOrigin::Default)
        .await
        .unwrap();
    let group = delayq_core::protocol::StreamGroup::new(conn, "cli.events", "audit", "c1").unwrap();
    group.create(true).await.unwrap();
    group.record_history(&tally(7, 0, &[])).await.unwrap();
    let room = WaitingRoom::new(&p, "cli.sale", RoomConfig::fixed(1, 1_000)).unwrap();
    room.enter().await.unwrap();
    room.record_history().await.unwrap();

    let run = delayq(&url, &["--json", "stats", "--since", "1h"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all = run.json();
    let kinds: Vec<(String, String)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["kind"].as_str().unwrap().into(),
                h["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    for want in [
        ("topic", "cli.jobs"),
        ("schedule", "cli.nightly"),
        ("group", "cli.events/audit"),
        ("room", "cli.sale"),
    ] {
        assert!(
            kinds.contains(&(want.0.into(), want.1.into())),
            "{want:?} in {kinds:?}"
        );
    }
    let group = all
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["kind"] == "group")
        .unwrap();
    assert_eq!(
        (&group["points"][0]["ok"], &group["points"][0]["delayed"]),
        (&7.into(), &1.into()),
        "{group}"
    );
    let run = delayq(&url, &["stats", "--since", "1h"]);
    for shown in [
        "schedule cli.nightly:",
        "stream group cli.events/audit:",
        "room cli.sale:",
        "  lag ",
        "  waiting ",
    ] {
        assert!(run.stdout.contains(shown), "{shown:?} in\n{}", run.stdout);
    }
}
