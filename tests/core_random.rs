//! Randomized: thousands of interleaved send / claim / ack / nack / expire / release / cancel
//! operations from several concurrent clients. After every round: each message id is in
//! exactly one state, none is lost or resurrected, and no id was ever owned by two deliveries
//! at once (only the latest delivery of an id can settle it, and each id is settled once).

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::keys;
use delayq_core::{Cancelled, MessageId, NackOutcome, Producer};
use delayq_dev::RedisServer;

const CLIENTS: usize = 4;
const ROUNDS: usize = 6;
const OPS_PER_CLIENT_PER_ROUND: usize = 250;
const MAX_ATTEMPTS: u32 = 3;

#[derive(Default)]
struct Model {
    /// Every id whose send returned Ok.
    sent: HashSet<MessageId>,
    /// Ids acked or cancelled (Removed): must be gone from Redis.
    gone: HashSet<MessageId>,
    /// The highest delivery token handed out per id.
    latest_token: HashMap<MessageId, u64>,
    /// Successful settlements (ack, nack, release) per id and token.
    settled: Vec<(MessageId, u64, &'static str)>,
    ops: usize,
}

async fn run_client(p: Producer, model: Arc<Mutex<Model>>, seed: u64) {
    let q = p.queue("r").unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut held: Vec<(MessageId, u64)> = Vec::new();
    for _ in 0..OPS_PER_CLIENT_PER_ROUND {
        match rng.u32(0..100) {
            0..=24 => {
                let n = rng.usize(1..6);
                let items: Vec<_> = (0..n)
                    .map(|i| (i, Duration::from_millis(rng.u64(0..20))))
                    .collect();
                let ids = if n == 1 {
                    vec![p.send("r", &0, items[0].1).await.unwrap()]
                } else {
                    p.send_batch("r", items).await.unwrap()
                };
                model.lock().unwrap().sent.extend(ids);
            }
            25..=49 => {
                let lease = Duration::from_millis(rng.u64(5..60));
                let batch = q.claim_due(rng.usize(1..8), lease).await.unwrap();
                assert!(batch.undeliverable.is_empty());
                let mut m = model.lock().unwrap();
                for c in batch.claimed {
                    assert!(c.envelope.due_ms <= batch.now_ms, "claimed before due");
                    let token = c.token();
                    let prev = m.latest_token.insert(c.id.clone(), token).unwrap_or(0);
                    assert!(
                        token > prev,
                        "token of {} went from {prev} to {token}",
                        c.id
                    );
                    held.push((c.id, token));
                }
            }
            50..=64 if !held.is_empty() => {
                let d = held.swap_remove(rng.usize(0..held.len()));
                if q.ack(std::slice::from_ref(&d)).await.unwrap()[0] {
                    let mut m = model.lock().unwrap();
                    m.gone.insert(d.0.clone());
                    m.settled.push((d.0, d.1, "ack"));
                }
            }
            65..=74 if !held.is_empty() => {
                let (id, token) = held.swap_remove(rng.usize(0..held.len()));
                let backoff = Duration::from_millis(rng.u64(0..10));
                let out = q
                    .nack(&id, token, backoff, "random failure", MAX_ATTEMPTS, None)
                    .await
                    .unwrap();
                if out != NackOutcome::Stale {
                    model.lock().unwrap().settled.push((id, token, "nack"));
                }
            }
            75..=79 if !held.is_empty() => {
                let d = held.swap_remove(rng.usize(0..held.len()));
                if q.extend(Duration::from_millis(30), std::slice::from_ref(&d))
                    .await
                    .unwrap()[0]
                {
                    held.push(d);
                }
            }
            80..=81 if !held.is_empty() => {
                let d = held.swap_remove(rng.usize(0..held.len()));
                if q.release(std::slice::from_ref(&d)).await.unwrap() == 1 {
                    model.lock().unwrap().settled.push((d.0, d.1, "release"));
                }
            }
            82..=91 => {
                q.requeue_expired(rng.usize(1..20), MAX_ATTEMPTS)
                    .await
                    .unwrap();
            }
            _ => {
                let pick = {
                    let m = model.lock().unwrap();
                    let n = m.sent.len();
                    (n > 0).then(|| m.sent.iter().nth(rng.usize(0..n)).unwrap().clone())
                };
                if let Some(id) = pick {
                    if p.cancel("r", &id).await.unwrap() == Cancelled::Removed {
                        model.lock().unwrap().gone.insert(id);
                    }
                }
            }
        }
        model.lock().unwrap().ops += 1;
        if rng.u32(0..10) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.u64(0..5))).await;
        }
    }
}

