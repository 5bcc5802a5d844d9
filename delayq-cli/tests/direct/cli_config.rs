//! `delayq config check`: a configuration file checked offline (no Redis answers at the URL
//! given), with the runtime's own reader.

use crate::common::delayq;

/// No Redis listens here: `config check` must not need one.
const NO_REDIS: &str = "redis://127.0.0.1:1";

#[test]
fn a_sound_file_is_listed_with_its_lines() {
    let contract = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/delayq.toml");
    let run = delayq(NO_REDIS, &["config", "check", contract]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("ok, 7 options"), "{}", run.stdout);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["16", "listeners.\"order.timeout\".concurrency", "32"]),
        "{}",
        run.stdout
    );
    let json = delayq(NO_REDIS, &["--json", "config", "check", contract]).json();
    assert_eq!(json["settings"][0]["key"], "namespace");
    assert_eq!(json["settings"][0]["line"], 6);
}

#[test]
fn every_problem_is_named_with_its_line_and_the_nearest_name_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delayq.toml");
    std::fs::write(
        &path,
        "namespce = \"shop\"\n\n[listeners.\"order.timeout\"]\nconcurency = 64\nmax_attempts = \"five\"\n\n[listeners.\"evil\\u001b[31m\"]\nenabled = no\n",
    )
    .unwrap();
    let run = delayq(NO_REDIS, &["config", "check", path.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    // A syntax error stops the reading: only it is reported.
    assert!(run.stderr.contains("delayq.toml:8: "), "{}", run.stderr);
    assert!(
        !run.stderr.contains('\u{1b}'),
        "escape sequences are shown escaped"
    );

    std::fs::write(
        &path,
        "namespce = \"shop\"\n\n[listeners.\"order.timeout\"]\nconcurency = 64\nmax_attempts = \"five\"\n\n[streams.\"orders.v1\".billing]\nmax_attempts = 3\n\n[listeners.\"evil\\u001b[31m\"]\nbatch = 3\n",
    )
    .unwrap();
    let run = delayq(NO_REDIS, &["config", "check", path.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let shown = path.display().to_string();
    for expected in [
        format!("{shown}:1: namespce: unknown key; did you mean \"namespace\"?"),
        format!("{shown}:4: listeners.\"order.timeout\".concurency: unknown option of a delay listener; did you mean \"concurrency\"?"),
        format!("{shown}:5: listeners.\"order.timeout\".max_attempts: expected a whole number from 1 to 1000000, found \"five\""),
        format!("{shown}:8: streams.\"orders.v1\".billing.max_attempts: unknown option of a stream listener; did you mean \"max_deliveries\"?"),
    ] {
        assert!(run.stderr.contains(&expected), "missing {expected:?} in\n{}", run.stderr);
    }
    assert!(run.stderr.contains("5 problems"), "{}", run.stderr);
    assert!(
        !run.stderr.contains('\u{1b}'),
        "escape sequences are shown escaped: {:?}",
        run.stderr
    );
    let json = delayq(
        NO_REDIS,
        &["--json", "config", "check", path.to_str().unwrap()],
    )
    .json();
    assert!(json["error"].as_str().unwrap().contains("namespce"));
}

#[test]
fn a_password_in_the_redis_url_is_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delayq.toml");
    std::fs::write(&path, "redis_url = \"redis://app:hunter2@10.0.0.1:6379\"\n").unwrap();
    let path = path.to_str().unwrap();
    let run = delayq(NO_REDIS, &["config", "check", path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("redis://app:***@10.0.0.1:6379"),
        "{}",
        run.stdout
    );
    let json = delayq(NO_REDIS, &["--json", "config", "check", path]);
    for out in [&run.stdout, &run.stderr, &json.stdout, &json.stderr] {
        assert!(!out.contains("hunter2"), "the password shows in {out}");
    }
}

#[test]
fn a_missing_file_exits_1() {
    let run = delayq(NO_REDIS, &["config", "check", "/nonexistent/delayq.toml"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot read the configuration file"),
        "{}",
        run.stderr
    );
}
