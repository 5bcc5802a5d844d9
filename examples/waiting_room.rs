//! A waiting room in front of a ticket sale: an HTTP service (axum) where each visitor gets a
//! token, watches their place in line update live, and is sent on once admitted. The runtime
//! ticks the room (a few admitted a tick) under a lease, so that any number of copies of this
//! service can run side by side without letting in more than the rate.
//!
//!     cargo run --example waiting_room            # then open http://127.0.0.1:3000/rooms/concert-42/wait
//!
//! - `POST /rooms/{room}/tokens` → `201 {"token": "…"}`
//! - `GET /rooms/{room}/tokens/{token}` → `{"state": "waiting", "position", "ahead",
//!   "eta_seconds"}`, `{"state": "active", "expires_in_seconds"}`, or `404 {"error": …}`
//! - `GET /rooms/{room}/wait?token=…` → the waiting page (without a token it gets one)
//! - `GET /rooms/{room}/inside?token=…` → where admitted visitors land
//!
//! `DELAYQ_EXAMPLE_LISTEN` (default `127.0.0.1:3000`) and `DELAYQ_EXAMPLE_TICK_MS` (default
//! 2000) change the address and the tick; 40 visitors are already waiting when it starts.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use delayq_runtime::{RoomConfig, RoomStatus, Runtime, WaitingRoom};
use serde::Deserialize;
use serde_json::json;

const ROOM: &str = "concert-42";

#[derive(Clone)]
struct App {
    room: WaitingRoom,
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "error": what }))).into_response()
}

fn internal(e: delayq_runtime::Error) -> Response {
    eprintln!("waiting room: {e}");
    let body = Json(json!({ "error": "the waiting room is unavailable; try again" }));
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

/// The room the path names: this service has one.
fn room<'a>(app: &'a App, name: &str) -> Option<&'a WaitingRoom> {
    (name == app.room.name()).then_some(&app.room)
}

async fn enter(State(app): State<App>, Path(name): Path<String>) -> Response {
    let Some(room) = room(&app, &name) else {
        return not_found("no such room");
    };
    match room.enter().await {
        Ok(token) => (StatusCode::CREATED, Json(json!({ "token": token }))).into_response(),
        Err(e) => internal(e),
    }
}

async fn status(State(app): State<App>, Path((name, token)): Path<(String, String)>) -> Response {
    let Some(room) = room(&app, &name) else {
        return not_found("no such room");
    };
    // A visitor polling is a visitor still there.
    let _ = room.touch(&token).await;
    match room.status(&token).await {
        Ok(RoomStatus::Waiting {
            position,
            ahead,
            eta,
        }) => Json(json!({
            "state": "waiting",
            "position": position,
            "ahead": ahead,
            "eta_seconds": eta.map(|d| d.as_secs_f64().ceil() as u64),
        }))
        .into_response(),
        Ok(RoomStatus::Active { expires_in }) => Json(json!({
            "state": "active",
            "expires_in_seconds": expires_in.as_secs(),
        }))
        .into_response(),
        Ok(RoomStatus::Unknown) => not_found("unknown token (never entered, left or expired)"),
        Err(e) => internal(e),
    }
}

async fn wait_page(
    State(app): State<App>,
    Path(name): Path<String>,
    Query(q): Query<TokenQuery>,
) -> Response {
    let Some(room) = room(&app, &name) else {
        return not_found("no such room");
    };
    let Some(token) = q.token else {
        return match room.enter().await {
            Ok(token) => Redirect::to(&format!("/rooms/{name}/wait?token={token}")).into_response(),
            Err(e) => internal(e),
        };
    };
    // The page comes with the place in line filled in (it works without JavaScript), then
    // updates itself every second; an admitted visitor is sent on at once.
    let (position, ahead, eta) = match room.status(&token).await {
        Ok(RoomStatus::Waiting {
            position,
            ahead,
            eta,
        }) => (
            position,
            ahead,
            eta_text(eta.map(|d| d.as_secs_f64().ceil() as u64)),
        ),
        Ok(RoomStatus::Active { .. }) => {
            return Redirect::to(&format!("/rooms/{name}/inside?token={token}")).into_response()
        }
        Ok(RoomStatus::Unknown) => {
            return not_found("unknown token (never entered, left or expired)")
        }
        Err(e) => return internal(e),
    };
    // The token goes into the page only as JSON with `<` escaped, so that no input can close
    // the script element (and it is a well-formed token here anyway).
    let config = json!({ "room": name, "token": token })
        .to_string()
        .replace('<', "\\u003c");
    Html(
        WAIT_PAGE
            .replace("__CONFIG__", &config)
            .replace("__POSITION__", &position.to_string())
            .replace("__AHEAD__", &ahead.to_string())
            .replace("__ETA__", &eta),
    )
    .into_response()
}

