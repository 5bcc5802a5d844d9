//! A schedule upserted in another process has its first tick on time in every runtime: the
//! change is announced over its topic's wake-up channel, not found at the next poll. (A file
//! of its own: an upsert in this process would wake its runtimes without the channel.) And an
//! upsert's answer names the first tick that runs, also one a runtime already wrote ahead.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_dev::{sleep_ms, RedisServer, Seen};
use delayq_runtime::{delay_listener, Runtime, Schedule};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// (due ms, delivered ms) per runtime of `iso.wake`.
static WAKE: Seen<(u64, u64)> = Seen::new();

#[delay_listener(topic = "iso.wake")]
async fn wake_job(msg: delayq_runtime::Message<u8>) {
    WAKE.push((ms(msg.due_at()), now_ms()));
}

/// Run as a child process by the test below (ignored otherwise): upserts the schedule
/// `elsewhere` from a process of its own and prints its first tick's time.
#[tokio::test]
#[ignore = "the child process of a_schedule_upserted_in_another_process_ticks_on_time"]
async fn upsert_from_another_process() {
    let Ok(url) = std::env::var("ISO_UPSERT_URL") else {
        return;
    };
    let p = delayq_core::Producer::connect(&url).await.unwrap();
    let info = p
        .upsert_schedule(
            "elsewhere",
            Schedule::every(Duration::from_secs(1)).unwrap(),
            "iso.wake",
            &7u8,
        )
        .await
        .unwrap();
    println!("UPSERTED next_at={}", ms(info.next_at.unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_upserted_in_another_process_ticks_on_time() {
    let server = RedisServer::start();
    let mut runtimes = Vec::new();
    for _ in 0..2 {
        runtimes.push(
            Runtime::builder()
                .redis_url(server.url())
                .topics(["iso.wake"])
                .spawn()
                .await
                .unwrap(),
        );
    }
    sleep_ms(300).await;
    let started = now_ms();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "upsert_from_another_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("ISO_UPSERT_URL", server.url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let next_at: u64 = stdout
        .lines()
        .find_map(|l| l.split("UPSERTED next_at=").nth(1))
        .unwrap_or_else(|| panic!("no upsert: {stdout}"))
        .trim()
        .parse()
        .unwrap();
    let got = WAKE.wait_for(3, Duration::from_secs(15)).await;
    let due: Vec<u64> = got.iter().map(|g| g.0).collect();
    assert_eq!(
        due,
        [next_at, next_at + 1_000, next_at + 2_000],
        "ticks skipped or late (upserted at +{} ms)",
        next_at - started
    );
    let first_ran = got[0].1;
    assert!(
        first_ran <= next_at + 500,
        "the first tick ran {} ms after its time",
        first_ran.saturating_sub(next_at)
    );
    for rt in runtimes {
        rt.shutdown().await.unwrap();
    }
}

/// The due time (ms) of each tick of `iso.again`.
static AGAIN: Seen<u64> = Seen::new();

#[delay_listener(topic = "iso.again")]
async fn again_job(msg: delayq_runtime::Message<u8>) {
    AGAIN.push(ms(msg.due_at()));
}

/// Runs `topic`'s listener (which pushes each tick's due time to `seen`) in a runtime, upserts
/// schedule `name` every `every` to it, and upserts it again unchanged in four rounds, each
/// `settle` after a tick ran: what each answer said against the first tick due at or after it
/// that then ran, for the rounds where they differ.
async fn unchanged_upserts(
    topic: &str,
    name: &str,
    seen: &'static Seen<u64>,
    every: Duration,
    settle: u64,
) -> Vec<String> {
    let server = RedisServer::start();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics([topic])
        .spawn()
        .await
        .unwrap();
    let p = rt.producer();
    let schedule = || Schedule::every(every).unwrap();
    p.upsert_schedule(name, schedule(), topic, &0u8)
        .await
        .unwrap();
    seen.wait_for(3, Duration::from_secs(10)).await;
    let mut wrong = Vec::new();
    for round in 0..4 {
        // Between two ticks: the next ones are written, ahead of their time.
        sleep_ms(settle).await;
        let asked = now_ms();
        let info = p
            .upsert_schedule(name, schedule(), topic, &0u8)
            .await
            .unwrap();
        let answered = ms(info.next_at.unwrap());
        // A tick due at or after the question has run; then one interval more, for an
        // earlier one still on its way.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !seen.all().iter().any(|due| *due >= asked) && std::time::Instant::now() < deadline {
            sleep_ms(10).await;
        }
        sleep_ms(every.as_millis() as u64).await;
        let next_ran = seen.all().into_iter().filter(|due| *due >= asked).min();
        if next_ran != Some(answered) {
            wrong.push(format!(
                "round {round}: answered +{} ms, the next tick ran for {:?}",
                answered as i64 - asked as i64,
                next_ran.map(|n| n as i64 - asked as i64)
            ));
        }
    }
    rt.shutdown().await.unwrap();
    wrong
}

/// Upserted again unchanged while a runtime runs it, a schedule keeps its grid, and the
/// answer names the first tick that will run: the one the runtime already wrote, about a
/// second ahead of its time, not the record's `next` after it (which the answer named before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_upsert_answers_the_tick_already_written_ahead() {
    let wrong = unchanged_upserts("iso.again", "again", &AGAIN, Duration::from_secs(1), 300).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The due time (ms) of each tick of `iso.fast`.
static FAST: Seen<u64> = Seen::new();

#[delay_listener(topic = "iso.fast")]
async fn fast_job(msg: delayq_runtime::Message<u8>) {
    FAST.push(ms(msg.due_at()));
}

/// The same for an interval shorter than the second the runtime writes ticks ahead: several
/// wait, and the answer is the earliest of them (the review found the latest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_upsert_of_a_fast_schedule_answers_the_earliest_tick_written_ahead() {
    let every = Duration::from_millis(200);
    let wrong = unchanged_upserts("iso.fast", "fast", &FAST, every, 130).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
