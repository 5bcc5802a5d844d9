//! What the command line and the dashboard both do with a namespace: connect to it, read every
//! registered topic, stream, room and schedule (an unreadable one is an error row, never a failed
//! view), and act on dead letters.

use delayq_core::config::ConfigSource;
use delayq_core::{
    resolve_connection, Connection, MessageId, Producer, RoomConfig, RoomCounts, ScheduleInfo,
    StreamStats, TopicStats, UrlOrigin, WaitingRoom,
};
use serde_json::{json, Value};

use crate::failure::Failure;

/// Where Redis and the namespace come from: the flags, else the variables, else
/// `delayq.toml`, else the defaults (the runtime's order, resolved by the same function).
pub(crate) fn resolve(
    redis_url: Option<&str>,
    namespace: Option<&str>,
) -> Result<Connection, Failure> {
    Ok(resolve_connection(
        redis_url.map(|u| (u, UrlOrigin::CommandLine)),
        namespace,
    )?)
}

/// `shop (env DELAYQ_NAMESPACE)`: the namespace and where it came from.
pub(crate) fn namespace_label(c: &Connection) -> String {
    let from = match &c.namespace_source {
        ConfigSource::Builder => "--namespace".to_string(),
        other => other.to_string(),
    };
    format!("{} ({from})", c.namespace)
}

pub(crate) async fn connect(connection: &Connection) -> Result<Producer, Failure> {
    let producer = Producer::connect_resolved(connection).await?;
    // Only refuse another layout here: looking must not mark a namespace (a typo in
    // --namespace would create one); a send marks it as any producer's does.
    producer.check_layout_read_only().await?;
    Ok(producer)
}

/// One entry of a registry (topics, streams, rooms) and what could be read of it. An entry
/// that cannot be read (a name that is not valid, a key of another type under it) is shown
/// as an error row; it never hides the others.
pub(crate) struct Entry<T> {
    pub(crate) name: String,
    pub(crate) read: Result<T, String>,
}

impl<T> Entry<T> {
    /// `value(read)` for a readable entry; `{key: name, "error": why}` for the others.
    pub(crate) fn json(&self, key: &str, value: impl Fn(&T) -> Value) -> Value {
        match &self.read {
            Ok(read) => value(read),
            Err(why) => json!({ key: self.name, "error": why }),
        }
    }
}

/// The stats of every registered topic.
pub(crate) async fn all_stats(p: &Producer) -> Result<Vec<Entry<TopicStats>>, Failure> {
    let mut out = Vec::new();
    for name in p.topics().await? {
        let read = p.topic_stats(&name).await.map_err(|e| e.to_string());
        out.push(Entry { name, read });
    }
    Ok(out)
}

/// The state of every registered stream.
pub(crate) async fn all_streams(p: &Producer) -> Result<Vec<Entry<StreamStats>>, Failure> {
    let mut out = Vec::new();
    for name in p.streams().await? {
        let read = p.stream_stats(&name).await.map_err(|e| e.to_string());
        out.push(Entry { name, read });
    }
    Ok(out)
}

/// The counts of every registered waiting room.
pub(crate) async fn all_rooms(p: &Producer) -> Result<Vec<Entry<RoomCounts>>, Failure> {
    let mut out = Vec::new();
    for name in p.rooms().await? {
        // Counting reads no configuration; the default one only satisfies the constructor.
        let read = match WaitingRoom::new(p, &name, RoomConfig::default()) {
            Ok(room) => room.counts().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        out.push(Entry { name, read });
    }
    Ok(out)
}

/// Every schedule of the namespace (read in a few round trips, however many there are); one
/// whose record cannot be used is an error row.
pub(crate) async fn all_schedules(p: &Producer) -> Result<Vec<Entry<ScheduleInfo>>, Failure> {
    Ok(p.schedules()
        .await?
        .into_iter()
        .map(|info| Entry {
            name: info.name.clone(),
            read: match &info.error {
                Some(error) => Err(error.clone()),
                None => Ok(info),
            },
        })
        .collect())
}

/// What `dead replay` and `dead purge` (and the dashboard's buttons) do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadAction {
    /// Back to due-now with fresh attempts.
    Replay,
    /// Deleted for good.
    Purge,
}

