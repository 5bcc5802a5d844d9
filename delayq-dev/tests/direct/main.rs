//! The tests that register no listener, in one binary: each test binary costs the build a link
//! and a copy of the kit's code, and these need no binary of their own. A test file that
//! defines a listener (`#[delay_listener]`, `#[stream_listener]`, `#[leader_task]`,
//! `#[schedule]`) keeps a binary of its own, since `start()` runs every listener its binary
//! registers; nextest still runs each test here in a process of its own.
//!
//! One file: `cargo nextest run -E 'test(/^delay_protocol_random::/)'`.

mod code_layout;
mod config_secrets_unix;
mod delay_batch_retried;
mod delay_chaos_consumers;
mod delay_claims_beside;
mod delay_cluster_migration;
mod delay_outage_calls;
mod delay_peek_bounded;
mod delay_process_signals;
mod delay_protocol_bad_input;
mod delay_protocol_batch;
mod delay_protocol_random;
mod delay_protocol_transitions;
mod delay_replicated_sends;
mod delay_resent_ids;
mod delay_slow_consumers;
mod examples_run;
mod order_service;
mod room_waiting;
mod room_waiting_deployments;
mod room_waiting_http;
mod room_waiting_processes;
mod schedule_calendar;
mod schedule_calendar_zones;
mod stream_processes;

/// No file of this binary defines a listener, a leader task or a schedule (directly or with the
/// kit's `idle_listeners!`): one would run in every test here that starts a runtime.
#[test]
fn no_file_here_registers_a_listener() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/direct");
    let marks = [
        "#[delay_listener",
        "#[stream_listener",
        "#[leader_task",
        "#[schedule",
        "idle_listeners!",
        "inventory::submit",
    ];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for mark in marks {
            let found = text
                .lines()
                .map(str::trim_start)
                .any(|l| !l.starts_with("//") && !l.starts_with('"') && l.contains(mark));
            assert!(
                !found,
                "{} has {mark}: give it a binary of its own",
                path.display()
            );
        }
    }
}
