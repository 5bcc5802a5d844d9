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
mod delay_hand_edited_keys;
mod delay_outage_calls;
mod delay_peek_bounded;
mod delay_process_signals;
mod delay_protocol_bad_input;
mod delay_protocol_batch;
mod delay_protocol_random;
mod delay_protocol_transitions;
mod delay_replicated_sends;
mod delay_resent_ids;
mod delay_send_envelopes;
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

/// Nothing in this binary registers a listener, a stream listener, a leader task or a schedule
/// (whichever way it is written: an attribute, a crate path, a kit macro): one would run in
/// every test here that starts a runtime. Give such a file a binary of its own.
#[test]
fn this_binary_registers_no_listener() {
    delayq_dev::assert_registers_no_listener();
}
