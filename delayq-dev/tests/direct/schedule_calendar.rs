//! Schedules' calendar against real Redis: a record whose next tick lies before an autumn
//! clock change is produced on past it (the old calendar wrote `next = u64::MAX`, ending the
//! schedule for good); after a long outage the catch-up runs the latest missed tick and counts
//! every one; a pattern that matches no date is refused by `upsert_schedule`.

use std::time::{Duration, SystemTime};

use delayq_core::protocol::{time_to_ms, Produced};
use delayq_dev::{producer, RedisServer};
use delayq_runtime::{CatchUp, Error, Schedule};

fn hset(server: &RedisServer, key: &str, field: &str, value: &str) {
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query(&mut c)
        .unwrap();
}

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<String> {
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut c)
        .unwrap()
}

fn utc_ms(text: &str) -> u64 {
    text.parse::<jiff::Timestamp>().unwrap().as_millisecond() as u64
}

/// `*/15 * * * *` in Berlin whose `next` is 2026-10-25T00:45Z (02:45 CEST, just before the
/// clocks go back): produced with Redis' real time, the schedule goes on; its next tick is in
/// the future, on the quarter hour, and the latest missed tick runs.
#[tokio::test]
async fn a_quarter_hourly_cron_goes_on_past_the_autumn_change() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let spec = Schedule::cron("*/15 * * * *")
        .unwrap()
        .tz("Europe/Berlin")
        .unwrap()
        .catch_up(CatchUp::Last);
    p.upsert_schedule("quarter", spec, "cal.quarter", &1u8)
        .await
        .unwrap();
    let record = "delayq:{cal.quarter}:schedule:quarter";
    hset(
        &server,
        record,
        "next",
        &utc_ms("2026-10-25T00:45:00Z").to_string(),
    );
    let mut state = p.schedule_state("quarter").await.unwrap().unwrap();
    let now = p.redis_now_ms().await.unwrap();
    let produced = p.produce_ticks(&mut state, now, 1_000).await.unwrap();
    let next: u64 = hget(&server, record, "next").unwrap().parse().unwrap();
    println!("produced {produced:?}; next {next} (now {now})");
    assert!(
        next > now && next < now + 16 * 60_000,
        "the schedule stopped or jumped: next = {next}, now = {now}"
    );
    assert_eq!(next % 900_000, 0, "off the quarter hour: {next}");
    let Produced::Ticks { ticks, skipped } = produced else {
        panic!("nothing produced: {produced:?}")
    };
    // The latest missed quarter hour runs (`last`); every other one since 00:45Z is counted.
    let latest = (now - 60_000 - 1) / 900_000 * 900_000; // misfire_after: 60 s by default
    assert_eq!(ticks[0], latest);
    // Quarter hours in [00:45Z, latest]: the repeated hour (01:00-02:00Z) holds none.
    let quarters = (latest - utc_ms("2026-10-25T00:45:00Z")) / 900_000 + 1 - 4;
    assert_eq!(skipped, quarters - 1);
}

/// A per-second schedule down for 200,000 s: `last` runs the tick of the last second before
/// the outage ended, not one from its middle, and `missed` counts all 199,999 others.
#[tokio::test]
async fn after_200000_seconds_down_the_latest_tick_runs_and_every_missed_one_is_counted() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    for (name, catch_up) in [("down-last", CatchUp::Last), ("down-all", CatchUp::All)] {
        let spec = Schedule::cron("* * * * * *").unwrap().catch_up(catch_up);
        let topic = format!("cal.{name}");
        p.upsert_schedule(name, spec, &topic, &1u8).await.unwrap();
        let now = p.redis_now_ms().await.unwrap();
        let down_since = (now / 1_000 - 200_000) * 1_000;
        let record = format!("delayq:{{{topic}}}:schedule:{name}");
        hset(&server, &record, "next", &down_since.to_string());
        let mut state = p.schedule_state(name).await.unwrap().unwrap();
        let now = p.redis_now_ms().await.unwrap();
        let Produced::Ticks { ticks, skipped } =
            p.produce_ticks(&mut state, now, 1_000).await.unwrap()
        else {
            panic!("nothing produced")
        };
        let latest = (now - 60_000 - 1) / 1_000 * 1_000; // misfire_after: 60 s by default
        let missed = (latest - down_since) / 1_000 + 1;
        match catch_up {
            CatchUp::Last => {
                assert_eq!((ticks[0], skipped), (latest, missed - 1), "{name}");
            }
            _ => {
                // The latest 100, oldest first, ending at the last missed second.
                assert_eq!(ticks[0], latest - 99_000, "{name}");
                assert_eq!(ticks[99], latest, "{name}");
                assert_eq!(skipped, missed - 100, "{name}");
            }
        }
        assert!(missed > 199_000, "{missed}");
    }
}

/// 30 February never comes: refused with the field named, before anything is written.
#[tokio::test]
async fn a_pattern_matching_no_date_is_refused() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let err = Schedule::cron("0 0 30 2 *").unwrap_err();
    assert!(
        matches!(&err, Error::InvalidSchedule { field, .. } if field == "cron day of month"),
        "{err}"
    );
    assert!(p.schedules().await.unwrap().is_empty());
    let every = Schedule::every(Duration::from_secs(60)).unwrap();
    let later = SystemTime::now() + Duration::from_secs(3_600);
    let ticks = every.next_ticks(later, 2).unwrap();
    assert_eq!(time_to_ms(ticks[1]) - time_to_ms(ticks[0]), 60_000);
}
