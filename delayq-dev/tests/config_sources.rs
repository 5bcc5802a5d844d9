//! External configuration, as a deployed process meets it: the file, the environment, the
//! builder and the attribute, each winning over the ones below it; `enabled = false` from the
//! environment; typos refused with the file and line (or the variable) and the nearest name.
//!
//! One test in this binary: it sets process environment variables, which every test of a
//! binary shares.

use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq_dev::RedisServer;
use delayq_runtime::{
    delay_listener, ConfigSource, Kind, ListenerState, RedisHealth, Runtime, RuntimeBuilder,
};

static ORDERS_RUNS: AtomicUsize = AtomicUsize::new(0);
static REMIND_RUNS: AtomicUsize = AtomicUsize::new(0);

// The attribute sets concurrency and max_attempts; ack_timeout and backoff are defaults.
#[delay_listener(topic = "prec.orders", concurrency = 8, max_attempts = 9)]
async fn orders(_: u32) -> Result<(), String> {
    ORDERS_RUNS.fetch_add(1, Ordering::SeqCst);
    Err("always fails".into())
}

#[delay_listener(topic = "prec-remind")]
async fn remind(_: u32) {
    REMIND_RUNS.fetch_add(1, Ordering::SeqCst);
}

const FILE: &str = r#"# delayq.toml for the test
shutdown_grace = "3s"
namespace = "from-file"

[listeners."prec.orders"]
concurrency = 32
max_attempts = 5
ack_timeout = "45s"
"#;

fn builder(url: &str, file: &std::path::Path) -> RuntimeBuilder {
    Runtime::builder().redis_url(url).config_file(file)
}

fn set_env(vars: &[(&str, &str)]) {
    for (k, v) in vars {
        std::env::set_var(k, v);
    }
}

fn clear_env(vars: &[(&str, &str)]) {
    for (k, _) in vars {
        std::env::remove_var(k);
    }
}

