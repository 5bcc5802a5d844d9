//! "Other DELAYQ_ names that are near nothing pass, since the environment is shared
//! (Kubernetes sets DELAYQ_SERVICE_HOST and DELAYQ_PORT for a Service named delayq)" (README).
//! Kubernetes sets the same links for every Service in the namespace: one named
//! `delayq-redis` (the Redis the workers use) or `delayq-dashboard` (delayq's own dashboard)
//! gives DELAYQ_REDIS_PORT / DELAYQ_DASHBOARD_PORT, which the typo check takes for
//! DELAYQ_REDIS_URL / DELAYQ_DASHBOARD_TOKEN: every worker pod refuses to start.

use delayq_dev::RedisServer;
use delayq_runtime::{delay_listener, Runtime};

#[delay_listener(topic = "review.k8s")]
async fn h(_: u32) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_service_links_of_other_services_do_not_stop_start() {
    let server = RedisServer::start();
    // What the kubelet sets for `Service delayq-redis` (port 6379) and
    // `Service delayq-dashboard` (port 7878) in the pod's namespace.
    let links = [
        ("DELAYQ_REDIS_SERVICE_HOST", "10.96.0.12"),
        ("DELAYQ_REDIS_SERVICE_PORT", "6379"),
        ("DELAYQ_REDIS_PORT", "tcp://10.96.0.12:6379"),
        ("DELAYQ_REDIS_PORT_6379_TCP", "tcp://10.96.0.12:6379"),
        ("DELAYQ_REDIS_PORT_6379_TCP_PROTO", "tcp"),
        ("DELAYQ_REDIS_PORT_6379_TCP_PORT", "6379"),
        ("DELAYQ_REDIS_PORT_6379_TCP_ADDR", "10.96.0.12"),
        ("DELAYQ_DASHBOARD_SERVICE_HOST", "10.96.0.13"),
        ("DELAYQ_DASHBOARD_SERVICE_PORT", "7878"),
        ("DELAYQ_DASHBOARD_PORT", "tcp://10.96.0.13:7878"),
    ];
    for (k, v) in links {
        std::env::set_var(k, v);
    }
    let rt = Runtime::builder()
        .redis_url(server.url())
        .topics(["review.k8s"])
        .spawn()
        .await;
    match rt {
        Ok(h) => h.shutdown().await.unwrap(),
        Err(e) => panic!("start refused for another Service's links: {e}"),
    }
}
