//! A [`Flow`]'s checks before anything is written (names, topics, payloads, edges, no
//! cycle), and each step's record as the scripts keep it.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::build::{Flow, OnFailure, MAX_FLOW_STEPS};
use crate::error::{Error, Result};
use crate::names::validate_topic;

/// The longest step name, in bytes.
const MAX_STEP_NAME: usize = 128;

/// A stored record's fixed part (topic, options, `next`) and its `after` (the steps it waits
/// for): two JSON texts, the second after the first newline (see `record_parts` in
/// workflow/prelude.lua), or one with `after` within (written by an earlier build). Each is
/// `Null` where it does not parse.
pub(crate) fn parse_record(raw: &str) -> (serde_json::Value, serde_json::Value) {
    let (main, after) = match raw.split_once('\n') {
        Some((main, after)) => (main, Some(after)),
        None => (raw, None),
    };
    let mut rec: serde_json::Value = serde_json::from_str(main).unwrap_or_default();
    let after = match after {
        Some(a) => serde_json::from_str(a).unwrap_or_default(),
        None => rec["after"].take(),
    };
    (rec, after)
}

/// A checked step, ready to write: its record (JSON), how many steps it waits for, its
/// payload.
pub(crate) struct Checked {
    pub(crate) name: String,
    pub(crate) record: String,
    pub(crate) deps: usize,
    pub(crate) payload: Vec<u8>,
}

fn refuse(reason: String) -> Error {
    Error::InvalidFlow { reason }
}

/// Checks `flow` (names, topics, payloads within `max_payload`, edges, no cycle) and makes
/// each step's record.
pub(crate) fn check(flow: Flow, max_payload: usize) -> Result<Vec<Checked>> {
    if let Some(misuse) = flow.misuse {
        return Err(refuse(misuse));
    }
    if flow.steps.is_empty() {
        return Err(refuse("it has no step".into()));
    }
    if flow
        .ttl
        .is_some_and(|t| t < std::time::Duration::from_secs(1))
    {
        return Err(refuse("its ttl is under 1s".into()));
    }
    if flow.steps.len() > MAX_FLOW_STEPS {
        return Err(refuse(format!(
            "it has {} steps, over the limit of {MAX_FLOW_STEPS}",
            flow.steps.len()
        )));
    }
    let mut index = HashMap::new();
    for (i, s) in flow.steps.iter().enumerate() {
        let bad = if s.name.is_empty() || s.name.len() > MAX_STEP_NAME {
            Some(format!("a step name is 1 to {MAX_STEP_NAME} bytes"))
        } else if s.name.chars().any(char::is_control) {
            Some("a step name holds no control character".into())
        } else {
            None
        };
        if let Some(why) = bad {
            return Err(refuse(format!("step {:?}: {why}", s.name)));
        }
        if index.insert(s.name.as_str(), i).is_some() {
            return Err(refuse(format!("two steps are named {:?}", s.name)));
        }
        validate_topic(&s.topic).map_err(|e| refuse(format!("step {:?}: {e}", s.name)))?;
        match &s.payload {
            Err(e) => {
                return Err(refuse(format!(
                    "step {:?}: its payload does not encode as JSON: {e}",
                    s.name
                )))
            }
            Ok(p) if p.len() > max_payload => {
                return Err(refuse(format!(
                    "step {:?}: its payload of {} bytes is over the limit of {max_payload}",
                    s.name,
                    p.len()
                )))
            }
            Ok(_) => {}
        }
        if s.key
            .as_ref()
            .is_some_and(|k| k.len() > crate::delay::MAX_KEY_LEN)
        {
            return Err(refuse(format!(
                "step {:?}: its key is over {} bytes",
                s.name,
                crate::delay::MAX_KEY_LEN
            )));
        }
        // Due by the end of year 9999 (what a send refuses past), from whenever it is sent.
        if s.delay > std::time::Duration::from_secs(100 * 365 * 86_400) {
            return Err(refuse(format!(
                "step {:?}: its delay is over 100 years",
                s.name
            )));
        }
        if s.max_attempts == Some(0) {
            return Err(refuse(format!(
                "step {:?}: max_attempts must be at least 1",
                s.name
            )));
        }
    }
    let mut next: Vec<Vec<(usize, OnFailure)>> = vec![Vec::new(); flow.steps.len()];
    for (i, s) in flow.steps.iter().enumerate() {
        let mut seen = HashSet::new();
        for (dep, policy) in &s.after {
            let Some(&d) = index.get(dep.as_str()) else {
                return Err(refuse(format!(
                    "step {:?} waits for {dep:?}, which is not a step of the flow",
                    s.name
                )));
            };
            if d == i {
                return Err(refuse(format!("step {:?} waits for itself", s.name)));
            }
            if !seen.insert(d) {
                return Err(refuse(format!(
                    "step {:?} names {dep:?} twice in after",
                    s.name
                )));
            }
            next[d].push((i, *policy));
        }
    }
    if let Some(cycle) = find_cycle(&next) {
        let names: Vec<&str> = cycle.iter().map(|&i| flow.steps[i].name.as_str()).collect();
        return Err(refuse(format!(
            "its steps wait for each other in a cycle: {}",
            names.join(" -> ")
        )));
    }
    Ok(flow
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let edges = |list: Vec<(&str, OnFailure)>| -> Value {
                list.into_iter().map(|(n, p)| json!([n, p.word()])).collect()
            };
            let record = json!({
                "topic": s.topic,
                "opts": {
                    "delay_ms": s.delay.as_millis() as u64,
                    "priority": s.priority.map(|p| p.level()),
                    "key": s.key,
                    "max_attempts": s.max_attempts,
                },
                "next": edges(next[i].iter().map(|&(d, p)| (flow.steps[d].name.as_str(), p)).collect()),
            });
            let after = edges(s.after.iter().map(|(d, p)| (d.as_str(), *p)).collect());
            Checked {
                name: s.name.clone(),
                record: format!("{record}\n{after}"),
                deps: s.after.len(),
                payload: s.payload.clone().unwrap_or_default(),
            }
        })
        .collect())
}

