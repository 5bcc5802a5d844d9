//! The dashboard's dead letters one by one or all: the list, and a replay or purge of one (by
//! the id in the body, as the page sends it, or in the path, as scripts may) or of all.
//!
//! The page never puts an id in a path: a browser folds a segment `.` or `..` (also written
//! `%2e`) before the request leaves it, so `/dead/../replay` would reach `/replay`.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq_core::MessageId;
use serde::Deserialize;
use serde_json::json;

use super::board::{audit, error, Board, Shared};
use crate::failure::Failure;
use crate::namespace::{change_dead, DeadAction};
use crate::report;

#[derive(Deserialize)]
pub(super) struct Limit {
    limit: Option<usize>,
}

/// The first dead letters of `topic` (`?limit=`, 50 by default, at most 1,000).
pub(super) async fn list(
    State(board): Shared,
    Path(topic): Path<String>,
    Query(q): Query<Limit>,
) -> Result<Json<serde_json::Value>, Failure> {
    let limit = q.limit.unwrap_or(50).min(1_000);
    let letters = board.producer.dead_letters(&topic, 0..limit).await?;
    Ok(Json(json!(letters
        .iter()
        .map(report::dead_json)
        .collect::<Vec<_>>())))
}

/// A write on dead letters: `action` on one (`id`) or all of `topic`'s.
async fn write(
    board: &Board,
    from: SocketAddr,
    topic: &str,
    id: Option<&str>,
    action: &str,
) -> Response {
    let action = match DeadAction::from_route(action) {
        Ok(action) => action,
        Err(failure) => return failure.into_response(),
    };
    let id = match id.map(MessageId::new).transpose() {
        Ok(id) => id,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let what = match &id {
        Some(id) => format!("{} dead letter {id} of {topic}", action.verb()),
        None => format!("{} every dead letter of {topic}", action.verb()),
    };
    match change_dead(&board.producer, topic, id.as_ref(), action).await {
        Ok(n) => {
            audit(board, from, &what, &format!("{n} {}", action.done()));
            Json(json!({ action.done(): n })).into_response()
        }
        Err(failure) => {
            audit(board, from, &what, &format!("{failure:?}"));
            failure.into_response()
        }
    }
}

/// `POST /api/topics/{topic}/dead/{id}/{action}`: the id in the path (percent-encoded; not
/// `.` or `..`, which no client can send there).
pub(super) async fn write_one(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((topic, id, action)): Path<(String, String, String)>,
) -> Response {
    write(&board, from, &topic, Some(&id), &action).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct One {
    id: String,
}

/// `POST /api/topics/{topic}/dead-letter/{action}` with `{"id": "…"}`: any valid id.
pub(super) async fn write_named(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((topic, action)): Path<(String, String)>,
    body: Result<Json<One>, axum::extract::rejection::JsonRejection>,
) -> Response {
    match body {
        Ok(Json(one)) => write(&board, from, &topic, Some(&one.id), &action).await,
        Err(e) => error(
            StatusCode::BAD_REQUEST,
            format!("the body must be {{\"id\": \"…\"}}: {e}"),
        ),
    }
}

/// `POST /api/topics/{topic}/dead-all/{action}`.
pub(super) async fn write_all(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Path((topic, action)): Path<(String, String)>,
) -> Response {
    write(&board, from, &topic, None, &action).await
}
