//! The examples a newcomer runs first, run as they would run them (against a test-kit Redis
//! through DELAYQ_REDIS_URL), with what they print checked.

use std::process::Command;
use std::time::Duration;

use delayq_dev::RedisServer;

/// Runs `cargo`'s build of example `name` (built alongside the tests) and returns its stdout;
/// panics unless it exits successfully.
fn run_example(name: &str, server: &RedisServer) -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("examples");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built; run `cargo test --workspace`",
        path.display()
    );
    let out = Command::new(&path)
        .env("DELAYQ_REDIS_URL", server.url())
        .env("RUST_LOG", "error")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", path.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} exited with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!("--- {name} ---\n{stdout}");
    stdout
}

#[test]
fn quickstart_delivers_three_reminders_on_time() {
    let server = RedisServer::start();
    let out = run_example("quickstart", &server);
    // Check the lateness it measured, not its verdict: each reminder is handled within a
    // second of its due time (and the example itself exits 1 on an early one).
    let late_ms: Vec<u64> = out
        .lines()
        .filter(|l| l.starts_with("arrived:"))
        .map(|l| {
            let after = l.split("handled ").nth(1).expect("handled N ms");
            after
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .expect("a number of ms")
        })
        .collect();
    assert_eq!(late_ms.len(), 3, "{out}");
    assert!(
        late_ms
            .iter()
            .all(|&ms| ms < Duration::from_secs(1).as_millis() as u64),
        "{late_ms:?}"
    );
    assert!(!out.contains("EARLY"), "{out}");
    // They arrive in due order (due in 1, 2 and 3 s, sent in another order).
    let order: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("arrived:"))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(order, ["drink", "check", "stretch"], "{out}");
}

#[test]
fn manual_ack_acks_retries_and_dead_letters() {
    let server = RedisServer::start();
    let out = run_example("manual_ack", &server);
    for n in [2, 4, 6] {
        assert!(
            out.contains(&format!("job {n}: done on attempt 1")),
            "{out}"
        );
    }
    for n in [1, 3] {
        assert!(out.contains(&format!("job {n}: attempt 1 failed")), "{out}");
        assert!(
            out.contains(&format!("job {n}: done on attempt 2")),
            "{out}"
        );
    }
    assert!(out.contains("job 5: cannot be done"), "{out}");
    let dead: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("dead letter"))
        .collect();
    assert_eq!(dead.len(), 1, "{out}");
    assert!(dead[0].contains("job 5 is not allowed") && dead[0].contains("{\"n\":5}"));
}

#[test]
fn order_timeout_closes_only_unpaid_orders() {
    let server = RedisServer::start();
    let out = run_example("order_timeout", &server);
    assert!(out.contains("order 1: not paid in time"), "{out}");
    assert!(out.contains("order 3: not paid in time"), "{out}");
    assert!(!out.contains("order 2: not paid"), "{out}");
    assert!(
        out.contains("order 2: paid, its timeout is cancelled"),
        "{out}"
    );
    assert!(
        out.contains("left in the queue: TopicCounts { delayed: 0, inflight: 0, dead: 0 }"),
        "{out}"
    );
}

#[test]
fn stream_consumer_bills_audits_and_dead_letters_the_unbillable_order() {
    let server = RedisServer::start();
    let out = run_example("stream_consumer", &server);
    for line in [
        "billing order 1 for 1250 cents",
        "billing order 3 for 990 cents",
        "audit: order 1",
        "audit: order 2",
        "audit: order 3",
        "after 2 deliveries: max_deliveries reached; last error: order 2: nothing to bill",
        "leader 1: ",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}

#[test]
fn schedules_prints_the_next_ticks_and_runs_the_heartbeat() {
    let server = RedisServer::start();
    let out = run_example("schedules", &server);
    for line in [
        "daily-report runs next at ",
        " 09:00:00.000 CE",
        "schedule daily-report  0 9 * * *  tz Europe/Berlin",
        "schedule sweep         every 5m",
        "heartbeat 3 from example",
        "3 heartbeats on time",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // Nothing recurring is left behind.
    let mut c = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*schedule*").query(&mut c).unwrap();
    assert!(keys.iter().all(|k| !k.contains(":schedule:")), "{keys:?}");
}

#[test]
fn testing_tests_a_half_hour_timeout_retries_and_a_daily_tick_in_well_under_a_second() {
    let server = RedisServer::start();
    let out = run_example("testing", &server);
    for line in [
        "ok  closes an unpaid order after 30 minutes",
        "ok  dead-letters a payment declined 3 times, 10 minutes apart",
        "ok  runs tomorrow's 09:00 Berlin report",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // Each in well under a second.
    for line in out.lines().filter(|l| l.starts_with("ok ")) {
        let ms: u64 = line
            .rsplit(" in ")
            .next()
            .unwrap()
            .trim_end_matches(" ms")
            .trim()
            .parse()
            .unwrap();
        assert!(ms < 1_000, "{line}");
    }
}

#[test]
fn the_test_kit_says_what_to_install_without_redis() {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("testing");
    let out = Command::new(&path)
        .env("PATH", "/nonexistent")
        .env_remove("DELAYQ_TEST_REDIS_URL")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for says in [
        "no `redis-server` on PATH",
        "DELAYQ_TEST_REDIS_URL",
        "apt-get install redis-server",
    ] {
        assert!(stderr.contains(says), "{says:?} missing: {stderr}");
    }
}
