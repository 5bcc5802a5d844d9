//! The dashboard's reads beyond the overview: where one message is, and histories.

use axum::extract::{Path, Query, State};
use axum::Json;
use delayq_core::MessageId;
use serde::Deserialize;

use super::board::{known_topic, Shared};
use crate::failure::Failure;
use crate::report::{self, Kind};

/// Where one message is (`delayq find`): 404 with the reason when the topic does not have it.
pub(super) async fn find(
    State(board): Shared,
    Path((topic, id)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>, Failure> {
    let id = MessageId::new(&id).map_err(|e| Failure::Usage(e.to_string()))?;
    known_topic(&board, &topic).await?;
    let found = board.producer.find(&topic, &id).await?;
    if found.place == delayq_core::Place::Unknown {
        return Err(report::not_found(&topic, &id));
    }
    Ok(Json(report::found_json(&topic, &found)))
}

#[derive(Deserialize)]
pub(super) struct Named {
    id: Option<String>,
}

/// `GET /api/topics/{topic}/messages?id=…`: [`find`] with the id in the query, as the page
/// sends it (a path segment `.` or `..` would be folded by the browser).
pub(super) async fn find_named(
    board: Shared,
    Path(topic): Path<String>,
    Query(q): Query<Named>,
) -> Result<Json<serde_json::Value>, Failure> {
    let Some(id) = q.id else {
        return Err(Failure::Usage("give the message's id: ?id=…".into()));
    };
    find(board, Path((topic, id))).await
}

#[derive(Deserialize)]
pub(super) struct Since {
    since: Option<String>,
}

impl Since {
    fn window(&self) -> Result<std::time::Duration, Failure> {
        crate::args::since(self.since.as_deref().unwrap_or("1h")).map_err(Failure::Usage)
    }
}

/// A topic's history (`delayq stats --since`): `?since=1h` (default), up to `720h`; as
/// `/api/history/topic/{topic}`.
pub(super) async fn topic_history(
    board: Shared,
    Path(topic): Path<String>,
    q: Query<Since>,
) -> Result<Json<serde_json::Value>, Failure> {
    history(board, Path(("topic".into(), topic)), q).await
}

/// Any history: `/api/history/{topic|schedule|group|room}/{name}?since=1h` (a group's name
/// is `stream/group`, its slash escaped).
pub(super) async fn history(
    State(board): Shared,
    Path((kind, name)): Path<(String, String)>,
    Query(q): Query<Since>,
) -> Result<Json<serde_json::Value>, Failure> {
    let p = &board.producer;
    let window = q.window()?;
    let (kind, h) = match kind.as_str() {
        "topic" => {
            known_topic(&board, &name).await?;
            (Kind::Topic, p.topic_history(&name, window).await?)
        }
        "schedule" => match p.schedule_history(&name, window).await? {
            Some(h) => (Kind::Schedule, h),
            None => return Err(Failure::NotFound(format!("no schedule {name:?}"))),
        },
        "group" => {
            let Some((stream, group)) = name.split_once('/') else {
                return Err(Failure::Usage("a group is named stream/group".into()));
            };
            (Kind::Group, p.group_history(stream, group, window).await?)
        }
        "room" => (Kind::Room, p.room_history(&name, window).await?),
        other => {
            return Err(Failure::NotFound(format!(
                "no history kind {other:?}: topic, schedule, group or room"
            )))
        }
    };
    Ok(Json(report::history_json(kind, &h)))
}
