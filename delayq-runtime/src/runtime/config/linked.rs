//! Every listener, stream listener, leader task and schedule linked into the binary: the names
//! a source may configure, and the nearest one to a name that is not there.

use delayq_core::config::{nearest, Kind, Scope};
use delayq_core::Result;

use crate::delay::{all_listeners, ListenerRegistration};
use crate::leader::{all_leader_tasks, LeaderTaskRegistration};
use crate::schedule::{all_schedules, ScheduleRegistration};
use crate::stream::{all_stream_listeners, StreamListenerRegistration};

/// Every linked registration, by kind: the names a source may configure.
pub(super) struct Linked {
    listeners: Vec<&'static ListenerRegistration>,
    streams: Vec<&'static StreamListenerRegistration>,
    leader_tasks: Vec<&'static LeaderTaskRegistration>,
    schedules: Vec<&'static ScheduleRegistration>,
}

impl Linked {
    pub(super) fn all() -> Result<Self> {
        Ok(Linked {
            listeners: all_listeners()?,
            streams: all_stream_listeners()?,
            leader_tasks: all_leader_tasks()?,
            schedules: all_schedules()?,
        })
    }

    pub(super) fn scopes(&self) -> Vec<Scope> {
        let mut scopes = vec![Scope::Runtime];
        scopes.extend(
            self.listeners
                .iter()
                .map(|r| Scope::Listener(r.topic.into())),
        );
        scopes.extend(
            self.streams
                .iter()
                .map(|r| Scope::Stream(r.stream.into(), r.group.into())),
        );
        scopes.extend(
            self.leader_tasks
                .iter()
                .map(|r| Scope::LeaderTask(r.name.into())),
        );
        scopes.extend(
            self.schedules
                .iter()
                .map(|r| Scope::Schedule(r.name.into())),
        );
        scopes
    }

    /// The problem with a scope no linked registration has, with the nearest one.
    pub(super) fn unknown(&self, scope: &Scope) -> Option<String> {
        let known = self.scopes();
        if known.contains(scope) {
            return None;
        }
        let kind = scope.kind();
        let names: Vec<String> = known
            .iter()
            .filter(|s| s.kind() == kind)
            .map(Scope::name)
            .collect();
        let hint = match nearest(&scope.name(), names.iter().map(String::as_str)) {
            Some(n) => format!("; did you mean {n:?}?"),
            None if names.is_empty() => format!("; it has no {} at all", plural(kind)),
            None => format!("; it has: {}", names.join(", ")),
        };
        Some(format!(
            "no {} {:?} in this binary{hint}",
            kind.noun(),
            scope.name()
        ))
    }
}

fn plural(kind: Kind) -> &'static str {
    match kind {
        Kind::Runtime => "runtime options",
        Kind::Listener => "#[delay_listener] fns",
        Kind::Stream => "#[stream_listener] fns",
        Kind::LeaderTask => "#[leader_task] fns",
        Kind::Schedule => "#[scheduled] fns",
    }
}
