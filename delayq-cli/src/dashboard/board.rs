//! What every route of the dashboard shares: its state, the error reply, and the checks and
//! audit line of every write.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq_core::Producer;
use serde_json::json;

use super::access::Access;
use super::refusals::Refusals;
use crate::failure::Failure;
use crate::report;

/// The header a write must carry.
const CONFIRM_HEADER: &str = "x-delayq-confirm";

pub(crate) struct Board {
    pub(super) producer: Producer,
    pub(super) access: Access,
    /// The address it listens on (the port a `Host` must name, the IP it may name).
    pub(super) bound: SocketAddr,
    /// The rate bound of the refused writes' audit lines.
    pub(super) refusals: Refusals,
}

pub(crate) type Shared = State<Arc<Board>>;

pub(crate) fn error(status: StatusCode, text: impl Into<String>) -> Response {
    (status, Json(json!({ "error": text.into() }))).into_response()
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        match self {
            Failure::Usage(text) => error(StatusCode::BAD_REQUEST, text),
            Failure::Failed(text) => error(StatusCode::SERVICE_UNAVAILABLE, text),
            Failure::NotFound(text) => error(StatusCode::NOT_FOUND, text),
        }
    }
}

/// Why a write must not run on this dashboard: writes are off, or it is not confirmed (the
/// guard asks this of every request that is not a read, after the checks of `Access`).
pub(crate) fn may_write(board: &Board, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
    if !board.access.writes() {
        return Err((
            StatusCode::FORBIDDEN,
            "this dashboard is read-only; start it with --allow-writes".into(),
        ));
    }
    if headers.get(CONFIRM_HEADER).and_then(|v| v.to_str().ok()) != Some("yes") {
        return Err((
            StatusCode::BAD_REQUEST,
            "a write must be confirmed with the header X-Delayq-Confirm: yes".into(),
        ));
    }
    Ok(())
}

/// Logs a write on stdout: `audit: <when> <remote address> [token] <what>: <result>`.
pub(crate) fn audit(board: &Board, from: SocketAddr, what: &str, result: &str) {
    let who = if board.access.token.is_some() {
        format!("{from} (token)")
    } else {
        from.to_string()
    };
    // What and its result carry names from the URL and texts from Redis: escaped, so that a
    // line break or a terminal escape in them cannot forge a line of the log.
    let (what, result) = (report::printable(what), report::printable(result));
    super::audit::line(&format!("{who} {what}: {result}"));
}

/// Fails (404) unless `topic` is registered in the namespace.
pub(crate) async fn known_topic(board: &Board, topic: &str) -> Result<(), Failure> {
    if board.producer.topics().await?.iter().any(|t| t == topic) {
        Ok(())
    } else {
        Err(Failure::NotFound(format!("no topic {topic:?}")))
    }
}
