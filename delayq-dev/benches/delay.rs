//! The delay queue's benchmarks. Starts its own redis-server (no persistence) on this machine,
//! runs each workload 3 times, prints medians with min–max, and writes JSON.
//!
//!     cargo bench --bench delay                 # every workload
//!     cargo bench --bench delay -- drain precision --runs 5 --json bench-results/drain.json
//!
//! Workloads (payload ≈ 100-byte JSON), named for what they measure, with the ids BENCHMARKS.md
//! uses (accepted too): keep_up (W1), send (WS: what keep-up's sends cost, no consumer), drain
//! (W1D), idle (W2), memory (W3), precision (W4),
//! batching (WB: how many messages the drain's script calls carry), backlog_drain (W5),
//! operator (WO: what `peek` and `stats` cost Redis per call with
//! 1,000,000 messages in one far bucket), flow (WF: the drain of c200 with a rate above its
//! throughput, interleaved with c200 unlimited; the rate a 2000/s topic holds; and, with one
//! hot key of 10,000 at 5/s per key, the other keys' lateness).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_dev::{
    command_stats, delay_script_sha, payload, slowlog_every_command, slowlog_script_calls, Payload,
    TestRedis,
};
use delayq_runtime::{delay_listener, Message, Producer, Runtime, RuntimeHandle, SendOptions};

/// Handler starts: (lateness in µs against the due time, when).
static STARTS: Mutex<Vec<(i64, Instant)>> = Mutex::new(Vec::new());

fn record(due_at: SystemTime) {
    let now = SystemTime::now();
    let late = match now.duration_since(due_at) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    };
    STARTS.lock().unwrap().push((late, Instant::now()));
}

#[delay_listener(topic = "bench.c50", concurrency = 50)]
async fn bench_c50(msg: Message<Payload>) {
    record(msg.due_at());
}

#[delay_listener(topic = "bench.c200", concurrency = 200)]
async fn bench_c200(msg: Message<Payload>) {
    record(msg.due_at());
}

/// c200 with a rate far above what one process drains: what the limiter itself costs.
#[delay_listener(topic = "bench.c200.rate", concurrency = 200, rate = "1000000/s")]
async fn bench_c200_rate(msg: Message<Payload>) {
    record(msg.due_at());
}

/// A topic held at 2000/s (burst 200).
#[delay_listener(topic = "bench.rated", concurrency = 50, rate = "2000/s")]
async fn bench_rated(msg: Message<Payload>) {
    record(msg.due_at());
}

/// Handler starts of the per-key workload: (key is the hot one, lateness µs, when).
static KEY_STARTS: Mutex<Vec<(bool, i64, Instant)>> = Mutex::new(Vec::new());

/// Each key at 5/s: one hot key with a backlog, and the others.
#[delay_listener(topic = "bench.perkey", concurrency = 64, rate_per_key = "5/s")]
async fn bench_perkey(msg: Message<(bool, u64)>) {
    let late = match SystemTime::now().duration_since(msg.due_at()) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    };
    KEY_STARTS
        .lock()
        .unwrap()
        .push((msg.payload().0, late, Instant::now()));
}

delayq_dev::idle_listeners!(
    IDLE_TOPICS:
    idle0 = "bench.idle.0",
    idle1 = "bench.idle.1",
    idle2 = "bench.idle.2",
    idle3 = "bench.idle.3",
    idle4 = "bench.idle.4",
    idle5 = "bench.idle.5",
    idle6 = "bench.idle.6",
    idle7 = "bench.idle.7",
    idle8 = "bench.idle.8",
    idle9 = "bench.idle.9"
);

type Metrics = BTreeMap<String, f64>;

