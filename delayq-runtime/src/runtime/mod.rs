//! The runtime's top layer, above every system: its settings and selection (`builder.rs`),
//! spawning each system's tasks (`spawn/`), the running handle and graceful shutdown
//! (`handle.rs`; `hand_back.rs`: what it hands back), `start()` with signal handling (`start.rs`), the Prometheus gauges
//! (`gauges.rs`), external configuration (`config.rs`), health (`probe.rs`) and the HTTP
//! endpoint for metrics and health (`serve.rs`).

mod builder;
mod config;
mod gauges;
mod hand_back;
mod handle;
mod history;
mod probe;
mod serve;
mod spawn;
mod start;

pub use builder::{Runtime, RuntimeBuilder};
pub use config::{ComponentConfig, EffectiveConfig, Setting};
pub use handle::RuntimeHandle;
pub use probe::{FailingSchedule, Health, ListenerHealth, ListenerState, RedisHealth};
pub use start::start;
