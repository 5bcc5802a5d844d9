//! The runtime's HTTP endpoint: `/metrics` (Prometheus) and `/health/live`, `/health/ready`,
//! on one listener when both are on. GET only, no cross-site headers, header reads time out,
//! request heads are bounded, and at most `MAX_CONNECTIONS` are held (the oldest idle one
//! goes).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{Error, Result};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::probe::Probe;

/// A client that has not sent its request headers within this is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections held open at most; a new one past it closes the oldest. A flood of idle
/// connections then costs a bounded number of file descriptors (the process's own HTTP
/// server shares the limit), and a probe that comes in is served at once rather than queued
/// behind the flood.
const MAX_CONNECTIONS: usize = 128;
/// The largest request head read (a probe's or a scrape's is a few hundred bytes).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The connections held open, oldest first, each with what closes it and whether it is
/// answering a request right now.
#[derive(Default)]
struct Held {
    next: u64,
    open: std::collections::VecDeque<(u64, CancellationToken, Arc<AtomicBool>)>,
}

impl Held {
    /// Takes a slot for a new connection, closing the oldest idle one when all are taken (one
    /// answering a request — a probe waiting on Redis' `PING`, a scrape — is never cut off).
    fn admit(&mut self, stop: &CancellationToken) -> (u64, CancellationToken, Arc<AtomicBool>) {
        if self.open.len() >= MAX_CONNECTIONS {
            let idle = self
                .open
                .iter()
                .position(|(_, _, busy)| !busy.load(Ordering::Relaxed));
            if let Some((_, oldest, _)) = idle.and_then(|i| self.open.remove(i)) {
                oldest.cancel();
            }
        }
        let id = self.next;
        self.next += 1;
        let close = stop.child_token();
        let busy = Arc::new(AtomicBool::new(false));
        self.open.push_back((id, close.clone(), busy.clone()));
        (id, close, busy)
    }

    fn release(&mut self, id: u64) {
        self.open.retain(|(held, ..)| *held != id);
    }
}

/// Renders the metrics text.
pub(super) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// What one listener serves.
#[derive(Clone)]
struct Routes {
    metrics: Option<Render>,
    health: Option<Arc<Probe>>,
}

/// Serves the metrics at the `prometheus` address and health at the `health` one: one
/// listener when both share an address, else one each. Binds now, so that a taken port fails
/// `spawn`; serves until `stop`.
pub(super) async fn endpoints(
    (prometheus, render): (Option<SocketAddr>, Option<Render>),
    (health, probe): (Option<SocketAddr>, Arc<Probe>),
    stop: CancellationToken,
) -> Result<()> {
    let mut endpoints: Vec<(SocketAddr, Routes)> = Vec::new();
    if let Some(addr) = prometheus {
        let routes = Routes {
            metrics: render,
            health: None,
        };
        endpoints.push((addr, routes));
    }
    if let Some(addr) = health {
        match endpoints.iter_mut().find(|(a, _)| *a == addr) {
            Some((_, routes)) => routes.health = Some(probe),
            None => {
                let routes = Routes {
                    metrics: None,
                    health: Some(probe),
                };
                endpoints.push((addr, routes));
            }
        }
    }
    for (addr, routes) in endpoints {
        let what = match (&routes.metrics, &routes.health) {
            (Some(_), Some(_)) => "/metrics, /health/live and /health/ready",
            (Some(_), None) => "/metrics",
            _ => "/health/live and /health/ready",
        };
        // Not one of the pool tasks: it serves until the shutdown is over.
        drop(bind(addr, routes, stop.clone()).await?);
        tracing::info!(%addr, "serving {what}");
    }
    Ok(())
}

/// Binds `addr` now and serves until `stop`.
async fn bind(
    addr: SocketAddr,
    routes: Routes,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        Error::Config(format!(
            "cannot listen on {addr} for the runtime's HTTP endpoint: {e}"
        ))
    })?;
    Ok(tokio::spawn(serve(listener, routes, stop)))
}

async fn serve(listener: TcpListener, routes: Routes, stop: CancellationToken) {
    let held = Arc::new(std::sync::Mutex::new(Held::default()));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.cancelled() => return,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors and the like: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let routes = routes.clone();
        let (id, close, busy) = held.lock().unwrap_or_else(|p| p.into_inner()).admit(&stop);
        let stop = stop.clone();
        let held = held.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let routes = routes.clone();
                let busy = busy.clone();
                async move {
                    busy.store(true, Ordering::Relaxed);
                    let response = answer(&routes, req).await;
                    busy.store(false, Ordering::Relaxed);
                    Ok::<_, Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                biased;
                _ = conn.as_mut() => {}
                // Shutdown: let a request in flight finish.
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
                }
                // Pushed out by newer connections: dropped.
                _ = close.cancelled() => {}
            }
            held.lock().unwrap_or_else(|p| p.into_inner()).release(id);
        });
        // The connection just spawned reads its request before the next one is admitted: a
        // flood that keeps connecting must not push out, as the oldest idle one, a probe
        // whose request has arrived but was not read yet.
        tokio::task::yield_now().await;
    }
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        content_type.parse().expect("a valid header value"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        "no-store".parse().expect("a valid header value"),
    );
    response
}

async fn answer(routes: &Routes, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        );
    }
    match (req.uri().path(), &routes.metrics, &routes.health) {
        ("/metrics", Some(render), _) => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            render(),
        ),
        (path @ ("/health/live" | "/health/ready"), _, Some(probe)) => {
            // Live asks nothing of Redis; ready asks it (one shared PING, within 800 ms).
            let (health, up) = if path == "/health/live" {
                let health = probe.current();
                let live = health.live;
                (health, live)
            } else {
                let health = probe.check().await;
                let ready = health.ready;
                (health, ready)
            };
            let status = if up {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            let body = serde_json::to_string(&health).unwrap_or_else(|_| "{}".into());
            reply(status, "application/json", body)
        }
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}
