//! How the dashboard holds its connections, with the bounds the runtime's health endpoint has
//! (`delayq-runtime/src/runtime/serve.rs`, whose idea this copies: the CLI depends on core
//! only): a client that has not sent a request's head within [`HEAD_READ_TIMEOUT`] is
//! dropped, heads are bounded, and at most [`MAX_CONNECTIONS`] are held — a new one past it
//! closes the oldest idle one, so a flood of idle connections costs a bounded number of file
//! descriptors and the operator who comes next is still answered. A request's body must
//! arrive within [`BODY_READ_TIMEOUT`] (`read_body`), so that no connection stays busy,
//! and so past the cap's reach, for longer than its work on Redis takes.
//!
//! Every response, the page's and the API's, forbids framing (`deny_framing`).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::board::error;

/// A client that has not sent a request's head within this is dropped (an idle keep-alive
/// connection too: the clock runs while it waits for the next head).
pub(super) const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections held open at most; past it the oldest idle one is closed, and when none is
/// idle the new one is (a browser opens about six).
pub(super) const MAX_CONNECTIONS: usize = 64;
/// The largest request head read.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A request's body (a selection of ids, a test message) arrives within this.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest body read: a test message of the largest payload, with room for its JSON.
const MAX_BODY_BYTES: usize = 2 * delayq_core::DEFAULT_MAX_PAYLOAD;

/// The connections held open, oldest first, each with what closes it and whether it is
/// answering a request right now.
#[derive(Default)]
struct Held {
    next: u64,
    open: std::collections::VecDeque<(u64, CancellationToken, Arc<AtomicBool>)>,
}

impl Held {
    /// Takes a slot for a new connection, closing the oldest idle one when all are taken (one
    /// answering a request is never cut off); `None` when every slot is answering one.
    fn admit(
        &mut self,
        stop: &CancellationToken,
    ) -> Option<(u64, CancellationToken, Arc<AtomicBool>)> {
        if self.open.len() >= MAX_CONNECTIONS {
            let idle = self
                .open
                .iter()
                .position(|(_, _, busy)| !busy.load(Ordering::Relaxed))?;
            if let Some((_, oldest, _)) = self.open.remove(idle) {
                oldest.cancel();
            }
        }
        let id = self.next;
        self.next += 1;
        let close = stop.child_token();
        let busy = Arc::new(AtomicBool::new(false));
        self.open.push_back((id, close.clone(), busy.clone()));
        Some((id, close, busy))
    }

    fn release(&mut self, id: u64) {
        self.open.retain(|(held, ..)| *held != id);
    }
}

/// Serves `app` on `listener` until `stop`, each request carrying its remote address
/// (`ConnectInfo`).
pub(super) async fn serve(listener: TcpListener, app: Router, stop: CancellationToken) {
    let held = Arc::new(Mutex::new(Held::default()));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.cancelled() => return,
        };
        let Ok((stream, remote)) = accepted else {
            // Out of file descriptors and the like: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let admitted = held.lock().unwrap_or_else(|p| p.into_inner()).admit(&stop);
        let Some((id, close, busy)) = admitted else {
            continue; // every slot is answering a request: this one is closed at once
        };
        let app = TowerToHyperService::new(app.clone());
        let (stop, held) = (stop.clone(), held.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<_>| {
                request.extensions_mut().insert(ConnectInfo(remote));
                let (app, busy) = (app.clone(), busy.clone());
                async move {
                    busy.store(true, Ordering::Relaxed);
                    let answered = app.call(request.map(Body::new)).await;
                    busy.store(false, Ordering::Relaxed);
                    let mut response = match answered {
                        Ok(response) => response,
                        Err(never) => match never {},
                    };
                    deny_framing(response.headers_mut());
                    Ok::<_, Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_READ_TIMEOUT)
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

/// No other site may frame the page (a click on a framed, write-enabled dashboard would be
/// the operator's): `X-Frame-Options: DENY`, and `frame-ancestors 'none'` in the
/// `Content-Security-Policy` a response already has (in place of any `frame-ancestors` it
/// names), or as its own.
pub(super) fn deny_framing(headers: &mut HeaderMap) {
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    let sent = headers
        .get(header::CONTENT_SECURITY_POLICY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut policy: Vec<&str> = sent
        .split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty() && !d.to_ascii_lowercase().starts_with("frame-ancestors"))
        .collect();
    policy.push("frame-ancestors 'none'");
    let policy = HeaderValue::from_str(&policy.join("; "))
        .unwrap_or(HeaderValue::from_static("frame-ancestors 'none'"));
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
}

/// Reads a request's whole body within [`BODY_READ_TIMEOUT`] (and at most
/// [`MAX_BODY_BYTES`]) before its route runs: 408 when it does not arrive in time.
pub(super) async fn read_body(request: Request, next: Next) -> Response {
    // A read takes no body: whatever one brings is not waited for.
    if request.method() == Method::GET || request.method() == Method::HEAD {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a request's body is at most {MAX_BODY_BYTES} bytes"),
        );
    }
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, MAX_BODY_BYTES);
    match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => error(
            StatusCode::BAD_REQUEST,
            format!("the request's body cannot be read (at most {MAX_BODY_BYTES} bytes): {e}"),
        ),
        Err(_) => error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request's body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_is_denied_beside_a_policy_already_sent() {
        let policy = |sent: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(sent) = sent {
                h.insert(header::CONTENT_SECURITY_POLICY, sent.parse().unwrap());
            }
            deny_framing(&mut h);
            assert_eq!(h.get_all(header::X_FRAME_OPTIONS).iter().count(), 1);
            assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
            h[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(policy(None), "frame-ancestors 'none'");
        assert_eq!(
            policy(Some("default-src 'self';")),
            "default-src 'self'; frame-ancestors 'none'"
        );
        assert_eq!(
            policy(Some(
                "script-src 'self'; frame-ancestors https://other.example"
            )),
            "script-src 'self'; frame-ancestors 'none'",
            "no other ancestor is allowed"
        );
    }
}
