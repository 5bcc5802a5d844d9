//! Stream consumers and leader contenders as real processes (`delayq-test-streams`), killed
//! with SIGKILL or frozen with SIGSTOP: nothing is lost, take-overs spread over the survivors,
//! and there is never more than one leader at a time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_dev::{read_ledger, ConsumerProcess, LeaderTick, RedisServer, Role};

const STREAM: &str = "proc.stream";
const GROUP: &str = "g";

/// Creates the group from the start of the stream, then adds `payloads` in pipelines.
fn publish(server: &RedisServer, payloads: std::ops::Range<u64>) {
    let mut c = server.connection();
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(STREAM)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut c);
    let all: Vec<u64> = payloads.collect();
    for chunk in all.chunks(5_000) {
        let mut pipe = redis::pipe();
        for n in chunk {
            pipe.cmd("XADD")
                .arg(STREAM)
                .arg("*")
                .arg("payload")
                .arg(n.to_string())
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
}

/// Pending entries per consumer of the group.
fn pending_by_consumer(server: &RedisServer) -> HashMap<String, u64> {
    let mut c = server.connection();
    let summary: redis::Value = redis::cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .query(&mut c)
        .unwrap();
    let mut out = HashMap::new();
    if let redis::Value::Array(parts) = summary {
        if let Some(redis::Value::Array(consumers)) = parts.get(3) {
            for pair in consumers {
                let (name, n): (String, String) = redis::from_redis_value(pair.clone()).unwrap();
                out.insert(name, n.parse().unwrap());
            }
        }
    }
    out
}

fn wait_for(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn handled(ledger: &Path) -> HashSet<u64> {
    read_ledger(ledger).iter().map(|l| l.payload).collect()
}

#[test]
fn stream_entries_of_a_consumer_killed_mid_entry_are_taken_over_after_min_idle() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    publish(&server, 0..10);
    // A alone: it takes all ten and sits in its 3 s handlers.
    let mut a = ConsumerProcess::start_as(
        Role::Stream,
        &server.url(),
        &ledger,
        3_000,
        &dir.path().join("a.log"),
    );
    wait_for(Duration::from_secs(10), "A to hold all ten", || {
        pending_by_consumer(&server).values().sum::<u64>() == 10
    });
    let b = ConsumerProcess::start_as(
        Role::Stream,
        &server.url(),
        &ledger,
        3_000,
        &dir.path().join("b.log"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let killed_at = Instant::now();
    a.kill9();
    wait_for(Duration::from_secs(20), "all ten handled", || {
        handled(&ledger).len() == 10
    });
    let took = killed_at.elapsed();
    let lines = read_ledger(&ledger);
    assert!(
        lines.iter().all(|l| l.pid == b.pid() && l.attempt == 2),
        "B handled each as its second delivery: {lines:?}"
    );
    println!("taken over and handled {took:?} after the kill (min_idle 2 s, handlers 3 s)");
    assert!(
        took >= Duration::from_secs(3),
        "not before min_idle + handler time: {took:?}"
    );
    wait_for(Duration::from_secs(5), "acked", || {
        pending_by_consumer(&server).values().sum::<u64>() == 0
    });
    b.stop();
}

#[test]
fn stream_with_three_consumers_one_killed_handles_every_entry_and_splits_the_take_over() {
    const ENTRIES: u64 = 30_000;
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    publish(&server, 0..ENTRIES);
    let mut consumers: Vec<ConsumerProcess> = (0..3)
        .map(|i| {
            ConsumerProcess::start_as(
                Role::Stream,
                &server.url(),
                &ledger,
                20,
                &dir.path().join(format!("c{i}.log")),
            )
        })
        .collect();
    wait_for(Duration::from_secs(60), "a third handled", || {
        read_ledger(&ledger).len() as u64 >= ENTRIES / 3
    });
    let mut victim = consumers.remove(0);
    let victim_pid = victim.pid();
    victim.kill9();
    wait_for(Duration::from_secs(120), "every entry handled", || {
        handled(&ledger).len() as u64 == ENTRIES
    });
    wait_for(Duration::from_secs(10), "all acked", || {
        pending_by_consumer(&server).values().sum::<u64>() == 0
    });
    let lines = read_ledger(&ledger);
    let all: HashSet<u64> = lines.iter().map(|l| l.payload).collect();
    assert_eq!(all.len() as u64, ENTRIES, "every entry at least once");
    let mut taken_over: BTreeMap<u32, usize> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.attempt >= 2) {
        *taken_over.entry(l.pid).or_default() += 1;
    }
    let per_pid: BTreeMap<u32, usize> = lines.iter().fold(BTreeMap::new(), |mut m, l| {
        *m.entry(l.pid).or_default() += 1;
        m
    });
    println!(
        "handled per process {per_pid:?} (killed: {victim_pid}); taken over per survivor {taken_over:?}; {} lines for {ENTRIES} entries",
        lines.len()
    );
    assert!(!taken_over.contains_key(&victim_pid));
    for survivor in &consumers {
        assert!(
            taken_over.get(&survivor.pid()).copied().unwrap_or(0) > 0,
            "the take-over spreads over the survivors: {taken_over:?}"
        );
    }
    for c in consumers {
        c.stop();
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Checks a leader ledger: ticks of different tokens never overlap, and a later leader has a
/// greater token.
fn one_leader_at_a_time(ticks: &[LeaderTick]) {
    let mut sorted = ticks.to_vec();
    sorted.sort_by_key(|t| t.start_us);
    for pair in sorted.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(b.token >= a.token, "tokens go back: {a:?} then {b:?}");
        if a.token != b.token {
            assert!(
                a.end_us <= b.start_us,
                "two leaders at once: {a:?} and {b:?}"
            );
        }
    }
}

#[test]
fn leader_task_has_one_leader_at_a_time_and_a_killed_leader_is_replaced_within_the_ttl() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let mut contenders: Vec<ConsumerProcess> = (0..3)
        .map(|i| {
            ConsumerProcess::start_as(
                Role::Leader,
                &server.url(),
                &ledger,
                5,
                &dir.path().join(format!("l{i}.log")),
            )
        })
        .collect();
    wait_for(Duration::from_secs(10), "40 ticks", || {
        LeaderTick::read_all(&ledger).len() >= 40
    });
    let first_leader = LeaderTick::read_all(&ledger).last().unwrap().pid;
    let index = contenders
        .iter()
        .position(|c| c.pid() == first_leader)
        .expect("the leader is one of ours");
    let mut leader = contenders.remove(index);
    leader.kill9();
    let killed_us = now_us();
    wait_for(Duration::from_secs(5), "a new leader", || {
        LeaderTick::read_all(&ledger)
            .iter()
            .any(|t| t.pid != first_leader && t.start_us > killed_us)
    });
    let ticks = LeaderTick::read_all(&ledger);
    let took_over_us = ticks
        .iter()
        .filter(|t| t.pid != first_leader && t.start_us > killed_us)
        .map(|t| t.start_us)
        .min()
        .unwrap();
    let gap = Duration::from_micros(took_over_us - killed_us);
    println!("a new leader ran {gap:?} after the leader was killed (ttl 1 s)");
    assert!(gap <= Duration::from_millis(1_300), "ttl 1 s: {gap:?}");

    // Freeze the new leader past its ttl: a third leads with a greater token, and the frozen
    // one, thawed, starts no run with its stale token.
    std::thread::sleep(Duration::from_millis(500));
    let second_leader = *LeaderTick::read_all(&ledger).last().unwrap();
    let frozen = contenders
        .iter()
        .find(|c| c.pid() == second_leader.pid)
        .unwrap();
    frozen.freeze();
    let frozen_us = now_us();
    std::thread::sleep(Duration::from_millis(2_000));
    frozen.thaw();
    let thawed_us = now_us();
    std::thread::sleep(Duration::from_millis(1_000));
    let ticks = LeaderTick::read_all(&ledger);
    let third = ticks
        .iter()
        .find(|t| t.start_us > frozen_us && t.pid != second_leader.pid)
        .expect("another leads while the leader is frozen");
    assert!(
        third.token > second_leader.token,
        "the stale leader's token is lower"
    );
    assert!(
        !ticks
            .iter()
            .any(|t| t.token == second_leader.token && t.start_us > thawed_us),
        "a thawed stale leader starts no run"
    );
    // Never two at once, but for a run the freeze caught half-way: it ends after its lease
    // lapsed, under its lower token (what fencing tokens are for).
    let checked: Vec<LeaderTick> = ticks
        .iter()
        .copied()
        .filter(|t| !(t.token == second_leader.token && t.end_us > frozen_us))
        .collect();
    one_leader_at_a_time(&checked);
    let tokens: HashSet<u64> = ticks.iter().map(|t| t.token).collect();
    println!(
        "{} ticks, tokens {:?}",
        ticks.len(),
        tokens.iter().collect::<std::collections::BTreeSet<_>>()
    );
    for c in contenders {
        c.stop();
    }
}
