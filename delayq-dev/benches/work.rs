//! Redis work per message: the instructions redis-server executes to deliver and acknowledge
//! one message, counted by valgrind's callgrind (a count a busy machine does not change,
//! unlike seconds), for delayq's drain and for a minimal Lua delay queue doing the least a
//! delay queue can, on the same server and the same messages.
//!
//!     cargo bench --bench work                  # c50 and c200, 20,000 messages each
//!     cargo bench --bench work -- --messages 50000
//!     cargo bench --bench work -- --plain       # µs Redis spends, on a plain redis-server
//!     cargo bench --bench work -- send          # only what sending costs
//!     cargo bench --bench work -- flows         # a fan-in flow's work per step, beside a plain message's
//!     DELAYQ_BENCH_CALLS=1 cargo bench --bench work -- --plain flows
//!                                               # the same, with the flow's calls by script (SLOWLOG)
//!
//! Needs valgrind (Debian: `apt-get install -y valgrind`). Redis runs some 50× slower under
//! callgrind, so a drain here claims in larger batches than on a plain server: the report gives
//! delayq's messages per script call beside the count.
//!
//! The minimal queue (`MINIMAL_CLAIM`, `MINIMAL_ACK`): due ids in a sorted set, envelopes in a
//! hash, an in-flight sorted set scored by deadline. A claim is ZRANGEBYSCORE + ZREM + ZADD
//! (+ HMGET of the envelopes it delivers; the last column drops it: ids only, as the issue's
//! reference), an ack ZREM + HDEL. It keeps `concurrency` messages
//! in flight and claims and acks in batches of a fixed size: 13 at c50 and 50 at c200, what
//! the issue that set the bound measured delayq doing on a plain server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use delayq_dev::{command_stats, payload, CallgrindRedis, Payload, RedisServer};
use delayq_runtime::{delay_listener, Message, Producer, Runtime};

static HANDLED: AtomicU64 = AtomicU64::new(0);

