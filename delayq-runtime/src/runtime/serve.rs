//! The runtime's HTTP endpoint: `/metrics` (Prometheus) and `/health/live`, `/health/ready`,
//! on one listener when both are on. GET only, no cross-site headers, header reads time out.

use std::convert::Infallible;
use std::net::SocketAddr;
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
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

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
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let routes = routes.clone();
                async move { Ok::<_, Infallible>(answer(&routes, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
                }
            }
        });
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
