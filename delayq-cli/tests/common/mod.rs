//! What the CLI's test binaries share: running the real `delayq` binary.

use std::process::Command;

use serde_json::Value;

/// What a run of `delayq` gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

/// Runs `delayq --redis-url URL ARGS…` in the default namespace.
pub fn delayq(url: &str, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .arg("--redis-url")
        .arg(url)
        .args(args)
        .env_remove("DELAYQ_NAMESPACE")
        .output()
        .expect("run delayq");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The line of a table that starts with `first` (after its padding), split into cells.
#[allow(dead_code)] // not every test binary reads tables
pub fn table_row(table: &str, first: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|cells| cells.first().map(String::as_str) == Some(first))
        .unwrap_or_else(|| panic!("no row {first:?} in\n{table}"))
}
