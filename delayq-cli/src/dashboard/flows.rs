//! The dashboard's flows: the newest flows, one flow with a picture of its graph (an SVG made
//! here, each step a box coloured by its state, placed in columns by how many steps come
//! before it), and its retry and cancel, refused and audited as every write is.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq_core::{FlowId, FlowInfo, StepState};
use serde_json::{json, Value};

use super::board::{audit, error, Shared};
use crate::failure::Failure;
use crate::report::flow_json;

/// The newest flows listed.
const LISTED: usize = 100;
/// Steps drawn at most (a bigger flow is drawn in part and says so).
const DRAWN: usize = 200;

pub(super) async fn list(State(board): Shared) -> Result<Json<Value>, Failure> {
    let flows = board.producer.flows(None, LISTED).await?;
    Ok(Json(json!(flows
        .iter()
        .map(|(id, s)| json!({"id": id.as_str(), "state": s.name()}))
        .collect::<Vec<_>>())))
}

fn flow_id(id: &str) -> Result<FlowId, Failure> {
    Ok(FlowId::new(id)?)
}

pub(super) async fn show(
    State(board): Shared,
    Path(id): Path<String>,
) -> Result<Json<Value>, Failure> {
    let id = flow_id(&id)?;
    let Some(f) = board.producer.flow(&id).await? else {
        return Err(Failure::NotFound(format!("no flow {id}")));
    };
    let mut v = flow_json(&f);
    v["svg"] = json!(picture(&f));
    Ok(Json(v))
}

/// `retry` or `cancel` flow `id`.
pub(super) async fn write(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    let what = format!("flow {action} {id}");
    let id = match flow_id(&id) {
        Ok(id) => id,
        Err(f) => return f.into_response(),
    };
    let p = &board.producer;
    let outcome = match action.as_str() {
        "retry" => p.retry_flow(&id).await.map(|r| match r {
            None => "no_such_flow".to_string(),
            Some(0) => "nothing_to_retry".to_string(),
            Some(n) => format!("retried {n}"),
        }),
        "cancel" => p
            .cancel_flow(&id)
            .await
            .map(|c| if c { "cancelled" } else { "not_running" }.to_string()),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                format!("no action {action:?}; retry or cancel"),
            )
        }
    };
    match outcome {
        Ok(outcome) => {
            audit(&board, from, &what, &outcome);
            Json(json!({ "outcome": outcome })).into_response()
        }
        Err(e) => {
            audit(&board, from, &what, &e.to_string());
            Failure::from(e).into_response()
        }
    }
}

fn colour(s: StepState) -> &'static str {
    match s {
        StepState::Waiting => "#d0d4da",
        StepState::Ready | StepState::Sent => "#8cb8f0",
        StepState::Done => "#7cc98a",
        StepState::Failed => "#ee8a80",
        StepState::Cancelled => "#b9a3d6",
    }
}

/// Text escaped for SVG.
fn esc(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '&' => "&amp;".into(),
            '"' => "&quot;".into(),
            c if c.is_control() => "\u{fffd}".into(),
            c => c.to_string(),
        })
        .collect()
}

/// The flow's graph as SVG: a column for each depth (steps with nothing before them first),
/// a box a step with its name, topic and state, a line from each dependency (dashed when its
/// failure is ignored).
pub(crate) fn picture(f: &FlowInfo) -> String {
    let steps: Vec<_> = f.steps.iter().take(DRAWN).collect();
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    // Depth: one more than the deepest dependency (a fixpoint: the graph has no cycle).
    let mut depth = vec![0usize; steps.len()];
    for _ in 0..steps.len() {
        let mut changed = false;
        for (i, s) in steps.iter().enumerate() {
            for (d, _) in &s.after {
                if let Some(&j) = index.get(d.as_str()) {
                    if depth[j] + 1 > depth[i] {
                        depth[i] = depth[j] + 1;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let (w, h, gap_x, gap_y) = (170usize, 46usize, 60usize, 14usize);
    let mut rows: HashMap<usize, usize> = HashMap::new();
    let place: Vec<(usize, usize)> = depth
        .iter()
        .map(|&d| {
            let r = rows.entry(d).or_insert(0);
            *r += 1;
            (10 + d * (w + gap_x), 10 + (*r - 1) * (h + gap_y))
        })
        .collect();
    let width = place.iter().map(|p| p.0 + w + 10).max().unwrap_or(200);
    let height = place.iter().map(|p| p.1 + h + 10).max().unwrap_or(60) + 18;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    for (i, s) in steps.iter().enumerate() {
        for (d, policy) in &s.after {
            if let Some(&j) = index.get(d.as_str()) {
                let (x1, y1) = (place[j].0 + w, place[j].1 + h / 2);
                let (x2, y2) = (place[i].0, place[i].1 + h / 2);
                let dash = if *policy == delayq_core::OnFailure::Ignore {
                    r#" stroke-dasharray="4 3""#
                } else {
                    ""
                };
                let _ = write!(
                    svg,
                    r##"<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#667"{dash}/>"##
                );
            }
        }
    }
    for (i, s) in steps.iter().enumerate() {
        let (x, y) = place[i];
        let name: String = s.name.chars().take(24).collect();
        let topic: String = s.topic.chars().take(26).collect();
        let _ = write!(
            svg,
            r##"<g class="step" data-state="{state}"><title>{title}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fill}" stroke="#445"/><text x="{tx}" y="{ty1}" font-weight="bold">{name}</text><text x="{tx}" y="{ty2}">{topic} · {state}</text></g>"##,
            state = s.state.name(),
            title = esc(&format!(
                "{} ({}): {}{}",
                s.name,
                s.topic,
                s.state.name(),
                s.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )),
            fill = colour(s.state),
            tx = x + 8,
            ty1 = y + 19,
            ty2 = y + 36,
            name = esc(&name),
            topic = esc(&topic),
        );
    }
    if f.steps.len() > DRAWN {
        let _ = write!(
            svg,
            r#"<text x="10" y="{}">the first {DRAWN} of {} steps</text>"#,
            height - 6,
            f.steps.len()
        );
    }
    svg.push_str("</svg>");
    svg
}
