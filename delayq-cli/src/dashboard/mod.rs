//! `delayq dashboard`: one page (dashboard.html, no build step) that polls a small JSON API
//! served here. Read-only unless started with `--allow-writes`; a write is a POST that must
//! carry `X-Delayq-Confirm: yes` (the page asks first), which a cross-site form cannot send.
//!
//! Who reaches it (`guard`, before every route): a request must name this dashboard in
//! `Host` (the listen address, `localhost`, or a name given with `--allow-host`), so a page
//! on another site whose name was re-pointed at this machine (DNS rebinding) is refused;
//! a write whose `Origin` (or `Sec-Fetch-Site`) says it comes from another site is refused;
//! with `--token`, every API call needs `Authorization: Bearer <token>`.
//!
//! Each write that reaches a route is logged on stdout as one audit line: when, who (the
//! remote address, and whether it presented the token), what, and what came of it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use delayq_core::{MessageId, Producer};
use serde::Deserialize;
use serde_json::json;

mod access;
mod actions;
mod board;
mod reads;

use crate::failure::Failure;
use crate::namespace::{all_rooms, all_schedules, all_stats, all_streams, change_dead, DeadAction};
use crate::report;
pub(crate) use access::Access;
use board::{audit, error, may_write, Board, Shared};

const PAGE: &str = include_str!("dashboard.html");
/// Refuses what must not reach the routes (see [`Access::refusal`]).
async fn guard(State(board): Shared, request: Request, next: Next) -> Response {
    match board.access.refusal(board.bound, &request) {
        Some((status, text)) => error(status, text),
        None => next.run(request).await,
    }
}

pub(crate) async fn serve(
    producer: Producer,
    listen: SocketAddr,
    access: Access,
) -> Result<(), Failure> {
    let writes = access.writes();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::Failed(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Failed(e.to_string()))?;
    if !bound.ip().is_loopback() && access.token.is_none() {
        eprintln!(
            "warning: the dashboard is bound to {bound}, not loopback, without --token: anyone who can reach it sees your queues{}",
            if writes { " and can replay or purge dead letters" } else { "" }
        );
    }
    println!(
        "dashboard on http://{bound}/ (namespace {}, {})",
        producer.namespace(),
        if writes {
            "writes allowed"
        } else {
            "read-only"
        }
    );
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/api/overview", get(overview))
        .route("/api/topics/{topic}/dead", get(dead_list))
        .route("/api/topics/{topic}/messages/{id}", get(reads::find))
        .route("/api/topics/{topic}/history", get(reads::topic_history))
        .route("/api/history/{kind}/{name}", get(reads::history))
        .route("/api/topics/{topic}/dead/{id}/{action}", post(write_one))
        .route("/api/topics/{topic}/dead-all/{action}", post(write_all))
        .route(
            "/api/topics/{topic}/flow/{action}",
            post(actions::flow_write),
        )
        .route(
            "/api/topics/{topic}/dead-selected/{action}",
            post(actions::dead_selected),
        )
        .route("/api/topics/{topic}/send", post(actions::send_test))
        .route(
            "/api/schedules/{name}/{action}",
            post(actions::schedule_write),
        );
    let board = Arc::new(Board {
        producer,
        access,
        bound,
    });
    let app = app
        .layer(middleware::from_fn_with_state(board.clone(), guard))
        .with_state(board);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .map_err(|e| Failure::Failed(format!("the dashboard stopped: {e}")))
}

async fn overview(State(board): Shared) -> Result<Json<serde_json::Value>, Failure> {
    let p = &board.producer;
    let (topics, streams, rooms, schedules) = (
        all_stats(p).await?,
        all_streams(p).await?,
        all_rooms(p).await?,
        all_schedules(p).await?,
    );
    Ok(Json(json!({
        "namespace": p.namespace(),
        "writes": board.access.writes(),
        "topics": topics.iter().map(|e| e.json("topic", report::stats_json)).collect::<Vec<_>>(),
        "streams": streams.iter().map(|e| e.json("stream", report::stream_json)).collect::<Vec<_>>(),
        "rooms": rooms.iter().map(|e| e.json("room", |c| report::room_json(&e.name, c))).collect::<Vec<_>>(),
        "schedules": schedules.iter().map(|e| e.json("schedule", report::schedule_json)).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
struct Limit {
    limit: Option<usize>,
}

async fn dead_list(
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
    headers: &HeaderMap,
    topic: &str,
    id: Option<&str>,
    action: &str,
) -> Response {
    if let Err((status, why)) = may_write(board, headers) {
        return error(status, why);
    }
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

async fn write_one(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((topic, id, action)): Path<(String, String, String)>,
) -> Response {
    write(&board, from, &headers, &topic, Some(&id), &action).await
}

async fn write_all(
    State(board): Shared,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((topic, action)): Path<(String, String)>,
) -> Response {
    write(&board, from, &headers, &topic, None, &action).await
}
