//! Every option's default and limits, in one place: the attributes fill in the defaults and
//! check the limits at compile time, the runtime checks the same limits for values from
//! `delayq.toml`, the environment and the builder.

// Delay listeners (`#[delay_listener]`), and the delay-queue side of `#[scheduled]`.
/// Handlers running at once in one process.
pub const CONCURRENCY: u32 = 16;
/// The most `concurrency` may be.
pub const MAX_CONCURRENCY: u32 = 10_000;
/// Handler runs in all before a message is dead-lettered.
pub const MAX_ATTEMPTS: u32 = 16;
/// The most `max_attempts` (and a stream listener's `max_deliveries`) may be.
pub const MAX_MAX_ATTEMPTS: u32 = 1_000_000;
/// `ack_timeout` (ms).
pub const ACK_TIMEOUT_MS: u64 = 30_000;
/// The shortest `ack_timeout` (and a stream listener's `min_idle`), in ms. The runtime renews
/// a running handler's claim every third of it, so it must outlast about three Redis round
/// trips plus the scheduler's jitter; below 100 ms a single slow round trip or a busy executor
/// would let the claim lapse and the message be delivered twice while its handler still runs.
pub const MIN_ACK_TIMEOUT_MS: u64 = 100;
/// The shortest `timeout` (ms): a handler run's hard limit, which has no default (a run may
/// take as long as it takes unless one is given).
pub const MIN_TIMEOUT_MS: u64 = 1;
/// Dead letters a topic keeps at most (`dead_max`): past it the oldest are dropped.
pub const DEAD_MAX: u32 = 10_000;
/// The most `dead_max` may be.
pub const MAX_DEAD_MAX: u32 = 100_000_000;
/// How long a dead letter is kept (`dead_ttl`, ms): 30 days.
pub const DEAD_TTL_MS: u64 = 30 * 24 * 3_600_000;
/// The shortest `dead_ttl` (ms).
pub const MIN_DEAD_TTL_MS: u64 = 1_000;
/// How long a handler's result is kept (`result_ttl`, ms): 24 hours.
pub const RESULT_TTL_MS: u64 = 24 * 3_600_000;
/// The shortest `result_ttl` (ms).
pub const MIN_RESULT_TTL_MS: u64 = 1_000;
/// Results a topic keeps at most (`results_max`): past it the oldest are dropped.
pub const RESULTS_MAX: u32 = 100_000;
/// The most `results_max` may be.
pub const MAX_RESULTS_MAX: u32 = 100_000_000;
/// `backoff`: `exp(1s, 10m)`.
pub const BACKOFF: crate::Backoff = crate::Backoff::Exponential {
    base_ms: 1_000,
    max_ms: 600_000,
};

// Stream listeners (`#[stream_listener]`).
/// Deliveries of an entry before it is dead-lettered.
pub const MAX_DELIVERIES: u32 = 16;
/// How long an entry stays with a consumer that holds it before another takes it over (ms).
pub const MIN_IDLE_MS: u64 = 60_000;
/// Entries read at once.
pub const BATCH: u32 = 100;
/// The most `batch` may be.
pub const MAX_BATCH: u32 = 10_000;

// Leader tasks (`#[leader_task]`).
/// The leader lease (ms).
pub const LEADER_TTL_MS: u64 = 15_000;
/// The shortest leader lease (ms): it is renewed every third of it.
pub const MIN_LEADER_TTL_MS: u64 = 300;

// Schedules (`#[scheduled]`, `upsert_schedule`).
/// Ticks of one schedule running at once in one process.
pub const SCHEDULE_CONCURRENCY: u32 = 1;
/// The shortest `every` (ms).
pub const MIN_EVERY_MS: u64 = 10;
/// How late a tick may start before it counts as missed (ms), as Quartz's misfire threshold.
pub const MISFIRE_AFTER_MS: u64 = 60_000;
/// The shortest `misfire_after` (ms).
pub const MIN_MISFIRE_AFTER_MS: u64 = 100;
/// The time zone of a cron pattern unless given.
pub const TZ: &str = "UTC";
/// The catch-up policy unless given.
pub const CATCH_UP: &str = "last";

// The runtime.
/// The shortest interval between gauge refreshes (ms).
pub const MIN_GAUGES_EVERY_MS: u64 = 1_000;
