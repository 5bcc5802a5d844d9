//! No password shows anywhere: a consumer process logging at TRACE (delayq's logs, redis-rs'
//! through the `log` bridge) against a password-protected server — started, handling a
//! message, through a Redis restart (reconnect logs), stopped — and refusing to start on a
//! cluster list and a sentinel URL with a password in every node; in-process, the builder's
//! `Debug`, `RuntimeHandle::config()` and connect errors of every URL form. Every output is
//! searched for the secrets.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use delayq_dev::{free_port, RedisServer};
use delayq_runtime::{delay_listener, Producer, Runtime};

#[delay_listener(topic = "secrets.none")]
async fn none(_msg: u8) {}

const SECRET: &str = "pw-7c1e-SECRET";
const SECRET2: &str = "node2-9ab4-SECRET";

fn consumer_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("delayq-test-consumer")
}

/// Runs the test consumer on `url` at TRACE for `run`, then SIGTERM; its stdout and stderr.
fn consumer_output(url: &str, dir: &Path, run: Duration, during: impl FnOnce()) -> String {
    let out = dir.join("out.log");
    let file = std::fs::File::create(&out).unwrap();
    let mut child = Command::new(consumer_binary())
        .env("DELAYQ_REDIS_URL", url)
        .env("DELAYQ_TEST_LEDGER", dir.join("ledger"))
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    std::thread::sleep(run);
    // A failing step must not leave the consumer running after the test.
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(during)) {
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(panic);
    }
    std::thread::sleep(run);
    delayq_dev::signal_pid(child.id(), libc::SIGTERM);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(out).unwrap()
}

fn assert_hidden(what: &str, text: &str) {
    for secret in [SECRET, SECRET2] {
        assert!(
            !text.contains(secret),
            "{what} shows the password {secret}:\n{}",
            text.lines()
                .filter(|l| l.contains(secret))
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn a_consumer_at_trace_never_prints_the_password() {
    let mut server = RedisServer::builder().config("requirepass", SECRET).start();
    let url = format!("redis://:{SECRET}@127.0.0.1:{}", server.port());
    let dir = tempfile::tempdir().unwrap();
    let text = consumer_output(&url, dir.path(), Duration::from_secs(2), || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let p = Producer::connect(&url).await.unwrap();
            p.send("proc.work", &7u64, Duration::ZERO).await.unwrap();
        });
        std::thread::sleep(Duration::from_millis(500));
        server.stop();
        std::thread::sleep(Duration::from_millis(500));
        server.restart();
    });
    assert!(
        text.contains("delayq runtime starting") && text.contains("redis://:***@"),
        "the start line is missing:\n{text}"
    );
    println!("{} lines logged at TRACE", text.lines().count());
    assert!(
        std::fs::read_to_string(dir.path().join("ledger"))
            .unwrap_or_default()
            .contains("7 1"),
        "the message was not handled:\n{text}"
    );
    assert_hidden("the consumer's log", &text);

    // A cluster list and a sentinel URL (the server is neither): start is refused, loudly.
    let dead = free_port();
    for url in [
        format!(
            "redis://:{SECRET}@127.0.0.1:{},redis://:{SECRET2}@127.0.0.1:{dead}",
            server.port()
        ),
        format!("redis+sentinel://:{SECRET2}@127.0.0.1:{dead},127.0.0.1:{dead}/mymaster"),
        format!("redis://:{SECRET}/{SECRET2}@127.0.0.1:{dead}/0"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let text = consumer_output(&url, dir.path(), Duration::from_millis(1_500), || {});
        assert!(!text.is_empty(), "nothing said about {url}");
        assert_hidden(
            &format!(
                "the log of a start on {}",
                delayq_core::protocol::redact_url(&url)
            ),
            &text,
        );
    }
}

#[tokio::test]
async fn the_builder_the_config_and_connect_errors_never_show_the_password() {
    let server = RedisServer::builder().config("requirepass", SECRET).start();
    let url = format!("redis://app:{SECRET}@127.0.0.1:{}", server.port());
    let dead = free_port();
    for bad in [
        format!("redis://:{SECRET}@127.0.0.1:{dead},redis://:{SECRET2}@127.0.0.1:{dead}"),
        format!("redis://:{SECRET}/{SECRET2}@127.0.0.1:{dead}"),
        format!("redis+sentinel://:{SECRET}@127.0.0.1:{dead}/m"),
        format!("redis+unix:///nowhere/redis.sock?pass={SECRET}"),
        format!("rediss://:{SECRET}@127.0.0.1:{dead}"),
    ] {
        let builder = Runtime::builder().redis_url(&bad);
        assert_hidden("the builder's Debug", &format!("{builder:?}"));
        let err = match Producer::connect(&bad).await {
            Ok(_) => String::new(),
            Err(e) => format!("{e} {e:?}"),
        };
        assert_hidden(&format!("connecting to {bad:?}"), &err);
        let err = match builder.spawn().await {
            Ok(h) => {
                h.shutdown().await.unwrap();
                String::new()
            }
            Err(e) => format!("{e} {e:?}"),
        };
        assert_hidden("a refused start", &err);
    }
    // `ACL SETUSER` so that user `app` exists with the password.
    let mut c = redis::Client::open(format!("redis://:{SECRET}@127.0.0.1:{}", server.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(format!(">{SECRET}"))
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query(&mut c)
        .unwrap();
    let rt = Runtime::builder().redis_url(&url).spawn().await.unwrap();
    assert_hidden("RuntimeHandle::config()", &format!("{:?}", rt.config()));
    rt.shutdown().await.unwrap();
}
