//! The CLI's tests that register no listener, in one binary (each test binary costs the build a
//! link); a file that defines a listener or a schedule keeps a binary of its own, since its
//! runtime runs every listener its binary registers. nextest runs each test in its own process.

#[path = "../common/mod.rs"]
mod common;

mod cli_config;
mod cli_config_secrets;
mod cli_find;
mod cli_flow_control;
mod cli_flows;
mod cli_history;
mod cli_result;
mod cli_usage_errors;
mod dashboard_actions;
mod dashboard_bounds;
mod dashboard_flows;
mod dashboard_kit;
mod dashboard_layout;
mod dashboard_odd_ids;
mod dashboard_proxy;
mod dashboard_refusals;

/// Nothing in this binary registers a listener, a stream listener, a leader task or a schedule
/// (whichever way it is written: an attribute, a crate path, a kit macro): one would run in
/// every test here that starts a runtime. Give such a file a binary of its own.
#[test]
fn this_binary_registers_no_listener() {
    delayq_dev::assert_registers_no_listener();
}
