//! The command line's own errors (issue 50, item 10): with `--json`, an argument clap refuses
//! (a bad `--delay` or `--since`, a missing argument, an unknown command) is `{"error": ...}`
//! on stdout like every other error, exit 2, its text on stderr too; a stdout that cannot
//! be written (`/dev/full`) is exit 1 with a message on stderr, never a panic (101); and
//! `dead replay|purge --help` shows TOPIC before ID.

use std::process::{Command, Stdio};

use delayq_dev::RedisServer;

use crate::common::{delayq, Run};

/// No Redis listens here: none of these reach one.
const NO_REDIS: &str = "redis://127.0.0.1:1";

#[test]
fn json_usage_errors_are_json_on_stdout_and_exit_2() {
    let cases: [(&[&str], &str); 8] = [
        (&["dead"], "delayq dead"),
        (&["send", "t", "{}", "--delay", "soon"], "--delay"),
        (&["stats", "--since", "5s"], "--since"),
        (&["send", "t"], "<JSON>"),
        (&["frobnicate"], "frobnicate"),
        (&["dead", "replay"], "<TOPIC>"),
        (&["peek", "t", "--limit", "many"], "--limit"),
        (&["topics", "--no-such-flag"], "--no-such-flag"),
    ];
    for (args, names) in cases {
        // --json anywhere: before the command, or after it (it is global).
        for json_at_end in [false, true] {
            let mut all = args.to_vec();
            if json_at_end {
                all.push("--json");
            } else {
                all.insert(0, "--json");
            }
            let run = delayq(NO_REDIS, &all);
            assert_eq!(run.code, 2, "{all:?}: {run:?}");
            let value = run.json();
            let error = value["error"]
                .as_str()
                .unwrap_or_else(|| panic!("{all:?}: {value}"));
            assert!(error.contains(names), "{all:?}: {error}");
            assert_eq!(value.as_object().map(|o| o.len()), Some(1), "{value}");
            assert!(
                !error.contains("\u{1b}["),
                "no terminal colours in JSON: {error:?}"
            );
            assert!(run.stderr.contains(names), "{all:?}: {}", run.stderr);
        }
        // Without --json: text on stderr only, as before.
        let run = delayq(NO_REDIS, args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(names), "{args:?}: {}", run.stderr);
    }
    // Help and version are no errors, with or without --json.
    for args in [
        &["--json", "--help"][..],
        &["--json", "--version"],
        &["dead", "--help"],
    ] {
        let run = delayq(NO_REDIS, args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        assert!(!run.stdout.is_empty(), "{args:?}");
    }
}

/// `delayq ARGS` with stdout on `/dev/full`.
fn to_full_disk(url: &str, args: &[&str]) -> Run {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .arg("--redis-url")
        .arg(url)
        .args(args)
        .env_remove("DELAYQ_NAMESPACE")
        .stdout(Stdio::from(full))
        .output()
        .expect("run delayq");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_stdout_that_cannot_be_written_is_exit_1_with_a_message() {
    let server = RedisServer::start();
    let url = server.url();
    let contract = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/delayq.toml");
    for args in [
        &["topics"][..],
        &["--json", "topics"],
        &["config", "check", contract],
        &["--json", "config", "check", contract],
        &["--help"],
        &["--version"],
        &["dead", "replay", "--help"],
    ] {
        let run = to_full_disk(&url, args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("cannot write to stdout"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
    }
    // A failure's own JSON cannot be written either: still its exit code, and its text on
    // stderr.
    let run = to_full_disk(NO_REDIS, &["--json", "send", "t", "{}", "--delay", "soon"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--delay"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn dead_replay_and_purge_help_name_the_topic_before_the_id() {
    for action in ["replay", "purge"] {
        let run = delayq(NO_REDIS, &["dead", action, "--help"]);
        assert_eq!(run.code, 0, "{run:?}");
        let usage = run
            .stdout
            .lines()
            .find(|l| l.starts_with("Usage:"))
            .unwrap_or_else(|| panic!("no usage line in {}", run.stdout));
        assert_eq!(
            usage,
            format!("Usage: delayq dead {action} [OPTIONS] <TOPIC> <ID|--all>")
        );
        // The usage an error prints is the same.
        let run = delayq(NO_REDIS, &["dead", action, "t"]);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(
            run.stderr.contains(&format!(
                "delayq dead {action} [OPTIONS] <TOPIC> <ID|--all>"
            )),
            "{}",
            run.stderr
        );
    }
}
