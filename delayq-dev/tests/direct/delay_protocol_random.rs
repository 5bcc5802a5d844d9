//! Randomized: thousands of interleaved send / claim / ack / nack / expire / release / cancel
//! operations from several concurrent clients. After every round: each message id is in
//! exactly one state, none is lost or resurrected, and no id was ever owned by two deliveries
//! at once (only the latest delivery of an id can settle it, and each id is settled once).
//!
//! Besides generated ids, clients send a small pool of user-chosen ids again and again (plain,
//! and with `replace`), so the same id is acked, cancelled or dead-lettered and then sent
//! anew: its delivery tokens must still only ever grow, or a stale delivery of an earlier
//! incarnation could settle a later one. A claim's token is kept beside its envelope exactly
//! while the id is in flight.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::protocol::NackOutcome;
use delayq_core::{Cancelled, MessageId, Producer, SendOptions, SendOutcome};
use delayq_dev::keys;
use delayq_dev::RedisServer;

const CLIENTS: usize = 4;
const ROUNDS: usize = 6;
const OPS_PER_CLIENT_PER_ROUND: usize = 250;
const MAX_ATTEMPTS: u32 = 3;
/// User-chosen ids `user-0` … `user-19`, re-sent throughout.
const USER_IDS: usize = 20;

fn is_user_id(id: &str) -> bool {
    id.starts_with("user-")
}