#[tokio::test]
async fn each_source_wins_over_the_ones_below_it_and_typos_are_refused() {
    let server = RedisServer::start();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("delayq.toml");
    std::fs::write(&file, FILE).unwrap();

    // --- Typos refuse start, each named, before anything connects.
    let typo_file = dir.path().join("typo.toml");
    std::fs::write(
        &typo_file,
        "[listeners.\"prec.orders\"]\nconcurency = 4\n\n[listeners.\"prec.order\"]\nenabled = false\n",
    )
    .unwrap();
    let err = builder(&url, &typo_file)
        .spawn()
        .await
        .unwrap_err()
        .to_string();
    let shown = typo_file.display().to_string();
    assert!(
        err.contains(&format!("{shown}:2: listeners.\"prec.orders\".concurency: unknown option of a delay listener; did you mean \"concurrency\"?")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{shown}:5: listeners.\"prec.order\": no delay listener \"prec.order\" in this binary; did you mean \"prec.orders\"?")),
        "{err}"
    );
    let typo_vars = [
        ("DELAYQ_LISTENER_PREC_ORDERS_CONCURENCY", "4"),
        ("DELAYQ_LISTENER_PREC_REMIND_MAX_ATTEMPTS", "many"),
        ("DELAYQ_NAMESPCE", "shop"),
        ("DELAYQ_SHUTDOWN_GRACE_PERIOD", "5s"),
        // Not a near miss of any option: someone else's (a Kubernetes service link).
        ("DELAYQ_SERVICE_HOST", "10.0.0.7"),
    ];
    set_env(&typo_vars);
    let err = builder(&url, &file).spawn().await.unwrap_err().to_string();
    clear_env(&typo_vars);
    assert!(
        err.contains("DELAYQ_LISTENER_PREC_ORDERS_CONCURENCY: names no delay listener option of this binary; did you mean DELAYQ_LISTENER_PREC_ORDERS_CONCURRENCY?"),
        "{err}"
    );
    assert!(
        err.contains("DELAYQ_LISTENER_PREC_REMIND_MAX_ATTEMPTS: listeners.prec-remind.max_attempts: expected a whole number from 1 to 1000000, found \"many\""),
        "{err}"
    );
    assert!(
        err.contains("DELAYQ_NAMESPCE: names no runtime option; did you mean DELAYQ_NAMESPACE?"),
        "{err}"
    );
    assert!(
        err.contains("DELAYQ_SHUTDOWN_GRACE_PERIOD: names no runtime option; did you mean DELAYQ_SHUTDOWN_GRACE?"),
        "{err}"
    );
    assert!(!err.contains("DELAYQ_SERVICE_HOST"), "{err}");
    let err = builder(&url, &file)
        .set("listeners.\"prec.orders\".backof", "fixed(1s)")
        .spawn()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean \"backoff\"?"), "{err}");

    // --- The four sources at once.
    let vars = [
        ("DELAYQ_LISTENER_PREC_ORDERS_CONCURRENCY", "64"),
        ("DELAYQ_LISTENER_PREC_ORDERS_MAX_ATTEMPTS", "3"),
        ("DELAYQ_LISTENER_PREC_ORDERS_BACKOFF", "fixed(20ms)"),
        ("DELAYQ_LISTENER_PREC_REMIND_ENABLED", "false"),
        ("DELAYQ_NAMESPACE", "from-env"),
    ];
    set_env(&vars);
    // Another program's variable that is not UTF-8 is none of delayq's business.
    std::env::set_var(
        std::ffi::OsStr::from_bytes(b"OTHER_PROGRAM_\xff"),
        std::ffi::OsStr::from_bytes(b"\xfe"),
    );
    let handle = builder(&url, &file)
        .set("listeners.\"prec.orders\".concurrency", 128)
        .spawn()
        .await
        .expect("spawn");
    clear_env(&vars);

    let config = handle.config();
    let orders = config.listener("prec.orders").expect("listed");
    let source = |option: &str| {
        orders
            .get(option)
            .map(|s| (s.value.clone(), s.source.clone()))
    };
    let in_file = |line| ConfigSource::File {
        path: file.clone(),
        line,
    };
    let env = |v: &str| ConfigSource::Environment {
        variable: v.to_string(),
    };
    // builder > environment > file > attribute
    assert_eq!(
        source("concurrency"),
        Some(("128".into(), ConfigSource::Builder))
    );
    // environment > file > attribute
    assert_eq!(
        source("max_attempts"),
        Some(("3".into(), env("DELAYQ_LISTENER_PREC_ORDERS_MAX_ATTEMPTS")))
    );
    // file > default
    assert_eq!(source("ack_timeout"), Some(("45s".into(), in_file(8))));
    assert_eq!(
        source("backoff"),
        Some((
            "fixed(20ms)".into(),
            env("DELAYQ_LISTENER_PREC_ORDERS_BACKOFF")
        ))
    );
    let remind = config.listener("prec-remind").expect("listed");
    assert!(!remind.enabled);
    assert_eq!(
        remind
            .get("max_attempts")
            .map(|s| (s.value.clone(), s.source.clone())),
        Some(("16".into(), ConfigSource::Default))
    );
    // The attribute, where nothing above it says otherwise: a second runtime without the
    // environment and file.
    let runtime = |o: &str| {
        config
            .runtime(o)
            .map(|s| (s.value.clone(), s.source.clone()))
    };
    assert_eq!(
        runtime("namespace"),
        Some(("from-env".into(), env("DELAYQ_NAMESPACE")))
    );
    assert_eq!(runtime("shutdown_grace"), Some(("3s".into(), in_file(2))));
    assert_eq!(
        runtime("redis_url").map(|r| r.1),
        Some(ConfigSource::Builder)
    );

    // The effective options are the ones that run: three attempts 20 ms apart, then dead.
    let producer = handle.producer();
    let id = producer
        .send("prec.orders", &1u32, Duration::ZERO)
        .await
        .unwrap();
    producer
        .send("prec-remind", &1u32, Duration::ZERO)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let dead = loop {
        let dead = producer.dead_letters("prec.orders", 0..10).await.unwrap();
        if !dead.is_empty() || tokio::time::Instant::now() > deadline {
            break dead;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(dead.len(), 1, "dead-lettered within 10 s");
    assert_eq!(dead[0].id, id);
    assert_eq!(
        ORDERS_RUNS.load(Ordering::SeqCst),
        3,
        "max_attempts from the environment"
    );
    // Switched off by the environment: it never ran, and health says so while ready.
    assert_eq!(REMIND_RUNS.load(Ordering::SeqCst), 0);
    let health = handle.health().await;
    assert_eq!(health.redis, RedisHealth::Up);
    assert!(health.ready && health.live, "{health:?}");
    let state = |kind: Kind, name: &str| {
        health
            .listeners
            .iter()
            .find(|l| l.kind == kind && l.name == name)
            .map(|l| l.state.clone())
    };
    assert_eq!(
        state(Kind::Listener, "prec-remind"),
        Some(ListenerState::Disabled)
    );
    assert_eq!(
        state(Kind::Listener, "prec.orders"),
        Some(ListenerState::Running)
    );
    assert_eq!(handle.topics(), vec!["prec.orders"]);
    handle.shutdown().await.unwrap();

    // Without the file and the environment, the attribute's values and the defaults.
    let handle = Runtime::builder()
        .redis_url(&url)
        .namespace("plain")
        .topics(["prec.orders"])
        .spawn()
        .await
        .unwrap();
    let orders = handle.config().listener("prec.orders").unwrap().clone();
    let source = |option: &str| {
        orders
            .get(option)
            .map(|s| (s.value.clone(), s.source.clone()))
    };
    assert_eq!(
        source("concurrency"),
        Some(("8".into(), ConfigSource::Attribute))
    );
    assert_eq!(
        source("max_attempts"),
        Some(("9".into(), ConfigSource::Attribute))
    );
    assert_eq!(
        source("ack_timeout"),
        Some(("30s".into(), ConfigSource::Default))
    );
    handle.shutdown().await.unwrap();
}