fn members(c: &mut redis::Connection, key: &str) -> HashSet<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(c)
        .unwrap()
}

fn check(server: &RedisServer, model: &Model, round: usize) {
    let k = keys("r");
    let mut c = server.connection();
    let delayed = members(&mut c, &k.delayed);
    let inflight = members(&mut c, &k.inflight);
    let dead = members(&mut c, &k.dead);
    let envelopes: HashMap<String, Vec<u8>> =
        redis::cmd("HGETALL").arg(&k.msg).query(&mut c).unwrap();

    assert!(
        delayed.is_disjoint(&inflight),
        "round {round}: delayed ∩ inflight"
    );
    assert!(delayed.is_disjoint(&dead), "round {round}: delayed ∩ dead");
    assert!(
        inflight.is_disjoint(&dead),
        "round {round}: inflight ∩ dead"
    );
    let in_sets: HashSet<String> = delayed
        .iter()
        .chain(&inflight)
        .chain(&dead)
        .cloned()
        .collect();
    let with_envelope: HashSet<String> = envelopes.keys().cloned().collect();
    assert_eq!(
        in_sets, with_envelope,
        "round {round}: a set member without envelope or the reverse"
    );

    let expected: HashSet<String> = model
        .sent
        .difference(&model.gone)
        .map(|id| id.as_str().to_string())
        .collect();
    let lost: Vec<_> = expected.difference(&in_sets).collect();
    let resurrected: Vec<_> = in_sets.difference(&expected).collect();
    assert!(lost.is_empty(), "round {round}: lost {lost:?}");
    assert!(
        resurrected.is_empty(),
        "round {round}: acked or cancelled but present: {resurrected:?}"
    );

    for id in &inflight {
        let env = delayq_core::Envelope::parse(&envelopes[id]).unwrap();
        let mid: MessageId = id.parse().unwrap();
        assert_eq!(
            Some(&env.deliveries),
            model.latest_token.get(&mid),
            "round {round}: owner of {id}"
        );
    }
    // Only the latest delivery of an id may settle it, and an ack settles it for good.
    let mut acks = HashSet::new();
    for (id, token, how) in &model.settled {
        assert!(
            *token <= model.latest_token[id],
            "round {round}: settled with a future token"
        );
        if *how == "ack" {
            assert!(acks.insert(id.clone()), "round {round}: {id} acked twice");
            assert_eq!(
                *token, model.latest_token[id],
                "round {round}: stale ack of {id} succeeded"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_operations_keep_every_id_in_exactly_one_state() {
    let server = RedisServer::start();
    let model = Arc::new(Mutex::new(Model::default()));
    let mut producers = Vec::new();
    for _ in 0..CLIENTS {
        producers.push(Producer::connect(&server.url()).await.unwrap());
    }
    let seed = std::env::var("DELAYQ_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("seed {seed} (rerun with DELAYQ_TEST_SEED={seed})");
    for round in 0..ROUNDS {
        let tasks: Vec<_> = producers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let seed = seed.wrapping_add((round * CLIENTS + i) as u64);
                tokio::spawn(run_client(p.clone(), model.clone(), seed))
            })
            .collect();
        for t in tasks {
            t.await.expect("client task");
        }
        check(&server, &model.lock().unwrap(), round);
    }
    let counts = producers[0].counts("r").await.unwrap();
    let m = model.lock().unwrap();
    println!(
        "{} operations, {} sent, {} acked or cancelled, {} settlements, final {counts:?}",
        m.ops,
        m.sent.len(),
        m.gone.len(),
        m.settled.len()
    );
    assert_eq!(m.ops, CLIENTS * ROUNDS * OPS_PER_CLIENT_PER_ROUND);
    assert!(
        m.settled.iter().any(|s| s.2 == "ack") && counts.dead > 0 && !m.gone.is_empty(),
        "the mix exercised acks, dead letters and cancels"
    );
}
