//! Retrying a call once when its connection was lost: only for calls a second run cannot
//! change (see [`RedisConn::retry_once`]).

use std::future::Future;

use redis::RedisError;

use super::backend::Source;
use super::conn::RedisConn;
use crate::error::{Error, Result};

/// Whether `e` says the connection was lost before a reply came: the socket was closed or
/// reset (a Redis restart, a dropped connection), not a timeout (a slow or stopped server may
/// still run the call) and not a refusal (nothing listens: a retry would be refused too).
pub(crate) fn lost_connection(e: &RedisError) -> bool {
    e.is_connection_dropped() && !e.is_timeout() && !e.is_connection_refusal()
}

impl RedisConn {
    /// Runs `call`; when it fails because the connection was lost before a reply came, runs
    /// it once more on the replacement connection. Only for calls whose second run cannot
    /// change what the first did, whether or not the first ran: reads, and sends whose id
    /// is fixed before the call (a repeat is a duplicate). The lost connection may have
    /// carried the call to Redis before it failed, so a call that is not idempotent is never
    /// given to this.
    pub(crate) async fn retry_once<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (generation, _) = self.current();
        match call().await {
            Err(Error::Redis(e)) if lost_connection(&e) => {
                tracing::debug!(
                    url = %self.shown_url(),
                    error = %e,
                    "the Redis connection was lost; running the call once more"
                );
                self.mended(generation).await;
                call().await
            }
            other => other,
        }
    }

    /// Waits until connection `generation` has been replaced where delayq replaces it
    /// (Sentinel: it asks the sentinels again). A single server's and a cluster's
    /// connections reconnect by themselves on the next call.
    async fn mended(&self, generation: u64) {
        if !matches!(*self.shared.source, Source::Sentinel(_)) {
            return;
        }
        let _one_at_a_time = self.shared.replacing.lock().await;
        if self.current().0 == generation {
            self.replace(generation).await;
        }
    }
}