/// A cycle of `next` (the steps on it, first repeated last), if there is one.
fn find_cycle(next: &[Vec<(usize, OnFailure)>]) -> Option<Vec<usize>> {
    // 0 unseen, 1 on the path, 2 done; iterative depth-first search.
    let mut mark = vec![0u8; next.len()];
    for start in 0..next.len() {
        if mark[start] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = 1;
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            if let Some(&(to, _)) = next[node].get(*edge) {
                *edge += 1;
                match mark[to] {
                    0 => {
                        mark[to] = 1;
                        path.push((to, 0));
                    }
                    1 => {
                        let from = path.iter().position(|&(n, _)| n == to).unwrap_or(0);
                        let mut cycle: Vec<usize> = path[from..].iter().map(|&(n, _)| n).collect();
                        cycle.push(to);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                mark[node] = 2;
                path.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(flow: Flow) -> String {
        match check(flow, 1 << 20) {
            Err(Error::InvalidFlow { reason }) => reason,
            other => panic!("{:?}", other.map(|c| c.len())),
        }
    }

    #[test]
    fn bad_flows_are_refused_naming_the_step() {
        let cyc = Flow::new()
            .step("a", "t", &1)
            .after(["c"])
            .step("b", "t", &1)
            .after(["a"])
            .step("c", "t", &1)
            .after(["b"]);
        let r = reason(cyc);
        assert!(
            r.contains("cycle") && r.contains("a") && r.contains("b") && r.contains("c"),
            "{r}"
        );
        assert!(reason(Flow::new().step("a", "t", &1).after(["x"]))
            .contains("\"x\", which is not a step"));
        assert!(reason(Flow::new().step("a", "t", &1).step("a", "t", &2))
            .contains("two steps are named \"a\""));
        assert!(reason(Flow::new().step("a", "bad topic", &1)).contains("step \"a\""));
        assert!(reason(Flow::new().step("a", "t", &"x".repeat(2 << 20))).contains("over the limit"));
        assert!(reason(Flow::new().after(["a"])).contains("before any step"));
        assert!(reason(
            Flow::new()
                .step("a", "t", &1)
                .step("b", "t", &1)
                .after(["a"])
                .if_failed("z", OnFailure::Ignore)
        )
        .contains("does not wait for"));
        assert!(reason(Flow::new()).contains("no step"));
        let mut big = Flow::new();
        for i in 0..=MAX_FLOW_STEPS {
            big = big.step(&format!("s{i}"), "t", &i);
        }
        assert!(reason(big).contains("over the limit of 10000"));
    }

    #[test]
    fn a_diamond_is_checked_with_its_edges() {
        let ok = check(
            Flow::new()
                .step("a", "t", &1)
                .step("b", "t", &1)
                .after(["a"])
                .step("c", "t", &1)
                .after(["a"])
                .step("d", "u", &1)
                .after(["b", "c"])
                .if_failed("c", OnFailure::Ignore),
            1 << 20,
        )
        .unwrap();
        assert_eq!(ok.iter().map(|c| c.deps).collect::<Vec<_>>(), [0, 1, 1, 2]);
        assert!(
            ok[0]
                .record
                .contains(r#""next":[["b","fail"],["c","fail"]]"#),
            "{}",
            ok[0].record
        );
        assert!(
            ok[2].record.contains(r#""next":[["d","ignore"]]"#),
            "{}",
            ok[2].record
        );
    }
}