/// An ETA as the page shows it.
fn eta_text(seconds: Option<u64>) -> String {
    match seconds {
        None => "measuring…".into(),
        Some(s) if s < 60 => format!("{s} s"),
        Some(s) => format!("{} min", s.div_ceil(60)),
    }
}

async fn inside(
    State(app): State<App>,
    Path(name): Path<String>,
    Query(q): Query<TokenQuery>,
) -> Response {
    let Some(room) = room(&app, &name) else {
        return not_found("no such room");
    };
    match room.status(q.token.as_deref().unwrap_or("")).await {
        Ok(RoomStatus::Active { .. }) => Html(INSIDE_PAGE).into_response(),
        Ok(_) => not_found("not admitted"),
        Err(e) => internal(e),
    }
}

const WAIT_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>You are in line</title>
<style>
 body { font-family: system-ui, sans-serif; background: #0f172a; color: #e2e8f0; display: grid; place-items: center; min-height: 100vh; margin: 0; }
 main { background: #1e293b; padding: 2.5rem 3.5rem; border-radius: 1rem; text-align: center; min-width: 22rem; }
 h1 { margin: 0 0 .5rem; font-size: 1.4rem; color: #94a3b8; font-weight: 500; }
 #position { font-size: 5rem; font-weight: 700; color: #38bdf8; margin: .5rem 0; }
 p { margin: .4rem 0; font-size: 1.1rem; }
 #error { color: #f87171; }
</style></head>
<body><main>
 <h1>Concert 42 — you are in line</h1>
 <div>your place in line</div>
 <div id="position">__POSITION__</div>
 <p><span id="ahead">__AHEAD__</span> people ahead of you</p>
 <p>estimated wait: <span id="eta">__ETA__</span></p>
 <p id="error"></p>
</main>
<script>
const cfg = __CONFIG__;
async function poll() {
  try {
    const r = await fetch(`/rooms/${encodeURIComponent(cfg.room)}/tokens/${encodeURIComponent(cfg.token)}`);
    const s = await r.json();
    if (!r.ok) { document.getElementById('error').textContent = s.error; return; }
    if (s.state === 'active') {
      location.href = `/rooms/${encodeURIComponent(cfg.room)}/inside?token=${encodeURIComponent(cfg.token)}`;
      return;
    }
    document.getElementById('position').textContent = s.position;
    document.getElementById('ahead').textContent = s.ahead;
    document.getElementById('eta').textContent =
      s.eta_seconds === null ? 'measuring…' : (s.eta_seconds < 60 ? `${s.eta_seconds} s` : `${Math.ceil(s.eta_seconds / 60)} min`);
  } catch (e) {
    document.getElementById('error').textContent = 'connection lost; retrying';
  }
  setTimeout(poll, 1000);
}
poll();
</script></body></html>"#;

const INSIDE_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>You're in</title></head>
<body style="font-family: system-ui, sans-serif"><h1>You're in: choose your seats</h1></body></html>"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _own_server) = delayq_examples::redis_for_examples();
    let tick_ms = std::env::var("DELAYQ_EXAMPLE_TICK_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let config = RoomConfig::default()
        .admit_per_tick(2)
        .tick(Duration::from_millis(tick_ms));
    let runtime = Runtime::builder()
        .redis_url(&url)
        .namespace(format!("room-example-{}", std::process::id()))
        .leader_tasks(Vec::<String>::new())
        .waiting_room(ROOM, config)
        .spawn()
        .await?;
    let room = WaitingRoom::new(&runtime.producer(), ROOM, config)?;
    for _ in 0..40 {
        room.enter().await?;
    }
    let app = Router::new()
        .route("/rooms/{room}/tokens", post(enter))
        .route("/rooms/{room}/tokens/{token}", get(status))
        .route("/rooms/{room}/wait", get(wait_page))
        .route("/rooms/{room}/inside", get(inside))
        .with_state(App { room });
    let listen = std::env::var("DELAYQ_EXAMPLE_LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!(
        "listening on http://{}/rooms/{ROOM}/wait",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    runtime.shutdown().await?;
    Ok(())
}
