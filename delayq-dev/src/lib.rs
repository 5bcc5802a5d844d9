//! The delayq test kit: throwaway `redis-server` processes on free loopback ports, so tests run
//! in parallel against real Redis and can stop, kill, freeze or restart their own server; real
//! consumer processes; a proxy that black-holes connections; and the helpers the integration
//! tests share.
//!
//! ```no_run
//! let server = delayq_dev::RedisServer::start();
//! println!("a private Redis at {}", server.url());
//! // dropped: the process is killed by its pid and its files removed
//! ```

/// The code blocks of the workspace's Markdown pages, compiled as doc tests
/// (`cargo test --workspace --doc`), so an example a reader copies from the README builds.
/// (The guide's chapters are the runtime's rustdoc and are compiled there.)
#[cfg(doctest)]
mod markdown_pages {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../ARCHITECTURE.md")]
    struct Architecture;
    #[doc = include_str!("../../BENCHMARKS.md")]
    struct Benchmarks;
    #[doc = include_str!("../../docs/README.md")]
    struct Docs;
}

mod browser;
mod callgrind;
mod consumer;
mod control;
mod examples;
mod idle;
mod info;
mod payload;
mod proxy;
mod schedule_ledger;
mod server;
mod support;
mod topology;
mod web;

pub use browser::{chromium, dump_dom, screenshot, screenshots_dir, DevTools};
pub use callgrind::CallgrindRedis;
pub use consumer::{
    append_to_ledger, epoch_us, handler_delay, init_process_tracing, read_ledger, ConsumerProcess,
    LeaderTick, LedgerLine, Role, PROC_ROOM,
};
/// A URL with its password hidden, for printing.
pub use delayq_core::protocol::redact_url;
pub use examples::example_binary;
pub use info::{
    command_stats, delay_script_sha, parse_command_calls, slowlog_every_command,
    slowlog_script_calls,
};
pub use payload::{payload, Payload};
pub use proxy::BlackholeProxy;
pub use schedule_ledger::ScheduleTick;
pub use server::{free_port, Persistence, RedisServer, RedisServerBuilder, TlsFiles};
pub use support::{
    assert_registers_no_listener, bucket_width, clear_of_history_writes, drained, envelope,
    farinfo_number, init_tracing, keys, metric_sum, pending_entries, plant_due, producer, redis_ms,
    runtime, runtime_at, score, scrape_metrics, sleep_ms, state, stream_dead_letters,
    stream_runtime, wait_until, Seen,
};
pub use topology::{RedisCluster, RedisSentinels, TestRedis, SENTINEL_MASTER};
pub use web::{get_json, http_agent, post_json, Service};

/// Sends `sig` to process `pid`: the one place the test kit calls kill(2).
pub fn signal_pid(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; callers pass pids of children they started and
    // have not reaped, so the pid cannot belong to another process.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Declares `mod single`, `mod cluster` and `mod sentinel`, each with a test per function
/// named, which runs it on that deployment (`super::name("single")`, …): one suite, run once
/// per deployment, each test's name carrying `single`, `cluster` or `sentinel`.
#[macro_export]
macro_rules! on_each_deployment {
    ($($test:ident),* $(,)?) => {
        mod single { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $test() { super::$test("single").await })* }
        mod cluster { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $test() { super::$test("cluster").await })* }
        mod sentinel { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $test() { super::$test("sentinel").await })* }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_restarts_and_kills_its_own_server() {
        let mut server = RedisServer::builder()
            .persistence(Persistence::AofAlways)
            .start();
        let mut c = server.connection();
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query::<()>(&mut c)
            .unwrap();
        let pid = server.pid().unwrap();
        server.kill9();
        assert!(server.pid().is_none());
        // SAFETY: signal 0 only checks whether the pid exists.
        assert_ne!(
            unsafe { libc::kill(pid as libc::pid_t, 0) },
            0,
            "pid {pid} still alive"
        );
        server.restart();
        let v: String = redis::cmd("GET")
            .arg("k")
            .query(&mut server.connection())
            .unwrap();
        assert_eq!(v, "v", "the AOF brought the key back");
        assert!(server.command_calls().contains_key("get"));
    }

    #[test]
    fn parses_commandstats() {
        let calls = parse_command_calls(
            "# Commandstats\r\ncmdstat_evalsha:calls=3,usec=9,usec_per_call=3.00\r\n",
        );
        assert_eq!(calls["evalsha"], 3);
    }
}