#[derive(Default)]
struct Model {
    /// Every generated id whose send returned Ok.
    sent: HashSet<MessageId>,
    /// Generated ids acked or cancelled (Removed): must be gone from Redis.
    gone: HashSet<MessageId>,
    /// Sends of user-chosen ids that created or replaced a message.
    user_sends: usize,
    /// User ids acked at least once.
    acked_user_ids: HashSet<MessageId>,
    /// Claims of a user id that had been acked before: a later incarnation.
    reclaimed_after_ack: usize,
    /// The highest delivery token handed out per id.
    latest_token: HashMap<MessageId, u64>,
    /// Successful settlements (ack, nack, release) per id and token.
    settled: Vec<(MessageId, u64, &'static str)>,
    ops: usize,
}

/// A delivery acked (by an ack call or riding on a claim).
fn record_ack(m: &mut Model, d: (MessageId, u64)) {
    if is_user_id(d.0.as_str()) {
        m.acked_user_ids.insert(d.0.clone());
    } else {
        m.gone.insert(d.0.clone());
    }
    m.settled.push((d.0, d.1, "ack"));
}

async fn run_client(p: Producer, model: Arc<Mutex<Model>>, seed: u64) {
    let q = delayq_core::protocol::queue(&p, "r").unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut held: Vec<(MessageId, u64)> = Vec::new();
    for _ in 0..OPS_PER_CLIENT_PER_ROUND {
        match rng.u32(0..130) {
            100..=129 => {
                let id = format!("user-{}", rng.usize(0..USER_IDS));
                // Due at the epoch: ahead of the generated backlog, so user ids are claimed,
                // settled and sent again many times a round.
                let options = SendOptions::new()
                    .id(id)
                    .replace(rng.bool())
                    .at(std::time::UNIX_EPOCH);
                let outcome = p.send_with("r", &0, options).await.unwrap();
                if !matches!(outcome, SendOutcome::Duplicate(_)) {
                    model.lock().unwrap().user_sends += 1;
                }
            }
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
                // Half the claims carry acks of held deliveries (some of them stale by now).
                let riding: Vec<(MessageId, u64)> = if rng.bool() {
                    (0..rng.usize(0..4).min(held.len()))
                        .map(|_| held.swap_remove(rng.usize(0..held.len())))
                        .collect()
                } else {
                    Vec::new()
                };
                let receipts: Vec<_> = riding.iter().map(|(id, t)| (id.clone(), *t, 0)).collect();
                let batch = q
                    .claim_acking(rng.usize(1..8), lease, &receipts)
                    .await
                    .unwrap();
                assert!(batch.undeliverable.is_empty());
                assert_eq!(batch.acked.len(), riding.len());
                let mut m = model.lock().unwrap();
                for (d, acked) in riding.into_iter().zip(&batch.acked) {
                    if *acked {
                        record_ack(&mut m, d);
                    }
                }
                for c in batch.claimed {
                    assert!(c.envelope.due_ms <= batch.now_ms, "claimed before due");
                    let token = c.token();
                    if m.acked_user_ids.contains(&c.id) {
                        m.reclaimed_after_ack += 1;
                    }
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
                if q.ack(&[(d.0.clone(), d.1, 0)]).await.unwrap()[0] {
                    record_ack(&mut model.lock().unwrap(), d);
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
                let pick = if rng.bool() {
                    let m = model.lock().unwrap();
                    let n = m.sent.len();
                    (n > 0).then(|| m.sent.iter().nth(rng.usize(0..n)).unwrap().clone())
                } else {
                    Some(format!("user-{}", rng.usize(0..USER_IDS)).parse().unwrap())
                };
                if let Some(id) = pick {
                    let cancelled = p.cancel("r", &id).await.unwrap() == Cancelled::Removed;
                    if cancelled && !is_user_id(id.as_str()) {
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
    let mut inflight = members(&mut c, &k.inflight);
    // The one member at +inf that keeps the set a skiplist, named with a newline: no id.
    let skiplist: Vec<String> = inflight
        .iter()
        .filter(|m| m.contains('\n'))
        .cloned()
        .collect();
    assert!(skiplist.len() <= 1, "round {round}: {skiplist:?}");
    for m in &skiplist {
        let score: f64 = redis::cmd("ZSCORE")
            .arg(&k.inflight)
            .arg(m)
            .query(&mut c)
            .unwrap();
        assert_eq!(
            score,
            f64::INFINITY,
            "round {round}: the set's skiplist member"
        );
        inflight.remove(m);
    }
    assert!(
        inflight.is_empty() || !skiplist.is_empty(),
        "round {round}: claims in flight without the member that keeps the set a skiplist"
    );
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(&k.inflight)
        .query(&mut c)
        .unwrap_or_default();
    assert!(
        inflight.is_empty() || encoding == "skiplist",
        "round {round}: in-flight set in {encoding}"
    );
    let dead = members(&mut c, &k.dead);
    let mut envelopes: HashMap<String, Vec<u8>> =
        redis::cmd("HGETALL").arg(&k.msg).query(&mut c).unwrap();
    // A claim's token is kept beside its envelope, under the id and a newline.
    let tokens: HashMap<String, u64> = envelopes
        .iter()
        .filter_map(|(field, v)| {
            let id = field.strip_suffix('\n')?;
            Some((id.to_string(), String::from_utf8_lossy(v).parse().unwrap()))
        })
        .collect();
    envelopes.retain(|field, _| !field.ends_with('\n'));
    let with_token: HashSet<String> = tokens.keys().cloned().collect();
    assert_eq!(
        with_token, inflight,
        "round {round}: a token without a claim in flight, or the reverse"
    );

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
    // User ids come and go with every re-send, in an order only Redis saw; they are checked
    // by the state and token invariants, the generated ids also by the model.
    let generated: HashSet<String> = in_sets
        .iter()
        .filter(|id| !is_user_id(id))
        .cloned()
        .collect();
    let lost: Vec<_> = expected.difference(&generated).collect();
    let resurrected: Vec<_> = generated.difference(&expected).collect();
    assert!(lost.is_empty(), "round {round}: lost {lost:?}");
    assert!(
        resurrected.is_empty(),
        "round {round}: acked or cancelled but present: {resurrected:?}"
    );

    for id in &inflight {
        delayq_core::protocol::Envelope::parse(&envelopes[id]).unwrap();
        let mid: MessageId = id.parse().unwrap();
        assert_eq!(
            tokens.get(id),
            model.latest_token.get(&mid),
            "round {round}: owner of {id}"
        );
    }
    // Only the latest delivery of an id may settle it, and an ack settles it for good (a user
    // id once per incarnation: each delivery of it is settled at most once).
    let mut acks = HashSet::new();
    let mut settlements = HashSet::new();
    for (id, token, how) in &model.settled {
        assert!(
            *token <= model.latest_token[id],
            "round {round}: settled with a future token"
        );
        assert!(
            settlements.insert((id.clone(), *token)),
            "round {round}: delivery {token} of {id} settled twice"
        );
        if *how == "ack" && !is_user_id(id.as_str()) {
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
    let user_acks = m
        .settled
        .iter()
        .filter(|s| s.2 == "ack" && is_user_id(s.0.as_str()))
        .count();
    println!(
        "{} operations, {} sent, {} acked or cancelled, {} user-id sends, {user_acks} user-id acks, {} claims of a user id after its ack, {} settlements, final {counts:?}",
        m.ops,
        m.sent.len(),
        m.gone.len(),
        m.user_sends,
        m.reclaimed_after_ack,
        m.settled.len()
    );
    assert!(
        m.reclaimed_after_ack > 0,
        "the mix re-sent and claimed again a user id after its ack"
    );
    assert_eq!(m.ops, CLIENTS * ROUNDS * OPS_PER_CLIENT_PER_ROUND);
    let _ = user_acks;
    assert!(
        m.settled.iter().any(|s| s.2 == "ack") && counts.dead > 0 && !m.gone.is_empty(),
        "the mix exercised acks, dead letters and cancels"
    );
}