/// W5: how long to wait between building the backlog and the drain (BENCH_SETTLE_MS, default
/// 0), to tell Redis' incremental rehashing after a bulk insert from the steady state.
fn settle() -> Duration {
    let ms = std::env::var("BENCH_SETTLE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_millis(ms)
}

struct Bench {
    redis: TestRedis,
    producer: Producer,
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64
}

/// An `INFO` field, summed over the deployment's primaries.
fn info_field(redis: &TestRedis, section: &str, field: &str) -> f64 {
    redis
        .data_nodes()
        .into_iter()
        .map(|server| {
            let info: String = redis::cmd("INFO")
                .arg(section)
                .query(&mut server.connection())
                .expect("INFO");
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:")))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        })
        .sum()
}

/// EVALSHA calls and the microseconds Redis spent in them (scripts' inner commands included),
/// summed over the primaries.
fn script_stats(redis: &TestRedis) -> (f64, f64) {
    let (mut calls, mut usec) = (0.0, 0.0);
    for server in redis.data_nodes() {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut server.connection())
            .expect("INFO commandstats");
        let (c, u) = command_stats(&info, "evalsha");
        calls += c;
        usec += u;
    }
    (calls, usec)
}

/// CPU time (user + system, every thread) this process has used, µs.
fn process_cpu_us() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

impl Bench {
    fn flush(&self) {
        for server in self.redis.data_nodes() {
            redis::cmd("FLUSHALL")
                .query::<()>(&mut server.connection())
                .expect("FLUSHALL");
        }
        STARTS.lock().unwrap().clear();
    }

    async fn runtime(&self, topics: &[&str]) -> RuntimeHandle {
        Runtime::builder()
            .redis_url(self.redis.url())
            .topics(topics.iter().copied())
            .spawn()
            .await
            .expect("spawn the runtime")
    }

    async fn wait_handled(&self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while STARTS.lock().unwrap().len() < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} handled in {limit:?}",
                STARTS.lock().unwrap().len()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn send_spread(&self, topic: &str, n: u64, spread_ms: u64, batch: usize) -> f64 {
        let mut rng = fastrand::Rng::with_seed(n ^ spread_ms);
        let started = Instant::now();
        let mut sent = 0u64;
        while sent < n {
            let take = (n - sent).min(batch as u64);
            let items: Vec<_> = (sent..sent + take)
                .map(|i| {
                    let delay = if spread_ms == 0 {
                        0
                    } else {
                        rng.u64(0..=spread_ms)
                    };
                    (payload(i), Duration::from_millis(delay))
                })
                .collect();
            self.producer
                .send_batch(topic, items)
                .await
                .expect("send_batch");
            sent += take;
        }
        n as f64 / started.elapsed().as_secs_f64()
    }

    /// W1: 50,000 messages due uniformly over 5 s, sent in batches of 1,000 while the
    /// runtime runs.
    async fn w1(&self, topic: &str) -> Metrics {
        self.flush();
        let rt = self.runtime(&[topic]).await;
        let first_send = Instant::now();
        let send_rate = self.send_spread(topic, 50_000, 5_000, 1_000).await;
        self.wait_handled(50_000, Duration::from_secs(120)).await;
        let starts = std::mem::take(&mut *STARTS.lock().unwrap());
        rt.shutdown().await.expect("shutdown");
        let last = starts.iter().map(|s| s.1).max().unwrap();
        let mut late: Vec<i64> = starts.iter().map(|s| s.0).collect();
        late.sort_unstable();
        let mut m = Metrics::new();
        m.insert("send_msgs_per_s".into(), send_rate);
        m.insert("lateness_p50_ms".into(), percentile(&late, 0.5) / 1000.0);
        m.insert("lateness_p90_ms".into(), percentile(&late, 0.9) / 1000.0);
        m.insert("lateness_p99_ms".into(), percentile(&late, 0.99) / 1000.0);
        m.insert(
            "lateness_max_ms".into(),
            *late.last().unwrap() as f64 / 1000.0,
        );
        // due_at has millisecond resolution: "early" means a start before the due millisecond.
        m.insert(
            "early".into(),
            late.iter().filter(|l| **l < -1000).count() as f64,
        );
        m.insert(
            "end_to_end_msgs_per_s".into(),
            50_000.0 / last.duration_since(first_send).as_secs_f64(),
        );
        m
    }

    /// WS: what sending costs, no consumer running: 50,000 messages due over 5 s (keep-up's
    /// sends) in batches of `batch`.
    async fn send(&self, batch: usize) -> Metrics {
        self.flush();
        self.redis.reset_stats();
        let cpu_before = process_cpu_us();
        let rate = self.send_spread("bench.c50", 50_000, 5_000, batch).await;
        let client_cpu_us = process_cpu_us() - cpu_before;
        let (script_calls, script_usec) = script_stats(&self.redis);
        let mut m = Metrics::new();
        m.insert("send_msgs_per_s".into(), rate);
        m.insert("script_calls_per_msg".into(), script_calls / 50_000.0);
        m.insert("redis_usec_per_msg".into(), script_usec / 50_000.0);
        m.insert("client_cpu_us_per_msg".into(), client_cpu_us / 50_000.0);
        m
    }

    /// W1D (and W5 with a backlog): 50,000 messages already due before the runtime starts.
    async fn drain(&self, topic: &str, backlog: u64) -> Metrics {
        self.flush();
        if backlog > 0 {
            let mut rng = fastrand::Rng::with_seed(backlog);
            let mut sent = 0;
            while sent < backlog {
                let take = (backlog - sent).min(10_000);
                let items: Vec<_> = (0..take)
                    .map(|i| (payload(i), Duration::from_secs(3600 + rng.u64(0..86_400))))
                    .collect();
                self.producer
                    .send_batch(topic, items)
                    .await
                    .expect("backlog");
                sent += take;
            }
            tokio::time::sleep(settle()).await;
        }
        self.send_spread(topic, 50_000, 0, 10_000).await;
        self.redis.reset_stats();
        let cpu_before = process_cpu_us();
        let rt = self.runtime(&[topic]).await;
        self.wait_handled(50_000, Duration::from_secs(300)).await;
        let client_cpu_us = process_cpu_us() - cpu_before;
        let starts = std::mem::take(&mut *STARTS.lock().unwrap());
        let (script_calls, script_usec) = script_stats(&self.redis);
        rt.shutdown().await.expect("shutdown");
        let first = starts.iter().map(|s| s.1).min().unwrap();
        let last = starts.iter().map(|s| s.1).max().unwrap();
        let wall = last.duration_since(first).as_secs_f64();
        let mut m = Metrics::new();
        m.insert("drain_msgs_per_s".into(), 50_000.0 / wall);
        // Where the time goes: script calls per message and Redis' own busy share.
        m.insert("script_calls_per_msg".into(), script_calls / 50_000.0);
        m.insert("redis_usec_per_msg".into(), script_usec / 50_000.0);
        m.insert("redis_busy_share".into(), script_usec / 1e6 / wall);
        // The client's side: CPU (user + system, all threads) of this process per message.
        m.insert("client_cpu_us_per_msg".into(), client_cpu_us / 50_000.0);
        m
    }

    /// WB: how full the drain's script calls are. Redis' slow log records every command (with
    /// its first 31 arguments), so each claim and ack call is told by its script's sha; a
    /// claim's messages are those it asks for (all are due) and the acks riding on it. Not a
    /// speed: the slow log costs Redis time.
    async fn batching(&self, topic: &str) -> Metrics {
        self.flush();
        self.send_spread(topic, 50_000, 0, 10_000).await;
        let server = &self.redis.data_nodes()[0];
        let mut c = server.connection();
        let (claim, ack) = (delay_script_sha("claim_due"), delay_script_sha("ack"));
        slowlog_every_command(&mut c, 400_000);
        let rt = self.runtime(&[topic]).await;
        self.wait_handled(50_000, Duration::from_secs(300)).await;
        rt.shutdown().await.expect("shutdown");
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-log-slower-than")
            .arg(10_000)
            .query(&mut c)
            .expect("slow log off");
        let calls = slowlog_script_calls(&mut c);
        STARTS.lock().unwrap().clear();
        // (claims, acks, calls carrying one message, messages in all)
        let (mut claims, mut acks, mut single, mut carried) = (0.0, 0.0, 0.0, 0.0);
        for args in calls {
            let arg = |i: usize| args.get(i).map_or("", String::as_str);
            let keys: usize = arg(1).parse().unwrap_or(0);
            let argv = |n: usize| arg(1 + keys + n).parse::<f64>().unwrap_or(0.0);
            let messages = if arg(0) == claim {
                claims += 1.0;
                argv(3) + argv(7) // asked, and the acks riding on it
            } else if arg(0) == ack {
                acks += 1.0;
                argv(3)
            } else {
                continue;
            };
            carried += messages;
            if messages <= 1.0 {
                single += 1.0;
            }
        }
        let mut m = Metrics::new();
        m.insert("claim_calls_per_msg".into(), claims / 50_000.0);
        m.insert("ack_calls_per_msg".into(), acks / 50_000.0);
        m.insert("single_message_call_share".into(), single / (claims + acks));
        m.insert("messages_per_call".into(), carried / (claims + acks));
        m
    }

    /// WF: 10,000 due on a topic limited to 2000/s: the rate it held and its busiest second.
    async fn rated(&self) -> Metrics {
        self.flush();
        self.send_spread("bench.rated", 10_000, 0, 10_000).await;
        let rt = self.runtime(&["bench.rated"]).await;
        self.wait_handled(10_000, Duration::from_secs(60)).await;
        rt.shutdown().await.expect("shutdown");
        let mut at: Vec<Instant> = STARTS.lock().unwrap().iter().map(|s| s.1).collect();
        at.sort_unstable();
        let wall = at[at.len() - 1].duration_since(at[0]).as_secs_f64();
        let (mut busiest, mut j) = (0, 0);
        for i in 0..at.len() {
            while at[i].duration_since(at[j]) >= Duration::from_secs(1) {
                j += 1;
            }
            busiest = busiest.max(i + 1 - j);
        }
        let mut m = Metrics::new();
        m.insert("held_msgs_per_s".into(), (at.len() - 1) as f64 / wall);
        m.insert("busiest_second".into(), busiest as f64);
        m
    }

    /// WF, per key: 10,000 due for one hot key at 5/s per key, then 100 other keys sending 5
    /// messages each over 5 s (each key once a second): the other keys' lateness and the hot
    /// key's rate.
    async fn per_key(&self) -> Metrics {
        self.flush();
        KEY_STARTS.lock().unwrap().clear();
        let t = "bench.perkey";
        for chunk in (0..10_000u64).collect::<Vec<_>>().chunks(500) {
            let sends = chunk.iter().map(|&i| async move {
                let opts = SendOptions::new().key("hot");
                self.producer.send_with(t, &(true, i), opts).await
            });
            for r in futures_util::future::join_all(sends).await {
                r.expect("send");
            }
        }
        let rt = self.runtime(&[t]).await;
        let started = Instant::now();
        for round in 0..5u64 {
            for k in 0..100u64 {
                let opts = SendOptions::new()
                    .key(format!("key-{k}"))
                    .delay(Duration::from_millis(50));
                self.producer
                    .send_with(t, &(false, round * 100 + k), opts)
                    .await
                    .expect("send");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while KEY_STARTS.lock().unwrap().iter().filter(|s| !s.0).count() < 500 {
            assert!(
                Instant::now() < deadline,
                "the other keys' messages did not all run"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wall = started.elapsed().as_secs_f64();
        rt.shutdown().await.expect("shutdown");
        let starts = std::mem::take(&mut *KEY_STARTS.lock().unwrap());
        let mut late: Vec<i64> = starts.iter().filter(|s| !s.0).map(|s| s.1).collect();
        late.sort_unstable();
        let hot = starts.iter().filter(|s| s.0).count();
        let mut m = Metrics::new();
        m.insert(
            "other_keys_late_p50_ms".into(),
            percentile(&late, 0.5) / 1000.0,
        );
        m.insert(
            "other_keys_late_p99_ms".into(),
            percentile(&late, 0.99) / 1000.0,
        );
        m.insert("hot_key_msgs_per_s".into(), hot as f64 / wall);
        m
    }

    /// W2: 10 idle listeners for `secs` (20 s; `idle_5m`: 300 s, a whole cycle of the
    /// history's writes); commands per second the runtime causes (a script's own commands
    /// counted too), and the script calls among them.
    async fn w2(&self, secs: u64) -> Metrics {
        self.flush();
        let rt = self.runtime(IDLE_TOPICS).await;
        tokio::time::sleep(Duration::from_secs(1)).await; // start-up claims and sweeps
        let before = info_field(&self.redis, "stats", "total_commands_processed");
        let (scripts_before, _) = script_stats(&self.redis);
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let (scripts_after, _) = script_stats(&self.redis);
        let after = info_field(&self.redis, "stats", "total_commands_processed");
        rt.shutdown().await.expect("shutdown");
        // The first INFO and the two INFO commandstats are counted in `after`.
        let caused = after - before - 3.0;
        let mut m = Metrics::new();
        m.insert("commands_per_s".into(), caused / secs as f64);
        m.insert(
            "script_calls_per_s".into(),
            (scripts_after - scripts_before) / secs as f64,
        );
        m
    }

    /// The latency of 1,000 sends one after another, with `replicas(n)` (WAIT) or without.
    async fn replica_wait(&self, replicas: u32) -> Metrics {
        self.flush();
        let mut micros = Vec::with_capacity(1_000);
        for i in 0..1_000u64 {
            let options = SendOptions::new()
                .delay(Duration::from_secs(3600))
                .replicas(replicas);
            let sent = Instant::now();
            self.producer
                .send_with("bench.replicas", &payload(i), options)
                .await
                .expect("send");
            micros.push(sent.elapsed().as_micros() as i64);
        }
        micros.sort_unstable();
        let mut m = Metrics::new();
        m.insert("send_p50_ms".into(), percentile(&micros, 0.5) / 1000.0);
        m.insert("send_p99_ms".into(), percentile(&micros, 0.99) / 1000.0);
        m
    }

    /// W3: Redis memory per pending message, 100,000 messages due in an hour.
    async fn w3(&self) -> Metrics {
        self.flush();
        let before = info_field(&self.redis, "memory", "used_memory");
        let items = (0..100_000).map(|i| (payload(i), Duration::from_secs(3600)));
        let items: Vec<_> = items.collect();
        for chunk in items.chunks(10_000) {
            let chunk: Vec<_> = chunk.iter().map(|(p, d)| (p, *d)).collect();
            self.producer
                .send_batch("bench.memory", chunk)
                .await
                .expect("send");
        }
        // Redis shrinks a client's query buffer (the last 10,000-message call, ~1.3 MB) only
        // once the client has been idle a while: wait, so that the data alone is measured.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = info_field(&self.redis, "memory", "used_memory");
        if std::env::var_os("BENCH_DETAIL").is_some() {
            for server in self.redis.data_nodes() {
                let mut c = server.connection();
                let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
                for k in keys {
                    let usage: Option<u64> = redis::cmd("MEMORY")
                        .arg("USAGE")
                        .arg(&k)
                        .arg("SAMPLES")
                        .arg(0)
                        .query(&mut c)
                        .unwrap();
                    println!("    {k}: {usage:?} bytes");
                }
            }
        }
        let mut m = Metrics::new();
        m.insert("bytes_per_message".into(), (after - before) / 100_000.0);
        m.insert(
            "payload_bytes".into(),
            serde_json::to_vec(&payload(0)).unwrap().len() as f64,
        );
        m
    }

    /// WO: 1,000,000 messages in one far bucket; `peek 0..3` and `stats` as the CLI and the
    /// dashboard call them: Redis µs per call (mean and longest, from the slow log with every
    /// call logged) and calls per look.
    async fn operator(&self) -> Metrics {
        self.flush();
        let topic = "bench.operator";
        let width = 60_000u64;
        let now = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        // Due within seconds of the middle of one bucket two hours ahead.
        let target = (now() / width + 120) * width + width / 2;
        let body = payload(0);
        for _ in 0..100 {
            let delay = Duration::from_millis(target - now());
            let chunk = (0..10_000).map(|_| (&body, delay));
            self.producer.send_batch(topic, chunk).await.expect("send");
        }
        let node = &self.redis.data_nodes()[0];
        let mut c = node.connection();
        let mut m = Metrics::new();
        for (name, look) in [("peek", 0), ("stats", 1)] {
            let _: () = redis::cmd("CONFIG")
                .arg(&[
                    "SET",
                    "slowlog-log-slower-than",
                    "0",
                    "slowlog-max-len",
                    "100000",
                ])
                .query(&mut c)
                .unwrap();
            let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
            let started = Instant::now();
            if look == 0 {
                let shown = self.producer.peek(topic, 0..3).await.expect("peek");
                assert_eq!(shown.len(), 3);
            } else {
                self.producer.topic_stats(topic).await.expect("stats");
            }
            let wall = started.elapsed();
            let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
                .arg(&["GET", "100000"])
                .query(&mut c)
                .unwrap();
            let _: () = redis::cmd("CONFIG")
                .arg(&["SET", "slowlog-log-slower-than", "10000"])
                .query(&mut c)
                .unwrap();
            // Each entry: [id, time, µs, [command, args..], ..]; the RESET itself is left out.
            let micros: Vec<u64> = log
                .iter()
                .filter_map(|e| match e {
                    redis::Value::Array(f) => {
                        let us: u64 = redis::from_redis_value(f.get(2)?.clone()).ok()?;
                        let cmd: Vec<String> = redis::from_redis_value(f.get(3)?.clone()).ok()?;
                        (!cmd.first()?.eq_ignore_ascii_case("slowlog")).then_some(us)
                    }
                    _ => None,
                })
                .collect();
            let calls = micros.len().max(1) as f64;
            m.insert(format!("{name}_calls"), micros.len() as f64);
            m.insert(
                format!("{name}_redis_us_per_call"),
                micros.iter().sum::<u64>() as f64 / calls,
            );
            m.insert(
                format!("{name}_redis_us_longest_call"),
                micros.iter().copied().max().unwrap_or(0) as f64,
            );
            m.insert(format!("{name}_wall_ms"), wall.as_secs_f64() * 1000.0);
        }
        m
    }

    /// W4: one message with a 1,000 ms delay on an idle runtime, 20 times.
    async fn w4(&self) -> Metrics {
        self.flush();
        let rt = self.runtime(&["bench.c50"]).await;
        for i in 0..20 {
            self.producer
                .send("bench.c50", &payload(i), Duration::from_millis(1000))
                .await
                .expect("send");
            self.wait_handled(i as usize + 1, Duration::from_secs(10))
                .await;
        }
        let starts = std::mem::take(&mut *STARTS.lock().unwrap());
        rt.shutdown().await.expect("shutdown");
        let mut late: Vec<i64> = starts.iter().map(|s| s.0).collect();
        late.sort_unstable();
        let mut m = Metrics::new();
        m.insert("lateness_p50_ms".into(), percentile(&late, 0.5) / 1000.0);
        m.insert(
            "lateness_max_ms".into(),
            *late.last().unwrap() as f64 / 1000.0,
        );
        m
    }
}

fn summarize(runs: &[Metrics]) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for key in runs[0].keys() {
        let mut v: Vec<f64> = runs.iter().map(|r| r[key]).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        out.insert(
            key.clone(),
            serde_json::json!({ "median": v[v.len() / 2], "min": v[0], "max": v[v.len() - 1], "runs": v }),
        );
    }
    out
}

fn print_row(name: &str, summary: &BTreeMap<String, serde_json::Value>) {
    println!("{name}");
    for (metric, v) in summary {
        println!(
            "    {metric:<24} {:>12.2}   ({:.2} – {:.2})",
            v["median"].as_f64().unwrap(),
            v["min"].as_f64().unwrap(),
            v["max"].as_f64().unwrap()
        );
    }
}

/// Each workload's name and the id BENCHMARKS.md gives it.
const WORKLOADS: [(&str, &str); 12] = [
    ("keep_up", "w1"),
    ("send", "ws"),
    ("drain", "w1d"),
    ("batching", "wb"),
    ("idle", "w2"),
    ("idle_5m", "w2_5m"),
    ("memory", "w3"),
    ("precision", "w4"),
    ("backlog_drain", "w5"),
    ("replica_wait", "wr"),
    ("operator", "wo"),
    ("flow", "wf"),
];

/// A workload's name, given its name or its id; exits with the list on anything else.
fn canonical(given: &str) -> &'static str {
    WORKLOADS
        .iter()
        .find(|(name, id)| given == *name || given.eq_ignore_ascii_case(id))
        .map(|(name, _)| *name)
        .unwrap_or_else(|| {
            let names: Vec<String> = WORKLOADS
                .iter()
                .map(|(name, id)| format!("{name} ({id})"))
                .collect();
            eprintln!(
                "unknown workload {given:?}; use one of: {}, or all",
                names.join(", ")
            );
            std::process::exit(2)
        })
}

#[tokio::main]
async fn main() {
    // `cargo bench` adds `--bench`; it means nothing here.
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut runs = 3;
    let mut json_path = "bench-results/bench.json".to_string();
    let mut deployment = "single".to_string();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--runs" => {
                runs = args
                    .get(i + 1)
                    .and_then(|v| v.parse().ok())
                    .expect("--runs N");
                args.drain(i..i + 2);
            }
            "--json" => {
                json_path = args.get(i + 1).cloned().expect("--json PATH");
                args.drain(i..i + 2);
            }
            "--deployment" => {
                deployment = args
                    .get(i + 1)
                    .cloned()
                    .expect("--deployment single|cluster|sentinel");
                args.drain(i..i + 2);
            }
            _ => i += 1,
        }
    }
    if args.is_empty() || args.iter().any(|a| a == "all") {
        // All but idle_5m, which takes 5 minutes a run: named on its own.
        args = WORKLOADS
            .iter()
            .filter(|(name, _)| *name != "idle_5m")
            .map(|(name, _)| name.to_string())
            .collect();
    }
    // Names checked before Redis starts: `canonical` exits on a bad one, and an exit does not
    // stop the redis-server (the kit stops it on drop).
    for workload in &args {
        canonical(workload);
    }
    let redis = TestRedis::start(&deployment);
    let producer = Producer::connect(&redis.url()).await.expect("connect");
    let bench = Bench { redis, producer };
    let version: String = redis::cmd("INFO")
        .arg("server")
        .query::<String>(&mut bench.redis.data_nodes()[0].connection())
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:").map(str::to_string))
        .unwrap_or_default();
    println!(
        "delayq bench: Redis {version} ({deployment}), {} cores, {runs} runs per workload; median (min – max)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let mut report = BTreeMap::new();
    for workload in &args {
        let cases: Vec<(String, Vec<Metrics>)> = match canonical(workload) {
            "keep_up" => {
                let mut cases = Vec::new();
                for topic in ["bench.c50", "bench.c200"] {
                    let mut r = Vec::new();
                    for _ in 0..runs {
                        r.push(bench.w1(topic).await);
                    }
                    cases.push((
                        format!("keep_up (W1), {}", topic.trim_start_matches("bench.")),
                        r,
                    ));
                }
                cases
            }
            "drain" => {
                let mut cases = Vec::new();
                for topic in ["bench.c50", "bench.c200"] {
                    let mut r = Vec::new();
                    for _ in 0..runs {
                        r.push(bench.drain(topic, 0).await);
                    }
                    cases.push((
                        format!("drain (W1D), {}", topic.trim_start_matches("bench.")),
                        r,
                    ));
                }
                cases
            }
            "batching" => {
                let mut cases = Vec::new();
                for topic in ["bench.c50", "bench.c200"] {
                    let mut r = Vec::new();
                    for _ in 0..runs {
                        r.push(bench.batching(topic).await);
                    }
                    cases.push((
                        format!("batching (WB), {}", topic.trim_start_matches("bench.")),
                        r,
                    ));
                }
                cases
            }
            "send" => {
                let mut r = Vec::new();
                for _ in 0..runs {
                    r.push(bench.send(1_000).await);
                }
                vec![("send (WS), batches of 1,000".to_string(), r)]
            }
            "idle" => {
                let mut r = Vec::new();
                for _ in 0..runs {
                    r.push(bench.w2(20).await);
                }
                vec![("idle (W2), 10 listeners".to_string(), r)]
            }
            "idle_5m" => {
                let mut r = Vec::new();
                for _ in 0..runs {
                    r.push(bench.w2(300).await);
                }
                vec![("idle (W2), 10 listeners, 5 minutes".to_string(), r)]
            }
            "memory" => {
                let mut r = Vec::new();
                for _ in 0..runs {
                    r.push(bench.w3().await);
                }
                vec![("memory (W3), 100k pending".to_string(), r)]
            }
            "precision" => {
                let mut r = Vec::new();
                for _ in 0..runs {
                    r.push(bench.w4().await);
                }
                vec![("precision (W4), 1 s delay x20".to_string(), r)]
            }
            "backlog_drain" => {
                // Interleaved (each run drains once per backlog), so that machine drift
                // touches each alike; the empty backlog is what the others compare with.
                let backlogs = [0u64, 1_000_000, 10_000_000];
                let mut results: Vec<Vec<Metrics>> = vec![Vec::new(); backlogs.len()];
                for _ in 0..runs {
                    for (i, backlog) in backlogs.iter().enumerate() {
                        results[i].push(bench.drain("bench.c200", *backlog).await);
                    }
                }
                backlogs
                    .iter()
                    .zip(results)
                    .map(|(backlog, r)| {
                        (
                            format!("backlog_drain (W5), c200, {backlog} pending far ahead"),
                            r,
                        )
                    })
                    .collect()
            }
            "replica_wait" => {
                if matches!(bench.redis, TestRedis::Single(_)) {
                    println!("replica_wait: a single server has no replica; use --deployment cluster or sentinel");
                    Vec::new()
                } else {
                    let mut cases = Vec::new();
                    for replicas in [0, 1] {
                        let mut r = Vec::new();
                        for _ in 0..runs {
                            r.push(bench.replica_wait(replicas).await);
                        }
                        cases.push((format!("replica_wait, send with replicas({replicas})"), r));
                    }
                    cases
                }
            }
            "operator" => {
                let mut r = Vec::new();
                for _ in 0..runs {
                    r.push(bench.operator().await);
                }
                vec![(
                    "operator (WO), peek and stats, 1M in one far bucket".to_string(),
                    r,
                )]
            }
            "flow" => {
                // Interleaved, so that machine drift touches both alike.
                let topics = ["bench.c200", "bench.c200.rate"];
                let mut results: Vec<Vec<Metrics>> = vec![Vec::new(); topics.len() + 2];
                for _ in 0..runs {
                    for (i, topic) in topics.iter().enumerate() {
                        results[i].push(bench.drain(topic, 0).await);
                    }
                    results[2].push(bench.rated().await);
                    results[3].push(bench.per_key().await);
                }
                let names = [
                    "flow (WF), drain c200, no rate",
                    "flow (WF), drain c200, rate 1000000/s",
                    "flow (WF), 10,000 due at rate 2000/s",
                    "flow (WF), hot key 10,000 due at 5/s per key, 100 other keys",
                ];
                names
                    .iter()
                    .zip(results)
                    .map(|(name, r)| (name.to_string(), r))
                    .collect()
            }
            _ => unreachable!("canonical() names only known workloads"),
        };
        for (name, r) in cases {
            let summary = summarize(&r);
            print_row(&name, &summary);
            report.insert(name, summary);
        }
    }
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let doc = serde_json::json!({ "redis_version": version, "runs": runs, "unix_time": stamp, "results": report });
    if let Some(dir) = std::path::Path::new(&json_path).parent() {
        std::fs::create_dir_all(dir).expect("create the JSON directory");
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc).unwrap()).expect("write JSON");
    println!("\nJSON: {json_path}");
}
