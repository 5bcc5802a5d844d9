//! the runtime and `Producer::connect_from_env()` read the same environment and
//! file differently. A producer-only process (a web front end that only sends) and the worker
//! then disagree silently. One test: the environment is this binary's own.

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Producer, Runtime};

#[delay_listener(topic = "review.env")]
async fn handler(_msg: u32) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_and_runtime_agree_on_the_same_environment() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut disagreements = Vec::new();

    // 1. A misspelt namespace variable: the runtime refuses ("did you mean DELAYQ_NAMESPACE?"),
    //    the producer starts in the default namespace `delayq`.
    std::env::remove_var("DELAYQ_CONFIG");
    std::env::set_var("DELAYQ_REDIS_URL", server.url());
    std::env::remove_var("DELAYQ_NAMESPACE");
    std::env::set_var("DELAYQ_NAMESPCE", "shop");
    let rt = Runtime::builder().spawn().await;
    let p = Producer::connect_from_env().await;
    let rt_ok = rt.is_ok();
    if let Ok(h) = rt {
        h.shutdown().await.unwrap();
    }
    if rt_ok != p.is_ok() {
        disagreements.push(format!(
            "DELAYQ_NAMESPCE=shop: runtime {}, producer {}",
            if rt_ok { "started" } else { "refused" },
            match &p {
                Ok(p) => format!("connected in namespace {:?}", p.namespace()),
                Err(e) => format!("refused: {e}"),
            }
        ));
    }
    std::env::remove_var("DELAYQ_NAMESPCE");

    // 2. DELAYQ_CONFIG names a file that is not there, URL and namespace in variables: the
    //    runtime refuses ("cannot read the configuration file"), the producer connects.
    std::env::set_var("DELAYQ_CONFIG", dir.path().join("missing.toml"));
    std::env::set_var("DELAYQ_NAMESPACE", "shop");
    let rt = Runtime::builder().spawn().await;
    let p = Producer::connect_from_env().await;
    let rt_ok = rt.is_ok();
    if let Ok(h) = rt {
        h.shutdown().await.unwrap();
    }
    if rt_ok != p.is_ok() {
        disagreements.push(format!(
            "DELAYQ_CONFIG=<missing file>: runtime {}, producer {}",
            if rt_ok { "started" } else { "refused" },
            match &p {
                Ok(_) => "connected".to_string(),
                Err(e) => format!("refused: {e}"),
            }
        ));
    }
    assert!(
        disagreements.is_empty(),
        "runtime and producer disagree:\n{}",
        disagreements.join("\n")
    );
}
