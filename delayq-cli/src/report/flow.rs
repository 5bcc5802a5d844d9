//! A flow as `delayq flow show` and the dashboard give it: JSON, and a tree in text.

use std::collections::HashMap;
use std::time::SystemTime;

use delayq_core::{FlowInfo, OnFailure, StepInfo};
use serde_json::{json, Value};

fn ms(t: Option<SystemTime>) -> Value {
    t.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(Value::Null, |d| json!(d.as_millis() as u64))
}

fn step_json(s: &StepInfo) -> Value {
    json!({
        "name": s.name,
        "topic": s.topic,
        "state": s.state.name(),
        "run": s.gen,
        "after": s.after.iter().map(|(d, p)| json!({"step": d, "if_failed": if *p == OnFailure::Ignore { "ignore" } else { "fail" }})).collect::<Vec<_>>(),
        "reason": s.reason,
        "sent_at_ms": ms(s.sent_at),
        "ended_at_ms": ms(s.ended_at),
    })
}

pub(crate) fn flow_json(f: &FlowInfo) -> Value {
    json!({
        "id": f.id.as_str(),
        "state": f.state.name(),
        "reason": f.reason,
        "created_at_ms": ms(Some(f.created_at)),
        "ended_at_ms": ms(f.ended_at),
        "steps": f.steps.iter().map(step_json).collect::<Vec<_>>(),
    })
}

/// The flow as a tree in text: each step under the steps it waits for (a step with several
/// is shown under the first, and named "also after" the others).
pub(crate) fn flow_tree(f: &FlowInfo) -> String {
    let mut out = format!("flow {} {}", f.id, f.state.name());
    if let Some(r) = &f.reason {
        out.push_str(&format!(": {r}"));
    }
    out.push('\n');
    let by_name: HashMap<&str, &StepInfo> = f.steps.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut children: HashMap<&str, Vec<&StepInfo>> = HashMap::new();
    let mut roots = Vec::new();
    for s in &f.steps {
        match s.after.first() {
            Some((first, _)) if by_name.contains_key(first.as_str()) => {
                children.entry(first.as_str()).or_default().push(s)
            }
            _ => roots.push(s),
        }
    }
    fn line(
        out: &mut String,
        s: &StepInfo,
        depth: usize,
        children: &HashMap<&str, Vec<&StepInfo>>,
    ) {
        out.push_str(&"  ".repeat(depth + 1));
        out.push_str(&format!(
            "{} [{}] {} run {}",
            s.name,
            s.topic,
            s.state.name(),
            s.gen
        ));
        if s.after.len() > 1 {
            let also: Vec<String> = s.after[1..]
                .iter()
                .map(|(d, p)| {
                    if *p == OnFailure::Ignore {
                        format!("{d} (ignore failure)")
                    } else {
                        d.clone()
                    }
                })
                .collect();
            out.push_str(&format!(", also after {}", also.join(", ")));
        }
        if let Some(r) = &s.reason {
            out.push_str(&format!(": {r}"));
        }
        out.push('\n');
        for c in children.get(s.name.as_str()).into_iter().flatten() {
            line(out, c, depth + 1, children);
        }
    }
    for r in roots {
        line(&mut out, r, 0, &children);
    }
    out.trim_end().to_string()
}
