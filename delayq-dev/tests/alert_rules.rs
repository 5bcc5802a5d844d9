//! The alerting rules in docs/alerts pass their unit tests (`promtool test rules`, Debian's
//! `prometheus` package), and every alert of the rules file is exercised there.

use std::collections::BTreeSet;
use std::process::Command;

fn alerts_dir() -> String {
    format!("{}/../docs/alerts", env!("CARGO_MANIFEST_DIR"))
}

/// The names after `key` at the start of a line (trimmed), as the YAML files write them.
fn names_after(text: &str, key: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key))
        .map(|n| n.trim().to_string())
        .collect()
}

#[test]
fn every_alert_is_tested() {
    let dir = alerts_dir();
    let rules = std::fs::read_to_string(format!("{dir}/delayq.rules.yml")).unwrap();
    let tests = std::fs::read_to_string(format!("{dir}/delayq.rules.test.yml")).unwrap();
    let alerts = names_after(&rules, "- alert:");
    assert!(alerts.len() >= 10, "alerts found: {alerts:?}");
    let tested = names_after(&tests, "alertname:");
    let untested: Vec<_> = alerts.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "alerts without a promtool test: {untested:?}"
    );
}

#[test]
fn the_rules_pass_promtool_test_rules() {
    let out = Command::new("promtool")
        .args(["test", "rules", "delayq.rules.test.yml"])
        .current_dir(alerts_dir())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool did not run: {e}. It tests docs/alerts/delayq.rules.yml; install it \
                 (Debian/Ubuntu: `apt-get install -y prometheus`, which .ci/run does) and run \
                 the tests again"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool test rules failed:\n{text}");
    assert!(text.contains("SUCCESS"), "{text}");
}
