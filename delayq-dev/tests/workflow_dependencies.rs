//! A flow step's `Dependencies` parameter: it reads what the steps it waited for returned (and
//! the failures it was told to ignore), and a running step adds steps to its flow that its
//! dependents then wait for (a fan-out known only when it runs).

use std::time::Duration;

use delayq_dev::{producer, runtime, RedisServer, Seen};
use delayq_runtime::{delay_listener, Dependencies, Flow, FlowState, OnFailure};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rendition {
    size: u32,
}

#[delay_listener(topic = "deps.transcode", max_attempts = 1)]
async fn transcode(size: u32) -> Result<Rendition, String> {
    if size == 0 {
        return Err("no size".into());
    }
    Ok(Rendition { size })
}

static PUBLISHED: Seen<(Vec<u32>, Vec<String>)> = Seen::new();

#[delay_listener(topic = "deps.publish")]
async fn publish(_video: String, deps: Dependencies) -> Result<String, String> {
    let sizes: Vec<Rendition> = deps.results_of_prefix("transcode-")?;
    let failed = deps
        .failed()
        .map(|(n, why)| format!("{n}: {why}"))
        .collect();
    PUBLISHED.push((sizes.iter().map(|r| r.size).collect(), failed));
    Ok("published".into())
}

/// A folder step: one step a file, added while it runs.
#[delay_listener(topic = "deps.folder")]
async fn folder(files: u32, deps: Dependencies) -> Result<(), String> {
    for i in 0..files {
        // Twice: a retried run adds nothing new.
        for _ in 0..2 {
            deps.add_step(&format!("transcode-file-{i}"), "deps.transcode", &(100 + i))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

const TOPICS: &[&str] = &["deps.transcode", "deps.publish", "deps.folder"];
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_reads_what_it_waited_for_and_a_step_adds_steps_when_it_runs() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, TOPICS).await;

    // Values, and an ignored failure.
    let flow = Flow::new()
        .step("transcode-720", "deps.transcode", &720)
        .step("transcode-1080", "deps.transcode", &1080)
        .step("transcode-broken", "deps.transcode", &0)
        .step("publish", "deps.publish", &"v-7")
        .after(["transcode-720", "transcode-1080", "transcode-broken"])
        .if_failed("transcode-broken", OnFailure::Ignore);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    let (sizes, failed) = PUBLISHED.all().remove(0);
    assert_eq!(sizes, [720, 1080]);
    assert_eq!(failed, ["transcode-broken: no size"]);

    // A fan-out at run time: the folder adds 3 steps, publish waits for all of them.
    let flow = Flow::new()
        .step("folder", "deps.folder", &3)
        .step("publish", "deps.publish", &"v-8")
        .after(["folder"]);
    let id = p.start_flow(flow).await.unwrap();
    assert_eq!(p.wait_flow(&id, WAIT).await.unwrap(), Some(FlowState::Done));
    let (sizes, failed) = PUBLISHED.all().remove(1);
    let mut sizes = sizes;
    sizes.sort_unstable();
    assert_eq!(sizes, [100, 101, 102], "publish ran after every added step");
    assert!(failed.is_empty());
    let info = p.flow(&id).await.unwrap().unwrap();
    assert_eq!(info.steps.len(), 5, "{:?}", info.steps);
    let publish = info.steps.iter().find(|s| s.name == "publish").unwrap();
    assert_eq!(publish.after.len(), 4, "{:?}", publish.after);
    rt.shutdown().await.unwrap();
}
