//! A review of 7185e0a (batched acks keeping values, batched settles, the outbox intents): f1,
//! f2 and f3 fail on 7185e0a; s1 and s2 pin what it found sound.

use std::time::Duration;

use delayq_core::protocol::queue;
use delayq_core::{Flow, FlowId, FlowState, StepEnd};
use delayq_dev::{producer, RedisServer};

/// Where a start notes its intent (its first steps written sent, see create.lua); outbox
/// senders note theirs in `{flows}:sending`.
const STARTING: &str = "delayq:{flows}:starting";

fn card(c: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("ZCARD").arg(key).query(c).unwrap()
}

/// F1: a fan-out of one root into 8,500 dependents (MAX_FLOW_STEPS is 10,000). The root's
/// settle makes them all ready at once: apply_less's `SADD out unpack(ready)` passes 8,500
/// arguments, over Lua's unpack limit (8,000). The settle fails at every try, the sweep's
/// too: no dependent is ever sent and the flow runs for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f1_a_wide_fan_out_is_settled() {
    const LEAVES: usize = 8_500;
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut flow = Flow::new().step("root", "rvb.root", &0u64);
    for i in 0..LEAVES {
        flow = flow
            .step(&format!("l{i}"), "rvb.leaf", &(i as u64))
            .after(["root"]);
    }
    let id = p.start_flow(flow).await.unwrap();
    let q = queue(&p, "rvb.root").unwrap();
    let d = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(d.len(), 1);
    assert_eq!(
        q.ack_keep(&[(d[0].receipt(), b"null".to_vec())])
            .await
            .unwrap(),
        [true]
    );
    let settled = q.settle_step(&d[0].id, &StepEnd::Done).await;
    // The back pool's sweep tries again: the same.
    let swept = q.settle_ended_steps().await;
    let mut c = server.connection();
    let sent = card(&mut c, "delayq:{rvb.leaf}:delayed") + card(&mut c, "delayq:{rvb.leaf}:due");
    let info = p.flow(&id).await.unwrap().unwrap();
    assert!(
        settled.is_ok() && sent > 0,
        "root's settle: {settled:?}; sweep: {swept:?}; leaves sent: {sent}; flow {:?}",
        info.state
    );
}

fn script(name: &str) -> String {
    let prelude = include_str!("../../delayq-core/src/scripts/workflow/prelude.lua");
    let body = match name {
        "create" => include_str!("../../delayq-core/src/scripts/workflow/create.lua"),
        _ => unreachable!(),
    };
    format!("{prelude}\n{body}")
}

/// What start_flow does before it sends a step (create.lua, then the index and its intent),
/// as a process killed right after leaves it: a flow of one step in `topic`, its intent
/// scored `until`.
fn start_cut_short(c: &mut redis::Connection, topic: &str, until: u64) -> FlowId {
    let id = FlowId::new(format!("rvb-{topic}")).unwrap();
    let k = |s: &str| format!("delayq:{{flow:{id}}}:{s}");
    let record = serde_json::json!({
        "topic": topic,
        "opts": { "delay_ms": 0, "priority": null, "key": null, "max_attempts": null },
        "after": [], "next": [],
    })
    .to_string();
    let reply: redis::Value = redis::cmd("EVAL")
        .arg(script("create"))
        .arg(6)
        .arg(k("meta"))
        .arg(k("rec"))
        .arg(k("state"))
        .arg(k("waiting"))
        .arg(k("payload"))
        .arg(k("out"))
        .arg(k("end"))
        .arg("PUBLISH")
        .arg(3_600_000u64)
        .arg(86_400_000u64)
        .arg(1)
        .arg("only")
        .arg(record)
        .arg(0)
        .arg("1")
        .query(c)
        .unwrap();
    println!("create.lua: {reply:?}");
    redis::cmd("ZADD")
        .arg("delayq:{flows}:all")
        .arg(1)
        .arg(id.as_str())
        .query::<()>(c)
        .unwrap();
    redis::cmd("ZADD")
        .arg(STARTING)
        .arg(until)
        .arg(format!("{id}\x1f00000000000000{until:02}"))
        .query::<()>(c)
        .unwrap();
    id
}

