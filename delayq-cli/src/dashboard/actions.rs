//! The dashboard's writes beyond dead letters one by one or all: a topic paused or resumed; a
//! schedule run now, suspended or resumed; a test message sent; dead letters replayed or
//! purged by selection. Each is refused as every write is (by the guard, `board::may_write`)
//! and leaves an audit line.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq_core::{MessageId, SendOptions, SendOutcome};
use serde::Deserialize;
use serde_json::{json, Value};

use super::board::{audit, error, known_topic, Shared};
use crate::failure::Failure;
use crate::namespace::{change_dead, change_schedule, DeadAction, ScheduleAction};

/// Ids one selection may name (a page shows at most 1,000 dead letters).
const MAX_SELECTED: usize = 1_000;

/// `pause` or `resume` a topic (`delayq pause|resume TOPIC`): every process stops (or starts
/// again) claiming its messages.
pub(super) async fn flow_write(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((topic, action)): Path<(String, String)>,
) -> Response {
    let p = &board.producer;
    let pause = match action.as_str() {
        "pause" => true,
        "resume" => false,
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                format!("no action {action:?}; pause or resume"),
            )
        }
    };
    if let Err(failure) = known_topic(&board, &topic).await {
        return failure.into_response();
    }
    let changed = if pause {
        p.pause(&topic).await
    } else {
        p.resume(&topic).await
    };
    let outcome = match changed {
        Ok(true) if pause => "paused",
        Ok(true) => "resumed",
        Ok(false) if pause => "already_paused",
        Ok(false) => "not_paused",
        Err(e) => {
            audit(&board, from, &format!("{action} {topic}"), &e.to_string());
            return Failure::from(e).into_response();
        }
    };
    audit(&board, from, &format!("{action} {topic}"), outcome);
    Json(json!({ "outcome": outcome })).into_response()
}

/// `run`, `suspend` or `resume` schedule `name`.
pub(super) async fn schedule_write(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((name, action)): Path<(String, String)>,
) -> Response {
    let act = match action.as_str() {
        "run" => ScheduleAction::Run,
        "suspend" => ScheduleAction::Suspend,
        "resume" => ScheduleAction::Resume,
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                format!("no action {action:?}; run, suspend or resume"),
            )
        }
    };
    let what = format!("{action} schedule {name}");
    match change_schedule(&board.producer, &name, act).await {
        Ok(outcome) => {
            audit(&board, from, &what, &outcome);
            Json(json!({ "outcome": outcome })).into_response()
        }
        Err(failure) => {
            audit(&board, from, &what, &format!("{failure:?}"));
            failure.into_response()
        }
    }
}

#[derive(Deserialize)]
pub(super) struct TestMessage {
    payload: Value,
    /// A duration as `delayq send --delay` reads it (default: due now).
    delay: Option<String>,
    id: Option<String>,
}

/// Sends a test message to a known topic: `{"payload": …, "delay": "5s", "id": "…"}`.
pub(super) async fn send_test(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path(topic): Path<String>,
    body: Result<Json<TestMessage>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(m) = match body {
        Ok(m) => m,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the body: {e}")),
    };
    let p = &board.producer;
    if let Err(failure) = known_topic(&board, &topic).await {
        return failure.into_response();
    }
    let delay = match m.delay.as_deref().map(crate::args::delay) {
        None => Duration::ZERO,
        Some(Ok(d)) => d,
        Some(Err(why)) => return error(StatusCode::BAD_REQUEST, format!("delay: {why}")),
    };
    let mut options = SendOptions::new().delay(delay);
    if let Some(id) = m.id.filter(|id| !id.is_empty()) {
        options = options.id(id);
    }
    let what = format!("send a test message to {topic}");
    match p.send_with(&topic, &m.payload, options).await {
        Ok(outcome) => {
            let (word, id) = match &outcome {
                SendOutcome::Created(id) => ("created", id),
                SendOutcome::Duplicate(id) => ("duplicate", id),
                SendOutcome::Replaced(id) => ("replaced", id),
            };
            audit(&board, from, &what, &format!("{word} {id}"));
            Json(json!({ "outcome": word, "id": id.as_str() })).into_response()
        }
        Err(e) => {
            audit(&board, from, &what, &e.to_string());
            Failure::from(e).into_response()
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Selection {
    ids: Vec<String>,
}

/// `replay` or `purge` the dead letters of `topic` named in `{"ids": [...]}`: how many
/// changed, and the ids that were not dead (someone else replayed or purged them meanwhile).
pub(super) async fn dead_selected(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((topic, action)): Path<(String, String)>,
    body: Result<Json<Selection>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let action = match DeadAction::from_route(&action) {
        Ok(action) => action,
        Err(failure) => return failure.into_response(),
    };
    let ids = match body {
        Ok(Json(s)) if s.ids.is_empty() => {
            return error(StatusCode::BAD_REQUEST, "no ids selected")
        }
        Ok(Json(s)) if s.ids.len() > MAX_SELECTED => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("at most {MAX_SELECTED} ids at once"),
            )
        }
        Ok(Json(s)) => s.ids,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the body: {e}")),
    };
    let ids: Vec<MessageId> = match ids.into_iter().map(MessageId::new).collect() {
        Ok(ids) => ids,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let what = format!(
        "{} {} selected dead letters of {topic}",
        action.verb(),
        ids.len()
    );
    let (mut changed, mut missing) = (0, Vec::new());
    for id in &ids {
        match change_dead(&board.producer, &topic, Some(id), action).await {
            Ok(n) => changed += n,
            Err(Failure::NotFound(_)) => missing.push(id.as_str().to_string()),
            Err(failure) => {
                audit(
                    &board,
                    from,
                    &what,
                    &format!("{changed} {} then {failure:?}", action.done()),
                );
                return failure.into_response();
            }
        }
    }
    audit(&board, from, &what, &format!("{changed} {}", action.done()));
    Json(json!({ action.done(): changed, "not_dead": missing })).into_response()
}
