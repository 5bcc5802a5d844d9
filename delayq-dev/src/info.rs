//! Reading Redis' `INFO` output.

use std::collections::HashMap;

/// One command's calls and the µs Redis spent in it (a script's: its inner commands included),
/// from `INFO commandstats`; zeros when it was not called.
pub fn command_stats(info: &str, name: &str) -> (f64, f64) {
    let prefix = format!("cmdstat_{name}:");
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or("");
    let field = |key: &str| -> f64 {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    (field("calls="), field("usec="))
}

/// Parses `INFO commandstats` into command name → calls.
pub fn parse_command_calls(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

/// The sha Redis gives the delay script `name` as the runtime loads it (the parts of its
/// prelude it uses in front): to tell that script's calls apart in the slow log or MONITOR.
pub fn delay_script_sha(name: &str) -> String {
    delayq_core::protocol::delay_script_hash(name)
        .unwrap_or_else(|| panic!("no delay script {name}"))
        .to_string()
}

/// Makes Redis' slow log keep every command (up to `max_len` of them), emptied first; read it
/// with [`slowlog_script_calls`].
pub fn slowlog_every_command(c: &mut redis::Connection, max_len: u64) {
    let _: () = redis::pipe()
        .cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-max-len")
        .arg(max_len)
        .ignore()
        .cmd("SLOWLOG")
        .arg("RESET")
        .ignore()
        .cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .ignore()
        .query(c)
        .expect("slow log on");
}

/// The script calls in Redis' slow log (every command is there once `slowlog-log-slower-than`
/// is 0): each EVALSHA's arguments after the command name (sha, number of keys, keys, then
/// ARGV), at most the 31 Redis keeps.
pub fn slowlog_script_calls(c: &mut redis::Connection) -> Vec<Vec<String>> {
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(c)
        .expect("SLOWLOG GET");
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).to_string(),
        _ => String::new(),
    };
    log.iter()
        .filter_map(|entry| match entry {
            redis::Value::Array(fields) => match fields.get(3) {
                Some(redis::Value::Array(args)) => Some(args.iter().map(text).collect()),
                _ => None,
            },
            _ => None,
        })
        .filter_map(|args: Vec<String>| {
            let (command, rest) = args.split_first()?;
            command
                .eq_ignore_ascii_case("evalsha")
                .then(|| rest.to_vec())
        })
        .collect()
}
