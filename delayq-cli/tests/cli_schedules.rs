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
