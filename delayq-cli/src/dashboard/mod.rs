//! `delayq dashboard`: one page (dashboard.html, no build step) that polls a small JSON API
//! served here. Read-only unless started with `--allow-writes`; a write is a POST that must
//! carry `X-Delayq-Confirm: yes` (the page asks first), which a cross-site form cannot send.
//!
//! Who reaches it (`guard`, before every route): a request must name this dashboard in
//! `Host` (the listen address, `localhost`, or a name given with `--allow-host`), so a page
//! on another site whose name was re-pointed at this machine (DNS rebinding) is refused;
//! a write whose `Origin` (or `Sec-Fetch-Site`) says it comes from another site is refused;
//! with `--token`, every API call needs `Authorization: Bearer <token>`. Behind a reverse
//! proxy that speaks HTTPS, a write from the page carries `Origin: https://NAME`, which
//! passes when NAME is given with `--allow-host` (or the browser sends `Sec-Fetch-Site:
//! same-origin`).
//!
//! Each write that reaches a route is logged on stdout as one audit line: when, who (the
//! remote address, and whether it presented the token), what, and what came of it; each
//! write refused is too, at most 20 a minute (`refusals.rs`). Connections are bounded as the
//! runtime's health endpoint bounds them, and no answer may be framed (`listen.rs`). Every
//! API error is JSON, `{"error": "…"}`, a route that does not exist and a bad path too.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use delayq_core::Producer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod access;
mod actions;
mod audit;
mod board;
mod dead;
mod flows;
mod listen;
mod reads;
mod refusals;

use crate::failure::Failure;
use crate::namespace::{all_rooms, all_schedules, all_stats, all_streams};
use crate::report;
pub(crate) use access::Access;
use board::{error, may_write, Board, Shared};

const PAGE: &str = include_str!("dashboard.html");

/// Refuses what must not reach the routes (see [`Access::refusal`]), and a write that is not
/// allowed or not confirmed (`board::may_write`); a refused write leaves an audit line.
async fn guard(State(board): Shared, request: Request, next: Next) -> Response {
    let mut refused = board.access.refusal(board.bound, &request);
    let write = request.method() != Method::GET && request.method() != Method::HEAD;
    let api = request.uri().path().starts_with("/api/");
    if refused.is_none() && write && api {
        refused = may_write(&board, request.headers()).err();
    }
    // Only the API takes writes: anything else sent with a body is answered at once, before
    // its body is read, so that no one holds a connection busy with a slow body there.
    if refused.is_none() && write && !api {
        refused = Some((
            StatusCode::METHOD_NOT_ALLOWED,
            "only the API (/api/...) takes writes".into(),
        ));
    }
    let Some((status, why)) = refused else {
        return next.run(request).await;
    };
    if write {
        let from = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "?".to_string(), |c| c.0.to_string());
        // The path alone: a query may hold what someone should not have put in a URL.
        let what = format!("{} {}", request.method(), request.uri().path());
        let why = format!("{} {why}", status.as_u16());
        let (what, why) = (report::printable(&what), report::printable(&why));
        board.refusals.refused(&from, &what, &why);
    }
    error(status, why)
}

/// An API answer that is an error but not JSON (axum's own, for a path or query it cannot
/// read, a method a route does not have) becomes `{"error": "…"}`, so that every client,
/// the page too, reads what went wrong.
async fn json_errors(request: Request, next: Next) -> Response {
    let api = request.uri().path().starts_with("/api/");
    let response = next.run(request).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !api || json || response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let text = if text.trim().is_empty() {
        parts.status.to_string()
    } else {
        text.trim().to_string()
    };
    let mut json = error(parts.status, text);
    for name in [header::ALLOW] {
        if let Some(v) = parts.headers.get(&name) {
            json.headers_mut().insert(name, v.clone());
        }
    }
    json
}

/// What no route answers: a JSON 404 naming the path (a browser that folded `.` or `..` out
/// of a path sent another one than the page meant).
async fn no_route(request: Request<Body>) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no {} {} on this dashboard",
            request.method(),
            report::printable(request.uri().path())
        ),
    )
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
    {
        // Not println!: a stdout nobody reads must not stop the dashboard.
        use std::io::Write;
        let _ = writeln!(
            std::io::stdout().lock(),
            "dashboard on http://{bound}/ (namespace {}, {})",
            producer.namespace(),
            if writes {
                "writes allowed"
            } else {
                "read-only"
            }
        );
    }
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/api/overview", get(overview))
        .route("/api/topics/{topic}/dead", get(dead::list))
        .route("/api/topics/{topic}/messages", get(reads::find_named))
        .route("/api/topics/{topic}/messages/{id}", get(reads::find))
        .route("/api/topics/{topic}/history", get(reads::topic_history))
        .route("/api/history/{kind}/{name}", get(reads::history))
        .route(
            "/api/topics/{topic}/dead/{id}/{action}",
            post(dead::write_one),
        )
        .route(
            "/api/topics/{topic}/dead-letter/{action}",
            post(dead::write_named),
        )
        .route(
            "/api/topics/{topic}/dead-all/{action}",
            post(dead::write_all),
        )
        .route(
            "/api/topics/{topic}/flow/{action}",
            post(actions::flow_write),
        )
        .route(
            "/api/topics/{topic}/dead-selected/{action}",
            post(actions::dead_selected),
        )
        .route("/api/topics/{topic}/send", post(actions::send_test))
        .route("/api/flows", get(flows::list))
        .route("/api/flows/{id}", get(flows::show))
        .route("/api/flows/{id}/{action}", post(flows::write))
        .route(
            "/api/schedules/{name}/{action}",
            post(actions::schedule_write),
        )
        .fallback(no_route);
    let board = Arc::new(Board {
        producer,
        access,
        bound,
        refusals: Default::default(),
    });
    // Inside out: the guard first, then the body is read (within its time), then JSON errors.
    let app = app
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn(listen::read_body))
        .layer(middleware::from_fn_with_state(board.clone(), guard))
        .with_state(board.clone());
    let stop = CancellationToken::new();
    let counts = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            board.refusals.close_window();
        }
    });
    let served = tokio::spawn(listen::serve(listener, app, stop.clone()));
    let _ = tokio::signal::ctrl_c().await;
    stop.cancel();
    counts.abort();
    served
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
