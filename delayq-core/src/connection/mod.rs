//! The Redis connection layer every system shares: one connection type, [`RedisConn`], for a
//! single server, a Redis Cluster or a Sentinel-managed primary.
//!
//! - `deployment.rs`: which of the three deployments a `DELAYQ_REDIS_URL` names.
//! - `connect.rs`: opening a client (TLS, TCP keepalive) and what is checked on connect.
//! - `backend.rs`: the connections behind a `RedisConn` for each deployment.
//! - `conn.rs`: `RedisConn` itself: running calls, replacing a dead connection, siblings.
//! - `nodes.rs`: on a cluster, the primary of a key and a connection to one node.
//! - `pubsub.rs`: connections for wake-ups (plain, or sharded on a cluster).
//! - `retry.rs`: running an idempotent call once more when its connection was lost.
//! - `replicated.rs`: sends that wait for replicas (`WAIT`) on connections of their own.

mod backend;
mod conn;
mod connect;
mod deployment;
mod nodes;
mod pubsub;
mod replicated;
mod retry;

pub use backend::AnyConn;
pub use conn::RedisConn;
pub use connect::MIN_REDIS_VERSION;
pub use deployment::{Deployment, SentinelSpec};
pub(crate) use replicated::Replicated;
