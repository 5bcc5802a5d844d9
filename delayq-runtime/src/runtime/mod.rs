//! The runtime's top layer, above every system: its settings and selection (`builder.rs`),
//! spawning each system's tasks (`spawn.rs`), the running handle and graceful shutdown
//! (`handle.rs`), `start()` with signal handling (`start.rs`), and the Prometheus gauges
//! (`gauges.rs`).

mod builder;
mod gauges;
mod handle;
mod spawn;
mod start;

pub use builder::{Runtime, RuntimeBuilder};
pub use handle::RuntimeHandle;
pub use start::start;