impl DeadAction {
    /// The action a route names (`replay`, `purge`), or the 404 reply of the dashboard.
    pub(crate) fn from_route(word: &str) -> Result<Self, Failure> {
        match word {
            "replay" => Ok(DeadAction::Replay),
            "purge" => Ok(DeadAction::Purge),
            _ => Err(Failure::NotFound(format!(
                "no action {word:?}; replay or purge"
            ))),
        }
    }

    /// The word for it in output: `replayed`, `purged`.
    pub(crate) fn done(self) -> &'static str {
        match self {
            DeadAction::Replay => "replayed",
            DeadAction::Purge => "purged",
        }
    }

    /// The command's word: `replay`, `purge`.
    pub(crate) fn verb(self) -> &'static str {
        match self {
            DeadAction::Replay => "replay",
            DeadAction::Purge => "purge",
        }
    }
}

/// Replays or purges one dead letter (`Some(id)`: fails when it is not dead) or all of a
/// topic's; how many.
pub(crate) async fn change_dead(
    p: &Producer,
    topic: &str,
    id: Option<&MessageId>,
    action: DeadAction,
) -> Result<usize, Failure> {
    let changed = match (action, id) {
        (DeadAction::Replay, Some(id)) => usize::from(p.replay_dead(topic, id).await?),
        (DeadAction::Purge, Some(id)) => usize::from(p.purge_dead_letter(topic, id).await?),
        (DeadAction::Replay, None) => p.replay_all_dead(topic).await?,
        (DeadAction::Purge, None) => p.purge_dead(topic).await?,
    };
    match id {
        Some(id) if changed == 0 => Err(Failure::NotFound(format!("{id} is not dead on {topic}"))),
        _ => Ok(changed),
    }
}

/// What an operator does to a schedule (`delayq schedules suspend|resume|run`, the
/// dashboard's buttons).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ScheduleAction {
    Suspend,
    Resume,
    Run,
}

/// Does `action` to schedule `name`; the outcome in a word (`suspended`, `already_suspended`,
/// `resumed`, `not_suspended`, `ran <tick id>`), or NotFound.
pub(crate) async fn change_schedule(
    p: &Producer,
    name: &str,
    action: ScheduleAction,
) -> Result<String, Failure> {
    use delayq_core::ScheduleChange::{Changed, NotFound, Unchanged};
    let not_found = || {
        Failure::NotFound(format!(
            "no schedule {name:?} in namespace {:?}",
            p.namespace()
        ))
    };
    let word = match action {
        ScheduleAction::Suspend => match p.suspend_schedule(name).await? {
            Changed => "suspended",
            Unchanged => "already_suspended",
            NotFound => return Err(not_found()),
        },
        ScheduleAction::Resume => match p.resume_schedule(name).await? {
            Changed => "resumed",
            Unchanged => "not_suspended",
            NotFound => return Err(not_found()),
        },
        ScheduleAction::Run => {
            return match p.run_schedule_now(name).await? {
                Some(id) => Ok(format!("ran {id}")),
                None => Err(not_found()),
            }
        }
    };
    Ok(word.to_string())
}

/// Every history of the namespace over `window`: each topic's, schedule's, stream group's and
/// waiting room's, in that order.
pub(crate) async fn all_histories(
    p: &Producer,
    window: std::time::Duration,
) -> Result<Vec<(crate::report::Kind, delayq_core::History)>, Failure> {
    use crate::report::Kind;
    let mut out = Vec::new();
    for t in p.topics().await? {
        out.push((Kind::Topic, p.topic_history(&t, window).await?));
    }
    for (name, _) in p.schedule_index().await? {
        if let Ok(Some(h)) = p.schedule_history(&name, window).await {
            out.push((Kind::Schedule, h));
        }
    }
    for stream in p.streams().await? {
        let Ok(stats) = p.stream_stats(&stream).await else {
            continue;
        };
        for g in stats.groups {
            out.push((
                Kind::Group,
                p.group_history(&stream, &g.group, window).await?,
            ));
        }
    }
    for room in p.rooms().await? {
        out.push((Kind::Room, p.room_history(&room, window).await?));
    }
    Ok(out)
}
