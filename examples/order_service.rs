//! An order service: one binary that serves HTTP (axum) and runs its delayq listener, with
//! health, metrics and configuration from outside, and one graceful shutdown.
//!
//!     DELAYQ_CONFIG=examples/delayq.toml cargo run --example order_service
//!     curl -X POST localhost:3000/orders -H 'content-type: application/json' -d '{"item":"book"}'
//!     curl -X POST localhost:3000/orders/ID/pay      # ID as the first call answered
//!     curl localhost:3000/orders/ID
//!     curl localhost:9090/health/ready
//!
//! - `POST /orders` `{"item": "…"}` → `201 {"id", "item", "state": "awaiting_payment"}`; an
//!   order timeout is sent with it (`DELAYQ_EXAMPLE_PAY_WITHIN_MS`, default 30 minutes). Order
//!   ids are ULIDs, which never repeat, not a counter: after a restart, a timeout still
//!   waiting in Redis for an old order must not find a new order under the same id.
//! - `POST /orders/{id}/pay` → `200 {"state": "paid"}`, and the timeout is cancelled;
//!   `409` once the order is closed, `404` for an unknown order.
//! - `GET /orders/{id}` → the order: `awaiting_payment`, `paid` or `closed`.
//! - `/health/live`, `/health/ready` and `/metrics` where `delayq.toml` (or `DELAYQ_HEALTH`,
//!   `DELAYQ_PROMETHEUS`) says.
//!
//! SIGINT or SIGTERM stops taking requests and drains the listener together: requests in
//! flight finish, running handlers finish within `shutdown_grace`, and claimed timeouts go
//! back to Redis. Orders live in memory here; a real service keeps them in its database.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use delayq_runtime::{delay_listener, MessageId, Producer, Runtime, SendOptions, SendOutcome};
use serde::{Deserialize, Serialize};
use serde_json::json;

const TOPIC: &str = "order.timeout";

#[derive(Serialize, Deserialize)]
struct OrderTimeout {
    order_id: String,
}

#[derive(Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
enum OrderState {
    AwaitingPayment,
    Paid,
    Closed,
}

#[derive(Clone, Serialize)]
struct Order {
    id: String,
    item: String,
    state: OrderState,
    #[serde(skip)]
    timeout: Option<MessageId>,
}

/// The orders (a database in a real service), shared by the HTTP handlers and the listener.
fn orders() -> &'static Mutex<HashMap<String, Order>> {
    static ORDERS: OnceLock<Mutex<HashMap<String, Order>>> = OnceLock::new();
    ORDERS.get_or_init(Mutex::default)
}

/// An order not paid in time is closed; one paid meanwhile is left alone.
#[delay_listener(topic = "order.timeout")]
async fn close_unpaid(timeout: OrderTimeout) {
    let mut orders = orders().lock().unwrap();
    if let Some(order) = orders.get_mut(&timeout.order_id) {
        if order.state == OrderState::AwaitingPayment {
            order.state = OrderState::Closed;
            tracing::info!(order = %order.id, "not paid in time: closed");
        }
    }
}

#[derive(Clone)]
struct App {
    producer: Producer,
    pay_within: Duration,
}

#[derive(Deserialize)]
struct NewOrder {
    item: String,
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

async fn place(State(app): State<App>, Json(new): Json<NewOrder>) -> Response {
    if new.item.trim().is_empty() || new.item.len() > 200 {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "item: 1 to 200 characters",
        );
    }
    let order = {
        // A ULID: unique across restarts and processes (a database would give its own key).
        let id = MessageId::generate().to_string().to_lowercase();
        let order = Order {
            id: id.clone(),
            item: new.item,
            state: OrderState::AwaitingPayment,
            timeout: None,
        };
        orders().lock().unwrap().insert(id, order.clone());
        order
    };
    let options = SendOptions::new()
        .delay(app.pay_within)
        .id(format!("order-{}", order.id));
    let timeout = OrderTimeout {
        order_id: order.id.clone(),
    };
    let refused = match app.producer.send_with(TOPIC, &timeout, options).await {
        Ok(SendOutcome::Created(sent)) => {
            let mut orders = orders().lock().unwrap();
            let stored = orders.get_mut(&order.id).expect("just placed");
            stored.timeout = Some(sent);
            return (StatusCode::CREATED, Json(stored.clone())).into_response();
        }
        // Another order's timeout holds this id: this order would have none of its own (and
        // that one would close it). With unique ids it cannot happen; if it does, refuse.
        Ok(other) => format!("order not placed: its timeout id {} is taken", other.id()),
        Err(e) => format!("order not placed: {e}"),
    };
    // Without its own timeout the order would stay open forever: refuse it. Its id is never
    // given again, so nothing sent for it can reach another order.
    orders().lock().unwrap().remove(&order.id);
    error(StatusCode::SERVICE_UNAVAILABLE, &refused)
}

async fn pay(State(app): State<App>, Path(id): Path<String>) -> Response {
    let timeout = {
        let mut orders = orders().lock().unwrap();
        let Some(order) = orders.get_mut(&id) else {
            return error(StatusCode::NOT_FOUND, "no such order");
        };
        match order.state {
            OrderState::Closed => {
                return error(StatusCode::CONFLICT, "order closed: not paid in time")
            }
            OrderState::Paid => return Json(order.clone()).into_response(),
            OrderState::AwaitingPayment => order.state = OrderState::Paid,
        }
        order.timeout.clone()
    };
    // Paid under the lock above, so a timeout running now leaves it alone; cancelling only
    // spares the listener a run.
    if let Some(timeout) = timeout {
        if let Err(e) = app.producer.cancel(TOPIC, &timeout).await {
            tracing::warn!(order = %id, error = %e, "paid; its timeout was not cancelled and will find it paid");
        }
    }
    let order = orders().lock().unwrap().get(&id).cloned();
    Json(order).into_response()
}

async fn show(Path(id): Path<String>) -> Response {
    match orders().lock().unwrap().get(&id) {
        Some(order) => Json(order.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, "no such order"),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("listen for SIGTERM");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("order service: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // The Redis that DELAYQ_REDIS_URL or delayq.toml names; without either, a local one
    // (found or started), passed to the builder.
    let (url, _own_server) = delayq_examples::redis_unless_configured();
    // One signal drives both: the HTTP server and the runtime watch the same channel.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    // Everything else (namespace, health and metrics addresses, the listener's options) comes
    // from delayq.toml and DELAYQ_ variables; `runtime.config()` says which from where.
    let mut builder = Runtime::builder();
    if let Some(url) = url {
        builder = builder.redis_url(url);
    }
    let runtime = builder
        .shutdown_on(stopped(stopping.clone()))
        .spawn()
        .await?;
    let pay_within = std::env::var("DELAYQ_EXAMPLE_PAY_WITHIN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(30 * 60));
    let app = Router::new()
        .route("/orders", post(place))
        .route("/orders/{id}/pay", post(pay))
        .route("/orders/{id}", get(show))
        .with_state(App {
            producer: runtime.producer(),
            pay_within,
        });
    let listen = std::env::var("DELAYQ_EXAMPLE_LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let ops = runtime
        .config()
        .runtime("health")
        .map(|s| format!("http://{}/health/ready", s.value))
        .unwrap_or_else(|| "off".into());
    println!(
        "orders on http://{} (health: {ops})",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(stopped(stopping))
        .await?;
    runtime.stopped().await?;
    tracing::info!("stopped: requests answered, handlers finished, claimed timeouts handed back");
    Ok(())
}