/// F2: two starts cut short (their intents expired). One flow's outbox key was hand-edited
/// into a string: its send fails, and send_stranded_outboxes returns at the `?` before it
/// drops that intent, which stays first (oldest): every sweep fails on it, the other flow's
/// step is never sent, and each sweep adds one more intent for the broken flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_a_broken_flow_does_not_block_the_sweep_of_other_stranded_outboxes() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    let broken = start_cut_short(&mut c, "rvb.x", 1);
    let healthy = start_cut_short(&mut c, "rvb.y", 2);
    let out = format!("delayq:{{flow:{broken}}}:out");
    redis::cmd("DEL").arg(&out).query::<()>(&mut c).unwrap();
    redis::cmd("SET")
        .arg(&out)
        .arg("hand edit")
        .query::<()>(&mut c)
        .unwrap();
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(p.send_stranded_outboxes().await.map_err(|e| e.to_string()));
    }
    let sent = card(&mut c, "delayq:{rvb.y}:delayed") + card(&mut c, "delayq:{rvb.y}:due");
    let info = p.flow(&healthy).await.unwrap().unwrap();
    let intents = card(&mut c, STARTING);
    assert!(
        sent == 1,
        "the healthy flow's stranded step was not sent (flow {:?}); sweeps: {answers:?}; intents now: {intents}",
        info.state
    );
    assert_eq!(info.state, FlowState::Running);
}

/// F3: a foreign value at the key of the start's intent (ns:{flows}:starting; it was
/// ns:{flows}:sending when this was found): start_flow's error must name the key (and the
/// flow it wrote must not be left behind, indexed and running, for the caller who got no id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f3_a_foreign_sending_key_gives_an_error_naming_it() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let mut c = server.connection();
    redis::cmd("SET")
        .arg(STARTING)
        .arg("another program's")
        .query::<()>(&mut c)
        .unwrap();
    let err = p
        .start_flow(Flow::new().step("a", "rvb.a", &1u64))
        .await
        .map(|id| id.to_string())
        .unwrap_err()
        .to_string();
    let left: Vec<String> = redis::cmd("KEYS").arg("*{flow:*").query(&mut c).unwrap();
    let indexed = card(&mut c, "delayq:{flows}:all");
    println!("start_flow: {err}; left: {left:?}; indexed: {indexed}");
    assert!(
        err.contains("{flows}:starting"),
        "the error does not name the key: {err}"
    );
}

/// Sound check: one receipt given twice in one ack_keep call acks once, keeps one result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_a_receipt_given_twice_in_one_ack_keep_acks_once() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p.send("rvb.k", &1u64, Duration::ZERO).await.unwrap();
    let q = queue(&p, "rvb.k").unwrap();
    let d = q
        .claim_due(1, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    let r = d[0].receipt();
    let acked = q
        .ack_keep(&[(r.clone(), b"1".to_vec()), (r, b"2".to_vec())])
        .await
        .unwrap();
    assert_eq!(acked, [true, false]);
    let outcome = p.result::<u64>("rvb.k", &id).await.unwrap();
    println!("{outcome:?}");
    assert!(format!("{outcome:?}").contains('1'), "{outcome:?}");
}

/// Sound check: one settle batch with a failed root (A) and a done root (B): C behind A's
/// Fail edge fails, E behind [A ignore, B] becomes ready and is sent, the flow fails; the
/// same step given twice counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_a_mixed_batch_settles_as_one_at_a_time_would() {
    use delayq_core::{OnFailure, StepState};
    let server = RedisServer::start();
    let p = producer(&server).await;
    let id = p
        .start_flow(
            Flow::new()
                .step("A", "rvb.m", &1u64)
                .step("B", "rvb.m", &2u64)
                .step("C", "rvb.n", &3u64)
                .after(["A"])
                .step("E", "rvb.n", &4u64)
                .after(["A", "B"])
                .if_failed("A", OnFailure::Ignore),
        )
        .await
        .unwrap();
    let q = queue(&p, "rvb.m").unwrap();
    let d = q
        .claim_due(2, Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(d.len(), 2);
    let (a, b) = if d[0].id.as_str().contains("\x1fA\x1f") {
        (&d[0], &d[1])
    } else {
        (&d[1], &d[0])
    };
    let report = q
        .settle_steps(&[
            (a.id.clone(), StepEnd::Failed("broke".into())),
            (b.id.clone(), StepEnd::Done),
            (b.id.clone(), StepEnd::Done),
        ])
        .await;
    assert!(report.error.is_none(), "{:?}", report.error);
    let info = p.flow(&id).await.unwrap().unwrap();
    let st = |n: &str| info.steps.iter().find(|s| s.name == n).unwrap().state;
    let mut c = server.connection();
    let sent = card(&mut c, "delayq:{rvb.n}:delayed") + card(&mut c, "delayq:{rvb.n}:due");
    assert_eq!(info.state, FlowState::Failed);
    assert_eq!((st("C"), st("E")), (StepState::Failed, StepState::Sent));
    assert_eq!(sent, 1);
}
