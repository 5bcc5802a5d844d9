//! `delayq schedules` and `delayq schedules remove NAME`, as an operator runs them: a table and
//! `--json`, an unreadable record as an error row (never a failed view, never raw escapes),
//! and exit 1 for a schedule that is not there.

use std::time::Duration;

use delayq_dev::{producer, RedisServer};
use delayq_runtime::{CatchUp, Schedule};

mod common;
use common::delayq;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_and_removes_schedules() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    p.upsert_schedule(
        "nightly",
        Schedule::cron("0 3 * * *")
            .unwrap()
            .tz("Europe/Berlin")
            .unwrap(),
        "cli.jobs",
        &serde_json::json!({"job": "nightly"}),
    )
    .await
    .unwrap();
    p.upsert_schedule(
        "pulse",
        Schedule::every(Duration::from_secs(2))
            .unwrap()
            .catch_up(CatchUp::None),
        "cli.jobs",
        &1u8,
    )
    .await
    .unwrap();

    let run = delayq(&url, &["schedules"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for text in [
        "SCHEDULE",
        "nightly",
        "0 3 * * *",
        "Europe/Berlin",
        "pulse",
        "every 2s",
        "none",
    ] {
        assert!(
            run.stdout.contains(text),
            "{text:?} missing:\n{}",
            run.stdout
        );
    }
    let run = delayq(&url, &["--json", "schedules"]);
    assert_eq!(run.code, 0);
    let all = run.json();
    assert_eq!(all[0]["schedule"], "nightly");
    assert_eq!(all[0]["spec"], "0 3 * * *");
    assert_eq!(all[0]["tz"], "Europe/Berlin");
    assert_eq!(all[0]["topic"], "cli.jobs");
    assert_eq!(all[0]["last_outcome"], serde_json::Value::Null);
    assert!(all[0]["next_at_ms"].as_u64().unwrap() > 0);
    assert_eq!(all[1]["schedule"], "pulse");
    assert_eq!(all[1]["catch_up"], "none");

    // A record someone broke by hand, under a name with a terminal escape in it.
    let mut c = server.connection();
    let _: () = redis::cmd("HSET")
        .arg("delayq:registry:{schedules}")
        .arg("bad\x1b[2Jname")
        .arg("cli.jobs")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("delayq:registry:{schedules}")
        .arg("broken")
        .arg("cli.jobs")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("delayq:{cli.jobs}:schedule:broken")
        .arg("kind")
        .arg("sometimes")
        .query(&mut c)
        .unwrap();
    let run = delayq(&url, &["schedules"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.contains('\x1b'),
        "a raw escape reached the terminal"
    );
    assert!(
        run.stdout.contains("broken") && run.stdout.contains("cannot read"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("nightly"), "{}", run.stdout);
    assert!(run.stderr.contains("could not be read"), "{}", run.stderr);
    let run = delayq(&url, &["--json", "schedules"]);
    let names: Vec<String> = run
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["schedule"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["bad\x1b[2Jname", "broken", "nightly", "pulse"]);

    let run = delayq(&url, &["schedules", "remove", "pulse"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("removed schedule pulse"));
    let run = delayq(&url, &["schedules", "remove", "pulse"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("no schedule \"pulse\""),
        "{}",
        run.stderr
    );
    let run = delayq(&url, &["--json", "schedules"]);
    assert_eq!(run.json().as_array().unwrap().len(), 3);
}

/// Writes `n` idle schedule records (every hour, next tick in an hour) on `topic` and their
/// index entries by hand, in pipelines: quicker than `n` upserts.
fn idle_records(server: &RedisServer, topic: &str, n: usize, next_ms: u64) {
    let mut c = server.connection();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            let name = format!("idle-{i:05}");
            pipe.cmd("HSET")
                .arg(format!("delayq:{{{topic}}}:schedule:{name}"))
                .arg(&[
                    ("kind", "every".to_string()),
                    ("spec", "3600000".to_string()),
                    ("tz", "UTC".to_string()),
                    ("catch_up", "last".to_string()),
                    ("owner", "dynamic".to_string()),
                    ("topic", topic.to_string()),
                    ("payload", "1".to_string()),
                    ("next", next_ms.to_string()),
                    ("anchor", next_ms.to_string()),
                    ("missed", "0".to_string()),
                ])
                .ignore();
            pipe.cmd("HSET")
                .arg("delayq:registry:{schedules}")
                .arg(&name)
                .arg(topic)
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
}

fn redis_ms(server: &RedisServer) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut server.connection()).unwrap();
    s * 1_000 + us / 1_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_ten_thousand_schedules_in_a_few_round_trips() {
    let server = RedisServer::start();
    let url = server.url();
    // Registers the topic and marks the namespace.
    producer(&server)
        .await
        .upsert_schedule(
            "first",
            Schedule::every(Duration::from_secs(3_600)).unwrap(),
            "cli.many",
            &1u8,
        )
        .await
        .unwrap();
    idle_records(&server, "cli.many", 10_000, redis_ms(&server) + 3_600_000);
    server.reset_stats();
    let started = std::time::Instant::now();
    let run = delayq(&url, &["--json", "schedules"]);
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json().as_array().unwrap().len(), 10_001);
    let calls: u64 = server
        .command_calls()
        .into_iter()
        .filter(|(name, _)| name != "info" && !name.starts_with("config"))
        .map(|(_, n)| n)
        .sum();
    eprintln!("delayq schedules: 10,001 schedules in {took:?}, {calls} Redis commands");
    // A bound on work, not on time (a timing bound flakes on a shared machine; a release
    // build answers in about 0.2 s, the bound asked for is 1 s): one read per schedule, in
    // pipelines, plus a handful for the index and connection. Reading each schedule in three
    // round trips, one after another, as the CLI once did, costs three commands per schedule.
    assert!(
        calls <= 10_001 + 100,
        "{calls} commands for 10,001 schedules"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_shows_a_stalled_schedule() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    // Nobody listens on cli.nobody: its ticks are never produced.
    p.upsert_schedule(
        "orphan",
        Schedule::every(Duration::from_secs(1)).unwrap(),
        "cli.nobody",
        &1u8,
    )
    .await
    .unwrap();
    p.upsert_schedule(
        "fresh",
        Schedule::every(Duration::from_secs(1)).unwrap(),
        "cli.nobody",
        &1u8,
    )
    .await
    .unwrap();
    // Two minutes on (as Redis' clock would be): its next tick is far behind.
    let _: () = redis::cmd("HSET")
        .arg("delayq:{cli.nobody}:schedule:orphan")
        .arg("next")
        .arg(redis_ms(&server) - 120_000)
        .query(&mut server.connection())
        .unwrap();
    let run = delayq(&url, &["--json", "schedules"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all = run.json();
    assert_eq!(all[0]["schedule"], "fresh");
    assert_eq!(all[0]["stalled"], false);
    assert_eq!(all[1]["schedule"], "orphan");
    assert_eq!(all[1]["stalled"], true);
    let run = delayq(&url, &["schedules"]);
    let orphan = run.stdout.lines().find(|l| l.contains("orphan")).unwrap();
    assert!(orphan.contains("stalled"), "{}", run.stdout);
    let fresh = run.stdout.lines().find(|l| l.contains("fresh")).unwrap();
    assert!(!fresh.contains("stalled"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_refuses_to_remove_a_code_schedule_without_force() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    // A #[scheduled] fn's schedule comes back at the next start: refused without --force.
    p.upsert_code_schedule(
        "cli.code",
        &Schedule::every(Duration::from_secs(60)).unwrap(),
    )
    .await
    .unwrap();
    let run = delayq(&url, &["schedules", "remove", "cli.code"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("#[scheduled]"), "{}", run.stderr);
    assert!(run.stderr.contains("--force"), "{}", run.stderr);
    assert!(p.schedule("cli.code").await.unwrap().is_some());
    let run = delayq(&url, &["schedules", "remove", "cli.code", "--force"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("comes back"), "{}", run.stdout);
    assert!(p.schedule("cli.code").await.unwrap().is_none());
}

/// `delayq schedules suspend|resume|run NAME`: what each did in a word, the table showing a
/// suspended schedule as such, the tick run now pending on its topic, and exit 1 for a name
/// that is not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_suspends_resumes_and_runs_a_schedule() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    p.upsert_schedule(
        "hourly",
        Schedule::cron("0 * * * *").unwrap(),
        "cli.ctl",
        &serde_json::json!({"job": "hourly"}),
    )
    .await
    .unwrap();
    let run = delayq(&url, &["schedules", "suspend", "hourly"]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, "hourly: suspended"),
        "{}",
        run.stderr
    );
    let run = delayq(&url, &["--json", "schedules", "suspend", "hourly"]);
    assert_eq!(run.json()["outcome"], "already_suspended");
    let run = delayq(&url, &["schedules"]);
    assert!(
        common::table_row(&run.stdout, "hourly").contains(&"suspended".to_string()),
        "{}",
        run.stdout
    );
    let run = delayq(&url, &["--json", "schedules"]);
    assert_eq!(
        (&run.json()[0]["suspended"], &run.json()[0]["next_at_ms"]),
        (&true.into(), &serde_json::Value::Null)
    );

    let run = delayq(&url, &["--json", "schedules", "run", "hourly"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let outcome = run.json()["outcome"].as_str().unwrap().to_string();
    let id = outcome.strip_prefix("ran ").unwrap();
    assert!(id.starts_with("hourly@"), "{outcome}");
    let pending = p.peek("cli.ctl", 0..10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id.as_str(), id);
    assert_eq!(pending[0].payload, br#"{"job":"hourly"}"#);

    let run = delayq(&url, &["schedules", "resume", "hourly"]);
    assert_eq!((run.code, run.stdout.trim()), (0, "hourly: resumed"));
    let run = delayq(&url, &["schedules", "resume", "hourly"]);
    assert_eq!(run.stdout.trim(), "hourly: not suspended");
    let info = p.schedule("hourly").await.unwrap().unwrap();
    assert!(!info.suspended);
    let next = info
        .next_at
        .unwrap()
        .duration_since(std::time::SystemTime::now())
        .unwrap();
    assert!(next <= Duration::from_secs(3_600), "{next:?}");

    for action in ["suspend", "resume", "run"] {
        let run = delayq(&url, &["schedules", action, "nope"]);
        assert_eq!(run.code, 1, "{action}: {}", run.stdout);
        assert!(
            run.stderr.contains("no schedule \"nope\""),
            "{}",
            run.stderr
        );
    }
}
