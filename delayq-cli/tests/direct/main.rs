//! The CLI's tests that register no listener, in one binary (each test binary costs the build a
//! link); a file that defines a listener or a schedule keeps a binary of its own, since its
//! runtime runs every listener its binary registers. nextest runs each test in its own process.

#[path = "../common/mod.rs"]
mod common;

mod cli_config;
mod cli_config_secrets;
mod cli_find;
mod cli_flow_control;
mod cli_history;
mod dashboard_actions;

/// No file of this binary defines a listener, a leader task or a schedule: one would run in
/// every test here that starts a runtime.
#[test]
fn no_file_here_registers_a_listener() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/direct");
    let marks = [
        "#[delay_listener",
        "#[stream_listener",
        "#[leader_task",
        "#[schedule",
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
