//! Flow control in the CLI. `delayq pause TOPIC` and `delayq resume TOPIC`: the state a
//! producer and every runtime see, an unknown topic refused, and what each says when nothing
//! changes. `delayq stats` shows a topic's rate limit, the dead letters dropped past
//! `dead_max`, and the runs stopped at their `timeout` in the last minute.

use std::time::Duration;

use delayq_core::config::Rate;
use delayq_core::protocol::{queue, Flow, NackOutcome};
use delayq_dev::{producer, RedisServer};

use crate::common::delayq;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_pauses_and_resumes_a_topic() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    p.send("cli.pause", &1u8, Duration::from_secs(60))
        .await
        .unwrap();

    let run = delayq(&url, &["--json", "pause", "cli.pause"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["outcome"], "paused");
    assert!(p.is_paused("cli.pause").await.unwrap());
    let run = delayq(&url, &["--json", "stats", "cli.pause"]);
    assert_eq!(run.json()[0]["paused"], true, "{}", run.stdout);
    let run = delayq(&url, &["stats", "cli.pause"]);
    assert!(run.stdout.contains("cli.pause (paused)"), "{}", run.stdout);
    let run = delayq(&url, &["pause", "cli.pause"]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, "cli.pause: already paused")
    );

    let run = delayq(&url, &["resume", "cli.pause"]);
    assert_eq!(
        (run.code, run.stdout.trim()),
        (0, "cli.pause: resumed"),
        "{}",
        run.stderr
    );
    assert!(!p.is_paused("cli.pause").await.unwrap());
    let run = delayq(&url, &["--json", "stats", "cli.pause"]);
    assert_eq!(run.json()[0]["paused"], false, "{}", run.stdout);
    let run = delayq(&url, &["--json", "resume", "cli.pause"]);
    assert_eq!(run.json()["outcome"], "not_paused");

    let run = delayq(&url, &["pause", "cli.typo"]);
    assert_eq!(run.code, 1, "an unknown topic is refused: {}", run.stdout);
    assert!(!p.is_paused("cli.typo").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_show_the_rate_and_the_dead_letters_dropped() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let q = queue(&p, "cli.flow").unwrap().with_flow(Flow {
        rate: Some(Rate::parse("100/s").unwrap().with_burst(10).unwrap()),
        dead_max: 2,
        ..Flow::default()
    });
    q.announce_flow().await.unwrap();
    for n in 0..3u8 {
        p.send("cli.flow", &n, Duration::ZERO).await.unwrap();
    }
    for c in q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed
    {
        let out = q.nack(&c.id, c.token(), Duration::ZERO, "", 16, Some("test"));
        assert_eq!(out.await.unwrap(), NackOutcome::Dead);
    }

    let run = delayq(&url, &["--json", "stats", "cli.flow"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let s = &run.json()[0];
    assert_eq!(
        (&s["dead"], &s["dead_dropped"], &s["rate"]),
        (&2.into(), &1.into(), &"100/s burst 10".into()),
        "{}",
        run.stdout
    );
    let run = delayq(&url, &["stats", "cli.flow"]);
    assert!(
        run.stdout.contains("cli.flow (100/s burst 10)") && run.stdout.contains("2 (1 dropped)"),
        "{}",
        run.stdout
    );
    // An unlimited queue clears the rate.
    queue(&p, "cli.flow")
        .unwrap()
        .announce_flow()
        .await
        .unwrap();
    let run = delayq(&url, &["--json", "stats", "cli.flow"]);
    assert!(run.json()[0]["rate"].is_null(), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_show_the_runs_stopped_at_their_timeout() {
    let server = RedisServer::start();
    let url = server.url();
    let p = producer(&server).await;
    let q = queue(&p, "cli.slow").unwrap();
    for n in 0..3u8 {
        p.send("cli.slow", &n, Duration::ZERO).await.unwrap();
    }
    let claimed = q
        .claim_due(10, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    // Two stopped at their timeout (as the runtime settles them), one failed plainly.
    for (i, c) in claimed.iter().enumerate() {
        let out = if i < 2 {
            q.nack_timed_out(
                &c.id,
                c.token(),
                Duration::from_secs(60),
                "timed out after 1s",
                16,
            )
            .await
        } else {
            q.nack(&c.id, c.token(), Duration::from_secs(60), "boom", 16, None)
                .await
        };
        assert_eq!(out.unwrap(), NackOutcome::Retry);
    }
    let run = delayq(&url, &["--json", "stats", "cli.slow"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let minute = &run.json()[0]["last_minute"];
    assert_eq!(
        (&minute["retry"], &minute["timed_out"]),
        (&3.into(), &2.into()),
        "{}",
        run.stdout
    );
    let run = delayq(&url, &["stats", "cli.slow"]);
    let header = run.stdout.lines().next().unwrap_or_default();
    assert!(header.contains("TIMED OUT/MIN"), "{}", run.stdout);
    let row = crate::common::table_row(&run.stdout, "cli.slow");
    // ... RETRY/MIN, DEAD/MIN, TIMED OUT/MIN
    assert_eq!(row[row.len() - 3..], ["3", "0", "2"], "{}", run.stdout);
}
