//! The option table: what each kind of component takes, with each value's type and limits
//! (the defaults are in [`defaults`]).

use crate::defaults;

/// What a set of options belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The runtime itself (top-level keys).
    Runtime,
    /// A `#[delay_listener]` (`[listeners."<topic>"]`).
    Listener,
    /// A `#[stream_listener]` (`[streams."<stream>"."<group>"]`).
    Stream,
    /// A `#[leader_task]` (`[leader_tasks."<name>"]`).
    LeaderTask,
    /// A `#[scheduled]` fn (`[schedules."<name>"]`).
    Schedule,
}

impl Kind {
    /// The table that holds this kind's options in the file (`listeners`, …).
    pub fn table(self) -> &'static str {
        match self {
            Kind::Runtime => "",
            Kind::Listener => "listeners",
            Kind::Stream => "streams",
            Kind::LeaderTask => "leader_tasks",
            Kind::Schedule => "schedules",
        }
    }

    /// What one is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Runtime => "runtime",
            Kind::Listener => "delay listener",
            Kind::Stream => "stream listener",
            Kind::LeaderTask => "leader task",
            Kind::Schedule => "schedule",
        }
    }
}

/// The type of an option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// `true` or `false`.
    Bool,
    /// A whole number from 1 to the maximum.
    Count {
        /// The largest allowed.
        max: u32,
    },
    /// A humane duration (`"30s"`) of at least `min_ms`.
    Duration {
        /// The shortest allowed (ms).
        min_ms: u64,
    },
    /// `"exp(1s, 10m)"` or `"fixed(5s)"`.
    Backoff,
    /// `"100/s"`, `"5/m"` or `"1/h"`.
    Rate,
    /// A Redis URL (non-empty text); shown with its password as `***`.
    RedisUrl,
    /// A key namespace (the namespace rule).
    Namespace,
    /// A `host:port` to listen on.
    Addr,
    /// A cron pattern.
    Cron,
    /// An IANA time zone.
    Tz,
    /// `"last"`, `"none"` or `"all"`.
    CatchUp,
    /// `"$"` or `"0"`: where a new consumer group starts.
    StreamStart,
    /// What readiness includes: `"none"`, or `redis` and `listeners`, comma-separated.
    ReadyChecks,
}

const CONCURRENCY: ValueKind = ValueKind::Count {
    max: defaults::MAX_CONCURRENCY,
};
const ATTEMPTS: ValueKind = ValueKind::Count {
    max: defaults::MAX_MAX_ATTEMPTS,
};
const CLAIM: ValueKind = ValueKind::Duration {
    min_ms: defaults::MIN_ACK_TIMEOUT_MS,
};

/// A handler run's hard limit: none unless given.
const TIMEOUT: ValueKind = ValueKind::Duration {
    min_ms: defaults::MIN_TIMEOUT_MS,
};

/// How long dead letters are kept.
const DEAD_TTL: ValueKind = ValueKind::Duration {
    min_ms: defaults::MIN_DEAD_TTL_MS,
};
const DEAD_MAX: ValueKind = ValueKind::Count {
    max: defaults::MAX_DEAD_MAX,
};
/// How long results are kept.
const RESULT_TTL: ValueKind = ValueKind::Duration {
    min_ms: defaults::MIN_RESULT_TTL_MS,
};
const RESULTS_MAX: ValueKind = ValueKind::Count {
    max: defaults::MAX_RESULTS_MAX,
};
const BURST: ValueKind = ValueKind::Count {
    max: crate::MAX_PER_PERIOD as u32,
};

const RUNTIME: &[(&str, ValueKind)] = &[
    ("redis_url", ValueKind::RedisUrl),
    ("namespace", ValueKind::Namespace),
    ("shutdown_grace", ValueKind::Duration { min_ms: 1 }),
    (
        "gauges_every",
        ValueKind::Duration {
            min_ms: defaults::MIN_GAUGES_EVERY_MS,
        },
    ),
    ("prometheus", ValueKind::Addr),
    ("health", ValueKind::Addr),
    ("ready_checks", ValueKind::ReadyChecks),
];
const LISTENER: &[(&str, ValueKind)] = &[
    ("enabled", ValueKind::Bool),
    ("concurrency", CONCURRENCY),
    ("max_attempts", ATTEMPTS),
    ("ack_timeout", CLAIM),
    ("backoff", ValueKind::Backoff),
    ("timeout", TIMEOUT),
    ("rate", ValueKind::Rate),
    ("burst", BURST),
    ("rate_per_key", ValueKind::Rate),
    ("dead_max", DEAD_MAX),
    ("dead_ttl", DEAD_TTL),
    ("result_ttl", RESULT_TTL),
    ("results_max", RESULTS_MAX),
];
const STREAM: &[(&str, ValueKind)] = &[
    ("enabled", ValueKind::Bool),
    ("concurrency", CONCURRENCY),
    ("max_deliveries", ATTEMPTS),
    ("min_idle", CLAIM),
    (
        "batch",
        ValueKind::Count {
            max: defaults::MAX_BATCH,
        },
    ),
    ("backoff", ValueKind::Backoff),
    ("start", ValueKind::StreamStart),
    ("timeout", TIMEOUT),
    ("dead_max", DEAD_MAX),
    ("dead_ttl", DEAD_TTL),
];
const LEADER_TASK: &[(&str, ValueKind)] = &[
    ("enabled", ValueKind::Bool),
    ("every", ValueKind::Duration { min_ms: 1 }),
    (
        "ttl",
        ValueKind::Duration {
            min_ms: defaults::MIN_LEADER_TTL_MS,
        },
    ),
];
const SCHEDULE: &[(&str, ValueKind)] = &[
    ("enabled", ValueKind::Bool),
    ("cron", ValueKind::Cron),
    (
        "every",
        ValueKind::Duration {
            min_ms: defaults::MIN_EVERY_MS,
        },
    ),
    ("tz", ValueKind::Tz),
    ("catch_up", ValueKind::CatchUp),
    (
        "misfire_after",
        ValueKind::Duration {
            min_ms: defaults::MIN_MISFIRE_AFTER_MS,
        },
    ),
    ("concurrency", CONCURRENCY),
    ("max_attempts", ATTEMPTS),
    ("ack_timeout", CLAIM),
    ("backoff", ValueKind::Backoff),
    ("timeout", TIMEOUT),
];

/// The options `kind` takes, with their types.
pub fn options(kind: Kind) -> &'static [(&'static str, ValueKind)] {
    match kind {
        Kind::Runtime => RUNTIME,
        Kind::Listener => LISTENER,
        Kind::Stream => STREAM,
        Kind::LeaderTask => LEADER_TASK,
        Kind::Schedule => SCHEDULE,
    }
}

/// The option `name` of `kind`, with its type.
pub fn option(kind: Kind, name: &str) -> Option<ValueKind> {
    options(kind)
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

/// The option of `kind` that another kind's `name` corresponds to: a stream listener's
/// `max_deliveries` and `min_idle` are a delay listener's `max_attempts` and `ack_timeout`.
pub fn synonym(kind: Kind, name: &str) -> Option<&'static str> {
    match (kind, name) {
        (Kind::Stream, "max_attempts") => Some("max_deliveries"),
        (Kind::Stream, "ack_timeout") => Some("min_idle"),
        (Kind::Listener | Kind::Schedule, "max_deliveries") => Some("max_attempts"),
        (Kind::Listener | Kind::Schedule, "min_idle") => Some("ack_timeout"),
        _ => None,
    }
}