#[delay_listener(topic = "work.c50", concurrency = 50)]
async fn work_c50(msg: Message<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[delay_listener(topic = "work.c200", concurrency = 200)]
async fn work_c200(msg: Message<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[delay_listener(topic = "work.flow", concurrency = 50)]
async fn work_flow(msg: Message<Payload>) {
    std::hint::black_box(msg.payload().order_id);
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

/// A flow of `n` steps into one (a fan-in), started, run and ended by one runtime: Redis work
/// per step, the start's writes and sends included. The steps carry the plain drain's
/// payloads (so the topic's hashes are encoded as the drain's are).
async fn flow_work(server: &mut Target, n: u64) -> f64 {
    redis::cmd("FLUSHALL")
        .query::<()>(&mut server.connection())
        .expect("FLUSHALL");
    let producer = Producer::connect(&server.url()).await.expect("connect");
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["work.flow"])
        .spawn()
        .await
        .expect("spawn the runtime");
    let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let mut flow = delayq_runtime::Flow::new();
    for (i, name) in names.iter().enumerate() {
        flow = flow.step(name, "work.flow", &payload(i as u64));
    }
    let flow = flow.step("last", "work.flow", &payload(n)).after(&names);
    let calls = std::env::var_os("DELAYQ_BENCH_CALLS").is_some();
    if calls {
        for (k, v) in [
            ("slowlog-log-slower-than", "0"),
            ("slowlog-max-len", "1000000"),
        ] {
            redis::cmd("CONFIG")
                .arg("SET")
                .arg(k)
                .arg(v)
                .query::<()>(&mut server.connection())
                .unwrap();
        }
        redis::cmd("SLOWLOG")
            .arg("RESET")
            .query::<()>(&mut server.connection())
            .unwrap();
    }
    server.zero();
    let id = producer.start_flow(flow).await.expect("start the flow");
    let state = producer
        .wait_flow(&id, Duration::from_secs(1800))
        .await
        .expect("wait for the flow");
    assert_eq!(state, Some(delayq_runtime::FlowState::Done));
    let work = server.measure("flows");
    if std::env::var_os("DELAYQ_BENCH_CALLS").is_some() {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut server.connection())
            .expect("INFO commandstats");
        for line in info.lines().filter(|l| l.starts_with("cmdstat_")) {
            println!("{line}");
        }
        let log: Vec<(u64, u64, u64, Vec<String>)> = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query::<Vec<redis::Value>>(&mut server.connection())
            .unwrap()
            .into_iter()
            .filter_map(|e| {
                let redis::Value::Array(f) = e else {
                    return None;
                };
                let n = |i: usize| redis::from_redis_value::<u64>(f.get(i)?.clone()).ok();
                let args: Vec<String> = redis::from_redis_value(f.get(3)?.clone()).ok()?;
                Some((n(0)?, n(1)?, n(2)?, args))
            })
            .collect();
        let mut by: std::collections::BTreeMap<String, (u64, u64, u64)> = Default::default();
        for (_, _, us, args) in &log {
            let name = if args[0].eq_ignore_ascii_case("evalsha") {
                format!(
                    "{} keys={} {}",
                    &args[1][..8],
                    args[2],
                    args.get(3).map_or("", |s| s.as_str())
                )
            } else {
                args[0].clone()
            };
            let e = by.entry(name).or_default();
            e.0 += 1;
            e.1 += us;
            e.2 += args.len() as u64;
        }
        for (name, (n, us, argc)) in by {
            println!(
                "{name}: calls {n}, µs {us}, µs/call {}, args/call {}",
                us / n,
                argc / n
            );
        }
    }
    rt.shutdown().await.expect("shutdown");
    work / (n + 1) as f64
}

/// The minimal claim's move: due ids to the in-flight set with their deadline.
/// KEYS: delayed, inflight, msg. ARGV: now ms, deadline ms, count.
macro_rules! minimal_move {
    () => {
        r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
if #ids == 0 then return {} end
redis.call('ZREM', KEYS[1], unpack(ids))
local scored = {}
for i, id in ipairs(ids) do
  scored[2 * i - 1] = ARGV[2]
  scored[2 * i] = id
end
redis.call('ZADD', KEYS[2], unpack(scored))
"
    };
}

/// The minimal claim: the move, then the envelopes it delivers.
const MINIMAL_CLAIM: &str = concat!(
    minimal_move!(),
    r"local envelopes = redis.call('HMGET', KEYS[3], unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  out[2 * i - 1] = id
  out[2 * i] = envelopes[i]
end
return out
"
);

/// The same claim without reading the envelopes (ids only): the issue's own reference, which
/// delivers no payload.
const MINIMAL_CLAIM_IDS: &str = concat!(
    minimal_move!(),
    r"local out = {}
for i, id in ipairs(ids) do
  out[2 * i - 1] = id
  out[2 * i] = ''
end
return out
"
);

/// KEYS: inflight, msg. ARGV: ids.
const MINIMAL_ACK: &str = r"
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return #ARGV
";

/// The minimal send: each message's envelope into the hash and its id into the due set, one
/// HSET and one ZADD for all the call's messages. KEYS: delayed, msg. ARGV: id, due, envelope
/// for each message.
const MINIMAL_SEND: &str = r"
local h, z = {}, {}
for i = 1, #ARGV, 3 do
  h[#h + 1] = ARGV[i]
  h[#h + 1] = ARGV[i + 2]
  z[#z + 1] = ARGV[i + 1]
  z[#z + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(h))
redis.call('ZADD', KEYS[1], unpack(z))
return #ARGV / 3
";

/// What sending `n` messages due in the next 5 s (keep-up's sends) costs: delayq's
/// `send_batch` in batches of 1,000, and the minimal send in calls of 100 (as many as
/// delayq's script calls carry), the same ids' length and envelopes.
async fn send_work(server: &mut Target, n: u64) -> (Row, Row) {
    let mut conn = server.connection();
    redis::cmd("FLUSHALL")
        .query::<()>(&mut conn)
        .expect("FLUSHALL");
    let producer = Producer::connect(&server.url()).await.expect("connect");
    // Registers the topic and loads the script, outside the count.
    producer
        .send("work.send", &payload(0), Duration::from_secs(5))
        .await
        .expect("send");
    server.zero();
    let mut sent = 0;
    while sent < n {
        let take = (n - sent).min(1_000);
        let items: Vec<_> = (sent..sent + take)
            .map(|i| (payload(i), Duration::from_millis(i * 7919 % 5_000)))
            .collect();
        producer.send_batch("work.send", items).await.expect("send");
        sent += take;
    }
    let ours = Row {
        work_per_msg: server.measure("send") / n as f64,
        msgs_per_call: n as f64 / evalsha(&mut conn).0,
    };
    redis::cmd("FLUSHALL")
        .query::<()>(&mut conn)
        .expect("FLUSHALL");
    let send = redis::Script::new(MINIMAL_SEND);
    let _: u64 = send
        .key("m:delayed")
        .key("m:msg")
        .invoke(&mut conn)
        .unwrap_or(0);
    server.zero();
    let mut calls = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut call = send.prepare_invoke();
        call.key("m:delayed").key("m:msg");
        for &i in chunk {
            let body = serde_json::to_string(&payload(i)).unwrap();
            call.arg(format!("01KMINIMAL{i:016}"))
                .arg(1764194400000 + i * 7919 % 5_000)
                .arg(format!("1 0 0 0 1764194400000 1764194400000 0 0\n{body}"));
        }
        let _: u64 = call.invoke(&mut conn).expect("minimal send");
        calls += 1;
    }
    let minimal = Row {
        work_per_msg: server.measure("minimal-send") / n as f64,
        msgs_per_call: n as f64 / calls as f64,
    };
    (ours, minimal)
}

/// `INFO commandstats`' EVALSHA calls and µs.
fn evalsha(conn: &mut redis::Connection) -> (f64, f64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    command_stats(&info, "evalsha")
}

/// The server measured: under callgrind (instructions), or plain with `--plain` (the µs Redis
/// spent in the script calls, `INFO commandstats`, on this machine as it is).
enum Target {
    Callgrind(CallgrindRedis),
    Plain(RedisServer),
}

impl Target {
    fn url(&self) -> String {
        match self {
            Target::Callgrind(s) => s.url(),
            Target::Plain(s) => s.url(),
        }
    }

    fn connection(&self) -> redis::Connection {
        match self {
            Target::Callgrind(s) => s.connection(),
            Target::Plain(s) => s.connection(),
        }
    }

    /// Starts counting (and resets `INFO commandstats`).
    fn zero(&self) {
        match self {
            Target::Callgrind(s) => s.zero(),
            Target::Plain(s) => redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query::<()>(&mut s.connection())
                .expect("CONFIG RESETSTAT"),
        }
    }

    /// The work since `zero`: instructions, or the script calls' µs.
    fn measure(&mut self, case: &str) -> f64 {
        match self {
            Target::Callgrind(s) => s.instructions(&dump_path(case)) as f64,
            Target::Plain(s) => evalsha(&mut s.connection()).1,
        }
    }
}

struct Row {
    /// Instructions (callgrind) or µs (plain) per message.
    work_per_msg: f64,
    msgs_per_call: f64,
}

/// Where a case's callgrind dump is kept: `callgrind_annotate bench-results/<case>.callgrind`
/// says where the instructions went.
fn dump_path(case: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("bench-results/{case}.callgrind"))
}

/// delayq's drain of `n` due messages by one runtime at the topic's concurrency.
async fn delayq_drain(server: &mut Target, topic: &str, n: u64) -> Row {
    redis::cmd("FLUSHALL")
        .query::<()>(&mut server.connection())
        .expect("FLUSHALL");
    let producer = Producer::connect(&server.url()).await.expect("connect");
    let mut sent = 0;
    while sent < n {
        let take = (n - sent).min(5_000);
        let items: Vec<_> = (sent..sent + take)
            .map(|i| (payload(i), Duration::ZERO))
            .collect();
        producer.send_batch(topic, items).await.expect("send");
        sent += take;
    }
    HANDLED.store(0, Ordering::SeqCst);
    server.zero();
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics([topic])
        .spawn()
        .await
        .expect("spawn the runtime");
    let deadline = Instant::now() + Duration::from_secs(1800);
    while HANDLED.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < deadline, "the drain took over 30 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The last acks land after the last handler starts: wait until nothing is in flight
    // (claims are scored below +inf: the set keeps one member at +inf, see prelude.lua).
    let inflight = format!("delayq:{{{topic}}}:inflight");
    let mut conn = server.connection();
    while redis::cmd("ZCOUNT")
        .arg(&inflight)
        .arg("-inf")
        .arg("(+inf")
        .query::<u64>(&mut conn)
        .expect("ZCOUNT")
        > 0
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let work = server.measure(topic);
    let (calls, _) = evalsha(&mut conn);
    rt.shutdown().await.expect("shutdown");
    Row {
        work_per_msg: work / n as f64,
        msgs_per_call: n as f64 / calls,
    }
}

/// The minimal queue's drain of `n` due messages, `concurrency` in flight, in batches.
fn minimal_drain(
    server: &mut Target,
    n: u64,
    (concurrency, batch): (usize, usize),
    payloads: bool,
) -> Row {
    let mut conn = server.connection();
    redis::cmd("FLUSHALL")
        .query::<()>(&mut conn)
        .expect("FLUSHALL");
    // Envelopes of delayq's size: its header before the same JSON payload.
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            let id = format!("01KMINIMAL{i:016}");
            let body = serde_json::to_string(&payload(i)).unwrap();
            let envelope = format!("1 0 0 0 1764194400000 1764194400000 0 0\n{body}");
            pipe.cmd("HSET")
                .arg("m:msg")
                .arg(&id)
                .arg(envelope)
                .ignore();
            pipe.cmd("ZADD").arg("m:delayed").arg(1).arg(&id).ignore();
        }
        pipe.query::<()>(&mut conn).expect("fill");
    }
    let claim = redis::Script::new(if payloads {
        MINIMAL_CLAIM
    } else {
        MINIMAL_CLAIM_IDS
    });
    let ack = redis::Script::new(MINIMAL_ACK);
    server.zero();
    let mut in_flight: std::collections::VecDeque<String> = Default::default();
    let (mut done, mut calls) = (0u64, 0u64);
    while done < n {
        if in_flight.len() + batch <= concurrency {
            let got: Vec<String> = claim
                .key("m:delayed")
                .key("m:inflight")
                .key("m:msg")
                .arg(2)
                .arg(30_002)
                .arg(batch)
                .invoke(&mut conn)
                .expect("claim");
            calls += 1;
            if !got.is_empty() {
                in_flight.extend(got.chunks(2).map(|p| p[0].clone()));
                continue;
            }
        }
        let take = batch.min(in_flight.len());
        let ids: Vec<String> = in_flight.drain(..take).collect();
        let _: u64 = ack
            .key("m:inflight")
            .key("m:msg")
            .arg(&ids)
            .invoke(&mut conn)
            .expect("ack");
        calls += 1;
        done += take as u64;
    }
    let case = if payloads { "minimal" } else { "minimal-ids" };
    let work = server.measure(&format!("{case}.c{concurrency}"));
    Row {
        work_per_msg: work / n as f64,
        msgs_per_call: n as f64 / calls as f64,
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .iter()
        .position(|a| a == "--messages")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let (mut server, unit) = if args.iter().any(|a| a == "--plain") {
        (Target::Plain(RedisServer::start()), "µs")
    } else {
        (Target::Callgrind(CallgrindRedis::start()), "instr")
    };
    println!(
        "Redis work per message ({}), {n} messages due\n",
        if unit == "µs" {
            "µs Redis spent in the script calls, INFO commandstats"
        } else {
            "callgrind instructions of redis-server"
        }
    );
    println!(
        "{:<6} {:>16} {:>10} {:>17} {:>10} {:>7} {:>18} {:>7}",
        "",
        format!("delayq {unit}/msg"),
        "msgs/call",
        format!("minimal {unit}/msg"),
        "msgs/call",
        "ratio",
        format!("ids only {unit}/msg"),
        "ratio"
    );
    let (ours, minimal) = send_work(&mut server, n).await;
    println!(
        "{:<6} {:>16.2} {:>10.1} {:>17.2} {:>10.1} {:>6.2}×",
        "send",
        ours.work_per_msg,
        ours.msgs_per_call,
        minimal.work_per_msg,
        minimal.msgs_per_call,
        ours.work_per_msg / minimal.work_per_msg,
    );
    if args.iter().any(|a| a == "send") {
        return;
    }
    if args.iter().any(|a| a == "flows") {
        let plain = delayq_drain(&mut server, "work.c50", n).await;
        let per_step = flow_work(&mut server, n).await;
        let message = ours.work_per_msg + plain.work_per_msg;
        println!(
            "\nflow of {n} steps into one: {per_step:.0} {unit}/step; a plain message's send + drain (c50): {message:.0} {unit} ({:.1} messages a drain call); ratio {:.2}×",
            plain.msgs_per_call,
            per_step / message
        );
        return;
    }
    for (topic, concurrency, batch) in [("work.c50", 50, 13), ("work.c200", 200, 50)] {
        let ours = delayq_drain(&mut server, topic, n).await;
        let minimal = minimal_drain(&mut server, n, (concurrency, batch), true);
        let ids_only = minimal_drain(&mut server, n, (concurrency, batch), false);
        println!(
            "c{:<5} {:>16.2} {:>10.1} {:>17.2} {:>10.1} {:>6.2}× {:>18.2} {:>6.2}×",
            concurrency,
            ours.work_per_msg,
            ours.msgs_per_call,
            minimal.work_per_msg,
            minimal.msgs_per_call,
            ours.work_per_msg / minimal.work_per_msg,
            ids_only.work_per_msg,
            ours.work_per_msg / ids_only.work_per_msg
        );
    }
}
